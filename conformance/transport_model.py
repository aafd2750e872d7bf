"""The server side of a connection's transport as the documents describe it, sans-I/O: TLS after
the INFO and its handshake timeout, the TLS-first handshake (``handshake_first`` true, ``auto`` or
a delay), "TLS available", and a WebSocket listener's frames and compression (tls.txt,
websocket.txt; INFO's tls_required and tls_verify in client-protocol.txt). It wraps one
``ServerModel`` connection, which speaks the protocol once the transport lets bytes through.
``opening`` reads what a client sends first, as a server's side sees it before any handshake
(the fake server's observation of a client library, and what it takes as a TLS handshake where
"tls available" lets the client choose).

What the documents say, and the choices the model makes where they leave one (cases there are
``info``; the model's choice is one observation among others):

- A server with a ``tls`` map sends INFO in clear with tls_required (and tls_verify with
  ``verify``), then expects the client to upgrade ("If this is set, then the client must perform
  the TLS/1.2 handshake"). A client that sends bytes in clear instead gets -ERR 'Secure Connection
  - TLS Required' and the close: client-protocol.txt lists that error ("The server requires TLS
  and the client does not have TLS enabled") among those that close the connection.
- ``timeout``, "the amount of time that a client is allowed to upgrade its connection to tls"
  (default 2 s): a connection without a TLS handshake by then ends, with nothing sent (there is
  no TLS to send an -ERR over, and a client in clear is not one the server speaks to).
- TLS-first (``handshake_first``): ``true`` sends nothing before the handshake, and a client
  that sends bytes in clear is not "able to connect": the connection ends with nothing sent.
  ``auto`` (50 ms) or a delay: "After the delay has elapsed without receiving the TLS handshake
  from the client, the server reverts to sending the INFO protocol", the original behaviour (the
  client upgrades after it). The INFO after a TLS-first handshake says tls_required.
- "tls available" (``allow_non_tls``): INFO says tls_available (tls.txt names the mode, not the
  field's value; client-protocol.txt lists no such field), and both a client that stays in clear
  and one that upgrades after INFO are served.
- WebSocket: the documents allow binary frames only ("your clients MUST send in Binary") and do
  not say what a server does with a text frame; the model takes its bytes as a binary frame's.
  permessage-deflate is accepted when the client offers it and the listener enables compression
  ("For compression to be used, both server and client have to support it"); the suite's own
  listeners enable it unless a case sets ``compression`` false.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .server import ServerModel
from .transports import WEBSOCKET_TRANSPORTS

# The transports (conformance.transports.TRANSPORTS) whose server has a tls map on the client
# port.
TLS_AFTER_INFO = "tls"
TLS_FIRST = "tls-first"
DEFLATE_OFFERED = "ws-deflate"  # the transport whose client offers permessage-deflate
PERMESSAGE_DEFLATE = "permessage-deflate"
# tls.txt: "TLS handshake timeout in fractional seconds. Default set to 2 seconds."
DEFAULT_TLS_TIMEOUT = 2.0
# tls.txt: "With the value `auto`, the fallback delay used by the server is 50 milliseconds."
AUTO_FALLBACK = 0.05
_DURATION = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s)")


# A TLS record's first bytes (RFC 8446 5.1, RFC 5246 6.2.1): content type handshake (22), then
# the legacy record version's major byte 3, which every TLS version's ClientHello record carries.
_TLS_HANDSHAKE_RECORD = b"\x16\x03"
_CLEAR_WORD = re.compile(rb"[A-Za-z+\-]{1,16}")
# What ``opening`` reads, but bytes in clear (``bytes in clear: <first word>``).
TLS_RECORD, HTTP_REQUEST, NOTHING = "a TLS handshake record", "an HTTP request", "nothing"
OPENINGS = (TLS_RECORD, HTTP_REQUEST, NOTHING)
OPENING_NOTE = "the client's first bytes: "  # how a reading is reported (``opening_note``)


def opening(data: bytes) -> str:
    """What a client's first bytes on a connection are, as the server's side reads them before
    any handshake (a fake server noting what a library started with): a TLS handshake record (a
    ClientHello), an HTTP request (a WebSocket upgrade), bytes in clear (the first word: a NATS
    operation's name), or nothing."""
    if not data:
        return NOTHING
    if data.startswith(_TLS_HANDSHAKE_RECORD):
        return TLS_RECORD
    if data.startswith(b"GET "):
        return HTTP_REQUEST
    word = _CLEAR_WORD.match(data)
    return f"bytes in clear: {word[0].decode() if word else repr(data[:8])}"


def opening_note(data: bytes) -> str:
    """``opening`` as a server's side reports it."""
    return f"{OPENING_NOTE}{opening(data)}"


def fallback_delay(handshake_first: object) -> float | None:
    """Seconds a TLS-first server waits for the handshake before it sends INFO in clear; None
    for ``true`` (it never does). ValueError for a value tls.txt does not describe."""
    if handshake_first is True:
        return None
    if handshake_first == "auto":
        return AUTO_FALLBACK
    found = _DURATION.fullmatch(handshake_first) if isinstance(handshake_first, str) else None
    if found is None:
        raise ValueError(f"handshake_first is true, auto or a duration, not {handshake_first!r}")
    return float(found[1]) / (1000 if found[2] == "ms" else 1)


@dataclass(frozen=True)
class Upgraded:
    """What a connection's WebSocket upgrade accepted (the extensions, by name), and how many
    text frames the server has sent on it."""

    extensions: tuple[str, ...] = ()
    text_frames: int = 0


@dataclass(frozen=True)
class Listener:
    """What the server's listener for a transport is, from the case's configuration."""

    tls: bool  # a tls map on the client port: TLS after INFO, or first
    first: bool  # the TLS-first handshake (handshake_first)
    fallback: float | None  # TLS-first: seconds before INFO in clear (None: never)
    timeout: float
    verify: bool
    available: bool  # allow_non_tls: "tls available"
    websocket: bool
    compression: bool

    @classmethod
    def of(cls, transport: str, config: dict[str, Any]) -> Listener:
        tls_map = dict(config.get("tls") or {})
        first = transport == TLS_FIRST
        handshake_first = tls_map.get("handshake_first", True) if first else None
        return cls(
            tls=transport in (TLS_AFTER_INFO, TLS_FIRST),
            first=first,
            fallback=fallback_delay(handshake_first) if first else None,
            timeout=float(tls_map.get("timeout", DEFAULT_TLS_TIMEOUT)),
            verify=bool(tls_map.get("verify", False)),
            available=bool(config.get("allow_non_tls", False)),
            websocket=transport in WEBSOCKET_TRANSPORTS,
            compression=bool(dict(config.get("websocket") or {}).get("compression", True)),
        )

    def info_fields(self) -> dict[str, object]:
        """What INFO says of the transport."""
        if not self.tls:
            return {}
        if self.available:
            return {"tls_available": True}
        return {"tls_required": True} | ({"tls_verify": True} if self.verify else {})


class TransportModel:
    """One connection's transport in front of its ``ServerModel``: what the server sends on
    connecting, when TLS starts, and what bytes reach the protocol.

    ``opened`` is the connection being accepted (the server's INFO, unless it waits for a
    TLS-first handshake); ``start_tls`` the client's handshake; ``feed`` the client's bytes (in
    a text frame with ``text``); ``elapse`` time passing (the fallback INFO, the handshake
    timeout, then the protocol's own timers); ``upgraded`` what the WebSocket upgrade
    accepted.
    """

    def __init__(self, server: ServerModel, transport: str, config: dict[str, Any]) -> None:
        self.server = server
        self.transport = transport
        self.listener = Listener.of(transport, config)
        self.tls_started = False
        self.info_sent = False

    @property
    def _awaiting_tls(self) -> bool:
        """Whether the server waits for a TLS handshake before it speaks the protocol."""
        listener = self.listener
        return listener.tls and not listener.available and not self.tls_started

    def opened(self) -> None:
        if not self.listener.first:
            self._greet()

    def _greet(self) -> None:
        self.server.greet(self.listener.info_fields())
        self.info_sent = True

    def start_tls(self) -> None:
        """The client's TLS handshake; ValueError where the transport has none to make now."""
        if not self.listener.tls:
            raise ValueError(f"a {self.transport} connection has no TLS handshake to make")
        if self.tls_started:
            raise ValueError("TLS was started already on this connection")
        if self.server.closed:
            return
        self.tls_started = True
        if not self.info_sent:  # TLS first: the INFO comes once the handshake is done
            self._greet()

    def feed(self, data: bytes, *, text: bool = False) -> None:
        """The client's bytes (a text frame's with ``text``: taken as a binary frame's)."""
        if text and not self.listener.websocket:
            raise ValueError(f"a {self.transport} connection has no frames to send text in")
        if not data or self.server.closed:
            return
        if self._awaiting_tls:
            # Before a TLS-first server's INFO, a client in clear cannot connect: nothing sent.
            self.server.close(None if not self.info_sent else "'Secure Connection - TLS Required'")
            return
        self.server.feed(data)

    def elapse(self, seconds: float) -> None:
        """Let ``seconds`` pass: the TLS-first fallback INFO and the handshake timeout at their
        moments, then the protocol's timers for all of it."""
        end = self.server.elapsed + seconds
        listener = self.listener
        fallback = listener.fallback if listener.first and not self.info_sent else None
        if fallback is not None and fallback <= end and not self.server.closed:
            self.server.elapse(max(fallback - self.server.elapsed, 0.0))
            self._greet()  # in clear: the client upgrades after it, as without TLS first
        if self._awaiting_tls and listener.timeout <= end and not self.server.closed:
            self.server.elapse(max(listener.timeout - self.server.elapsed, 0.0))
            self.server.close()
        self.server.elapse(max(end - self.server.elapsed, 0.0))

    def upgraded(self) -> Upgraded | None:
        """What the server's WebSocket upgrade answer accepts (None: no WebSocket); the model
        sends binary frames only ("The server will always send in Binary")."""
        if not self.listener.websocket:
            return None
        offered = self.transport == DEFLATE_OFFERED and self.listener.compression
        return Upgraded((PERMESSAGE_DEFLATE,) if offered else ())
