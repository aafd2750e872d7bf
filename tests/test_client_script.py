"""Client scripts (vector kind client.script) without I/O: how a step is judged, how the reference
reads a script, and what the loader says of a malformed one."""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nats_conformance.conformance import client_script, vectors
from nats_conformance.conformance.client_script import (
    answer_problem,
    event_problems,
    event_selects,
    op_problems,
    option_problems,
    select_sent,
    split_plans,
    substitute,
)
from nats_conformance.conformance.vector_values import Mismatch
from nats_conformance.harness.clients.fake_server import split

SCRIPT_CASE: dict[str, Any] = {
    "id": "client.sample.delivery",
    "description": "a MSG is delivered",
    "source": {"document": "client-protocol.txt", "section": "MSG"},
    "level": "must",
    "roles": ["client"],
    "kind": "client.script",
    "input": {
        "steps": [
            {"call": "subscribe", "args": {"subject": "a", "queue": None}, "save": {"h": "sub"}},
            {"sent": [{"op": "SUB", "subject": "a", "save": {"sid": "sid"}}]},
            {
                "push": ["MSG a ", {"var": "sid"}, " 2\r\nhi\r\n"],
                "event": {"event": "message", "sub": {"var": "h"}, "subject": "a", "payload": "hi"},
            },
        ]
    },
    "expect": {},
}

# --- CONNECT options ---------------------------------------------------------------------------

json_scalars = st.one_of(
    st.booleans(), st.integers(-5, 5), st.text(max_size=5), st.none(), st.floats(-2, 2)
)


@given(json_scalars, json_scalars)
def test_an_option_equals_only_the_same_value_of_the_same_type(want: Any, got: Any) -> None:
    problems = option_problems({"x": want}, {"x": got})
    assert (problems == []) == (type(want) is type(got) and want == got)


@pytest.mark.parametrize(
    ("rule", "options", "ok"),
    [
        ({"in": [0, 1], "optional": True}, {}, True),
        ({"in": [0, 1], "optional": True}, {"x": 1}, True),
        ({"in": [0, 1], "optional": True}, {"x": True}, False),  # a boolean is not the integer 1
        ({"in": [0, 1], "optional": True}, {"x": 2}, False),
        ({"type": "string"}, {"x": "go"}, True),
        ({"type": "string"}, {}, False),
        ({"type": "integer"}, {"x": False}, False),
        ({"type": "boolean", "optional": True}, {"x": "yes"}, False),
        ({"equals": True, "optional": True}, {"x": False}, False),
        (False, {}, False),  # a plain value must be there
    ],
)
def test_option_rules(rule: Any, options: dict[str, Any], ok: bool) -> None:
    assert (option_problems({"x": rule}, options) == []) is ok


# --- what the client sends -----------------------------------------------------------------------

OPS = [
    {"op": "CONNECT", "options": {}},
    {"op": "PING"},
    {"op": "SUB", "subject": "a", "queue": None, "sid": "1"},
    {"op": "PUB", "subject": "b", "reply": None, "payload": b"x"},
    {"op": "PUB", "subject": "a", "reply": None, "payload": b"y"},
]


@pytest.mark.parametrize(
    ("pattern", "start", "index"),
    [
        ({"op": "PUB"}, 0, 3),
        ({"op": "PUB", "subject": "a"}, 0, 4),
        ({"op": ["HPUB", "PUB"], "subject": "a"}, 0, 4),
        ({"op": "PING"}, 2, None),  # only what came after the start counts
        ({"op": "UNSUB"}, 0, None),
    ],
)
def test_select_sent(pattern: dict[str, Any], start: int, index: int | None) -> None:
    assert select_sent(pattern, OPS, start) == index


def test_op_problems_compare_fields_types_regexes_and_blocks() -> None:
    sub = {"op": "SUB", "subject": "a", "queue": None, "sid": "a-1"}
    assert op_problems({"op": "SUB", "queue": None}, sub, "p") == []
    assert op_problems({"op": "SUB", "queue": "q"}, sub, "p")
    assert op_problems({"op": "SUB", "matches": {"sid": "^[A-Za-z0-9]+$"}}, sub, "p")
    hpub = {"op": "HPUB", "subject": "a", "reply": None, "headers": b"NATS/1.0\r\nA:  1\r\n\r\n"}
    block = {"status": None, "description": None, "headers": [["A", "1"]]}
    assert op_problems({"op": "HPUB", "block": block}, hpub, "p") == []
    other = {"status": None, "description": None, "headers": [["A", "2"]]}
    assert op_problems({"op": "HPUB", "block": other}, hpub, "p")
    assert op_problems({"op": "PUB", "payload": "x"}, OPS[3], "p") == []


# --- what the library reports --------------------------------------------------------------------


def _message(status: int | None, *pairs: tuple[str, str]) -> dict[str, Any]:
    return {
        "event": "message",
        "sub": "7",
        "status": status,
        "description": None,
        "headers": [list(p) for p in pairs] or None,
        "payload_b64": base64.b64encode(b"p").decode(),
    }


@pytest.mark.parametrize(
    ("got", "ok"),
    [
        (_message(None, ("A", "1"), ("B", "2"), ("A", "3")), True),
        (_message(None, ("A", "1"), ("A", "3"), ("B", "2")), True),  # grouped by key
        (_message(None, ("A", "3"), ("A", "1"), ("B", "2")), False),  # a key's values reordered
        (_message(None, ("a", "1"), ("B", "2"), ("a", "3")), False),  # case changed
        (_message(None, ("A", "3"), ("B", "2")), False),  # a value lost
        (_message(503, ("A", "1"), ("B", "2"), ("A", "3")), False),
        (_message(None), False),
    ],
)
def test_a_delivered_block_is_judged_as_the_judge_does(got: dict[str, Any], ok: bool) -> None:
    block = {"status": None, "description": None, "headers": [["A", "1"], ["B", "2"], ["A", "3"]]}
    pattern = {"event": "message", "sub": "7", "payload": "p", "block": block}
    assert event_selects(pattern, got)
    assert (event_problems(pattern, got) == []) is ok


def test_an_error_event_is_selected_by_its_text_in_any_case() -> None:
    pattern = {"event": "error", "message_contains": "Stale Connection"}
    assert event_selects(pattern, {"event": "error", "message": "nats: 'stale connection'"})
    assert not event_selects(pattern, {"event": "error", "message": "slow consumer"})
    assert not event_selects(pattern, {"event": "closed"})


@pytest.mark.parametrize(
    ("expected", "ok", "error_type", "passes"),
    [
        ("ok", True, None, True),
        ("ok", False, "timeout", False),
        ("error", False, "timeout", True),
        ("error", True, None, False),
        ("any", False, "connection", True),
        ("no_responders", False, "no_responders", True),
        ("no_responders", False, "timeout", False),
        ("no_responders", True, None, False),
    ],
)
def test_answers(expected: str, ok: bool, error_type: str | None, passes: bool) -> None:
    assert (answer_problem(expected, ok, error_type) is None) is passes


@given(st.binary(min_size=1, max_size=60))
def test_split_plans_cover_the_bytes(data: bytes) -> None:
    whole = split_plans(len(data), None)
    assert whole == [[]]
    (by_byte,) = split_plans(len(data), "bytes")
    assert split(data, by_byte) == [data[i : i + 1] for i in range(len(data))]
    each = split_plans(len(data), "each-position")
    assert len(each) == len(data) - 1
    for plan in each:
        assert b"".join(split(data, plan)) == data and len(split(data, plan)) == 2


# --- variables, and the reference's reading of a script -----------------------------------------


def test_substitute_replaces_variables_and_names_an_unknown_one() -> None:
    value = {"a": ["x", {"var": "sid"}], "b": {"var": "sid"}}
    assert substitute(value, {"sid": "9"}, "p") == {"a": ["x", "9"], "b": "9"}
    with pytest.raises(Mismatch) as info:
        substitute(value, {}, "input.steps[2]")
    assert info.value.field == "input.steps[2].a[1]"


def _problems(case: dict[str, Any]) -> list[str]:
    doc = {"format": vectors.FORMAT, "group": "client.sample", "title": "t", "cases": [case]}
    loaded = vectors.load_document(doc, "client-sample.json")
    found = [str(p) for p in loaded.problems]
    found += [str(p) for c in loaded.cases if (p := vectors.evaluate(c)) is not None]
    return found


def test_the_reference_reads_a_good_script() -> None:
    assert _problems(SCRIPT_CASE) == []


def test_a_push_must_deliver_what_the_reference_parses() -> None:
    case = copy.deepcopy(SCRIPT_CASE)
    case["input"]["steps"][2]["event"]["payload"] = "ho"
    assert _problems(case) == [
        "client-sample.json: case client.sample.delivery: field input.steps[2].event: payload b'hi'"
    ]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda c: c["input"]["steps"][1]["sent"][0].pop("save"), "input.steps[2].push[1]"),
        (lambda c: c["input"]["steps"].append({"open": True, "close": True}), "input.steps[3]"),
        (lambda c: c["input"]["steps"].append({"wait": 1}), "input.steps[3]"),
        (lambda c: c["input"].update(needs="headers"), "input.needs"),
        (lambda c: c.update(roles=["reference"]), "roles[0]"),
        (lambda c: c.update(expect={"then": "open"}), "expect"),
    ],
)
def test_the_loader_names_file_case_and_field(change: Any, field: str) -> None:
    case = copy.deepcopy(SCRIPT_CASE)
    change(case)
    problems = _problems(case)
    assert problems, "a malformed script passed"
    assert problems[0].startswith(
        f"client-sample.json: case client.sample.delivery: field {field}"
    ), problems


def test_every_bundled_script_names_only_known_actions() -> None:
    cases = [c for c in vectors.load_all([vectors.BUNDLED_DIR]).cases if c.kind == "client.script"]
    assert len(cases) >= 70
    for case in cases:
        assert client_script.steps(case.data["input"])


def test_cutting_a_large_push_at_every_position_is_refused_with_its_field() -> None:
    from nats_conformance.conformance.client_script import SPLIT_LIMIT, split_plans
    from nats_conformance.conformance.vector_values import Mismatch

    assert len(split_plans(SPLIT_LIMIT, "each-position")) == SPLIT_LIMIT - 1
    for how in ("each-position", "bytes"):
        with pytest.raises(Mismatch) as caught:
            split_plans(SPLIT_LIMIT + 1, how, "input.steps[3].split")
        assert caught.value.field == "input.steps[3].split"
    assert split_plans(10**9, [5, 9]) == [[5, 9]]  # offsets given: one send, any size
