"""Load, schema-validate and evaluate vector files against the reference model.

Everything here is pure: files are read by the caller (``load_path`` is the one
convenience that opens a file, and it only reads). A problem always names the
file, the case id and the field, so a vector author can find it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from itertools import accumulate
from pathlib import Path
from typing import Any

import jsonschema

from . import frame_layouts, wire_script
from .transports import ROW
from .vector_kinds import KINDS

# Re-exported: the vector API stays in one place for its users.
from .vector_values import (
    BYTES_FIELDS as BYTES_FIELDS,
)
from .vector_values import (
    SHOWN as SHOWN,
)
from .vector_values import (
    BytesError as BytesError,
)
from .vector_values import (
    Mismatch as Mismatch,
)
from .vector_values import (
    decode_bytes as decode_bytes,
)
from .vector_values import (
    encode_bytes as encode_bytes,
)
from .vector_values import (
    excerpt as excerpt,
)
from .vector_values import expanded_size, over_limit, size_text
from .vector_values import (
    op_pattern as op_pattern,
)

FORMAT = "nats-conformance-vectors/3"
# A vector file is untrusted input: each limit is checked before anything is parsed, recursed
# into or expanded, so a hostile file costs one problem, not the run. Generous for the bundled
# files (180 kB, nested 11 deep at most).
MAX_FILE_SIZE = 16 * 1024 * 1024
# Below what the schema validator's recursion survives (a bytes array nested 100 deep passes).
MAX_JSON_DEPTH = 64
ROOT = Path(__file__).resolve().parents[1]  # the repository, or the installed package
SCHEMA_PATH = ROOT / "schemas" / "vector.schema.json"
BUNDLED_DIR = ROOT / "vectors"
INDEX_PATH = BUNDLED_DIR / "requirements.json"  # the statements cases cite (requirements.py)
# JSON beside the vector files that is not one: the index of the documents' statements the cases
# cite (conformance/requirements.py) and their levels (conformance/levels.py); and the schemas'
# names from before they moved to schemas/, which a copied vectors directory may still hold.
NOT_VECTORS = frozenset(
    {"schema.json", "requirements.json", "requirements.schema.json", "levels.json"}
)


@dataclass(frozen=True)
class Problem:
    """Something wrong with a vector file or a case: where, and what."""

    file: str
    case: str | None
    field: str | None
    message: str

    def __str__(self) -> str:
        where = [self.file]
        if self.case:
            where.append(f"case {self.case}")
        if self.field:
            where.append(f"field {self.field}")
        return f"{': '.join(where)}: {self.message}"


@dataclass(frozen=True)
class Source:
    """The document passage a case rests on (a vector's ``source``)."""

    document: str
    section: str
    quote: str = ""  # the document's words, verbatim

    def to_json(self) -> dict[str, str]:
        return {"document": self.document, "section": self.section, "quote": self.quote}


@dataclass(frozen=True)
class Case:
    """One vector case, with the file it came from."""

    file: str
    group: str
    data: dict[str, Any]

    @property
    def id(self) -> str:
        return self.data["id"]

    @property
    def kind(self) -> str:
        return self.data["kind"]

    @property
    def level(self) -> str:
        return self.data["level"]

    @property
    def roles(self) -> list[str]:
        return self.data["roles"]

    @property
    def source(self) -> Source:
        source = self.data["source"]
        return Source(source["document"], source["section"], source.get("quote", ""))


@dataclass
class LoadResult:
    cases: list[Case] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    # What loading filled in for a file of an older format, which is no problem: notes.
    notes: list[Problem] = field(default_factory=list)


@cache
def schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


@cache
def _validator() -> jsonschema.protocols.Validator:
    cls = jsonschema.validators.validator_for(schema())
    cls.check_schema(schema())
    return cls(schema())


def _json_path(parts: Iterable[Any]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _deepest(error: jsonschema.ValidationError) -> jsonschema.ValidationError:
    """For oneOf/anyOf/if-then failures, the most specific sub-error explains best."""
    best = error
    for sub in error.context or ():
        cand = _deepest(sub)
        if len(cand.absolute_path) > len(best.absolute_path):
            best = cand
    return best


def _schema_problems(doc: Any, file: str) -> list[tuple[int | None, Problem]]:
    """Schema problems of one parsed file, each with the index of its case (None: the file)."""
    out = []
    cases = doc.get("cases") if isinstance(doc, dict) else None
    for error in sorted(
        _validator().iter_errors(doc), key=lambda e: list(map(str, e.absolute_path))
    ):
        error = _deepest(error)
        path = list(error.absolute_path)
        if len(path) >= 2 and path[0] == "cases" and isinstance(path[1], int):
            index = path[1]
            case = cases[index] if isinstance(cases, list) and index < len(cases) else None
            case_id = case.get("id") if isinstance(case, dict) else None
            name = case_id if isinstance(case_id, str) else f"#{index}"
            out.append((index, Problem(file, name, _json_path(path[2:]) or None, error.message)))
        else:
            out.append((None, Problem(file, None, _json_path(path) or None, error.message)))
    return out


def validate_document(doc: Any, file: str) -> list[Problem]:
    """Schema problems of one parsed vector file, each naming case id and field."""
    return [problem for _, problem in _schema_problems(doc, file)]


def load_document(doc: Any, file: str) -> LoadResult:
    """Schema-check one parsed file; return its valid cases and a problem for each invalid one
    (a case whose repeats expand over ``MAX_BYTES`` is invalid).

    A broken case loses only itself; a file whose own structure is broken yields no cases.
    Every format-1 and format-2 file is a format-3 file and means the same; a case written
    before cases cited statements (no ``requirements``) cites what its quote cites, with a note.
    """
    return _checked_document(doc, file, _schema_problems(doc, file))


def _checked_document(
    doc: Any, file: str, found: Sequence[tuple[int | None, Problem]]
) -> LoadResult:
    """load_document given the schema problems of ``doc``."""
    problems = [problem for _, problem in found]
    if any(index is None for index, _ in found):
        return LoadResult(problems=problems)
    bad = {index for index, _ in found}
    cases = []
    uncited = 0
    for i, data in enumerate(doc["cases"]):
        if i in bad:
            continue
        if (problem := _bytes_problem(data, file)) is not None:
            problems.append(problem)
            continue
        if "requirements" not in data:
            uncited += 1
            data = {**data, "requirements": derive_citations(data, bundled_index())}
        cases.append(Case(file, doc["group"], data))
    notes = [] if not uncited else [_uncited_note(file, uncited)]
    return LoadResult(cases=cases, problems=problems, notes=notes)


def _uncited_note(file: str, count: int) -> Problem:
    message = (
        f"{count} case(s) name no requirements (written before cases cited statements): each "
        "cites what its quote cites"
    )
    return Problem(file, None, "requirements", message)


def _bytes_problem(data: dict[str, Any], file: str) -> Problem | None:
    """The first repeat of a case that expands, alone or with the case's earlier ones, over
    ``MAX_BYTES``: measured, never expanded."""
    total = 0
    try:
        for path, value in _repeats(data, ()):
            size = expanded_size(value, path)
            total += size
            over_limit(size, path, total)
    except BytesError as exc:
        return Problem(file, data["id"], exc.path, str(exc))
    return None


def _repeats(value: Any, parts: tuple[Any, ...]) -> Iterator[tuple[str, Any]]:
    """The outermost ``repeat`` values in a case's JSON, with their paths (only repeats can
    expand beyond the file that holds them)."""
    if isinstance(value, dict) and "repeat" in value and "base64" not in value:
        yield _json_path(parts), value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _repeats(item, (*parts, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _repeats(item, (*parts, index))


def load_path(path: Path) -> LoadResult:
    """Read, parse and load one file; every limit is checked before the step it protects."""
    try:
        with path.open("rb") as stream:
            data = stream.read(MAX_FILE_SIZE + 1)  # bounded: the path may be a device or a pipe
    except OSError as exc:
        return _file_problem(path, f"cannot read: {exc}")
    if len(data) > MAX_FILE_SIZE:
        return _file_problem(path, f"file is over the {size_text(MAX_FILE_SIZE)} limit")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _file_problem(path, f"cannot read: {exc}")
    if (depth := json_depth(text)) > MAX_JSON_DEPTH:
        return _file_problem(path, f"JSON nested {depth} deep, over the {MAX_JSON_DEPTH} limit")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        return _file_problem(
            path, f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        )
    except ValueError as exc:  # an integer too long to convert
        return _file_problem(path, f"invalid JSON: {exc}")
    return _checked_document(doc, str(path), _file_schema_problems(data, doc, str(path)))


# Schema problems by file and content: one process (the tests, a run and its report) loads the
# same files many times over, and validating is nearly all the time loading takes. Bounded.
_SCHEMA_PROBLEMS: dict[tuple[str, bytes], tuple[tuple[int | None, Problem], ...]] = {}
_SCHEMA_PROBLEMS_KEPT = 512


def _file_schema_problems(
    data: bytes, doc: Any, file: str
) -> tuple[tuple[int | None, Problem], ...]:
    """_schema_problems of ``doc``, parsed from ``data``, remembered by ``data``'s digest."""
    key = (file, hashlib.sha256(data).digest())
    if (found := _SCHEMA_PROBLEMS.get(key)) is None:
        found = tuple(_schema_problems(doc, file))
        if len(_SCHEMA_PROBLEMS) >= _SCHEMA_PROBLEMS_KEPT:
            _SCHEMA_PROBLEMS.clear()
        _SCHEMA_PROBLEMS[key] = found
    return found


def _file_problem(path: Path, message: str) -> LoadResult:
    """A file that yields no cases, for a reason of the whole file."""
    return LoadResult(problems=[Problem(str(path), None, None, message)])


# A JSON string; an unterminated one runs to the end of the text, so the scan stays linear.
_STRING = re.compile(r'"(?:[^"\\]|\\.)*+(?:"|\\?\Z)', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = [{ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}.get(b, 0) for b in range(256)]


def json_depth(text: str) -> int:
    """How deep arrays and objects nest in JSON text, found without parsing it (a parser
    recursing into hostile nesting would hit the recursion limit). Text that is not JSON gets
    a number too; the parser says what is wrong with it."""
    outside = _STRING.sub("", text).encode("utf-8", "ignore")
    brackets = outside.translate(None, _NOT_BRACKETS)
    return max(accumulate(map(_STEP.__getitem__, brackets), initial=0))


def vector_files(paths: Iterable[Path]) -> Iterator[Path]:
    """Every vector file under the given files and directories (NOT_VECTORS excluded)."""
    for path in paths:
        if path.is_dir():
            yield from (p for p in sorted(path.rglob("*.json")) if p.name not in NOT_VECTORS)
        else:
            yield path


def load_all(paths: Iterable[Path]) -> LoadResult:
    """Load every file; also report case ids used twice (ids must be stable and unique)."""
    result = LoadResult()
    seen: dict[str, str] = {}
    for path in vector_files(paths):
        part = load_path(path)
        result.problems.extend(part.problems)
        result.notes.extend(part.notes)
        for case in part.cases:
            if case.id in seen:
                result.problems.append(
                    Problem(
                        case.file, case.id, "id", f"duplicate case id (also in {seen[case.id]})"
                    )
                )
                continue
            seen[case.id] = case.file
            result.cases.append(case)
    result.problems.extend(alias_problems(result.cases))
    return result


def _former_ids(case: Case) -> Iterator[tuple[str, str, str]]:
    """(field, former id, current id) for each former id a case keeps: its ``aliases`` (its
    former ids) and ``row_aliases`` (former ids of its rows, by path)."""
    for i, alias in enumerate(case.data.get("aliases", [])):
        yield f"aliases[{i}]", alias, case.id
    for path, formers in case.data.get("row_aliases", {}).items():
        for i, former in enumerate(formers):
            yield f"row_aliases.{path}[{i}]", former, f"{case.id}{ROW}{path}"


@dataclass(frozen=True)
class Renames:
    """Former ids to current ones (``renames``): what carries the baseline entries and the
    history of a renamed case, or of a row that moved, over to its current id."""

    cases: dict[str, str] = field(default_factory=dict)  # former case id -> current case id
    rows: dict[str, str] = field(default_factory=dict)  # former row id -> current row id

    def current(self, row_id: str) -> str:
        """The current id of a row id (or a case id): a former row's current row; the row
        ``OLD@path`` of a renamed case, the same row ``NEW@path`` of the case now; any other id
        as it is."""
        if (moved := self.rows.get(row_id)) is not None:
            return moved
        case, at, path = row_id.partition(ROW)
        renamed = self.cases.get(case)
        return row_id if renamed is None else f"{renamed}{at}{path}"


def renames(cases: Iterable[Case]) -> Renames:
    """The former ids the cases keep (``aliases``, ``row_aliases``), mapped to their current
    ids. ``alias_problems`` holds them to one owner each and to names nothing current."""
    out = Renames()
    for case in cases:
        for _, former, current in _former_ids(case):
            (out.rows if ROW in current else out.cases)[former] = current
    return out


def alias_problems(cases: list[Case]) -> list[Problem]:
    """A former id (an alias or a row alias: kept so baselines and history carry over) that
    names a current case or a row of one (``ID``, ``ID@path``), or that an earlier case or row
    claims (an alias ``OLD`` claims every ``OLD@path``): it would carry one case's or row's
    history over to another."""
    current: dict[str, Case] = {}
    for case in cases:
        current.setdefault(case.id, case)
    claimed: dict[str, tuple[Case, str]] = {}  # former id -> the first case and field claiming it
    # The case part of each former id (``OLD`` of ``OLD@path``), with its first claim.
    claimed_rows: dict[str, tuple[Case, str]] = {}
    problems = []
    for case in cases:
        for where, former, _ in _former_ids(case):
            head, at, _ = former.partition(ROW)
            if (owner := current.get(head)) is not None:
                what = "a row" if at else "the id"
                message = f"{former!r} is {what} of case {owner.id} (in {owner.file})"
            elif rival := claimed.get(former) or (claimed if at else claimed_rows).get(head):
                claimer, by = rival
                what = "an alias" if by.startswith("aliases") else f"claimed by {by}"
                message = f"{former!r} is {what} of case {claimer.id} (in {claimer.file})"
            else:
                claimed[former] = (case, where)
                claimed_rows.setdefault(head, (case, where))
                continue
            problems.append(Problem(case.file, case.id, where, message))
    return problems


@cache
def bundled_cases() -> tuple[Case, ...]:
    """The cases the suite ships (read once: the reports and the client checks all use them)."""
    return tuple(load_all([BUNDLED_DIR]).cases)


@cache
def bundled_renames() -> Renames:
    """The former ids the bundled cases keep (what the baseline and the reports read old rows
    by)."""
    return renames(bundled_cases())


def normalise_whitespace(text: str) -> str:
    """Runs of whitespace as one space: how a quote is matched against its document."""
    return " ".join(text.split())


# --- citations: which statements of the index a case's quote cites ------------------------------


def load_index(path: Path = INDEX_PATH) -> list[dict[str, str]]:
    statements: list[dict[str, str]] = json.loads(path.read_text(encoding="utf-8"))["statements"]
    return statements


@cache
def bundled_index() -> list[dict[str, str]]:
    return load_index()


def cites(words: str, quote: str) -> bool:
    """A quote cites a statement when one holds the other (both whitespace-normalised; a list
    item's bullet is not part of its words)."""
    words = unbulleted(words)
    return bool(quote) and (quote in words or words in quote)


def unbulleted(words: str) -> str:
    """A statement's words without a list item's bullet."""
    return re.sub(r"^[•\-]\s+", "", words)


def derive_citations(case: dict[str, Any], index: list[dict[str, str]]) -> list[str]:
    """The ids of the statements of the case's document its quote cites, in index order."""
    source = case["source"]
    quote = normalise_whitespace(source.get("quote", ""))
    return [
        s["id"] for s in index if s["document"] == source["document"] and cites(s["words"], quote)
    ]


def citation_problem(case: Case, documents: dict[str, str]) -> Problem | None:
    """Whether the case cites a document of ``documents`` ({file name: whitespace-normalised
    text}) and its quote is that document's words (whitespace-normalised, case kept)."""
    source = case.data["source"]
    text = documents.get(source["document"])
    if text is None:
        return Problem(
            case.file, case.id, "source.document",
            f"{source['document']!r} is not a document of the specification set "
            f"({', '.join(sorted(documents))})",
        )  # fmt: skip
    quote = normalise_whitespace(source.get("quote", ""))
    if quote and quote not in text:
        return Problem(
            case.file, case.id, "source.quote",
            f"the quote is not in {source['document']}: {quote[:120]!r}",
        )  # fmt: skip
    return None


def _layout_roles(case: Case) -> None:
    """A layout is for the role whose parser reads its bytes (the ``direction`` says whose
    bytes they are), and for no other implementation role."""
    reader = frame_layouts.Layout.of(case.data["input"]).reader
    wrong = [role for role in case.roles if role != "reference" and role != reader]
    if wrong:
        raise Mismatch(
            "roles", f"a layout of {case.data['input']['direction']} bytes is for the {reader} "
            f"role (their parser), not {', '.join(wrong)}",
        )  # fmt: skip


def evaluate(case: Case) -> Problem | None:
    """Evaluate one case against the reference; None when the reference agrees. A client script
    is read by the reference whatever its roles: its pushes are parsed by the reference client."""
    script = case.kind == "client.script"
    if "reference" not in case.roles and "wire" not in case.data and not script:
        return None
    try:
        if "reference" in case.roles or script:
            KINDS[case.kind].evaluate(case.data["input"], case.data["expect"])
        if case.kind == frame_layouts.KIND:
            _layout_roles(case)
        if "wire" in case.data:
            wire_script.evaluate(case.data["wire"])
    except Mismatch as exc:
        return Problem(case.file, case.id, exc.field, str(exc))
    except BytesError as exc:
        return Problem(case.file, case.id, exc.path, str(exc))
    except (KeyError, TypeError, ValueError) as exc:
        return Problem(case.file, case.id, None, f"cannot evaluate: {type(exc).__name__}: {exc}")
    return None
