"""The NATS client protocol, sans-I/O: bytes in, typed events out; typed operations in, bytes out.

``Parser`` is fed bytes in any chunking and returns the operations it completed, in order, plus
``ProtocolError`` values where the input breaks the protocol. It never raises for bad input: an
error is a value carrying a reason, the -ERR text the documents give (client-protocol.txt,
"+OK/ERR") and whether the documents say the connection closes. ``encode`` produces the canonical
bytes of an operation, or an ``EncodeError`` when the operation cannot be put on the wire.

Strictness follows the documents, not any one implementation: CRLF ends every line
("Newlines"), fields are separated by runs of spaces or tabs ("Field Delimiters"), operation
names are case-insensitive ("Protocol messages"), sizes are decimal digits.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from . import subjects

CRLF = b"\r\n"
# client-protocol.txt, "+OK/ERR": "the maximum control line value ... The default is 1024 bytes."
DEFAULT_MAX_CONTROL_LINE = 1024
# client-protocol.txt, "INFO" example: "max_payload":1048576.
DEFAULT_MAX_PAYLOAD = 1048576
# The smallest header block: the version line and the blank line (adr-4-headers.txt).
HEADER_VERSION_PREFIX = b"NATS/"
HEADER_TERMINATOR = b"\r\n\r\n"


class Direction(StrEnum):
    """Who sent the bytes being parsed."""

    CLIENT = "client"  # a client's bytes, parsed by a server
    SERVER = "server"  # a server's bytes, parsed by a client


# The documents define max_control_line as a server option on what clients send; they set no
# limit on lines a client reads. Bytes in the server direction are bounded only by this, so an
# incremental parser never buffers without end (real INFOs with many connect_urls pass 1024).
SERVER_LINE_BOUND = 1 << 20


@dataclass(frozen=True)
class Limits:
    """``max_control_line`` None: the direction's default (``DEFAULT_MAX_CONTROL_LINE`` for bytes
    a client sends, ``SERVER_LINE_BOUND`` for bytes a server sends)."""

    max_control_line: int | None = None
    max_payload: int = DEFAULT_MAX_PAYLOAD

    def control_line(self, direction: Direction) -> int:
        if self.max_control_line is not None:
            return self.max_control_line
        return DEFAULT_MAX_CONTROL_LINE if direction is Direction.CLIENT else SERVER_LINE_BOUND


# --- operations -------------------------------------------------------------------------------


@dataclass(slots=True)
class Info:
    options: dict[str, Any]


@dataclass(slots=True)
class Connect:
    options: dict[str, Any]


@dataclass(slots=True)
class Pub:
    subject: str
    reply: str | None
    payload: bytes


@dataclass(slots=True)
class HPub:
    subject: str
    reply: str | None
    headers: bytes
    payload: bytes


@dataclass(slots=True)
class Sub:
    subject: str
    queue: str | None
    sid: str


@dataclass(slots=True)
class Unsub:
    sid: str
    max_msgs: int | None


@dataclass(slots=True)
class Msg:
    subject: str
    sid: str
    reply: str | None
    payload: bytes


@dataclass(slots=True)
class HMsg:
    subject: str
    sid: str
    reply: str | None
    headers: bytes
    payload: bytes


@dataclass(slots=True)
class Ping:
    pass


@dataclass(slots=True)
class Pong:
    pass


@dataclass(slots=True)
class Ok:
    pass


@dataclass(slots=True)
class Err:
    message: str  # the text after "-ERR ", quotes included

    @property
    def text(self) -> str:
        """The message without the single quotes the server puts around it."""
        m = self.message
        return m[1:-1] if len(m) >= 2 and m[0] == m[-1] == "'" else m


Op = Info | Connect | Pub | HPub | Sub | Unsub | Msg | HMsg | Ping | Pong | Ok | Err

OP_NAMES: dict[type, str] = {
    Info: "INFO", Connect: "CONNECT", Pub: "PUB", HPub: "HPUB", Sub: "SUB", Unsub: "UNSUB",
    Msg: "MSG", HMsg: "HMSG", Ping: "PING", Pong: "PONG", Ok: "+OK", Err: "-ERR",
}  # fmt: skip
OP_TYPES: dict[str, type] = {name: cls for cls, name in OP_NAMES.items()}

# Which side may send which operation (client-protocol.txt, "Protocol messages": "Sent By").
SENT_BY: dict[Direction, frozenset[str]] = {
    Direction.CLIENT: frozenset({"CONNECT", "PUB", "HPUB", "SUB", "UNSUB", "PING", "PONG"}),
    Direction.SERVER: frozenset({"INFO", "MSG", "HMSG", "PING", "PONG", "+OK", "-ERR"}),
}


# --- errors -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProtocolError:
    """A protocol violation: the reason, the documents' -ERR text (if any) and its consequence."""

    reason: str
    err: str | None
    closes: bool
    detail: str = ""
    # The operation as sent, when the error is about a subject it carries rather than its
    # framing: whoever watches a client (a test server) still sees what it sent.
    op: Op | None = field(default=None, compare=False)

    def to_err(self) -> Err | None:
        """The -ERR a server sends for this error, or None where the documents give no text."""
        return Err(f"'{self.err}'") if self.err is not None else None


# reason -> (-ERR text a server sends, whether the connection closes): client-protocol.txt,
# "+OK/ERR".
SERVER_ERRORS: dict[str, tuple[str | None, bool]] = {
    "unknown_operation": ("Unknown Protocol Operation", True),
    "parser_error": ("Parser Error", True),
    "max_control_line_exceeded": ("Maximum Control Line Exceeded", True),
    "max_payload_exceeded": ("Maximum Payload Violation", True),
    "invalid_subject": ("Invalid Subject", False),
    "authorization_violation": ("Authorization Violation", True),
    # The documents give no text for these; a server cannot go on parsing either way.
    "invalid_json": ("Parser Error", True),
    "headers_not_enabled": (None, True),
}


# -ERR texts a server sends (client-protocol.txt, "+OK/ERR"): those after which the connection is
# no longer valid, and the starts of those after which it stays open (the permission ones end
# with the subject).
CLOSING_ERRORS: tuple[str, ...] = (
    "Unknown Protocol Operation",
    "Attempted To Connect To Route Port",
    "Authorization Violation",
    "Authorization Timeout",
    "Invalid Client Protocol",
    "Maximum Control Line Exceeded",
    "Parser Error",
    "Secure Connection - TLS Required",
    "Stale Connection",
    "Maximum Connections Exceeded",
    "Slow Consumer",
    "Maximum Payload Violation",
)
OPEN_ERRORS: tuple[str, ...] = (
    "Invalid Subject",
    "Permissions Violation for Subscription to",
    "Permissions Violation for Publish to",
)


def err_closes(message: str) -> bool | None:
    """Whether the documents say the connection closes after ``-ERR message`` (the text after
    ``-ERR ``, quotes included); None for a text they do not list."""
    text = message.strip()
    if len(text) >= 2 and text[0] == text[-1] == "'":
        text = text[1:-1]
    if text in CLOSING_ERRORS:
        return True
    if any(text == start or text.startswith(start + " ") for start in OPEN_ERRORS):
        return False
    return None


def protocol_error(reason: str, direction: Direction, detail: str = "") -> ProtocolError:
    """The error value for ``reason``; a client finding it in server bytes has no -ERR to send."""
    err, closes = SERVER_ERRORS[reason]
    if direction is Direction.SERVER:
        err, closes = None, True
    return ProtocolError(reason, err, closes, detail)


Event = Op | ProtocolError


@dataclass(slots=True)
class EncodeError:
    reason: str
    detail: str = ""


# --- parser -----------------------------------------------------------------------------------

_DEFERRED = object()  # a pending payload to skip, after which a stored error is reported
# While a payload is awaited: (what to build, its leading arguments, header size, total size).
_Pending = tuple[Any, tuple[Any, ...], int, int]


# name -> (has a sid, has a header size)
_PAYLOAD_OPS: dict[str, tuple[bool, bool]] = {
    "PUB": (False, False), "HPUB": (False, True), "MSG": (True, False), "HMSG": (True, True),
}  # fmt: skip
_PAYLOAD_KINDS: dict[str, type] = {"PUB": Pub, "HPUB": HPub, "MSG": Msg, "HMSG": HMsg}

# The canonical shape of each payload operation (upper-case name, single spaces, digit sizes),
# matched straight off the buffer. Anything else takes the general path, which gives the same
# events more slowly, and the errors. Groups: subject, sid, reply, header size, size. The reply
# group of the header operations must be able to give back its token to the header size.
_TOK = rb"([^ \t\r\n\x0b\x0c]++) "
_FAST_PATHS: dict[
    Direction, dict[int, tuple[type, Callable[[bytes, int], re.Match[bytes] | None]]]
] = {
    Direction.SERVER: {
        ord("M"): (
            Msg,
            re.compile(rb"MSG " + _TOK + _TOK + rb"(?:" + _TOK + rb")?+()(\d++)\r\n").match,
        ),
        ord("H"): (
            HMsg,
            re.compile(rb"HMSG " + _TOK + _TOK + rb"(?:" + _TOK + rb")?(\d++) (\d++)\r\n").match,
        ),
    },
    Direction.CLIENT: {
        ord("P"): (Pub, re.compile(rb"PUB " + _TOK + rb"()(?:" + _TOK + rb")?+()(\d++)\r\n").match),
        ord("H"): (
            HPub,
            re.compile(rb"HPUB " + _TOK + rb"()(?:" + _TOK + rb")?(\d++) (\d++)\r\n").match,
        ),
    },
}


def _text(token: bytes) -> str:
    # Lossless for any bytes: what is not UTF-8 stays visible as surrogates and fails validation.
    return token.decode("utf-8", "surrogateescape")


@dataclass
class Parser:
    """Incremental parser for one direction of one connection."""

    direction: Direction
    limits: Limits = field(default_factory=Limits)
    headers: bool = True  # whether CONNECT enabled headers (a CONNECT in the stream updates it)
    pedantic: bool = False  # CONNECT pedantic: subjects of PUB/HPUB are checked too
    closed: bool = False
    _buf: bytes = b""
    _pending: _Pending | None = None
    _from_client: bool = field(init=False)

    def __post_init__(self) -> None:
        self._from_client = self.direction is Direction.CLIENT

    @property
    def incomplete(self) -> bool:
        """True when the bytes fed so far end inside an operation."""
        return not self.closed and (bool(self._buf) or self._pending is not None)

    def feed(self, data: bytes) -> list[Event]:
        """Parse ``data`` (any chunk of the stream); return the events it completes."""
        if self.closed:
            return []
        buf = self._buf + data if self._buf else bytes(data)
        pos, end = 0, len(buf)
        events: list[Event] = []
        append = events.append
        fast_paths = _FAST_PATHS[self.direction]
        max_line = self.limits.control_line(self.direction)
        pending = self._pending
        while True:
            if pending is None:
                if pos >= end:
                    break
                result: Event | _Pending | None
                fast = fast_paths.get(buf[pos])
                m = fast[1](buf, pos) if fast is not None else None
                if m is not None and (line_end := m.end()) - pos - 2 <= max_line:
                    subject, sid, reply, hdr, size = m.groups()
                    pos = line_end
                    result = self._payload_op(
                        fast[0], subject, sid or None, reply, hdr or None, size
                    )
                else:
                    nl = buf.find(b"\n", pos)
                    if nl < 0:
                        if end - pos > max_line + 1:
                            return self._close(
                                events,
                                "max_control_line_exceeded",
                                f"no line end in {end - pos} bytes",
                            )
                        break
                    if nl == pos or buf[nl - 1] != 13:
                        return self._close(events, "parser_error", "line not ended by CRLF")
                    if nl - 1 - pos > max_line:
                        return self._close(
                            events,
                            "max_control_line_exceeded",
                            f"control line of {nl - 1 - pos} bytes",
                        )
                    result = self._control_line(buf[pos : nl - 1])
                    pos = nl + 1
                if type(result) is tuple:
                    pending = result
                elif result is not None:
                    append(result)
                    if type(result) is ProtocolError and result.closes:
                        return self._close(events)
                    continue
                else:
                    continue
            kind, args, hdr_len, total = pending
            stop = pos + total
            if end < stop + 2:
                break
            if buf[stop : stop + 2] != CRLF:
                return self._close(
                    events, "parser_error", "payload not followed by CRLF (size mismatch)"
                )
            pending = None
            if kind is Msg or kind is Pub:
                append(kind(*args, buf[pos:stop]))
            elif kind is _DEFERRED:
                append(args[0])
            else:
                block = buf[pos : pos + hdr_len]
                if not (
                    block.startswith(HEADER_VERSION_PREFIX) and block.endswith(HEADER_TERMINATOR)
                ):
                    return self._close(
                        events, "parser_error", "header block is not NATS/... CRLF CRLF"
                    )
                append(kind(*args, block, buf[pos + hdr_len : stop]))
            pos = stop + 2
        self._pending = pending
        self._buf = buf[pos:] if pos < end else b""
        return events

    def _close(self, events: list[Event], reason: str = "", detail: str = "") -> list[Event]:
        """Stop parsing for good, after appending the closing error named by ``reason``, if any."""
        if reason:
            events.append(self._error(reason, detail))
        self.closed = True
        self._buf = b""
        self._pending = None
        return events

    def _error(self, reason: str, detail: str) -> ProtocolError:
        return protocol_error(reason, self.direction, detail)

    def _control_line(self, line: bytes) -> Event | _Pending:
        """One control line: an event, an error, or what to build once a payload is in."""
        if line[:1] in (b" ", b"\t"):
            return self._error(
                "unknown_operation", f"control line starts with a delimiter {line[:40]!r}"
            )
        if b"\r" in line or b"\x0b" in line or b"\x0c" in line:
            return self._error("parser_error", f"control character in control line {line[:40]!r}")
        parts = line.split(None, 1)
        name = parts[0].upper().decode("latin-1") if parts else ""
        if name not in SENT_BY[self.direction]:
            return self._error(
                "unknown_operation", f"operation {name[:20]!r} from the {self.direction.value}"
            )
        return _HANDLERS[name](self, parts[1] if len(parts) > 1 else b"")

    # Each handler gets the bytes after the operation name.

    def _json_op(self, cls: type, rest: bytes) -> Event:
        text = rest.strip(b" \t")
        try:
            options = json.loads(text, parse_constant=_reject_constant)
        except (ValueError, RecursionError) as exc:
            return self._error("invalid_json", f"{cls.__name__.upper()} body is not JSON: {exc}")
        if not isinstance(options, dict):
            return self._error("invalid_json", "the JSON is not an object")
        if cls is Connect:
            self.headers = options.get("headers") is True
            self.pedantic = options.get("pedantic") is True
        return cls(options)

    def _info(self, rest: bytes) -> Event:
        return self._json_op(Info, rest)

    def _connect(self, rest: bytes) -> Event:
        return self._json_op(Connect, rest)

    def _payload_args(self, name: str, rest: bytes) -> Event | _Pending:
        """PUB/HPUB/MSG/HMSG from a split control line: sort the arguments by position."""
        has_sid, has_headers = _PAYLOAD_OPS[name]
        args = rest.split()
        fixed = 2 + has_sid + has_headers
        if len(args) not in (fixed, fixed + 1):
            return self._error(
                "parser_error", f"{name} takes {fixed} or {fixed + 1} arguments, got {len(args)}"
            )
        if not all(a.isdigit() for a in args[-1 - has_headers :]):
            return self._error("parser_error", f"{name} sizes must be decimal digits")
        reply = args[1 + has_sid] if len(args) > fixed else None
        return self._payload_op(
            _PAYLOAD_KINDS[name], args[0], args[1] if has_sid else None, reply,
            args[-2] if has_headers else None, args[-1],
        )  # fmt: skip

    def _payload_op(
        self,
        kind: type,
        subject_b: bytes,
        sid: bytes | None,
        reply_b: bytes | None,
        hdr: bytes | None,
        size: bytes,
    ) -> Event | _Pending:
        """What to build once the payload is in, or an error (callers checked the sizes)."""
        total = int(size)
        hdr_len = 0
        if hdr is not None:
            hdr_len = int(hdr)
            if not self.headers:
                return self._error(
                    "headers_not_enabled", "a header operation without headers enabled in CONNECT"
                )
            if hdr_len > total:
                return self._error(
                    "parser_error", f"header size {hdr_len} above total size {total}"
                )
        try:
            subject = subject_b.decode()
            reply = None if reply_b is None else reply_b.decode()
            sid_text = None if sid is None else sid.decode()
        except UnicodeDecodeError:  # not UTF-8: kept visible as surrogates (see _text)
            subject, reply, sid_text = (
                None if b is None else _text(b) for b in (subject_b, reply_b, sid)
            )
        if self._from_client:
            if total > self.limits.max_payload:
                return self._error(
                    "max_payload_exceeded",
                    f"{total} bytes above max_payload {self.limits.max_payload}",
                )
            if self.pedantic and not (
                subjects.is_valid(subject, "publish")
                and (reply is None or subjects.is_valid(reply, "reply"))
            ):
                # The payload still has to be skipped; the error is reported after it.
                return (
                    _DEFERRED,
                    (self._error("invalid_subject", f"publish subject {subject!r}"),),
                    0,
                    total,
                )
        return (
            kind,
            (subject, reply) if sid_text is None else (subject, sid_text, reply),
            hdr_len,
            total,
        )

    def _pub(self, rest: bytes) -> Event | _Pending:
        return self._payload_args("PUB", rest)

    def _hpub(self, rest: bytes) -> Event | _Pending:
        return self._payload_args("HPUB", rest)

    def _msg(self, rest: bytes) -> Event | _Pending:
        return self._payload_args("MSG", rest)

    def _hmsg(self, rest: bytes) -> Event | _Pending:
        return self._payload_args("HMSG", rest)

    def _sub(self, rest: bytes) -> Event:
        args = rest.split()
        if len(args) not in (2, 3):
            return self._error("parser_error", f"SUB takes 2 or 3 arguments, got {len(args)}")
        subject = _text(args[0])
        sub = Sub(subject, _text(args[1]) if len(args) == 3 else None, _text(args[-1]))
        if not subjects.is_valid(subject, "subscribe"):
            error = self._error("invalid_subject", f"subscription subject {subject!r}")
            return ProtocolError(error.reason, error.err, error.closes, error.detail, sub)
        return sub

    def _unsub(self, rest: bytes) -> Event:
        args = rest.split()
        if len(args) not in (1, 2) or (len(args) == 2 and not args[1].isdigit()):
            return self._error("parser_error", f"UNSUB arguments {rest[:60]!r}")
        return Unsub(_text(args[0]), int(args[1]) if len(args) == 2 else None)

    def _bare(self, cls: type, rest: bytes) -> Event:
        if rest.strip(b" \t"):
            return self._error("parser_error", f"{OP_NAMES[cls]} takes no arguments")
        return cls()

    def _ping(self, rest: bytes) -> Event:
        return self._bare(Ping, rest)

    def _pong(self, rest: bytes) -> Event:
        return self._bare(Pong, rest)

    def _ok(self, rest: bytes) -> Event:
        return self._bare(Ok, rest)

    def _err(self, rest: bytes) -> Event:
        message = rest.strip(b" \t")
        if not message:
            return self._error("parser_error", "-ERR without a message")
        return Err(_text(message))


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_HANDLERS: dict[str, Callable[[Parser, bytes], Event | _Pending]] = {
    "INFO": Parser._info, "CONNECT": Parser._connect, "PUB": Parser._pub, "HPUB": Parser._hpub,
    "SUB": Parser._sub, "UNSUB": Parser._unsub, "MSG": Parser._msg, "HMSG": Parser._hmsg,
    "PING": Parser._ping, "PONG": Parser._pong, "+OK": Parser._ok, "-ERR": Parser._err,
}  # fmt: skip


def parse(data: bytes, direction: Direction, **options: Any) -> tuple[list[Event], bool]:
    """Parse a whole byte string; return its events and whether it ended inside an operation."""
    parser = Parser(direction, **options)
    events = parser.feed(data)
    return events, parser.incomplete


# --- encoder ----------------------------------------------------------------------------------


def _token_error(name: str, value: str | None, optional: bool = False) -> EncodeError | None:
    """A field that must be one non-empty token on the control line."""
    if value is None:
        return None if optional else EncodeError("missing_field", f"{name} is required")
    if not value or any(c in value for c in " \t\r\n"):
        return EncodeError("invalid_token", f"{name} {value!r} is not one non-empty token")
    return None


def _subject_error(op: Op) -> EncodeError | None:
    use = "subscribe" if isinstance(op, Sub) else "publish"
    if isinstance(op, Pub | HPub | Sub) and not subjects.is_valid(op.subject, use):
        return EncodeError("invalid_subject", f"{op.subject!r} is not a valid {use} subject")
    reply = getattr(op, "reply", None)
    if reply is not None and not subjects.is_valid(reply, "reply"):
        return EncodeError("invalid_subject", f"reply {reply!r} is not a valid reply subject")
    return None


def _headers_error(block: bytes) -> EncodeError | None:
    if not (block.startswith(HEADER_VERSION_PREFIX) and block.endswith(HEADER_TERMINATOR)):
        return EncodeError(
            "invalid_headers", "a header block starts with NATS/ and ends with CRLF CRLF"
        )
    return None


def encode(op: Op, *, any_headers: bool = False) -> bytes | EncodeError:
    """The canonical bytes of ``op``: upper-case name, single spaces, compact JSON, CRLF.

    ``any_headers``: frame the header block by its length whatever it holds, for a test server
    that delivers blocks the documents reject (to see what a client makes of them)."""
    name = OP_NAMES[type(op)].encode()
    if isinstance(op, Info | Connect):
        return (
            name
            + b" "
            + json.dumps(op.options, separators=(",", ":"), ensure_ascii=False).encode()
            + CRLF
        )
    if isinstance(op, Ping | Pong | Ok):
        return name + CRLF
    if isinstance(op, Err):
        if not op.message or any(c in op.message for c in "\r\n"):
            return EncodeError("invalid_token", "an -ERR message is one non-empty line")
        return name + b" " + op.message.encode("utf-8", "surrogateescape") + CRLF
    tokens: list[tuple[str, str | None, bool]] = []
    if isinstance(op, Unsub):
        tokens = [("sid", op.sid, False)]
    elif isinstance(op, Sub):
        tokens = [("subject", op.subject, False), ("queue", op.queue, True), ("sid", op.sid, False)]
    else:
        tokens = [("subject", op.subject, False)]
        if isinstance(op, Msg | HMsg):
            tokens.append(("sid", op.sid, False))
        tokens.append(("reply", op.reply, True))
    for field_name, value, optional in tokens:
        problem = _token_error(field_name, value, optional)
        if problem:
            return problem
    problem = _subject_error(op)
    if problem:
        return problem
    args = [v for _, v, _ in tokens if v is not None]
    if isinstance(op, Unsub) and op.max_msgs is not None:
        if op.max_msgs < 0:
            return EncodeError("invalid_size", "max_msgs is a non-negative number")
        args.append(str(op.max_msgs))
    body = b""
    if isinstance(op, Pub | Msg):
        args.append(str(len(op.payload)))
        body = op.payload + CRLF
    elif isinstance(op, HPub | HMsg):
        problem = None if any_headers else _headers_error(op.headers)
        if problem:
            return problem
        args += [str(len(op.headers)), str(len(op.headers) + len(op.payload))]
        body = op.headers + op.payload + CRLF
    line = " ".join(args).encode("utf-8", "surrogateescape")
    return name + b" " + line + CRLF + body


# --- JSON-shaped views (vectors, transcripts) ----------------------------------------------------

_FIELDS: dict[type, tuple[str, ...]] = {
    cls: tuple(cls.__dataclass_fields__)
    for cls in OP_NAMES  # type: ignore[attr-defined]
}
_OPTIONAL = frozenset({"reply", "queue", "max_msgs"})


def op_fields(op: Op) -> dict[str, Any]:
    """``{"op": NAME, field: value, ...}`` with bytes fields as bytes."""
    out: dict[str, Any] = {"op": OP_NAMES[type(op)]}
    for name in _FIELDS[type(op)]:
        out[name] = getattr(op, name)
    return out


def op_from_fields(fields: dict[str, Any]) -> Op:
    """Inverse of ``op_fields``; optional fields left out are None. ValueError if malformed."""
    cls = OP_TYPES.get(fields.get("op", ""))
    if cls is None:
        raise ValueError(f"unknown op {fields.get('op')!r}")
    names = _FIELDS[cls]
    unknown = set(fields) - set(names) - {"op"}
    if unknown:
        raise ValueError(f"{fields['op']} has no field {sorted(unknown)[0]!r}")
    missing = [n for n in names if n not in fields and n not in _OPTIONAL]
    if missing:
        raise ValueError(f"{fields['op']} needs field {missing[0]!r}")
    return cls(**{n: fields.get(n) for n in names})


def event_fields(event: Event) -> dict[str, Any]:
    if isinstance(event, ProtocolError):
        return {"error": {"reason": event.reason, "err": event.err, "closes": event.closes}}
    return op_fields(event)
