"""How strictly each statement of the documents binds each role, and the rule that holds a case
to it.

``vectors/levels.json`` gives, per statement of ``vectors/requirements.json``, the level at which
its words bind a server and a client library (``../shared/spec/README.md``: normative words or a
definite statement of what a role does: ``must`` for that role only; should, recommended:
``should``; may, optional, can: ``may``; a role left out: the statement says nothing for it, so
``info``). The file is a reviewed decision: ``propose`` drafts an entry from the words and shows
why, a reader corrects it and says in ``why`` what carries the level.

``vectors check`` holds every case to it: a ``must`` or ``should`` case needs, for each role it
applies to, a cited statement that binds that role at least as strictly, and a description that
does not call the documents silent. Everything is pure but ``main`` and ``load_levels``.

    python -m nats_conformance.conformance.levels propose   # id, words and proposal per statement
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from .requirements import bundled_index, derive_citations
from .vectors import BUNDLED_DIR, Case, Problem
from .verdicts import LEVELS, level_rank

FORMAT = "nats-conformance-levels/1"
LEVELS_PATH = BUNDLED_DIR / "levels.json"
ROLES = ("server", "client")  # the implementation roles; `reference` is the model, not one
JUDGED = ("must", "should")  # the levels at which a case can fail someone

# Words of a description that say the documents do not carry the case: such a case is `info`
# (../shared/spec/README.md), so a `must`/`should` case saying them contradicts itself. Matched
# case-insensitively on whole words. Each is a phrase no legitimate requirement is described
# with: "silent" is not "silently" (a server silently dropping is a described behaviour); "not
# specified", "do not define" and "not documented" are left out, since descriptions use them of
# the input ("max_msgs not specified", "a protocol version the documents do not define", which
# the documents' -ERR 'Invalid Client Protocol' covers).
SILENCE_PHRASES = (
    "do not say",
    "does not say",
    "don't say",
    "doesn't say",
    "never say",
    "silent",
    "vague",
    "unclear",
    "not spelled out",
    "is the closest",
    "do not document",
    "does not document",
    "documents do not specify",
    "document does not specify",
    "not given by the documents",
    "no consequence",
    "disagree",
    "contradict",
    "hence should",
    "so should",
)
SILENCE = re.compile(r"\b(?:" + "|".join(map(re.escape, SILENCE_PHRASES)) + r")\b", re.IGNORECASE)
# A level drawn as a conclusion ("hence should") from the documents' own should, quoted in the
# same sentence ("ADR-4 describes the header API as how clients 'should behave', hence should"),
# is the words carrying it.
CONCLUSIONS = ("hence should", "so should")
_QUOTED_SHOULD = re.compile(r"'should\b[^.]*$", re.IGNORECASE)


def silence(description: str) -> str | None:
    """The first phrase of a description that calls the documents silent, vague or
    contradictory; None when there is none."""
    for match in SILENCE.finditer(description):
        quoted = _QUOTED_SHOULD.search(description, 0, match.start())
        if not (match.group().lower() in CONCLUSIONS and quoted):
            return match.group()
    return None


# --- proposing an entry from the words ---------------------------------------------------------

# Modal words by the level they carry, strictest first (a sentence gets its strictest).
MODALS = (
    ("must", r"must|shall|required|has to|have to|will"),
    ("should", r"should|recommended|good practice|suggested"),
    ("may", r"may|optional|optionally|can"),
)
_MODAL = re.compile(
    "|".join(rf"(?P<{level}>\b(?:{words})\b)" for level, words in MODALS), re.IGNORECASE
)
_ROLE_WORD = re.compile(r"\b(?:(?P<server>servers?)|(?P<client>clients?))\b", re.IGNORECASE)
# Who sends each protocol operation (client-protocol.txt, "Protocol messages": the table's
# "Sent By"), and each NATS Streaming message (streaming-protocol.txt, its "Sent By" column;
# Ping goes to the ConnectResponse's pingRequests subject, like every request a client makes).
SENDERS = {
    "INFO": ("server",),
    "MSG": ("server",),
    "HMSG": ("server",),
    "+OK": ("server",),
    "-ERR": ("server",),
    "+OK/ERR": ("server",),
    "CONNECT": ("client",),
    "PUB": ("client",),
    "HPUB": ("client",),
    "SUB": ("client",),
    "UNSUB": ("client",),
    "PING": ("server", "client"),
    "PONG": ("server", "client"),
    "PING/PONG": ("server", "client"),
    "ConnectRequest": ("client",),
    "SubscriptionRequest": ("client",),
    "UnsubscribeRequest": ("client",),
    "PubMsg": ("client",),
    "Ack": ("client",),
    "CloseRequest": ("client",),
    "Ping": ("client",),
    "ConnectResponse": ("server",),
    "SubscriptionResponse": ("server",),
    "PubAck": ("server",),
    "MsgProto": ("server",),
    "CloseResponse": ("server",),
    "PingResponse": ("server",),
}
_OPERATION = re.compile(r"^(?:[•\-]\s*)?(\+OK|-ERR|[A-Z]+)\b")
_TABLE_MESSAGE = re.compile(r"^\|\s*(\w+)\s*\|")


@dataclass(frozen=True)
class Entry:
    """A statement's levels by role (a role left out: info) and what carries them."""

    levels: dict[str, str]
    why: str


def senders(statement: dict[str, str]) -> tuple[str, ...]:
    """The roles that send what a syntax, field or error statement defines: its operation or
    message (from the words, else from its section), none when it names neither."""
    words = statement["words"]
    if statement["kind"] == "error":
        return SENDERS["-ERR"]
    if match := _TABLE_MESSAGE.match(words):
        return SENDERS.get(match.group(1), ())
    operation = _OPERATION.match(words) if statement["kind"] == "syntax" else None
    if operation and operation.group(1) in SENDERS:
        return SENDERS[operation.group(1)]
    return SENDERS.get(statement["section"], ())


def _modal_roles(words: str) -> list[tuple[str, str | None, str]]:
    """Each modal word of a sentence with its level and the role it is about: the last role
    named before it (the clause's subject), else the first after it, else None."""
    roles = [(m.start(), m.lastgroup) for m in _ROLE_WORD.finditer(words)]
    found = []
    for modal in _MODAL.finditer(words):
        before = [role for start, role in roles if start < modal.start()]
        after = [role for start, role in roles if start > modal.start()]
        role = before[-1] if before else after[0] if after else None
        found.append((modal.lastgroup or "", role, modal.group()))
    return found


def propose(statement: dict[str, str]) -> Entry:
    """A first draft of a statement's entry from its words alone, with the reasoning shown. Not
    the decision: levels.json is reviewed, and this only saves typing the obvious."""
    kind = statement["kind"]
    if kind in ("syntax", "field", "error"):
        roles = senders(statement)
        if roles:
            what = "an error a server sends" if kind == "error" else f"a {kind} definition"
            return Entry(
                {role: "must" for role in roles},
                f"{what}: binds the sender ({', '.join(roles)}) at must",
            )
    levels: dict[str, str] = {}
    reasons = []
    for level, role, word in _modal_roles(statement["words"]):
        targets = (role,) if role else ROLES
        for target in targets:
            if level_rank(level) < level_rank(levels.get(target, "info")):
                levels[target] = level
        reasons.append(f"{word!r} -> {level} for {role or 'no role named: both'}")
    why = "; ".join(reasons) or f"no modal word and no sender ({kind}): info"
    return Entry(levels, why)


# --- the reviewed file ---------------------------------------------------------------------------


def load_levels(path: Path = LEVELS_PATH) -> dict[str, dict[str, str]]:
    """Statement id -> its entry ({role: level, "why": ...})."""
    return json.loads(path.read_text(encoding="utf-8"))["statements"]


@cache
def bundled_levels() -> dict[str, dict[str, str]]:
    return load_levels()


def levels_problems(
    levels: dict[str, dict[str, str]], index: list[dict[str, str]], file: str
) -> list[Problem]:
    """An entry for a statement the index lacks, a statement without an entry (regenerating the
    index shows here), and a level that is not one."""
    known = [statement["id"] for statement in index]
    problems = [
        Problem(file, None, f"statements.{sid}", "no such statement in requirements.json")
        for sid in levels
        if sid not in set(known)
    ]
    problems += [
        Problem(file, None, "statements", f"no entry for statement {sid!r} of requirements.json")
        for sid in known
        if sid not in levels
    ]
    problems += [
        Problem(file, None, f"statements.{sid}.{role}", f"{entry[role]!r} is not a level")
        for sid, entry in levels.items()
        for role in ROLES
        if role in entry and entry[role] not in LEVELS
    ]
    return problems


# --- the rule a case is held to ----------------------------------------------------------------


def strongest(levels: dict[str, dict[str, str]], cited: list[str], role: str | None) -> str:
    """The strictest level the cited statements give ``role`` (None: any role); info if none."""
    found = [
        entry.get(r, "info")
        for sid in cited
        if (entry := levels.get(sid)) is not None
        for r in ((role,) if role else ROLES)
    ]
    return min(found, key=level_rank, default="info")


def citations(case: Case, index: list[dict[str, str]]) -> list[str]:
    """What a case cites: its ``requirements``, or for a file written before they existed what
    its quote cites."""
    if "requirements" in case.data:
        return list(case.data["requirements"])
    return derive_citations(case.data, index)


def case_problems(
    case: Case, index: list[dict[str, str]], levels: dict[str, dict[str, str]]
) -> list[Problem]:
    """A ``must``/``should`` case above what its statements give a role it applies to (field
    ``level``), or whose description says the documents do not carry it (``description``)."""
    if case.level not in JUDGED:
        return []
    problems = []
    cited = citations(case, index)
    shown = ", ".join(cited) if cited else "it cites none"
    roles = [role for role in case.roles if role != "reference"]
    for role in roles or [None]:
        best = strongest(levels, cited, role)
        if level_rank(best) > level_rank(case.level):
            gives = f"give {role} at most {best}" if role else f"give no role more than {best}"
            message = f"{case.level}{f' for {role}' if role else ''}, but its statements {gives}"
            problems.append(Problem(case.file, case.id, "level", f"{message}: {shown}"))
    if phrase := silence(case.data["description"]):
        message = (
            f"{case.level}, but the description says the documents do not carry it "
            f"({phrase!r}): such a case is info"
        )
        problems.append(Problem(case.file, case.id, "description", message))
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nats_conformance.conformance.levels")
    parser.add_argument("action", choices=["propose"])
    parser.parse_args(argv)
    reviewed = load_levels() if LEVELS_PATH.exists() else {}
    for statement in bundled_index():
        entry = propose(statement)
        print(f"{statement['id']}\n  words: {statement['words']}")
        print(f"  proposal: {_shown(entry.levels)} ({entry.why})")
        decided = reviewed.get(statement["id"])
        if decided is not None and _levels_of(decided) != entry.levels:
            print(f"  reviewed: {_shown(_levels_of(decided))} ({decided.get('why', '')})")
    return 0


def _levels_of(entry: dict[str, Any]) -> dict[str, str]:
    return {role: entry[role] for role in ROLES if role in entry}


def _shown(levels: dict[str, str]) -> str:
    return ", ".join(f"{role} {levels[role]}" for role in ROLES if role in levels) or "info"


if __name__ == "__main__":
    sys.exit(main())
