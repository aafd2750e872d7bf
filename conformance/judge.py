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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from nats_conformance.conformance import headers, protocol, subjects

Outcome = Literal["pass", "fail"]
SHOWN = 300  # characters of one value a message shows


@dataclass(frozen=True)
class Judgement:
    outcome: Outcome
    message: str


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


def _pass(message: str) -> Judgement:
    return Judgement("pass", message)


def _fail(message: str) -> Judgement:
    return Judgement("fail", message)


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


def judge_valid(expect: dict[str, Any], got: bool) -> Judgement:
    """subject.validate and name.validate: the implementation's verdict on validity."""
    if got == expect["valid"]:
        return _pass(f"{'valid' if got else 'invalid'}, as the documents say")
    return _fail(f"the implementation says {'valid' if got else 'invalid'}, documents say "
                 f"{'valid' if expect['valid'] else 'invalid'}")  # fmt: skip


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
            return _pass(f"rejected ({expect['error']} expected): {got.detail}")
        return _fail(f"accepted a block the documents reject ({expect['error']}): {_short(got)}")
    return judge_block(want, got)


def judge_block(want: headers.HeaderBlock, got: headers.HeaderBlock | Rejected) -> Judgement:
    """A header block as an implementation presents it against the block the documents give."""
    if isinstance(got, Rejected):
        return _fail(f"rejected a valid block: {got.detail}")
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
        return _fail("; ".join(problems))
    return _pass(f"status {want.status}, {len(want.fields)} header(s) as documented{note}")


def judge_encoded_block(expect: dict[str, Any], got: bytes | Rejected) -> Judgement:
    """headers.encode: the block the implementation produced for the case's headers."""
    if "error" in expect:
        if isinstance(got, Rejected):
            return _pass(f"refused ({expect['error']} expected): {got.detail}")
        return _fail(f"encoded headers the documents refuse ({expect['error']}) as {_short(got)}")
    if isinstance(got, Rejected):
        return _fail(f"refused headers the documents allow: {got.detail}")
    from nats_conformance.conformance.vectors import decode_bytes  # vectors imports this module

    want = decode_bytes(expect["block"], "expect.block")
    if got == want:
        return _pass(f"block {_short(got)}")
    parsed, reference = headers.parse_block(got), headers.parse_block(want)
    if isinstance(parsed, headers.HeaderBlock) and isinstance(reference, headers.HeaderBlock):
        note = _same_fields(list(reference.fields), list(parsed.fields))
        if note and (parsed.status, parsed.description) == (
            reference.status,
            reference.description,
        ):
            return _pass(f"block {_short(got)}{note}")
    return _fail(f"block {_short(got)}, documents {_short(want)}")


def judge_header_op(
    inp: dict[str, Any], expect: dict[str, Any], got: dict[str, Any] | Rejected
) -> Judgement:
    """headers.op: the result of get, values, set, delete or append through a header API."""
    if isinstance(got, Rejected):
        return _fail(f"the operation failed: {got.detail}")
    if inp["op"] == "get":
        want_value = expect.get("value", "")
        value = got.get("value")
        if value == want_value:
            return _pass(f"get {inp['key']!r} gives {value!r}")
        return _fail(f"get {inp['key']!r} gives {value!r}, documents {want_value!r}")
    if inp["op"] == "values":
        want_values = expect.get("values", [])
        values = got.get("values")
        if values == want_values:
            return _pass(f"values {inp['key']!r} gives {_short(values)}")
        return _fail(
            f"values {inp['key']!r} gives {_short(values)}, documents {_short(want_values)}"
        )
    want = [(name, value) for name, value in expect.get("headers", [])]
    pairs = [(name, value) for name, value in got.get("headers") or []]
    note = _same_fields(want, pairs)
    if note is None:
        return _fail(f"{inp['op']} leaves {_short(pairs)}, documents {_short(want)}")
    return _pass(f"{inp['op']} leaves {len(pairs)} header(s) as documented{note}")


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
    if isinstance(sent, Rejected):
        if expect["valid"]:
            return _fail(f"refused locally a subject the documents allow: {sent.detail}")
        return _pass(f"refused locally: {sent.detail}")
    if isinstance(sent, Malformed):
        return _fail(f"the bytes that went out are not a well-formed operation: {sent.detail}")
    if sent == given:
        if expect["valid"]:
            return _pass("sent unchanged")
        return _pass("sent unchanged, not refused locally (the server is left to refuse it)")
    looks_valid = subjects.is_valid(sent, "subscribe")
    return _fail(
        f"asked for {given!r}, the bytes that went out carry the subject {sent!r}"
        + (" (valid-looking: another operation than the one asked for)" if looks_valid else "")
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
    subscriptions);
    each PING answered by a PONG; an error the documents say closes must end the connection or be
    reported, and nothing after it delivered; with no error, the client must stay usable (answer
    the probe PING sent after the bytes). Input that ends inside an operation delivers nothing of
    it and keeps the connection open.
    """
    from nats_conformance.conformance.vectors import decode_bytes  # vectors imports this module

    events = expect["events"]
    problems = _delivery_problems(expected_deliveries(events), got.delivered, decode_bytes)
    pings = sum(1 for e in events if e.get("op") == "PING")
    error = next((e["error"] for e in events if "error" in e), None)
    errs = [protocol.err_closes(e["message"]) for e in events if e.get("op") == "-ERR"]
    if got.pongs < pings:
        problems.append(f"answered {got.pongs} of {pings} PING(s)")
    alive = got.probed and got.pongs > pings and not got.closed
    if True in errs and error is None:
        # After a closing -ERR the connection is no longer valid: ending it is right, and so is
        # reporting the error (the test server does not close it).
        if not (got.closed or got.errors):
            problems.append("went on silently after an -ERR the documents say ends the connection")
    elif None in errs and error is None and got.closed and got.errors:
        pass  # a text the documents do not list: ending the connection after reporting it is fine
    elif error is not None:
        if error["closes"] and not (got.closed or got.errors):
            problems.append(
                f"went on as if nothing happened after the error ({error['reason']}; the "
                "documents: the connection ends)"
            )
    elif expect.get("incomplete", False):
        if got.closed:
            problems.append("closed the connection on an operation that had not ended yet")
    elif not alive:
        state = "closed the connection" if got.closed else "did not answer the PING after it"
        problems.append(f"{state}{': ' + '; '.join(got.errors) if got.errors else ''}")
    if problems:
        return _fail("; ".join(problems))
    said = f"; reported {'; '.join(got.errors)}" if got.errors else ""
    ended = "closed" if got.closed else ("usable" if alive else "open")
    return _pass(f"{len(got.delivered)} message(s) as documented, connection {ended}{said}")


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
    if isinstance(sent, Rejected):
        if "error" in expect:
            return _pass(f"refused locally ({expect['error']} expected): {sent.detail}")
        return _fail(f"refused locally an operation the documents allow: {sent.detail}")
    if isinstance(sent, Malformed):
        return _fail(f"the bytes that went out are not a well-formed operation: {sent.detail}")
    problems = _op_differences(asked, sent, chosen)
    if problems:
        return _fail(f"sent {_short(protocol.op_fields(sent))}: " + "; ".join(problems))
    if "error" in expect:
        return _pass("sent as asked, not refused locally (the server is left to refuse it)")
    return _pass("sent as asked")


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
        asked_block = headers.parse_block(want.get("headers") or b"NATS/1.0\r\n\r\n")
        sent_block = headers.parse_block(got.get("headers") or b"NATS/1.0\r\n\r\n")
        if isinstance(sent_block, headers.HeaderError):
            problems.append(f"a header block the reference rejects ({sent_block.reason})")
        elif isinstance(asked_block, headers.HeaderBlock):
            shown = judge_block(asked_block, sent_block)
            if shown.outcome == "fail":
                problems.append(shown.message)
    return problems
