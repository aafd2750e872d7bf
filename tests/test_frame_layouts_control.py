"""A negative control for the frame layouts, through the harness's own path (driver, fake server,
judge): a test-only client library that parses each WebSocket frame on its own, whole operations
only (as nats-pure.rb read PONG and INFO in one frame before #174), fails the must rows of every
split layout and passes them where the frames hold whole operations (the plain ws row, joined);
the same client buffering across frames passes them all.

The driver is a real process speaking nats-conformance-driver/2 (``driver:COMMAND``), a tiny NATS
client over WebSocket (wsproto) declaring the ``websocket`` capability."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nats_conformance.conformance import vectors
from nats_conformance.harness.clients import client_vectors
from nats_conformance.harness.clients.client_targets import ClientTarget
from tests.stand_in_driver import OUT, SERVE, stand_ins

WS_DRIVER = (
    r"""
import base64, json, socket, sys, threading
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, BytesMessage, CloseConnection, Request

whole_frames = json.load(open(sys.argv[1]))["whole_frames"]
"""
    + OUT
    + r"""

def send(data):
    with lock:
        conn["sock"].sendall(conn["ws"].send(BytesMessage(data=data)))


def operations(buf):
    # Whole operations at the start of buf, and what is left: (name, args, payload) each.
    ops = []
    while b"\r\n" in buf:
        line, rest = buf.split(b"\r\n", 1)
        parts = line.split()
        parts[:1] = [part.upper() for part in parts[:1]]  # operation names in any case
        if parts and parts[0] in (b"MSG", b"HMSG"):
            size = int(parts[-1])
            if len(rest) < size + 2:
                break
            ops.append((parts[0], parts[1:], rest[:size]))
            buf = rest[size + 2:]
        else:
            ops.append((parts[0] if parts else b"", parts[1:], b""))
            buf = rest
    return ops, buf


def handle(ops):
    for name, args, payload in ops:
        if name == b"PING":
            send(b"PONG\r\n")
        elif name == b"PONG":
            if conn.get("flushing"):
                conn.pop("flushing").set()
        elif name in (b"MSG", b"HMSG"):
            header_size = int(args[-2]) if name == b"HMSG" else 0
            block = payload[:header_size]
            fields = [l.decode().split(": ", 1) for l in block.split(b"\r\n")[1:] if b": " in l]
            out({"event": "message", "sub": args[1].decode(), "subject": args[0].decode(),
                 "reply": args[2].decode() if len(args) > (4 if name == b"HMSG" else 3) else None,
                 "headers": fields if header_size else None, "status": None,
                 "description": None,
                 "payload_b64": base64.b64encode(payload[header_size:]).decode()})
        elif name not in (b"INFO", b"+OK", b"-ERR"):
            raise ValueError(name)


def read():
    buf = b""
    sock, ws = conn["sock"], conn["ws"]
    try:
        while data := sock.recv(65536):
            with lock:
                ws.receive_data(data)
                events = list(ws.events())
            for event in events:
                if isinstance(event, CloseConnection):
                    raise EOFError
                if not isinstance(event, BytesMessage):
                    continue
                buf += event.data
                ops, buf = operations(buf)
                handle(ops)
                if buf and whole_frames:  # a frame that ends inside an operation: a parse error
                    raise ValueError(buf[:20])
    except ValueError as exc:
        out({"event": "error", "type": "protocol", "message": f"Parse Error: {exc}"})
    except (EOFError, OSError):
        pass
    sock.close()
    out({"event": "closed"})


def connect(url):
    host, port = url.removeprefix("ws://").rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    ws = WSConnection(ConnectionType.CLIENT)
    sock.sendall(ws.send(Request(host=f"{host}:{port}", target="/")))
    while not any(isinstance(e, AcceptConnection) for e in ws.events()):
        ws.receive_data(sock.recv(65536))
    conn.update(sock=sock, ws=ws, sids=0)
    threading.Thread(target=read, daemon=True).start()
    send(b'CONNECT {"verbose":false,"headers":true}\r\n')


def answer(request):
    cmd = request["cmd"]
    if cmd == "hello":
        return {"protocol": "nats-conformance-driver/2", "library": "whole-frames", "version": "1",
                "language": "Python", "capabilities": ["websocket", "headers"]}
    if cmd == "connect":
        connect(request["url"])
        return {}
    if cmd == "subscribe":
        conn["sids"] += 1
        send(f"SUB {request['subject']} {conn['sids']}\r\n".encode())
        return {"sub": str(conn["sids"])}
    if cmd == "flush":
        conn["flushing"] = done = threading.Event()
        send(b"PING\r\n")
        if not done.wait(request["timeout_ms"] / 1000):
            raise LookupError("timeout")
        return {}
    if cmd == "close":
        if "sock" in conn:
            conn.pop("sock").close()
        return {}
    raise LookupError("unsupported")
"""
    + SERVE
)

# Must cases whose verdict needs every operation read (messages, PINGs; nothing rejected, no
# -ERR, the bytes whole): a client that stops at a split frame cannot pass them.
CASES = [
    case
    for case in vectors.bundled_cases()
    if case.kind == "protocol.parse" and case.level == "must"
    and case.data["input"]["direction"] == "server"
    and case.id.startswith(("protocol.msg.parse.", "protocol.hmsg.parse."))
    and not case.data["expect"].get("incomplete", False)
    and case.data["input"].get("headers", True)  # the driver's CONNECT enables headers
    and not any("error" in e or e.get("op") == "-ERR" for e in case.data["expect"]["events"])
][:4]  # fmt: skip


@pytest.fixture
def ws_client(tmp_path: Path) -> Iterator[object]:
    """``ws_client(whole_frames)``: a client target whose driver is the WebSocket fake."""
    with stand_ins(tmp_path, WS_DRIVER) as make:
        yield lambda whole_frames: make({"whole_frames": whole_frames})


def _outcomes(client: ClientTarget) -> dict[str, tuple[str, str]]:
    rows = client_vectors.run_client_vectors(client, CASES, ("ws",))
    return {row.case.case_id: (row.found.outcome, row.case.level) for row in rows}


def _layout(row: str) -> str:
    """The layout a ``@receive`` row id names ("" for the plain row)."""
    return row.split("~")[1].partition("@")[0] if "~" in row else ""


def test_a_client_reading_whole_operations_per_frame_fails_every_split_layout(
    ws_client: object,
) -> None:
    assert len(CASES) >= 3
    got = _outcomes(ws_client(True))  # type: ignore[operator]
    receive = {row: out for row, out in got.items() if "@receive" in row}
    layouts = {"", "byte-frames", "split-line", "split-payload", "joined", "fragments"}
    assert {_layout(row) for row in receive} == layouts
    for row, (outcome, level) in receive.items():
        assert level == "must", row
        whole = _layout(row) in ("", "joined")  # frames that hold whole operations
        assert outcome == ("pass" if whole else "fail"), (row, outcome)


def test_the_same_client_buffering_across_frames_passes_every_layout(ws_client: object) -> None:
    got = _outcomes(ws_client(False))  # type: ignore[operator]
    receive = {row: out for row, out in got.items() if "@receive" in row}
    assert receive and all(outcome == "pass" for outcome, _ in receive.values()), receive
