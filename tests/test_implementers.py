"""IMPLEMENTERS.md holds: its example workflow runs, and every option it names exists.

The workflow (docs/examples/client-ci.yml) is read with a small parser for the YAML it uses
(PyYAML is not a dependency). Its `run:` steps are executed as GitHub would run them (bash, in
the workspace, with the workflow's environment), with GITHUB_WORKSPACE a temporary checkout of
nats-py. Steps that are GitHub actions (`uses:`) are skipped, each with what stands in for it.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from source_tree import suite_source

from nats_conformance.conformance.transports import TRANSPORTS, transport_of
from nats_conformance.conformance.vectors import bundled_cases
from nats_conformance.harness.clients.client_vectors import planned_rows

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "IMPLEMENTERS.md"
WORKFLOW = ROOT / "docs" / "examples" / "client-ci.yml"
SUITE = Path(sys.executable).parent / "nats-conformance"
# Four headers.parse cases nats-py 2.16.0 fails (a repeated header keeps one value): the
# baseline the dispatch run starts is not empty, so the pull-request run shows it gating.
CASES = "headers.parse.doc.*"

# --- a parser for the YAML subset of the workflow ------------------------------------------------


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _next(lines: list[str], i: int) -> int:
    while i < len(lines) and (not lines[i].strip() or lines[i].lstrip().startswith("#")):
        i += 1
    return i


def _scalar(text: str) -> str:
    text = re.sub(r"\s+#.*$", "", text) if not text.startswith(('"', "'")) else text
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    return text


def _node(lines: list[str], i: int, parent: int) -> tuple[object, int]:
    i = _next(lines, i)
    if i >= len(lines) or _indent(lines[i]) <= parent:
        return None, i
    indent = _indent(lines[i])
    if not lines[i].lstrip().startswith("- "):
        return _mapping(lines, i, indent)
    items = []
    while i < len(lines) and _indent(lines[i]) == indent and lines[i].lstrip().startswith("- "):
        lines[i] = " " * (indent + 2) + lines[i].lstrip()[2:]  # "- k: v" opens a mapping
        item, i = _mapping(lines, i, indent + 2)
        items.append(item)
        i = _next(lines, i)
    return items, i


def _mapping(lines: list[str], i: int, indent: int) -> tuple[dict, int]:
    result: dict = {}
    while True:
        i = _next(lines, i)
        if i >= len(lines) or _indent(lines[i]) != indent or lines[i].lstrip().startswith("- "):
            return result, i
        key, colon, value = lines[i].strip().partition(":")
        assert colon, f"line {i + 1}: not a mapping entry: {lines[i]!r}"
        value = _scalar(value)
        i += 1
        if value == "|":
            block = []
            while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > indent):
                block.append(lines[i])
                i += 1
            margin = min(_indent(line) for line in block if line.strip())
            result[key] = "".join(line[margin:] + "\n" for line in block).rstrip("\n") + "\n"
        elif value:
            result[key] = value
        else:
            result[key], i = _node(lines, i, indent)


def parse_workflow(text: str) -> dict:
    lines = text.splitlines()
    node, end = _node(lines, 0, -1)
    assert isinstance(node, dict) and _next(lines, end) == len(lines), f"line {end + 1} unread"
    return node


# --- running the workflow ------------------------------------------------------------------------

# GitHub's `if:` conditions the workflow uses: (event, an earlier step failed) -> run the step.
CONDITIONS = {
    None: lambda event, failed: not failed,
    "github.event_name == 'workflow_dispatch'": lambda e, f: not f and e == "workflow_dispatch",
    "github.event_name == 'pull_request'": lambda e, f: not f and e == "pull_request",
    "always()": lambda e, f: True,
    "always() && github.event_name == 'pull_request'": lambda e, f: e == "pull_request",
}
# What stands in for each action the workflow uses.
ACTIONS = {
    "actions/checkout": "the test's nats-py checkout is GITHUB_WORKSPACE",
    "actions/setup-python": "the test's virtualenv is first on PATH",
    "actions/upload-artifact": "the test reads the files where they were written",
    "marocchino/sticky-pull-request-comment": "the test reads the Markdown summary",
}


def expand(value: str, contexts: dict[str, str]) -> str:
    def one(match: re.Match) -> str:
        assert match[1] in contexts, f"an expression the test does not know: {match[0]}"
        return contexts[match[1]]

    return re.sub(r"\$\{\{\s*([\w.]+)\s*\}\}", one, value)


def run_workflow(
    workflow: dict, event: str, environment: dict[str, str], overrides: dict[str, str]
) -> list[tuple[str, int | str]]:
    """Run the workflow's one job for `event`: (step name, exit code or why it was skipped)."""
    [job] = workflow["jobs"].values()
    env = dict(environment)
    for scope in (workflow.get("env") or {}, job.get("env") or {}):
        for key, value in scope.items():
            env[key] = overrides.get(key) or expand(value, {"runner.temp": env["RUNNER_TEMP"]})
    env["GITHUB_EVENT_NAME"] = event
    outcomes: list[tuple[str, int | str]] = []
    failed = False
    for step in job["steps"]:
        condition = step.get("if")
        assert condition in CONDITIONS, f"a condition the test does not know: {condition}"
        if not CONDITIONS[condition](event, failed):
            continue
        if "uses" in step:
            action = step["uses"].partition("@")[0]
            assert action in ACTIONS, f"an action the test does not know: {action}"
            outcomes.append((step["name"], f"skipped, needs GitHub: {ACTIONS[action]}"))
            continue
        assert "${{" not in step["run"], "run: blocks use shell variables only"
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
            cwd=env["GITHUB_WORKSPACE"],
            env={**env, **(step.get("env") or {})},
            timeout=300,
        )
        outcomes.append((step["name"], done.returncode))
        failed = failed or done.returncode != 0
    return outcomes


def nats_py_checkout(directory: Path) -> Path:
    """A checkout of nats-py: the installed package's sources and a minimal pyproject."""
    import nats

    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(Path(nats.__file__).parent, directory / "nats", ignore=ignore)
    from importlib.metadata import version

    (directory / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'
        f'[project]\nname = "nats-py"\nversion = "{version("nats-py")}"\n'
        '[tool.setuptools.packages.find]\ninclude = ["nats*"]\n'
    )
    return directory


def test_the_client_workflow_starts_a_baseline_then_gates_a_pull_request(tmp_path: Path) -> None:
    workflow = parse_workflow(WORKFLOW.read_text())
    assert set(workflow["on"]) == {"pull_request", "workflow_dispatch"}
    workspace = nats_py_checkout(tmp_path / "work" / "nats.py")
    runner_temp = tmp_path / "runner"
    runner_temp.mkdir()
    python = tmp_path / "python"  # actions/setup-python's stand-in
    subprocess.run([sys.executable, "-m", "venv", str(python)], check=True)
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"} and not key.startswith("NATS_")
    }
    environment.update(
        PATH=f"{python / 'bin'}{os.pathsep}{environment['PATH']}",
        GITHUB_WORKSPACE=str(workspace),
        RUNNER_TEMP=str(runner_temp),
        GITHUB_STEP_SUMMARY=str(tmp_path / "step-summary.md"),
        NATS_CONFORMANCE_STATE_DIR=str(tmp_path / "state"),  # built drivers, pid files
    )
    # The suite from this working tree instead of a tag on GitHub; a few cases instead of all.
    source = suite_source(tmp_path / "nats-conformance")
    overrides = {"NATS_CONFORMANCE_SOURCE": source.as_uri(), "CASES": CASES}
    out = runner_temp / "nats-conformance"
    baseline = workspace / ".github" / "nats-conformance-baseline.json"

    # Run by hand: the suite starts the baseline (then committed: it is already in place).
    steps = run_workflow(workflow, "workflow_dispatch", environment, overrides)
    print("workflow_dispatch:", *steps, sep="\n  ")
    assert [outcome for _, outcome in steps if isinstance(outcome, int)] == [0, 0, 0, 0]
    assert "headers.parse.doc.adr4-multi-value@decode" in baseline.read_text()

    # A pull request: gated by the committed baseline, JUnit and summary written.
    shutil.rmtree(out)
    Path(environment["GITHUB_STEP_SUMMARY"]).unlink()
    steps = run_workflow(workflow, "pull_request", environment, overrides)
    print("pull_request:", *steps, sep="\n  ")
    ran = {name: outcome for name, outcome in steps if isinstance(outcome, int)}
    assert ran == {
        "Install the suite": 0,
        "Smoke test the library from this checkout": 0,
        "Run the suite": 0,
        "Add the summary to the job page": 0,
    }
    skipped = {name for name, outcome in steps if isinstance(outcome, str)}
    assert skipped == {
        "Check out the pull request",
        "Set up Python",
        "Upload the JUnit file and the results",
        "Post the summary on the pull request",
    }
    suites = ET.parse(out / "junit.xml").getroot()
    cases = suites.findall(".//testcase")
    # Every row of the cases over every transport (the hmsg rows travel, the decode rows not).
    picked = [case for case in bundled_cases() if fnmatch.fnmatchcase(case.id, CASES)]
    assert len(cases) == len(list(planned_rows(picked, TRANSPORTS)))
    assert all(case.get("name").startswith("headers.parse.") for case in cases)
    summary = (out / "summary.md").read_text()
    [row] = [line for line in summary.splitlines() if line.startswith("| client:nats-py")]
    # The summary counts the rows of must cases only (the cases' client halves the documents
    # leave vague are info): those the baseline lists are baselined, those over ws-deflate skip
    # (nats-py offers no permessage-deflate), every other one passes.
    level = {case.id: case.level for case in bundled_cases()}
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    must = {r["case_id"] for r in results if level[r["case_id"].split("@")[0]] == "must"}
    by_target = json.loads(baseline.read_text())["expected_failures"]
    [[listed]] = [list(versions.values()) for versions in by_target.values()]  # nats.py's checkout
    assert set(listed) < must and len(must) < len(cases)  # some must rows pass, some are info
    # must: pass, fail and error beyond the baseline, skip, baselined, flaky
    skipped = {r["case_id"] for r in results if r["outcome"] == "skip"} & must
    assert skipped == {row_id for row_id in must if row_id.endswith("@ws-deflate")}
    # A transport's row that fails as its tcp row does is baselined by the tcp row's entry.
    baselined = {rid for rid in must - skipped if transport_of(rid)[0] in listed}
    assert {transport_of(rid)[0] for rid in baselined} == set(listed)
    passed = len(must) - len(baselined) - len(skipped)
    assert row.endswith(f"| {passed} | 0 | 0 | {len(skipped)} | {len(baselined)} | 0 |")
    assert Path(environment["GITHUB_STEP_SUMMARY"]).read_text() == summary
    assert (out / "results.sarif").is_file() and (out / "results.jsonl").is_file()


def test_the_install_step_without_a_source_stops_and_says_what_to_set(tmp_path: Path) -> None:
    [job] = parse_workflow(WORKFLOW.read_text())["jobs"].values()
    [step] = [step for step in job["steps"] if step["name"] == "Install the suite"]
    done = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
        cwd=tmp_path, env={"PATH": os.environ["PATH"], "NATS_CONFORMANCE_SOURCE": ""},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    assert "::error::set the repository variable NATS_CONFORMANCE_SOURCE" in done.stdout


# --- every command and option the document shows exists ------------------------------------------


def help_text(*command: str) -> str:
    done = subprocess.run(
        [str(SUITE), *command, "--help"], capture_output=True, text=True, check=True
    )
    return done.stdout


def doc_commands(text: str) -> list[tuple[str, list[str]]]:
    """(subcommand, options) of every `nats-conformance SUB ...` line of the document's code."""
    commands = []
    for block in re.findall(r"```(?:sh|yaml)?\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            if match := re.search(r"\bnats-conformance ([a-z]+(?: check)?)\b(.*)", line):
                commands.append((match[1], re.findall(r"(?<![\w-])--[a-z][a-z-]*", match[2])))
    return commands


def test_every_command_and_option_the_document_shows_exists() -> None:
    text = DOC.read_text() + WORKFLOW.read_text()
    commands = doc_commands(text)
    assert {sub for sub, _ in commands} >= {"run", "smoke"}
    helps: dict[str, str] = {}
    for sub, options in commands:
        helps.setdefault(sub, help_text(*sub.split()))
        missing = [option for option in options if option not in helps[sub]]
        assert not missing, f"nats-conformance {sub} has no {missing}"
    # Options named in the prose: an option of `run` (or of the top-level command).
    named = set(re.findall(r"`(--[a-z][a-z-]*)", DOC.read_text()))
    known = help_text("run") + help_text()
    assert named and not [option for option in named if option not in known]
