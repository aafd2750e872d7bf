"""Stable ids: a renamed case keeps its former ids (``aliases``), a row that moved keeps its
former ids (``row_aliases``), and ``vectors.renames`` maps every former id to the current one;
``vectors check`` refuses a former id that names something current or that two claim."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from test_vectors import GOOD_CASE, _check, _file

from nats_conformance.conformance import vectors

ids = st.from_regex(r"\A[a-z0-9][a-z0-9._-]{0,20}\Z")
paths = st.from_regex(r"\A[a-z0-9][a-z0-9._-]{0,12}\Z")


def _case(case_id: str, **fields: object) -> vectors.Case:
    return vectors.Case("t.json", "t", {**GOOD_CASE, "id": case_id, **fields})


def _problems(tmp_path: Path, *cases: dict) -> list[tuple[str, str | None, str]]:
    loaded = vectors.load_all([_file(tmp_path, "a.json", list(cases))])
    return [(p.case or "", p.field, p.message.split(" (in ")[0]) for p in loaded.problems]


@given(old=ids, new=ids, other=ids, path=paths)
def test_a_former_case_id_and_each_of_its_rows_map_to_the_case_now(
    old: str, new: str, other: str, path: str
) -> None:
    renamed = vectors.renames([_case(new, aliases=[old])])
    assert renamed.current(old) == new
    assert renamed.current(f"{old}@{path}") == f"{new}@{path}"
    # The current ids, and any id the cases do not keep, stay as they are.
    assert renamed.current(new) == new and renamed.current(f"{new}@{path}") == f"{new}@{path}"
    if other != old:
        assert renamed.current(other) == other
        assert renamed.current(f"{other}@{path}") == f"{other}@{path}"


@given(case_id=ids, path=paths, former=ids, other_path=paths)
def test_a_former_row_id_maps_to_that_row_only(
    case_id: str, path: str, former: str, other_path: str
) -> None:
    renamed = vectors.renames([_case(case_id, row_aliases={path: [former]})])
    assert renamed.current(former) == f"{case_id}@{path}"
    if former != case_id:
        # A row alias is one row's: other rows of the former id are not carried over.
        assert renamed.current(f"{former}@{other_path}") == f"{former}@{other_path}"


def test_no_former_ids_no_renames() -> None:
    assert vectors.renames([_case("t.a")]) == vectors.Renames()


def test_row_aliases_load_and_carry_a_row_over(tmp_path: Path) -> None:
    moved = {**GOOD_CASE, "row_aliases": {"hpub": ["client.hpub.headers.ping", "t.old@encode"]}}
    loaded = vectors.load_all([_file(tmp_path, "a.json", [moved])])
    assert loaded.problems == []
    renamed = vectors.renames(loaded.cases)
    assert renamed.current("client.hpub.headers.ping") == "t.ping@hpub"
    assert renamed.current("t.old@encode") == "t.ping@hpub"
    assert renamed.current("t.old@decode") == "t.old@decode"


def test_a_row_alias_must_be_a_row_id_under_a_path_name(tmp_path: Path) -> None:
    bad_value = {**GOOD_CASE, "row_aliases": {"hpub": ["Not A Row"]}}
    bad_path = {**GOOD_CASE, "row_aliases": {"HPub!": ["t.old"]}}
    empty = {**GOOD_CASE, "row_aliases": {"hpub": []}}
    for case in (bad_value, bad_path, empty):
        [problem] = vectors.load_all([_file(tmp_path, "a.json", [case])]).problems
        assert problem.case == "t.ping" and problem.field.startswith("row_aliases"), problem


def test_a_former_id_may_not_name_a_current_case_or_row(tmp_path: Path) -> None:
    other = {**GOOD_CASE, "id": "t.other"}
    taking = {
        **GOOD_CASE,
        "aliases": ["t.other"],
        "row_aliases": {"hpub": ["t.other", "t.other@encode", "t.ping@encode"]},
    }
    assert _problems(tmp_path, other, taking) == [
        ("t.ping", "aliases[0]", "'t.other' is the id of case t.other"),
        ("t.ping", "row_aliases.hpub[0]", "'t.other' is the id of case t.other"),
        ("t.ping", "row_aliases.hpub[1]", "'t.other@encode' is a row of case t.other"),
        # Even a row of the case itself: another of its paths may be that row now.
        ("t.ping", "row_aliases.hpub[2]", "'t.ping@encode' is a row of case t.ping"),
    ]


def test_a_former_id_has_one_owner(tmp_path: Path) -> None:
    first = {**GOOD_CASE, "id": "t.a", "aliases": ["t.old"], "row_aliases": {"x": ["t.moved"]}}
    second = {
        **GOOD_CASE,
        "id": "t.b",
        "aliases": ["t.moved"],
        "row_aliases": {"x": ["t.old@y"], "y": ["t.moved"]},
    }
    assert _problems(tmp_path, first, second) == [
        ("t.b", "aliases[0]", "'t.moved' is claimed by row_aliases.x[0] of case t.a"),
        # An alias claims every row of the former id.
        ("t.b", "row_aliases.x[0]", "'t.old@y' is an alias of case t.a"),
        ("t.b", "row_aliases.y[0]", "'t.moved' is claimed by row_aliases.x[0] of case t.a"),
    ]


def test_an_alias_may_not_take_the_rows_another_case_carries(tmp_path: Path) -> None:
    rows = {**GOOD_CASE, "id": "t.a", "row_aliases": {"x": ["t.old@x"]}}
    case = {**GOOD_CASE, "id": "t.b", "aliases": ["t.old"]}
    assert _problems(tmp_path, rows, case) == [
        ("t.b", "aliases[0]", "'t.old' is claimed by row_aliases.x[0] of case t.a"),
    ]


def test_two_rows_of_one_case_may_not_claim_one_former_row(tmp_path: Path) -> None:
    twice = {**GOOD_CASE, "row_aliases": {"x": ["t.old"], "y": ["t.old"]}}
    assert _problems(tmp_path, twice) == [
        ("t.ping", "row_aliases.y[0]", "'t.old' is claimed by row_aliases.x[0] of case t.ping"),
    ]


def test_vectors_check_refuses_a_taken_former_id(tmp_path: Path) -> None:
    taking = {**GOOD_CASE, "row_aliases": {"hpub": ["t.ping"]}}
    result = _check(_file(tmp_path, "a.json", [taking]))
    assert result.returncode == 1
    assert "field row_aliases.hpub[0]: 't.ping' is the id of case t.ping" in result.stdout


def test_the_bundled_former_ids_hold_up() -> None:
    loaded = vectors.load_all([vectors.BUNDLED_DIR])
    assert vectors.alias_problems(loaded.cases) == []
    assert vectors.bundled_renames() == vectors.renames(loaded.cases)


# Few names, so that cases, aliases and row aliases collide often.
small_ids = st.sampled_from(["t.a", "t.b", "t.c", "t.d"])
former_rows = small_ids | st.builds("{}@{}".format, small_ids, st.sampled_from(["x", "y"]))
cases_with_formers = st.lists(
    st.fixed_dictionaries(
        {"id": small_ids},
        optional={
            "aliases": st.lists(small_ids, min_size=1, max_size=2, unique=True),
            "row_aliases": st.dictionaries(
                st.sampled_from(["x", "y"]),
                st.lists(former_rows, min_size=1, max_size=2, unique=True),
                max_size=2,
            ),
        },
    ),
    min_size=1,
    max_size=3,
    unique_by=lambda data: data["id"],
)


@given(cases_with_formers, st.sampled_from(["x", "y", "z"]))
def test_former_ids_that_pass_the_check_never_move_a_current_row(
    datas: list[dict], path: str
) -> None:
    """Whatever former ids the cases keep: when ``vectors check`` accepts them, every current
    case and row keeps its id, and every former id goes to the case (or row) that keeps it."""
    cases = [_case(data["id"], **data) for data in datas]
    if vectors.alias_problems(cases):
        return
    renamed = vectors.renames(cases)
    for case in cases:
        assert renamed.current(case.id) == case.id
        assert renamed.current(f"{case.id}@{path}") == f"{case.id}@{path}"
        for alias in case.data.get("aliases", []):
            assert renamed.current(f"{alias}@{path}") == f"{case.id}@{path}"
        for row, formers in case.data.get("row_aliases", {}).items():
            assert all(renamed.current(former) == f"{case.id}@{row}" for former in formers)
