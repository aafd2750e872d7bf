"""`nats-conformance report --spark-master sc://...`: the pipeline through a real Spark Connect
server (the one shipped in the pyspark wheel), started here on 127.0.0.1."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_command import CLI
from report_samples import free_port, result_row, write_results

from nats_conformance.harness.runtime.processes import stop_process

pyspark = pytest.importorskip("pyspark")
pytest.importorskip("grpc", reason="Spark Connect needs pyspark[connect]")
pytest.importorskip("pyarrow", reason="Spark Connect needs pyspark[connect]")

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module")
def connect_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = Path(pyspark.__file__).parent
    port = free_port()
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
        stop_process(server, 30)


def test_the_report_runs_on_spark_connect(connect_url: str, tmp_path: Path) -> None:
    rows = [result_row(case_id=f"c{i}", outcome="fail" if i == 0 else "pass") for i in range(3)]
    results = write_results(tmp_path / "r.jsonl", [*rows, "not json"])
    cmd = [*CLI, "report", str(results), "--out", "rep",
           "--spark-master", connect_url]  # fmt: skip
    run = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stderr  # the bad row
    assert f"invalid row: {results}:4: not a JSON object" in run.stderr
    summary = json.loads((tmp_path / "rep" / "summary.json").read_text())
    [target] = summary["targets"]
    assert (target["must"]["pass"], target["must"]["fail"]) == (2, 1)
    assert any((tmp_path / "rep" / "history").glob("date=2026-11-01/*.parquet"))
