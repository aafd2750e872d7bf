"""NATS Streaming on the clients' side: the bridge that puts the reference streaming server on a
real nats-server, and the PyPI streaming client's probe.

``StreamingBridge`` subscribes to the reference model's subjects on a real nats-server and
publishes what ``conformance.streaming_server`` answers. The bridge only moves bytes; the
reference parser and encoder frame them. harness.clients.streaming_clients runs the streaming
client libraries through it (the streaming.client vectors); harness.clients.stan_client_checks
runs one of them against the real streaming server and the bridged reference.
"""

from __future__ import annotations

import socket
import subprocess
import threading
import time
import venv
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path

from ...conformance import protocol as p
from ...conformance.streaming_server import Outbound, StreamingServerModel
from ...conformance.verdicts import observation
from ..gate import Baseline
from ..results import CaseRef, Found, ResultRow, ResultsWriter, RunContext
from ..runtime.limits import READ_LIMITS
from ..runtime.state import DEFAULT_STATE_DIR
from ..servers.specs import RunningServer
from ..suites import Judged, OnRow, PlannedRow, judged

PYTHON_CLIENT = "asyncio-nats-streaming==0.4.0"


class StreamingBridge:
    """Carries NATS messages between a real nats-server and the reference streaming model."""

    def __init__(self, server: RunningServer, model: StreamingServerModel) -> None:
        self.model = model
        self.lock = threading.Lock()
        self._sock = socket.create_connection((server.host, server.port), timeout=5)
        self._parser = p.Parser(p.Direction.SERVER, limits=READ_LIMITS)
        self._stop = threading.Event()
        self._inject: dict[str, tuple[bytes, bool]] = {}
        self._send_lock = threading.Lock()  # publish() writes from the caller's thread
        first = self._read()
        if not first or not isinstance(first[0], p.Info):
            raise ConnectionError(f"no INFO from {server.url}: {first!r}")
        subs = [
            p.Sub(subject, None, str(i)) for i, subject in enumerate(model.listen_subjects(), 1)
        ]
        self._send(
            [
                p.Connect({"verbose": False, "pedantic": False, "name": "nats-conformance-stan"}),
                *subs,
                p.Ping(),
            ]
        )
        while not any(isinstance(e, p.Pong) for e in self._read()):
            pass
        self._sock.settimeout(0.2)
        self._thread = threading.Thread(target=self._loop, name="stan-bridge", daemon=True)
        self._thread.start()

    def _send(self, ops: list[p.Op]) -> None:
        with self._send_lock:
            self._sock.sendall(b"".join(p.encode(op) for op in ops))  # type: ignore[misc]

    def _read(self) -> list[p.Event]:
        data = self._sock.recv(65536)
        if not data:
            raise ConnectionError("nats-server closed the bridge connection")
        return self._parser.feed(data)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                events = self._read()
            except TimeoutError:
                continue
            except OSError:
                return
            for event in events:
                if isinstance(event, p.Ping):
                    self._send([p.Pong()])
                elif isinstance(event, p.Msg):
                    self._send([p.Pub(o.subject, o.reply, o.payload) for o in self._answer(event)])

    def _answer(self, event: p.Msg) -> list[Outbound]:
        """The model's answer, or the bytes ``answer_with`` set for that request instead of
        (or before) it."""
        with self.lock:
            out = self.model.handle(event.subject, event.reply, event.payload, time.time_ns())
            name = self.model.received[-1][0] if self.model.received else ""
            injected = self._inject.pop(name, None) if event.reply else None
        if injected is None:
            return out
        payload, keep = injected
        kept = [o for o in out if keep or o.subject != event.reply]
        return [Outbound(event.reply, None, payload), *kept]  # type: ignore[arg-type]

    def answer_with(self, request: str, payload: bytes, *, keep: bool = False) -> None:
        """Answer the next ``request`` (a message name) with ``payload``; ``keep``: send the
        model's own answer after it (so a client that drops ``payload`` still gets one)."""
        with self.lock:
            self._inject[request] = (payload, keep)

    def publish(self, subject: str, payload: bytes) -> None:
        """Publish raw bytes (a MsgProto the model did not make, say) on the NATS server."""
        self._send([p.Pub(subject, None, payload)])

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self._sock.close()

    def __enter__(self) -> StreamingBridge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def try_python_client(state_dir: Path = DEFAULT_STATE_DIR) -> tuple[str, str]:
    """Install and import the PyPI streaming client in its own venv: (outcome, what happened)."""
    env_dir = state_dir / "drivers" / "asyncio-nats-streaming"
    python = env_dir / "bin" / "python"
    if not python.exists():
        venv.create(env_dir, with_pip=True)
        install = subprocess.run(
            [str(python), "-m", "pip", "install", "-q", PYTHON_CLIENT],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if install.returncode != 0:
            return "error", f"pip install {PYTHON_CLIENT} failed: {install.stderr.strip()[-400:]}"
    probe = subprocess.run(
        [str(python), "-c", "from stan.aio.client import Client; Client()"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if probe.returncode != 0:
        lines = probe.stderr.strip().splitlines()
        error = next(
            (line for line in reversed(lines) if "Error" in line.split(":")[0]), lines[-1:]
        )
        return "error", f"{PYTHON_CLIENT} cannot be used: {error}"
    return "pass", f"{PYTHON_CLIENT} imports"


PYTHON_CLIENT_SPEC = "client:asyncio-nats-streaming"
PYTHON_CLIENT_ROW = CaseRef("streaming.client.install", "info", None, group="streaming.client")


def python_client_row(writer: ResultsWriter, ctx: RunContext) -> ResultRow:
    """The PyPI streaming client's row: whether it installs and imports at all."""
    outcome, message = try_python_client()
    # No document is broken by a library that cannot be imported: the row reports it (info).
    return ctx.record(
        writer,
        (PYTHON_CLIENT_SPEC, "client", PYTHON_CLIENT.partition("==")[2]),
        PYTHON_CLIENT_ROW,
        Found(outcome, message, 0.0, observed=observation(message)),
    )


@dataclass(frozen=True)
class PythonClientSuite:
    """The PyPI streaming client's one row (with the bundled vectors)."""

    label: str = f"client run {PYTHON_CLIENT_SPEC}"
    role: str = "client"

    def only(self, rows: Collection[PlannedRow]) -> PythonClientSuite:
        return self

    def planned(self) -> list[PlannedRow]:
        row = PYTHON_CLIENT_ROW
        return [PlannedRow(PYTHON_CLIENT_SPEC, row.case_id, "", row.level, row.group)]

    def run(
        self, ctx: RunContext, writer: ResultsWriter, baseline: Baseline, reruns: int, on_row: OnRow
    ) -> Iterator[Judged]:
        yield judged(python_client_row(writer, ctx), False, baseline, on_row)
