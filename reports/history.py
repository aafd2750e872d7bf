"""The history store: every valid row ever reported, as Parquet partitioned by run date and target.

Appending is idempotent per (run, target): rows of a run already in the store are not added
again, so reporting the same results file twice counts its rows once.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from harness.results import ROW_KEYS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

PARTITIONS = ("run_date", "target")


def schema() -> StructType:
    """The store's columns: the row's fields, its time as a timestamp, and the run date."""
    from pyspark.sql import types as T

    fields = [
        T.StructField(k, T.DoubleType() if k == "duration_ms" else T.StringType()) for k in ROW_KEYS
    ]
    return T.StructType(
        [
            *fields,
            T.StructField("ts", T.TimestampType()),
            T.StructField("run_date", T.StringType()),
        ]
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
    # An explicit schema: partition values such as a target named "1" must stay strings.
    return spark.read.schema(schema()).parquet(store)


def append(spark: SparkSession, rows: DataFrame, store: str) -> int:
    """Add the valid ``rows`` (the row fields and ``ts``) of runs the store does not hold yet;
    returns how many rows were added."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    fresh = rows.select(*ROW_KEYS, "ts").withColumn("run_date", F.date_format("ts", "yyyy-MM-dd"))
    if exists(spark, store):
        known = load(spark, store).select("run_id", "target").distinct()
        fresh = fresh.join(F.broadcast(known), ["run_id", "target"], "left_anti")
    # No shuffle: results files hold a run or a few, so each task writes to few partitions, and
    # the writer sorts its rows by partition so each gets one file per task.
    written = Observation("appended")
    fresh = fresh.select(*schema().fieldNames()).observe(written, F.count(F.lit(1)).alias("rows"))
    fresh.write.mode("append").partitionBy(*PARTITIONS).parquet(store)
    return int(written.get["rows"])
