"""ADR-6 names on a real server: ``name.validate`` cases asked through the JetStream API.

A server with JetStream (``SERVER_CONFIG``) is asked, over one raw connection per server, to
create what a case's production names; its acceptance or refusal is judged against the case's
``expect.valid``, never the other way round. What each production names, and how it is asked
(the subjects and fields are nats-server's JetStream API):

- ``stream-name``: ``$JS.API.STREAM.CREATE.<name>`` with ``{"name": <name>, "subjects": [...]}``
  (a subject of the case's own, so the name is not also asked to be a subject);
- ``consumer-name``: ``$JS.API.CONSUMER.CREATE.<stream>.<name>`` with ``config.name``;
- ``durable-name``: ``$JS.API.CONSUMER.DURABLE.CREATE.<stream>.<name>`` with
  ``config.durable_name``;
- ``kv-bucket-name``: a key-value bucket is the stream ``KV_<bucket>`` taking ``$KV.<bucket>.>``,
  created as a client library creates it (the server itself knows no buckets);
- ``os-bucket-name``: an object store is the stream ``OBJ_<bucket>`` taking ``$O.<bucket>.C.>``
  and ``$O.<bucket>.M.>``.

Consumers are made on a stream created for the case. Not asked: ``filename-safe`` (what those
names are made of; it names nothing by itself), ``account-name`` (accounts come from the server's
configuration, not from this API), ``kv-key-name`` and ``os-object-name`` (what a bucket holds,
not something the API creates), the subject and prefix productions, and the Windows variants (the
servers this harness launches run on Linux).

A name the request subject cannot carry as one token (empty, with a dot, whitespace, a wildcard
or control character: ``conformance.protocol.encode`` refuses the PUB, or the dot would make it
several tokens and so another API subject) is asked where the API has a form without it: a
consumer name goes in the body of ``$JS.API.CONSUMER.CREATE.<stream>``, which names the stream
only. Streams, buckets and durable consumers have no such form, and an empty name in a body means
"no name": those cases are ``skip`` rows saying the JetStream API cannot express the name, since
the server was never asked.

Every stream a case creates is deleted again (a consumer with its case's stream), so cases stay
independent. Each request waits at most its timeout and reads at most ``ANSWER_BUDGET`` bytes.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass
from typing import Any, Literal

from ...conformance import headers, protocol
from ...conformance.vectors import Case
from ...conformance.verdicts import observation
from ..runtime.transcripts import Transcript
from .specs import RunningServer
from .wire import Outcome, ServerRun, WireConnection

# Seconds a JetStream API request may take: creating a stream writes its store, which on a
# loaded machine can take longer than a wire exchange's wait. An answer ends the wait, so the
# passing path costs nothing more.
API_WAIT = 5.0

KIND = "name.validate"
SERVER_CONFIG: dict[str, Any] = {"jetstream": True}
API = "$JS.API"
# Flood guard per request: a JetStream answer is a few kilobytes.
ANSWER_BUDGET = 1 << 18
NO_RESPONDERS = 503
# What the harness sends in its CONNECT: headers and no_responders, so a server without the
# JetStream API answers a request at once (status 503) instead of leaving it to time out.
CONNECT_OPTIONS: dict[str, Any] = {
    "verbose": False, "pedantic": False, "headers": True, "no_responders": True, "protocol": 1,
    "name": "nats-conformance jetstream-names",
}  # fmt: skip
SHOWN = 300  # characters of an unexpected answer a row message quotes


@dataclass(frozen=True)
class Plan:
    """How one name is asked: the create request and what its answer must name."""

    thing: str  # what is created, for messages: "stream 'X'", "key-value bucket 'b'" ...
    subject: str
    body: dict[str, Any]
    created: str  # the name the answer carries when the server creates it
    answer_kind: Literal["stream", "consumer"]  # where that name is in the answer
    stream: str | None = None  # the stream made for the case (consumers), deleted afterwards
    form: str = ""  # how the name was put in the request, when not in the subject


def _subject_problem(subject: str, name: str) -> str | None:
    """Why ``name`` cannot be the last token of ``subject``; None when it can."""
    if "." in name:
        return f"its dot would make it several tokens of {subject!r} (another API subject)"
    encoded = protocol.encode(protocol.Pub(subject, None, b""))
    if isinstance(encoded, protocol.EncodeError):
        return f"the request subject {subject!r} cannot be sent ({encoded.detail})"
    return None


def _stream_plan(thing: str, stream: str, subjects: list[str], extra: dict[str, Any]) -> Plan | str:
    subject = f"{API}.STREAM.CREATE.{stream}"
    problem = _subject_problem(subject, stream)
    if problem:
        return (
            f"the JetStream API cannot express {thing}: every stream request names the stream "
            f"{stream!r} in its subject, and {problem}"
        )
    body = {"name": stream, "subjects": subjects, **extra}
    return Plan(thing, subject, body, stream, "stream")


def plan_for(production: str, name: str, token: str, number: int) -> Plan | str:
    """The request that asks the server about ``name`` as a ``production``, or why none can.

    ``token`` and ``number`` make the case's own subjects and stream names unique."""
    own_subject = f"names.{token}.{number}"
    case_stream = f"NAMES_{token}_{number}"
    if production == "stream-name":
        return _stream_plan(f"stream {name!r}", name, [own_subject], {})
    if production == "kv-bucket-name":
        # The stream a key-value bucket is, as client libraries create it.
        extra = {"max_msgs_per_subject": 1, "discard": "new", "allow_rollup_hdrs": True,
                 "deny_delete": True, "allow_direct": True}  # fmt: skip
        return _stream_plan(f"key-value bucket {name!r}", f"KV_{name}", [f"$KV.{name}.>"], extra)
    if production == "os-bucket-name":
        subjects = [f"$O.{name}.C.>", f"$O.{name}.M.>"]
        extra = {"discard": "new", "allow_rollup_hdrs": True, "allow_direct": True}
        return _stream_plan(f"object store {name!r}", f"OBJ_{name}", subjects, extra)
    if production == "durable-name":
        subject = f"{API}.CONSUMER.DURABLE.CREATE.{case_stream}.{name}"
        problem = _subject_problem(subject, name)
        if problem:
            return (
                f"the JetStream API cannot express durable consumer {name!r}: the durable name "
                f"is in the request subject, and {problem}"
            )
        body = {"stream_name": case_stream, "config": {"durable_name": name}}
        return Plan(f"durable consumer {name!r}", subject, body, name, "consumer", case_stream)
    if production == "consumer-name":
        body = {"stream_name": case_stream, "config": {"name": name}}
        subject = f"{API}.CONSUMER.CREATE.{case_stream}.{name}"
        problem = _subject_problem(subject, name)
        if problem is None:
            return Plan(f"consumer {name!r}", subject, body, name, "consumer", case_stream)
        if not name:
            return (
                "the JetStream API cannot express an empty consumer name: the request subject "
                "cannot end in an empty token, and an empty name in the body means no name"
            )
        form = f"in the body of {API}.CONSUMER.CREATE.<stream> ({problem})"
        subject = f"{API}.CONSUMER.CREATE.{case_stream}"
        return Plan(f"consumer {name!r}", subject, body, name, "consumer", case_stream, form)
    return f"{production}: no JetStream API request creates what it names"


def not_asked(case: Case) -> str | None:
    """Why the server cannot be asked about ``case`` at all (then it is a skip); None if it can."""
    data = case.data["input"]
    if data.get("platform", "unix") != "unix":
        return "a Windows name: the servers this harness launches run on Linux"
    plan = plan_for(data["production"], data["name"], "t", 0)
    return plan if isinstance(plan, str) else None


@dataclass(frozen=True)
class Answer:
    """A JetStream API answer (the decoded JSON object), or why there is none."""

    body: dict[str, Any] | None
    problem: str = ""


def observed_answer(answer: Answer) -> dict[str, Any]:
    """What the server answered, as an observation records it: accepted, its error's code, code
    of the error and description, or why there is no answer."""
    if answer.body is None:
        return {"answer": None, "problem": answer.problem}
    error = answer.body.get("error")
    if error is None:
        return {"accepted": True}
    if not isinstance(error, dict):
        return {"error": error}
    return {"error": {key: error.get(key) for key in ("code", "err_code", "description")}}


def _error_text(error: Any) -> str:
    if not isinstance(error, dict):
        return repr(error)[:SHOWN]
    return f"{error.get('code')} {error.get('err_code')} {error.get('description')!r}"


def judge(
    production: str, expect_valid: bool, plan: Plan, body: dict[str, Any]
) -> tuple[Outcome, str]:
    """The verdict on the server's answer to ``plan``: accepting or refusing the name is right
    when ``expect_valid`` (the vector's answer) says so."""
    if "error" in body:
        detail = f"{plan.thing}: {_error_text(body['error'])}"
        if expect_valid:
            return "fail", f"refused a valid {production}: {detail}"
        return "pass", f"refused an invalid {production}: {detail}"
    where = body.get("config") if plan.answer_kind == "stream" else body
    created = where.get("name") if isinstance(where, dict) else None
    if created != plan.created:
        shown = json.dumps(body, ensure_ascii=False)[:SHOWN]
        return "fail", (
            f"the answer to creating {plan.thing} has no error but names {created!r}, "
            f"not {plan.created!r}: {shown}"
        )
    made = f"created {plan.answer_kind} {created!r}"
    if expect_valid:
        return "pass", f"accepted a valid {production}: {made}"
    return "fail", f"accepted an invalid {production}: {made} for {plan.thing}"


class SessionError(Exception):
    """The session could not be opened; carries the transcript of the attempt."""

    def __init__(self, message: str, transcript: Transcript | None) -> None:
        super().__init__(message)
        self.transcript = transcript


class NameSession:
    """One connection to one JetStream-enabled server, shared by every name case run on it."""

    def __init__(self, server: RunningServer, conn: WireConnection, token: str) -> None:
        self.server = server
        self._conn = conn
        self._token = token
        self._inbox = f"_INBOX.{token}"
        self._requests = 0
        self._cases = 0

    @classmethod
    def open(cls, server: RunningServer, *, timeout: float) -> NameSession:
        """Connect, read INFO, send CONNECT and SUB to the inbox, and wait for the PONG that proves
        them taken; SessionError says what went wrong."""
        try:
            conn = WireConnection.connect(server.host, server.port, timeout=timeout)
        except OSError as exc:
            raise SessionError(f"cannot connect to {server.url}: {exc}", None) from exc
        token = secrets.token_hex(4)
        try:
            first = conn.receive(1, timeout=timeout)
            if not first or not isinstance(first[0], protocol.Info):
                raise SessionError(f"no INFO from {server.url}: {conn.stopped}", conn.transcript)
            setup = [protocol.Connect(CONNECT_OPTIONS),
                     protocol.Sub(f"_INBOX.{token}.*", None, "1"), protocol.Ping()]  # fmt: skip
            conn.send(b"".join(_encoded(op) for op in setup), timeout=timeout)
            answered = conn.receive(1, timeout=timeout)
            if not any(isinstance(e, protocol.Pong) for e in answered):
                # An -ERR (authorization, say) shows its text; anything else its operation.
                shown = ", ".join(
                    f"-ERR {e.message}" if isinstance(e, protocol.Err) else type(e).__name__
                    for e in answered
                )
                shown = shown or conn.stopped
                raise SessionError(f"no PONG after CONNECT and SUB: {shown}", conn.transcript)
        except SessionError:
            conn.close()
            raise
        return cls(server, conn, token)

    @property
    def usable(self) -> bool:
        return not (self._conn.closed or self._conn.broken or self._conn.send_failed)

    def close(self) -> None:
        self._conn.close()

    def check(self, case: Case, *, timeout: float) -> ServerRun:
        """Ask the server about ``case``'s name; the row's transcript is this case's traffic."""
        started = time.monotonic()
        mark = len(self._conn.transcript.events)
        self._cases += 1
        data = case.data["input"]
        production, name = data["production"], data["name"]
        plan = plan_for(production, name, self._token, self._cases)
        if isinstance(plan, str):
            return ServerRun.of("skip", plan, 0.0)
        self._conn.note(f"case {case.id}: {plan.thing} ({production})")
        if plan.form:
            self._conn.note(f"the name is {plan.form}")
        outcome, message, cleanup, answer = self._ask(
            plan, production, case.data["expect"]["valid"], timeout
        )
        if cleanup:
            message += f"; {cleanup}"
        transcript = Transcript(self._conn.transcript.events[mark:])
        elapsed = (time.monotonic() - started) * 1000
        observed = "" if answer is None else observation(observed_answer(answer))
        return ServerRun.of(outcome, message, elapsed, transcript, observed=observed)

    def _ask(
        self, plan: Plan, production: str, expect_valid: bool, timeout: float
    ) -> tuple[Outcome, str, str, Answer | None]:
        """(outcome, message, what went wrong deleting the case's streams, the server's answer
        about the name: None when it was not asked)."""
        if plan.stream is not None:
            made = self.request(
                f"{API}.STREAM.CREATE.{plan.stream}",
                {"name": plan.stream, "subjects": [f"names.{plan.stream}"]},
                timeout,
            )
            if made.body is None or "error" in made.body:
                why = made.problem or _error_text(made.body and made.body.get("error"))
                message = f"cannot create the case's stream {plan.stream!r}: {why}"
                return "error", message, "", None
        answer = self.request(plan.subject, plan.body, timeout)
        if answer.body is None:
            outcome: Outcome = "error"
            message = f"no answer to creating {plan.thing}: {answer.problem}"
        else:
            outcome, message = judge(production, expect_valid, plan, answer.body)
        # The case's stream takes its consumers with it; a created stream goes on its own.
        doomed = plan.stream
        if doomed is None and answer.body is not None and "error" not in answer.body:
            doomed = plan.created
        return outcome, message, self._delete(doomed, timeout) if doomed else "", answer

    def _delete(self, stream: str, timeout: float) -> str:
        """Delete ``stream``; "" when done, otherwise why not (later cases may meet it)."""
        answer = self.request(f"{API}.STREAM.DELETE.{stream}", {}, timeout)
        if answer.body is not None and answer.body.get("success") is True:
            return ""
        why = answer.problem or _error_text(answer.body and answer.body.get("error"))
        return f"could not delete stream {stream!r} afterwards: {why}"

    def request(self, subject: str, body: dict[str, Any], timeout: float) -> Answer:
        """Send one API request with a reply subject of its own and read its answer, bounded by
        ``timeout`` and ``ANSWER_BUDGET``; other messages (late answers) are left aside."""
        self._requests += 1
        reply = f"{self._inbox}.{self._requests}"
        payload = json.dumps(body, ensure_ascii=False).encode("utf-8", "surrogatepass")
        encoded = protocol.encode(protocol.Pub(subject, reply, payload))
        if isinstance(encoded, protocol.EncodeError):
            return Answer(None, f"the request cannot be sent: {encoded.detail}")
        mark = len(self._conn.transcript.events)
        if not self._conn.send(encoded, timeout=timeout):
            return Answer(None, "the server did not take the request")
        deadline = time.monotonic() + timeout
        while True:
            received = sum(
                len(e.data) for e in self._conn.transcript.events[mark:] if e.direction == "recv"
            )
            if received > ANSWER_BUDGET:
                self._conn.note(f"stopped reading after {received} bytes (flood guard)")
                return Answer(None, f"no answer within {ANSWER_BUDGET} bytes")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return Answer(None, f"no answer within {timeout:g} s")
            for event in self._conn.receive(1, timeout=remaining):
                if isinstance(event, protocol.Msg | protocol.HMsg) and event.subject == reply:
                    return _answer(event)
                if isinstance(event, protocol.Err):
                    return Answer(None, f"the server sent -ERR {event.message}")
            if self._conn.closed or self._conn.broken:
                return Answer(None, self._conn.stopped)


def _encoded(op: protocol.Op) -> bytes:
    encoded = protocol.encode(op)
    assert not isinstance(encoded, protocol.EncodeError), encoded  # the harness's own operations
    return encoded


def _answer(message: protocol.Msg | protocol.HMsg) -> Answer:
    """The JSON object a JetStream API answer carries; a status-only answer (503: nobody
    answers on that subject) or anything that is not a JSON object is no answer."""
    if isinstance(message, protocol.HMsg):
        block = headers.parse_block(message.headers)
        if isinstance(block, headers.HeaderError):
            return Answer(None, f"an answer with a broken header block: {block.detail}")
        if block.status == NO_RESPONDERS:
            return Answer(None, "503 no responders: the server offers no JetStream API")
        if block.status is not None:
            return Answer(None, f"a status answer {block.status} {block.description or ''}")
    try:
        body = json.loads(message.payload)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return Answer(None, f"the answer is not JSON ({exc}): {message.payload[:SHOWN]!r}")
    if not isinstance(body, dict):
        return Answer(None, f"the answer is not a JSON object: {message.payload[:SHOWN]!r}")
    return Answer(body)


# One session per launched server, reused by every name case checked on it.
_SESSIONS: dict[RunningServer, NameSession] = {}


def check(case: Case, server: RunningServer, *, timeout: float) -> ServerRun:
    """Check one ``name.validate`` case on ``server`` (started with ``SERVER_CONFIG``)."""
    session = _SESSIONS.get(server)
    if session is not None and not session.usable:  # the connection broke: start again
        session.close()
        session = None
    if session is None:
        started = time.monotonic()
        try:
            session = NameSession.open(server, timeout=timeout)
        except SessionError as exc:
            elapsed = (time.monotonic() - started) * 1000
            return ServerRun.of("error", f"no JetStream session: {exc}", elapsed, exc.transcript)
        _SESSIONS[server] = session
    return session.check(case, timeout=timeout)


def close_sessions() -> None:
    """Close every session's connection (a runner calls this when a target's cases are done)."""
    while _SESSIONS:
        _SESSIONS.popitem()[1].close()
