"""Tests of conformance.headers: the documents' byte counts, every error reason, and
properties of the header block codec and of ADR-4's header operations."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nats_conformance.conformance import headers
from nats_conformance.conformance.headers import (
    HeaderBlock,
    HeaderError,
    Headers,
    encode_block,
    parse_block,
)

# --- the documents' examples: HDR_LEN and TOT_LEN ----------------------------------------------

# (fields, payload, HDR_LEN, TOT_LEN) exactly as the HPUB/HMSG examples of the documents give them.
DOCUMENT_EXAMPLES = [
    # adr-4-headers.txt, HPUB and HMSG
    ((("Header", "X"),), b"PAYLOAD", 23, 30),
    ((("Header", "X"),), b"", 23, 23),
    ((("Header1", "X"), ("Header1", "Y"), ("Header2", "Z")), b"PAYLOAD", 48, 55),
    ((("Header1", "X"), ("Header1", "Y"), ("Header2", "Z")), b"", 48, 48),
    # client-protocol.txt, HPUB
    ((("Bar", "Baz"),), b"Hello NATS!", 22, 33),
    ((("Bar", "Baz"),), b"", 22, 22),
    ((("BREAKFAST", "donut"), ("LUNCH", "burger")), b"Knock Knock", 45, 56),
    ((("BREAKFAST", "donut"), ("BREAKFAST", "eggs")), b"Yum!", 47, 51),
    # client-protocol.txt, HMSG
    ((("FoodGroup", "vegetable"),), b"Hello World", 34, 45),
]


@pytest.mark.parametrize(("fields", "payload", "hdr_len", "tot_len"), DOCUMENT_EXAMPLES)
def test_document_lengths(
    fields: tuple[tuple[str, str], ...], payload: bytes, hdr_len: int, tot_len: int
) -> None:
    block = HeaderBlock(None, None, fields)
    encoded = encode_block(block)
    assert isinstance(encoded, bytes)
    assert len(encoded) == hdr_len
    assert len(encoded) + len(payload) == tot_len
    assert parse_block(encoded) == block


def test_document_block_bytes() -> None:
    block = HeaderBlock(None, None, (("Header1", "X"), ("Header1", "Y"), ("Header2", "Z")))
    assert encode_block(block) == b"NATS/1.0\r\nHeader1: X\r\nHeader1: Y\r\nHeader2: Z\r\n\r\n"


# --- parsing -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"NATS/1.0\r\n\r\n", HeaderBlock(None, None, ())),
        (
            b"NATS/1.0\r\nA:  x:y \t\r\nA:\r\n\r\n",
            HeaderBlock(None, None, (("A", "x:y"), ("A", ""))),
        ),
        (b"NATS/1.0 503\r\n\r\n", HeaderBlock(503, None, ())),
        (b"NATS/1.0 408 Request Timeout\r\n\r\n", HeaderBlock(408, "Request Timeout", ())),
        (
            b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Stream: 0\r\n\r\n",
            HeaderBlock(100, "Idle Heartbeat", (("Nats-Last-Stream", "0"),)),
        ),
        ("NATS/1.0\r\nX: café\r\n\r\n".encode(), HeaderBlock(None, None, (("X", "café"),))),
    ],
)
def test_parse_valid(data: bytes, expected: HeaderBlock) -> None:
    assert parse_block(data) == expected


# Together the parse and encode inputs produce every documented reason.
PARSE_ERRORS = [
    (b"HTTP/1.1\r\n\r\n", "missing_version"),
    (b"NATS/2.0\r\n\r\n", "unsupported_version"),
    (b"NATS/1.0 50\r\n\r\n", "invalid_status"),
    (b"NATS/1.0 099\r\n\r\n", "invalid_status"),
    (b"NATS/1.0 503x\r\n\r\n", "invalid_status"),
    (b"NATS/1.0 408 Time\xffout\r\n\r\n", "invalid_description"),
    (b"NATS/1.0\nA: 1\n\n", "bare_line_ending"),
    (b"NATS/1.0\r\nA: 1\r\n", "missing_terminator"),
    (b"NATS/1.0\r\nA: 1\r\n\r\nxyz", "trailing_data"),
    (b"NATS/1.0\r\nA 1\r\n\r\n", "missing_colon"),
    (b"NATS/1.0\r\nA : 1\r\n\r\n", "invalid_header_name"),
    (b"NATS/1.0\r\nA: \xff\r\n\r\n", "invalid_header_value"),
]
ENCODE_ERRORS = [
    (HeaderBlock(1000, None, ()), "invalid_status"),
    (HeaderBlock(None, "Timeout", ()), "invalid_status"),
    (HeaderBlock(408, "", ()), "invalid_description"),
    (HeaderBlock(None, None, (("a:b", "v"),)), "invalid_header_name"),
    (HeaderBlock(None, None, (("A", "x\r\nB: y"),)), "invalid_header_value"),
    (HeaderBlock(None, None, (("A", " v"),)), "invalid_header_value"),
    (HeaderBlock(None, None, (("A", "\ud800"),)), "invalid_header_value"),
]


@pytest.mark.parametrize(("data", "reason"), PARSE_ERRORS)
def test_parse_errors(data: bytes, reason: str) -> None:
    result = parse_block(data)
    assert isinstance(result, HeaderError)
    assert result.reason == reason
    assert result.detail


@pytest.mark.parametrize(("block", "reason"), ENCODE_ERRORS)
def test_encode_errors(block: HeaderBlock, reason: str) -> None:
    result = encode_block(block)
    assert isinstance(result, HeaderError)
    assert result.reason == reason


def test_documented_reasons_are_the_reasons_produced() -> None:
    documented = set(re.findall(r"^``([a-z_]+)``$", headers.__doc__ or "", re.MULTILINE))
    produced = {reason for _, reason in PARSE_ERRORS + ENCODE_ERRORS}
    assert documented == produced


# --- encoding ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        (HeaderBlock(None, None, ()), b"NATS/1.0\r\n\r\n"),
        (HeaderBlock(503, None, ()), b"NATS/1.0 503\r\n\r\n"),
        (HeaderBlock(408, "Request Timeout", ()), b"NATS/1.0 408 Request Timeout\r\n\r\n"),
        (HeaderBlock(None, None, (("X", ""),)), b"NATS/1.0\r\nX: \r\n\r\n"),
        (HeaderBlock(None, None, (("X", "é"),)), "NATS/1.0\r\nX: é\r\n\r\n".encode()),
    ],
)
def test_encode_canonical(block: HeaderBlock, expected: bytes) -> None:
    assert encode_block(block) == expected


# --- codec properties ----------------------------------------------------------------------------

NAME_CHARS = "".join(chr(c) for c in range(33, 127) if chr(c) != ":")
names = st.text(alphabet=NAME_CHARS, min_size=1, max_size=12)
# Values: any text but CR, LF and surrogates, without whitespace at either end.
texts = st.text(st.characters(exclude_characters="\r\n", exclude_categories=("Cs",)), max_size=20)
values = texts.map(lambda s: s.strip(" \t"))
descriptions = st.none() | values.filter(bool)


@st.composite
def blocks(draw: st.DrawFn) -> HeaderBlock:
    status = draw(st.none() | st.integers(100, 999))
    description = None if status is None else draw(descriptions)
    fields = draw(st.lists(st.tuples(names, values), max_size=6))
    return HeaderBlock(status, description, tuple(fields))


@given(blocks())
def test_parse_encode_round_trip(block: HeaderBlock) -> None:
    encoded = encode_block(block)
    assert isinstance(encoded, bytes)
    assert encoded.startswith(b"NATS/1.0") and encoded.endswith(b"\r\n\r\n")
    assert parse_block(encoded) == block


@given(
    st.builds(
        HeaderBlock,
        st.none() | st.integers(-5, 1200),
        st.none() | st.text(max_size=8),
        st.lists(st.tuples(st.text(max_size=8), st.text(max_size=8)), max_size=4).map(tuple),
    )
)
def test_encode_never_raises_and_what_it_writes_reads_back(block: HeaderBlock) -> None:
    encoded = encode_block(block)
    assert isinstance(encoded, (bytes, HeaderError))
    if isinstance(encoded, bytes):
        assert parse_block(encoded) == block


@given(st.binary(max_size=64) | st.builds(lambda b: b"NATS/1.0" + b, st.binary(max_size=64)))
def test_parse_never_raises_and_is_canonical(data: bytes) -> None:
    parsed = parse_block(data)
    assert isinstance(parsed, (HeaderBlock, HeaderError))
    if isinstance(parsed, HeaderBlock):
        encoded = encode_block(parsed)
        assert isinstance(encoded, bytes)
        assert parse_block(encoded) == parsed


# --- header operations ---------------------------------------------------------------------------


def test_operations_case_sensitive() -> None:
    h = Headers([("foo", "1"), ("FOO", "2"), ("foo", "3")])
    assert h.get("foo") == "1"
    assert h.get("Foo") == ""
    assert h.values("foo") == ["1", "3"]
    h.append("Foo", "4")
    h.set("FOO", "5")
    assert h.items() == [("foo", "1"), ("foo", "3"), ("Foo", "4"), ("FOO", "5")]
    h.delete("foo")
    assert h.items() == [("Foo", "4"), ("FOO", "5")]


def test_operations_case_insensitive() -> None:
    h = Headers([("foo", "1"), ("FOO", "2")])
    assert h.get("Foo", case_sensitive=False) == "1"
    # ADR-4's first sentence: the union, even though the exact key Foo is absent.
    assert h.values("Foo", case_sensitive=False) == ["1", "2"]
    h.append("fOO", "3", case_sensitive=False)
    assert h.items() == [("foo", "1"), ("FOO", "2"), ("foo", "3")]
    h.set("Foo", "9", case_sensitive=False)
    assert h.items() == [("Foo", "9")]
    h.delete("FOO", case_sensitive=False)
    assert h.items() == []


def test_case_insensitive_is_ascii_only() -> None:
    # Header names are ASCII; non-ASCII letters are not folded.
    assert Headers([("É", "1")]).get("é", case_sensitive=False) == ""


def test_items_is_a_copy() -> None:
    h = Headers([("A", "1")])
    h.items().append(("B", "2"))
    assert h.items() == [("A", "1")]


KEYS = ["foo", "Foo", "FOO", "bar", "Bar", "x-Id"]
op_keys = st.sampled_from(KEYS) | names
pair_lists = st.lists(st.tuples(op_keys, values), max_size=8)
modes = st.booleans()


def _fold(s: str) -> str:
    return s.translate(str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz"))


def _matches(name: str, key: str, case_sensitive: bool) -> bool:
    return name == key if case_sensitive else _fold(name) == _fold(key)


@st.composite
def case_variant(draw: st.DrawFn, key: str) -> str:
    flips = draw(st.lists(st.booleans(), min_size=len(key), max_size=len(key)))
    return "".join(
        c.swapcase() if flip and c.isascii() else c for c, flip in zip(key, flips, strict=True)
    )


@given(pair_lists, op_keys, values, modes)
def test_set_leaves_exactly_that_value(pairs, key, value, cs) -> None:
    h = Headers(pairs)
    h.set(key, value, case_sensitive=cs)
    assert h.values(key, case_sensitive=cs) == [value]
    assert h.get(key, case_sensitive=cs) == value


@given(pair_lists, op_keys, modes)
def test_delete_removes_all_matches_and_nothing_else(pairs, key, cs) -> None:
    h = Headers(pairs)
    h.delete(key, case_sensitive=cs)
    assert h.get(key, case_sensitive=cs) == ""
    assert h.values(key, case_sensitive=cs) == []
    assert h.items() == [p for p in pairs if not _matches(p[0], key, cs)]


@given(pair_lists, op_keys, values, modes)
def test_append_adds_one_value_at_the_end(pairs, key, value, cs) -> None:
    h = Headers(pairs)
    before = h.values(key, case_sensitive=cs)
    h.append(key, value, case_sensitive=cs)
    assert h.values(key, case_sensitive=cs) == [*before, value]
    assert h.items()[:-1] == pairs
    name = h.items()[-1][0]
    # Case-sensitively the key as given; case-insensitively the first match's case, if any.
    first = next((n for n, _ in pairs if _matches(n, key, cs)), key)
    assert name == first


@given(pair_lists, op_keys, modes)
def test_get_is_the_first_of_values(pairs, key, cs) -> None:
    h = Headers(pairs)
    found = h.values(key, case_sensitive=cs)
    assert h.get(key, case_sensitive=cs) == (found[0] if found else "")
    assert found == [v for n, v in pairs if _matches(n, key, cs)]


@given(pair_lists, op_keys, values, st.data())
def test_case_insensitive_ops_ignore_the_keys_case(pairs, key, value, data) -> None:
    variant = data.draw(case_variant(key))

    def run(k: str, op: str) -> object:
        h = Headers(pairs)
        if op in ("get", "values"):
            return getattr(h, op)(k, case_sensitive=False)
        if op == "delete":
            h.delete(k, case_sensitive=False)
        else:
            getattr(h, op)(k, value, case_sensitive=False)
        return h.items()

    for op in ("get", "values", "delete"):
        assert run(key, op) == run(variant, op)
    # APPEND takes the first match's case, so it only depends on the key's case when no
    # header matches; SET deletes every match first, so the new pair keeps the given case.
    present = any(_matches(n, key, False) for n, _ in pairs)
    if present:
        assert run(key, "append") == run(variant, "append")
    assert [(_fold(n), v) for n, v in run(key, "set")] == [
        (_fold(n), v) for n, v in run(variant, "set")
    ]


@given(pair_lists, op_keys, values)
def test_case_sensitive_ops_leave_other_names_alone(pairs, key, value) -> None:
    others = [p for p in pairs if p[0] != key]
    for op in ("set", "append", "delete"):
        h = Headers(pairs)
        if op == "delete":
            h.delete(key)
        else:
            getattr(h, op)(key, value)
        assert [p for p in h.items() if p[0] != key] == others
