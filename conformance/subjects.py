"""Subject names, their tokens, and wildcard matching.

Rules from client-protocol.txt ("Subject names", "Wildcards", "Character Encoding"),
protocols-overview.txt (the same text) and ADR-6 (``message-subject``, ``reply-to``).
Where the documents disagree, this module takes these decisions (the vectors say so too):

- Punctuation (``$``, ``_``, ``-``, ``/`` ...) is allowed: ADR-6's ``term`` is any printable
  ASCII except dot, asterisk and gt, and client-protocol.txt allows "all ascii alphanumeric
  characters except spaces/tabs and separators", although it also says "alphanumeric".
- ASCII control characters and DEL are rejected: they are not printable (ADR-6), and CR, LF
  and tab are field or line delimiters on the wire.
- Non-ASCII text is accepted: "some clients may support UTF-8 subject names, as may the
  server". Lone surrogates are rejected because they have no UTF-8 encoding.
- ``*`` and ``>`` are wildcards only as whole tokens of a subscription; anywhere else (inside
  a token, or in a publish or reply subject) they make the subject invalid.

The protocol parser calls these on every PUB and SUB, so the common case (a literal subject)
is decided with a handful of C-level string operations.
"""

from __future__ import annotations

import re
from typing import Literal

Use = Literal["publish", "subscribe", "reply"]

SEPARATOR = "."
TOKEN_WILDCARD = "*"
FULL_WILDCARD = ">"

# Space, tab, CR, LF, every other ASCII control character, DEL, and lone surrogates.
_FORBIDDEN = re.compile(r"[\x00-\x20\x7f\ud800-\udfff]")
_USES = frozenset({"publish", "subscribe", "reply"})


def tokens(subject: str) -> list[str]:
    """The tokens of ``subject``, split on ``.``; empty tokens are kept so callers can see them."""
    return subject.split(SEPARATOR)


def _has_wildcard_char(subject: str) -> bool:
    return TOKEN_WILDCARD in subject or FULL_WILDCARD in subject


def _valid_literal(subject: str) -> bool:
    """Non-empty, allowed characters only, no empty token, no wildcard character anywhere."""
    return (
        subject != ""
        and _FORBIDDEN.search(subject) is None
        and not _has_wildcard_char(subject)
        and subject[0] != SEPARATOR
        and subject[-1] != SEPARATOR
        and SEPARATOR + SEPARATOR not in subject
    )


def _valid_pattern(subject: str) -> bool:
    """A subscription subject: wildcards as whole tokens only, ``>`` only as the last token."""
    if not _has_wildcard_char(subject):
        return _valid_literal(subject)
    if _FORBIDDEN.search(subject) is not None:
        return False
    parts = subject.split(SEPARATOR)
    last = len(parts) - 1
    for i, token in enumerate(parts):
        if token == TOKEN_WILDCARD or (token == FULL_WILDCARD and i == last):
            continue
        # An empty token, a misplaced ``>``, or a wildcard character inside a literal token.
        if not token or _has_wildcard_char(token):
            return False
    return True


def is_valid_publish_subject(subject: str) -> bool:
    """Whether ``subject`` may be published to: a literal subject, no wildcards."""
    return _valid_literal(subject)


def is_valid_reply_subject(subject: str) -> bool:
    """Whether ``subject`` may be a reply subject (ADR-6 ``reply-to = term (dot term)*``)."""
    return _valid_literal(subject)


def is_valid_subscribe_subject(subject: str) -> bool:
    """Whether ``subject`` may be subscribed to; ``*`` and ``>`` tokens are wildcards."""
    return _valid_pattern(subject)


def is_valid(subject: str, use: Use) -> bool:
    """Whether ``subject`` is valid for ``use`` (``publish``, ``subscribe`` or ``reply``)."""
    if use not in _USES:
        raise ValueError(f"unknown subject use {use!r}; expected one of {sorted(_USES)}")
    return _valid_pattern(subject) if use == "subscribe" else _valid_literal(subject)


def matches(pattern: str, subject: str) -> bool:
    """Whether a subscription to ``pattern`` receives a message published to ``subject``.

    ``*`` matches exactly one token, ``>`` one or more trailing tokens, and every other token
    only itself (case-sensitively). A pattern that is not a valid subscribe subject, or a
    subject that is not a valid publish subject, never matches: the documents say nothing
    about what such subjects would match, so the reference does not guess.
    """
    if not (_valid_pattern(pattern) and _valid_literal(subject)):
        return False
    if not _has_wildcard_char(pattern):
        return pattern == subject
    want = pattern.split(SEPARATOR)
    have = subject.split(SEPARATOR)
    if want[-1] == FULL_WILDCARD:
        want.pop()
        if len(have) <= len(want):
            return False
        have = have[: len(want)]
    elif len(have) != len(want):
        return False
    return all(w in (TOKEN_WILDCARD, h) for w, h in zip(want, have, strict=True))
