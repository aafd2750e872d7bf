"""Client library checks: a library, through its driver, against the fake server.

Each check is a function ``(client: ClientTarget) -> list[CheckResult]``, registered in
``CLIENT_CHECKS`` with the case ids it produces. A check starts the library's driver, connects it
to a ``harness.fake_server.FakeServer`` and judges what the library puts on the wire (parsed by the
reference parser) and what it reports through the driver (events and replies). Expected client
bytes come from the reference encoder; expected header blocks from ``conformance.headers``.

The definitions (id, level, source, description) are the ``DEFINITIONS`` table below: the vector
schema has no kind for a fake-server script yet. The HPUB header rows are generated from the
bundled ``headers.encode`` vectors and take their level and source from them; every client-role
vector reaches libraries through ``harness.client_vectors``.

``run_client_checks`` turns the results into ``harness.results.ResultRow``s and writes them.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any

from conformance import headers, judge, protocol, vectors
from conformance.judge import grouped
from conformance.vectors import Source
from harness.clients.driver import DriverError
from harness.clients.fake_server import (
    FakeConnection,
    FakeServer,
    encode,
    err_op,
    hmsg_op,
    info_op,
    msg_op,
)
from harness.clients.targets import ClientError
from harness.results import Found, ResultRow, ResultsWriter

if TYPE_CHECKING:
    from harness.clients.driver import DriverProcess, DriverReply
    from harness.clients.targets import ClientTarget
    from harness.results import RunContext

STEP = 2.0  # seconds to wait for something the client should do
QUIET = 0.5  # seconds to watch for something the client should not do (close, deliver)
CONNECT_TIMEOUT_MS = 3000
TRANSCRIPT_LINES = 40  # how much of the fake server's transcript a failing row keeps

CP = "client-protocol.txt"
ADR4 = "adr-4-headers.txt"


@dataclass(frozen=True)
class CheckDef:
    id: str
    level: str
    source: Source
    description: str


@dataclass(frozen=True)
class CheckResult:
    case_id: str
    level: str
    source: Source
    outcome: str  # pass, fail, error, skip
    message: str
    duration_ms: float
    transcript: str = ""  # the fake server's transcript, for rows that did not pass
    description: str = ""
    group: str = ""  # the rule group; by default the case id's first two segments

    def __post_init__(self) -> None:
        if not self.group:
            object.__setattr__(self, "group", ".".join(self.case_id.split(".")[:2]))


def _def(case_id: str, level: str, document: str, section: str, quote: str, text: str) -> CheckDef:
    return CheckDef(case_id, level, Source(document, section, quote), text)


# -ERR texts (client-protocol.txt, "+OK/ERR"): the closing ones, then those that keep it open.
CLOSING_ERRORS = protocol.CLOSING_ERRORS
OPEN_ERRORS = (
    protocol.OPEN_ERRORS[0],
    *(f"{start} conformance.denied" for start in protocol.OPEN_ERRORS[1:]),
)


def _slug(text: str) -> str:
    words = "".join(c if c.isalnum() else " " for c in text.lower()).split()
    return "-".join(w for w in words if w not in ("conformance", "denied"))


_CLOSING_QUOTE = (
    "Upon receiving these errors, the connection is no longer valid and the client should clean "
    "up relevant resources."
)
_OPEN_QUOTE = "The client should not close the connection in these cases."
_SEGMENT_QUOTE = (
    "Clients connect to and communicate with nats-server (the NATS server) through a regular "
    "TCP/IP socket using a small set of protocol operations that are terminated by a new line."
)
_DELIMITER_QUOTE = "Multiple whitespace characters will be treated as a single field delimiter."
_CASE_QUOTE = "NATS protocol operation names are case insensitive"
_ECHO_QUOTE = (
    "echo: Optional boolean. If set to true, the server (version 1.2.0+) will not send "
    "originating messages from this connection to its own subscriptions."
)
_STATUS_NOTE = (
    "The documents are silent on status lines (ADR-4 only gives the version line NATS/1.0) and "
    "on no_responders; the form NATS/1.0 <status>[ <description>] is the one the headers.parse "
    "status vectors use."
)

DEFINITIONS: tuple[CheckDef, ...] = (
    # --- CONNECT fields ---------------------------------------------------------------------
    _def("client.connect.sent", "must", CP, "CONNECT",
         'CONNECT {["option_name":option_value],...}␍␊',
         "After the fake server's INFO the client sends a CONNECT whose JSON object the reference "
         "parses."),
    _def("client.connect.verbose-default", "info", CP, "+OK/ERR",
         "When the verbose connection option is set to true (the default value)",
         "Without a verbose option the client sends verbose false: the documents make verbose "
         "default to true and say only that most clients set it to false, so this is recorded, "
         "not required."),
    _def("client.connect.verbose-requested", "must", CP, "CONNECT",
         "verbose: Turns on +OK protocol acknowledgements.",
         "With the library's verbose option the CONNECT carries verbose true."),
    _def("client.connect.pedantic-requested", "must", CP, "CONNECT",
         "pedantic: Turns on additional strict format checking, e.g. for properly formed subjects",
         "With the library's pedantic option the CONNECT carries pedantic true."),
    _def("client.connect.name", "must", CP, "CONNECT", "name: Optional client name",
         "A client name given to the library is sent as CONNECT name."),
    _def("client.connect.user-pass", "must", CP, "CONNECT",
         "user: Connection username (if auth_required is set)",
         "With INFO auth_required and a user and password, the CONNECT carries user and pass."),
    _def("client.connect.token", "must", CP, "CONNECT",
         "auth_token: Client authorization token (if auth_required is set)",
         "With INFO auth_required and a token, the CONNECT carries auth_token."),
    _def("client.connect.protocol", "must", CP, "CONNECT",
         "protocol: optional int. Sending 0 (or absent) indicates client supports original "
         "protocol.",
         "CONNECT protocol is absent, 0 or 1 (an integer; the message records the value)."),
    _def("client.connect.lang-version", "info", CP, "CONNECT",
         "lang: The implementation language of the client.",
         "CONNECT lang and version are strings (recorded; the documents list them as valid "
         "options without requiring them)."),
    _def("client.connect.headers", "must", ADR4, "Enabling Message Headers",
         "client wishes to send headers, it has to enable it must add a headers",
         "A client that sends HPUB has sent headers true in its CONNECT."),
    _def("client.connect.no-responders", "info", CP, "CONNECT",
         "The valid options are as follows:",
         "Records the CONNECT no_responders field. The documents do not list no_responders among "
         "the CONNECT options at all; fails only when it is present and not a boolean."),
    _def("client.connect.echo-default", "info", CP, "CONNECT", _ECHO_QUOTE,
         "Without an echo option the CONNECT leaves echo out or true, so the client gets its own "
         "messages. This follows the reference server model, which reads echo false as 'do not "
         "echo'; the document's wording says the reverse (echo true: the server will not send a "
         "connection's own messages), against the option's name. Info: the document is not a "
         "reliable statement here."),
    _def("client.connect.echo-off", "info", CP, "CONNECT", _ECHO_QUOTE,
         "With the library's option not to receive its own messages, the CONNECT carries echo "
         "false (the reference server model's reading; by the document's wording it would be "
         "true). Info for the same reason as client.connect.echo-default."),
    # --- PING/PONG and +OK ----------------------------------------------------------------
    _def("client.ping.pong", "must", CP, "PING/PONG",
         "If the client fails to respond with a PONG message within the configured response "
         "interval, the server will terminate its connection.",
         "A PING from the server gets a PONG from the client."),
    _def("client.ping.lower-case", "must", CP, "Protocol messages", _CASE_QUOTE,
         "A lower-case ping from the server gets a PONG."),
    _def("client.ping.flush", "must", CP, "PING/PONG",
         "You can also ping the server and will receive a pong reply.",
         "A flush sends PING and completes when the PONG comes."),
    _def("client.ping.flush-delayed-pong", "should", CP, "PING/PONG",
         "You can also ping the server and will receive a pong reply.",
         "A flush waits for a PONG that comes 0.3 s late (within the flush timeout)."),
    _def("client.ping.flush-without-pong", "should", CP, "PING/PONG",
         "You can also ping the server and will receive a pong reply.",
         "A flush whose PONG never comes fails (timeout). The documents do not describe a "
         "client's flush; a flush reported done without its PONG did not make the round trip."),
    _def("client.ok.verbose-acks", "should", CP, "+OK/ERR",
         "the server acknowledges each well-formed protocol message from the client with a +OK "
         "message.",
         "With verbose true, the fake server (the reference server model) acknowledges every "
         "CONNECT, PUB, SUB and UNSUB with +OK; the client keeps working (publish and flush "
         "succeed, no error, no close)."),
    # --- PUB / HPUB -------------------------------------------------------------------------
    _def("client.pub.framing", "must", CP, "PUB", "PUB <subject> [reply-to] <#bytes>␍␊[payload]␍␊",
         "A publish is one PUB with the subject and payload."),
    _def("client.pub.reply", "must", CP, "PUB",
         "reply-to: The optional reply subject that subscribers can use to send a response back "
         "to the publisher/requestor",
         "A publish with a reply subject carries it in PUB."),
    _def("client.pub.empty-payload", "must", CP, "PUB",
         "To omit the payload, set the payload size to 0, but the second CRLF is still required.",
         "An empty payload is PUB with size 0 and the second CRLF."),
    _def("client.pub.binary-payload", "must", CP, "PUB", "#bytes: The payload size in bytes",
         "A payload with every byte value, CR LF and a PUB-looking text inside arrives intact."),
    _def("client.pub.canonical", "info", CP, "Protocol conventions", _DELIMITER_QUOTE,
         "Records whether the PUB bytes are the canonical form (upper-case name, single spaces); "
         "the documents accept any run of spaces or tabs."),
    _def("client.pub.max-payload", "should", CP, "+OK/ERR",
         "The client is expected to do proper accounting of byte size to be sent to the server "
         "in order to handle this error synchronously.",
         "With INFO max_payload 16, a 17-byte publish is refused by the library and no PUB is "
         "sent; a 16-byte one is sent."),
    _def("client.hpub.framing", "must", CP, "HPUB",
         "HPUB <subject> [reply-to] <#header bytes> <#total bytes>␍␊[headers]␍␊␍␊[payload]␍␊",
         "A publish with a header is one HPUB whose header block the reference parses back to the "
         "header, with the subject and payload."),
    # --- SUB / UNSUB ------------------------------------------------------------------------
    _def("client.sub.framing", "must", CP, "SUB",
         "sid: A unique alphanumeric subscription ID, generated by the client",
         "A subscription is SUB with the subject, no queue and an alphanumeric sid."),
    _def("client.sub.queue", "must", CP, "SUB",
         "queue group: If specified, the subscriber will join this queue group",
         "A queue subscription is SUB with the subject, the queue group and a sid."),
    _def("client.sub.unique-sids", "must", CP, "SUB",
         "sid: A unique alphanumeric subscription ID, generated by the client",
         "Two subscriptions on one connection have different sids."),
    _def("client.sub.canonical", "info", CP, "Protocol conventions", _DELIMITER_QUOTE,
         "Records whether the SUB bytes are the canonical form (single spaces); the documents "
         "accept any run of spaces or tabs."),
    _def("client.sub.unsub", "must", CP, "UNSUB",
         "UNSUB unsubscribes the connection from the specified subject",
         "Unsubscribing sends UNSUB with the subscription's sid and no max_msgs."),
    _def("client.sub.auto-unsub", "must", CP, "UNSUB",
         "max_msgs: An optional number of messages to wait for before automatically "
         "unsubscribing",
         "Auto-unsubscribe after 2 messages sends UNSUB <sid> 2."),
    _def("client.sub.auto-unsub-delivery", "info", CP, "UNSUB",
         "or auto-unsubscribes after the specified number of messages has been received",
         "After UNSUB <sid> 2, the fake server (unlike a real one) sends 3 MSGs: records whether "
         "the library delivers only 2. The documents leave the counting to the server."),
    # --- MSG / HMSG delivery ----------------------------------------------------------------
    _def("client.msg.delivery", "must", CP, "MSG",
         "MSG <subject> <sid> [reply-to] <#bytes>␍␊[payload]␍␊",
         "A MSG with a reply subject is delivered with its subject, reply and payload."),
    _def("client.msg.empty-payload", "must", CP, "MSG", "#bytes: Size of the payload in bytes",
         "A MSG with an empty payload is delivered."),
    _def("client.msg.payload-crlf", "must", CP, "MSG", "#bytes: Size of the payload in bytes",
         "A payload holding CR LF and protocol-looking text is delivered intact (the size, not "
         "the content, ends it)."),
    _def("client.msg.tabs", "must", CP, "Protocol conventions", _DELIMITER_QUOTE,
         "A MSG whose fields are separated by tabs is delivered intact."),
    _def("client.msg.spaces", "must", CP, "Protocol conventions", _DELIMITER_QUOTE,
         "A MSG whose fields are separated by runs of spaces is delivered intact."),
    _def("client.msg.mixed-whitespace", "must", CP, "Protocol conventions", _DELIMITER_QUOTE,
         "A MSG whose fields are separated by runs mixing spaces and tabs is delivered intact."),
    _def("client.msg.lower-case", "must", CP, "Protocol messages", _CASE_QUOTE,
         "A lower-case msg is delivered intact."),
    _def("client.msg.mixed-case", "must", CP, "Protocol messages", _CASE_QUOTE,
         "A mixed-case MsG is delivered intact."),
    _def("client.msg.segmented", "must", CP, "Client Protocol", _SEGMENT_QUOTE,
         "A MSG split into two TCP segments, at every position in turn, is delivered intact each "
         "time: TCP has no message boundaries."),
    _def("client.msg.byte-by-byte", "must", CP, "Client Protocol", _SEGMENT_QUOTE,
         "A MSG sent one byte per TCP segment is delivered intact."),
    _def("client.hmsg.delivery", "must", CP, "HMSG",
         "HMSG <subject> <sid> [reply-to] <#header bytes> <#total bytes>␍␊[payload]␍␊",
         "An HMSG with a reply subject is delivered with its subject, reply, header and payload."),
    _def("client.hmsg.tabs", "must", CP, "Protocol conventions", _DELIMITER_QUOTE,
         "An HMSG whose fields are separated by tabs is delivered intact."),
    _def("client.hmsg.spaces", "must", CP, "Protocol conventions", _DELIMITER_QUOTE,
         "An HMSG whose fields are separated by runs of spaces is delivered intact."),
    _def("client.hmsg.lower-case", "must", CP, "Protocol messages", _CASE_QUOTE,
         "A lower-case hmsg is delivered intact."),
    _def("client.hmsg.segmented", "must", CP, "Client Protocol", _SEGMENT_QUOTE,
         "An HMSG split into two TCP segments, at every position in turn, is delivered intact "
         "each time."),
    _def("client.hmsg.byte-by-byte", "must", CP, "Client Protocol", _SEGMENT_QUOTE,
         "An HMSG sent one byte per TCP segment is delivered intact."),
    # --- status lines -----------------------------------------------------------------------
    _def("client.status.503-no-responders", "info", ADR4, "Version line", "NATS/1.0␍␊",
         "A request answered by an HMSG with header block NATS/1.0 503 fails with no_responders. "
         + _STATUS_NOTE),
    _def("client.status.503-with-headers", "info", ADR4, "Version line", "NATS/1.0␍␊",
         "A request answered by NATS/1.0 503 with a further header fails with no_responders. "
         + _STATUS_NOTE),
    _def("client.status.408-description", "should", ADR4, "Version line", "NATS/1.0␍␊",
         "An HMSG with NATS/1.0 408 Request Timeout is delivered with status 408 and description "
         "Request Timeout. " + _STATUS_NOTE),
    _def("client.status.100-heartbeat", "should", ADR4, "Version line", "NATS/1.0␍␊",
         "An HMSG with NATS/1.0 100 Idle Heartbeat and two headers is delivered with status 100, "
         "its description and both headers. " + _STATUS_NOTE),
    # --- -ERR ---------------------------------------------------------------------------------
    *(
        _def(f"client.err.closing.{_slug(text)}", "should", CP, "+OK/ERR", _CLOSING_QUOTE,
             f"After -ERR '{text}' and the server closing the connection, the library reports "
             "the error (its text) and that the connection closed.")
        for text in CLOSING_ERRORS
    ),
    _def("client.err.closing.client-closes", "info", CP, "+OK/ERR", _CLOSING_QUOTE,
         "After -ERR 'Unknown Protocol Operation' from a server that keeps the connection open, "
         "records whether the library closes it itself. The documents say the connection is no "
         "longer valid, and that the server closes it."),
    *(
        _def(f"client.err.open.{_slug(text)}", "should", CP, "+OK/ERR", _OPEN_QUOTE,
             f"After -ERR '{text}' the connection stays open and usable: a flush succeeds and a "
             "publish reaches the server.")
        for text in OPEN_ERRORS
    ),
    # --- INFO ---------------------------------------------------------------------------------
    _def("client.info.initial-connect-urls", "must", CP, "connect_urls",
         "The connect_urls field is a list of urls the server may send when a client first "
         "connects",
         "An INFO with connect_urls (a 127.0.0.1 address) at connect time is accepted."),
    _def("client.info.async-connect-urls", "must", CP, "INFO",
         "This means clients with that protocol level need to be able to asynchronously handle "
         "INFO messages.",
         "For a client that sent protocol 1: an INFO with connect_urls after the connection is "
         "up leaves it connected and usable (skipped for other protocol levels)."),
    _def("client.info.async-lower-case", "must", CP, "Protocol messages", _CASE_QUOTE,
         "A lower-case async info leaves the connection up and usable."),
    _def("client.info.oversized.2k", "info", CP, "+OK/ERR",
         "The default is 1024 bytes.",
         "An INFO line of 2 KiB (above the documents' default control line limit, which they "
         "give for what a server accepts) is accepted. The documents give no limit for clients."),
    _def("client.info.oversized.128k", "info", CP, "+OK/ERR",
         "The default is 1024 bytes.",
         "An INFO line of 128 KiB is accepted. The documents give no limit for clients."),
)  # fmt: skip

DEFS: dict[str, CheckDef] = {d.id: d for d in DEFINITIONS}


# --- vector-derived definitions ------------------------------------------------------------------


@cache
def _bundled_cases() -> tuple[vectors.Case, ...]:
    return tuple(vectors.load_all([vectors.BUNDLED_DIR]).cases)


def _from_vector(prefix: str, case: vectors.Case, how: str) -> CheckDef:
    src = case.data["source"]
    return CheckDef(
        prefix + case.id.split(".", 2)[2],
        case.level,
        Source(src["document"], src["section"], src.get("quote", "")),
        f"{how} (vector {case.id}): {case.data['description']}",
    )


@cache
def header_encode_cases() -> tuple[vectors.Case, ...]:
    """headers.encode cases a publish can express: no status line, just headers."""
    return tuple(
        case
        for case in _bundled_cases()
        if case.kind == "headers.encode"
        and "client" in case.roles
        and case.data["input"].get("status") is None
        and case.data["input"].get("description") is None
    )


def _hpub_def(case: vectors.Case) -> CheckDef:
    return _from_vector("client.hpub.headers.", case, "Published, the library's header block")


# --- verdicts and the driver session -------------------------------------------------------------


class Verdict(Exception):
    """Ends one row (or every row still owed) with an outcome other than pass."""

    def __init__(self, outcome: str, message: str) -> None:
        super().__init__(message)
        self.outcome = outcome
        self.message = message


def _fail(message: str) -> Verdict:
    return Verdict("fail", message)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str | None) -> bytes:
    return base64.b64decode(text or "")


def _short(value: Any, limit: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


class Session:
    """One driver process for one check function, restarted when it dies; buffered events."""

    def __init__(self, client: ClientTarget) -> None:
        self.client = client
        self._driver: DriverProcess | None = None
        self._events: list[dict[str, Any]] = []
        self.server: FakeServer | None = None  # the fake server of the open connection
        self.last_transcript = ""  # the fake server transcript of the latest connection

    @property
    def transcript(self) -> str:
        """The fake server's transcript: the open connection's, else the latest one's."""
        return self.server.transcript_text() if self.server else self.last_transcript

    @property
    def driver(self) -> DriverProcess:
        if self._driver is None:
            self._driver = self.client.driver()
        return self._driver

    def call(self, cmd: str, *, timeout: float = STEP + 1, **args: Any) -> DriverReply:
        try:
            return self.driver.call(cmd, timeout=timeout, **args)
        except DriverError:
            self.restart()
            raise

    def restart(self) -> None:
        """Drop the driver (it died or stopped answering); the next call starts a new one."""
        driver, self._driver = self._driver, None
        self._events.clear()
        if driver is not None:
            with suppress(DriverError):
                driver.close()

    def wait_event(
        self,
        match: Callable[[dict[str, Any]], bool],
        *,
        timeout: float,
        stop: Callable[[dict[str, Any]], bool] = lambda event: False,
    ) -> dict[str, Any] | None:
        """The first buffered or new event ``match`` accepts (taken out of the buffer); None
        after ``timeout``, or as soon as an event ``stop`` accepts is there instead."""
        deadline = time.monotonic() + timeout
        while True:
            for i, event in enumerate(self._events):
                if match(event):
                    return self._events.pop(i)
            if any(stop(event) for event in self._events):
                return None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            self._events.extend(self.driver.events(timeout=remaining, count=1))

    def seen(self, *, timeout: float = 0.0) -> list[dict[str, Any]]:
        """Every event buffered so far plus those arriving within ``timeout`` (left buffered)."""
        self._events.extend(self.driver.events(timeout=timeout))
        return list(self._events)

    def discard_events(self) -> None:
        self._events.clear()
        if self._driver is not None:
            self._driver.events(timeout=0)

    def close_connection(self) -> None:
        """Close the library's connection (if a driver runs) and forget its events."""
        if self._driver is None:
            return
        try:
            self.call("close", drain=False, timeout=STEP)
            self.discard_events()
        except DriverError:
            pass  # restarted: the next call gets a fresh driver

    def close(self) -> None:
        self.restart()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _is(kind: str, **fields: Any) -> Callable[[dict[str, Any]], bool]:
    return lambda e: e.get("event") == kind and all(e.get(k) == v for k, v in fields.items())


def _error_text(reply: DriverReply) -> str:
    return f"{reply.error_type}: {reply.error_message}"


@contextmanager
def connected(
    s: Session, *, options: dict[str, Any] | None = None, **server_args: Any
) -> Iterator[tuple[FakeServer, FakeConnection]]:
    """A fake server (``server_args``) and the library connected to it (``options``).

    Verdict ``skip`` when the driver answers unsupported for an option, ``error`` when the
    library cannot connect to the fake server at all. The library is closed afterwards.
    """
    with FakeServer(**server_args) as server:
        s.server = server
        connect_options = {"reconnect": False, "timeout_ms": CONNECT_TIMEOUT_MS, **(options or {})}
        try:
            reply = s.call(
                "connect",
                url=server.url,
                options=connect_options,
                timeout=CONNECT_TIMEOUT_MS / 1000 + STEP,
            )
            if not reply.ok and reply.error_type == "unsupported":
                raise Verdict("skip", f"the driver cannot set {options}: {reply.error_message}")
            conn = server.accept(timeout=STEP if reply.ok else 0.0)
            if conn is None or not reply.ok:
                raise Verdict(
                    "error",
                    f"the library did not connect to the fake server: "
                    f"{'connected' if reply.ok else _error_text(reply)}",
                )
            yield server, conn
        finally:
            s.close_connection()
            s.server, s.last_transcript = None, server.transcript_text()


class Link:
    """A connection (and optionally a subscription) that is re-made when it breaks, for checks
    that run many deliveries in a row: one broken delivery must not fail the ones after it."""

    def __init__(self, s: Session, subject: str | None = None, **server_args: Any) -> None:
        self._s = s
        self._subject = subject
        self._server_args = server_args
        self._ctx: Any = None
        self.conn: FakeConnection | None = None
        self.sid = ""
        self.sub = ""
        self.broken = False

    def get(self) -> tuple[FakeConnection, str]:
        conn = self.conn
        if (
            conn is None
            or self.broken
            or conn.closed_by_client
            or conn.parse_error is not None
            or any(e.get("event") == "closed" for e in self._s.seen())
        ):
            self.close()
            ctx = connected(self._s, **self._server_args)
            _, conn = ctx.__enter__()
            self._ctx, self.conn, self.broken = ctx, conn, True
            if self._subject is not None:
                self.sub, self.sid = _subscribe(self._s, conn, self._subject)
            self.broken = False
        return conn, self.sid

    def close(self) -> None:
        ctx, self._ctx, self.conn = self._ctx, None, None
        if ctx is not None:
            ctx.__exit__(None, None, None)

    def __enter__(self) -> Link:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _subscribe(
    s: Session, conn: FakeConnection, subject: str, queue: str | None = None
) -> tuple[str, str]:
    """Subscribe through the driver; the driver's handle and the sid the client put on the wire."""
    after = conn.count()
    reply = s.call("subscribe", subject=subject, queue=queue)
    if not reply.ok:
        raise _fail(f"subscribe {subject!r} failed: {_error_text(reply)}")
    sub = conn.wait_for(
        protocol.Sub, timeout=STEP, after=after, match=lambda op: op.subject == subject
    )
    if sub is None:
        raise _fail(f"no SUB {subject} on the wire after subscribing")
    return str(reply.result.get("sub")), sub.sid


def _publish(
    s: Session,
    subject: str,
    payload: bytes,
    *,
    reply: str | None = None,
    hdrs: list[list[str]] | None = None,
) -> DriverReply:
    return s.call("publish", subject=subject, reply=reply, headers=hdrs, payload_b64=_b64(payload))


def _flush(s: Session, timeout: float = STEP) -> DriverReply:
    return s.call("flush", timeout_ms=int(timeout * 1000), timeout=timeout + STEP)


# --- registration -----------------------------------------------------------------------------

Body = Callable[[Session], Iterator[CheckResult]]


@dataclass(frozen=True)
class RegisteredCheck:
    name: str
    definitions: Callable[[], list[CheckDef]]
    body: Body = field(repr=False)

    def __call__(self, client: ClientTarget) -> list[CheckResult]:
        """Run the check: its rows in the order of its definitions; every row it owes but did
        not produce comes back as an error (or as the verdict that ended it early)."""
        defs = self.definitions()
        out: list[CheckResult] = []
        started = time.monotonic()
        ending = Verdict("error", "the check ended before this row")
        with Session(client) as s:
            try:
                out.extend(self.body(s))
            except Verdict as verdict:
                ending = verdict
            except (DriverError, ClientError) as exc:
                ending = Verdict("error", f"driver: {exc}")
            except Exception as exc:  # a bug in the check: the other checks still run
                ending = Verdict("error", f"check {self.name} raised {type(exc).__name__}: {exc}")
            done = {r.case_id: r for r in out}
            elapsed = (time.monotonic() - started) * 1000
            return [
                done.get(d.id) or _result(d, ending.outcome, ending.message, elapsed, s.transcript)
                for d in defs
            ]


CLIENT_CHECKS: list[RegisteredCheck] = []


def _check(
    ids: tuple[str, ...] | Callable[[], list[CheckDef]],
) -> Callable[[Body], RegisteredCheck]:
    definitions = ids if callable(ids) else (lambda: [DEFS[i] for i in ids])

    def register(body: Body) -> RegisteredCheck:
        check = RegisteredCheck(body.__name__, definitions, body)
        CLIENT_CHECKS.append(check)
        return check

    return register


def _result(
    d: CheckDef, outcome: str, message: str, duration_ms: float, transcript: str = ""
) -> CheckResult:
    shown = ""
    if outcome != "pass" and transcript:
        lines = transcript.splitlines()
        shown = "\n".join(lines[-TRANSCRIPT_LINES:])
    return CheckResult(
        d.id, d.level, d.source, outcome, message, round(duration_ms, 3), shown, d.description
    )


def _row(s: Session, d: CheckDef | str, judge: Callable[[], str]) -> CheckResult:
    """One row: ``judge`` returns the pass message or raises a Verdict."""
    definition = DEFS[d] if isinstance(d, str) else d
    started = time.monotonic()
    try:
        outcome, message = "pass", judge()
    except Verdict as verdict:
        outcome, message = verdict.outcome, verdict.message
    except DriverError as exc:
        outcome, message = "error", f"driver: {exc}"
    return _result(definition, outcome, message, (time.monotonic() - started) * 1000, s.transcript)


# --- CONNECT --------------------------------------------------------------------------------


def _connect_options(
    s: Session, options: dict[str, Any] | None = None, **server_args: Any
) -> dict[str, Any]:
    with connected(s, options=options, **server_args) as (_, conn):
        connect = conn.wait_connect(timeout=STEP)
    if connect is None:
        raise _fail(f"no CONNECT from the client ({conn.parse_error or 'nothing parsed'})")
    return connect.options


def _expect_field(options: dict[str, Any], name: str, want: Any) -> str:
    if name not in options:
        raise _fail(f"CONNECT has no {name} field: {_short(options)}")
    if options[name] != want or type(options[name]) is not type(want):
        raise _fail(f"CONNECT {name} is {options[name]!r}, expected {want!r}")
    return f"CONNECT {name}: {options[name]!r}"


@_check(
    (
        "client.connect.sent",
        "client.connect.verbose-default",
        "client.connect.protocol",
        "client.connect.lang-version",
        "client.connect.no-responders",
        "client.connect.echo-default",
    )
)
def connect_defaults(s: Session) -> Iterator[CheckResult]:
    options = _connect_options(s)
    yield _row(s, "client.connect.sent", lambda: f"CONNECT {_short(options)}")

    def verbose() -> str:
        if options.get("verbose") is False:
            return "verbose: false"
        shown = "absent" if "verbose" not in options else repr(options["verbose"])
        raise _fail(f"verbose is {shown}: the documents make an absent verbose true")

    def protocol_level() -> str:
        value = options.get("protocol", 0)
        if type(value) is not int or value not in (0, 1):
            raise _fail(f"protocol is {value!r}, not the integer 0 or 1")
        return f"protocol: {options.get('protocol', 'absent')}"

    def lang_version() -> str:
        lang, version = options.get("lang"), options.get("version")
        if not (isinstance(lang, str) and isinstance(version, str)):
            raise _fail(f"lang {lang!r}, version {version!r}: not both strings")
        return f"lang {lang!r}, version {version!r}"

    def no_responders() -> str:
        value = options.get("no_responders", "absent")
        if value != "absent" and not isinstance(value, bool):
            raise _fail(f"no_responders is {value!r}, not a boolean")
        return f"no_responders: {value}, headers: {options.get('headers', 'absent')}"

    def echo_default() -> str:
        if options.get("echo", True) is not True:
            raise _fail(f"echo is {options['echo']!r}: the client asks not to get its own messages")
        return f"echo: {options.get('echo', 'absent')}"

    yield _row(s, "client.connect.verbose-default", verbose)
    yield _row(s, "client.connect.protocol", protocol_level)
    yield _row(s, "client.connect.lang-version", lang_version)
    yield _row(s, "client.connect.no-responders", no_responders)
    yield _row(s, "client.connect.echo-default", echo_default)


_OPTION_CHECKS: tuple[tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]], ...] = (
    # (case id, driver connect options, INFO fields, expected CONNECT fields)
    ("client.connect.verbose-requested", {"verbose": True}, {}, {"verbose": True}),
    ("client.connect.pedantic-requested", {"pedantic": True}, {}, {"pedantic": True}),
    ("client.connect.name", {"name": "nats-conformance"}, {}, {"name": "nats-conformance"}),
    (
        "client.connect.user-pass",
        {"user": "conformance-user", "pass": "conformance-pass"},
        {"auth_required": True},
        {"user": "conformance-user", "pass": "conformance-pass"},
    ),
    (
        "client.connect.token",
        {"token": "conformance-token"},
        {"auth_required": True},
        {"auth_token": "conformance-token"},
    ),
    ("client.connect.echo-off", {"echo": False}, {}, {"echo": False}),
)


@_check(tuple(c[0] for c in _OPTION_CHECKS))
def connect_options(s: Session) -> Iterator[CheckResult]:
    for case_id, opts, info, want in _OPTION_CHECKS:

        def judge(opts: dict[str, Any] = opts, info: dict[str, Any] = info,
                  want: dict[str, Any] = want) -> str:  # fmt: skip
            options = _connect_options(s, opts, info=info)
            return "; ".join(_expect_field(options, k, v) for k, v in want.items())

        yield _row(s, case_id, judge)


# --- PING / PONG / +OK --------------------------------------------------------------------------


def _expect_pong(conn: FakeConnection, ping: bytes) -> str:
    after = conn.count()
    conn.send(ping)
    if conn.wait_for(protocol.Pong, timeout=STEP, after=after) is None:
        raise _fail(f"no PONG within {STEP:g} s after {ping!r}")
    return f"PONG after {ping!r}"


@_check(
    (
        "client.ping.pong",
        "client.ping.lower-case",
        "client.ping.flush",
        "client.ping.flush-delayed-pong",
        "client.ping.flush-without-pong",
    )
)
def ping_pong(s: Session) -> Iterator[CheckResult]:
    ping = encode(protocol.Ping())

    def pong(data: bytes) -> str:
        with connected(s) as (_, conn):
            return _expect_pong(conn, data)

    def flush(pong_delay: float, pongs: bool) -> str:
        with connected(s) as (_, conn):
            conn.pong_delay, conn.answer_pings = pong_delay, pongs
            after = conn.count()
            reply = _flush(s)
            if conn.wait_for(protocol.Ping, timeout=0.1, after=after) is None:
                raise _fail(f"the flush sent no PING ({'ok' if reply.ok else _error_text(reply)})")
        if reply.ok != pongs:
            raise _fail("the flush succeeded without a PONG" if reply.ok else _error_text(reply))
        return "flushed" if reply.ok else f"failed as expected: {_error_text(reply)}"

    yield _row(s, "client.ping.pong", lambda: pong(ping))
    yield _row(s, "client.ping.lower-case", lambda: pong(ping.lower()))
    yield _row(s, "client.ping.flush", lambda: flush(0.0, True))
    yield _row(s, "client.ping.flush-delayed-pong", lambda: flush(0.3, True))
    yield _row(s, "client.ping.flush-without-pong", lambda: flush(0.0, False))


@_check(("client.ok.verbose-acks",))
def verbose_acks(s: Session) -> Iterator[CheckResult]:
    def judge() -> str:
        with connected(s, options={"verbose": True}) as (_, conn):
            if conn.wait_for(protocol.Connect, timeout=STEP, match=_verbose) is None:
                raise Verdict("skip", "the CONNECT does not ask for verbose")
            _subscribe(s, conn, "conformance.verbose")
            published = _publish(s, "conformance.verbose", b"v")
            flushed = _flush(s)
            problems = [e for e in s.seen(timeout=0.1) if e.get("event") in ("error", "closed")]
            if not (published.ok and flushed.ok) or problems:
                raise _fail(
                    f"publish {published.ok}, flush {flushed.ok} "
                    f"({_error_text(flushed)}), events {_short(problems)}"
                )
            return "publish and flush work under +OK acknowledgements"

    yield _row(s, "client.ok.verbose-acks", judge)


def _verbose(op: protocol.Connect) -> bool:
    return op.options.get("verbose") is True


# --- PUB / HPUB -------------------------------------------------------------------------------


def _published(
    s: Session,
    conn: FakeConnection,
    subject: str,
    payload: bytes,
    *,
    reply: str | None = None,
    hdrs: list[list[str]] | None = None,
) -> protocol.Pub | protocol.HPub:
    """Publish through the driver; the PUB or HPUB the client put on the wire for ``subject``."""
    after = conn.count()
    answer = _publish(s, subject, payload, reply=reply, hdrs=hdrs)
    if not answer.ok:
        raise _fail(f"publish failed: {_error_text(answer)}")
    op = conn.wait_for(
        protocol.Pub | protocol.HPub,  # type: ignore[arg-type]
        timeout=STEP,
        after=after,
        match=lambda o: o.subject == subject,
    )
    if op is None:
        raise _fail(f"no PUB or HPUB {subject} on the wire ({conn.parse_error or 'none came'})")
    return op


def _expect_pub(
    s: Session, conn: FakeConnection, subject: str, payload: bytes, reply: str | None = None
) -> str:
    op = _published(s, conn, subject, payload, reply=reply)
    want = protocol.Pub(subject, reply, payload)
    if op != want:
        raise _fail(f"sent {_short(op)}, expected {_short(want)}")
    return f"PUB {subject} {reply or ''} ({len(payload)} bytes)"


BINARY_PAYLOAD = bytes(range(256)) + b"\r\nPUB x 1\r\n\r\n"


@_check(
    (
        "client.pub.framing",
        "client.pub.reply",
        "client.pub.empty-payload",
        "client.pub.binary-payload",
        "client.pub.canonical",
        "client.hpub.framing",
    )
)
def publishing(s: Session) -> Iterator[CheckResult]:
    with connected(s) as (_, conn):
        subject = "conformance.pub"
        yield _row(s, "client.pub.framing", lambda: _expect_pub(s, conn, subject, b"hello"))
        yield _row(
            s,
            "client.pub.reply",
            lambda: _expect_pub(s, conn, "conformance.pub.reply", b"knock", "conformance.inbox"),
        )
        yield _row(
            s, "client.pub.empty-payload", lambda: _expect_pub(s, conn, "conformance.empty", b"")
        )
        yield _row(
            s,
            "client.pub.binary-payload",
            lambda: _expect_pub(s, conn, "conformance.binary", BINARY_PAYLOAD),
        )

        def canonical() -> str:
            pubs = [p for p in conn.ops(protocol.Pub) if p.subject == subject]
            if not pubs:
                raise _fail("no PUB to compare")
            wire = conn.received_bytes()
            if encode(pubs[0]) not in wire:
                raise _fail(f"PUB bytes differ from {encode(pubs[0])[:60]!r}")
            return "canonical PUB"

        yield _row(s, "client.pub.canonical", canonical)

        def hpub() -> str:
            op = _published(s, conn, "conformance.hpub", b"Hello NATS!", hdrs=[["Bar", "Baz"]])
            if not isinstance(op, protocol.HPub):
                raise _fail(f"sent {_short(op)}, not an HPUB")
            parsed = headers.parse_block(op.headers)
            want = headers.HeaderBlock(None, None, (("Bar", "Baz"),))
            if parsed != want or op.payload != b"Hello NATS!" or op.reply is not None:
                raise _fail(f"sent {_short(op)}; block parses to {_short(parsed)}")
            return f"HPUB with block {op.headers!r}"

        yield _row(s, "client.hpub.framing", hpub)


@_check(("client.pub.max-payload",))
def max_payload(s: Session) -> Iterator[CheckResult]:
    def judge() -> str:
        with connected(s, info={"max_payload": 16}) as (_, conn):
            _expect_pub(s, conn, "conformance.fits", b"x" * 16)
            after = conn.count()
            answer = _publish(s, "conformance.too-big", b"x" * 17)
            _flush(s)
            sent = conn.wait_for(protocol.Pub, timeout=QUIET, after=after)
        if sent is not None:
            raise _fail(f"sent a {len(sent.payload)}-byte PUB over max_payload 16")
        if answer.ok:
            raise _fail("the publish succeeded without sending anything")
        return f"refused: {_error_text(answer)}"

    yield _row(s, "client.pub.max-payload", judge)


def _hpub_defs() -> list[CheckDef]:
    return [DEFS["client.connect.headers"], *(_hpub_def(c) for c in header_encode_cases())]


@_check(_hpub_defs)
def hpub_headers(s: Session) -> Iterator[CheckResult]:
    """Every headers.encode vector without a status: the library's block against the reference."""
    first_hpub: tuple[protocol.HPub, dict[str, Any]] | None = None
    with Link(s) as link:
        for i, case in enumerate(header_encode_cases()):
            pairs = [list(p) for p in case.data["input"]["headers"]]

            def judge(pairs: list[list[str]] = pairs, i: int = i) -> str:
                nonlocal first_hpub
                conn, _ = link.get()
                subject = f"conformance.hpub.{i}"
                block = headers.encode_block(
                    headers.HeaderBlock(None, None, tuple((k, v) for k, v in pairs))
                )
                after = conn.count()
                answer = _publish(s, subject, b"x", hdrs=pairs)
                if not answer.ok:
                    if isinstance(block, headers.HeaderError):
                        return f"refused: {_error_text(answer)}"
                    raise _fail(f"publish failed: {_error_text(answer)}")
                op = conn.wait_for(
                    protocol.Pub | protocol.HPub,  # type: ignore[arg-type]
                    timeout=STEP if isinstance(block, bytes) else QUIET,
                    after=after,
                    match=lambda o: o.subject == subject,
                )
                if op is None:
                    link.broken = True
                    if isinstance(block, headers.HeaderError):
                        return "accepted by the API but nothing sent"
                    raise _fail(f"no HPUB on the wire ({conn.parse_error or 'none came'})")
                if isinstance(op, protocol.HPub) and first_hpub is None:
                    connect = conn.wait_connect(timeout=0)
                    first_hpub = (op, connect.options if connect else {})
                sent = op.headers if isinstance(op, protocol.HPub) else None
                if isinstance(block, headers.HeaderError):
                    link.broken = True
                    raise _fail(
                        f"the library sent {sent!r} for headers the reference refuses "
                        f"({block.reason}: {block.detail}) instead of refusing them"
                    )
                if sent is None:
                    raise _fail(f"sent a PUB without headers, reference {block!r}")
                if sent == block:
                    return f"block {block!r}"
                parsed = headers.parse_block(sent)
                if isinstance(parsed, headers.HeaderBlock) and grouped(
                    list(parsed.fields)
                ) == grouped([(name, value) for name, value in pairs]):
                    return f"block {sent!r}: keys in another order, each key's values in order"
                raise _fail(f"sent {sent!r}, reference {block!r} (parses to {_short(parsed)})")

            yield _row(s, _hpub_def(case), judge)

    def connect_headers() -> str:
        if first_hpub is None:
            raise Verdict("skip", "the library sent no HPUB")
        _, options = first_hpub
        if options.get("headers") is not True:
            raise _fail(f"sent HPUB after CONNECT headers {options.get('headers', 'absent')!r}")
        return "CONNECT headers: true before HPUB"

    yield _row(s, "client.connect.headers", connect_headers)


# --- SUB / UNSUB --------------------------------------------------------------------------------


def _is_alphanumeric(sid: str) -> bool:
    return sid.isascii() and sid.isalnum()


@_check(
    (
        "client.sub.framing",
        "client.sub.queue",
        "client.sub.unique-sids",
        "client.sub.canonical",
        "client.sub.unsub",
        "client.sub.auto-unsub",
        "client.sub.auto-unsub-delivery",
    )
)
def subscriptions(s: Session) -> Iterator[CheckResult]:
    with connected(s) as (_, conn):
        handles: dict[str, tuple[str, str]] = {}

        def sub(subject: str, queue: str | None = None) -> str:
            handles[subject] = _subscribe(s, conn, subject, queue)
            op = conn.wait_for(protocol.Sub, timeout=0, match=lambda o: o.subject == subject)
            assert op is not None
            if op.queue != queue or not _is_alphanumeric(op.sid):
                raise _fail(f"sent {_short(op)}: queue {op.queue!r}, sid {op.sid!r}")
            return f"SUB {subject} {queue or ''} {op.sid}"

        yield _row(s, "client.sub.framing", lambda: sub("conformance.sub"))
        yield _row(s, "client.sub.queue", lambda: sub("conformance.queue", "conformance-q"))

        def unique() -> str:
            sids = [op.sid for op in conn.ops(protocol.Sub)]
            if len(sids) < 2 or len(set(sids)) != len(sids):
                raise _fail(f"sids {sids}")
            return f"sids {sids}"

        yield _row(s, "client.sub.unique-sids", unique)

        def canonical() -> str:
            subs = conn.ops(protocol.Sub)
            wire = conn.received_bytes()
            odd = [encode(op) for op in subs if encode(op) not in wire]
            if not subs or odd:
                raise _fail(f"SUB bytes differ from the canonical {odd[:1]!r}")
            return "canonical SUB"

        yield _row(s, "client.sub.canonical", canonical)

        def unsubscribe(subject: str, max_msgs: int | None) -> str:
            handle, sid = handles.get(subject) or _subscribe(s, conn, subject)
            handles[subject] = handle, sid
            after = conn.count()
            answer = s.call("unsubscribe", sub=handle, max=max_msgs)
            if not answer.ok:
                raise _fail(f"unsubscribe failed: {_error_text(answer)}")
            op = conn.wait_for(protocol.Unsub, timeout=STEP, after=after)
            if op != protocol.Unsub(sid, max_msgs):
                raise _fail(f"sent {_short(op)}, expected UNSUB {sid} {max_msgs or ''}")
            return f"UNSUB {sid} {max_msgs or ''}"

        yield _row(s, "client.sub.unsub", lambda: unsubscribe("conformance.sub", None))
        yield _row(s, "client.sub.auto-unsub", lambda: unsubscribe("conformance.auto", 2))

        def delivery() -> str:
            handle, sid = handles["conformance.auto"]
            for n in range(3):
                conn.send(msg_op("conformance.auto", sid, b"auto%d" % n))
            _flush(s)
            got = []
            while (e := s.wait_event(_is("message", sub=handle), timeout=QUIET)) is not None:
                got.append(_unb64(e.get("payload_b64")))
            if len(got) != 2:
                raise _fail(f"delivered {len(got)} messages: {got}")
            return "delivered 2 of 3"

        yield _row(s, "client.sub.auto-unsub-delivery", delivery)


# --- MSG / HMSG delivery --------------------------------------------------------------------------


def _respace(data: bytes, sep: bytes, name: Callable[[bytes], bytes] = lambda n: n) -> bytes:
    """``data`` (a reference-encoded operation) with the control line's single spaces replaced
    by ``sep`` and the operation name passed through ``name``."""
    end = data.index(b"\r\n")
    fields = data[:end].split(b" ")
    return sep.join([name(fields[0]), *fields[1:]]) + data[end:]


def _mixed_case(name: bytes) -> bytes:
    return bytes(c | 0x20 if i % 2 else c for i, c in enumerate(name))


@dataclass(frozen=True)
class Delivery:
    """What a delivered message event must carry."""

    subject: str
    reply: str | None
    payload: bytes
    block: headers.HeaderBlock | None = None  # None: a MSG (no header fields)


def _deliver(
    s: Session, link: Link, data: Callable[[str], bytes], want: Delivery, **send: Any
) -> str:
    """Send ``data(sid)`` on the link's subscription and judge the message event it gives."""
    conn, sid = link.get()
    conn.send(data(sid), **send)
    event = s.wait_event(_is("message", sub=link.sub), timeout=STEP, stop=_is("closed"))
    if event is None:
        link.broken = True
        others = [e for e in s.seen() if e.get("event") != "message"]
        raise _fail(f"not delivered (waited up to {STEP:g} s); events {_short(others)}")
    problems = []
    if event.get("subject") != want.subject:
        problems.append(f"subject {event.get('subject')!r}")
    if event.get("reply") != want.reply:
        problems.append(f"reply {event.get('reply')!r}")
    payload = _unb64(event.get("payload_b64"))
    if payload != want.payload:
        problems.append(f"payload {payload[:60]!r}")
    if want.block is not None:
        outcome = compare_headers(want.block, event)
        if outcome[0] != "pass":
            problems.append(outcome[1])
    if problems:
        link.broken = True
        raise _fail("delivered with " + ", ".join(problems))
    return "delivered intact"


def compare_headers(want: headers.HeaderBlock, got: dict[str, Any]) -> tuple[str, str]:
    """The library's view of a header block (``status``, ``description``, ``headers`` of an event
    or a decode_headers result) against the reference's: (outcome, message), judged by
    ``conformance.judge``."""
    pairs = tuple((name, value) for name, value in got.get("headers") or [])
    view = headers.HeaderBlock(got.get("status"), got.get("description"), pairs)
    judgement = judge.judge_block(want, view)
    return judgement.outcome, judgement.message


HEADER = headers.HeaderBlock(None, None, (("FoodGroup", "vegetable"),))


def _block(block: headers.HeaderBlock) -> bytes:
    data = headers.encode_block(block)
    assert isinstance(data, bytes), data
    return data


def _msg(subject: str, payload: bytes, reply: str | None = None) -> Callable[[str], bytes]:
    return lambda sid: msg_op(subject, sid, payload, reply)


def _hmsg(
    subject: str, payload: bytes, block: headers.HeaderBlock, reply: str | None = None
) -> Callable[[str], bytes]:
    return lambda sid: hmsg_op(subject, sid, _block(block), payload, reply)


_SUBJECT = "conformance.msg"
_VARIANTS: tuple[tuple[str, bytes, Callable[[bytes], bytes]], ...] = (
    # (name, field separator, operation name transform)
    ("tabs", b"\t", lambda n: n),
    ("spaces", b"   ", lambda n: n),
    ("mixed-whitespace", b" \t  \t", lambda n: n),
    ("lower-case", b" ", bytes.lower),
    ("mixed-case", b" ", _mixed_case),
)
_HMSG_VARIANTS = ("tabs", "spaces", "lower-case")


def _delivery_ids() -> tuple[str, ...]:
    return (
        "client.msg.delivery",
        "client.msg.empty-payload",
        "client.msg.payload-crlf",
        *(f"client.msg.{name}" for name, _, _ in _VARIANTS),
        "client.hmsg.delivery",
        *(f"client.hmsg.{name}" for name in _HMSG_VARIANTS),
    )


@_check(_delivery_ids())
def deliveries(s: Session) -> Iterator[CheckResult]:
    reply = "conformance.reply.1"
    with Link(s, _SUBJECT) as link:

        def deliver(data: Callable[[str], bytes], want: Delivery) -> Callable[[], str]:
            return lambda: _deliver(s, link, data, want)

        yield _row(
            s,
            "client.msg.delivery",
            deliver(
                _msg(_SUBJECT, b"Hello World", reply), Delivery(_SUBJECT, reply, b"Hello World")
            ),
        )
        yield _row(
            s,
            "client.msg.empty-payload",
            deliver(_msg(_SUBJECT, b""), Delivery(_SUBJECT, None, b"")),
        )
        crlf = b"MSG x 1 2\r\n\r\nPING\r\n"
        yield _row(
            s,
            "client.msg.payload-crlf",
            deliver(_msg(_SUBJECT, crlf), Delivery(_SUBJECT, None, crlf)),
        )
        for name, sep, rename in _VARIANTS:
            payload = name.encode()
            data = _msg(_SUBJECT, payload, reply)
            yield _row(
                s,
                f"client.msg.{name}",
                deliver(
                    lambda sid, d=data, sep=sep, r=rename: _respace(d(sid), sep, r),
                    Delivery(_SUBJECT, reply, payload),
                ),
            )
        yield _row(
            s,
            "client.hmsg.delivery",
            deliver(
                _hmsg(_SUBJECT, b"Hello World", HEADER, reply),
                Delivery(_SUBJECT, reply, b"Hello World", HEADER),
            ),
        )
        for name, sep, rename in _VARIANTS:
            if name not in _HMSG_VARIANTS:
                continue
            payload = name.encode()
            data = _hmsg(_SUBJECT, payload, HEADER, reply)
            yield _row(
                s,
                f"client.hmsg.{name}",
                deliver(
                    lambda sid, d=data, sep=sep, r=rename: _respace(d(sid), sep, r),
                    Delivery(_SUBJECT, reply, payload, HEADER),
                ),
            )


def _segmented(s: Session, link: Link, data: Callable[[str], bytes], want: Delivery) -> str:
    """Deliver ``data`` split in two at every position, then one byte per segment."""
    _, sid = link.get()
    size = len(data(sid))
    failed = []
    for cut in range(1, size):
        try:
            _deliver(s, link, data, want, split_at=[cut], pause=0.002)
        except Verdict as verdict:
            failed.append(f"at {cut}: {verdict.message}")
    if failed:
        raise _fail(f"{len(failed)} of {size - 1} split positions failed; " + "; ".join(failed[:3]))
    return f"delivered intact at all {size - 1} split positions"


def _byte_by_byte(s: Session, link: Link, data: Callable[[str], bytes], want: Delivery) -> str:
    _, sid = link.get()
    return _deliver(s, link, data, want, split_at=range(1, len(data(sid))), pause=0.001)


@_check(
    (
        "client.msg.segmented",
        "client.msg.byte-by-byte",
        "client.hmsg.segmented",
        "client.hmsg.byte-by-byte",
    )
)
def segmentation(s: Session) -> Iterator[CheckResult]:
    reply = "conformance.reply.2"
    msg = _msg(_SUBJECT, b"Hello World", reply)
    msg_want = Delivery(_SUBJECT, reply, b"Hello World")
    hmsg = _hmsg(_SUBJECT, b"Hello World", HEADER, reply)
    hmsg_want = Delivery(_SUBJECT, reply, b"Hello World", HEADER)
    with Link(s, _SUBJECT) as link:
        yield _row(s, "client.msg.segmented", lambda: _segmented(s, link, msg, msg_want))
        yield _row(s, "client.msg.byte-by-byte", lambda: _byte_by_byte(s, link, msg, msg_want))
        yield _row(s, "client.hmsg.segmented", lambda: _segmented(s, link, hmsg, hmsg_want))
        yield _row(s, "client.hmsg.byte-by-byte", lambda: _byte_by_byte(s, link, hmsg, hmsg_want))


# --- status lines ---------------------------------------------------------------------------------


def _answer_requests(
    block: headers.HeaderBlock,
) -> Callable[[FakeConnection, protocol.Event], None]:
    """A reaction: answer every PUB/HPUB with a reply subject by an HMSG carrying ``block`` to
    the client's subscription matching that reply subject."""

    def react(conn: FakeConnection, event: protocol.Event) -> None:
        if isinstance(event, protocol.Pub | protocol.HPub) and event.reply:
            sid = conn.sid_for(event.reply)
            if sid is None:
                conn.note(f"no subscription matches the reply subject {event.reply}")
                return
            conn.send(hmsg_op(event.reply, sid, _block(block), b""))

    return react


def _request_fails_no_responders(s: Session, block: headers.HeaderBlock) -> str:
    with connected(s, reactions=[_answer_requests(block)]):
        answer = s.call(
            "request", subject="conformance.nobody", headers=None, payload_b64="",
            timeout_ms=int(STEP * 1000), timeout=2 * STEP,
        )  # fmt: skip
    if answer.ok:
        raise _fail(f"the request succeeded: {_short(answer.result)}")
    if answer.error_type != "no_responders":
        raise _fail(f"the request failed with {_error_text(answer)}, not no_responders")
    return f"no_responders: {answer.error_message}"


def _status_delivery(s: Session, block: headers.HeaderBlock) -> str:
    with Link(s, "conformance.status") as link:
        conn, sid = link.get()
        conn.send(hmsg_op("conformance.status", sid, _block(block), b""))
        event = s.wait_event(_is("message", sub=link.sub), timeout=STEP, stop=_is("closed"))
    if event is None:
        raise _fail(f"not delivered within {STEP:g} s")
    outcome, message = compare_headers(block, event)
    if outcome != "pass":
        raise _fail(message)
    return message


@_check(
    (
        "client.status.503-no-responders",
        "client.status.503-with-headers",
        "client.status.408-description",
        "client.status.100-heartbeat",
    )
)
def status_lines(s: Session) -> Iterator[CheckResult]:
    yield _row(
        s,
        "client.status.503-no-responders",
        lambda: _request_fails_no_responders(s, headers.HeaderBlock(503, None, ())),
    )
    yield _row(
        s,
        "client.status.503-with-headers",
        lambda: _request_fails_no_responders(
            s, headers.HeaderBlock(503, None, (("Nats-Conformance", "1"),))
        ),
    )
    yield _row(
        s,
        "client.status.408-description",
        lambda: _status_delivery(s, headers.HeaderBlock(408, "Request Timeout", ())),
    )
    heartbeat = headers.HeaderBlock(
        100, "Idle Heartbeat", (("Nats-Last-Consumer", "0"), ("Nats-Last-Stream", "0"))
    )
    yield _row(s, "client.status.100-heartbeat", lambda: _status_delivery(s, heartbeat))


# --- -ERR -------------------------------------------------------------------------------------


def _reported(events: list[dict[str, Any]], text: str) -> bool:
    """Whether an error event carries the -ERR text."""
    return any(
        e.get("event") == "error" and text.lower() in str(e.get("message", "")).lower()
        for e in events
    )


def _closing_error(s: Session, text: str) -> str:
    with connected(s) as (_, conn):
        conn.send(err_op(text))
        conn.close()
        closed = s.wait_event(_is("closed"), timeout=STEP)
        events = s.seen(timeout=0.05)
    reported = _reported(events, text)
    if closed is None or not reported:
        raise _fail(
            f"closed reported: {closed is not None}, error text reported: {reported}; "
            f"events {_short(events)}"
        )
    return "error and close reported"


def _client_closes(s: Session) -> str:
    with connected(s) as (_, conn):
        conn.send(err_op(CLOSING_ERRORS[0]))
        if not conn.wait_closed(timeout=STEP):
            raise _fail(f"the connection is still open {STEP:g} s after the -ERR")
    return "the library closed the connection"


def _open_error(s: Session, text: str) -> str:
    with connected(s) as (_, conn):
        conn.send(err_op(text))
        flushed = _flush(s)
        after = conn.count()
        published = _publish(s, "conformance.after-err", b"still here")
        pub = conn.wait_for(protocol.Pub, timeout=STEP, after=after)
        events = s.seen(timeout=QUIET)
        closed = conn.closed_by_client or any(e.get("event") == "closed" for e in events)
    if closed or not flushed.ok or not published.ok or pub is None:
        raise _fail(
            f"closed: {closed}, flush: {'ok' if flushed.ok else _error_text(flushed)}, publish "
            f"{'sent' if pub else 'not sent'}; events {_short(events)}"
        )
    return f"still usable; error reported: {_reported(events, text)}"


ERROR_IDS = (
    *(f"client.err.closing.{_slug(t)}" for t in CLOSING_ERRORS),
    "client.err.closing.client-closes",
    *(f"client.err.open.{_slug(t)}" for t in OPEN_ERRORS),
)


@_check(ERROR_IDS)
def errors(s: Session) -> Iterator[CheckResult]:
    for text in CLOSING_ERRORS:
        yield _row(s, f"client.err.closing.{_slug(text)}", lambda t=text: _closing_error(s, t))
    yield _row(s, "client.err.closing.client-closes", lambda: _client_closes(s))
    for text in OPEN_ERRORS:
        yield _row(s, f"client.err.open.{_slug(text)}", lambda t=text: _open_error(s, t))


# --- INFO ----------------------------------------------------------------------------------------


def _usable(s: Session, conn: FakeConnection) -> str:
    """Flush, publish, no close: the connection is up and working."""
    flushed = _flush(s)
    after = conn.count()
    published = _publish(s, "conformance.info", b"up")
    pub = conn.wait_for(protocol.Pub, timeout=STEP, after=after)
    closed = any(e.get("event") == "closed" for e in s.seen())
    if closed or conn.closed_by_client or not flushed.ok or not published.ok or pub is None:
        raise _fail(
            f"closed: {closed or conn.closed_by_client}, flush ok: {flushed.ok}, "
            f"publish sent: {pub is not None}; events {_short(s.seen())}"
        )
    return "connected and usable"


@_check(
    (
        "client.info.initial-connect-urls",
        "client.info.async-connect-urls",
        "client.info.async-lower-case",
        "client.info.oversized.2k",
        "client.info.oversized.128k",
    )
)
def info_messages(s: Session) -> Iterator[CheckResult]:
    with FakeServer() as other:  # a 127.0.0.1 address for connect_urls that accepts, nothing more
        urls = [f"127.0.0.1:{other.port}"]

        def initial() -> str:
            with connected(s, info={"connect_urls": urls}) as (_, conn):
                return _usable(s, conn)

        def async_info(lower: bool) -> str:
            with connected(s) as (server, conn):
                connect = conn.wait_connect(timeout=STEP)
                if not lower and (connect is None or connect.options.get("protocol") != 1):
                    level = connect and connect.options.get("protocol", "absent")
                    raise Verdict("skip", f"the client sent protocol {level}, not 1")
                line = info_op({**server.info, "connect_urls": urls})
                conn.send(_respace(line, b" ", bytes.lower) if lower else line)
                return _usable(s, conn)

        def oversized(size: int) -> str:
            try:
                with connected(s, info_size=size) as (server, conn):
                    return f"{len(server.info_line())}-byte INFO: " + _usable(s, conn)
            except Verdict as verdict:  # here not connecting is the library's answer
                raise _fail(verdict.message) from None

        yield _row(s, "client.info.initial-connect-urls", initial)
        yield _row(s, "client.info.async-connect-urls", lambda: async_info(False))
        yield _row(s, "client.info.async-lower-case", lambda: async_info(True))
        yield _row(s, "client.info.oversized.2k", lambda: oversized(2048))
        yield _row(s, "client.info.oversized.128k", lambda: oversized(128 * 1024))


# --- the header API -------------------------------------------------------------------------------


# --- the runner ---------------------------------------------------------------------------------


def all_definitions() -> list[CheckDef]:
    """Every row the checks produce, in order (the static table and the vector-derived rows)."""
    return [d for check in CLIENT_CHECKS for d in check.definitions()]


def write_result(
    client: ClientTarget, writer: ResultsWriter, ctx: RunContext, result: CheckResult
) -> ResultRow:
    """Write one client row, with its requirement and transcript as details."""
    return ctx.record(
        writer,
        (client.name, "client", client.version),
        (result.case_id, result.group, result.level),
        Found(result.outcome, result.message, result.duration_ms, result.transcript),
        source=result.source,
        description=result.description,
    )


def run_client_checks(
    client: ClientTarget,
    writer: ResultsWriter,
    ctx: RunContext,
    *,
    checks: list[RegisteredCheck] | None = None,
) -> list[ResultRow]:
    """Run the checks (all by default) on one client; write each row as soon as it is known."""
    return [
        write_result(client, writer, ctx, result)
        for check in (CLIENT_CHECKS if checks is None else checks)
        for result in check(client)
    ]
