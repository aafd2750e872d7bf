"""The rules that turn what a check found into a row's verdict, the same for every suite.

A failure is a claim about someone else's software, so it is only ever made at the level the
documents' words support (``../shared/spec/README.md``):

- ``info`` means the documents are silent for that role: the case records what the
  implementation did (its observation) and never fails it;
- a row derived from a case (the connection survives, nothing else is sent) is never judged
  above the case's own level;
- a crash or a hang is a robustness failure, whatever the level: the documents need not say
  that an implementation must not crash.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import json
import re
from typing import Any

LEVELS = ("must", "should", "may", "info")  # strictest first
OUTCOMES = ("pass", "fail", "error", "skip")
CONFORMANCE = "conformance"
ROBUSTNESS = "robustness"
CATEGORIES = (CONFORMANCE, ROBUSTNESS)


def level_rank(level: str) -> int:
    """0 for ``must`` up to 3 for ``info``; an unknown level sorts after them all."""
    return LEVELS.index(level) if level in LEVELS else len(LEVELS)


def derived_level(case_level: str, check_level: str) -> str:
    """The level of a row derived from a case: the check's own level, never above the case's."""
    return LEVELS[max(level_rank(case_level), level_rank(check_level))]


def settle(level: str, outcome: str, category: str = CONFORMANCE) -> str:
    """The outcome a row publishes: an ``info`` case never fails (its observation is the record),
    unless what happened is a robustness failure, which fails at every level."""
    if category not in CATEGORIES:
        raise ValueError(f"unknown category {category!r}")
    if outcome == "fail" and level == "info" and category == CONFORMANCE:
        return "pass"
    return outcome


# Names a client or server makes up per connection or per request: an observation must not
# change between two runs of the same implementation because of them.
_VOLATILE = (
    (re.compile(r"_INBOX\.[A-Za-z0-9_.\-]+"), "_INBOX.*"),
    (re.compile(r"\b[A-Za-z0-9]{22}\b(?=[^A-Za-z0-9]|$)"), "<nuid>"),
    # Epoch times in milliseconds or nanoseconds (a streaming MsgProto's timestamp).
    (re.compile(r"\b\d{13,19}\b"), "<time>"),
)


def scrub(text: str) -> str:
    """``text`` with inbox subjects and NUIDs replaced by placeholders."""
    for pattern, placeholder in _VOLATILE:
        text = pattern.sub(placeholder, text)
    return text


def observation(what: Any) -> str:
    """A canonical, deterministic text of an observation: JSON with sorted keys and no spaces,
    inbox names and NUIDs scrubbed; ``""`` for nothing observed."""
    if what is None or what == "" or what == {} or what == []:
        return ""
    if isinstance(what, bytes):
        what = what.decode("utf-8", "backslashreplace")
    text = json.dumps(what, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return scrub(text)
