"""The ADR-6 naming grammar: one predicate per production.

Each production is built from the same pieces the grammar uses: character classes
(``printable`` minus some named characters, or an explicit alphabet), ``x+`` (one or
more characters of a class), ``x (dot x)*`` and ``(x dot)+``. Stream, durable,
consumer and account names *are* filename-safe, queue names *are* terms and bucket
names *are* restricted terms, so those productions are the same functions.

Readings where the text is odd or silent (see the vectors for the cases):

* ``message-subject = term (dot term | asterisk)* (dot gt)?`` read literally accepts
  ``foo*`` and rejects ``foo.*`` and a lone ``>``. client-protocol.txt ("Wildcards")
  says wildcards are whole tokens (``foo.*.baz`` valid, ``foo*.bar`` not, ``sub > 1``
  valid), so a subject here is dot-separated tokens, each a term or ``*``, and the
  last may be ``>``.
* ``printable`` is ASCII 33..126, so every filename-safe name is ASCII and its
  255-character maximum is also 255 bytes.
* ``Keys starting with _kv`` is taken as written: a case-sensitive string prefix.
"""

from __future__ import annotations

import string
from collections.abc import Callable
from typing import Literal, cast

Platform = Literal["unix", "windows"]
PLATFORMS: tuple[Platform, ...] = ("unix", "windows")

# The grammar's named characters.
DOT = "."
ASTERISK = "*"
LT = "<"
GT = ">"
DOLLAR = "$"
COLON = ":"
DOUBLE_QUOTE = '"'
FWD_SLASH = "/"
BACKSLASH = "\\"
PIPE = "|"
QUESTION_MARK = "?"
DASH = "-"
UNDERSCORE = "_"
EQUALS = "="
SPACE = " "

# printable = all printable ascii (33 to 126 inclusive): no space, no DEL, no non-ASCII.
PRINTABLE = frozenset(map(chr, range(33, 127)))
ALPHANUMERIC = frozenset(string.ascii_letters + string.digits)

TERM_CHARS = PRINTABLE - {DOT, ASTERISK, GT}
LIMITED_TERM_CHARS = ALPHANUMERIC | {DASH, UNDERSCORE, FWD_SLASH, EQUALS}
LIMITED_TERM_W_SP_CHARS = LIMITED_TERM_CHARS | {SPACE}
RESTRICTED_TERM_CHARS = ALPHANUMERIC | {DASH, UNDERSCORE}
PREFIX_CHARS = PRINTABLE - {DOT, ASTERISK, GT, DOLLAR}
FILENAME_SAFE_CHARS: dict[Platform, frozenset[str]] = {
    "unix": PRINTABLE - {DOT, ASTERISK, GT, FWD_SLASH, BACKSLASH},
    # On Windows the server cannot build paths with these, so the class is narrower.
    "windows": PRINTABLE
    - {DOT, ASTERISK, LT, GT, COLON, DOUBLE_QUOTE, FWD_SLASH, BACKSLASH, PIPE, QUESTION_MARK},
}
FILENAME_SAFE_MAX_LENGTH = 255
KV_INTERNAL_KEY_PREFIX = "_kv"


def _one_or_more(name: str, allowed: frozenset[str]) -> bool:
    """``(class)+``: non-empty, every character in the class."""
    return bool(name) and all(char in allowed for char in name)


def _dot_separated(name: str, token: Callable[[str], bool]) -> bool:
    """``x (dot x)*``: every dot-separated part is an ``x`` (so no empty parts)."""
    return all(map(token, name.split(DOT)))


def _dot_terminated(name: str, token: Callable[[str], bool]) -> bool:
    """``(x dot)+``: one or more ``x``, each followed by a dot."""
    return name.endswith(DOT) and _dot_separated(name[: -len(DOT)], token)


def _platform(value: str) -> Platform:
    if value not in PLATFORMS:
        raise ValueError(f"unknown platform {value!r}; expected one of {PLATFORMS}")
    return cast(Platform, value)


def is_term(name: str) -> bool:
    """term = (printable except dot, asterisk or gt)+"""
    return _one_or_more(name, TERM_CHARS)


def is_limited_term(name: str) -> bool:
    """limited-term = (A-Z, a-z, 0-9, dash, underscore, fwd-slash, equals)+"""
    return _one_or_more(name, LIMITED_TERM_CHARS)


def is_limited_term_w_sp(name: str) -> bool:
    """limited-term-w-sp = (A-Z, a-z, 0-9, dash, underscore, fwd-slash, equals, space)+"""
    return _one_or_more(name, LIMITED_TERM_W_SP_CHARS)


def is_restricted_term(name: str) -> bool:
    """restricted-term = (A-Z, a-z, 0-9, dash, underscore)+"""
    return _one_or_more(name, RESTRICTED_TERM_CHARS)


def is_prefix(name: str) -> bool:
    """prefix = (printable except dot, asterisk, gt or dollar)+"""
    return _one_or_more(name, PREFIX_CHARS)


def is_filename_safe(name: str, *, platform: Platform = "unix") -> bool:
    """filename-safe: the Unix or the narrower Windows class, at most 255 characters."""
    allowed = FILENAME_SAFE_CHARS[_platform(platform)]
    return len(name) <= FILENAME_SAFE_MAX_LENGTH and _one_or_more(name, allowed)


def _subject_token(token: str) -> bool:
    return is_term(token) or token == ASTERISK


def is_message_subject(name: str) -> bool:
    """Tokens that are terms or ``*``; the last token may also be ``>`` (see module doc)."""
    *head, last = name.split(DOT)
    return all(map(_subject_token, head)) and (_subject_token(last) or last == GT)


def is_reply_to(name: str) -> bool:
    """reply-to = term (dot term)*"""
    return _dot_separated(name, is_term)


# stream-name = durable-name = consumer-name = account-name = filename-safe
is_stream_name = is_filename_safe
is_durable_name = is_filename_safe
is_consumer_name = is_filename_safe
is_account_name = is_filename_safe

# queue-name = term
is_queue_name = is_term


def is_js_internal_prefix(name: str) -> bool:
    """js-internal-prefix = dollar (prefix dot)+"""
    return name.startswith(DOLLAR) and _dot_terminated(name[len(DOLLAR) :], is_prefix)


def is_js_user_prefix(name: str) -> bool:
    """js-user-prefix = (prefix dot)+"""
    return _dot_terminated(name, is_prefix)


def is_kv_key_name(name: str, *, internal: bool = False) -> bool:
    """kv-key-name = limited-term (dot limited-term)*; keys starting with _kv only if internal."""
    reserved = name.startswith(KV_INTERNAL_KEY_PREFIX) and not internal
    return not reserved and _dot_separated(name, is_limited_term)


# kv-bucket-name = os-bucket-name = restricted-term
is_kv_bucket_name = is_restricted_term
is_os_bucket_name = is_restricted_term


def is_os_object_name(name: str) -> bool:
    """os-object-name = (any-character)+"""
    return bool(name)


# The dispatcher's uniform signature: (name, platform, internal) -> valid.
_Validator = Callable[[str, Platform, bool], bool]


def _name_only(predicate: Callable[[str], bool]) -> _Validator:
    return lambda name, _platform, _internal: predicate(name)


def _per_platform(predicate: Callable[..., bool]) -> _Validator:
    return lambda name, platform, _internal: predicate(name, platform=platform)


PRODUCTIONS: dict[str, _Validator] = {
    "term": _name_only(is_term),
    "limited-term": _name_only(is_limited_term),
    "limited-term-w-sp": _name_only(is_limited_term_w_sp),
    "restricted-term": _name_only(is_restricted_term),
    "prefix": _name_only(is_prefix),
    "filename-safe": _per_platform(is_filename_safe),
    "message-subject": _name_only(is_message_subject),
    "reply-to": _name_only(is_reply_to),
    "stream-name": _per_platform(is_stream_name),
    "durable-name": _per_platform(is_durable_name),
    "consumer-name": _per_platform(is_consumer_name),
    "account-name": _per_platform(is_account_name),
    "queue-name": _name_only(is_queue_name),
    "js-internal-prefix": _name_only(is_js_internal_prefix),
    "js-user-prefix": _name_only(is_js_user_prefix),
    "kv-key-name": lambda name, _platform, internal: is_kv_key_name(name, internal=internal),
    "kv-bucket-name": _name_only(is_kv_bucket_name),
    "os-bucket-name": _name_only(is_os_bucket_name),
    "os-object-name": _name_only(is_os_object_name),
}


def validate(production: str, name: str, *, platform: str = "unix", internal: bool = False) -> bool:
    """Whether ``name`` is a valid ``production`` (ADR-6 spelling, e.g. ``"stream-name"``)."""
    try:
        validator = PRODUCTIONS[production]
    except KeyError:
        raise ValueError(f"unknown ADR-6 production {production!r}") from None
    # An unknown platform is an error whatever the production, not silently Unix.
    return validator(name, _platform(platform), internal)
