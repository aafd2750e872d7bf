"""One Spark session per process, configured for these machines (loopback only, quiet, small)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
LOG_CONFIG = Path(__file__).resolve().parent / "log4j2.properties"


def _local_cores(master: str) -> int | None:
    """The cores of a local master (local, local[N], local[*]); None for a cluster.

    A shuffle partition per core: the history's scans are small per task, and Spark's default
    of 200 partitions spends more time scheduling than working.
    """
    found = re.fullmatch(r"local(?:\[(\d+|\*)(?:,\d+)?\])?", master)
    if found is None:
        return None
    cores = found.group(1)
    if cores is None:
        return 1
    return os.cpu_count() or 1 if cores == "*" else int(cores)


class SparkUnavailable(RuntimeError):
    """pyspark is not installed, or no session can be started (no Java, a bad master URL)."""


def session(master: str | None = None) -> SparkSession:
    """The process's Spark session: local by default, ``sc://...`` for Spark Connect.

    A session already started in this process is reused (Spark allows one per JVM).
    """
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:
        raise SparkUnavailable(
            "pyspark is not installed (pip install pyspark, a dependency of nats-conformance)"
        ) from exc
    target = master or DEFAULT_MASTER
    # Without this Spark binds the machine's external interface; the suite stays on loopback.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if target.startswith("sc://"):
        builder = SparkSession.builder.remote(target)
    else:
        builder = (
            SparkSession.builder.master(target)
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", str(_local_cores(target) or 200))
            .config("spark.driver.memory", os.environ.get("NATS_CONFORMANCE_SPARK_MEMORY", "1g"))
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={LOG_CONFIG}")
            # A task writing to a few history partitions keeps a file open for each rather than
            # sorting its rows by partition first.
            .config("spark.sql.maxConcurrentOutputFileWriters", "64")
            # The history has a directory per (run date, target): listing thousands of them on
            # the driver is quicker than a Spark job per level of them.
            .config("spark.sql.sources.parallelPartitionDiscovery.threshold", "100000")
        )
    builder = builder.appName("nats-conformance-report")
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # Py4J and Connect raise many types; all mean "no session"
        raise SparkUnavailable(f"cannot start Spark ({target}): {exc}") from exc
    if not target.startswith("sc://"):
        spark.sparkContext.setLogLevel("ERROR")
    return spark
