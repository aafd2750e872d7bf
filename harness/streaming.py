"""NATS Streaming checks: the reference streaming server, bridged onto a real nats-server, and
real streaming clients run against it.

No streaming server exists in any registry here, so the suite plays it: ``StreamingBridge``
subscribes to the model's subjects on a real nats-server and publishes what
``conformance.streaming_server`` answers. The bridge only moves bytes; the reference parser and
encoder frame them. The checks then judge what the client sent (decoded by the reference) and
what it reports receiving.
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
import venv
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from conformance import protocol as p
from conformance import streaming as pb
from conformance.streaming import StartPosition
from conformance.streaming_server import StreamingServerModel
from harness.results import ResultRow, ResultsWriter
from harness.runner import RunContext
from harness.targets import DEFAULT_STATE_DIR, RunningServer
from harness.wire import READ_LIMITS

SCENARIO_DIR = Path(__file__).resolve().parent / "drivers" / "node-nats-streaming"
SCENARIO_TIMEOUT = 60.0
PYTHON_CLIENT = "asyncio-nats-streaming==0.4.0"
# scenario step -> (StartPosition the client must request, other fields it must set)
START_POSITIONS: dict[str, tuple[StartPosition, dict[str, int]]] = {
    "time-delta": (StartPosition.TIME_DELTA_START, {"start_time_delta": 1_000_000_000}),
    "new-only": (StartPosition.NEW_ONLY, {}),
    "last-received": (StartPosition.LAST_RECEIVED, {}),
    "sequence": (StartPosition.SEQUENCE_START, {"start_sequence": 2}),
    "first": (StartPosition.FIRST, {}),
}


class StreamingBridge:
    """Carries NATS messages between a real nats-server and the reference streaming model."""

    def __init__(self, server: RunningServer, model: StreamingServerModel) -> None:
        self.model = model
        self.lock = threading.Lock()
        self._sock = socket.create_connection((server.host, server.port), timeout=5)
        self._parser = p.Parser(p.Direction.SERVER, limits=READ_LIMITS)
        self._stop = threading.Event()
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
                    with self.lock:
                        out = self.model.handle(
                            event.subject, event.reply, event.payload, time.time_ns()
                        )
                    self._send([p.Pub(o.subject, o.reply, o.payload) for o in out])

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self._sock.close()

    def __enter__(self) -> StreamingBridge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class Check:
    case_id: str
    level: str
    outcome: str
    message: str


def _check(case_id: str, level: str, ok: bool, message: str) -> Check:
    return Check(case_id, level, "pass" if ok else "fail", "" if ok else message)


def judge(model: StreamingServerModel, steps: dict[str, dict], client_id: str) -> list[Check]:
    """Judge what the client sent (decoded by the reference) and what it reported."""
    sent: dict[str, list] = {}
    for name, message in model.received:
        sent.setdefault(name, []).append(message)
    checks = []
    [connect, *_] = sent.get("ConnectRequest", [None])
    checks.append(
        _check(
            "streaming.connect.request",
            "must",
            isinstance(connect, pb.ConnectRequest)
            and connect.client_id == client_id
            and bool(connect.heartbeat_inbox)
            and steps.get("connect", {}).get("ok") is True,
            f"ConnectRequest {connect!r}, client reported {steps.get('connect')!r}",
        )
    )
    pubs = sent.get("PubMsg", [])
    acks = steps.get("publish", {}).get("acks", [])
    guids = [m.guid for m in pubs if isinstance(m, pb.PubMsg)]
    checks.append(
        _check(
            "streaming.publish.pubmsg",
            "must",
            [(m.client_id, m.subject, m.data) for m in pubs if isinstance(m, pb.PubMsg)]
            == [(client_id, "orders", d) for d in (b"m1", b"m2", b"m3")]
            and len(set(guids)) == 3
            and all(guids),
            f"PubMsg sent: {pubs!r}",
        )
    )
    checks.append(
        _check(
            "streaming.publish.puback-guid",
            "must",
            [a.get("guid") for a in acks] == guids and not any(a.get("error") for a in acks),
            f"client saw PubAck guids {acks!r}, its PubMsg guids were {guids!r}",
        )
    )
    requests = [
        r for r in sent.get("SubscriptionRequest", []) if isinstance(r, pb.SubscriptionRequest)
    ]
    for (step, (position, fields)), request in zip(
        START_POSITIONS.items(), requests + [None] * 5, strict=False
    ):
        got_fields = {k: getattr(request, k) for k in fields} if request else None
        checks.append(
            _check(
                f"streaming.start-position.{step}.request",
                "must",
                request is not None
                and request.start_position == position
                and got_fields == fields
                and request.client_id == client_id
                and bool(request.inbox),
                f"expected startPosition {position.name} with {fields}, client sent {request!r}",
            )
        )
        delivered = [seq for inbox, seq in model.delivered if request and inbox == request.inbox]
        reported = [
            m["sequence"] for m in steps.get(f"start-position.{step}", {}).get("messages", [])
        ]
        checks.append(
            _check(
                f"streaming.start-position.{step}.delivery",
                "must",
                reported == delivered,
                f"the reference delivered sequences {delivered}, the client reported {reported}",
            )
        )
    acked = sorted(seq for sub in model.subscriptions.values() for seq in sub.acked)
    all_acks = [a for a in sent.get("Ack", []) if isinstance(a, pb.Ack)]
    checks.append(
        _check(
            "streaming.ack",
            "must",
            sorted(a.sequence for a in all_acks) == sorted(seq for _, seq in model.delivered)
            and all(a.subject == "orders" for a in all_acks),
            f"delivered {model.delivered}, acks {all_acks!r} (still subscribed: {acked})",
        )
    )
    unsubs = [u for u in sent.get("UnsubscribeRequest", []) if isinstance(u, pb.UnsubscribeRequest)]
    checks.append(
        _check(
            "streaming.unsubscribe",
            "must",
            len(unsubs) == len(START_POSITIONS) and all(u.client_id == client_id for u in unsubs),
            f"UnsubscribeRequests {unsubs!r}",
        )
    )
    closes = sent.get("CloseRequest", [])
    checks.append(
        _check(
            "streaming.close",
            "must",
            closes == [pb.CloseRequest(client_id)] and steps.get("close", {}).get("ok") is True,
            f"CloseRequests {closes!r}, client reported {steps.get('close')!r}",
        )
    )
    return checks


def run_scenario(
    command: list[str], server: RunningServer, client_id: str
) -> tuple[StreamingServerModel, dict[str, dict], str]:
    """Run a streaming client against the reference server: its steps by name, and stderr."""
    model = StreamingServerModel()
    with StreamingBridge(server, model):
        done = subprocess.run(
            [*command, server.url, model.cluster_id, client_id],
            capture_output=True,
            text=True,
            timeout=SCENARIO_TIMEOUT,
            check=False,
        )
    steps = {}
    for line in done.stdout.splitlines():
        try:
            step = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(step, dict) and "step" in step:
            steps[step["step"]] = step
    return model, steps, done.stderr


def build_node_scenario(state_dir: Path = DEFAULT_STATE_DIR) -> tuple[list[str], str]:
    """Install node-nats-streaming into the cache once; the command and the library version."""
    out = state_dir / "drivers" / "node-nats-streaming"
    if not (out / "run").exists():
        subprocess.run(
            ["bash", str(SCENARIO_DIR / "build.sh"), str(SCENARIO_DIR), str(out)],
            check=True,
            capture_output=True,
            text=True,
            timeout=300,
        )
    package = json.loads(
        (out / "node_modules" / "node-nats-streaming" / "package.json").read_text()
    )
    return [str(out / "run")], package["version"]


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


def run_streaming_checks(
    server: RunningServer,
    writer: ResultsWriter,
    ctx: RunContext,
    *,
    on_row: Callable[[ResultRow], None] = lambda r: None,
) -> list[ResultRow]:
    """Every streaming check: node-nats-streaming through the scenario, and the PyPI client."""
    rows = []

    def emit(target: str, version: str, check: Check) -> None:
        row = ctx.row(
            target=target,
            target_kind="client",
            target_version=version,
            case_id=check.case_id,
            group="streaming.client",
            level=check.level,
            outcome=check.outcome,
            duration_ms=0.0,
            message=check.message,
        )
        writer.write(row)
        rows.append(row)
        on_row(row)

    try:
        command, version = build_node_scenario()
    except (subprocess.SubprocessError, OSError) as exc:
        emit(
            "client:node-nats-streaming",
            "unknown",
            Check("streaming.build", "must", "error", str(exc)),
        )
    else:
        model, steps, stderr = run_scenario(command, server, "conformance-1")
        if "connect" not in steps:
            emit(
                "client:node-nats-streaming",
                version,
                Check(
                    "streaming.connect.request",
                    "must",
                    "error",
                    f"scenario failed: {stderr[-400:]}",
                ),
            )
        else:
            for check in judge(model, steps, "conformance-1"):
                emit("client:node-nats-streaming", version, check)
    outcome, message = try_python_client()
    emit(
        "client:asyncio-nats-streaming",
        "0.4.0",
        Check("streaming.client.install", "must", outcome, message),
    )
    return rows
