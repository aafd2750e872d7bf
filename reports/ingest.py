"""Read results files (JSON lines) into typed rows; every row that breaks the schema is reported.

The schema is the harness's row (``harness.results.ROW_KEYS``): a JSON object with every one of
those keys non-null and no key twice (a key of ``LATER_KEYS`` may be absent, as in rows written
before it existed: such a row reads with its default), ``duration_ms`` a finite number >= 0 and
the others text (none longer than its limit), ``outcome``, ``level`` and ``category`` from their
enumerations, ``time`` an ISO 8601 instant and the identifying fields non-empty.
Other keys are ignored, so a newer harness can add fields; a JSON number or boolean where text is
expected is read as its text (as Spark's JSON reader does), and single-quoted text (which that
reader would take too) is refused. Each line is parsed once (and its keys
listed once, for duplicates); a bad line is kept with its problem and located by file and line
afterwards, by a digest of its bytes, so no line's text is ever held whole outside Spark.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..harness.results import (
    CATEGORIES,
    DETAILS_SUFFIX,
    GZIP_SUFFIX,
    LATER_KEYS,
    LEVELS,
    MESSAGE_LIMIT,
    OUTCOMES,
    RESULTS_SUFFIX,
    ROW_KEYS,
    details_path,
    open_bytes,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

NUMBER_KEYS = frozenset({"duration_ms"})
NON_EMPTY_KEYS = ("run_id", "target", "target_kind", "case_id", "group")
REQUIRED_KEYS = tuple(k for k in ROW_KEYS if k not in LATER_KEYS)
_NUMBER = r"(BIGINT|DOUBLE|DECIMAL\(\d+,\d+\))"
# Sizes no row the harness writes comes near, so a foreign file cannot make the report hold
# (or show) text of any size. A message is bounded by the harness to MESSAGE_LIMIT characters
# plus a note of its size and digest, and so is an observation; a target name is a spec such as
# an exec: path (PATH_MAX).
MESSAGE_MAX = MESSAGE_LIMIT + 100
TEXT_MAX = 8192  # characters of any other text field
LINE_MAX = 1 << 20  # bytes of a line: a longer one is refused without being parsed
TWICE = "invalid JSON object (a key appears twice)"
STRICT = {"allowSingleQuotes": "false"}  # Spark's parser takes single-quoted text by default


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
    """(results files, details files) named by ``paths``; a directory means its *.jsonl and
    *.jsonl.gz files (Spark reads a compressed one as it is).

    Each results file's details side file is picked up when it exists. Duplicates are dropped, so
    naming a file twice does not count its rows twice.
    """
    results: dict[Path, None] = {}
    details: dict[Path, None] = {}
    for path in paths:
        if not path.exists():
            raise ResultsInputError(f"no such file or directory: {path}")
        found = sorted(_results_in(path)) if path.is_dir() else [path]
        for file in found:
            resolved = file.resolve()
            is_details = resolved.name.removesuffix(GZIP_SUFFIX).endswith(DETAILS_SUFFIX)
            (details if is_details else results)[resolved] = None
    for file in list(results):
        side = details_path(file)
        if side.exists():
            details[side.resolve()] = None
    if not results:
        raise ResultsInputError(
            "no results files (*.jsonl, *.jsonl.gz) in " + ", ".join(map(str, paths))
        )
    return list(results), list(details)


def _results_in(directory: Path) -> Iterator[Path]:
    for suffix in (RESULTS_SUFFIX, RESULTS_SUFFIX + GZIP_SUFFIX):
        yield from directory.glob("*" + suffix)


def _row_schema() -> StructType:
    from pyspark.sql import types as T

    return T.StructType(
        [T.StructField(k, T.DoubleType() if k in NUMBER_KEYS else T.StringType()) for k in ROW_KEYS]
    )


def _repeats(keys: Column) -> Column:
    """Whether a line's ``keys`` (``json_object_keys``) name some key twice."""
    from pyspark.sql import functions as F

    return F.size(F.array_distinct(keys)) < F.size(keys)


def _shape_problem(value: Column) -> Column:
    """Why a line whose fields did not all parse is not a row (run only for such lines)."""
    from pyspark.sql import functions as F

    v = F.try_parse_json(value)
    keys = F.json_object_keys(value)
    missing = F.array_except(F.array(*[F.lit(k) for k in REQUIRED_KEYS]), keys)

    def kind(k: str) -> Column:
        return F.schema_of_variant(F.variant_get(v, f"$.{k}", "variant"))

    wrong_type = [
        F.when(
            ~kind(k).rlike(f"^{_NUMBER}$"),
            F.concat(F.lit(f"field {k}: expected a number, got "), kind(k)),
        )
        if k in NUMBER_KEYS
        # An absent key of LATER_KEYS has no kind (null): only a JSON null is VOID.
        else F.when(kind(k) == "VOID", F.lit(f"field {k}: null"))
        for k in ROW_KEYS
    ]
    return (
        F.when(F.octet_length(value) > LINE_MAX, F.lit(f"line longer than {LINE_MAX} bytes"))
        .when(keys.isNull(), F.lit("not a JSON object"))
        .when(
            _repeats(keys),
            F.lit(TWICE),
        )
        # Spark's key lister takes single quotes; the strict parse does not.
        .when(v.isNull(), F.lit("invalid JSON (an extension such as single quotes)"))
        .when(
            F.size(missing) > 0, F.concat(F.lit("missing field(s): "), F.array_join(missing, ", "))
        )
        .otherwise(F.coalesce(*wrong_type, F.lit("unreadable row")))
    )


def field(r: Column, key: str) -> Column:
    """The field ``key`` of the parsed row ``r``; a key of LATER_KEYS that a row written before
    lacks reads as its default (never null, so no check below is ever null)."""
    from pyspark.sql import functions as F

    return F.coalesce(r[key], F.lit(LATER_KEYS[key])) if key in LATER_KEYS else r[key]


def _value_checks(r: Column) -> list[tuple[Column, Column]]:
    """(condition, what is wrong when it holds) for the values of a row whose fields all parsed."""
    from pyspark.sql import functions as F

    def quoted(k: str) -> Column:
        return F.concat(F.lit(f"field {k}: '"), F.substring(field(r, k), 1, 60), F.lit("'"))

    def too_long(k: str) -> Column:
        # A text has at most as many characters as bytes: count them only past the limit.
        text = field(r, k)
        return (F.octet_length(text) > _limit(k)) & (F.length(text) > _limit(k))

    duration = r["duration_ms"]
    not_finite = F.isnan(duration) | (F.abs(duration) == float("inf"))
    return [
        (
            ~r["outcome"].isin(*OUTCOMES),
            F.concat(quoted("outcome"), F.lit(f" is not one of {', '.join(OUTCOMES)}")),
        ),
        (
            ~r["level"].isin(*LEVELS),
            F.concat(quoted("level"), F.lit(f" is not one of {', '.join(LEVELS)}")),
        ),
        (
            ~field(r, "category").isin(*CATEGORIES),
            F.concat(quoted("category"), F.lit(f" is not one of {', '.join(CATEGORIES)}")),
        ),
        (F.col("ts").isNull(), F.concat(quoted("time"), F.lit(" is not an ISO 8601 time"))),
        (not_finite, F.lit("field duration_ms: not a finite number")),
        (~not_finite & (duration < 0), F.lit("field duration_ms: negative")),
        *[(r[k] == "", F.lit(f"field {k}: empty")) for k in NON_EMPTY_KEYS],
        *[
            (too_long(k), F.lit(f"field {k}: longer than {_limit(k)} characters"))
            for k in ROW_KEYS
            if k not in NUMBER_KEYS
        ],
    ]


def _value_problems(r: Column) -> Column:
    """What is wrong with the values of a row whose fields all parsed, or null."""
    from pyspark.sql import functions as F

    joined = F.concat_ws("; ", *[F.when(c, problem) for c, problem in _value_checks(r)])
    return F.when(joined != "", joined)


def _value_bad(r: Column) -> Column:
    """Whether a row whose fields all parsed has a bad value (``_value_problems`` says which)."""
    from functools import reduce

    return reduce(lambda a, b: a | b, (condition for condition, _ in _value_checks(r)))


def _limit(key: str) -> int:
    return MESSAGE_MAX if key in ("message", "observed") else TEXT_MAX


def _checked(spark: SparkSession, files: list[str]) -> DataFrame:
    """Every non-blank line of ``files``: its text ``value`` and ``file``, the row's fields ``r``,
    ``ts``, ``incomplete`` (not an object with every required field, or one of LATER_KEYS given
    as null: ``_shape_problem`` says why) and ``twice`` (some key appears twice: Spark's parser
    would silently keep one of the values)."""
    from pyspark.sql import functions as F

    value = F.col("value")
    lines = (
        spark.read.option("lineSep", "\n")
        .text(files)
        .select("value", F.col("_metadata.file_path").alias("file"))
        .where(F.trim("value") != "")
        .withColumn(
            "r",
            F.when(F.octet_length(value) <= LINE_MAX, F.from_json(value, _row_schema(), STRICT)),
        )
    )
    r = F.col("r")
    # Each in a column of its own: written twice in one expression, Spark would compute it twice.
    lines = lines.withColumn("keys", F.json_object_keys(value))
    keys = F.col("keys")
    # A key of LATER_KEYS may be absent (its default applies), not null: the keys tell which.
    given_null = [r[k].isNull() & F.array_contains(keys, k) for k in LATER_KEYS]
    lines = lines.withColumn(
        "incomplete",
        r.isNull() | F.greatest(*[r[k].isNull() for k in REQUIRED_KEYS], *given_null),
    )
    return lines.select(
        "value",
        "file",
        "r",
        F.try_to_timestamp(r["time"]).alias("ts"),
        "incomplete",
        (~F.col("incomplete") & _repeats(keys)).alias("twice"),
    )


def read_rows(spark: SparkSession, files: list[Path]) -> DataFrame:
    """Every row of ``files`` (the fast path): the row's fields, ``ts``, and ``bad`` (the row
    breaks the schema; ``explain`` says how)."""
    from pyspark.sql import functions as F

    checked = _checked(spark, [str(f) for f in files])
    bad = F.col("incomplete") | F.col("twice") | _value_bad(F.col("r"))
    r = F.col("r")
    return checked.select(*[field(r, k).alias(k) for k in ROW_KEYS], "ts", bad.alias("bad"))


def explain(spark: SparkSession, files: list[str]) -> list[tuple[str, str, str]]:
    """(file, SHA-256 of the line, problem) for every bad line of ``files`` (the slow path: the
    same checks as ``read_rows``, saying what failed; run only when that found bad rows)."""
    from pyspark.sql import functions as F

    problem = (
        F.when(F.col("incomplete"), _shape_problem(F.col("value")))
        .when(F.col("twice"), F.lit(TWICE))
        .otherwise(_value_problems(F.col("r")))
    )
    bad = _checked(spark, files).withColumn("problem", problem).where(F.col("problem").isNotNull())
    return [
        (row.file, row.digest, row.problem)
        for row in bad.select("file", F.sha2("value", 256).alias("digest"), "problem").collect()
    ]


def locate(bad: Iterable[tuple[str, str, str]]) -> list[RowProblem]:
    """File and line number of each bad line, given (file URI, SHA-256 of the line, problem).

    Spark does not number lines, so the files holding bad lines are read once more here; a bad
    line that occurs several times is reported at each of them.
    """
    wanted: dict[str, dict[str, str]] = defaultdict(dict)
    for uri, digest, problem in bad:
        wanted[uri][digest] = problem
    found = []
    for uri, digests in sorted(wanted.items()):
        path = uri_path(uri)
        seen = set()
        for number, digest in line_digests(path):
            if digest in digests:
                seen.add(digest)
                found.append(RowProblem(str(path), number, digests[digest]))
        # Never drop a problem, even one whose line could not be matched again.
        found += [
            RowProblem(str(path), 0, f"{p} (line not located)")
            for d, p in digests.items()
            if d not in seen
        ]
    return found


def line_digests(path: Path, chunk: int = 1 << 20) -> Iterator[tuple[int, str]]:
    """(line number, SHA-256 of the line's bytes without its newline) for each line of ``path``,
    as Spark's ``sha2`` of the line's text; read in chunks, as a line can be of any length (a
    compressed file is read through gzip, as Spark reads it)."""
    number, digest = 1, hashlib.sha256()
    with open_bytes(path) as handle:
        while data := handle.read(chunk):
            *ended, rest = data.split(b"\n")
            for part in ended:
                digest.update(part)
                yield number, digest.hexdigest()
                number, digest = number + 1, hashlib.sha256()
            digest.update(rest)
    yield number, digest.hexdigest()


def uri_path(uri: str) -> Path:
    from urllib.parse import unquote, urlparse

    return Path(unquote(urlparse(uri).path)) if re.match(r"^[a-z]+:", uri) else Path(uri)
