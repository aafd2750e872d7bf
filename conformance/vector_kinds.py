"""Every kind of vector case, in one table (``KINDS``): what the reference answers for a case of
the kind and, for a kind a client library's own code answers, the driver command that asks it
and how the library's answer is judged.

A kind is one entry here, one ``if``/``then`` block and one name in the ``kind`` enum of
schemas/vector.schema.json (one file, readable with a JSON parser alone) and one row of the
Kinds table in vectors/README.md (tests/test_vector_kinds.py holds the four to each other).
The paths through a server (the fake server's wire, a real server's JetStream API) are the
harness's (harness/clients/client_vectors.py ``SERVER_PATHS``); the path a ``LibraryCall``
declares needs no code there. Pure, like the rest of the reference.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from . import (
    client_script,
    frame_layouts,
    headers,
    interop,
    judge,
    names,
    protocol,
    streaming_client,
    streaming_messages,
    streaming_server_session,
    subjects,
)
from .judge import Judgement
from .vector_values import Mismatch, decode_bytes, op_pattern

# The reference's answer to a case (input, expect): it returns when the case's expect is what the
# reference gives and raises Mismatch (or BytesError) naming the field when it is not.
Evaluator = Callable[[dict[str, Any], dict[str, Any]], None]
# A library's answer to a case against what the case expects: (input, expect, answer).
Judge = Callable[[dict[str, Any], dict[str, Any], Any], Judgement]


def _any_input(inp: dict[str, Any]) -> str | None:
    return None


@dataclass(frozen=True)
class LibraryCall:
    """How a client library's own code is asked a case: one command of the driver protocol
    (harness/drivers/README.md), its arguments taken from the case's input, answered without a
    connection, the answer judged against ``expect``. The harness makes it the kind's first
    client path; it needs no code of its own there."""

    path: str  # the row's path: <case id>@<path>
    # The driver command; a protocol-2 driver is asked it when its hello declares the capability
    # of the same name (the driver protocol names these commands' capabilities so).
    command: str
    how: str  # the start of the row's description
    arguments: Callable[[dict[str, Any]], dict[str, Any]]  # from the case's input
    answer: Callable[[dict[str, Any]], Any]  # the library's answer, read from the command's result
    judge: Judge
    # Why the command cannot take this input (each such case is a skip row that says so), or None.
    limit: Callable[[dict[str, Any]], str | None] = _any_input
    # A failed answer is the library refusing the input (judge.Rejected); False: the command
    # answers every input (a validity), so a failed answer is an error of the run.
    refuses: bool = True
    # The library's own validator: its answer is an observation unless the quoted statement asks
    # clients to validate (judge.validator_level gives the row's level).
    validator: bool = False


@dataclass(frozen=True)
class Kind:
    """One kind of vector case."""

    name: str  # the ``kind`` of its cases
    evaluate: Evaluator  # the reference's answer, which ``vectors check`` compares with each case
    library: LibraryCall | None = None  # how a client library's own code answers it, if it does


# --- the reference's answers --------------------------------------------------------------------


def _expect_equal(field_name: str, expected: Any, actual: Any) -> None:
    if expected != actual:
        raise Mismatch(field_name, f"expected {expected!r}, reference gives {actual!r}")


def _eval_protocol_parse(inp: dict[str, Any], exp: dict[str, Any]) -> None:
    parser = protocol.Parser(
        protocol.Direction(inp["direction"]),
        limits=protocol.Limits(**inp.get("limits", {})),
        headers=inp.get("headers", True),
        pedantic=inp.get("pedantic", False),
    )
    events = parser.feed(decode_bytes(inp["bytes"], "input.bytes"))
    expected = [_expected_event(e, f"expect.events[{i}]") for i, e in enumerate(exp["events"])]
    actual = [protocol.event_fields(e) for e in events]
    for i in range(max(len(expected), len(actual))):
        want = expected[i] if i < len(expected) else None
        got = actual[i] if i < len(actual) else None
        _expect_equal(f"expect.events[{i}]", want, got)
    _expect_equal("expect.incomplete", exp.get("incomplete", False), parser.incomplete)


def _expected_event(event: dict[str, Any], path: str) -> dict[str, Any]:
    """Normalise an expected event so it compares with ``protocol.event_fields`` output."""
    if "error" in event:
        err = event["error"]
        return {"error": {"reason": err["reason"], "err": err.get("err"), "closes": err["closes"]}}
    return protocol.op_fields(protocol.op_from_fields(op_pattern(event, path)))


def _eval_protocol_encode(inp: dict[str, Any], exp: dict[str, Any]) -> None:
    op = protocol.op_from_fields(op_pattern(inp["op"], "input.op"))
    _expect_encoding(exp, "bytes", protocol.encode(op))


def _expect_encoding(exp: dict[str, Any], field_name: str, result: Any) -> None:
    """An encoder's result (bytes, or an error value with a reason) against bytes or an error."""
    if "error" in exp:
        got = result if isinstance(result, bytes) else result.reason
        _expect_equal("expect.error", exp["error"], got)
    else:
        got = result if isinstance(result, bytes) else f"error: {result.reason}"
        path = f"expect.{field_name}"
        _expect_equal(path, decode_bytes(exp[field_name], path), got)


def _eval_headers_parse(inp: dict[str, Any], exp: dict[str, Any]) -> None:
    result = headers.parse_block(decode_bytes(inp["block"], "input.block"))
    if "error" in exp:
        got = result.reason if isinstance(result, headers.HeaderError) else f"parsed: {result}"
        _expect_equal("expect.error", exp["error"], got)
        return
    if isinstance(result, headers.HeaderError):
        raise Mismatch(
            "expect",
            f"expected a header block, reference rejects it: {result.reason} ({result.detail})",
        )
    _expect_equal("expect.status", exp.get("status"), result.status)
    _expect_equal("expect.description", exp.get("description"), result.description)
    _expect_equal(
        "expect.headers",
        [list(p) for p in exp.get("headers", [])],
        [list(p) for p in result.fields],
    )


def _eval_headers_encode(inp: dict[str, Any], exp: dict[str, Any]) -> None:
    block = headers.HeaderBlock(
        status=inp.get("status"),
        description=inp.get("description"),
        fields=tuple((k, v) for k, v in inp["headers"]),
    )
    _expect_encoding(exp, "block", headers.encode_block(block))


def _eval_headers_op(inp: dict[str, Any], exp: dict[str, Any]) -> None:
    h = headers.Headers((k, v) for k, v in inp["headers"])
    sensitive = inp["case"] == "sensitive"
    op, key = inp["op"], inp["key"]
    if op == "get":
        _expect_equal("expect.value", exp.get("value"), h.get(key, case_sensitive=sensitive))
        return
    if op == "values":
        _expect_equal("expect.values", exp.get("values"), h.values(key, case_sensitive=sensitive))
        return
    if op == "delete":
        h.delete(key, case_sensitive=sensitive)
    else:
        if "value" not in inp:
            raise Mismatch("input.value", f"the {op} operation needs a value")
        getattr(h, op)(key, inp["value"], case_sensitive=sensitive)
    _expect_equal(
        "expect.headers", [list(p) for p in exp.get("headers", [])], [list(p) for p in h.items()]
    )


def _eval_subject_validate(inp: dict[str, Any], exp: dict[str, Any]) -> None:
    _expect_equal("expect.valid", exp["valid"], subjects.is_valid(inp["subject"], inp["use"]))


def _eval_subject_tokens(inp: dict[str, Any], exp: dict[str, Any]) -> None:
    _expect_equal("expect.tokens", exp["tokens"], subjects.tokens(inp["subject"]))


def _eval_subject_match(inp: dict[str, Any], exp: dict[str, Any]) -> None:
    _expect_equal(
        "expect.matches", exp["matches"], subjects.matches(inp["pattern"], inp["subject"])
    )


def _eval_name_validate(inp: dict[str, Any], exp: dict[str, Any]) -> None:
    got = names.validate(
        inp["production"],
        inp["name"],
        platform=inp.get("platform", "unix"),
        internal=inp.get("internal", False),
    )
    _expect_equal("expect.valid", exp["valid"], got)


def _eval_streaming_encode(inp: dict[str, Any], exp: dict[str, Any]) -> None:
    msg = streaming_messages.from_json(inp["message"], inp["fields"], decode=decode_bytes)
    _expect_equal(
        "expect.bytes", decode_bytes(exp["bytes"], "expect.bytes"), streaming_messages.encode(msg)
    )


def _eval_streaming_decode(inp: dict[str, Any], exp: dict[str, Any]) -> None:
    result = streaming_messages.decode(inp["message"], decode_bytes(inp["bytes"], "input.bytes"))
    if "error" in exp:
        got = (
            result.reason
            if isinstance(result, streaming_messages.DecodeError)
            else f"decoded: {result}"
        )
        _expect_equal("expect.error", exp["error"], got)
        return
    want = streaming_messages.from_json(inp["message"], exp["fields"], decode=decode_bytes)
    got = (
        result
        if not isinstance(result, streaming_messages.DecodeError)
        else f"error: {result.reason}"
    )
    _expect_equal("expect.fields", want, got)


def _eval_streaming_subject(inp: dict[str, Any], exp: dict[str, Any]) -> None:
    if inp["rule"] == "discover":
        prefix = inp.get("prefix", streaming_messages.DEFAULT_DISCOVER_PREFIX)
        got = streaming_messages.discover_subject(inp["cluster_id"], prefix)
    else:
        got = streaming_messages.publish_subject(inp["prefix"], inp["subject"])
    _expect_equal("expect.subject", exp["subject"], got)


def _eval_client_script(inp: dict[str, Any], exp: dict[str, Any]) -> None:
    client_script.evaluate(inp)


def _eval_interop(inp: dict[str, Any], exp: dict[str, Any]) -> None:
    """The expectation must be what the interop rules give for the input (and the capabilities
    what it needs)."""
    problems = interop.expected_problems(interop.parse({"input": inp, "expect": exp}))
    if problems:
        raise Mismatch(*problems[0])


def _eval_streaming_client(inp: dict[str, Any], exp: dict[str, Any]) -> None:
    problems = streaming_client.judge(inp, exp, streaming_client.simulate(inp))
    if problems:
        raise Mismatch("expect", "; ".join(problems))


def _eval_streaming_server(inp: dict[str, Any], exp: dict[str, Any]) -> None:
    if problem := streaming_server_session.evaluate(inp, exp):
        raise Mismatch("expect", problem)


def _eval_frames_layout(inp: dict[str, Any], exp: dict[str, Any]) -> None:
    """The example's frames must be what the layout gives its bytes."""
    layout = frame_layouts.Layout.of(inp)
    data = decode_bytes(inp["bytes"], "input.bytes")
    if "INFO" in layout.join and "info" not in inp:
        raise Mismatch("input.info", "join names INFO: the example needs its INFO line")
    got = layout.frames(data, decode_bytes(inp.get("info", ""), "input.info"))
    frames = exp["frames"]
    want = (
        None
        if frames is None
        else [decode_bytes(f, f"expect.frames[{i}]") for i, f in enumerate(frames)]
    )
    _expect_equal("expect.frames", want, got)


def _eval_nothing(inp: dict[str, Any], exp: dict[str, Any]) -> None:
    """protocol.session cases carry only a wire script (``vectors.evaluate`` checks it)."""


# --- what a client library's own code answers ---------------------------------------------------


def driver_block(result: dict[str, Any]) -> headers.HeaderBlock:
    """A header block as a driver gives it (a ``decode_headers`` result, a message event)."""
    pairs = tuple((name, value) for name, value in result.get("headers") or [])
    return headers.HeaderBlock(result.get("status"), result.get("description"), pairs)


def status_line_limit(inp: dict[str, Any]) -> str | None:
    """A client API is given header fields, never a status line (encode_headers, a publish)."""
    if inp.get("status") is not None or inp.get("description") is not None:
        return "encode_headers takes header fields only, no status line"
    return None


def _subject_validate_limit(inp: dict[str, Any]) -> str | None:
    if inp["use"] == "reply":
        return "validate_subject takes publish and subscribe subjects; reply subjects are reached by the publish path"  # noqa: E501
    return None


def _name_validate_limit(inp: dict[str, Any]) -> str | None:
    if inp.get("platform", "unix") != "unix" or inp.get("internal", False):
        return "validate_name has no platform or internal-use argument: Unix names only"
    return None


def _on_expect(judging: Callable[[dict[str, Any], Any], Judgement]) -> Judge:
    """A judge that reads only the case's expect."""
    return lambda inp, expect, got: judging(expect, got)


def _validity(result: dict[str, Any]) -> bool:
    return bool(result["valid"])


def by_name(kinds: Iterable[Kind]) -> dict[str, Kind]:
    """The kinds by name: one entry per kind, a name declared twice is an error."""
    table: dict[str, Kind] = {}
    for kind in kinds:
        if kind.name in table:
            raise ValueError(f"the kind {kind.name} is declared twice")
        table[kind.name] = kind
    return table


KINDS: dict[str, Kind] = by_name(
    (
        Kind("protocol.parse", _eval_protocol_parse),
        Kind("protocol.encode", _eval_protocol_encode),
        Kind("protocol.session", _eval_nothing),
        Kind("headers.parse", _eval_headers_parse, LibraryCall(
            "decode", "decode_headers", "The library's header parser",
            lambda inp: {"block_b64": base64.b64encode(decode_bytes(inp["block"])).decode("ascii")},
            driver_block, _on_expect(judge.judge_header_block),
        )),
        Kind("headers.encode", _eval_headers_encode, LibraryCall(
            "encode", "encode_headers", "The library's header encoder",
            lambda inp: {"headers": inp["headers"]},
            lambda result: base64.b64decode(result["block_b64"]),
            _on_expect(judge.judge_encoded_block), limit=status_line_limit,
        )),
        Kind("headers.op", _eval_headers_op, LibraryCall(
            "op", "headers_op", "The library's header API",
            lambda inp: {"headers": inp["headers"], "case": inp["case"], "op": inp["op"],
                         "key": inp["key"], "value": inp.get("value")},
            lambda result: result, judge.judge_header_op,
        )),
        Kind("subject.validate", _eval_subject_validate, LibraryCall(
            "validate", "validate_subject", "The library's subject validation",
            lambda inp: {"subject": inp["subject"], "use": inp["use"]},
            _validity, _on_expect(judge.judge_valid), limit=_subject_validate_limit,
            refuses=False, validator=True,
        )),
        Kind("subject.tokens", _eval_subject_tokens),
        Kind("subject.match", _eval_subject_match),
        Kind("name.validate", _eval_name_validate, LibraryCall(
            "validate", "validate_name", "The library's name validation",
            lambda inp: {"production": inp["production"], "name": inp["name"]},
            _validity, _on_expect(judge.judge_valid), limit=_name_validate_limit,
            refuses=False, validator=True,
        )),
        Kind("streaming.encode", _eval_streaming_encode),
        Kind("streaming.decode", _eval_streaming_decode),
        Kind("streaming.subject", _eval_streaming_subject),
        Kind("client.script", _eval_client_script),
        Kind("interop", _eval_interop),
        Kind(streaming_client.KIND, _eval_streaming_client),
        Kind(streaming_server_session.KIND, _eval_streaming_server),
        Kind(frame_layouts.KIND, _eval_frames_layout),
    )
)  # fmt: skip
