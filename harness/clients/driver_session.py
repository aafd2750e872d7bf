"""A client library's driver session, as every client-role runner uses it: the driver
``Session`` (restarted when it dies, its events buffered, every case under a deadline), the
verdicts that end a case, ``connected`` (the library connected to a fake server), ``Link``
(a connection re-made when it breaks) and ``PathRun`` (what one path of the client vectors holds
over its cases: the session, its links, the servers it shares)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager, suppress
from typing import TYPE_CHECKING, Any, TypeVar, cast

from ...conformance import protocol
from ...conformance.transports import DEFAULT_TRANSPORT
from ...conformance.verdicts import CONFORMANCE
from .driver import DriverError, DriverProcess, DriverReply, rule, transport_options
from .fake_server import (
    FakeConnection,
    FakeServer,
    HeadersNotEnabled,
)
from .patience import RoundTrips

if TYPE_CHECKING:
    from .client_targets import ClientTarget

T = TypeVar("T")

STEP = 2.0  # seconds to wait for something the client should do
QUIET = 0.5  # seconds to watch for something the client should not do (close, deliver)
# Seconds one client case whose vector declares its steps (a script, a streaming session) may
# take in all, however many steps it declares: the bundled ones take a few.
CASE_SECONDS = 60.0
CONNECT_TIMEOUT_MS = 3000
TRANSCRIPT_LINES = 40  # how much of the fake server's transcript a failing row keeps


# --- verdicts and the driver session -------------------------------------------------------------


class Verdict(Exception):
    """Ends one row (or every row still owed) with an outcome other than pass."""

    def __init__(self, outcome: str, message: str, category: str = CONFORMANCE) -> None:
        super().__init__(message)
        self.outcome = outcome
        self.message = message
        self.category = category

    @staticmethod
    def of_driver(exc: DriverError, case: str = "") -> DriverVerdict:
        """The verdict a driver's failure gives the case in flight (driver.rule)."""
        ruling = rule(exc, case=case)
        assert ruling is not None  # a failure always has a ruling
        return DriverVerdict(ruling.outcome, ruling.message, ruling.category)


class DriverVerdict(Verdict):
    """A verdict on what the driver answered or did, not on the library's behaviour: a case
    never turns it into a failure of the library."""


class Overrun(Verdict):
    """A case past its overall deadline (CASE_SECONDS, Session.begin_case): an error, whatever
    it was judging."""

    def __init__(self, where: str) -> None:
        super().__init__(
            "error", f"the case did not end within its deadline of {CASE_SECONDS:g} s: {where}"
        )


def _fail(message: str) -> Verdict:
    return Verdict("fail", message)


class Session:
    """One driver process for a run of cases, restarted when it dies; buffered events.

    Every talk with the driver goes through here, so that a driver that crashes, hangs or breaks
    the protocol is restarted at once (the next case gets a new one) and its DriverError says
    whether the fake server had just given the library something (``server_input``). Every
    connection it makes to a fake server goes over ``transport``."""

    def __init__(self, client: ClientTarget, transport: str = DEFAULT_TRANSPORT) -> None:
        self.client = client
        self.transport = transport
        self._driver: DriverProcess | None = None
        self._events: list[dict[str, Any]] = []
        self.server: FakeServer | None = None  # the fake server of the open connection
        self.last_transcript = ""  # the fake server transcript of the latest connection
        self._asked = 0.0  # when (time.monotonic()) the latest request to the driver was sent
        self._unreported: DriverError | None = None  # a failure met while cleaning up
        # Drivers dropped so far: what a driver set up (a connection, a subscription) belongs to
        # the process that set it up, and is gone once the count moves (Link).
        self.restarts = 0
        self._case_ends: float | None = None  # the case in flight's deadline (begin_case)

    @property
    def transcript(self) -> str:
        """The fake server's transcript: the open connection's, else the latest one's."""
        return self.server.transcript_text() if self.server else self.last_transcript

    @property
    def driver(self) -> DriverProcess:
        if self._driver is None:
            self._driver = self.client.driver()
        return self._driver

    def begin_case(self) -> None:
        """A case starts: from now on, a call or ``on_time`` past CASE_SECONDS is an Overrun."""
        self._case_ends = time.monotonic() + CASE_SECONDS

    def on_time(self, where: str) -> None:
        """Overrun (saying ``where`` the case stopped) once the case in flight is past its
        deadline."""
        if self._case_ends is not None and time.monotonic() >= self._case_ends:
            raise Overrun(f"stopped at {where}")

    def left(self, seconds: float) -> float:
        """``seconds``, cut to what is left before the case's deadline."""
        if self._case_ends is None:
            return seconds
        return max(0.0, min(seconds, self._case_ends - time.monotonic()))

    def call(self, cmd: str, **args: Any) -> DriverReply:
        """The driver's answer to ``cmd`` within the command's documented deadline
        (driver.deadline). An answer about the driver rather than the library (``unsupported``,
        ``invalid``: driver.rule) ends the case as a Verdict; a crash or a hang is a DriverError
        for the case in flight, the driver restarted for the next."""
        self.on_time(f"the command {cmd!r}")
        with self._driving():
            self._asked = time.monotonic()
            reply = self.driver.call(cmd, **args)
        ruling = rule(reply, cmd)
        if ruling is not None:
            raise DriverVerdict(ruling.outcome, ruling.message, ruling.category)
        return reply

    @contextmanager
    def _driving(self) -> Iterator[None]:
        """Around a talk with the driver: a DriverError says whether the fake server gave the
        library something since the latest request, and restarts the driver."""
        try:
            yield
        except DriverError as exc:
            exc.server_input = self.server is not None and self.server.fed_since(self._asked)
            self.restart()
            raise

    def crashed(self) -> DriverError | None:
        """A failure of the driver that the case in flight has not met: one met while cleaning
        up (closing the connection), or a process that died after its last answer (the driver is
        then restarted). Each is reported once; a case runner asks at the end of every case."""
        found, self._unreported = self._unreported, None
        if found is None and self._driver is not None:
            try:
                with self._driving():
                    self._driver.check_alive()
            except DriverError as exc:
                found = exc
        return found

    def restart(self) -> None:
        """Drop the driver (it died or stopped answering); the next call starts a new one."""
        driver, self._driver = self._driver, None
        self._events.clear()
        if driver is not None:
            self.restarts += 1
            with suppress(DriverError):
                driver.close()

    def wait_event(
        self,
        match: Callable[[dict[str, Any]], bool],
        *,
        timeout: float,
        stop: Callable[[dict[str, Any]], bool] = lambda event: False,
    ) -> dict[str, Any] | None:
        """The first buffered or new event ``match`` accepts (taken out of the buffer); None
        after ``timeout``, or as soon as an event ``stop`` accepts is there instead."""
        deadline = time.monotonic() + timeout
        while True:
            for i, event in enumerate(self._events):
                if match(event):
                    return self._events.pop(i)
            if any(stop(event) for event in self._events):
                return None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            with self._driving():
                self._events.extend(self.driver.events(timeout=remaining, count=1))

    def seen(self, *, timeout: float = 0.0) -> list[dict[str, Any]]:
        """Every event buffered so far plus those arriving within ``timeout`` (left buffered)."""
        with self._driving():
            self._events.extend(self.driver.events(timeout=timeout))
        return list(self._events)

    def discard_events(self) -> None:
        self._events.clear()
        if self._driver is not None:
            with self._driving():
                self._driver.events(timeout=0)

    def close_connection(self) -> None:
        """Close the library's connection (if a driver runs) and forget its events."""
        self._case_ends = None  # cleaning up after the case, whenever it ended
        if self._driver is None:
            return
        try:
            self.call("close", drain=False)
            self.discard_events()
        except DriverError as exc:
            self._unreported = exc  # restarted; the case in flight learns of it (crashed)
        except Verdict:
            pass  # a driver that cannot close: the next connect makes a new connection

    def close(self) -> None:
        self.restart()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def event_is(kind: str, **fields: Any) -> Callable[[dict[str, Any]], bool]:
    """A matcher of driver events: of ``kind``, with every one of ``fields`` as given."""
    return lambda e: e.get("event") == kind and all(e.get(k) == v for k, v in fields.items())


def _error_text(reply: DriverReply) -> str:
    return f"{reply.error_type}: {reply.error_message}"


@contextmanager
def connected(
    s: Session, *, options: dict[str, Any] | None = None, **server_args: Any
) -> Iterator[tuple[FakeServer, FakeConnection]]:
    """A fake server (``server_args``) and the library connected to it (``options``), over the
    session's transport: the URL's scheme and the connect options name it.

    Verdict ``skip`` when the driver answers unsupported for an option (Session.call), or when
    the body would send a header-bearing message the library's CONNECT did not ask for (a server
    sends none); ``error`` when the library cannot connect to the fake server at all. The library
    is closed afterwards.
    """
    with FakeServer(transport=s.transport, **server_args) as server:
        s.server = server
        connect_options = {
            "reconnect": False, "timeout_ms": CONNECT_TIMEOUT_MS,
            **transport_options(s.transport), **(options or {}),
        }  # fmt: skip
        try:
            reply = s.call("connect", url=server.url, options=connect_options)
            conn = server.accept(timeout=STEP if reply.ok else 0.0)
            if conn is None or not reply.ok:
                raise Verdict(
                    "error",
                    f"the library did not connect to the fake server: "
                    f"{'connected' if reply.ok else _error_text(reply)}",
                )
            yield server, conn
        except HeadersNotEnabled as exc:
            raise Verdict("skip", str(exc)) from None
        finally:
            s.close_connection()
            s.server, s.last_transcript = None, server.transcript_text()


class Link:
    """A connection (and optionally a subscription) that is re-made when it breaks, for checks
    that run many deliveries in a row: one broken delivery must not fail the ones after it."""

    def __init__(self, s: Session, subject: str | None = None, **server_args: Any) -> None:
        self._s = s
        self._subject = subject
        self._server_args = server_args
        self._ctx: Any = None
        self.conn: FakeConnection | None = None
        self.sid = ""
        self.sub = ""
        self.broken = False
        self._made_on = -1  # the session's restart count when the connection was made

    def get(self) -> tuple[FakeConnection, str]:
        conn = self.conn
        if (
            conn is None
            or self.broken
            # A restarted driver is a new process: the connection and the subscription were the
            # old one's. Its socket's close may not have reached the fake server yet.
            or self._made_on != self._s.restarts
            or conn.closed_by_client
            or conn.parse_error is not None
            or any(e.get("event") == "closed" for e in self._s.seen())
        ):
            self.close()
            ctx = connected(self._s, **self._server_args)
            _, conn = ctx.__enter__()
            self._ctx, self.conn, self.broken = ctx, conn, True
            self._made_on = self._s.restarts
            if self._subject is not None:
                self.sub, self.sid = _subscribe(self._s, conn, self._subject)
            self.broken = False
        return conn, self.sid

    def close(self) -> None:
        ctx, self._ctx, self.conn = self._ctx, None, None
        if ctx is not None:
            ctx.__exit__(None, None, None)
            # A failure met closing it is the earlier case's that used it, whose rows are out:
            # not charged to the case in flight now.
            self._s.crashed()

    def __enter__(self) -> Link:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _subscribe(
    s: Session, conn: FakeConnection, subject: str, queue: str | None = None
) -> tuple[str, str]:
    """Subscribe through the driver; the driver's handle and the sid the client put on the wire."""
    after = conn.count()
    reply = s.call("subscribe", subject=subject, queue=queue)
    if not reply.ok:
        raise _fail(f"subscribe {subject!r} failed: {_error_text(reply)}")
    sub = conn.wait_for(
        protocol.Sub, timeout=STEP, after=after, match=lambda op: op.subject == subject
    )
    if sub is None:
        raise _fail(f"no SUB {subject} on the wire after subscribing")
    return str(reply.result.get("sub")), sub.sid


class PathRun:
    """The state of one path over its cases: the driver session and the fake-server links."""

    def __init__(self, s: Session, stack: ExitStack) -> None:
        self.s = s
        self._stack = stack
        self._links: dict[str, Link] = {}
        self._resources: dict[str, object] = {}
        self.round_trips = RoundTrips()  # what waits on this path are judged by

    def link(self, name: str, subject: str | None = None, **server_args: Any) -> Link:
        if name not in self._links:
            self._links[name] = self._stack.enter_context(Link(self.s, subject, **server_args))
        return self._links[name]

    def resource(self, name: str, make: Callable[[], AbstractContextManager[T]]) -> T:
        """What ``make`` opens, entered on first use and shared by the path's cases (a server),
        exited when the path is done."""
        if name not in self._resources:
            self._resources[name] = self._stack.enter_context(make())
        return cast(T, self._resources[name])
