"""Client-role vectors reach every client library: the judge (pure) and the runner (real
libraries through their drivers and the fake server)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nats_conformance.conformance import headers, judge, names, protocol, subjects, vectors
from nats_conformance.conformance.judge import Malformed, Rejected
from nats_conformance.conformance.transports import DEFAULT_TRANSPORT
from nats_conformance.conformance.verdicts import LEVELS, level_rank
from nats_conformance.harness.clients import client_vectors
from nats_conformance.harness.clients import jetstream as client_jetstream
from nats_conformance.harness.clients import scripts as client_scripts
from nats_conformance.harness.clients.client_targets import open_client
from nats_conformance.harness.clients.registry import ClientError, available_clients
from nats_conformance.harness.results import Checked

BUNDLED = vectors.load_all([vectors.BUNDLED_DIR]).cases
CLIENT_CASES = client_vectors.client_cases(BUNDLED)
REFERENCE_CLIENT = "client:nats-py"


def _of(kind: str) -> list[vectors.Case]:
    return [case for case in CLIENT_CASES if case.kind == kind]


REJECTED_BLOCKS = [case for case in _of("headers.parse") if "error" in case.data["expect"]]


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
def nats_py_rows() -> Iterator[list[Checked]]:
    with open_client(REFERENCE_CLIENT) as client:
        yield list(client_vectors.run_client_vectors(client, BUNDLED))


def test_a_role_is_a_promise(nats_py_rows: list[Checked]) -> None:
    """Every client-role vector has at least one row over tcp, but a case of another transport
    itself (it runs over its own only); a skip always says why; ids are unique."""
    ids = [row.case.case_id for row in nats_py_rows]
    assert len(ids) == len(set(ids))
    reached = {case_id.split("@")[0] for case_id in ids}
    over_tcp = {case.id for case in client_scripts.script_cases(CLIENT_CASES, DEFAULT_TRANSPORT)}
    elsewhere = {case.id for case in client_scripts.script_cases(CLIENT_CASES)} - over_tcp
    assert elsewhere  # client-transport.json's cases over tls, tls-first, ws
    assert reached == {case.id for case in CLIENT_CASES} - elsewhere
    for row in nats_py_rows:
        assert row.found.outcome in ("pass", "fail", "skip", "error")
        assert row.found.message, row.case.case_id
        assert row.case.source.document and row.case.description


def test_nats_py_known_behaviour(nats_py_rows: list[Checked]) -> None:
    by_id = {row.case.case_id: row for row in nats_py_rows}
    errors = [(r.case.case_id, r.found.message) for r in nats_py_rows if r.found.outcome == "error"]
    assert not errors, errors[:5]
    # Its headers are a dict: a repeated key keeps one value, through the parser and delivered.
    for path in ("decode", "hmsg"):
        assert by_id[f"headers.parse.multi-value.order@{path}"].found.outcome == "fail"
        assert by_id[f"headers.parse.doc.adr4-one-header@{path}"].found.outcome == "pass"
    # Its publish sends the headers it takes as the documents write them, refuses names the
    # documents refuse, and sends a CR or LF in a value as other bytes (ADR-4: must refuse).
    assert by_id["headers.encode.doc.cp-bar-baz@hpub"].found.outcome == "pass"
    assert by_id["headers.encode.error.name-colon@hpub"].found.outcome == "pass"
    assert by_id["headers.encode.error.value-crlf-injection@hpub"].found.outcome == "fail"
    # A subject with a space is refused or sent unchanged, never split into subject and reply.
    outcomes = Counter(r.found.outcome for r in nats_py_rows if r.case.case_id.endswith("@publish"))
    assert outcomes["pass"] > 0
    # Rows by kind: every path of a reached kind ran, the others say they are not reached.
    assert by_id["headers.parse.doc.adr4-one-header@decode"].case.level == "must"
    not_reached = [r for r in nats_py_rows if r.case.case_id.endswith("@client")]
    assert not_reached and all(r.found.outcome == "skip" for r in not_reached)


def test_hpub_publishes_every_encode_case_without_a_status_line() -> None:
    """The hpub path asks each headers.encode case a publish can express (header fields, no
    status line), needs the headers capability, and each of its rows keeps the id it had as a
    check of its own (``row_aliases``), so baselines and history carry over."""
    [hpub] = [path for path in client_vectors.PATHS["headers.encode"] if path.name == "hpub"]
    assert hpub.capability == "headers"
    encode = _of("headers.encode")
    asked = [case for case in encode if hpub.applies(case)]
    assert asked and len(asked) < len(encode)
    for case in encode:
        no_status = all(case.data["input"].get(k) is None for k in ("status", "description"))
        assert hpub.applies(case) == no_status, case.id
    renames = vectors.renames(BUNDLED)
    for case in asked:
        former = "client.hpub.headers." + case.id.removeprefix("headers.encode.")
        assert renames.current(former) == f"{case.id}@hpub"


def test_every_former_row_id_names_a_row_the_paths_give() -> None:
    """A row alias carries history over to a row that exists: one the client paths plan."""
    rows = {row_id for row_id, _, _ in client_vectors.planned_rows(BUNDLED)}
    moved = vectors.renames(BUNDLED).rows
    assert moved and set(moved.values()) <= rows
    assert not set(moved) & rows  # and no former id is a row of today


def test_invalid_blocks_get_a_survival_row_at_their_level(nats_py_rows: list[Checked]) -> None:
    survival = {
        r.case.case_id: r for r in nats_py_rows if r.case.case_id.endswith("@hmsg-survives")
    }
    assert len(survival) >= len(REJECTED_BLOCKS) > 0
    for case in REJECTED_BLOCKS:
        assert survival[f"{case.id}@hmsg-survives"].case.level == case.level


def test_no_row_is_above_its_vector(nats_py_rows: list[Checked]) -> None:
    """Every row a client vector gives, run for real: never stricter than the vector."""
    level = {case.id: case.level for case in CLIENT_CASES}
    for row in nats_py_rows:
        vector = level[row.case.case_id.split("@")[0]]
        assert level_rank(row.case.level) >= level_rank(vector), (
            row.case.case_id,
            row.case.level,
            vector,
        )


def test_every_client_row_observes_what_it_judged(nats_py_rows: list[Checked]) -> None:
    """A row that judged what the library did says what that was; a skip observed nothing.
    (Rows of client scripts, ids without a path, and of the JetStream path are
    harness.clients.scripts' and harness.clients.jetstream's to fill.)"""
    for row in nats_py_rows:
        path = row.case.case_id.partition("@")[2]
        if row.found.outcome in ("pass", "fail") and path not in ("", client_jetstream.SUFFIX):
            assert row.found.observed, row.case.case_id
        if row.found.outcome == "skip":
            assert row.found.observed == "", row.case.case_id


def _at(case: vectors.Case, level: str) -> vectors.Case:
    return replace(case, data={**case.data, "level": level})


@given(st.sampled_from(CLIENT_CASES), st.sampled_from(LEVELS))
def test_a_derived_row_is_never_above_its_vector(case: vectors.Case, level: str) -> None:
    """Whatever a vector's level, every row any path gives for it (the path's own row, a
    survival row, a validator's observation) is at that level or below."""
    case = _at(case, level)
    specs = [spec for path in client_vectors.PATHS.get(case.kind, ()) for spec in
             path.row_specs(case)]  # fmt: skip
    for spec in specs:
        assert level_rank(spec.level) >= level_rank(level), (case.id, spec)


@pytest.mark.parametrize("case", REJECTED_BLOCKS[:3], ids=lambda c: c.id)
def test_a_survival_row_follows_its_vector(case: vectors.Case) -> None:
    """The survival row of a block the documents reject is at the vector's level: an info
    vector's is info, not must."""
    for level in LEVELS:
        [hmsg] = [p for p in client_vectors.PATHS["headers.parse"] if p.name == "hmsg"]
        assert [s.level for s in hmsg.row_specs(_at(case, level))] == [level, level]


def _observation_sample() -> list[vectors.Case]:
    """Cases every client path asks, with the ones whose observation has the most room to vary:
    blocks the documents reject, server bytes with errors or -ERRs, invalid subjects."""
    asked = [
        case
        for kind, paths in client_vectors.PATHS.items()
        for path in paths
        for case in [c for c in _of(kind) if path.applies(c) and path.limit(c) is None][:3]
    ]
    troubled = [
        case
        for case in _of("protocol.parse")
        if any("error" in e or e.get("op") == "-ERR" for e in case.data["expect"]["events"])
    ]
    invalid = [case for case in _of("subject.validate") if not case.data["expect"]["valid"]]
    chosen = asked + REJECTED_BLOCKS[:4] + troubled[:6] + invalid[:6]
    return list({case.id: case for case in chosen}.values())


# Kinds whose paths nats-py's driver asks without a missing capability.
NATS_PY_OBSERVED = {"headers.parse", "headers.encode", "subject.validate", "protocol.encode",
                    "protocol.parse"}  # fmt: skip


def test_two_runs_observe_the_same() -> None:
    """The same vectors against the same library twice: every row's observation is the same
    (no inbox names, ports, times or addresses in it), and the judged rows observed something."""
    sample = _observation_sample()
    with open_client(REFERENCE_CLIENT) as client:
        run = client_vectors.run_client_vectors
        runs = [{r.case.case_id: r.found.observed for r in run(client, sample)}
                for _ in range(2)]  # fmt: skip
    assert runs[0].keys() == runs[1].keys()
    differing = {k: (runs[0][k], runs[1][k]) for k in runs[0] if runs[0][k] != runs[1][k]}
    assert not differing, differing
    observed = {case.kind for case in sample for row, seen in runs[0].items()
                if seen and row.startswith(case.id + "@")}  # fmt: skip
    assert observed >= NATS_PY_OBSERVED


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
    assert {r.case.case_id.split("@")[0] for r in rows} == {c.id for c in sample}
    broken = [(r.case.case_id, r.found.message) for r in rows if r.found.outcome == "error"]
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


# --- one byte comparison of encoded header blocks, on every path --------------------------------

ONE_HEADER = {"block": "NATS/1.0\r\nBar: Baz\r\n\r\n"}


@pytest.mark.parametrize(
    ("sent", "outcome"),
    [
        (b"NATS/1.0\r\nBar: Baz\r\n\r\n", "pass"),
        (b"NATS/1.0\r\nBar:Baz\r\n\r\n", "pass"),  # ADR-4: "optional leading whitespace"
        (b"NATS/1.0\r\nBar:\tBaz  \r\n\r\n", "pass"),  # ... "and optional trailing whitespace"
        (b"NATS/1.0\r\nbar: Baz\r\n\r\n", "fail"),  # APPEND "is case-preserving"
        (b"NATS/1.0\r\nBar: baz\r\n\r\n", "fail"),
        (b"NATS/1.0\r\nBar : Baz\r\n\r\n", "fail"),  # "No spaces ... between the name and colon"
        (b"NATS/1.0 503\r\nBar: Baz\r\n\r\n", "fail"),
        (b"NATS/1.0\r\nBar: Baz\r\n", "fail"),
    ],
)
def test_every_path_judges_encoded_headers_alike(sent: bytes, outcome: str) -> None:
    """The library's encoder (encode), its publish (hpub), its HPUB through the protocol path
    (send) and a client script's block: one comparison, one answer for the same bytes."""
    from nats_conformance.conformance import client_script

    assert judge.judge_encoded_block(ONE_HEADER, sent).outcome == outcome
    want = vectors.decode_bytes(ONE_HEADER["block"])
    asked = protocol.HPub("s", None, want, b"")
    as_sent = judge.judge_sent_op({"bytes": ""}, asked, protocol.HPub("s", None, sent, b""))
    assert as_sent.outcome == outcome, as_sent.message
    pattern = {"op": "HPUB", "block": {"headers": [["Bar", "Baz"]]}}
    problems = client_script.op_problems(pattern, {"op": "HPUB", "headers": sent}, "sent[0]")
    assert (not problems) == (outcome == "pass"), problems


@given(pairs, st.randoms())
def test_the_encoded_comparison_takes_any_key_order_and_spacing(fields, rnd) -> None:  # type: ignore[no-untyped-def]
    want = headers.encode_block(headers.HeaderBlock(None, None, tuple(fields)))
    assert isinstance(want, bytes)
    keys = list(dict.fromkeys(name for name, _ in fields))
    rnd.shuffle(keys)
    spaces = ("", " ", "\t")  # ADR-4's optional whitespace around a value
    lines = [k + ":" + rnd.choice(spaces) + v + rnd.choice(spaces) + "\r\n"
             for k in keys for name, v in fields if name == k]  # fmt: skip
    got = ("NATS/1.0\r\n" + "".join(lines) + "\r\n").encode()
    assert judge.same_block(want, got) is not None


@pytest.mark.parametrize(
    ("case", "headers_given", "answer", "outcome"),
    [
        ("sensitive", [], None, "pass"),  # absent: the protocol's null, ADR-4's ""
        ("sensitive", [], "", "pass"),
        ("sensitive", [["foo", "1"]], None, "pass"),  # case-sensitive: Foo is absent
        ("insensitive", [["foo", "1"]], None, "fail"),  # present: null is not "1"
        ("sensitive", [["Foo", ""]], None, "fail"),  # an empty value is not an absent key
        ("sensitive", [["Foo", ""]], "", "pass"),
    ],
)
def test_get_of_an_absent_key(
    case: str, headers_given: list[list[str]], answer: str | None, outcome: str
) -> None:
    inp = {"headers": headers_given, "case": case, "op": "get", "key": "Foo"}
    want = headers.Headers((k, v) for k, v in headers_given)
    expect = {"value": want.get("Foo", case_sensitive=case == "sensitive")}
    assert judge.judge_header_op(inp, expect, {"value": answer}).outcome == outcome


def test_values_of_an_absent_key_may_be_null() -> None:
    inp = {"headers": [], "case": "sensitive", "op": "values", "key": "Foo"}
    assert judge.judge_header_op(inp, {"values": []}, {"values": None}).outcome == "pass"


def test_every_headers_op_vector_reads_the_protocols_absent_answer() -> None:
    """The headers.op vectors expect "" for GET of an absent key, drivers answer null: the judge
    reads the two alike, so a driver following the protocol passes every GET vector the
    reference passes."""
    gets = [case for case in _of("headers.op") if case.data["input"]["op"] == "get"]
    absent = 0
    for case in gets:
        inp = case.data["input"]
        h = headers.Headers((k, v) for k, v in inp["headers"])
        sensitive = inp["case"] == "sensitive"
        found = h.values(inp["key"], case_sensitive=sensitive)
        answer = h.get(inp["key"], case_sensitive=sensitive) if found else None
        absent += not found
        assert judge.judge_header_op(inp, case.data["expect"], {"value": answer}).outcome == "pass"
    assert absent > 0


# --- the connection after a block the documents reject -----------------------------------------


@pytest.mark.parametrize(
    ("state", "errors", "outcome"),
    [
        ("usable", [], "pass"),
        ("closed", [], "pass"),  # closing, even silently, is the library's choice
        ("closed", [{"event": "error", "message": "bad header"}], "pass"),
        # The valid message after the block was lost: what the library did with the block
        # (dropping what followed it too) is observed, not judged.
        ("answers", [], "pass"),
        ("answers", [{"event": "error", "message": "bad header"}], "pass"),
        ("silent", [], "fail"),  # no message, no PONG, no close: hung
    ],
)
def test_survival(state: str, errors: list[dict[str, str]], outcome: str) -> None:
    judged = client_vectors._survival(state, errors, 1.0)
    assert judged.outcome == outcome
    # What fails is the library losing its footing: robustness, at whatever level.
    assert judged.category == ("robustness" if outcome == "fail" else "conformance")


class _Reader:
    """A connection to a library whose parser answers a PING only once it has seen ``eats`` of
    them: one still reading a line ended by LF alone takes the first PING as that line's end."""

    def __init__(self, eats: int) -> None:
        self.eats = eats
        self.pings = 0
        self.closed_by_client = False

    def count(self) -> int:
        return 0

    def send(self, data: bytes) -> None:
        self.pings += data == b"PING\r\n"

    def wait_for(self, kind: Any, timeout: float, after: int) -> object | None:
        return object() if self.pings > self.eats else None


@pytest.mark.parametrize(("eats", "state"), [(0, "answers"), (1, "answers"), (5, "silent")])
def test_a_hang_is_two_unanswered_pings(
    eats: int, state: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(client_vectors, "HANG_AFTER", 0.01)
    conn = _Reader(eats)
    assert client_vectors._probe(conn, 0.01, []) == state  # type: ignore[arg-type]
    assert conn.pings == min(eats + 1, 2)


# --- observations hold no run's particulars ----------------------------------------------------


@given(
    st.integers(1024, 65535),
    st.integers(0, 10**6),
    st.integers(0, 2**48),
    st.datetimes(),
)
def test_steady_words_do_not_change_between_runs(
    port: int, ms: int, address: int, when: object
) -> None:
    def said(port: int, ms: int, address: int, when: object) -> str:
        return judge.steady(
            f"nats: connection to nats://127.0.0.1:{port} closed after {ms}ms "
            f"(<Subscription object at 0x{address:012x}>) at {when}Z, waited {ms / 1000} s"
        )

    assert said(port, ms, address, when) == said(4222, 1, 2**40, "2000-01-01 00:00:00")
    assert judge.steady("invalid subject 'foo bar'") == "invalid subject 'foo bar'"


# --- what the library's own validator says is an observation -----------------------------------


@pytest.mark.parametrize(
    ("quote", "level"),
    [
        ("A subject is comprised of 1 or more tokens.", "info"),
        ("Currently the Go client simply validates that stream names are not empty", "info"),
        ("Clients must validate subjects before sending them.", "must"),
        ("A client should reject a subject with a space.", "should"),
    ],
)
def test_validator_level(quote: str, level: str) -> None:
    assert judge.validator_level("must", quote) == level
    assert judge.validator_level("info", quote) == "info"  # never above the case


def test_the_bundled_validate_rows_are_observations() -> None:
    """No cited statement asks a client to validate: every validate row is info, observed."""
    for case in _of("subject.validate") + _of("name.validate"):
        [path] = [p for p in client_vectors.PATHS[case.kind] if p.name == "validate"]
        assert [spec.level for spec in path.row_specs(case)] == ["info"], case.id
    wrong = judge.judge_valid({"valid": False}, True)
    assert wrong.outcome == "fail" and wrong.observed == {"valid": True}


# --- roles: what a client does with bad bytes from a server is observed -------------------------


def test_reaction() -> None:
    msg = {"op": "MSG", "subject": "foo", "sid": "1", "payload": "hi"}
    expect = {"events": [msg]}
    hi = judge.Delivery("1", "foo", None, b"hi", None)
    assert judge.judge_reaction(expect, _reaction(hi)).outcome == "pass"
    assert judge.judge_reaction(expect, _reaction()).outcome == "fail"  # not delivered
    assert judge.judge_reaction(expect, _reaction(hi, pongs=0)).outcome == "fail"  # hung
    assert judge.judge_reaction(expect, _reaction(hi, hi)).outcome == "fail"  # twice
    # Bad bytes or an -ERR: closing, staying, reporting or not are the client's choice, observed.
    error = {"events": [{"error": {"reason": "parser_error", "err": None, "closes": True}}]}
    closing = {"events": [{"op": "-ERR", "message": "'Stale Connection'"}]}
    staying = {"events": [{"op": "-ERR", "message": "'Invalid Subject'"}]}
    for bad in (error, closing, staying):
        for closed in (True, False):
            got = judge.judge_reaction(bad, _reaction(closed=closed, pongs=int(not closed)))
            assert got.outcome == "pass", (bad, closed, got.message)
            assert got.observed["closed"] is closed
    # Doing nothing visible at all (no close, no error, no PONG to the probe) is a hang.
    for bad in (error, closing, staying):
        hung = judge.judge_reaction(bad, _reaction(pongs=0))
        assert (hung.outcome, hung.category) == ("fail", "robustness"), bad
        reported = judge.Reaction((), 0, ("parse error",), False, probed=True)
        assert judge.judge_reaction(bad, reported).outcome == "pass"
    # Nothing is delivered of what follows bytes the documents reject.
    assert judge.judge_reaction(error, _reaction(hi)).outcome == "fail"
    # Valid bytes: the connection must stay usable.
    assert judge.judge_reaction(expect, _reaction(hi, closed=True, pongs=0)).outcome == "fail"
