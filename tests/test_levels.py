"""Statement levels (vectors/levels.json) and the rule `vectors check` holds every case to: a
must/should case needs, for each role it applies to, a cited statement at least that strict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_vectors import GOOD_CASE, _check, _file

from nats_conformance.conformance import levels, requirements, vectors
from nats_conformance.conformance.verdicts import LEVELS, level_rank
from nats_conformance.harness import cli

INDEX = requirements.bundled_index()
LEVELS_FILE = levels.bundled_levels()
STATEMENTS = {statement["id"]: statement for statement in INDEX}
# Real statements, with the levels their words give (levels.json).
PING_SYNTAX = "client-protocol.ping-pong.5866ac60"  # "PING␍␊": both roles send it, must
SERVER_PINGS = "client-protocol.ping-pong.c1292c1e"  # "the server will ... send PING": server must
CLIENT_SHOULD = (
    "client-protocol.ok-err.f31bbde9"  # "The client should not close ...": client should
)


def _case(**fields: object) -> vectors.Case:
    return vectors.Case("t.json", "t", {**GOOD_CASE, **fields})


def _problems(**fields: object) -> list[vectors.Problem]:
    return levels.case_problems(_case(**fields), INDEX, LEVELS_FILE)


def test_the_cited_levels_are_the_reviewed_ones() -> None:
    assert LEVELS_FILE[PING_SYNTAX] | {"why": ""} == {"server": "must", "client": "must", "why": ""}
    assert "client" not in LEVELS_FILE[SERVER_PINGS]
    assert LEVELS_FILE[CLIENT_SHOULD]["client"] == "should"


def test_a_must_case_citing_only_a_should_statement_is_refused() -> None:
    [problem] = _problems(roles=["reference", "client"], requirements=[CLIENT_SHOULD])
    assert (problem.file, problem.case, problem.field) == ("t.json", "t.ping", "level")
    assert problem.message == (
        f"must for client, but its statements give client at most should: {CLIENT_SHOULD}"
    )
    should = _problems(roles=["reference", "client"], requirements=[CLIENT_SHOULD], level="should")
    assert should == []


def test_a_client_case_citing_only_a_server_statement_is_refused() -> None:
    [problem] = _problems(roles=["reference", "client"], requirements=[SERVER_PINGS])
    assert problem.message == (
        f"must for client, but its statements give client at most info: {SERVER_PINGS}"
    )
    assert _problems(roles=["reference", "server"], requirements=[SERVER_PINGS]) == []
    # Each role needs its own statement: a server-and-client case needs one for each.
    both = _problems(roles=["server", "client"], requirements=[SERVER_PINGS, CLIENT_SHOULD])
    assert [p.message.split(",")[0] for p in both] == ["must for client"]


def test_a_reference_case_needs_one_statement_strict_enough_for_some_role() -> None:
    assert _problems(roles=["reference"], requirements=[SERVER_PINGS]) == []
    [problem] = _problems(roles=["reference"], requirements=[CLIENT_SHOULD])
    assert problem.message.startswith("must, but its statements give no role more than should")


def test_a_judged_case_citing_nothing_is_refused_and_an_info_case_is_not() -> None:
    [problem] = _problems(requirements=[])
    assert problem.message == "must, but its statements give no role more than info: it cites none"
    assert _problems(requirements=[], level="info") == []
    assert _problems(requirements=[], level="may") == []


def test_a_file_without_requirements_is_held_to_what_its_quote_cites() -> None:
    quote = "the server will continuously send PING messages to the client"
    source = {"document": "client-protocol.txt", "section": "PING/PONG", "quote": quote}
    case = {key: value for key, value in GOOD_CASE.items() if key != "requirements"}
    found = levels.case_problems(
        vectors.Case("old.json", "t", {**case, "source": source, "roles": ["client"]}),
        INDEX,
        LEVELS_FILE,
    )
    assert [p.message for p in found] == [
        f"must for client, but its statements give client at most info: {SERVER_PINGS}"
    ]


def test_a_description_calling_the_documents_silent_is_refused() -> None:
    silent = "The documents do not say what a server does here; 'Parser Error' is the closest."
    [problem] = _problems(description=silent)
    assert (problem.field, problem.case) == ("description", "t.ping")
    assert "'do not say'" in problem.message
    assert _problems(description=silent, level="info") == []
    for words in (
        "The documents are SILENT on it.",
        "They disagree.",
        "hence should.",
        "That a group gets each message once is not spelled out, so should.",
    ):
        assert _problems(description=words, level="should"), words


def test_legitimate_descriptions_do_not_trip_the_silence_phrases() -> None:
    for words in (
        "ADR-4 describes the header API as how clients 'should behave', hence should.",
        "Clients 'should clean up relevant resources', so should.",
        "The server silently drops the message of a denied publish.",
        "UNSUB with max_msgs not specified removes the subscription at once.",
        "A vaguely familiar subject is still a subject.",
    ):
        assert levels.silence(words) is None, words
    quoted_then_silent = "Clients 'should behave'. The documents do not say more, hence should."
    assert levels.silence(quoted_then_silent) == "do not say"


def test_levels_json_names_only_indexed_statements_and_all_of_them() -> None:
    assert levels.levels_problems(LEVELS_FILE, INDEX, "levels.json") == []
    assert all(entry["why"] for entry in LEVELS_FILE.values())
    extra = {**LEVELS_FILE, "client-protocol.ping-pong.00000000": {"server": "must", "why": "x"}}
    [unknown] = levels.levels_problems(extra, INDEX, "levels.json")
    assert unknown.field == "statements.client-protocol.ping-pong.00000000"
    assert unknown.message == "no such statement in requirements.json"
    fewer = {sid: entry for sid, entry in LEVELS_FILE.items() if sid != SERVER_PINGS}
    [missing] = levels.levels_problems(fewer, INDEX, "levels.json")
    assert missing.message == f"no entry for statement {SERVER_PINGS!r} of requirements.json"
    wrong = {**LEVELS_FILE, SERVER_PINGS: {"server": "required", "why": "x"}}
    [level] = levels.levels_problems(wrong, INDEX, "levels.json")
    assert level.field == f"statements.{SERVER_PINGS}.server"


def test_vectors_check_refuses_a_case_above_its_statements(tmp_path: Path) -> None:
    good = {**GOOD_CASE, "id": "t.server-pings", "requirements": [SERVER_PINGS]}
    client = {
        **good,
        "id": "t.client-told",
        "roles": ["reference", "client"],
        "input": {"direction": "server", "bytes": "PING\r\n"},
    }
    path = _file(tmp_path, "cases.json", [good, client])
    result = _check(path)
    assert result.returncode == 1, result.stdout
    fails = [line for line in result.stdout.splitlines() if line.startswith("FAIL")]
    assert fails == [
        f"FAIL {path}: case t.client-told: field level: must for client, but its statements "
        f"give client at most info: {SERVER_PINGS}"
    ]
    assert "2 cases in 1 groups: 1 passed, 1 failed, 0 file problems" in result.stdout


def test_vectors_check_refuses_a_levels_file_out_of_step_with_the_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stale = {sid: entry for sid, entry in LEVELS_FILE.items() if sid != CLIENT_SHOULD}
    monkeypatch.setattr(levels, "bundled_levels", lambda: stale)
    path = _file(tmp_path, "cases.json", [GOOD_CASE])
    assert cli.main(["vectors", "check", "--spec", str(tmp_path / "none"), str(path)]) == 1
    out = capsys.readouterr().out
    assert f"field statements: no entry for statement {CLIENT_SHOULD!r}" in out
    assert "1 cases in 1 groups: 1 passed, 0 failed, 1 file problems" in out


def test_aliases_carry_a_renamed_case_and_may_not_name_another(tmp_path: Path) -> None:
    renamed = {**GOOD_CASE, "id": "t.ping-renamed", "aliases": ["t.ping-old"]}
    taken = {**GOOD_CASE, "id": "t.other", "aliases": ["t.ping-renamed", "t.ping-old"]}
    loaded = vectors.load_all([_file(tmp_path, "a.json", [renamed, taken])])
    assert [(p.case, p.field, p.message.split(" (in ")[0]) for p in loaded.problems] == [
        ("t.other", "aliases[0]", "'t.ping-renamed' is the id of case t.ping-renamed"),
        ("t.other", "aliases[1]", "'t.ping-old' is an alias of case t.ping-renamed"),
    ]
    alone = vectors.load_all([_file(tmp_path, "b.json", [renamed])])
    assert alone.problems == [] and alone.cases[0].data["aliases"] == ["t.ping-old"]
    bad = vectors.load_all([_file(tmp_path, "c.json", [{**renamed, "aliases": ["Not An Id"]}])])
    assert [(p.field) for p in bad.problems] == ["aliases[0]"]


# --- the rule over every combination of levels ---------------------------------------------------

ROLE_SETS = [["reference"], ["client"], ["server"], ["reference", "client"], ["server", "client"]]
ENTRIES = st.fixed_dictionaries(
    {}, optional={role: st.sampled_from(LEVELS) for role in levels.ROLES}
).map(lambda entry: {**entry, "why": "generated"})


@given(
    entries=st.lists(ENTRIES, max_size=3),
    level=st.sampled_from(LEVELS),
    roles=st.sampled_from(ROLE_SETS),
)
def test_a_case_is_accepted_iff_no_stricter_than_its_citations_give_each_role(
    entries: list[dict[str, str]], level: str, roles: list[str]
) -> None:
    cited = [f"x.y.{i:08x}" for i in range(len(entries))]
    table = dict(zip(cited, entries, strict=True))
    case = vectors.Case("t.json", "t", {**GOOD_CASE, "level": level, "roles": roles})
    case.data["requirements"] = cited

    def supported(role: str | None) -> bool:
        return any(
            level_rank(entry.get(r, "info")) <= level_rank(level)
            for entry in entries
            for r in ((role,) if role else levels.ROLES)
        )

    judged = [role for role in roles if role != "reference"] or [None]
    accepted = level not in levels.JUDGED or all(supported(role) for role in judged)
    assert (levels.case_problems(case, [], table) == []) == accepted


# --- proposals from the words ------------------------------------------------------------------


def _proposed(sid: str) -> dict[str, str]:
    return levels.propose(STATEMENTS[sid]).levels


def test_propose_reads_modal_words_for_the_role_they_are_about() -> None:
    # "If the client fails to respond ..., the server will terminate its connection."
    assert _proposed("client-protocol.ping-pong.09c1d346") == {"server": "must"}
    # "Clients should set this to true only for server supporting this feature ..."
    assert _proposed("client-protocol.connect.3f464c3a") == {"client": "should"}
    # "... the client may send a CONNECT message to the NATS server ..."
    assert _proposed("client-protocol.connect.6e120e67") == {"client": "may"}
    # "The valid options are as follows:": no modal word, no role
    assert _proposed("client-protocol.connect.ec280107") == {}


def test_propose_binds_the_sender_of_syntax_fields_and_errors() -> None:
    assert _proposed(PING_SYNTAX) == {"server": "must", "client": "must"}
    assert _proposed("client-protocol.info.48c3ee7e") == {"server": "must"}  # • server_id: ...
    assert _proposed("client-protocol.pub.248abe8a") == {"client": "must"}  # PUB <subject> ...
    assert _proposed("client-protocol.ok-err.430dc837") == {"server": "must"}  # 'Parser Error'
    row = "streaming-fields.nats-streaming-wire-messages-field-numbers-and-types.056a56c3"
    assert STATEMENTS[row]["words"].startswith("| MsgProto |")
    assert _proposed(row) == {"server": "must"}


def test_the_file_is_reviewed_not_the_proposal() -> None:
    # "The field-name must be composed of printable ASCII characters": the proposer sees a
    # must about no role; ADR-4 describes headers "from the perspective of clients".
    field_name = "adr-4-headers.document.bf2afe66"
    assert _proposed(field_name) == {"server": "must", "client": "must"}
    assert "server" not in LEVELS_FILE[field_name]
    assert LEVELS_FILE[field_name]["client"] == "must"


def test_the_bundled_levels_file_is_formatted_one_entry_a_line() -> None:
    text = levels.LEVELS_PATH.read_text(encoding="utf-8")
    assert json.loads(text)["format"] == levels.FORMAT
    assert text.count("\n") == len(LEVELS_FILE) + 5


# Fails until the re-levelled vectors (branches relevel-*) are merged: they are what it checks.
def test_bundled_cases_keep_the_level_rule() -> None:
    cases = vectors.load_all([vectors.BUNDLED_DIR]).cases
    refused = [str(p) for case in cases for p in levels.case_problems(case, INDEX, LEVELS_FILE)]
    assert refused == [], f"{len(refused)} refused, e.g. {refused[:3]}"
