"""Laws of subject validation and wildcard matching (conformance.subjects)."""

from __future__ import annotations

import re

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from nats_conformance.conformance import subjects

# Printable ASCII except the separator and the wildcards, plus some UTF-8 (accepted, "may").
TOKEN_CHARS = "".join(chr(c) for c in range(33, 127) if chr(c) not in ".*>") + "éÜß日🙂"

token = st.text(st.sampled_from(TOKEN_CHARS), min_size=1, max_size=8)
token_lists = st.lists(token, min_size=1, max_size=6)
USES = ("publish", "subscribe", "reply")


def join(ts: list[str]) -> str:
    return ".".join(ts)


@given(token_lists)
def test_literal_subject_is_valid_everywhere_and_matches_itself(ts: list[str]) -> None:
    s = join(ts)
    assert all(subjects.is_valid(s, use) for use in USES)
    assert subjects.matches(s, s)


@given(token_lists)
def test_full_wildcard_alone_matches_every_valid_subject(ts: list[str]) -> None:
    assert subjects.matches(">", join(ts))


@given(token_lists, token_lists)
def test_prefix_then_full_wildcard_law(prefix: list[str], rest: list[str]) -> None:
    pattern = join([*prefix, ">"])
    assert subjects.matches(pattern, join(prefix + rest))
    for k in range(len(prefix) + 1):  # the prefix itself and everything shorter
        assert not subjects.matches(pattern, join(prefix[:k]))


@given(token_lists, st.data())
def test_star_replaces_exactly_one_token(ts: list[str], data: st.DataObject) -> None:
    stars = data.draw(st.lists(st.booleans(), min_size=len(ts), max_size=len(ts)))
    pattern = join(["*" if star else t for t, star in zip(ts, stars, strict=True)])
    assert subjects.matches(pattern, join(ts))
    extra = data.draw(token)
    at = data.draw(st.integers(0, len(ts)))
    assert not subjects.matches(pattern, join([*ts[:at], extra, *ts[at:]]))
    gone = data.draw(st.integers(0, len(ts) - 1))
    assert not subjects.matches(pattern, join(ts[:gone] + ts[gone + 1 :]))


@given(token_lists, st.data())
def test_matching_is_case_sensitive(ts: list[str], data: st.DataObject) -> None:
    i = data.draw(st.integers(0, len(ts) - 1))
    changed = ts[i].swapcase()
    assume(changed != ts[i])
    other = [*ts[:i], changed, *ts[i + 1 :]]
    assert not subjects.matches(join(ts), join(other))
    stars = join(["*" if j != i else t for j, t in enumerate(ts)])
    assert not subjects.matches(stars, join(other))


@given(st.lists(st.text().filter(lambda t: "." not in t), min_size=1, max_size=6))
def test_tokens_inverts_join(ts: list[str]) -> None:
    assert subjects.tokens(join(ts)) == ts


@given(token_lists, st.data())
def test_wildcards_are_only_for_subscriptions(ts: list[str], data: st.DataObject) -> None:
    i = data.draw(st.integers(0, len(ts) - 1))
    wildcard = data.draw(st.sampled_from(["*", ">"])) if i == len(ts) - 1 else "*"
    s = join([*ts[:i], wildcard, *ts[i + 1 :]])
    assert subjects.is_valid_subscribe_subject(s)
    assert not subjects.is_valid_publish_subject(s)
    assert not subjects.is_valid_reply_subject(s)


@given(token_lists, st.data())
def test_empty_or_wildcard_in_token_is_invalid(ts: list[str], data: st.DataObject) -> None:
    i = data.draw(st.integers(0, len(ts) - 1))
    bad = data.draw(st.sampled_from(["", "a*", "*b", "a>", ">b", "**", "*>", ">>", "a b", "a\tb"]))
    s = join([*ts[:i], bad, *ts[i + 1 :]])
    assert not any(subjects.is_valid(s, use) for use in USES)


@given(token_lists, st.data())
def test_full_wildcard_before_the_last_token_is_invalid(ts: list[str], data: st.DataObject) -> None:
    i = data.draw(st.integers(0, len(ts) - 1))
    assert not subjects.is_valid_subscribe_subject(join([*ts[:i], ">", *ts[i:]]))


# --- differential: an independent regex-based validator and matcher ---------------------------

_TOKEN = r"[^\x00-\x20\x7f.*>\ud800-\udfff]+"
_LITERAL = re.compile(rf"{_TOKEN}(?:\.{_TOKEN})*")
_PATTERN = re.compile(rf">|(?:{_TOKEN}|\*)(?:\.(?:{_TOKEN}|\*))*(?:\.>)?")


def regex_matches(pattern: str, subject: str) -> bool:
    """Translate the subscription into a regular expression over the subject."""
    if not (_PATTERN.fullmatch(pattern) and _LITERAL.fullmatch(subject)):
        return False
    translated = {"*": r"[^.]+", ">": r"[^.]+(?:\.[^.]+)*"}
    regex = r"\.".join(translated.get(t, re.escape(t)) for t in pattern.split("."))
    return re.fullmatch(regex, subject) is not None


# Few characters, so that random strings often collide, and every special case is reachable.
noisy = st.text(st.sampled_from("ab.*> \té\x00\x7f"), max_size=10)
pattern_tokens = st.lists(st.sampled_from(["a", "b", "A", "*"]), min_size=1, max_size=5)
subject_tokens = st.lists(st.sampled_from(["a", "b", "A"]), min_size=1, max_size=6)


@given(noisy, noisy)
def test_agrees_with_regex_on_arbitrary_text(pattern: str, subject: str) -> None:
    assert subjects.is_valid_subscribe_subject(pattern) == bool(_PATTERN.fullmatch(pattern))
    assert subjects.is_valid_publish_subject(subject) == bool(_LITERAL.fullmatch(subject))
    assert subjects.matches(pattern, subject) == regex_matches(pattern, subject)


@given(pattern_tokens, st.booleans(), subject_tokens)
def test_agrees_with_regex_on_valid_pairs(ps: list[str], tail: bool, ss: list[str]) -> None:
    pattern = join(ps + [">"] * tail)
    subject = join(ss)
    assert subjects.matches(pattern, subject) == regex_matches(pattern, subject)


# --- decisions that are not laws ---------------------------------------------------------------


def test_unknown_use_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown subject use"):
        subjects.is_valid("foo", "request")  # type: ignore[arg-type]


@pytest.mark.parametrize("subject", ["foo\ud800", "\udfff.bar"])
def test_lone_surrogates_are_invalid(subject: str) -> None:
    assert not any(subjects.is_valid(subject, use) for use in USES)
