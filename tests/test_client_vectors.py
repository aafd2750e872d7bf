"""Client-role vectors reach every client library: the judge (pure) and the runner (real
libraries through their drivers and the fake server)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nats_conformance.conformance import headers, judge, names, protocol, subjects, vectors
from nats_conformance.conformance.judge import Malformed, Rejected
from nats_conformance.harness.clients import vectors as client_vectors
from nats_conformance.harness.clients.checks import CheckResult
from nats_conformance.harness.clients.targets import ClientError, available_clients, open_client

BUNDLED = vectors.load_all([vectors.BUNDLED_DIR]).cases
CLIENT_CASES = client_vectors.client_cases(BUNDLED)
REFERENCE_CLIENT = "client:nats-py"


def _of(kind: str) -> list[vectors.Case]:
    return [case for case in CLIENT_CASES if case.kind == kind]


# --- the judge agrees with the reference: its own answers pass every vector -----------------


def _reference_block(case: vectors.Case) -> headers.HeaderBlock | Rejected:
    parsed = headers.parse_block(vectors.decode_bytes(case.data["input"]["block"]))
    return Rejected(parsed.reason) if isinstance(parsed, headers.HeaderError) else parsed


@pytest.mark.parametrize("case", _of("headers.parse"), ids=lambda c: c.id)
def test_reference_header_parse_passes(case: vectors.Case) -> None:
    got = judge.judge_header_block(case.data["expect"], _reference_block(case))
    assert got.outcome == "pass", got.message


@pytest.mark.parametrize("case", _of("headers.encode"), ids=lambda c: c.id)
def test_reference_header_encode_passes(case: vectors.Case) -> None:
    inp = case.data["input"]
    block = headers.HeaderBlock(inp.get("status"), inp.get("description"),
                                tuple((k, v) for k, v in inp["headers"]))  # fmt: skip
    encoded = headers.encode_block(block)
    got = encoded if isinstance(encoded, bytes) else Rejected(encoded.reason)
    assert judge.judge_encoded_block(case.data["expect"], got).outcome == "pass"


def test_reference_validation_passes() -> None:
    for case in _of("subject.validate"):
        inp = case.data["input"]
        valid = subjects.is_valid(inp["subject"], inp["use"])
        assert judge.judge_valid(case.data["expect"], valid).outcome == "pass", case.id
    for case in _of("name.validate"):
        inp = case.data["input"]
        valid = names.validate(inp["production"], inp["name"],
                               platform=inp.get("platform", "unix"),
                               internal=inp.get("internal", False))  # fmt: skip
        assert judge.judge_valid(case.data["expect"], valid).outcome == "pass", case.id


@pytest.mark.parametrize("case", _of("headers.op"), ids=lambda c: c.id)
def test_reference_header_op_passes(case: vectors.Case) -> None:
    inp = case.data["input"]
    h = headers.Headers((k, v) for k, v in inp["headers"])
    sensitive = inp["case"] == "sensitive"
    if inp["op"] == "get":
        got = {"value": h.get(inp["key"], case_sensitive=sensitive)}
    elif inp["op"] == "values":
        got = {"values": h.values(inp["key"], case_sensitive=sensitive)}
    else:
        args = () if inp["op"] == "delete" else (inp["value"],)
        getattr(h, inp["op"])(inp["key"], *args, case_sensitive=sensitive)
        got = {"headers": [list(p) for p in h.items()]}
    assert judge.judge_header_op(inp, case.data["expect"], got).outcome == "pass"


# --- the judge fails what it must ------------------------------------------------------------

pairs = st.lists(st.tuples(st.sampled_from("ABC"), st.sampled_from("123")), max_size=6)


@given(pairs, st.randoms())
def test_key_order_across_names_is_not_judged(fields: list[tuple[str, str]], rnd) -> None:  # type: ignore[no-untyped-def]
    want = headers.HeaderBlock(None, None, tuple(fields))
    keys = list(dict.fromkeys(name for name, _ in fields))
    rnd.shuffle(keys)
    regrouped = tuple((k, v) for k in keys for name, v in fields if name == k)
    assert judge.judge_block(want, headers.HeaderBlock(None, None, regrouped)).outcome == "pass"


@given(pairs.filter(lambda f: len({v for _, v in f}) > 1 and len(f) > 1))
def test_losing_or_reordering_one_names_values_fails(fields: list[tuple[str, str]]) -> None:
    want = headers.HeaderBlock(None, None, tuple(fields))
    assert judge.judge_block(want, headers.HeaderBlock(None, None, tuple(fields[1:]))).outcome == (
        "fail"
    )
    assert judge.judge_block(want, Rejected("no")).outcome == "fail"


@pytest.mark.parametrize(
    ("valid", "sent", "outcome"),
    [
        (False, Rejected("invalid subject"), "pass"),  # refused locally
        (False, "foo bar", "pass"),  # sent unchanged: the server judges it
        (False, "foo", "fail"),  # "foo bar" became PUB foo bar (subject foo, reply bar)
        (False, Malformed("parser_error"), "fail"),  # not a well-formed operation
        (True, "foo bar", "pass"),
        (True, Rejected("no"), "fail"),
        (True, "foo", "fail"),
    ],
)
def test_sent_subject(valid: bool, sent: str | Rejected | Malformed, outcome: str) -> None:
    got = judge.judge_sent_subject({"valid": valid}, "foo bar", sent)
    assert got.outcome == outcome, got.message


def test_an_invalid_block_accepted_fails_and_rejected_passes() -> None:
    expect = {"error": "missing_version"}
    assert judge.judge_header_block(expect, Rejected("bad")).outcome == "pass"
    accepted = headers.HeaderBlock(None, None, (("A", "1"),))
    assert judge.judge_header_block(expect, accepted).outcome == "fail"


# --- every client-role vector gives rows for a real library -----------------------------------


@pytest.fixture(scope="module")
def nats_py_rows() -> Iterator[list[CheckResult]]:
    with open_client(REFERENCE_CLIENT) as client:
        yield list(client_vectors.run_client_vectors(client, BUNDLED))


def test_a_role_is_a_promise(nats_py_rows: list[CheckResult]) -> None:
    """Every client-role vector has at least one row; a skip always says why; ids are unique."""
    ids = [row.case_id for row in nats_py_rows]
    assert len(ids) == len(set(ids))
    reached = {case_id.split("@")[0] for case_id in ids}
    assert reached == {case.id for case in CLIENT_CASES}
    for row in nats_py_rows:
        assert row.outcome in ("pass", "fail", "skip", "error")
        assert row.message, row.case_id
        assert row.source.document and row.description


def test_nats_py_known_behaviour(nats_py_rows: list[CheckResult]) -> None:
    by_id = {row.case_id: row for row in nats_py_rows}
    errors = [(r.case_id, r.message) for r in nats_py_rows if r.outcome == "error"]
    assert not errors, errors[:5]
    # Its headers are a dict: a repeated key keeps one value, through the parser and delivered.
    for path in ("decode", "hmsg"):
        assert by_id[f"headers.parse.multi-value.order@{path}"].outcome == "fail"
        assert by_id[f"headers.parse.doc.adr4-one-header@{path}"].outcome == "pass"
    # A subject with a space is refused or sent unchanged, never split into subject and reply.
    outcomes = Counter(r.outcome for r in nats_py_rows if r.case_id.endswith("@publish"))
    assert outcomes["pass"] > 0
    # Rows by kind: every path of a reached kind ran, the others say they are not reached.
    assert by_id["headers.parse.doc.adr4-one-header@decode"].level == "must"
    not_reached = [r for r in nats_py_rows if r.case_id.endswith("@client")]
    assert not_reached and all(r.outcome == "skip" for r in not_reached)


def test_invalid_blocks_get_a_must_survival_row(nats_py_rows: list[CheckResult]) -> None:
    survival = [r for r in nats_py_rows if r.case_id.endswith("@hmsg-survives")]
    invalid = [c for c in _of("headers.parse") if "error" in c.data["expect"]]
    assert len(survival) >= len(invalid) > 0
    assert {r.level for r in survival} == {"must"}


HOST_CLIENTS = [spec for spec, _ in available_clients() if spec.startswith("client:")]


@pytest.mark.parametrize("spec", HOST_CLIENTS)
def test_every_library_gets_a_row_per_client_vector(spec: str) -> None:
    """A sample of every reached kind through every library; a library that cannot be built here
    is the driver tests' concern."""
    sample = [case for kind in client_vectors.PATHS for case in _of(kind)[:6]]
    try:
        client = open_client(spec)
        client.driver().close()
    except ClientError as exc:
        pytest.skip(f"{spec} cannot start here: {exc}")
    with client:
        rows = list(client_vectors.run_client_vectors(client, sample))
    assert {r.case_id.split("@")[0] for r in rows} == {c.id for c in sample}
    broken = [(r.case_id, r.message) for r in rows if r.outcome == "error"]
    assert not broken, broken[:5]


def test_hmsg_carries_any_block() -> None:
    """The fake server frames a block by its length even when the documents reject it."""
    from nats_conformance.harness.clients.fake_server import hmsg_op

    data = hmsg_op("s", "1", b"NATS/1.0\nX: 1\n\n", b"p")
    assert data == b"HMSG s 1 15 16\r\nNATS/1.0\nX: 1\n\np\r\n"


@pytest.mark.parametrize(
    ("expect", "sent", "outcome"),
    [
        ({"bytes": "PUB a 0\r\n\r\n"}, protocol.Pub("a", None, b""), "pass"),
        ({"bytes": "PUB a 0\r\n\r\n"}, protocol.Pub("a", "b", b""), "fail"),
        ({"bytes": "PUB a 0\r\n\r\n"}, Rejected("no"), "fail"),
        ({"error": "invalid_token"}, Rejected("no"), "pass"),
        ({"error": "invalid_token"}, protocol.Pub("a", "b", b""), "fail"),
        ({"error": "invalid_token"}, Malformed("parser_error"), "fail"),
    ],
)
def test_sent_op(
    expect: dict[str, str], sent: protocol.Op | Rejected | Malformed, outcome: str
) -> None:
    asked = protocol.Pub("a", None, b"")
    assert judge.judge_sent_op(expect, asked, sent).outcome == outcome


def test_sid_is_the_librarys_to_choose() -> None:
    asked, sent = protocol.Sub("a", None, "1"), protocol.Sub("a", None, "7")
    assert judge.judge_sent_op({"bytes": ""}, asked, sent).outcome == "fail"
    chosen = frozenset({"sid"})
    assert judge.judge_sent_op({"bytes": ""}, asked, sent, chosen=chosen).outcome == "pass"


def _reaction(*delivered: judge.Delivery, pongs: int = 1, closed: bool = False) -> judge.Reaction:
    return judge.Reaction(delivered, pongs, (), closed, probed=True)


def test_reaction() -> None:
    msg = {"op": "MSG", "subject": "foo", "sid": "1", "payload": "hi"}
    expect = {"events": [msg]}
    hi = judge.Delivery("1", "foo", None, b"hi", None)
    assert judge.judge_reaction(expect, _reaction(hi)).outcome == "pass"
    assert judge.judge_reaction(expect, _reaction()).outcome == "fail"  # not delivered
    assert judge.judge_reaction(expect, _reaction(hi, pongs=0)).outcome == "fail"  # hung
    assert judge.judge_reaction(expect, _reaction(hi, hi)).outcome == "fail"  # twice
    error = {"events": [{"error": {"reason": "parser_error", "err": None, "closes": True}}]}
    assert judge.judge_reaction(error, _reaction(closed=True, pongs=0)).outcome == "pass"
    assert judge.judge_reaction(error, _reaction()).outcome == "fail"  # went on silently
    closing = {"events": [{"op": "-ERR", "message": "'Stale Connection'"}]}
    assert judge.judge_reaction(closing, _reaction(closed=True, pongs=0)).outcome == "pass"
    staying = {"events": [{"op": "-ERR", "message": "'Invalid Subject'"}]}
    assert judge.judge_reaction(staying, _reaction(closed=True, pongs=0)).outcome == "fail"
    assert judge.judge_reaction(staying, _reaction()).outcome == "pass"
