"""The normative statements of the specification documents and the vector cases that cite them.

``vectors/requirements.json`` indexes every statement (see vectors/README.md, *Requirements*:
what counts as normative, and why ids stay stable). This module builds that index from the
documents, derives each case's ``requirements`` from its ``source.quote``, and checks both.
Everything is pure but ``main`` (the committed generator). The rule by which a quote cites a
statement is the loader's (``vectors.derive_citations``): a file written before cases cited
statements cites what its quotes cite.

    python -m nats_conformance.conformance.requirements index [--spec DIR]
        rewrite vectors/requirements.json
    python -m nats_conformance.conformance.requirements cite
        rewrite the cases' requirements
    python -m nats_conformance.conformance.requirements changes [--spec DIR]
        the statements that moved or changed
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from .vectors import (  # the citation rule is the loader's
    BUNDLED_DIR,
    INDEX_PATH,
    NOT_VECTORS,
    Case,
    Problem,
    bundled_cases,
    bundled_index,
    derive_citations,
    load_index,
    normalise_whitespace,
    unbulleted,
)

FORMAT = "nats-conformance-requirements/1"
DEFAULT_SPEC = BUNDLED_DIR.parent.parent / "shared" / "spec"
# The documents of the specification set (its README describes the set, it is not one of them).
DOCUMENTS = (
    "client-protocol.txt",
    "protocols-overview.txt",
    "adr-4-headers.txt",
    "adr-6-naming.txt",
    "streaming-protocol.txt",
    "streaming-fields.md",
    "tls.txt",
    "websocket.txt",
)
# The documents rarely write RFC 2119 capitals; their obligations are lower-case modals and the
# server's described behaviour ("will be treated as a single field delimiter").
MODAL = re.compile(
    r"\b(must|should|may|shall|required|will|valid|invalid|only|(?:is|are) (?:not )?allowed)\b",
    re.IGNORECASE,
)
# Protocol syntax and examples: an op with a placeholder or a JSON body, or a CRLF-terminated line.
SYNTAX = re.compile(r"␍␊|^[A-Z]+ [<{]")
PRODUCTION = re.compile(r"^[a-z][a-z-]* = ")  # an ADR-6 grammar production
FIELD = re.compile(r"^[•\-]\s*[\w#]+[\w# ]*\s?:\s")  # a bulleted "name: meaning" definition
TABLE_ROW = re.compile(r"^\|.*\|$")
TABLE_RULE = re.compile(r"^\|[-| :]+\|$")
ERROR = re.compile(r"-ERR '")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z•\"'(-])")
MAX_HEADING_WORDS = 6


@dataclass(frozen=True)
class Statement:
    """One normative statement: where it is, what kind it is, and its words."""

    id: str
    document: str
    section: str
    kind: str  # error, syntax, field, requirement
    words: str  # whitespace-normalised, case kept

    def to_json(self) -> dict[str, str]:
        return {
            "id": self.id,
            "document": self.document,
            "section": self.section,
            "kind": self.kind,
            "words": self.words,
        }


def slug(text: str) -> str:
    """A section's id part: lower case letters and digits, runs of anything else as one dash."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "document"


def statement_id(document: str, section: str, words: str) -> str:
    """Document, section and a hash of the normalised words: reflowing a document keeps every
    id; changing a statement's words or moving it to another section gives a new one."""
    digest = hashlib.sha256(normalise_whitespace(words).encode("utf-8")).hexdigest()[:8]
    return f"{Path(document).stem}.{slug(section)}.{digest}"


def _blocks(text: str) -> list[list[str]]:
    """Runs of non-blank lines, stripped."""
    blocks: list[list[str]] = [[]]
    for line in text.splitlines():
        if line.strip():
            blocks[-1].append(line.strip())
        elif blocks[-1]:
            blocks.append([])
    return [block for block in blocks if block]


def _structural(line: str) -> bool:
    """A line that is a unit by itself, never joined with its neighbours into a sentence."""
    return bool(
        SYNTAX.search(line) or PRODUCTION.match(line) or TABLE_ROW.match(line) or line[0] == "#"
    )


def _heading_candidate(block: list[str]) -> str | None:
    # A markdown heading; not a block of comment lines (websocket.txt's commented configuration).
    if block[0].startswith("#") and not (len(block) > 1 and all(x[0] == "#" for x in block)):
        return block[0].lstrip("#").strip()
    line = block[0]
    # A title: one short line, not a sentence (no dot: "telnet demo.nats.io 4222" is not one,
    # and no modal: "... are not valid subject names" is a statement).
    short = len(block) == 1 and len(line.split()) <= MAX_HEADING_WORDS and "." not in line
    if short and line[-1] not in ":,;" and line[0] not in "•-" and not MODAL.search(line):
        return None if _structural(line) else line
    return None


def _headings(blocks: list[list[str]]) -> set[str]:
    """Short one-line paragraphs (or markdown headings) that occur once: a repeated one
    (Description, Syntax, Example) is a sub-heading inside each section, not a section."""
    found = [h for h in map(_heading_candidate, blocks) if h is not None]
    return {h for h in found if found.count(h) == 1}


def _units(block: list[str]) -> Iterator[str]:
    """A block's statement candidates: structural lines alone; the prose between them joined
    (the HTML-derived documents break sentences across lines) and split into sentences."""
    prose: list[str] = []
    for line in [*block, ""]:
        bullet = line.startswith(("•", "- "))  # a list item starts a new statement
        if line and not _structural(line) and not (bullet and prose):
            prose.append(line)
            continue
        yield from SENTENCE_END.split(normalise_whitespace(" ".join(prose))) if prose else ()
        prose = [line] if bullet else []
        if line and not bullet:
            yield normalise_whitespace(line)


def classify(unit: str, next_unit: str = "") -> str | None:
    """The kind of a normative statement, None for a unit that is not one. A table's header row
    (the row above its rule) and the rule itself are not statements."""
    if TABLE_ROW.match(unit):
        return None if TABLE_RULE.match(unit) or TABLE_RULE.match(next_unit) else "field"
    if ERROR.search(unit):
        return "error"
    if SYNTAX.search(unit) or PRODUCTION.match(unit):
        return "syntax"
    if FIELD.match(unit):
        return "field"
    return "requirement" if MODAL.search(unit) else None


def statements(document: str, text: str, quotes: Collection[str] = ()) -> list[Statement]:
    """The normative statements of one document, in document order, each once per section: the
    units ``classify`` recognises, and (kind ``statement``) any other sentence a vector's quote
    of this document cites. A definite sentence without a modal word ("The asterisk character
    (*) matches a single token") states behaviour as much as one with "must"; which role it
    binds, and how strictly, is levels.json's reviewed decision, not the index's."""
    blocks = _blocks(text)
    headings = _headings(blocks)
    section = ""
    out: dict[str, Statement] = {}
    for block in blocks:
        heading = _heading_candidate(block)
        if heading in headings:
            section = heading
            continue
        units = [u for u in _units(block) if u]
        for unit, after in zip(units, [*units[1:], ""], strict=True):
            kind = classify(unit, after) or (
                "statement" if any(_quoted(unit, q) for q in quotes) else None
            )
            if kind is not None:
                sid = statement_id(document, section, unit)
                out.setdefault(sid, Statement(sid, document, section, kind, unit))
    return list(out.values())


# Fewer words than this state nothing by themselves: a quote that holds a table's "Server" or
# "Both", or a quote of a few words ("(proto3, package `pb`)") that occurs in many sentences,
# makes no sentence a statement.
MIN_QUOTED_WORDS = 5


def _quoted(unit: str, quote: str) -> bool:
    """Whether a vector's ``quote`` makes ``unit`` (a sentence without a modal word) a
    statement of the index: one holds the other, and the shorter has a sentence's words."""
    words = unbulleted(unit)
    shorter = min(words, quote, key=len)
    return len(shorter.split()) >= MIN_QUOTED_WORDS and (words in quote or quote in words)


def build_index(
    documents: dict[str, str], quotes: dict[str, list[str]] | None = None
) -> dict[str, Any]:
    """The index of ``documents`` ({file name: text}), in DOCUMENTS order; ``quotes`` ({file
    name: the vectors' quotes of it, whitespace-normalised}) adds the sentences they cite."""
    quotes = quotes or {}
    found = [
        s
        for name in DOCUMENTS
        if name in documents
        for s in statements(name, documents[name], quotes.get(name, ()))
    ]
    return {"format": FORMAT, "statements": [s.to_json() for s in found]}


def bundled_quotes() -> dict[str, list[str]]:
    """The quotes of the bundled vectors, by document, whitespace-normalised."""
    out: dict[str, list[str]] = {}
    for case in bundled_cases():
        source = case.data["source"]
        quote = normalise_whitespace(source.get("quote", ""))
        if quote:
            out.setdefault(source["document"], []).append(quote)
    return {name: sorted(set(found)) for name, found in out.items()}


def read_documents(spec: Path) -> dict[str, str]:
    return {name: (spec / name).read_text(encoding="utf-8") for name in DOCUMENTS}


def index_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What regenerating the index changed, one line per statement: moved (same words, another
    section, so a new id), gone (its words are no longer in the document: changed or removed),
    new. Every cited id that is not in the index fails ``vectors check``, so a change shows."""
    new_ids = {s["id"] for s in new["statements"]}
    old_ids = {s["id"] for s in old["statements"]}
    new_by_words = {(s["document"], s["words"]): s for s in new["statements"]}
    old_words = {(s["document"], s["words"]) for s in old["statements"]}
    lines = []
    for s in old["statements"]:
        if s["id"] in new_ids:
            continue
        moved = new_by_words.get((s["document"], s["words"]))
        if moved is not None:
            lines.append(f"moved {s['id']} -> {moved['id']} ({moved['section']!r})")
        else:
            lines.append(f"gone {s['id']}: {s['words'][:100]!r}")
    lines += [
        f"new {s['id']}: {s['words'][:100]!r}"
        for s in new["statements"]
        if s["id"] not in old_ids and (s["document"], s["words"]) not in old_words
    ]
    return lines


def citation_problems(case: Case, index: list[dict[str, str]]) -> list[Problem]:
    """A cited id the index lacks, each named by its field; a case citing nothing whose quote
    cites a statement (its citations were not derived)."""
    cited = case.data.get("requirements", [])
    known = {s["id"] for s in index}
    problems = [
        Problem(case.file, case.id, f"requirements[{i}]", f"no statement {rid!r} in the index")
        for i, rid in enumerate(cited)
        if rid not in known
    ]
    if not cited and (derived := derive_citations(case.data, index)):
        message = f"cites nothing, but its quote cites {', '.join(derived[:3])}"
        problems.append(Problem(case.file, case.id, "requirements", message))
    return problems


@cache
def statement_words() -> dict[str, str]:
    """Statement id -> its words, from the bundled index."""
    return {statement["id"]: statement["words"] for statement in bundled_index()}


def with_citations(text: str, citations: list[list[str]]) -> str:
    """A vector file's text with each case's ``requirements`` (in case order) set right after
    its ``source``, the rest of the text untouched: the files are hand-formatted."""
    decoder = json.JSONDecoder()
    out, pos = [], 0
    for ids in citations:
        start = text.index('"source": ', pos)
        end = decoder.raw_decode(text, start + len('"source": '))[1]
        out.append(text[pos:end])
        pos = end
        old = re.compile(r',\s*"requirements": ').match(text, pos)
        if old:
            pos = decoder.raw_decode(text, old.end())[1]
        line = text[text.rfind("\n", 0, start) + 1 : start]
        indent = line[: len(line) - len(line.lstrip())]
        out.append(f',\n{indent}"requirements": {json.dumps(ids, ensure_ascii=False)}')
    return "".join(out) + text[pos:]


def _cite_files(index: list[dict[str, str]]) -> None:
    for path in sorted(BUNDLED_DIR.glob("*.json")):
        if path.name in NOT_VECTORS:
            continue
        text = path.read_text(encoding="utf-8")
        cases = json.loads(text)["cases"]
        updated = with_citations(text, [derive_citations(case, index) for case in cases])
        if updated != text:
            path.write_text(updated, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nats_conformance.conformance.requirements")
    parser.add_argument("action", choices=["index", "cite", "changes"])
    parser.add_argument("--spec", type=Path, default=DEFAULT_SPEC)
    args = parser.parse_args(argv)
    if args.action == "cite":
        _cite_files(load_index())
        return 0
    index = build_index(read_documents(args.spec), bundled_quotes())
    if args.action == "changes":
        changes = index_changes({"statements": load_index()}, index)
        print("\n".join(changes) or "no statement moved or changed")
        return 1 if changes else 0
    INDEX_PATH.write_text(json.dumps(index, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
