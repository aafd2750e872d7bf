"""The reference parser and encoder: round trips, chunking, limits, errors."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nats_conformance.conformance import protocol as p
from nats_conformance.conformance.protocol import Direction

# --- strategies --------------------------------------------------------------------------------

_TOKEN_CHARS = string.ascii_letters + string.digits + "-_$"
tokens = st.text(_TOKEN_CHARS, min_size=1, max_size=8)
literal_subjects = st.lists(tokens, min_size=1, max_size=4).map(".".join)
sids = st.text(string.ascii_letters + string.digits, min_size=1, max_size=6)
payloads = st.binary(max_size=64)
json_scalars = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=10)
json_objects = st.dictionaries(st.text(max_size=8), json_scalars, max_size=4)
header_names = st.text(
    "".join(chr(c) for c in range(33, 127) if chr(c) != ":"), min_size=1, max_size=8
)
header_values = st.text(string.ascii_letters + string.digits + " :;,=", max_size=10).map(str.strip)
header_blocks = st.lists(st.tuples(header_names, header_values), max_size=3).map(
    lambda pairs: b"NATS/1.0\r\n" + b"".join(f"{k}: {v}\r\n".encode() for k, v in pairs) + b"\r\n"
)
replies = st.none() | literal_subjects

client_ops = st.one_of(
    json_objects.map(p.Connect),
    st.builds(p.Pub, literal_subjects, replies, payloads),
    st.builds(p.HPub, literal_subjects, replies, header_blocks, payloads),
    st.builds(p.Sub, literal_subjects, st.none() | tokens, sids),
    st.builds(p.Unsub, sids, st.none() | st.integers(0, 10**6)),
    st.just(p.Ping()),
    st.just(p.Pong()),
)
server_ops = st.one_of(
    json_objects.map(p.Info),
    st.builds(p.Msg, literal_subjects, sids, replies, payloads),
    st.builds(p.HMsg, literal_subjects, sids, replies, header_blocks, payloads),
    st.just(p.Ping()),
    st.just(p.Pong()),
    st.just(p.Ok()),
    st.text(_TOKEN_CHARS + " '", min_size=1, max_size=20).map(str.strip).filter(bool).map(p.Err),
)


def _parse(data: bytes, direction: Direction) -> list[p.Event]:
    return p.Parser(direction).feed(data)


def _split_feed(data: bytes, cuts: list[int], direction: Direction) -> tuple[list[p.Event], bool]:
    parser = p.Parser(direction)
    events: list[p.Event] = []
    last = 0
    for cut in [*sorted(set(cuts)), len(data)]:
        events += parser.feed(data[last:cut])
        last = cut
    return events, parser.incomplete


def _as_client_stream(ops: list[p.Op]) -> bytes:
    # A CONNECT that disables headers would make a later HPUB an error; keep headers on.
    fixed = [
        p.Connect({**op.options, "headers": True}) if isinstance(op, p.Connect) else op
        for op in ops
    ]
    return b"".join(p.encode(op) for op in fixed)


# --- round trips -------------------------------------------------------------------------------


@given(client_ops)
def test_client_op_round_trip(op: p.Op) -> None:
    data = p.encode(op)
    assert isinstance(data, bytes)
    assert _parse(data, Direction.CLIENT) == [op]


@given(server_ops)
def test_server_op_round_trip(op: p.Op) -> None:
    data = p.encode(op)
    assert isinstance(data, bytes)
    assert _parse(data, Direction.SERVER) == [op]


@given(client_ops | server_ops)
def test_op_fields_round_trip(op: p.Op) -> None:
    assert p.op_from_fields(p.op_fields(op)) == op


def _respell(data: bytes, op: p.Op, delimiter: bytes, lower: bool) -> bytes:
    """The same operation with another op-name case and another run of delimiters."""
    line, sep, rest = data.partition(b"\r\n")
    if isinstance(op, p.Info | p.Connect | p.Err):
        name, _, body = line.partition(b" ")
        fields = [name, body]
    else:
        fields = line.split(b" ")
    fields[0] = fields[0].lower() if lower else fields[0]
    return delimiter.join(fields) + sep + rest


@given(
    client_ops | server_ops, st.sampled_from([b" ", b"\t", b"  ", b" \t ", b"\t\t"]), st.booleans()
)
def test_op_name_case_and_delimiter_runs_do_not_change_events(
    op: p.Op, delimiter: bytes, lower: bool
) -> None:
    direction = (
        Direction.CLIENT
        if isinstance(op, p.Connect | p.Pub | p.HPub | p.Sub | p.Unsub)
        else Direction.SERVER
    )
    data = p.encode(op)
    assert isinstance(data, bytes)
    assert _parse(_respell(data, op, delimiter, lower), direction) == [op]


# --- chunking ----------------------------------------------------------------------------------


@given(st.lists(client_ops, max_size=8), st.lists(st.integers(0, 4000), max_size=10))
def test_any_split_of_a_client_stream_gives_the_same_events(
    ops: list[p.Op], cuts: list[int]
) -> None:
    data = _as_client_stream(ops)
    whole = _parse(data, Direction.CLIENT)
    split, incomplete = _split_feed(data, [c % (len(data) + 1) for c in cuts], Direction.CLIENT)
    assert split == whole
    assert len(whole) == len(ops)
    assert not incomplete


@given(st.lists(server_ops, max_size=8), st.lists(st.integers(0, 4000), max_size=10))
def test_any_split_of_a_server_stream_gives_the_same_events(
    ops: list[p.Op], cuts: list[int]
) -> None:
    data = b"".join(p.encode(op) for op in ops)
    split, _ = _split_feed(data, [c % (len(data) + 1) for c in cuts], Direction.SERVER)
    assert split == _parse(data, Direction.SERVER) == ops


_PIECES = [b"PUB a 1\r\n", b"x", b"\r\n", b"SUB ", b"MSG a 1 2\r\n", b"\n", b"HPUB a 12 12",
           b"PING", b"-ERR 'x'", b"INFO {}", b"\t", b"sub b.> q 9\r\n", b"UNSUB 9 z"]  # fmt: skip


@given(
    st.lists(st.sampled_from(_PIECES), max_size=12).map(b"".join) | st.binary(max_size=80),
    st.lists(st.integers(0, 200), max_size=6),
    st.sampled_from(list(Direction)),
)  # fmt: skip
def test_any_split_of_any_bytes_gives_the_same_events(
    data: bytes, cuts: list[int], direction: Direction
) -> None:
    """Errors included: where the stream breaks the protocol must not depend on TCP segmentation."""
    whole_parser = p.Parser(direction)
    whole = whole_parser.feed(data)
    split, incomplete = _split_feed(data, [c % (len(data) + 1) for c in cuts], direction)
    assert split == whole
    assert incomplete == whole_parser.incomplete


# --- errors and limits -------------------------------------------------------------------------


def _only_error(
    data: bytes, direction: Direction = Direction.CLIENT, **options: object
) -> p.ProtocolError:
    events = p.Parser(direction, **options).feed(data)
    assert events and isinstance(events[-1], p.ProtocolError), events
    return events[-1]


@pytest.mark.parametrize(
    ("data", "reason", "err", "closes"),
    [
        (b"FOO bar\r\n", "unknown_operation", "Unknown Protocol Operation", True),
        (b"MSG foo 1 2\r\nhi\r\n", "unknown_operation", "Unknown Protocol Operation", True),
        (b"PUB foo x\r\n", "parser_error", "Parser Error", True),
        (b"PUB foo 5\r\nhi\r\nPING\r\n", "parser_error", "Parser Error", True),
        (b"PING\n", "parser_error", "Parser Error", True),
        (b"SUB foo. 90\r\n", "invalid_subject", "Invalid Subject", False),
        (b"CONNECT {bad\r\n", "invalid_json", "Parser Error", True),
        (b"HPUB foo 14 12\r\n", "parser_error", "Parser Error", True),
    ],
)
def test_client_errors_carry_the_documented_text_and_consequence(
    data: bytes, reason: str, err: str, closes: bool
) -> None:
    error = _only_error(data)
    assert (error.reason, error.err, error.closes) == (reason, err, closes)
    assert error.to_err() == p.Err(f"'{err}'")


def test_errors_in_server_bytes_have_no_err_text_and_close() -> None:
    error = _only_error(b"MSG foo 1 x\r\n", Direction.SERVER)
    assert (error.reason, error.err, error.closes) == ("parser_error", None, True)


def test_max_payload_counts_total_size_and_applies_to_client_bytes() -> None:
    limits = p.Limits(max_payload=4)
    assert _parse_with(b"PUB a 4\r\nabcd\r\n", limits) == [p.Pub("a", None, b"abcd")]
    assert _only_error(b"PUB a 5\r\n", limits=limits).reason == "max_payload_exceeded"
    assert (
        _only_error(b"HPUB a 12 13\r\n", limits=p.Limits(max_payload=12)).reason
        == "max_payload_exceeded"
    )
    # A client has no max_payload to enforce on what a server delivers.
    assert p.Parser(Direction.SERVER, limits=limits).feed(b"MSG a 1 5\r\nabcde\r\n") == [
        p.Msg("a", "1", None, b"abcde")
    ]


def _parse_with(data: bytes, limits: p.Limits) -> list[p.Event]:
    return p.Parser(Direction.CLIENT, limits=limits).feed(data)


def test_max_control_line_is_detected_before_the_line_ends() -> None:
    parser = p.Parser(Direction.CLIENT, limits=p.Limits(max_control_line=16))
    assert parser.feed(b"SUB " + b"a" * 12) == []  # 16 bytes: still within the limit
    events = parser.feed(b"aa")
    assert [e.reason for e in events if isinstance(e, p.ProtocolError)] == [
        "max_control_line_exceeded"
    ]
    assert parser.closed and parser.feed(b"\r\nPING\r\n") == []


def test_control_line_exactly_at_the_limit_is_accepted() -> None:
    line = b"SUB " + b"a" * 10 + b" 1"
    assert _parse_with(line + b"\r\n", p.Limits(max_control_line=len(line))) == [
        p.Sub("a" * 10, None, "1")
    ]


def test_non_closing_error_lets_parsing_go_on() -> None:
    events = _parse(b"SUB foo. 1\r\nSUB foo 2\r\n", Direction.CLIENT)
    assert isinstance(events[0], p.ProtocolError) and events[1] == p.Sub("foo", None, "2")


def test_pedantic_checks_publish_subjects_after_skipping_the_payload() -> None:
    parser = p.Parser(Direction.CLIENT)
    events = parser.feed(b'CONNECT {"pedantic":true}\r\nPUB foo.* 2\r\nhi\r\nPING\r\n')
    assert [type(e) for e in events] == [p.Connect, p.ProtocolError, p.Ping]
    assert events[1].reason == "invalid_subject" and not events[1].closes
    assert p.Parser(Direction.CLIENT).feed(b"PUB foo.* 2\r\nhi\r\n") == [
        p.Pub("foo.*", None, b"hi")
    ]


def test_connect_controls_headers() -> None:
    parser = p.Parser(Direction.CLIENT, headers=False)
    assert _only_error(b"HPUB a 12 12\r\n", headers=False).reason == "headers_not_enabled"
    events = parser.feed(b'CONNECT {"headers":true}\r\nHPUB a 12 12\r\nNATS/1.0\r\n\r\n\r\n')
    assert events[1] == p.HPub("a", None, b"NATS/1.0\r\n\r\n", b"")


def test_operation_names_are_case_insensitive_and_delimiters_are_runs() -> None:
    assert _parse(b"sUb\t foo \t\tq  7 \r\n", Direction.CLIENT) == [p.Sub("foo", "q", "7")]


def test_incomplete_reports_a_partial_operation() -> None:
    parser = p.Parser(Direction.SERVER)
    assert parser.feed(b"MSG a 1 3\r\nab") == [] and parser.incomplete
    assert parser.feed(b"c\r\n") == [p.Msg("a", "1", None, b"abc")] and not parser.incomplete


@pytest.mark.parametrize(
    ("op", "reason"),
    [
        (p.Pub("foo bar", None, b""), "invalid_token"),
        (p.Pub("foo.*", None, b""), "invalid_subject"),
        (p.Sub("foo..bar", None, "1"), "invalid_subject"),
        (p.Sub("foo", None, ""), "invalid_token"),
        (p.HPub("foo", None, b"X: y\r\n\r\n", b""), "invalid_headers"),
        (p.Unsub("1", -1), "invalid_size"),
        (p.Err("two\r\nlines"), "invalid_token"),
    ],
)
def test_encoder_refuses_what_cannot_be_framed(op: p.Op, reason: str) -> None:
    result = p.encode(op)
    assert isinstance(result, p.EncodeError) and result.reason == reason


def test_encoder_is_canonical() -> None:
    assert (
        p.encode(p.Pub("FRONT.DOOR", "JOKE.22", b"Knock Knock"))
        == b"PUB FRONT.DOOR JOKE.22 11\r\nKnock Knock\r\n"
    )
    assert p.encode(p.HPub("FOO", None, b"NATS/1.0\r\nBar: Baz\r\n\r\n", b"Hello NATS!")) == (
        b"HPUB FOO 22 33\r\nNATS/1.0\r\nBar: Baz\r\n\r\nHello NATS!\r\n"
    )
    assert (
        p.encode(p.Connect({"verbose": False, "name": "é"}))
        == 'CONNECT {"verbose":false,"name":"é"}\r\n'.encode()
    )


def test_default_max_control_line_applies_to_client_bytes_only() -> None:
    """The documents' 1024-byte default is a server option on what clients send."""
    line = b"SUB " + b"a" * 1100 + b" 1\r\n"
    client = p.Parser(Direction.CLIENT).feed(line)
    assert [e.reason for e in client if isinstance(e, p.ProtocolError)] == [
        "max_control_line_exceeded"
    ]
    info = b'INFO {"x":"' + b"a" * 3000 + b'"}\r\n'
    assert p.Parser(Direction.SERVER).feed(info) == [p.Info({"x": "a" * 3000})]
    # A limit given explicitly applies in either direction.
    limited = p.Parser(Direction.SERVER, limits=p.Limits(max_control_line=64)).feed(info)
    assert isinstance(limited[0], p.ProtocolError)
