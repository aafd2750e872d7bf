"""The history store: every valid row ever reported, as Parquet partitioned by run date.

Appending is idempotent per (run, target): rows of a run already in the store are not added
again, so reporting the same results file twice counts its rows once.

The layout is a directory per run date, ``date=YYYY-MM-DD``, holding the rows with their full
target names. Stores written before had a directory per (run date, target),
``run_date=<date>/target=<name>``, and a long name there became ``<its first PREFIX
characters>~<sha256 prefix>`` with the full name in the column ``target_name`` (null in rows
written before that column existed, whose directory is the name). Those directories are read as
they are, beside the new ones; new rows always go to the date layout. A directory per target made
an ingest write a file per (task, date, target), thousands for a large history, and Hadoop's
local file system starts a ``chmod`` process for every file and directory it creates.

Each row also has a bounded ``target_dir``, the target's directory in the summaries
(``partition_name``; in the old layout, the row's directory). The row's ``category`` and
``observed`` (``harness.results.LATER_KEYS``) are absent from files written before they existed,
in any layout: such rows read with those keys' defaults.

Case ids are stable: a row stored under a former id of a case or of a row (the vectors'
``aliases`` and ``row_aliases``) reads under the current id (``current_ids``), so a case's history
runs on across a rename.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..conformance.vectors import ROW, Renames, bundled_renames
from ..harness.results import LATER_KEYS, ROW_KEYS

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructField, StructType

DATE = "date"  # the partition column: a directory per run date
LEGACY_PARTITIONS = ("run_date", "target")  # the layout of stores written before
# Escaped, a byte can take 3 ("%3A"): 80 bytes stay within 240 of a directory name's 255.
NAME_IN_PATH = 80
PREFIX = 40  # characters: at most 160 bytes, escaped or not (4 bytes per character in UTF-8)


def _fields() -> list[StructField]:
    from pyspark.sql import types as T

    return [
        T.StructField(k, T.DoubleType() if k == "duration_ms" else T.StringType()) for k in ROW_KEYS
    ]


def schema() -> StructType:
    """The store's columns as written: the row's fields, its time as a timestamp, and the run
    date (the partition)."""
    from pyspark.sql import types as T

    return T.StructType(
        [*_fields(), T.StructField("ts", T.TimestampType()), T.StructField(DATE, T.StringType())]
    )


def legacy_schema() -> StructType:
    """The columns of a store written before: ``target`` is the directory's name (partition
    values such as a target named "1" must stay strings)."""
    from pyspark.sql import types as T

    return T.StructType(
        [
            *_fields(),
            T.StructField("target_name", T.StringType()),
            T.StructField("ts", T.TimestampType()),
            T.StructField("run_date", T.StringType()),
        ]
    )


def partition_name(target: Column) -> Column:
    """The directory name of ``target``: the name itself when short, else a bounded prefix and
    a digest (distinct names stay apart: the digest covers the whole name)."""
    from pyspark.sql import functions as F

    digest = F.substring(F.sha2(target, 256), 1, 16)
    return F.when(F.octet_length(target) <= NAME_IN_PATH, target).otherwise(
        F.concat(F.substring(target, 1, PREFIX), F.lit("~"), digest)
    )


def _row_columns(target: Column) -> list[Column]:
    """The row fields of a stored row whose full target name is ``target``; a field the files
    lack (LATER_KEYS, in rows stored before it existed) reads as its default."""
    from pyspark.sql import functions as F

    return [
        target.alias(k)
        if k == "target"
        else F.coalesce(k, F.lit(LATER_KEYS[k])).alias(k)
        if k in LATER_KEYS
        else F.col(k)
        for k in ROW_KEYS
    ]


def _layout(spark: SparkSession, store: str, first: str, columns: StructType) -> DataFrame | None:
    """The rows under ``store``'s directories ``first=*`` read with ``columns``, or None when
    there are none."""
    pattern = f"{store.rstrip('/')}/{first}=*"
    if "://" not in store and not any(Path(store).glob(f"{first}=*")):
        return None
    rows = spark.read.schema(columns).option("basePath", store).parquet(pattern)
    if "://" in store:
        try:
            rows.limit(1).count()
        except Exception:  # a layout not written there: any error reading it means absent
            return None
    return rows


def exists(spark: SparkSession, store: str) -> bool:
    return any(
        _layout(spark, store, first, columns) is not None
        for first, columns in ((DATE, schema()), (LEGACY_PARTITIONS[0], legacy_schema()))
    )


def current_ids(rows: DataFrame, renames: Renames | None = None) -> DataFrame:
    """``rows`` with each ``case_id`` under a former case or row id replaced by the current id,
    as ``renames`` (default: the bundled vectors') gives it (``Renames.current``)."""
    from pyspark.sql import functions as F

    renames = bundled_renames() if renames is None else renames
    if not renames.cases and not renames.rows:
        return rows

    def table(mapping: dict[str, str]) -> Column:
        return F.create_map(*[F.lit(text) for pair in sorted(mapping.items()) for text in pair])

    case_id = F.col("case_id")
    head = F.substring_index(case_id, ROW, 1)  # the case part, before the first ROW
    path = F.substr(case_id, F.length(head) + 1)  # ROW and the path, or ""
    choices = []
    if renames.rows:
        choices.append(F.try_element_at(table(renames.rows), case_id))
    if renames.cases:
        choices.append(F.concat(F.try_element_at(table(renames.cases), head), path))
    return rows.withColumn("case_id", F.coalesce(*choices, case_id))


def load(spark: SparkSession, store: str) -> DataFrame:
    """The store's rows, of both layouts: the row fields (``target`` the full name; ``case_id``
    the current id: ``current_ids``), ``ts``, ``run_date``, and ``target_dir`` (to read only the
    rows of some targets and dates)."""
    from pyspark.sql import functions as F

    frames = []
    rows = _layout(spark, store, DATE, schema())
    if rows is not None:
        frames.append(
            rows.select(
                *_row_columns(F.col("target")),
                "ts",
                F.col(DATE).alias("run_date"),
                partition_name(F.col("target")).alias("target_dir"),
            )
        )
    legacy = _layout(spark, store, LEGACY_PARTITIONS[0], legacy_schema())
    if legacy is not None:
        frames.append(
            legacy.select(
                *_row_columns(F.coalesce("target_name", "target")),
                "ts",
                "run_date",
                F.col("target").alias("target_dir"),
            )
        )
    if not frames:
        columns = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in _fields())
        return spark.createDataFrame(
            [], f"{columns}, ts timestamp, run_date string, target_dir string"
        )
    return current_ids(frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1]))


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

    fresh = rows.select(*ROW_KEYS, "ts").withColumn(DATE, F.date_format("ts", "yyyy-MM-dd"))
    if known is not None:
        fresh = fresh.join(F.broadcast(known), ["run_id", "target"], "left_anti")
    # No shuffle: a task's rows span a date or two, so it writes a file to each.
    written = Observation("appended")
    fresh = fresh.select(*schema().fieldNames()).observe(
        written,
        F.count(F.lit(1)).alias("rows"),
        F.collect_set(F.struct(DATE, partition_name(F.col("target")))).alias("partitions"),
    )
    fresh.write.mode("append").partitionBy(DATE).parquet(store)
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

    keys = sorted(set(runs))
    wanted = spark.createDataFrame(keys, "target string, run_id string")
    # The run ids as a filter too: Parquet skips the row groups outside their range.
    chosen = within(history, partitions).where(F.col("run_id").isin(sorted({r for _, r in keys})))
    return chosen.join(F.broadcast(wanted), ["target", "run_id"])


def within(history: DataFrame, partitions: Iterable[tuple[str, str]]) -> DataFrame:
    """The rows of ``history`` (``load``) in ``partitions`` (run date, target directory): Spark
    reads the directories of the dates named (and, in the old layout, of the targets named)."""
    from pyspark.sql import functions as F

    chosen = set(partitions)
    return history.where(
        F.col("run_date").isin(sorted({d for d, _ in chosen}))
        & F.col("target_dir").isin(sorted({t for _, t in chosen}))
    )
