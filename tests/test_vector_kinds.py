"""The recipe for a vector kind (CONTRIBUTING.md, A vector kind) holds: the kind's places agree.

A kind is a name in the schema's ``kind`` enum and its ``if``/``then`` block, one entry of
``conformance.vector_kinds.KINDS`` and one row of the Kinds table of vectors/README.md; a kind
whose cases have the client role is asked by a path or says why it is not; the driver command a
``LibraryCall`` names takes the arguments it builds from every case it asks.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest

from nats_conformance.conformance import vector_kinds, vectors
from nats_conformance.conformance.vector_kinds import KINDS
from nats_conformance.harness.clients import client_vectors
from nats_conformance.harness.clients import driver as driver_protocol
from nats_conformance.harness.clients import scripts as client_scripts

CASE_SCHEMA = vectors.schema()["$defs"]["case"]
README = vectors.BUNDLED_DIR / "README.md"
CLIENT_CASES = client_vectors.client_cases(vectors.bundled_cases())


def test_the_schema_enum_and_the_table_name_the_same_kinds() -> None:
    enum = CASE_SCHEMA["properties"]["kind"]["enum"]
    assert [kind for kind, n in Counter(enum).items() if n > 1] == []
    assert set(enum) == set(KINDS)


def test_each_kind_has_one_schema_block_for_its_input_and_expect() -> None:
    blocks = Counter(block["if"]["properties"]["kind"]["const"] for block in CASE_SCHEMA["allOf"])
    assert blocks == Counter(list(KINDS))


def _readme_kinds() -> list[str]:
    """The kinds the rows of the README's Kinds table name, in order: the table is the lines
    from its header to the first that is not a row (a blank line ends a Markdown table)."""
    section = README.read_text(encoding="utf-8").split("\n## Kinds\n", 1)[1]
    lines = section.split("| kind | input | expect |\n", 1)[1].splitlines()
    rows = lines[1 : next(i for i, line in enumerate(lines) if not line.startswith("|"))]
    return [re.match(r"\| `([a-z.]+)` \|", row)[1] for row in rows]  # type: ignore[index]


def test_each_kind_has_one_row_in_the_readme() -> None:
    assert Counter(_readme_kinds()) == Counter(list(KINDS))


def test_a_kind_declared_twice_is_refused() -> None:
    kind = KINDS["subject.tokens"]
    with pytest.raises(ValueError, match=r"subject\.tokens is declared twice"):
        vector_kinds.by_name((kind, KINDS["subject.match"], kind))


def test_every_kind_of_client_cases_is_asked_or_says_why() -> None:
    """A kind whose cases have the client role has a path (its LibraryCall's or one through a
    server), a runner of its own, or a reason in NOT_REACHED_REASONS: never a silent default."""
    own_runner = {client_scripts.KIND}
    for kind in {case.kind for case in CLIENT_CASES}:
        reached = kind in client_vectors.PATHS or kind in own_runner
        assert reached != (kind in client_vectors.NOT_REACHED_REASONS), kind


def test_a_library_call_is_its_kinds_first_path() -> None:
    called = {name: kind.library for name, kind in KINDS.items() if kind.library is not None}
    assert called  # the table declares some: this test checks something
    for name, call in called.items():
        first = client_vectors.PATHS[name][0]
        assert (first.name, first.capability, first.how) == (call.path, call.command, call.how)


@pytest.mark.parametrize("name", [name for name, kind in KINDS.items() if kind.library is not None])
def test_a_library_call_sends_what_its_driver_command_takes(name: str) -> None:
    """The command is one of the driver protocol's, a capability of that name exists, and the
    arguments built from every client case it asks match the command's request schema."""
    call = KINDS[name].library
    assert call is not None
    assert call.command in driver_protocol.commands()
    capabilities = driver_protocol.protocol_schema()["$defs"]["capability"]["enum"]
    assert call.command in capabilities
    asked = [c for c in CLIENT_CASES if c.kind == name and call.limit(c.data["input"]) is None]
    assert asked
    pointer = f"commands/{call.command}/request"
    for case in asked:
        request = {"id": 1, "cmd": call.command, **call.arguments(case.data["input"])}
        assert driver_protocol.schema_problem(request, pointer) is None, case.id
