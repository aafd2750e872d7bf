"""Result rows: one JSON object per line per (target, case), written as each case finishes.

Each row is one ``write`` on a file opened with O_APPEND, so rows from parallel workers never
interleave and every row already written survives a killed run. A row that did not pass may have
details (the requirement it rests on, the transcript) in a side file next to the results, keyed
by (run_id, target, case_id): rows stay small and their keys fixed. A finished file can be
compressed (``compress``: ``x.jsonl.gz``, ``x.details.ndjson.gz``, byte for byte the same for the
same lines); every reader here and in the report reads either form.

Every row says what the implementation did (``observed``, canonical: see
``conformance.verdicts.observation``), whether a failure is about conformance or robustness
(``category``), and what carried the connection (``transport``: harness.runtime.streams).
Rows written before those keys existed still read, with the defaults.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import IO

from ..conformance import vectors
from ..conformance.transports import transport_of
from ..conformance.vectors import Source
from ..conformance.verdicts import (
    CATEGORIES,
    CONFORMANCE,
    LEVELS,
    OUTCOMES,
    settle,
)

ROW_KEYS = (
    "run_id", "time", "suite_version", "vectors_version", "target", "target_kind",
    "target_version", "case_id", "group", "level", "outcome", "duration_ms", "message",
    "category", "observed", "transport",
)  # fmt: skip
# Keys a row written by an older suite lacks, and the value such a row means (before transports
# every row travelled over plain TCP).
LATER_KEYS = {"category": CONFORMANCE, "observed": "", "transport": "tcp"}
__all__ = ["CATEGORIES", "LEVELS", "OUTCOMES"]  # re-exported: the row's vocabularies
INTEROP_KIND = "interop"  # the target_kind of a client pair's rows
RUN_ID_ENV = "NATS_CONFORMANCE_RUN_ID"
DETAILS_SUFFIX = ".details.ndjson"
RESULTS_SUFFIX = ".jsonl"
GZIP_SUFFIX = ".gz"  # a compressed results or details file


# Characters of a row's message kept: a message quotes what a target sent, and a target can send
# anything; a longer one keeps its start, its full size and a digest.
MESSAGE_LIMIT = 2000
# Characters of a name or version a target or driver gives itself (a driver's hello, a server's
# INFO or --version) kept where it is stored: every row repeats it.
NAME_LIMIT = 200
# Characters of a transcript kept in a details entry (the same rule: start, size, digest).
TRANSCRIPT_LIMIT = 64_000


def bounded(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """``text``, or its first ``limit`` characters with its size and a SHA-256 prefix."""
    if len(text) <= limit:
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{text[:limit]}... [{len(text)} characters, sha256 {digest}]"


@dataclass(frozen=True)
class ResultRow:
    run_id: str
    time: str
    suite_version: str
    vectors_version: str
    target: str
    target_kind: str
    target_version: str
    case_id: str
    group: str
    level: str
    outcome: str
    duration_ms: float
    message: str
    category: str = CONFORMANCE
    observed: str = ""
    transport: str = LATER_KEYS["transport"]

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, separators=(",", ":"))


@cache
def suite_version() -> str:
    try:
        return version("nats-conformance")
    except PackageNotFoundError:
        return "unknown"


def vectors_version(paths: Iterable[Path]) -> str:
    """A content hash of the vector files: two runs with the same value used the same vectors."""
    digest = hashlib.sha256()
    for path in vectors.vector_files(paths):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return "sha256:" + digest.hexdigest()[:16]


def run_id() -> str:
    """This run's id; parallel workers inherit the parent's through the environment."""
    if RUN_ID_ENV not in os.environ:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        os.environ[RUN_ID_ENV] = f"{stamp}-{uuid.uuid4().hex[:8]}"
    return os.environ[RUN_ID_ENV]


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def requirement(source: Source, description: str) -> dict[str, str]:
    """A details entry's requirement: where the rule is written, its words, and what is checked."""
    return source.to_json() | {"description": description}


def details_path(results: Path) -> Path:
    """The details side file of a results file: ``x.jsonl`` -> ``x.details.ndjson``, and
    ``x.jsonl.gz`` -> ``x.details.ndjson.gz``."""
    name = results.name.removesuffix(GZIP_SUFFIX)
    gz = GZIP_SUFFIX if len(name) < len(results.name) else ""
    return results.with_name(name.removesuffix(RESULTS_SUFFIX) + DETAILS_SUFFIX + gz)


def open_text(path: Path, errors: str = "strict") -> IO[str]:
    """A results or details file for reading as UTF-8 text, compressed (``.gz``) or not."""
    if path.name.endswith(GZIP_SUFFIX):
        return gzip.open(path, "rt", encoding="utf-8", errors=errors)
    return path.open(encoding="utf-8", errors=errors)


def open_bytes(path: Path) -> IO[bytes]:
    """A results or details file for reading as bytes, compressed (``.gz``) or not."""
    return gzip.open(path, "rb") if path.name.endswith(GZIP_SUFFIX) else path.open("rb")


def compress(path: Path) -> Path:
    """Replace a finished results or details file by its gzip form, ``<path>.gz``, and return
    that. The header holds no name and no time, so the same lines give the same bytes and an
    unchanged file an unchanged blob in git. A file is appended to plain while a run writes it
    (every row written survives a killed run); only a finished one is compressed."""
    target = path.with_name(path.name + GZIP_SUFFIX)
    partial = target.with_name(target.name + ".partial")
    with (
        path.open("rb") as source,
        partial.open("wb") as raw,
        gzip.GzipFile(filename="", mode="wb", compresslevel=9, fileobj=raw, mtime=0) as out,
    ):
        shutil.copyfileobj(source, out)
    partial.replace(target)
    path.unlink()
    return target


def _append_fd(path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)


class ResultsWriter:
    """Appends rows to a JSON-lines file (and details to its side file); a no-op without a path."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._fd: int | None = None if path is None else _append_fd(path)
        self._details_fd: int | None = None  # opened on the first row with details

    def write(
        self,
        row: ResultRow,
        *,
        source: Source | None = None,
        description: str = "",
        transcript: str = "",
    ) -> None:
        """Write ``row``; when it did not pass, also what a report shows beside it."""
        if self.path is None or self._fd is None:
            return
        os.write(self._fd, (row.to_json() + "\n").encode("utf-8"))
        if row.outcome == "pass" or not (source or transcript):
            return
        detail = {
            "run_id": row.run_id,
            "target": row.target,
            "case_id": row.case_id,
            "requirement": None if source is None else requirement(source, description),
            "transcript": bounded(transcript, TRANSCRIPT_LIMIT),
        }
        if self._details_fd is None:
            self._details_fd = _append_fd(details_path(self.path))
        line = json.dumps(detail, ensure_ascii=False, separators=(",", ":")) + "\n"
        os.write(self._details_fd, line.encode("utf-8"))

    def close(self) -> None:
        for fd in (self._fd, self._details_fd):
            if fd is not None:
                os.close(fd)
        self._fd = self._details_fd = None

    def __enter__(self) -> ResultsWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class Found:
    """What checking one case against one target found: the row's verdict and its evidence."""

    outcome: str
    message: str
    duration_ms: float
    transcript: str = ""
    observed: str = ""  # what the implementation did, canonical (conformance.verdicts)
    category: str = CONFORMANCE  # robustness: a crash or a hang, failing at every level


@dataclass(frozen=True)
class CaseRef:
    """Which case a row is about, the same in every suite: its row id (a case id, or a case id
    with ``@path`` where one case gives several rows), level, the requirement it rests on and
    what it checks; its rule group, by default the id's first two segments."""

    case_id: str
    level: str
    source: Source | None
    description: str = ""
    group: str = ""

    def __post_init__(self) -> None:
        if not self.group:
            object.__setattr__(self, "group", ".".join(self.case_id.split(".")[:2]))

    @classmethod
    def of(cls, case: vectors.Case) -> CaseRef:
        """A vector case's own row."""
        return cls(case.id, case.level, case.source, case.data["description"], case.group)


@dataclass(frozen=True)
class Checked:
    """A case and what checking it found: what a suite that runs several cases hands back."""

    case: CaseRef
    found: Found

    @property
    def transport(self) -> str:
        """The transport its row went over, as the row's id names it."""
        return transport_of(self.case.case_id)[1]


@dataclass(frozen=True)
class RunContext:
    """What every row of one run shares; ``record`` is the one path from a case to a row."""

    run_id: str
    suite_version: str
    vectors_version: str

    @classmethod
    def for_vectors(cls, paths: Iterable[Path]) -> RunContext:
        return cls(run_id(), suite_version(), vectors_version(paths))

    def row(
        self,
        *,
        target: str,
        target_kind: str,
        target_version: str,
        case_id: str,
        group: str,
        level: str,
        outcome: str,
        duration_ms: float,
        message: str,
        category: str = CONFORMANCE,
        observed: str = "",
        transport: str = LATER_KEYS["transport"],
    ) -> ResultRow:
        """A result row of this run, stamped now, its outcome settled by the level rules
        (``conformance.verdicts.settle``: an ``info`` case never fails)."""
        return ResultRow(
            self.run_id, now(), self.suite_version, self.vectors_version, target, target_kind,
            target_version, case_id, group, level, settle(level, outcome, category),
            round(duration_ms, 3), bounded(message), category, bounded(observed), transport,
        )  # fmt: skip

    def record(
        self,
        writer: ResultsWriter,
        target: tuple[str, str, str],
        case: CaseRef,
        found: Found,
        *,
        transport: str = LATER_KEYS["transport"],
    ) -> ResultRow:
        """Write the row of ``case`` at ``target`` (name, kind, version) over ``transport``,
        with its requirement and transcript as details; the row."""
        name, kind, version = target
        row = self.row(
            target=name, target_kind=kind, target_version=version, case_id=case.case_id,
            group=case.group, level=case.level, outcome=found.outcome,
            duration_ms=found.duration_ms, message=found.message, category=found.category,
            observed=found.observed, transport=transport,
        )  # fmt: skip
        writer.write(
            row, source=case.source, description=case.description, transcript=found.transcript
        )
        return row


def read_rows(path: Path) -> Iterator[ResultRow]:
    """Rows of a results file (``.jsonl`` or ``.jsonl.gz``); a torn last line (a run killed
    mid-write) is skipped."""
    with open_text(path) as handle:
        for line in handle:
            try:
                data = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(data, dict) and set(ROW_KEYS) - set(LATER_KEYS) <= set(data) <= set(
                ROW_KEYS
            ):
                yield ResultRow(**(LATER_KEYS | data))
