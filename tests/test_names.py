"""ADR-6 naming grammar: unit tests and properties over each production's alphabet.

The alphabets here are typed again from the grammar text (not imported from the
module), so a wrong character class in ``conformance.names`` fails these tests.
"""

from __future__ import annotations

import json
import string
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nats_conformance.conformance import names

PRINTABLE = "".join(map(chr, range(33, 127)))  # printable = ASCII 33 to 126 inclusive
ALNUM = string.ascii_letters + string.digits


def without(alphabet: str, excluded: str) -> str:
    return "".join(c for c in alphabet if c not in excluded)


TERM = without(PRINTABLE, ".*>")
LIMITED_TERM = ALNUM + "-_/="
LIMITED_TERM_W_SP = LIMITED_TERM + " "
RESTRICTED_TERM = ALNUM + "-_"
PREFIX = without(PRINTABLE, ".*>$")
FILENAME_SAFE_UNIX = without(PRINTABLE, ".*>/\\")
FILENAME_SAFE_WINDOWS = without(PRINTABLE, '.*<>:"/\\|?')

# Characters that are never in a printable-based class: whitespace, controls, DEL, non-ASCII.
NON_PRINTABLE = st.one_of(
    st.sampled_from(" \t\n\r\x00\x7f\x0b\x0c"),
    st.characters(min_codepoint=128),
)

SINGLE_CLASS: list[tuple[Callable[[str], bool], str]] = [
    (names.is_term, TERM),
    (names.is_limited_term, LIMITED_TERM),
    (names.is_limited_term_w_sp, LIMITED_TERM_W_SP),
    (names.is_restricted_term, RESTRICTED_TERM),
    (names.is_prefix, PREFIX),
    (names.is_queue_name, TERM),
    (names.is_kv_bucket_name, RESTRICTED_TERM),
    (names.is_os_bucket_name, RESTRICTED_TERM),
]
SINGLE_CLASS_IDS = [f"{p.__name__}-{i}" for i, (p, _) in enumerate(SINGLE_CLASS)]

FILENAME_SAFE = [
    names.is_filename_safe,
    names.is_stream_name,
    names.is_durable_name,
    names.is_consumer_name,
    names.is_account_name,
]
FS_ALPHABETS = {"unix": FILENAME_SAFE_UNIX, "windows": FILENAME_SAFE_WINDOWS}

ALL_PRODUCTIONS = [
    "term",
    "limited-term",
    "limited-term-w-sp",
    "restricted-term",
    "prefix",
    "filename-safe",
    "message-subject",
    "reply-to",
    "stream-name",
    "durable-name",
    "consumer-name",
    "account-name",
    "queue-name",
    "js-internal-prefix",
    "js-user-prefix",
    "kv-key-name",
    "kv-bucket-name",
    "os-bucket-name",
    "os-object-name",
]


def with_inserted(base: st.SearchStrategy[str], char: st.SearchStrategy[str]):
    """A string from ``base`` with one ``char`` inserted at some position."""

    @st.composite
    def build(draw: st.DrawFn) -> str:
        text = draw(base)
        at = draw(st.integers(0, len(text)))
        return text[:at] + draw(char) + text[at:]

    return build()


def tokens(alphabet: str) -> st.SearchStrategy[str]:
    return st.text(alphabet=alphabet, min_size=1, max_size=8)


# --- character classes -------------------------------------------------------------------------


@pytest.mark.parametrize(("predicate", "alphabet"), SINGLE_CLASS, ids=SINGLE_CLASS_IDS)
@given(data=st.data())
def test_every_string_over_the_alphabet_is_accepted(
    predicate: Callable[[str], bool], alphabet: str, data: st.DataObject
) -> None:
    assert predicate(data.draw(st.text(alphabet=alphabet, min_size=1)))


@pytest.mark.parametrize(("predicate", "alphabet"), SINGLE_CLASS, ids=SINGLE_CLASS_IDS)
@given(data=st.data())
def test_any_excluded_character_is_rejected(
    predicate: Callable[[str], bool], alphabet: str, data: st.DataObject
) -> None:
    excluded = st.one_of(st.sampled_from(without(PRINTABLE, alphabet)), NON_PRINTABLE)
    excluded = excluded.filter(lambda c: c not in alphabet)  # space is in limited-term-w-sp
    assert not predicate(data.draw(with_inserted(st.text(alphabet=alphabet), excluded)))


@pytest.mark.parametrize(("predicate", "alphabet"), SINGLE_CLASS, ids=SINGLE_CLASS_IDS)
def test_empty_is_rejected(predicate: Callable[[str], bool], alphabet: str) -> None:
    assert not predicate("")


def test_printable_edges() -> None:
    assert names.is_term("!") and names.is_term("~")
    assert not names.is_term(" ") and not names.is_term("\x7f")
    assert not names.is_term("caf\u00e9")


def test_limited_term_w_sp_allows_only_the_ascii_space() -> None:
    assert names.is_limited_term_w_sp(" ")
    assert not names.is_limited_term_w_sp("a\tb")
    assert not names.is_limited_term_w_sp("a\u00a0b")


# --- filename-safe -----------------------------------------------------------------------------


@pytest.mark.parametrize("predicate", FILENAME_SAFE)
@pytest.mark.parametrize("platform", ["unix", "windows"])
@given(data=st.data())
def test_filename_safe_accepts_its_alphabet_up_to_255(
    predicate: Callable[..., bool], platform: names.Platform, data: st.DataObject
) -> None:
    name = data.draw(st.text(alphabet=FS_ALPHABETS[platform], min_size=1, max_size=255))
    assert predicate(name, platform=platform)


@pytest.mark.parametrize("predicate", FILENAME_SAFE)
@pytest.mark.parametrize("platform", ["unix", "windows"])
@given(data=st.data())
def test_filename_safe_rejects_over_255(
    predicate: Callable[..., bool], platform: names.Platform, data: st.DataObject
) -> None:
    name = data.draw(st.text(alphabet=FS_ALPHABETS[platform], min_size=256, max_size=300))
    assert not predicate(name, platform=platform)


@pytest.mark.parametrize("platform", ["unix", "windows"])
def test_filename_safe_length_boundary(platform: names.Platform) -> None:
    assert names.is_filename_safe("a" * 255, platform=platform)
    assert not names.is_filename_safe("a" * 256, platform=platform)


@pytest.mark.parametrize("platform", ["unix", "windows"])
@given(data=st.data())
def test_filename_safe_rejects_excluded_characters(
    platform: names.Platform, data: st.DataObject
) -> None:
    alphabet = FS_ALPHABETS[platform]
    excluded = st.one_of(st.sampled_from(without(PRINTABLE, alphabet)), NON_PRINTABLE)
    name = data.draw(with_inserted(st.text(alphabet=alphabet, max_size=100), excluded))
    assert not names.is_filename_safe(name, platform=platform)


@given(st.text(alphabet=PRINTABLE + " \u00e9\x00", max_size=300))
def test_windows_valid_implies_unix_valid(name: str) -> None:
    if names.is_filename_safe(name, platform="windows"):
        assert names.is_filename_safe(name, platform="unix")


@pytest.mark.parametrize("char", '<:"|?')
def test_platforms_differ_on(char: str) -> None:
    assert names.is_filename_safe(f"a{char}b", platform="unix")
    assert not names.is_filename_safe(f"a{char}b", platform="windows")


@given(st.text(max_size=300))
def test_stream_durable_consumer_account_are_filename_safe(name: str) -> None:
    for platform in ("unix", "windows"):
        expected = names.is_filename_safe(name, platform=platform)
        for predicate in FILENAME_SAFE[1:]:
            assert predicate(name, platform=platform) == expected


def test_filename_safe_unknown_platform() -> None:
    with pytest.raises(ValueError, match="platform"):
        names.is_filename_safe("a", platform="mac")  # type: ignore[arg-type]


# --- subjects ----------------------------------------------------------------------------------


@given(st.lists(tokens(TERM), min_size=1, max_size=6))
def test_message_subject_and_reply_to_accept_any_dot_join_of_terms(parts: list[str]) -> None:
    subject = ".".join(parts)
    assert names.is_message_subject(subject)
    assert names.is_reply_to(subject)


@given(
    st.lists(st.one_of(tokens(TERM), st.just("*")), min_size=1, max_size=6),
    st.booleans(),
)
def test_message_subject_accepts_whole_token_wildcards(parts: list[str], full: bool) -> None:
    subject = ".".join([*parts, ">"] if full else parts)
    assert names.is_message_subject(subject)
    assert names.is_reply_to(subject) == ("*" not in parts and not full)


@given(st.lists(tokens(TERM), min_size=1, max_size=4), st.integers(0, 3))
def test_message_subject_rejects_an_empty_token(parts: list[str], at: int) -> None:
    parts.insert(min(at, len(parts)), "")
    assert not names.is_message_subject(".".join(parts))
    assert not names.is_reply_to(".".join(parts))


@given(st.lists(tokens(TERM), min_size=1, max_size=4), st.sampled_from(["*", ">"]))
def test_message_subject_rejects_wildcards_inside_a_token(parts: list[str], wildcard: str) -> None:
    parts[-1] += wildcard
    assert not names.is_message_subject(".".join(parts))


@pytest.mark.parametrize(
    ("subject", "valid"),
    [
        ("foo.*.baz", True),
        ("foo.>", True),
        (">", True),
        ("*", True),
        ("foo*.bar", False),
        ("f*o.b*r", False),
        ("foo>", False),
        ("foo.>.bar", False),
        ("FOO. BAR", False),
        ("foo. .bar", False),
        ("foo..bar", False),
        ("", False),
    ],
)
def test_client_protocol_examples(subject: str, valid: bool) -> None:
    assert names.is_message_subject(subject) == valid


# --- JetStream prefixes ------------------------------------------------------------------------


@given(st.lists(tokens(PREFIX), min_size=1, max_size=5))
def test_prefixes_accept_each_prefix_followed_by_a_dot(parts: list[str]) -> None:
    user = "".join(f"{p}." for p in parts)
    assert names.is_js_user_prefix(user)
    assert names.is_js_internal_prefix("$" + user)
    assert not names.is_js_internal_prefix(user)  # a prefix never starts with dollar
    assert not names.is_js_user_prefix(user[:-1])  # the last dot is required
    assert not names.is_js_internal_prefix("$" + user[:-1])


def test_js_prefix_examples() -> None:
    assert names.is_js_internal_prefix("$JS.API.")
    assert not names.is_js_internal_prefix("$.")
    assert not names.is_js_internal_prefix("$$JS.")
    assert not names.is_js_user_prefix("$JS.")
    assert not names.is_js_user_prefix("JS..")


# --- KV and object store -----------------------------------------------------------------------


@given(st.lists(tokens(LIMITED_TERM), min_size=1, max_size=5))
def test_kv_key_accepts_dot_joined_limited_terms(parts: list[str]) -> None:
    key = ".".join(parts)
    assert names.is_kv_key_name(key, internal=True)
    assert names.is_kv_key_name(key) == (not key.startswith("_kv"))


@given(st.lists(tokens(LIMITED_TERM), max_size=4))
def test_kv_keys_starting_with_kv_are_internal_only(rest: list[str]) -> None:
    key = ".".join(["_kv", *rest])
    assert not names.is_kv_key_name(key)
    assert names.is_kv_key_name(key, internal=True)


def test_kv_reservation_is_case_sensitive_and_a_string_prefix() -> None:
    assert names.is_kv_key_name("_KV.foo")
    assert not names.is_kv_key_name("_kvfoo")
    assert names.is_kv_key_name("foo._kv")
    assert not names.is_kv_key_name("_kv.*", internal=True)


@given(st.text(min_size=1))
def test_os_object_name_is_any_nonempty_string(name: str) -> None:
    assert names.is_os_object_name(name)


def test_os_object_name_empty() -> None:
    assert not names.is_os_object_name("")


# --- dispatcher --------------------------------------------------------------------------------


def test_dispatcher_covers_the_schema_enum() -> None:
    path = Path(__file__).resolve().parents[1] / "schemas" / "vector.schema.json"
    schema = json.loads(path.read_text("utf-8"))
    rules = schema["$defs"]["case"]["allOf"]
    rule = next(r for r in rules if r["if"]["properties"]["kind"]["const"] == "name.validate")
    enum = rule["then"]["properties"]["input"]["properties"]["production"]["enum"]
    assert sorted(enum) == sorted(ALL_PRODUCTIONS) == sorted(names.PRODUCTIONS)


@given(
    st.sampled_from(ALL_PRODUCTIONS),
    st.text(alphabet=PRINTABLE + " \u00e9", max_size=40),
    st.sampled_from(["unix", "windows"]),
    st.booleans(),
)
def test_validate_dispatches_to_the_production(
    production: str, name: str, platform: names.Platform, internal: bool
) -> None:
    predicate = getattr(names, "is_" + production.replace("-", "_"))
    if production in {
        "filename-safe",
        "stream-name",
        "durable-name",
        "consumer-name",
        "account-name",
    }:
        expected = predicate(name, platform=platform)
    elif production == "kv-key-name":
        expected = predicate(name, internal=internal)
    else:
        expected = predicate(name)
    assert names.validate(production, name, platform=platform, internal=internal) == expected


def test_validate_passes_platform_and_internal() -> None:
    assert names.validate("stream-name", "a:b", platform="unix")
    assert not names.validate("stream-name", "a:b", platform="windows")
    assert not names.validate("kv-key-name", "_kv.x")
    assert names.validate("kv-key-name", "_kv.x", internal=True)


def test_validate_unknown_production() -> None:
    with pytest.raises(ValueError, match="production"):
        names.validate("subject", "foo")


def test_validate_unknown_platform() -> None:
    with pytest.raises(ValueError, match="platform"):
        names.validate("term", "foo", platform="mac")
