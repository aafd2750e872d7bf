"""Client scripts (vector kind ``client.script``) against a client library, through its driver
and the fake server.

This module only executes: it starts the fake server a script describes, connects the library to
it, runs each step (driver calls, bytes pushed, waits) and hands what came back to
``conformance.client_script``, which judges. One row per case, with the case's id, level and
source, and the fake server's transcript when it did not pass.

A script may declare up to 10 s for each of its steps and have as many steps as it likes, so a
case has an overall deadline (``driver_session.CASE_SECONDS``, from ``Session.begin_case``): every
wait of a step is cut at it, and a case that reaches it ends there with an ``error`` row that says
how far it got (``Overrun``), never with a judgement on a window it was not given.

The scripts run over each transport of the run (the fake server serves it, the library is asked
for it in its connect), a row each: the case's id over plain TCP, ``<case id>@<transport>`` over
another; a transport the driver lacks skips every script without asking.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from ...conformance import client_script, protocol, vectors
from ...conformance.client_script import QUIET, WITHIN, Step
from ...conformance.judge import steady
from ...conformance.transports import DEFAULT_TRANSPORT, row_id
from ...conformance.vector_values import Mismatch, decode_bytes, excerpt
from ...conformance.verdicts import CONFORMANCE, observation
from ..results import CaseRef, Checked, Found
from .client_targets import ClientTarget
from .driver import DriverError
from .driver_session import (
    TRANSCRIPT_LINES,
    DriverVerdict,
    Overrun,
    Session,
    Verdict,
    connected,
)
from .fake_server import (
    FakeConnection,
    FakeServer,
    answer_requests,
    info_op,
)
from .registry import ClientError

KIND = "client.script"
POLL = 0.01  # seconds between looks at what the client sent
SETTABLE = frozenset({"answer_pings", "pong_delay"})  # connection settings a `set` step changes


def script_cases(cases: Iterable[vectors.Case], transport: str | None = None) -> list[vectors.Case]:
    """The client scripts among ``cases``; with ``transport``, those that run over it
    (``client_script.runs_over``: a case of the transports themselves runs over its own)."""
    return [
        c for c in cases
        if c.kind == KIND and "client" in c.roles
        and (transport is None or client_script.runs_over(c.data["input"], transport))
    ]  # fmt: skip


def run_scripts(
    client: ClientTarget, cases: list[vectors.Case], transport: str = DEFAULT_TRANSPORT
) -> Iterator[Checked]:
    """Every script case that runs over ``transport`` on one library (one driver, restarted when
    it dies), a row each."""
    cases = script_cases(cases, transport)
    if not cases:
        return
    lacking = client.lacks_transport(transport)
    if lacking is not None:
        for case in cases:
            yield Checked(_ref(case, transport), Found("skip", lacking, 0.0))
        return
    with FakeServer(transport=transport) as spare, Session(client, transport) as s:
        builtins = {"spare_address": f"127.0.0.1:{spare.port}"}
        for case in cases:
            yield run_script(client, s, case, builtins)


def run_script(
    client: ClientTarget, s: Session, case: vectors.Case, builtins: dict[str, str]
) -> Checked:
    """One script over the session's transport: its row."""
    started = time.monotonic()
    s.begin_case()
    script = case.data["input"]
    lacking = next(filter(None, (client.lacks(n) for n in script.get("needs", []))), None)
    category = CONFORMANCE
    notes: list[str] = []  # what happened, step by step: the row's observation
    end = ""  # how it ended, for the observation, where not in the message's words
    if lacking is not None:
        outcome, message = "skip", lacking
    else:
        try:
            outcome, message = "pass", _execute(s, script, dict(builtins), notes)
        except Verdict as verdict:
            outcome, message, category = verdict.outcome, verdict.message, verdict.category
            end = verdict.ended if isinstance(verdict, _Unconnected) else ""
        except Mismatch as exc:  # the script itself is wrong: the vector check says so too
            outcome, message = "error", f"script field {exc.field}: {exc}"
        except DriverError as exc:  # robustness when the library died on what the server sent
            verdict = Verdict.of_driver(exc, case.id)
            outcome, message, category = verdict.outcome, verdict.message, verdict.category
        except ClientError as exc:
            outcome, message = "error", f"driver: {exc}"
        if (late := s.crashed()) is not None:  # the driver died during the case, unnoticed
            verdict = Verdict.of_driver(late, case.id)
            outcome, message, category = verdict.outcome, verdict.message, verdict.category
    ended = [f"ended: {end or message}"] if outcome == "fail" else []
    shown = ""
    if outcome != "pass":
        shown = "\n".join(s.transcript.splitlines()[-TRANSCRIPT_LINES:])
    # What happened step by step, and how the script ended where a step ended it.
    steps = observation([steady(note) for note in [*notes, *ended]])
    ms = round((time.monotonic() - started) * 1000, 3)
    found = Found(outcome, message, ms, shown, steps, category)
    return Checked(_ref(case, s.transport), found)


def _ref(case: vectors.Case, transport: str) -> CaseRef:
    """A script's row over ``transport``; its group the case id's first two segments, as these
    rows always had (CaseRef's default), whatever the transport."""
    ref = CaseRef(case.id, case.level, case.source, case.data["description"])
    return replace(ref, case_id=row_id(case.id, transport))


def _fail(message: str) -> Verdict:
    return Verdict("fail", message)


class _Unconnected(Verdict):
    """A library whose refused connect fails the case (``must_connect``, or what it sent first):
    the row's message has the library's words, its observation ends with ``ended``."""

    def __init__(self, message: str, ended: str) -> None:
        super().__init__("fail", message)
        self.ended = ended


def _error_type(message: str) -> str:
    """The error type in ``connected``'s message on a refused connect (``...fake server:
    <type>: <the library's words>``)."""
    return message.rpartition("fake server: ")[2].partition(":")[0]


def _execute(
    s: Session, script: dict[str, Any], variables: dict[str, str], notes: list[str]
) -> str:
    """Run the script's steps, noting what happens in ``notes``; the pass message, or a
    Verdict."""
    server = client_script.substitute(script.get("server", {}), variables, "input.server")
    reactions = [
        answer_requests(
            decode_bytes(r["answer_requests"]["headers"], "input.server.reactions"),
            decode_bytes(r["answer_requests"].get("payload", ""), "input.server.reactions"),
        )
        for r in server.get("reactions", [])
    ]
    options = client_script.substitute(script.get("connect", {}), variables, "input.connect")
    # A case of the transports themselves records what the fake server's handshakes saw, first
    # (they are all seen once the fake server is closed).
    seen: list[str] = []
    entered = False
    try:
        with connected(
            s,
            options=options,
            info=server.get("info"),
            info_size=server.get("info_size", 0),
            reactions=reactions,
            serves=server.get("transport"),
            allow_non_tls=server.get("allow_non_tls", False),
            report=seen.append if "transport" in script else None,
        ) as (fake, conn):
            entered = True
            run = _Run(s, conn, fake.info, variables, notes=notes)
            for step in client_script.steps(script):
                run.do(step)
            passed = "; ".join(run.notes[-4:]) or "the script ran"
    except Verdict as verdict:
        # Connecting is what some scripts judge (an INFO the library must take, what it sends
        # first); what the driver answered about itself is not the library's failure to connect.
        # The fake server is closed by now: ``seen`` holds all it saw.
        connecting = not entered and not isinstance(verdict, (DriverVerdict, Overrun))
        if not connecting or verdict.outcome != "error":
            raise
        # A case of the transports themselves records the kind of error only: the library's
        # words change from run to run (a reset or a close, a line of its TLS library's source).
        how = verdict.message
        if "transport" in script:
            how = f"did not connect ({_error_type(verdict.message)})"
        if (problem := _opening_problem(script, seen)) is not None:
            raise _Unconnected(f"{problem}; {verdict.message}", f"{problem}; {how}") from None
        if script.get("must_connect", False):
            raise _Unconnected("; ".join([verdict.message, *seen]), how) from None
        if "opening" not in script:
            raise
        # What the client sent first is the case, and it held: not connecting is allowed.
        notes.append(how)
        return verdict.message
    finally:
        notes[:0] = seen
    if (problem := _opening_problem(script, seen)) is not None:
        raise _fail(problem)
    return passed


def _opening_problem(script: dict[str, Any], seen: list[str]) -> str | None:
    """What is wrong with the client's first bytes, where the script says what they must be."""
    if "opening" not in script:
        return None
    return client_script.opening_problem(script["opening"], seen)


@dataclass
class _Run:
    """One script's state: the driver session, the connection, the variables, and where in the
    client's operations the next ``sent`` looks."""

    s: Session
    conn: FakeConnection
    info: dict[str, Any]  # the INFO the fake server sent
    variables: dict[str, str]
    notes: list[str] = field(default_factory=list)
    mark: int = 0  # the client's operation count when the latest action began
    cursor: int = 0  # after the operation the latest `sent` found

    def do(self, step: Step) -> None:
        """Run one step; past the case's deadline (before it, or after a wait it cut), an error
        (Overrun) instead of what the step would have judged."""
        self.s.on_time(step.path)
        data = client_script.substitute(
            {k: v for k, v in step.data.items() if k != "save"}, self.variables, step.path
        )
        try:
            getattr(self, f"_{step.action}")(step, data)
        except Verdict:
            self.s.on_time(step.path)
            raise
        self.s.on_time(step.path)

    # --- actions -------------------------------------------------------------------------------

    def _call(self, step: Step, data: dict[str, Any]) -> None:
        cmd, args = data["call"], dict(data.get("args", {}))
        if "payload" in args:
            payload = decode_bytes(args.pop("payload"), f"{step.path}.args.payload")
            args["payload_b64"] = base64.b64encode(payload).decode("ascii")
        self.mark = self.conn.count()
        reply = self.s.call(cmd, **args)  # unsupported: a skip
        said = "ok" if reply.ok else f"{reply.error_type}: {reply.error_message}"
        problem = client_script.answer_problem(data.get("answer", "ok"), reply.ok, reply.error_type)
        if problem is not None:
            raise _fail(f"{cmd}: {problem} ({excerpt(said, 200)})")
        self.variables |= client_script.saved_values(step.data, reply.result if reply.ok else {})
        self.notes.append(f"{cmd}: {excerpt(said, 200)}")

    def _push(self, step: Step, data: dict[str, Any]) -> None:
        pushed = decode_bytes(data["push"], f"{step.path}.push")
        plans = client_script.split_plans(len(pushed), data.get("split"), f"{step.path}.split")
        failed = []
        for plan in plans:
            self.s.on_time(step.path)
            self.mark = self.conn.count()
            self.conn.send(pushed, split_at=plan, pause=data.get("pause", 0.005))
            if "event" in data:
                problem = self._await(data["event"], data.get("within", WITHIN))
                if problem is not None:
                    failed.append(f"cut at {plan[:3]}: {problem}" if plan else problem)
                    if self.conn.closed_by_client:
                        break
        if failed:
            raise _fail(f"{len(failed)} of {len(plans)} pushes: " + "; ".join(failed[:3]))
        self.notes.append(f"pushed {len(pushed)} bytes in {len(plans)} send(s)")

    def _set(self, step: Step, data: dict[str, Any]) -> None:
        for name, value in data["set"].items():
            if name not in SETTABLE:
                raise Mismatch(f"{step.path}.set", f"{name!r} is not a connection setting")
            setattr(self.conn, name, value)

    def _push_info(self, step: Step, data: dict[str, Any]) -> None:
        line = info_op({**self.info, **data["push_info"]})
        name = data.get("name", "INFO").encode()
        self.mark = self.conn.count()
        self.conn.send(name + line[len(b"INFO") :])
        self.notes.append(f"pushed {name.decode()} with {sorted(data['push_info'])}")

    def _close(self, step: Step, data: dict[str, Any]) -> None:
        self.conn.close()

    # --- what the client sends -----------------------------------------------------------------

    def _ops(self) -> list[dict[str, Any]]:
        return [protocol.event_fields(e) for e in self.conn.events()]

    def _find(self, pattern: dict[str, Any], start: int, within: float) -> int | None:
        deadline = time.monotonic() + self.s.left(within)
        while True:
            found = client_script.select_sent(pattern, self._ops(), start)
            if found is not None or time.monotonic() >= deadline or self._gone():
                return found
            time.sleep(POLL)

    def _gone(self) -> bool:
        return self.conn.closed_by_client or self.conn.parse_error is not None

    def _sent(self, step: Step, data: dict[str, Any]) -> None:
        start = 0 if data.get("from_start") else max(self.mark, self.cursor)
        otherwise = data.get("otherwise", "fail")
        for j, pattern in enumerate(data["sent"]):
            found = self._find(pattern, start, data.get("within", WITHIN))
            if found is None:
                why = self.conn.parse_error or "none came"
                raise Verdict(otherwise, f"no {_wanted(pattern)} from the client ({why})")
            op = self._ops()[found]
            path = f"{step.path}.sent[{j}]"
            problems = client_script.op_problems(pattern, op, path)
            if problems:
                raise Verdict(otherwise, f"sent {excerpt(op, 300)}: " + "; ".join(problems))
            self.variables |= client_script.saved_values(pattern, op)
            self.notes.append(f"sent {excerpt(op, 300)}")
            start = self.cursor = found + 1

    def _not_sent(self, step: Step, data: dict[str, Any]) -> None:
        found = self._find(data["not_sent"], self.mark, data.get("for", QUIET))
        if found is not None:
            raise _fail(f"sent {excerpt(self._ops()[found], 300)}")
        self.notes.append(f"no {_wanted(data['not_sent'])} sent")

    def _sent_bytes(self, step: Step, data: dict[str, Any]) -> None:
        want = decode_bytes(data["sent_bytes"], f"{step.path}.sent_bytes")
        problem = client_script.bytes_problem(want, self.conn.received_bytes())
        if problem is not None:
            raise _fail(problem)
        self.notes.append(f"sent exactly {want!r}")

    def _client_closes(self, step: Step, data: dict[str, Any]) -> None:
        within = data.get("within", WITHIN)
        if not self.conn.wait_closed(timeout=self.s.left(within)):
            raise _fail(f"the connection is still open {within:g} s later")
        self.notes.append("the library closed the connection")

    def _open(self, step: Step, data: dict[str, Any]) -> None:
        if self.conn.closed_by_client:
            raise _fail("the library closed the connection")

    def _distinct(self, step: Step, data: dict[str, Any]) -> None:
        values = [self.variables[name] for name in step.data["distinct"]]
        if len(set(values)) != len(values):
            raise _fail(f"the same value twice: {values}")
        self.notes.append(f"distinct: {values}")

    # --- what the library reports ---------------------------------------------------------------

    def _await(self, pattern: dict[str, Any], within: float) -> str | None:
        """Wait for the event a pattern asks about and judge it; a problem, or None."""
        stop = (lambda e: e.get("event") == "closed") if pattern["event"] != "closed" else None
        event = self.s.wait_event(
            lambda e: client_script.event_selects(pattern, e),
            timeout=self.s.left(within),
            stop=stop or (lambda e: False),
        )
        if event is None:
            others = [e for e in self.s.seen() if e.get("event") != "message"]
            return f"no {_wanted(pattern)} within {within:g} s; events {excerpt(others, 300)}"
        problems = client_script.event_problems(pattern, event)
        return "; ".join(problems) or None

    def _event(self, step: Step, data: dict[str, Any]) -> None:
        problem = self._await(data["event"], data.get("within", WITHIN))
        if problem is not None:
            raise _fail(problem)
        self.notes.append(f"{data['event']['event']} reported")

    def _no_event(self, step: Step, data: dict[str, Any]) -> None:
        seen = self.s.seen(timeout=self.s.left(data.get("for", QUIET)))
        bad = [e for e in seen if client_script.event_selects(data["no_event"], e)]
        if bad:
            raise _fail(f"reported {excerpt(bad, 300)}")

    def _events(self, step: Step, data: dict[str, Any]) -> None:
        pattern, window = data["events"], data.get("for", QUIET)
        got = []
        while (e := self.s.wait_event(
            lambda e: client_script.event_selects(pattern, e), timeout=self.s.left(window)
        )) is not None:  # fmt: skip
            got.append(base64.b64decode(e.get("payload_b64") or ""))
        if len(got) != data["count"]:
            raise _fail(f"{len(got)} {pattern['event']} events, expected {data['count']}: {got}")
        self.notes.append(f"{len(got)} {pattern['event']} events")


def _wanted(pattern: dict[str, Any]) -> str:
    what = pattern.get("op") or pattern.get("event")
    return f"{what} {pattern['subject']}" if "subject" in pattern else str(what)
