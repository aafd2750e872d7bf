"""Judge an implementation's answer to a vector case against what the case expects.

The reference answers a case through ``conformance.vectors``; a real library answers through its
driver. Both answers take one form per kind (a validity, a header block, encoded bytes, a header
operation's result, or ``Rejected``), and the comparisons here are the only ones: the harness
asks this module, it does not compare on its own. Pure: no I/O.

Rules every comparison shares:
- ``Rejected`` is any refusal (an error, a local validation failure). Implementations do not use
  the vectors' error names, so a rejection matches an expected error of any reason.
- The order of different header keys is not judged when only it differs: ADR-4 keeps the values
  of one key in order and says nothing of the order across keys (APIs group values by key). The
  message says so, so a reader sees the difference.
- Encoded header blocks are compared in one place (``same_block``), whatever path produced them.
- What the documents leave to a client (closing the connection on bad bytes from a server,
  reporting them, a library's own validator where no document asks for one) is recorded, not
  judged: a ``Judgement`` carries what the implementation did (``observed``) for the row.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from . import headers, protocol, subjects
from .vector_values import decode_bytes
from .verdicts import CONFORMANCE, ROBUSTNESS, derived_level

Outcome = Literal["pass", "fail"]
SHOWN = 300  # characters of one value a message shows


@dataclass(frozen=True)
class Judgement:
    outcome: Outcome
    message: str
    # What the implementation did, as plain data for conformance.verdicts.observation (None:
    # nothing observed beyond the outcome).
    observed: Any = None
    # robustness: the implementation hung or lost its footing (conformance.verdicts.settle fails
    # it at every level); conformance: it did or did not do what the documents say.
    category: str = CONFORMANCE


@dataclass(frozen=True)
class Rejected:
    """The implementation refused the input; ``detail`` is its own words."""

    detail: str


@dataclass(frozen=True)
class Malformed:
    """What an implementation sent is not a well-formed operation; ``detail`` is the reference
    parser's reason."""

    detail: str


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= SHOWN else text[:SHOWN] + f"... ({len(text)} characters)"


def _pass(message: str, observed: Any = None) -> Judgement:
    return Judgement("pass", message, observed)


def _fail(message: str, observed: Any = None) -> Judgement:
    return Judgement("fail", message, observed)


# What changes between two runs of one library without saying anything of what it did: times,
# durations, the fake server's port, object addresses in a library's own words. (Inbox names and
# NUIDs are conformance.verdicts.observation's to scrub.)
_RUN_NOISE = (
    (re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?"),
     "<time>"),
    (re.compile(r"\b\d+(\.\d+)?(h|m|s|ms|us|µs|ns)(\d+(\.\d+)?(m|s|ms|us|µs|ns))*\b"
                r"|\b\d+(\.\d+)? ?(seconds?|secs?|milliseconds?|millis|s)\b"), "<duration>"),
    (re.compile(r"\b(127\.0\.0\.1|localhost|0\.0\.0\.0|\[::1\]):\d+"), r"\1:<port>"),
    (re.compile(r"\b0x[0-9a-fA-F]{6,}\b"), "0x<address>"),
)  # fmt: skip


def steady(text: str) -> str:
    """A library's words with times, durations, ports and addresses replaced by placeholders."""
    for pattern, placeholder in _RUN_NOISE:
        text = pattern.sub(placeholder, text)
    return text


def view(got: Any) -> Any:
    """What an implementation answered, as plain data for an observation
    (``conformance.verdicts.observation``): a refusal in its steady words, a header block as its
    status line and fields, bytes as text, an operation as its fields."""
    if isinstance(got, Rejected):
        return {"refused": steady(got.detail)}
    if isinstance(got, Malformed):
        return {"malformed": got.detail}
    if isinstance(got, headers.HeaderBlock):
        return {"status": got.status, "description": got.description,
                "headers": [list(pair) for pair in got.fields]}  # fmt: skip
    if isinstance(got, bytes):
        return got.decode("utf-8", "backslashreplace")
    if isinstance(got, protocol.Op):
        return {name: view(value) for name, value in protocol.op_fields(got).items()}
    if isinstance(got, Delivery):
        return {"sid": got.sid, "subject": got.subject, "reply": got.reply,
                "payload": view(got.payload), "block": view(got.block)}  # fmt: skip
    return got


def grouped(pairs: list[tuple[str, str]]) -> dict[str, list[str]]:
    """Header pairs as {name: values in order}: what ADR-4 fixes about their order."""
    out: dict[str, list[str]] = {}
    for name, value in pairs:
        out.setdefault(name, []).append(value)
    return out


def _same_fields(want: list[tuple[str, str]], got: list[tuple[str, str]]) -> str | None:
    """None when the fields differ; else "" (identical) or a note (only the key order differs)."""
    if got == want:
        return ""
    if grouped(got) == grouped(want):
        return " (keys in another order; each key's values in order)"
    return None


# A quoted statement that asks a client to validate: "clients must check ...", "a client should
# reject ..." (the word after the client gives the level).
_CLIENT_VALIDATES = re.compile(
    r"\bclients?\b[^.]*?\b(?P<word>must|should|may)\b[^.]*?\b(validat|check|reject|refus)",
    re.IGNORECASE,
)


def validator_level(case_level: str, quote: str) -> str:
    """The level of a library's own validator's answer (validate_subject, validate_name): what
    goes on the wire is what the documents constrain, so the validator's answer is an observation
    (``info``) unless the quoted statement asks clients to validate; then that statement's word,
    never above the case."""
    found = _CLIENT_VALIDATES.search(quote)
    return "info" if found is None else derived_level(case_level, found["word"].lower())


def judge_valid(expect: dict[str, Any], got: bool) -> Judgement:
    """subject.validate and name.validate: the implementation's verdict on validity."""
    observed = {"valid": got}
    said = "valid" if got else "invalid"
    if got == expect["valid"]:
        return _pass(f"{said}, as the documents say", observed)
    documented = "valid" if expect["valid"] else "invalid"
    return _fail(f"the implementation says {said}, documents say {documented}", observed)


def expected_block(expect: dict[str, Any]) -> headers.HeaderBlock | None:
    """The header block a headers.parse case expects; None when it expects an error."""
    if "error" in expect:
        return None
    fields = tuple((name, value) for name, value in expect.get("headers", []))
    return headers.HeaderBlock(expect.get("status"), expect.get("description"), fields)


def judge_header_block(expect: dict[str, Any], got: headers.HeaderBlock | Rejected) -> Judgement:
    """headers.parse: what the implementation made of a header block."""
    want = expected_block(expect)
    if want is None:
        if isinstance(got, Rejected):
            return _pass(f"rejected ({expect['error']} expected): {got.detail}", view(got))
        return _fail(
            f"accepted a block the documents reject ({expect['error']}): {_short(got)}", view(got)
        )
    return judge_block(want, got)


def judge_block(want: headers.HeaderBlock, got: headers.HeaderBlock | Rejected) -> Judgement:
    """A header block as an implementation presents it against the block the documents give."""
    if isinstance(got, Rejected):
        return _fail(f"rejected a valid block: {got.detail}", view(got))
    problems = []
    if got.status != want.status:
        problems.append(f"status {got.status!r}, documents {want.status!r}")
    if got.description != want.description:
        problems.append(f"description {got.description!r}, documents {want.description!r}")
    note = _same_fields(list(want.fields), list(got.fields))
    if note is None:
        problems.append(
            f"headers {_short(list(got.fields))}, documents {_short(list(want.fields))}"
        )
    if problems:
        return _fail("; ".join(problems), view(got))
    return _pass(
        f"status {want.status}, {len(want.fields)} header(s) as documented{note}", view(got)
    )


def same_block(want: bytes, got: bytes) -> str | None:
    """Whether ``got`` is the header block ``want`` by ADR-4's words; the one comparison of
    encoded blocks, on every path. None when it is not; else "" (the same bytes) or a note on
    what differs that ADR-4 leaves free: whitespace around a value ("optional leading
    whitespace, the field value, and optional trailing whitespace") and the order across names.
    Names keep their case (APPEND "is case-preserving"), a name's values their order."""
    if got == want:
        return ""
    parsed, reference = headers.parse_block(got), headers.parse_block(want)
    if not (isinstance(parsed, headers.HeaderBlock) and isinstance(reference, headers.HeaderBlock)):
        return None
    if (parsed.status, parsed.description) != (reference.status, reference.description):
        return None
    note = _same_fields(list(reference.fields), list(parsed.fields))
    if note is None:
        return None
    return note or " (the same fields; optional whitespace differs)"


def judge_encoded_block(expect: dict[str, Any], got: bytes | Rejected) -> Judgement:
    """headers.encode: the block the implementation produced for the case's headers."""
    observed = view(got) if isinstance(got, Rejected) else {"block": view(got)}
    if "error" in expect:
        if isinstance(got, Rejected):
            return _pass(f"refused ({expect['error']} expected): {got.detail}", observed)
        return _fail(
            f"encoded headers the documents refuse ({expect['error']}) as {_short(got)}", observed
        )
    if isinstance(got, Rejected):
        return _fail(f"refused headers the documents allow: {got.detail}", observed)
    want = decode_bytes(expect["block"], "expect.block")
    note = same_block(want, got)
    if note is None:
        return _fail(f"block {_short(got)}, documents {_short(want)}", observed)
    return _pass(f"block {_short(got)}{note}", observed)


def judge_header_op(
    inp: dict[str, Any], expect: dict[str, Any], got: dict[str, Any] | Rejected
) -> Judgement:
    """headers.op: the result of get, values, set, delete or append through a header API."""
    seen = view(got)
    if isinstance(got, Rejected):
        return _fail(f"the operation failed: {got.detail}", seen)
    if inp["op"] == "get":
        want_value = expect.get("value", "")
        value = got.get("value")
        if value is None and not _present(inp):
            # The driver protocol answers null for an absent key, so that an absent key and an
            # empty value stay apart; ADR-4's GET gives "an empty string" then: the same answer.
            value = ""
        if value == want_value:
            return _pass(f"get {inp['key']!r} gives {value!r}", seen)
        return _fail(f"get {inp['key']!r} gives {value!r}, documents {want_value!r}", seen)
    if inp["op"] == "values":
        want_values = expect.get("values", [])
        # ADR-4: VALUES of an absent key is "an empty/nil/null list".
        values = [] if got.get("values") is None else got.get("values")
        if values == want_values:
            return _pass(f"values {inp['key']!r} gives {_short(values)}", seen)
        return _fail(
            f"values {inp['key']!r} gives {_short(values)}, documents {_short(want_values)}", seen
        )
    want = [(name, value) for name, value in expect.get("headers", [])]
    pairs = [(name, value) for name, value in got.get("headers") or []]
    note = _same_fields(want, pairs)
    if note is None:
        return _fail(f"{inp['op']} leaves {_short(pairs)}, documents {_short(want)}", seen)
    return _pass(f"{inp['op']} leaves {len(pairs)} header(s) as documented{note}", seen)


def _present(inp: dict[str, Any]) -> bool:
    """Whether a headers.op case's key is among its headers, in the case's matching mode."""
    built = headers.Headers((name, value) for name, value in inp["headers"])
    return bool(built.values(inp["key"], case_sensitive=inp["case"] == "sensitive"))


def judge_sent_subject(
    expect: dict[str, Any], given: str, sent: str | Rejected | Malformed
) -> Judgement:
    """subject.validate end to end: what went on the wire when a library was asked to use the
    subject ``given`` (``sent``: the subject of the operation the reference parsed from its
    bytes, ``Rejected`` when it refused before sending, None when nothing parseable went out).

    An invalid subject may be refused locally or sent unchanged (the server then judges it);
    becoming different bytes that read as another, valid operation is the failure: a subject
    with a space turned into a subject and a reply, for example.
    """
    seen = {"sent": sent} if isinstance(sent, str) else view(sent)
    if isinstance(sent, Rejected):
        if expect["valid"]:
            return _fail(f"refused locally a subject the documents allow: {sent.detail}", seen)
        return _pass(f"refused locally: {sent.detail}", seen)
    if isinstance(sent, Malformed):
        return _fail(
            f"the bytes that went out are not a well-formed operation: {sent.detail}", seen
        )
    if sent == given:
        if expect["valid"]:
            return _pass("sent unchanged", seen)
        return _pass("sent unchanged, not refused locally (the server is left to refuse it)", seen)
    looks_valid = subjects.is_valid(sent, "subscribe")
    return _fail(
        f"asked for {given!r}, the bytes that went out carry the subject {sent!r}"
        + (" (valid-looking: another operation than the one asked for)" if looks_valid else ""),
        seen,
    )


@dataclass(frozen=True)
class Delivery:
    """A message a client delivered, as it presents it (``block`` None: no header block)."""

    sid: str
    subject: str
    reply: str | None
    payload: bytes
    block: headers.HeaderBlock | None


@dataclass(frozen=True)
class Reaction:
    """What a client did with bytes a server sent it: the messages it delivered, the PONGs it
    sent after them (the test server's own probe PING included when ``probed``), the errors it
    reported, and whether it closed the connection."""

    delivered: tuple[Delivery, ...]
    pongs: int
    errors: tuple[str, ...]
    closed: bool
    probed: bool


def expected_deliveries(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The MSG and HMSG operations among a protocol.parse case's expected events."""
    return [e for e in events if e.get("op") in ("MSG", "HMSG")]


def judge_reaction(expect: dict[str, Any], got: Reaction) -> Judgement:
    """protocol.parse in the server direction, as a client library sees it.

    MSG and HMSG must be delivered (in order per subscription; the documents fix no order across
    subscriptions), each PING answered by a PONG, nothing delivered of what follows bytes the
    documents reject. With no error, the client must stay usable (answer the probe PING sent
    after the bytes); input that ends inside an operation delivers nothing of it and keeps the
    connection open.

    Roles: the documents say what a *server* does with bad bytes and which -ERRs end the
    connection (the server closes it); of a client they say only that after a closing -ERR "the
    client should clean up relevant resources", which the wire cannot show. So whether a client
    closes the connection or reports an error after bad bytes or an -ERR is recorded in the
    observation, not judged; a client that does none of that and answers neither PING sent after
    the bytes (the second in case the first ended a line the bytes left open) has hung (a
    robustness failure, whatever the case's level).
    """
    events = expect["events"]
    problems = _delivery_problems(expected_deliveries(events), got.delivered, decode_bytes)
    pings = sum(1 for e in events if e.get("op") == "PING")
    error = next((e["error"] for e in events if "error" in e), None)
    errs = [protocol.err_closes(e["message"]) for e in events if e.get("op") == "-ERR"]
    if got.pongs < pings:
        problems.append(f"answered {got.pongs} of {pings} PING(s)")
    alive = got.probed and got.pongs > pings and not got.closed
    hung = False
    if error is not None or errs:
        # The connection's fate is the client's choice (observed); doing nothing visible at all,
        # neither closing, reporting nor answering the PING after the bytes, is a hang.
        hung = got.probed and not (alive or got.closed or got.errors)
        if hung:
            problems.append("hung: it neither closed the connection, reported an error nor "
                            "answered the PINGs sent after the bytes")  # fmt: skip
    elif expect.get("incomplete", False):
        if got.closed:
            problems.append("closed the connection on an operation that had not ended yet")
    elif not alive:
        state = "closed the connection" if got.closed else "did not answer the PING after it"
        problems.append(f"{state}{': ' + '; '.join(got.errors) if got.errors else ''}")
    observed = {
        "delivered": [view(d) for d in got.delivered],
        "pongs": got.pongs,
        "errors": [steady(e) for e in got.errors],
        "closed": got.closed,
        "usable": alive,
    }
    if problems:
        return Judgement("fail", "; ".join(problems), observed, ROBUSTNESS if hung else CONFORMANCE)
    said = f"; reported {'; '.join(got.errors)}" if got.errors else ""
    ended = "closed" if got.closed else ("usable" if alive else "open")
    return _pass(
        f"{len(got.delivered)} message(s) as documented, connection {ended}{said}", observed
    )


def _delivery_problems(
    want: list[dict[str, Any]], got: tuple[Delivery, ...], decode: Any
) -> list[str]:
    problems = []
    for sid in dict.fromkeys([str(w["sid"]) for w in want] + [d.sid for d in got]):
        wanted = [w for w in want if str(w["sid"]) == sid]
        delivered = [d for d in got if d.sid == sid]
        if len(delivered) != len(wanted):
            problems.append(f"sid {sid}: {len(delivered)} message(s) delivered, {len(wanted)} sent")
            continue
        for w, d in zip(wanted, delivered, strict=True):
            problems += _message_problems(w, d, decode)
    return problems


def _message_problems(want: dict[str, Any], got: Delivery, decode: Any) -> list[str]:
    problems = []
    if got.subject != want["subject"]:
        problems.append(f"subject {got.subject!r}, documents {want['subject']!r}")
    if got.reply != want.get("reply"):
        problems.append(f"reply {got.reply!r}, documents {want.get('reply')!r}")
    payload = decode(want["payload"], "expect.payload")
    if got.payload != payload:
        problems.append(f"payload {_short(got.payload)}, documents {_short(payload)}")
    if want["op"] == "HMSG":
        block = headers.parse_block(decode(want["headers"], "expect.headers"))
        if isinstance(block, headers.HeaderBlock):
            shown = judge_block(block, got.block or headers.HeaderBlock(None, None, ()))
            if shown.outcome == "fail":
                problems.append(shown.message)
    return problems


# Optional tokens the wire cannot carry empty: an API's empty value and none are the same.
EMPTY_IS_NONE = frozenset({"reply", "queue"})


def judge_sent_op(
    expect: dict[str, Any],
    asked: protocol.Op,
    sent: protocol.Op | Rejected | Malformed,
    *,
    chosen: frozenset[str] = frozenset(),
) -> Judgement:
    """protocol.encode through a client API: the operation the library put on the wire (as the
    reference parsed it) for the operation it was asked to send. Fields in ``chosen`` are the
    library's to pick (a sid); a header block is judged by its fields, as ``judge_block``.

    An operation the documents cannot encode may be refused locally or sent as asked (the server
    then judges it); arriving as another operation is the failure, as for subjects.
    """
    seen = view(sent)
    if isinstance(seen, dict) and isinstance(sent, protocol.Op):
        seen = {name: value for name, value in seen.items() if name not in chosen}
    if isinstance(sent, Rejected):
        if "error" in expect:
            return _pass(f"refused locally ({expect['error']} expected): {sent.detail}", seen)
        return _fail(f"refused locally an operation the documents allow: {sent.detail}", seen)
    if isinstance(sent, Malformed):
        return _fail(
            f"the bytes that went out are not a well-formed operation: {sent.detail}", seen
        )
    problems = _op_differences(asked, sent, chosen)
    if problems:
        return _fail(f"sent {_short(protocol.op_fields(sent))}: " + "; ".join(problems), seen)
    if "error" in expect:
        return _pass("sent as asked, not refused locally (the server is left to refuse it)", seen)
    return _pass("sent as asked", seen)


def _op_differences(asked: protocol.Op, sent: protocol.Op, chosen: frozenset[str]) -> list[str]:
    want, got = protocol.op_fields(asked), protocol.op_fields(sent)
    if want["op"] != got["op"] and {want["op"], got["op"]} != {"PUB", "HPUB"}:
        return [f"a {got['op']}, not a {want['op']}"]
    problems = []
    for name in sorted((set(want) | set(got)) - chosen - {"op", "headers"}):
        if name in EMPTY_IS_NONE and not want.get(name) and not got.get(name):
            continue
        if want.get(name) != got.get(name):
            problems.append(f"{name} {_short(got.get(name))}, asked {_short(want.get(name))}")
    if "headers" in want or "headers" in got:
        empty = b"NATS/1.0\r\n\r\n"  # a PUB for an HPUB of no fields: the same message
        asked_block, sent_block = want.get("headers") or empty, got.get("headers") or empty
        if same_block(asked_block, sent_block) is None:
            problems.append(f"header block {_short(sent_block)}, asked {_short(asked_block)}")
    return problems
