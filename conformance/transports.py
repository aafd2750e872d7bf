"""The transports NATS travels over, as the vectors and the rows name them, and the ids of the
rows a case gets over each: plain TCP keeps the case's row id; another transport's row is
``<row id>@<transport>``, the ``@`` form every reader of row ids takes."""

from __future__ import annotations

ROW = "@"  # a row's id is <case id>, or <case id>@<path> for a case that reaches by paths
LAYOUT = "~"  # a row in a WebSocket frame layout: <row id>~<layout>@<transport>

# Every transport, in the order runs take them: plain TCP; TLS after the server's plaintext INFO;
# TLS before anything is read (the server's ``handshake_first``); WebSocket, over TLS, and with
# permessage-deflate offered.
TRANSPORTS = ("tcp", "tls", "tls-first", "ws", "wss", "ws-deflate")
DEFAULT_TRANSPORT = "tcp"
TLS_TRANSPORTS = ("tls", "tls-first", "wss")  # those that verify a certificate
WEBSOCKET_TRANSPORTS = ("ws", "wss", "ws-deflate")


def row_id(base: str, transport: str, layout: str = "") -> str:
    """The id of a row over ``transport``: ``base`` (a case id, or a case's path row id) over
    plain TCP, else ``<base>@<transport>``; with a WebSocket frame ``layout``
    (conformance.frame_layouts), ``<base>~<layout>@<transport>``."""
    if layout:
        if transport not in WEBSOCKET_TRANSPORTS:
            raise ValueError(f"a frame layout needs a WebSocket transport, not {transport!r}")
        return f"{base}{LAYOUT}{layout}{ROW}{transport}"
    return base if transport == DEFAULT_TRANSPORT else f"{base}{ROW}{transport}"


def transport_of(rid: str) -> tuple[str, str]:
    """``row_id``'s inverse, but for a layout: the row id over plain TCP (for a layout's row, the
    row whose bytes it lays out: the same case asked the same way, so what is said of that row,
    a baseline entry, holds for it too) and the transport of ``rid``."""
    head, at, last = rid.rpartition(ROW)
    if at and last in TRANSPORTS and last != DEFAULT_TRANSPORT:
        return head.partition(LAYOUT)[0], last
    return rid, DEFAULT_TRANSPORT
