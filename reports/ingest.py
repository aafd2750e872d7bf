"""Read results files (JSON lines) into typed rows; every row that breaks the schema is reported.

The schema is the harness's row (``harness.results.ROW_KEYS``): a JSON object with every one of
those keys non-null, ``duration_ms`` a number >= 0 and the others text, ``outcome`` and ``level``
from their enumerations, ``time`` an ISO 8601 instant and the identifying fields non-empty.
Other keys are ignored, so a newer harness can add fields; a JSON number or boolean where text is
expected is read as its text (as Spark's JSON reader does). Each line is parsed once; a bad line
is kept with its problem and located by file and line afterwards.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.results import DETAILS_SUFFIX, LEVELS, OUTCOMES, ROW_KEYS, details_path

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

NUMBER_KEYS = frozenset({"duration_ms"})
NON_EMPTY_KEYS = ("run_id", "target", "target_kind", "case_id", "group")
_NUMBER = r"(BIGINT|DOUBLE|DECIMAL\(\d+,\d+\))"


@dataclass(frozen=True)
class RowProblem:
    """A results line that is not a valid row: where it is and what is wrong with it."""

    file: str
    line: int
    problem: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.problem}"


class ResultsInputError(ValueError):
    """A results path that does not exist or holds no results files."""


def results_files(paths: Iterable[Path]) -> tuple[list[Path], list[Path]]:
    """(results files, details files) named by ``paths``; a directory means its *.jsonl files.

    Each results file's details side file is picked up when it exists. Duplicates are dropped, so
    naming a file twice does not count its rows twice.
    """
    results: dict[Path, None] = {}
    details: dict[Path, None] = {}
    for path in paths:
        if not path.exists():
            raise ResultsInputError(f"no such file or directory: {path}")
        found = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
        for file in found:
            resolved = file.resolve()
            (details if resolved.name.endswith(DETAILS_SUFFIX) else results)[resolved] = None
    for file in list(results):
        side = details_path(file)
        if side.exists():
            details[side.resolve()] = None
    if not results:
        raise ResultsInputError("no results files (*.jsonl) in " + ", ".join(map(str, paths)))
    return list(results), list(details)


def _row_schema() -> StructType:
    from pyspark.sql import types as T

    return T.StructType(
        [T.StructField(k, T.DoubleType() if k in NUMBER_KEYS else T.StringType()) for k in ROW_KEYS]
    )


def _shape_problem(value: Column) -> Column:
    """Why a line whose fields did not all parse is not a row (run only for such lines)."""
    from pyspark.sql import functions as F

    v = F.try_parse_json(value)
    keys = F.json_object_keys(value)
    missing = F.array_except(F.array(*[F.lit(k) for k in ROW_KEYS]), keys)

    def kind(k: str) -> Column:
        return F.schema_of_variant(F.variant_get(v, f"$.{k}", "variant"))

    wrong_type = [
        F.when(
            ~kind(k).rlike(f"^{_NUMBER}$"),
            F.concat(F.lit(f"field {k}: expected a number, got "), kind(k)),
        )
        if k in NUMBER_KEYS
        else F.when(kind(k) == "VOID", F.lit(f"field {k}: null"))
        for k in ROW_KEYS
    ]
    return (
        F.when(keys.isNull(), F.lit("not a JSON object"))
        .when(v.isNull(), F.lit("invalid JSON object (a key appears twice)"))
        .when(
            F.size(missing) > 0, F.concat(F.lit("missing field(s): "), F.array_join(missing, ", "))
        )
        .otherwise(F.coalesce(*wrong_type, F.lit("unreadable row")))
    )


def _value_problems(r: Column) -> Column:
    """What is wrong with the values of a row whose fields all parsed, or null."""
    from pyspark.sql import functions as F

    def quoted(k: str) -> Column:
        return F.concat(F.lit(f"field {k}: '"), F.substring(r[k], 1, 60), F.lit("'"))

    problems = [
        F.when(
            ~r["outcome"].isin(*OUTCOMES),
            F.concat(quoted("outcome"), F.lit(f" is not one of {', '.join(OUTCOMES)}")),
        ),
        F.when(
            ~r["level"].isin(*LEVELS),
            F.concat(quoted("level"), F.lit(f" is not one of {', '.join(LEVELS)}")),
        ),
        F.when(
            F.col("ts").isNull(),
            F.concat(quoted("time"), F.lit(" is not an ISO 8601 time")),
        ),
        F.when(r["duration_ms"] < 0, F.lit("field duration_ms: negative")),
        *[F.when(r[k] == "", F.lit(f"field {k}: empty")) for k in NON_EMPTY_KEYS],
    ]
    joined = F.concat_ws("; ", *problems)
    return F.when(joined != "", joined)


def _checked(rows: DataFrame, value: Column) -> DataFrame:
    """``rows`` (a struct column ``r`` with the row's fields) with ``ts`` and
    ``problem``: null for a valid row, else why it is not one (computed once per line)."""
    from pyspark.sql import functions as F

    r = F.col("r")
    incomplete = r.isNull() | F.greatest(*[r[k].isNull() for k in ROW_KEYS])
    return rows.select(
        "*", F.try_to_timestamp(r["time"]).alias("ts"), incomplete.alias("incomplete")
    ).withColumn(
        "problem", F.when(F.col("incomplete"), _shape_problem(value)).otherwise(_value_problems(r))
    )


def read_rows(spark: SparkSession, files: list[Path]) -> DataFrame:
    """Every row of ``files`` through Spark's JSON reader (the fast path): the row's fields,
    ``ts``, and ``bad`` (the row breaks the schema; ``explain`` says how)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    schema = T.StructType([*_row_schema().fields, T.StructField("_corrupt", T.StringType())])
    rows = (
        spark.read.schema(schema)
        .option("columnNameOfCorruptRecord", "_corrupt")
        .option("lineSep", "\n")
        .json([str(f) for f in files])
        .select(F.when(F.col("_corrupt").isNull(), F.struct(*ROW_KEYS)).alias("r"))
    )
    # The explanation needs the line's text, which this reader keeps only for unparsable lines.
    checked = _checked(rows, F.lit(None))
    return checked.select(
        *[F.col("r")[k].alias(k) for k in ROW_KEYS],
        "ts",
        (F.col("incomplete") | F.col("problem").isNotNull()).alias("bad"),
    )


def explain(spark: SparkSession, files: list[str]) -> list[tuple[str, str, str]]:
    """(file, line text, problem) for every bad line of ``files`` (the slow path: the text of each
    line, then the same checks as ``read_rows``; run only when that found bad rows)."""
    from pyspark.sql import functions as F

    lines = (
        spark.read.option("lineSep", "\n")
        .text(files)
        .select("value", F.col("_metadata.file_path").alias("file"))
        .where(F.trim("value") != "")
        .withColumn("r", F.from_json("value", _row_schema()))
    )
    bad = _checked(lines, F.col("value")).where(F.col("problem").isNotNull())
    return [
        (row.file, row.value, row.problem)
        for row in bad.select("file", "value", "problem").collect()
    ]


def locate(bad: Iterable[tuple[str, str, str]]) -> list[RowProblem]:
    """File and line number of each bad line, given (file URI, line text, problem).

    Spark does not number lines, so the files holding bad lines are read once more here; a bad
    text that occurs on several lines is reported at each of them.
    """
    wanted: dict[str, dict[str, str]] = defaultdict(dict)
    for uri, text, problem in bad:
        wanted[uri][text] = problem
    found = []
    for uri, texts in sorted(wanted.items()):
        path = uri_path(uri)
        seen = set()
        # "replace" decodes undecodable bytes as Spark does (U+FFFD), so the texts compare equal.
        with path.open(encoding="utf-8", errors="replace", newline="\n") as handle:
            for number, line in enumerate(handle, 1):
                text = line.removesuffix("\n")
                if text in texts:
                    seen.add(text)
                    found.append(RowProblem(str(path), number, texts[text]))
        # Never drop a problem, even one whose line could not be matched again.
        found += [
            RowProblem(str(path), 0, f"{p} (line not located)")
            for t, p in texts.items()
            if t not in seen
        ]
    return found


def uri_path(uri: str) -> Path:
    from urllib.parse import unquote, urlparse

    return Path(unquote(urlparse(uri).path)) if re.match(r"^[a-z]+:", uri) else Path(uri)
