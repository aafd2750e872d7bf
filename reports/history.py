"""The history store: every valid row ever reported, as Parquet partitioned by run date and target.

Appending is idempotent per (run, target): rows of a run already in the store are not added
again, so reporting the same results file twice counts its rows once.

A partition directory is named ``target=<name>`` for a target name of up to ``NAME_IN_PATH``
bytes, as it always was, so stores written before keep their layout and read as they are. A
longer name (a directory name holds 255 bytes, and Spark escapes ``:``, ``/``, ``=`` and more as
``%XX``) gets ``target=<its first PREFIX characters>~<sha256 prefix>``; the full name is kept in
the data as ``target_name`` (null in rows written before it existed, whose directory is the name).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from nats_conformance.harness.results import ROW_KEYS

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

PARTITIONS = ("run_date", "target")
# Escaped, a byte can take 3 ("%3A"): 80 bytes stay within 240 of a directory name's 255.
NAME_IN_PATH = 80
PREFIX = 40  # characters: at most 160 bytes, escaped or not (4 bytes per character in UTF-8)


def schema() -> StructType:
    """The store's columns as written: the row's fields (``target`` holding the partition's
    name), the full target name, the row's time as a timestamp, and the run date."""
    from pyspark.sql import types as T

    fields = [
        T.StructField(k, T.DoubleType() if k == "duration_ms" else T.StringType()) for k in ROW_KEYS
    ]
    return T.StructType(
        [
            *fields,
            T.StructField("target_name", T.StringType()),
            T.StructField("ts", T.TimestampType()),
            T.StructField("run_date", T.StringType()),
        ]
    )


def partition_name(target: Column) -> Column:
    """The partition value of ``target``: the name itself when short, else a bounded prefix and
    a digest (distinct names stay apart: the digest covers the whole name)."""
    from pyspark.sql import functions as F

    digest = F.substring(F.sha2(target, 256), 1, 16)
    return F.when(F.octet_length(target) <= NAME_IN_PATH, target).otherwise(
        F.concat(F.substring(target, 1, PREFIX), F.lit("~"), digest)
    )


def exists(spark: SparkSession, store: str) -> bool:
    if "://" not in store:
        return any(Path(store).glob("run_date=*"))
    try:
        load(spark, store).limit(1).count()
    except Exception:  # a store not created yet: any error reading it means absent
        return False
    return True


def load(spark: SparkSession, store: str) -> DataFrame:
    """The store's rows: the row fields (``target`` the full name), ``ts``, ``run_date``, and
    ``target_dir`` (the partition value, to read only the partitions of some targets)."""
    from pyspark.sql import functions as F

    # An explicit schema: partition values such as a target named "1" must stay strings.
    stored = spark.read.schema(schema()).parquet(store)
    return stored.select(
        *[
            F.coalesce("target_name", "target").alias(k) if k == "target" else F.col(k)
            for k in ROW_KEYS
        ],
        "ts",
        "run_date",
        F.col("target").alias("target_dir"),
    )


@dataclass(frozen=True)
class Appended:
    """What an append wrote: how many rows, and the partitions (run date, target directory)
    they went to (where the summaries look for the runs they do not know yet)."""

    rows: int
    partitions: frozenset[tuple[str, str]]


def append(spark: SparkSession, rows: DataFrame, store: str, known: DataFrame | None) -> Appended:
    """Add the valid ``rows`` (the row fields and ``ts``) of runs not in ``known`` (``run_id``,
    ``target``: the runs the store holds, None for a new store)."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    fresh = rows.select(*ROW_KEYS, "ts").withColumns(
        {"run_date": F.date_format("ts", "yyyy-MM-dd"), "target_name": F.col("target")}
    )
    if known is not None:
        fresh = fresh.join(F.broadcast(known), ["run_id", "target"], "left_anti")
    # No shuffle: results files hold a run or a few, so each task writes to few partitions, and
    # the writer sorts its rows by partition so each gets one file per task.
    written = Observation("appended")
    fresh = fresh.withColumn("target", partition_name(F.col("target_name")))
    fresh = fresh.select(*schema().fieldNames()).observe(
        written,
        F.count(F.lit(1)).alias("rows"),
        F.collect_set(F.struct("run_date", "target")).alias("partitions"),
    )
    fresh.write.mode("append").partitionBy(*PARTITIONS).parquet(store)
    seen = written.get
    return Appended(int(seen["rows"]), frozenset((p[0], p[1]) for p in seen["partitions"]))


def rows_of(
    spark: SparkSession,
    history: DataFrame,
    runs: Iterable[tuple[str, str]],
    partitions: Iterable[tuple[str, str]],
) -> DataFrame:
    """The rows of ``runs`` (target, run id) of ``history`` (``load``), reading only
    ``partitions`` (run date, target directory: those the runs are in)."""
    from pyspark.sql import functions as F

    wanted = spark.createDataFrame(sorted(set(runs)), "target string, run_id string")
    return within(history, partitions).join(F.broadcast(wanted), ["target", "run_id"])


def within(history: DataFrame, partitions: Iterable[tuple[str, str]]) -> DataFrame:
    """The rows of ``history`` (``load``) in ``partitions`` (run date, target directory), and
    few others: Spark reads the directories of every date with every target named."""
    from pyspark.sql import functions as F

    chosen = set(partitions)
    return history.where(
        F.col("run_date").isin(sorted({d for d, _ in chosen}))
        & F.col("target_dir").isin(sorted({t for _, t in chosen}))
    )
