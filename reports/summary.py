"""Summaries of the history store, kept beside it and brought up to date by each append, so that
an analysis reads them and the rows of a few runs, never every row the store holds.

Three tables under ``<store>/_summary/`` (Spark skips names starting with ``_`` when it reads
the history), each partitioned by the target's bounded directory name (``target_dir``), so that an
append rewrites the summaries of the targets it wrote to and no others:

- ``runs``: a row per (target, run, version, kind, run date): its first time and its row count;
- ``cases``: a row per (target, version, case, level): how many rows had each outcome, how many
  passed only when run again (``retried``: the harness's ``flaky:`` rows), and the least and
  greatest digest of their observations (a case whose runs disagree on either is flaky:
  ``analysis``);
- ``newest``: the rows of the newest run of each (target, version) (the version series), with
  their observations (tables written before them read them as "": so did those rows) and
  transports (the series follows each case over tcp).

Each merges: the summaries of the old rows merged with those of the new rows are the summaries of
all rows (counts add up, runs are disjoint, the newest run is the newer of the two newest). An
append merges in the runs it wrote (``update``); a full recomputation summarises every row
(``prepare(full=True)``, ``nats-conformance report --full``). ``state`` is marked pending while
an append runs, so summaries an interrupted job left behind are recomputed by the next one; it
also records the tables' ``LAYOUT``, so summaries written before a column existed (the
observation digests) are recomputed from the rows rather than read with a guess.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from ..harness.gate import FLAKY_MARK as RETRIED_MARK
from ..harness.results import LATER_KEYS, OUTCOMES
from . import history

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

SUMMARY_DIR = "_summary"
PARTITION = "target_dir"
# 2: cases has retried and observation digests; 3: newest has the transport. A store of an older
# layout is summarised again.
LAYOUT = 3
# Two runs observed the same when their observations' digests agree: the least and the greatest
# digest of a case's rows differ exactly when the rows hold two observations (up to a 64-bit
# hash collision), and both merge by min and max as counts merge by sums.
DIGESTS = {"observed_lo": "min", "observed_hi": "max"}
STATE_SCHEMA = "pending boolean, layout int"
RUN_KEYS = ("target", "run_id", "target_version", "target_kind", "run_date", PARTITION)
CASE_KEYS = ("target", "target_version", "case_id", "level", PARTITION)
SCHEMAS = {
    "runs": ", ".join(f"{k} string" for k in RUN_KEYS) + ", started timestamp, rows bigint",
    "cases": ", ".join(f"{k} string" for k in CASE_KEYS)
    + "".join(f", {c} bigint" for c in (*OUTCOMES, "runs", "retried", *DIGESTS)),
    "newest": "target string, target_version string, run_id string, case_id string, "
    f"`group` string, level string, outcome string, observed string, transport string, "
    f"{PARTITION} string",
}


@dataclass(frozen=True)
class Summaries:
    runs: DataFrame
    cases: DataFrame
    newest: DataFrame


def _path(store: str, table: str) -> str:
    return f"{store.rstrip('/')}/{SUMMARY_DIR}/{table}"


def load(spark: SparkSession, store: str) -> Summaries:
    """The summaries of ``store`` as written (current after ``update``), with the current ids of
    cases summarised under a former id (``history.current_ids``: a case renamed since)."""
    from pyspark.sql import functions as F

    tables = {t: spark.read.schema(SCHEMAS[t]).parquet(_path(store, t)) for t in SCHEMAS}
    observed = F.coalesce("observed", F.lit(LATER_KEYS["observed"]))
    return Summaries(
        runs=tables["runs"],
        cases=history.current_ids(tables["cases"]),
        newest=history.current_ids(tables["newest"].withColumn("observed", observed)),
    )


def prepare(spark: SparkSession, store: str, *, full: bool = False) -> DataFrame:
    """Make the summaries current before an append (recomputing them from every row when
    ``full``, absent, or left pending) and mark them pending; returns the runs the store holds
    (``run_id``, ``target``)."""
    if full or not _current(spark, store):
        _rebuild(spark, store)
    _mark(spark, store, pending=True)
    return load(spark, store).runs.select("run_id", "target")


def update(spark: SparkSession, store: str, partitions: Iterable[tuple[str, str]]) -> None:
    """Merge the runs an append wrote into ``partitions`` (run date, target directory) into the
    summaries, rewriting those of the targets written to; then mark the summaries current."""
    from pyspark.sql import functions as F

    written = set(partitions)
    if written:
        targets = sorted({t for _, t in written})
        old = load(spark, store)
        touched = Summaries(
            **{
                f.name: getattr(old, f.name).where(F.col(PARTITION).isin(targets))
                for f in fields(old)
            }
        )
        rows = history.within(history.load(spark, store), written)
        _write(store, _merged(spark, rows, touched), "dynamic")
    _mark(spark, store, pending=False)


def _rebuild(spark: SparkSession, store: str) -> None:
    """Summarise every row of the store (none for a new store) into new tables."""
    summaries = Summaries(**{t: spark.createDataFrame([], SCHEMAS[t]) for t in SCHEMAS})
    if history.exists(spark, store):
        summaries = _merged(spark, history.load(spark, store), summaries)
    _write(store, summaries, "static")


def _current(spark: SparkSession, store: str) -> bool:
    try:
        state = spark.read.schema(STATE_SCHEMA).parquet(_path(store, "state")).first()
    except Exception:  # no state written yet (a new store, or one written before summaries)
        return False
    # A state written before layouts has none (null): its tables lack the later columns.
    return state is not None and not state.pending and state.layout == LAYOUT


def _mark(spark: SparkSession, store: str, *, pending: bool) -> None:
    state = spark.createDataFrame([(pending, LAYOUT)], STATE_SCHEMA)
    state.coalesce(1).write.mode("overwrite").parquet(_path(store, "state"))


def _merged(spark: SparkSession, rows: DataFrame, old: Summaries) -> Summaries:
    """``old`` with the runs of ``rows`` (history rows, whole runs) it does not hold merged in."""
    from pyspark.sql import functions as F

    counted = rows.groupBy(*RUN_KEYS).agg(
        F.min("ts").alias("started"), F.count(F.lit(1)).alias("rows")
    )
    # Materialized: the tables it is computed from are rewritten before it is read again.
    new_runs = counted.join(
        F.broadcast(old.runs.select("target", "run_id")), ["target", "run_id"], "left_anti"
    ).localCheckpoint()
    runs = old.runs.unionByName(new_runs)
    fresh = {(r.target, r.run_id) for r in new_runs.select("target", "run_id").collect()}
    every_run = runs.collect()
    newest = _newest_runs(every_run)
    kept = spark.createDataFrame(
        sorted(k for k in newest if k not in fresh), "target string, run_id string"
    )
    added = [k for k in newest if k in fresh]
    new_rows = rows
    if any((r.target, r.run_id) not in fresh for r in every_run):
        # Only when some runs are old: looking each row up among the new runs costs a tenth of
        # a full rebuild's summarising, for nothing when every row is new.
        new_rows = rows.join(F.broadcast(new_runs.select("target", "run_id")), ["target", "run_id"])
    newest_rows = history.rows_of(spark, rows, added, [p for k in added for p in newest[k]]).select(
        *old.newest.columns
    )
    cases = old.cases.unionByName(_outcome_counts(new_rows))
    return Summaries(
        runs=runs,
        cases=cases.groupBy(*CASE_KEYS).agg(
            *[F.sum(c).alias(c) for c in (*OUTCOMES, "runs", "retried")],
            *[getattr(F, merge)(c).alias(c) for c, merge in DIGESTS.items()],
        ),
        newest=old.newest.join(F.broadcast(kept), ["target", "run_id"]).unionByName(newest_rows),
    )


def _outcome_counts(rows: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    # Text in the grouping keys only: Spark's hash aggregation takes fixed-width results (so
    # observations are compared by digest).
    digest = F.xxhash64("observed")
    return rows.groupBy(*CASE_KEYS).agg(
        *[F.count(F.when(F.col("outcome") == o, 1)).alias(o) for o in OUTCOMES],
        F.count(F.lit(1)).alias("runs"),
        F.count(F.when(F.col("message").startswith(RETRIED_MARK), 1)).alias("retried"),
        *[getattr(F, merge)(digest).alias(c) for c, merge in DIGESTS.items()],
    )


def _newest_runs(runs: Iterable[Any]) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """(target, run id) of the newest run of each (target, version), in (started, run id)
    order, with the partitions (run date, target directory) it is in; from ``runs`` rows."""
    started: dict[tuple[str, str], Any] = {}
    partitions: dict[tuple[str, str], list[tuple[str, str]]] = {}
    versions: dict[tuple[str, str], set[str]] = {}
    for r in runs:
        key = (r.target, r.run_id)
        started[key] = min(r.started, started.get(key, r.started))
        partitions.setdefault(key, []).append((r.run_date, r.target_dir))
        versions.setdefault(key, set()).add(r.target_version)
    newest: dict[tuple[str, str], tuple[str, str]] = {}
    for key, run_versions in versions.items():
        for version in run_versions:
            best = newest.get((key[0], version))
            if best is None or (started[best], best[1]) < (started[key], key[1]):
                newest[(key[0], version)] = key
    return {key: partitions[key] for key in set(newest.values())}


def _write(store: str, summaries: Summaries, mode: str) -> None:
    """Write every table, a file per target directory: ``dynamic`` replaces the directories the
    data holds, ``static`` the whole table."""
    for table in SCHEMAS:
        (
            getattr(summaries, table)
            .repartition(PARTITION)
            .write.mode("overwrite")
            .option("partitionOverwriteMode", mode)
            .partitionBy(PARTITION)
            .parquet(_path(store, table))
        )
