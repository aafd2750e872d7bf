"""NATS Streaming checks: real streaming clients against the reference streaming server, and the
real streaming server (nats-streaming-server, harness.stan_server) against the documents.

``StreamingBridge`` subscribes to the reference model's subjects on a real nats-server and
publishes what ``conformance.streaming_server`` answers. The bridge only moves bytes; the
reference parser and encoder frame them. harness.streaming_clients runs the streaming client
libraries through it (the streaming.client vectors). The server checks speak the protocol
themselves (``StanSession``) and run the same session against both servers, so each row of the
real server says where the two differ; node-nats-streaming's run of the streaming.client vectors
against each server (``run_stan_server_checks``) is compared the same way.
"""

from __future__ import annotations

import dataclasses
import json
import socket
import subprocess
import threading
import time
import uuid
import venv
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nats_conformance.conformance import protocol as p
from nats_conformance.conformance import streaming as pb
from nats_conformance.conformance import vectors
from nats_conformance.conformance.streaming import DecodeError, StartPosition
from nats_conformance.conformance.streaming_server import (
    Outbound,
    Stored,
    StreamingServerModel,
    replay,
)
from nats_conformance.conformance.vectors import Source
from nats_conformance.conformance.verdicts import observation
from nats_conformance.harness.clients.driver import DriverError
from nats_conformance.harness.clients.registry import ClientError
from nats_conformance.harness.gate import Baseline
from nats_conformance.harness.results import CaseRef, Found, ResultRow, ResultsWriter, RunContext
from nats_conformance.harness.runtime.limits import READ_LIMITS
from nats_conformance.harness.runtime.state import DEFAULT_STATE_DIR
from nats_conformance.harness.servers import stan as stan_server
from nats_conformance.harness.servers.kinds import open_target
from nats_conformance.harness.servers.specs import RunningServer, TargetError
from nats_conformance.harness.servers.stan import NAME, StanServerTarget
from nats_conformance.harness.suites import (
    Judged,
    OnRow,
    PlannedRow,
    SuiteError,
    case_ids,
    judged,
)

if TYPE_CHECKING:  # streaming_clients imports this module's bridge
    from nats_conformance.harness.clients.streaming_clients import StreamingClient

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


# --- the real streaming server as a target: raw-protocol sessions ---------------------------------
#
# The suite is the client: it speaks core NATS and the streaming protobufs itself (the reference
# codec), so each check knows every message exchanged. The same session runs against the real
# server and against the reference (bridged onto a nats-server); each row says where they differ.

SERVER_GROUP = "streaming.server"
REPLY_TIMEOUT = 5.0  # seconds a streaming request waits for its answer
QUIET = 0.4  # seconds of silence taken to mean that nothing more is coming
TIME_GAP = 1.5  # seconds between the first published message and the next ones
ACK_WAIT = 1  # ackWaitInSecs of the redelivery subscription
REDELIVERY_WAIT = 4.0  # seconds the redelivery check waits (ACK_WAIT plus the server's timer)
PROTOCOL_DOC, FIELDS_DOC = "streaming-protocol.txt", "streaming-fields.md"
# Fields naming subjects the server chooses: compared by presence, not value.
_SUBJECT_FIELDS = {"pubPrefix", "subRequests", "unsubRequests", "closeRequests",
                   "subCloseRequests", "pingRequests", "ackInbox"}  # fmt: skip


@dataclass(frozen=True)
class ServerCheck:
    level: str
    source: Source
    description: str


def _doc(section: str, quote: str, document: str = PROTOCOL_DOC) -> Source:
    return Source(document, section, quote)


_START_DOC = {
    StartPosition.TIME_DELTA_START: "TimeDeltaStart: Send messages from duration specified in "
    "the startTimeDelta field.",
    StartPosition.FIRST: "First: Send all available messages",
    StartPosition.SEQUENCE_START: "SequenceStart: Send messages starting from the sequence in "
    "the startSequence field.",
    StartPosition.LAST_RECEIVED: "LastReceived: Send only the last received message",
    StartPosition.NEW_ONLY: "NewOnly: Send only new messages",
}
_STEP = {
    StartPosition.TIME_DELTA_START: "time-delta",
    StartPosition.FIRST: "first",
    StartPosition.SEQUENCE_START: "sequence",
    StartPosition.LAST_RECEIVED: "last-received",
    StartPosition.NEW_ONLY: "new-only",
}
SERVER_CHECKS: dict[str, ServerCheck] = {
    "streaming.server.connect": ServerCheck(
        "must",
        _doc("ConnectResponse", "After a ConnectRequest is published, the NATS Streaming Server "
             "responds with this message on the reply subject of the underlying NATS request."),
        "A ConnectRequest with a new clientID gets a ConnectResponse with no error that names "
        "pubPrefix, subRequests, unsubRequests and closeRequests.",
    ),
    "streaming.server.connect.duplicate-client-id": ServerCheck(
        "must",
        _doc("ConnectRequest", "a connection attempt with an identifier currently in use will "
             "fail"),
        "A second ConnectRequest with a clientID in use (its first connection answers "
        "heartbeats) gets a ConnectResponse with an error.",
    ),
    "streaming.server.connect.ping-fields": ServerCheck(
        "info",
        _doc("ConnectResponse", "| ConnectResponse | pingInterval | 8 | int64 |", FIELDS_DOC),
        "The ping fields and protocol of the ConnectResponse: the documents give them no "
        "meaning, so the answer is compared with the reference's. Read with streaming-fields.md's "
        "numbers; the protocol.proto nats-streaming-server and its clients compile (stan.go pb) "
        "numbers them otherwise (ConnectResponse pingMaxOut 9, protocol 10, no pingTimeout).",
    ),
    "streaming.server.publish.puback": ServerCheck(
        "must",
        _doc("PubAck", "The GUID is the same GUID used in the PubMsg being acknowledged. If an "
             "error string is present, the message was not persisted"),
        "Each PubMsg of a connected client gets a PubAck with its guid and no error.",
    ),
    "streaming.server.publish.unknown-client": ServerCheck(
        "info",
        _doc("PubMsg", "clientID: Client ID originally provided in the ConnectRequest"),
        "A PubMsg whose clientID never connected: the documents do not say what happens, so "
        "the answer is compared with the reference's.",
    ),
    **{
        f"streaming.server.start-position.{_STEP[position]}": ServerCheck(
            "must",
            _doc("StartPosition enumeration", quote),
            f"A SubscriptionRequest with startPosition {position.proto_name} gets a "
            "SubscriptionResponse with an ackInbox and no error, then the stored messages the "
            "reference replays for it (conformance.streaming_server.replay)"
            + (", then a message published afterwards" if position == StartPosition.NEW_ONLY
               else "") + ".",
        )
        for position, quote in _START_DOC.items()
    },
    "streaming.server.msgproto.fields": ServerCheck(
        "must",
        _doc("MsgProto", "sequence: Globally ordered sequence number for the subject’s channel"),
        "Delivered MsgProtos carry the channel as subject, the published data, a timestamp and "
        "sequences that grow in publish order.",
    ),
    "streaming.server.ack": ServerCheck(
        "must",
        _doc("Ack", "An Ack message is an acknowledgement from the client that a MsgProto "
             "message has been considered received. It is published to the ackInbox field of "
             "the SubscriptionResponse."),
        "Messages acknowledged with an Ack on the ackInbox are not delivered again after "
        "ackWaitInSecs.",
    ),
    "streaming.server.ack.redelivery": ServerCheck(
        "must",
        _doc("MsgProto", "A MsgProto message that is not acknowledged with an Ack message within "
             "the duration specified by the ackWaitInSecs field of the subscription request "
             "will be redelivered."),
        f"A message left unacknowledged with ackWaitInSecs {ACK_WAIT} is delivered again, "
        "flagged redelivered.",
    ),
    "streaming.server.subscribe.no-wildcards": ServerCheck(
        "should",
        _doc("NATS streaming protocol conventions", "Wildcards: NATS streaming does *not- "
             "support wildcards in subject subscriptions"),
        "A SubscriptionRequest for a subject with a wildcard is refused (an error in the "
        "SubscriptionResponse).",
    ),
    "streaming.server.subscribe.zero-limits": ServerCheck(
        "info",
        _doc("SubscriptionRequest", "maxInFlight: Maximum inflight messages without an "
             "acknowledgement allowed"),
        "A SubscriptionRequest that leaves maxInFlight and ackWaitInSecs at 0: the documents "
        "give no lower bound, so the answer is compared with the reference's.",
    ),
    "streaming.server.unsubscribe": ServerCheck(
        "must",
        _doc("UnsubscribeRequest", "The UnsubscribeRequest unsubcribes the connection from the "
             "specified subject. The inbox specified is the inbox returned from the NATS "
             "Streaming Server in the SubscriptionResponse."),
        "An UnsubscribeRequest naming the ackInbox gets a SubscriptionResponse with no error, "
        "and messages published afterwards are not delivered to that subscription.",
    ),
    "streaming.server.ping": ServerCheck(
        "should",
        _doc("Subjects", "The ConnectResponse names the subjects for everything else (pubPrefix "
             '+ "." + subject for PubMsg, subRequests, unsubRequests, subCloseRequests, '
             "closeRequests, pingRequests).", FIELDS_DOC),
        "A Ping with the connection's connID on pingRequests gets a PingResponse with no error.",
    ),
    "streaming.server.ping.unknown-conn": ServerCheck(
        "info",
        _doc("Ping", "| Ping | connID | 1 | bytes |", FIELDS_DOC),
        "A Ping with a connID no client connected with: the documents do not say, so the "
        "answer is compared with the reference's.",
    ),
    "streaming.server.close": ServerCheck(
        "must",
        _doc("CloseResponse", "The CloseResponse is sent by the NATS Streaming Server on the "
             "reply subject of the CloseRequest NATS message."),
        "A CloseRequest gets a CloseResponse with no error.",
    ),
    "streaming.server.close.client-id-free": ServerCheck(
        "should",
        _doc("CloseRequest", "notifies the NATS Streaming Server that the client connection is "
             "closing, allowing the server to free up resources."),
        "After the CloseRequest, a ConnectRequest with the same clientID succeeds (the "
        "identifier is no longer in use).",
    ),
}  # fmt: skip


@dataclass(frozen=True)
class Observation:
    """What one check saw: the server's answer, and why the documents' expectation does not
    hold (None when it holds; info checks are judged against the reference instead)."""

    answer: str
    problem: str | None = None
    error: str | None = None  # the check could not run
    shape: str | None = None  # the answer with error texts masked (what info checks compare)
    ms: float = 0.0

    @property
    def compared(self) -> str:
        return self.shape if self.shape is not None else self.answer


class _NotRun(Exception):
    """A step the later checks depend on failed: they cannot run."""


def _describe(message: pb.Message | DecodeError | None, *, keep: tuple[str, ...] = ()) -> str:
    """A streaming answer as text: subjects the server picks shown as <subject>."""
    if message is None:
        return f"no answer within {REPLY_TIMEOUT:g} s"
    if isinstance(message, DecodeError):
        return f"undecodable ({message.reason}: {message.detail})"
    fields = {
        k: "<subject>" if k in _SUBJECT_FIELDS else v
        for k, v in pb.to_json(message).items()
        if not keep or k in keep
    }
    return f"{message.NAME} {json.dumps(fields, sort_keys=True)}"


def _masked(message: pb.Message | DecodeError | None, **kw: tuple[str, ...]) -> str:
    """``_describe`` with the error text replaced by whether there is one."""
    if isinstance(message, pb.Message) and getattr(message, "error", ""):
        message = dataclasses.replace(message, error="<error>")  # type: ignore[call-arg]
    return _describe(message, **kw)


class StanSession:
    """One core NATS connection speaking the streaming protocol through the reference codec.

    Every streaming message sent or received is decoded into ``transcript``; heartbeats to the
    session's heartbeat inbox are answered at once, as a client must.
    """

    def __init__(self, host: str, port: int) -> None:
        self._sock = socket.create_connection((host, port), timeout=REPLY_TIMEOUT)
        self._parser = p.Parser(p.Direction.SERVER, limits=READ_LIMITS)
        self._prefix = f"_INBOX.{uuid.uuid4().hex}"
        self._count = 0
        self._kinds: dict[str, str] = {}  # inbox -> the message name arriving there
        self._pongs = 0
        self._started = time.monotonic()
        self.received: dict[str, list[pb.Message | DecodeError]] = {}
        self.transcript: list[str] = []
        self.heartbeat = self.inbox("heartbeat")
        connect = p.Connect({"verbose": False, "pedantic": False, "name": "nats-conformance"})
        self._write([connect, p.Sub(f"{self._prefix}.>", None, "1"), p.Ping()])
        self.wait(lambda: self._pongs > 0, REPLY_TIMEOUT)
        if not self._pongs:
            raise ConnectionError(f"no PONG from {host}:{port} within {REPLY_TIMEOUT:g} s")

    def inbox(self, name: str) -> str:
        self._count += 1
        return f"{self._prefix}.{name}.{self._count}"

    def _note(self, line: str) -> None:
        self.transcript.append(f"{time.monotonic() - self._started:7.3f}s {line}")

    def _write(self, ops: list[p.Op]) -> None:
        self._sock.sendall(b"".join(p.encode(op) for op in ops))  # type: ignore[misc]

    def wait(self, done: Callable[[], bool], seconds: float) -> None:
        """Read and dispatch until ``done()`` or ``seconds`` pass."""
        deadline = time.monotonic() + seconds
        while not done() and (left := deadline - time.monotonic()) > 0:
            self._sock.settimeout(left)
            try:
                data = self._sock.recv(65536)
            except TimeoutError:
                return
            if not data:
                raise ConnectionError("the server closed the NATS connection")
            for event in self._parser.feed(data):
                self._dispatch(event)

    def _dispatch(self, event: p.Event) -> None:
        if isinstance(event, p.Ping):
            self._write([p.Pong()])
        elif isinstance(event, p.Pong):
            self._pongs += 1
        elif isinstance(event, p.Msg) and event.subject == self.heartbeat:
            self._note(f"<- heartbeat on {event.subject}, answered")
            if event.reply:
                self._write([p.Pub(event.reply, None, b"")])
        elif isinstance(event, p.Msg):
            kind = self._kinds.get(event.subject)
            message = pb.decode(kind, event.payload) if kind else None
            self._note(f"<- {event.subject} {kind or 'unexpected'} {_describe(message)}")
            if message is not None:
                self.received.setdefault(event.subject, []).append(message)
        elif isinstance(event, p.Err | p.ProtocolError):
            self._note(f"<- {event!r}")

    def expect(self, subject: str, kind: str) -> str:
        """Decode what arrives on ``subject`` as ``kind``."""
        self._kinds[subject] = kind
        return subject

    def send(self, subject: str, message: pb.Message, reply: str | None = None) -> None:
        via = f" (reply {reply})" if reply else ""
        self._note(f"-> {subject}{via} {message.NAME} {json.dumps(pb.to_json(message))}")
        self._write([p.Pub(subject, reply, pb.encode(message))])

    def request(
        self, subject: str, message: pb.Message, answer: str
    ) -> pb.Message | DecodeError | None:
        """Send ``message`` with a fresh reply inbox; its first answer (None: none came)."""
        reply = self.expect(self.inbox(answer), answer)
        self.send(subject, message, reply)
        self.wait(lambda: bool(self.received.get(reply)), REPLY_TIMEOUT)
        return next(iter(self.received.get(reply, [])), None)

    def collect(self, inbox: str, count: int, seconds: float) -> list[pb.Message | DecodeError]:
        """What arrived on ``inbox``: waits for ``count`` messages (at most ``seconds``), then
        for QUIET more, so extras show."""
        self.wait(lambda: len(self.received.get(inbox, [])) >= count, seconds)
        self.wait(lambda: False, QUIET)
        return list(self.received.get(inbox, []))

    def close(self) -> None:
        self._sock.close()


def _deliveries(messages: list[pb.Message | DecodeError]) -> str:
    got = [
        (m.sequence, m.data.decode("utf-8", "replace"), m.redelivered)
        if isinstance(m, pb.MsgProto)
        else str(m)
        for m in messages
    ]
    return f"delivered (sequence, data, redelivered) {got}"


class _Session:
    """The raw-protocol scenario against one streaming server; one Observation per check."""

    def __init__(self, s: StanSession, cluster_id: str) -> None:
        self.s = s
        self.cluster_id = cluster_id
        self.client = f"conformance-{uuid.uuid4().hex[:8]}"
        self.channel = f"conformance-{uuid.uuid4().hex[:8]}"
        self.conn_id = uuid.uuid4().hex.encode()
        self.obs: dict[str, Observation] = {}
        self.response = pb.ConnectResponse()
        self.stored: list[Stored] = []  # what the channel holds, as this client saw it stored
        self.sequences: dict[bytes, int] = {}  # data -> the sequence the server gave it

    def note(self, case_id: str, answer: str, problem: str | None, started: float,
             shape: str | None = None) -> None:  # fmt: skip
        ms = (time.monotonic() - started) * 1000
        self.obs[case_id] = Observation(answer, problem, shape=shape, ms=ms)

    def connect_request(self, heartbeat: str, conn_id: bytes) -> pb.ConnectRequest:
        return pb.ConnectRequest(
            self.client, heartbeat, protocol=1, conn_id=conn_id,
            ping_interval=5, ping_timeout=3, ping_max_out=3,
        )  # fmt: skip

    def run(self) -> dict[str, Observation]:
        steps = (self.connect, self.duplicate, self.publish, self.start_positions,
                 self.ack, self.unsubscribe, self.subscribe_refusals, self.ping,
                 self.unknown_client, self.close)  # fmt: skip
        try:
            for step in steps:
                step()
        except (_NotRun, OSError) as exc:
            reason = f"not run: {exc or type(exc).__name__}"
            for case_id in SERVER_CHECKS:
                self.obs.setdefault(case_id, Observation("", error=reason))
        return self.obs

    def connect(self) -> None:
        started = time.monotonic()
        subject = pb.discover_subject(self.cluster_id)
        resp = self.s.request(subject, self.connect_request(self.s.heartbeat, self.conn_id),
                              "ConnectResponse")  # fmt: skip
        named = ("pubPrefix", "subRequests", "unsubRequests", "closeRequests")
        ok = isinstance(resp, pb.ConnectResponse) and not resp.error
        missing = [f for f in named if ok and not pb.to_json(resp).get(f)]
        problem = None
        if not ok or missing:
            problem = f"expected a ConnectResponse with no error naming {', '.join(named)}"
        self.note("streaming.server.connect", _describe(resp, keep=("error", *named)), problem,
                  started)  # fmt: skip
        if problem:
            raise _NotRun(f"the ConnectResponse was {_describe(resp)}")
        assert isinstance(resp, pb.ConnectResponse)
        self.response = resp
        fields = ("protocol", "pingRequests", "pingInterval", "pingTimeout", "pingMaxOut")
        answer = _describe(resp, keep=fields)
        self.note("streaming.server.connect.ping-fields", answer, None, started)

    def duplicate(self) -> None:
        started = time.monotonic()
        other = self.s.inbox("heartbeat-duplicate")
        request = self.connect_request(other, uuid.uuid4().hex.encode())
        resp = self.s.request(pb.discover_subject(self.cluster_id), request, "ConnectResponse")
        refused = isinstance(resp, pb.ConnectResponse) and bool(resp.error)
        self.note(
            "streaming.server.connect.duplicate-client-id",
            _describe(resp, keep=("error",)),
            None if refused else "expected a ConnectResponse with an error",
            started,
            shape=_masked(resp, keep=("error",)),
        )
        if not refused:
            raise _NotRun("a second connection took over the clientID")

    def pub(
        self, data: bytes, client: str | None = None
    ) -> tuple[str, pb.Message | DecodeError | None]:
        guid = uuid.uuid4().hex
        msg = pb.PubMsg(client or self.client, guid, self.channel, data=data)
        subject = pb.publish_subject(self.response.pub_prefix, self.channel)
        ack = self.s.request(subject, msg, "PubAck")
        if client is None and isinstance(ack, pb.PubAck) and ack.guid == guid and not ack.error:
            # Stored at the latest when acknowledged: the clock the reference replays against.
            self.stored.append(Stored(0, self.channel, "", data, time.time_ns()))
        return guid, ack

    def publish(self) -> None:
        started = time.monotonic()
        sent = [self.pub(b"m1")]
        time.sleep(TIME_GAP)  # so a time delta can tell m1 from m2 and m3
        sent += [self.pub(b"m2"), self.pub(b"m3")]
        bad = [
            f"{guid}: {_describe(ack)}"
            for guid, ack in sent
            if not (isinstance(ack, pb.PubAck) and ack.guid == guid and not ack.error)
        ]
        answers = sorted({_describe(ack, keep=("error",)) for _, ack in sent})
        problem = f"expected a PubAck with each PubMsg's guid and no error; {bad}" if bad else None
        self.note("streaming.server.publish.puback", f"3 PubMsg: {answers}", problem, started)
        if len(self.stored) != 3:
            raise _NotRun("the channel does not hold the three messages")

    def subscribe(
        self, position: StartPosition, *, subject: str | None = None, limits: bool = True,
        **fields: int,
    ) -> tuple[str, pb.Message | DecodeError | None, pb.SubscriptionRequest]:  # fmt: skip
        inbox = self.s.expect(self.s.inbox("deliveries"), "MsgProto")
        request = pb.SubscriptionRequest(
            self.client, subject or self.channel, inbox=inbox,
            max_in_flight=100 if limits else 0, ack_wait_in_secs=30 if limits else 0,
            start_position=position, **fields,
        )  # fmt: skip
        resp = self.s.request(self.response.sub_requests, request, "SubscriptionResponse")
        return inbox, resp, request

    def unsub(self, resp: pb.Message | DecodeError | None) -> pb.Message | DecodeError | None:
        if not (isinstance(resp, pb.SubscriptionResponse) and resp.ack_inbox):
            return None
        request = pb.UnsubscribeRequest(self.client, self.channel, resp.ack_inbox)
        return self.s.request(self.response.unsub_requests, request, "SubscriptionResponse")

    def acks(self, resp: pb.Message | DecodeError | None, messages: list) -> None:
        if isinstance(resp, pb.SubscriptionResponse) and resp.ack_inbox:
            for m in messages:
                if isinstance(m, pb.MsgProto):
                    self.s.send(resp.ack_inbox, pb.Ack(m.subject, m.sequence))

    def start_positions(self) -> None:
        # time-delta first, while its window holds m2 and m3 but not m1; first next, as it
        # shows the sequences the server gave (startSequence asks for m2's).
        for position in (StartPosition.TIME_DELTA_START, StartPosition.FIRST,
                         StartPosition.SEQUENCE_START, StartPosition.LAST_RECEIVED,
                         StartPosition.NEW_ONLY):  # fmt: skip
            started = time.monotonic()
            fields = {
                StartPosition.TIME_DELTA_START: {"start_time_delta": 1_000_000_000},
                StartPosition.SEQUENCE_START: {"start_sequence": self.sequences.get(b"m2", 2)},
            }.get(position, {})
            now = time.time_ns()
            inbox, resp, request = self.subscribe(position, **fields)
            channel = [dataclasses.replace(m, sequence=self.sequences.get(m.data, i))
                       for i, m in enumerate(self.stored, 1)]  # fmt: skip
            expected = [m.data for m in replay(channel, request, now)]
            got = self.s.collect(inbox, len(expected), REPLY_TIMEOUT)
            if position == StartPosition.FIRST:
                self.msgproto_fields(got, started)
            if position == StartPosition.NEW_ONLY:
                self.pub(b"m4")
                expected.append(b"m4")
                got = self.s.collect(inbox, len(expected), REPLY_TIMEOUT)
            self.acks(resp, got)
            self.unsub(resp)
            data = [m.data for m in got if isinstance(m, pb.MsgProto)]
            accepted = isinstance(resp, pb.SubscriptionResponse) and not resp.error
            problem = None
            if not (accepted and resp.ack_inbox) or data != expected or len(got) != len(data):
                want = [d.decode() for d in expected]
                problem = f"expected a SubscriptionResponse with an ackInbox, then data {want}"
            answer = f"{_describe(resp)}; {_deliveries(got)}"
            self.note(f"streaming.server.start-position.{_STEP[position]}", answer, problem,
                      started)  # fmt: skip

    def msgproto_fields(self, got: list, started: float) -> None:
        protos = [m for m in got if isinstance(m, pb.MsgProto)]
        self.sequences = {m.data: m.sequence for m in protos}
        sequences = [m.sequence for m in protos]
        ok = (
            len(protos) == len(got) == len(self.stored)
            and [m.data for m in protos] == [m.data for m in self.stored]
            and all(m.subject == self.channel and m.timestamp > 0 for m in protos)
            and sequences == sorted(set(sequences))
        )
        shown = [(m.sequence, m.subject == self.channel, m.timestamp > 0) for m in protos]
        self.note(
            "streaming.server.msgproto.fields",
            f"MsgProto (sequence, subject is the channel, timestamp set) {shown}",
            None
            if ok
            else f"expected the channel's {len(self.stored)} messages in publish order "
            f"with growing sequences, the channel as subject and a timestamp; got {got}",
            started,
        )

    def ack(self) -> None:
        started = time.monotonic()
        acked, acked_resp, _ = self.subscribe(StartPosition.FIRST)
        first = self.s.collect(acked, len(self.stored), REPLY_TIMEOUT)
        self.acks(acked_resp, first)
        left = self.s.expect(self.s.inbox("deliveries"), "MsgProto")
        request = pb.SubscriptionRequest(
            self.client, self.channel, inbox=left, max_in_flight=100,
            ack_wait_in_secs=ACK_WAIT, start_position=StartPosition.FIRST,
        )  # fmt: skip
        left_resp = self.s.request(self.response.sub_requests, request, "SubscriptionResponse")

        def again() -> bool:
            return any(
                isinstance(m, pb.MsgProto) and m.redelivered for m in self.s.received.get(left, [])
            )

        self.s.wait(again, REDELIVERY_WAIT)
        self.s.wait(lambda: False, max(0.0, ACK_WAIT + 1.5 - (time.monotonic() - started)))
        after = list(self.s.received.get(acked, []))
        unacked = list(self.s.received.get(left, []))
        self.acks(left_resp, unacked)
        self.unsub(acked_resp)
        self.unsub(left_resp)
        once = len(after) == len(self.stored) and not any(
            isinstance(m, pb.MsgProto) and m.redelivered for m in after
        )
        self.note(
            "streaming.server.ack", _deliveries(after),
            None if once else "expected each acknowledged message once, none redelivered",
            started,
        )  # fmt: skip
        self.note(
            "streaming.server.ack.redelivery",
            f"{_describe(left_resp)}; {_deliveries(unacked)}",
            None
            if again()
            else f"expected a message flagged redelivered within "
            f"{REDELIVERY_WAIT:g} s of subscribing with ackWaitInSecs {ACK_WAIT}",
            started,
        )

    def unsubscribe(self) -> None:
        started = time.monotonic()
        inbox, resp, _ = self.subscribe(StartPosition.NEW_ONLY)
        answer = self.unsub(resp)
        self.pub(b"m5")
        got = self.s.collect(inbox, 1, QUIET)
        ok = isinstance(answer, pb.SubscriptionResponse) and not answer.error and not got
        self.note(
            "streaming.server.unsubscribe",
            f"{_describe(answer)}; then {_deliveries(got)}",
            None if ok else "expected a SubscriptionResponse with no error, then no delivery",
            started,
        )

    def subscribe_refusals(self) -> None:
        started = time.monotonic()
        _, resp, _ = self.subscribe(StartPosition.NEW_ONLY, subject=f"{self.channel}.>")
        self.unsub(resp)
        refused = isinstance(resp, pb.SubscriptionResponse) and bool(resp.error)
        self.note(
            "streaming.server.subscribe.no-wildcards", _describe(resp),
            None if refused else "expected a SubscriptionResponse with an error",
            started, shape=_masked(resp),
        )  # fmt: skip
        started = time.monotonic()
        _, resp, _ = self.subscribe(StartPosition.NEW_ONLY, limits=False)
        self.unsub(resp)
        self.note("streaming.server.subscribe.zero-limits", _describe(resp), None, started,
                  shape=_masked(resp))  # fmt: skip

    def ping(self) -> None:
        started = time.monotonic()
        subject = self.response.ping_requests
        if not subject:
            self.note("streaming.server.ping", "the ConnectResponse named no pingRequests",
                      "expected pingRequests in the ConnectResponse", started)  # fmt: skip
            self.note("streaming.server.ping.unknown-conn", "no pingRequests", None, started)
            return
        resp = self.s.request(subject, pb.Ping(self.conn_id), "PingResponse")
        ok = isinstance(resp, pb.PingResponse) and not resp.error
        self.note("streaming.server.ping", _describe(resp),
                  None if ok else "expected a PingResponse with no error", started)  # fmt: skip
        started = time.monotonic()
        resp = self.s.request(subject, pb.Ping(b"no-such-connection"), "PingResponse")
        self.note("streaming.server.ping.unknown-conn", _describe(resp), None, started,
                  shape=_masked(resp))  # fmt: skip

    def unknown_client(self) -> None:
        started = time.monotonic()
        _, ack = self.pub(b"stray", client=f"never-connected-{uuid.uuid4().hex[:8]}")
        self.note("streaming.server.publish.unknown-client", _describe(ack, keep=("error",)),
                  None, started, shape=_masked(ack, keep=("error",)))  # fmt: skip

    def close(self) -> None:
        started = time.monotonic()
        resp = self.s.request(self.response.close_requests, pb.CloseRequest(self.client),
                              "CloseResponse")  # fmt: skip
        ok = isinstance(resp, pb.CloseResponse) and not resp.error
        self.note("streaming.server.close", _describe(resp),
                  None if ok else "expected a CloseResponse with no error", started)  # fmt: skip
        started = time.monotonic()
        subject = pb.discover_subject(self.cluster_id)
        heartbeat = self.s.inbox("heartbeat-again")
        again = self.s.request(subject, self.connect_request(heartbeat, b"again"),
                               "ConnectResponse")  # fmt: skip
        free = isinstance(again, pb.ConnectResponse) and not again.error
        self.note(
            "streaming.server.close.client-id-free",
            _describe(again, keep=("error",)),
            None if free else "expected a ConnectResponse with no error",
            started,
        )
        if free:
            assert isinstance(again, pb.ConnectResponse)
            self.s.request(again.close_requests, pb.CloseRequest(self.client), "CloseResponse")


def run_server_session(
    host: str, port: int, cluster_id: str
) -> tuple[dict[str, Observation], list[str]]:
    """The raw-protocol scenario against the streaming server behind a NATS server at
    ``host:port``: an Observation per SERVER_CHECKS case, and the decoded transcript."""
    try:
        session = StanSession(host, port)
    except OSError as exc:
        reason = f"not run: cannot open a NATS connection: {exc}"
        return {case: Observation("", error=reason) for case in SERVER_CHECKS}, []
    try:
        return _Session(session, cluster_id).run(), session.transcript
    finally:
        session.close()


def reference_session(server: RunningServer) -> tuple[dict[str, Observation], list[str]]:
    """The same scenario against the reference streaming server, bridged onto ``server``."""
    model = StreamingServerModel()
    with StreamingBridge(server, model):
        return run_server_session(server.host, server.port, model.cluster_id)


def _verdict(
    check: ServerCheck, real: Observation, ref: Observation | None, name: str
) -> tuple[str, str]:
    """(outcome, message) of a real-server row; the message says where the reference differs."""
    if real.error:
        return "error", real.error
    parts = []
    if check.level == "info":  # the documents do not decide: the reference's answer does
        ok = ref is not None and ref.error is None and real.compared == ref.compared
        problem = None if ok else "info"
    elif problem := real.problem:
        parts.append(f"{problem}; {name} answered: {real.answer}")
    if ref is not None and (ref.error or ref.answer != real.answer):
        ref_said = ref.error or ref.answer
        own = f" (failing this check itself: {ref.problem})" if ref.problem else ""
        parts.append(
            f"differs from the reference streaming server: {name} answered {real.answer}; "
            f"the reference answered {ref_said}{own}"
        )
    return ("fail" if problem else "pass"), "; ".join(parts)


def client_case_id(library: str, case: vectors.Case) -> str:
    """The row of a streaming.client case a library takes against a streaming server target."""
    return f"streaming.server.{library}.{case.id.removeprefix('streaming.client.')}"


def _client_observations(
    client: StreamingClient, cases: Sequence[vectors.Case], session: Callable[[], Any]
) -> dict[str, Observation]:
    """Each streaming.client case's steps through ``client`` against a fresh streaming server
    (``session()``: a context giving its (url, cluster id)), judged as the server's answer."""
    from nats_conformance.harness.clients import (
        streaming_clients,  # it imports this module's bridge
    )

    observed = {}
    for case in cases:
        started = time.monotonic()
        case_id = client_case_id(client.library.name, case)
        try:
            with session() as (url, cluster_id):
                answer, problem = streaming_clients.server_observation(
                    client, url, cluster_id, case
                )
        except (DriverError, ClientError, OSError) as exc:
            observed[case_id] = Observation("", error=f"not run: {type(exc).__name__}: {exc}")
            continue
        ms = (time.monotonic() - started) * 1000
        observed[case_id] = Observation(answer, problem, ms=ms)
    return observed


def run_stan_server_checks(
    target: StanServerTarget,
    reference: RunningServer,
    writer: ResultsWriter,
    ctx: RunContext,
    *,
    client: StreamingClient | None = None,
    cases: Sequence[vectors.Case] = (),
    on_row: Callable[[ResultRow], None] = lambda r: None,
) -> list[ResultRow]:
    """The raw-protocol checks and (with ``client``) the streaming.client ``cases`` taken by a
    streaming client library against a launched real streaming server, each compared with the
    reference streaming server bridged onto ``reference`` (a nats-server). A case gets a fresh
    server of each kind, as the vectors assume."""
    cluster_id = "nats-conformance"

    @contextmanager
    def real_server() -> Iterator[tuple[str, str]]:
        with target.launch(cluster_id) as real:
            yield real.url, cluster_id

    @contextmanager
    def reference_server() -> Iterator[tuple[str, str]]:
        with StreamingBridge(reference, StreamingServerModel(cluster_id=cluster_id)):
            yield reference.url, cluster_id

    with target.launch(cluster_id) as real:
        observed, transcript = run_server_session(real.host, real.port, cluster_id)
    expected, _ = reference_session(reference)
    checks = dict(SERVER_CHECKS)
    if client is not None:
        observed |= _client_observations(client, cases, real_server)
        expected |= _client_observations(client, cases, reference_server)
        checks |= {
            client_case_id(client.library.name, case): ServerCheck(
                case.level, case.source, case.data["description"]
            )
            for case in cases
        }
    name = f"{NAME} {target.version()}"
    rows = []
    for case_id in (c for c in checks if c in observed):  # in the order planned
        real_obs, check = observed[case_id], checks[case_id]
        outcome, message = _verdict(check, real_obs, expected.get(case_id), name)
        raw = case_id in SERVER_CHECKS
        row = ctx.record(
            writer,
            (target.name, target.kind, target.version()),
            CaseRef(case_id, check.level, check.source, check.description, SERVER_GROUP),
            Found(
                outcome,
                message,
                real_obs.ms,
                "\n".join(transcript) if raw else "",
                observed=observation(real_obs.error or real_obs.answer),
            ),
        )
        rows.append(row)
        on_row(row)
    return rows


@dataclass(frozen=True)
class StanServerSuite:
    """The streaming server checks against one real streaming server (built on first use),
    compared with the reference bridged onto a nats-server of target ``reference``;
    ``client`` (the library that takes them, when its build tools are here) taking the
    streaming.client ``cases`` too."""

    spec: str
    reference: str
    client: StreamingClient | None
    cases: list[vectors.Case]

    role = "server"

    @property
    def label(self) -> str:
        return f"streaming server {self.spec}"

    def only(self, rows: Collection[PlannedRow]) -> StanServerSuite:
        # The raw-protocol checks are one session: they all run.
        wanted = case_ids(rows)
        return replace(self, cases=[case for case in self.cases if case.id in wanted])

    def planned(self) -> list[PlannedRow]:
        # Every check has a row: a session that stops early gives the rest "not run" errors.
        rows = [(case_id, "", check.level) for case_id, check in SERVER_CHECKS.items()]
        if self.client is not None:
            name = self.client.library.name
            rows += [(client_case_id(name, c), c.id, c.level) for c in self.cases]
        return [PlannedRow(self.spec, row, case, lv, SERVER_GROUP) for row, case, lv in rows]

    def run(
        self, ctx: RunContext, writer: ResultsWriter, baseline: Baseline, reruns: int, on_row: OnRow
    ) -> Iterator[Judged]:
        try:
            with open_target(self.reference) as reference:
                try:
                    target = stan_server.open_target(self.spec)
                except TargetError as exc:
                    raise SuiteError(f"target {self.spec} cannot start: {exc}") from exc
                server = reference.server({})
                rows = run_stan_server_checks(
                    target, server, writer, ctx, client=self.client, cases=self.cases
                )
        except TargetError as exc:  # a server of either kind that will not start or launch
            raise SuiteError(str(exc)) from exc
        # No case runs again: one session judges them all against the reference.
        for row in rows:
            yield judged(row, False, baseline, on_row)
