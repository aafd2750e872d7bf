"""Run a vector's wire script against a live server over its transport (plain TCP, TLS,
WebSocket: ``harness.runtime.streams``), recording the NATS bytes on the wire.

No protocol logic lives here: server bytes are parsed by the reference parser and each exchange is
judged by ``conformance.vectors.compare_exchange``. What this module adds is I/O that always ends:
every wait has a deadline, every read a byte budget, so a misbehaving server gets a verdict.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ...conformance import protocol, vectors, wire_script
from ...conformance.frame_layouts import Layout, frames_note
from ...conformance.transport_model import TLS_AFTER_INFO, TLS_FIRST
from ...conformance.transports import DEFAULT_TRANSPORT
from ...conformance.verdicts import CONFORMANCE, ROBUSTNESS, observation
from ...conformance.wire_script import ConnectionPlan
from ..results import Found
from ..runtime.limits import READ_LIMITS
from ..runtime.streams import HandshakeError, SocketStream, Stream, WebSocketStream, open_stream
from ..runtime.transcripts import Direction, Transcript
from . import tls

if TYPE_CHECKING:
    from .specs import RunningServer, TlsOptions

Outcome = Literal["pass", "fail", "error", "skip"]
Arrival = tuple[float, protocol.Event]  # when an operation came (time.monotonic()), and what

# Flood guard: a receive stops reading after this many bytes.
RECEIVE_BUDGET = 1 << 20
CHUNK = 1 << 16
PONG = b"PONG\r\n"
# What the runner sends to learn whether a connection is still open: a PONG answers it.
PROBE = protocol.encode(protocol.Ping())
# A whole case's deadline, beyond the waits it declares: a server that answers every exchange
# slowly gets an error row, not a run that never ends.
CASE_SECONDS = 30.0
_UNBOUNDED = 1 << 62  # an operation count no server reaches before a receive limit
# The transports whose server waits for a TLS handshake (after its INFO, or before it).
TLS_WAITERS = (TLS_AFTER_INFO, TLS_FIRST)


class WireConnection:
    """A blocking client to a NATS server, over any transport's ``Stream``, that records a
    transcript (the NATS bytes both ways, the handshakes as notes) and never waits unbounded.

    It answers a server PING with PONG and leaves PING and INFO out of what ``receive`` returns,
    except the connection's first operation (which should be the INFO), returned whatever it is;
    ``plan`` may keep them, or leave PINGs unanswered. Connections of one script share one
    transcript (``label`` tells them apart) and one time origin.
    """

    def __init__(
        self,
        stream: Stream,
        started: float,
        *,
        plan: ConnectionPlan | None = None,
        transcript: Transcript | None = None,
        label: str = "",
    ) -> None:
        self._stream = stream
        self._started = started
        self.opened = time.monotonic()  # when the server accepted: its timers start then
        self._plan = plan or ConnectionPlan(wire_script.DEFAULT_CONNECTION)
        self._label = label
        self.raw = bytearray()  # the bytes received since ``mark``
        self._parser = protocol.Parser(protocol.Direction.SERVER, limits=READ_LIMITS, headers=True)
        self._first = True
        self.closed = False  # the peer closed or reset the connection
        self.broken = False  # the peer sent bytes that break the protocol
        self.send_failed = False
        # Why the last receive ended before its count ("" when the count came in), and why no
        # receive can get more (closed or broken).
        self.stopped = ""
        self._final = ""
        self.transcript = transcript if transcript is not None else Transcript()
        self._unread: list[Arrival] = []  # operations read but given back: the next read's first
        self._shown = ""  # the stream's handshakes noted so far
        # Whether a probe PING may be sent: not while the TLS the server waits for is not made
        # (a PING in clear would be a client that does not upgrade, which such a case is about).
        self.probes = True
        self._noted()

    @classmethod
    def connect(
        cls,
        host: str,
        port: int,
        *,
        timeout: float,
        started: float | None = None,
        transport: str = DEFAULT_TRANSPORT,
        tls_options: TlsOptions | None = None,
        handshake: bool = True,
        **kw: Any,
    ) -> WireConnection:
        """Open the connection over ``transport`` (its handshakes done, but for ``tls`` that
        upgrades after the INFO, and for ``tls-first`` without ``handshake``: ``start_tls``).
        OSError (refused, timed out, ...) and HandshakeError (a TLS handshake or WebSocket
        upgrade that failed or hung) propagate."""
        began = time.monotonic() if started is None else started
        context = None if tls_options is None else tls.client_context(tls_options)
        stream = open_stream(
            transport, host, port, timeout=timeout, context=context, handshake=handshake
        )
        return cls(stream, began, **kw)

    @classmethod
    def to(
        cls, server: RunningServer, *, timeout: float, handshake: bool = True, **kw: Any
    ) -> WireConnection:
        """A connection to ``server`` over its transport (``handshake``: see ``connect``)."""
        return cls.connect(
            server.host, server.port, timeout=timeout, transport=server.transport,
            tls_options=server.tls, handshake=handshake, **kw,
        )  # fmt: skip

    def start_tls(self, options: TlsOptions, hostname: str, *, timeout: float) -> None:
        """Upgrade to TLS, as a client does after the INFO of a server that requires it;
        HandshakeError (a failed handshake, a refused certificate, no answer) propagates."""
        self.note(f"TLS handshake, {tls.describe(options)}")
        if not isinstance(self._stream, SocketStream):
            raise HandshakeError(f"a {self._stream.transport} connection cannot start TLS")
        self._stream.start_tls(tls.client_context(options), hostname, timeout=timeout)
        self.probes = True
        self._noted()

    @property
    def transport(self) -> str:
        return self._stream.transport

    @property
    def deflating(self) -> bool:
        """Whether the WebSocket negotiated permessage-deflate (every frame sent is deflated)."""
        return self._stream.deflating

    @property
    def upgraded(self) -> wire_script.Upgraded | None:
        """What the server's WebSocket upgrade answer accepted, and the text frames it sent
        (None: no WebSocket)."""
        if not isinstance(self._stream, WebSocketStream):
            return None
        return wire_script.Upgraded(self._stream.accepted, self._stream.text_frames)

    def _noted(self) -> None:
        """The stream's handshake (once it has one) as a note."""
        if self._stream.negotiated and self._stream.negotiated != self._shown:
            self._shown = self._stream.negotiated
            self.note(self._shown)

    @property
    def incomplete(self) -> bool:
        """Whether the bytes received so far end inside an operation."""
        return self._parser.incomplete

    def _record(self, direction: Direction, data: bytes) -> None:
        self.transcript.add(time.monotonic() - self._started, direction, data, self._label)

    def note(self, text: str) -> None:
        self._record("note", text.encode())

    def send(
        self,
        data: bytes,
        *,
        timeout: float = 1.0,
        text: bool = False,
        frames: Sequence[bytes] | None = None,
        fragments: bool = False,
    ) -> bool:
        """Send all of ``data`` (``text``: in a WebSocket text frame; ``frames``: ``data`` cut in
        a frame layout's frames, each a binary frame of its own, or with ``fragments`` one
        message's fragments; ValueError where there are none);
        False (and a note) when the peer does not take it in time.

        After one failed send the outgoing stream is in an unknown state: later sends are only
        recorded, so a peer that stopped reading costs one timeout, not one per send.
        """
        self._record("send", data)
        if text:
            self.note("sent in a WebSocket text frame")
        if frames is not None:
            self.note(frames_note(frames))
        if self.send_failed:
            self.note("not sent: an earlier send failed")
            return False
        try:
            if frames is None:
                self._stream.send(data, timeout=timeout, text=text)
            else:
                self._stream.send_frames(frames, timeout=timeout, fragments=fragments)
        except TimeoutError:
            self.note(f"send did not complete within {timeout:g} s")
        except OSError as exc:  # the peer closed or reset: what it sent before is still readable
            self.note(f"send failed: {exc.strerror or exc}")
        else:
            return True
        self.send_failed = True
        return False

    def receive(
        self,
        count: int,
        *,
        timeout: float,
        enough: Callable[[list[protocol.Event]], bool] | None = None,
    ) -> list[protocol.Event]:
        """Read until ``count`` operations are in (or ``enough`` says what came is enough), the
        peer closes, ``timeout`` seconds pass, the bytes break the protocol (a
        ``ProtocolError`` event) or the flood budget is spent.

        Operations parsed from the same bytes beyond ``count`` are returned too: the server sent
        them before the reading stopped.
        """
        return [e for _, e in self.receive_timed(count, timeout=timeout, enough=enough)]

    def receive_timed(
        self,
        count: int,
        *,
        timeout: float,
        enough: Callable[[list[protocol.Event]], bool] | None = None,
        hold: float = 0.0,
    ) -> list[Arrival]:
        """``receive``, each operation with the time it came; with ``hold``, reading goes on for
        that many seconds whatever came (until the peer closes): what a case says does not
        happen within a time is watched for all of that time."""
        return self._read(count, timeout, f"{count} operation(s)", enough=enough, hold=hold)

    def give_back(self, arrivals: list[Arrival]) -> None:
        """Operations read before their turn (the bytes that carried the INFO carried them too):
        the next read returns them first, with the time they came."""
        self._unread = arrivals + self._unread

    def receive_until_closed(self, *, timeout: float) -> list[protocol.Event]:
        """Everything the server sends until it closes (or a ``receive`` limit is reached)."""
        return [e for _, e in self._read(_UNBOUNDED, timeout, "the server to close the connection")]

    def closes(self, *, timeout: float) -> tuple[list[protocol.Event], bool]:
        """Whether the server closes the connection, told actively: a probe PING that the server
        answers proves it open without waiting out ``timeout``. Returns what the server sent
        before it closed or answered (the probe's PONG left out), and whether it closed."""
        out, _ = self.probe(timeout=timeout)
        return [e for _, e in out], self.closed

    def probe(self, *, timeout: float) -> tuple[list[Arrival], bool]:
        """Send a PING and read until its PONG, a close or ``timeout``: what the server sent
        before (the probe's PONG left out), and whether the PONG came (the server is open and
        answering; neither it nor a close: the server stopped answering). Where no probe may be
        sent (``probes``), what comes until a close or ``timeout``, and no PONG."""
        if not self.probes:
            return self._read(_UNBOUNDED, timeout, "the server to close the connection"), False
        if not self.closed and not self.broken:
            self.note("probe: PING (a PONG proves the connection open)")
            self.send(PROBE, timeout=timeout)
        out = self._read(_UNBOUNDED, timeout, "the server to close or answer the probe", pong=True)
        pongs = [i for i, (_, e) in enumerate(out) if isinstance(e, protocol.Pong)]
        if pongs:  # the last PONG answers the probe: the server replies in order
            del out[pongs[-1]]
        return out, bool(pongs)

    def _read(
        self,
        count: int,
        timeout: float,
        awaited: str,
        *,
        pong: bool = False,
        enough: Callable[[list[protocol.Event]], bool] | None = None,
        hold: float = 0.0,
    ) -> list[Arrival]:
        """Read until ``count`` operations are in (or, with ``pong``, a PONG is among them, or
        ``enough`` says what came is enough) and ``hold`` seconds have passed."""
        now = time.monotonic()
        deadline, held = now + timeout + hold, now + hold
        out, self._unread = self._unread, []
        budget = RECEIVE_BUDGET
        self.stopped = self._final
        while not self.stopped:
            events = [e for _, e in out]
            done = (
                len(out) >= count
                or (pong and any(isinstance(e, protocol.Pong) for e in events))
                or (enough is not None and bool(out) and enough(events))
            )
            now = time.monotonic()
            if done and now >= held:
                break
            if budget <= 0:
                self.stopped = f"stopped reading after {RECEIVE_BUDGET} bytes (flood guard)"
                self.note(self.stopped)
                break
            remaining = (held if done else deadline) - now
            try:
                data = self._stream.receive(min(CHUNK, budget), timeout=remaining)
            except TimeoutError:
                if done:  # the hold is over and what was awaited came
                    continue
                self.stopped = f"waited {timeout + hold:g} s for {awaited}"
                self._record("timeout", self.stopped.encode())
                break
            except OSError as exc:
                self._stream_notes()
                self._peer_closed(f"connection lost: {exc.strerror or exc}")
                break
            self._stream_notes()
            if not data:
                self._peer_closed("connection closed by the server")
                break
            came = time.monotonic()
            self._record("recv", data)
            self.raw += data
            budget -= len(data)
            out += [(came, e) for e in self._keep(self._parser.feed(data), deadline)]
        return out

    def _stream_notes(self) -> None:
        for text in self._stream.notes():
            self.note(text)

    def _limit_frames(self, greeting: protocol.Event) -> None:
        """No frame larger than the server's max_payload: nats-server (2.15.1) refuses a
        compressed WebSocket frame that inflates beyond it ("maximum payload exceeded"), while
        the documents bound only a message's payload, so a frame of the suite's own choosing
        must not decide a case about payloads."""
        size = greeting.options.get("max_payload") if isinstance(greeting, protocol.Info) else None
        if isinstance(size, int) and not isinstance(size, bool) and size > 0:
            self._stream.limit_frames(size)

    def _keep(self, events: list[protocol.Event], deadline: float) -> list[protocol.Event]:
        """Drop what the comparison leaves out, answer PINGs (one send per chunk), note errors."""
        kept = []
        pings = 0
        for event in events:
            if self._first:
                self._first = False
                kept.append(event)
                self._limit_frames(event)
                continue
            if isinstance(event, protocol.Ping):
                pings += 1
            kept += wire_script.kept(self._plan, [event])
            if isinstance(event, protocol.ProtocolError):
                self.broken = True
                self._final = self.stopped = (
                    f"the server's bytes break the protocol: {event.reason} ({event.detail})"
                )
                self.note(self.stopped)
        if pings and self._plan.answer_pings:  # within the receive's deadline: a peer that
            # does not read must not stall us
            self.send(PONG * pings, timeout=max(deadline - time.monotonic(), 0.001))
        return kept

    def _peer_closed(self, how: str) -> None:
        self.closed = True
        self._record("close", how.encode())
        if self._parser.incomplete:
            how += " inside an operation"
            self.note("the connection ended inside an operation")
        self._final = self.stopped = how

    def close(self) -> None:
        self._stream.close()

    def __enter__(self) -> WireConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class ServerRun:
    """What checking one case on a server found (the row's ``Found``), next to the transcript as
    events (what the robustness rules and their tests read) and whether the server's greeting
    broke (no later case can run on that server: the runner stops connecting)."""

    found: Found
    transcript: Transcript | None = None
    greeting_broken: bool = False

    @classmethod
    def of(
        cls,
        outcome: Outcome,
        message: str,
        duration_ms: float,
        transcript: Transcript | None = None,
        *,
        greeting_broken: bool = False,
        observed: str = "",
        category: str = CONFORMANCE,
    ) -> ServerRun:
        """The one place a server case's ``Found`` is built: its transcript as text."""
        text = "" if transcript is None else transcript.text()
        found = Found(outcome, message, duration_ms, text, observed, category)
        return cls(found, transcript, greeting_broken)


class _Verdict(Exception):
    """Ends a script run early with an outcome."""

    def __init__(
        self,
        outcome: Outcome,
        message: str,
        *,
        greeting: bool = False,
        category: str = CONFORMANCE,
    ) -> None:
        super().__init__(message)
        self.outcome = outcome
        self.message = message
        self.greeting = greeting  # the server's greeting broke: later cases cannot run either
        self.category = category


def run_wire_script(
    wire: dict[str, Any],
    server: RunningServer,
    *,
    timeout: float = 1.0,
    layout: Layout | None = None,
) -> ServerRun:
    """Run one wire script against ``server``; every step is bounded by ``timeout`` seconds (an
    exchange's ``wait`` adds to it). With a frame ``layout`` (over its WebSocket transport),
    each exchange's bytes go in the layout's frames (whole, where it has nowhere to cut them).

    Each of the script's connections opens at its first exchange and must greet with INFO.
    ``pass`` when every exchange matches; ``fail`` at the first mismatch ("<field>: <why>") or
    when the server does not greet with INFO (``greeting_broken`` when the script's first
    connection finds it: no other case can run on that server either); ``error`` when the
    script cannot be run (no connection, an undecodable script). A server that, where the script
    expects the connection open, answers neither the script nor a probe PING (nor closes) fails
    in category ``robustness``. ``observed`` is what the server sent on each connection, and
    whether it closed it.
    """
    started = time.monotonic()
    transcript = Transcript()
    plans = wire_script.connections(wire)
    labelled = len(plans) > 1
    conns: dict[str, WireConnection] = {}
    seen: dict[str, list[protocol.Event]] = {}
    greeting = False
    category = CONFORMANCE
    try:
        try:
            deadline = started + CASE_SECONDS + sum(e.get("wait", 0) for e in wire["exchanges"])
            for i, exchange in enumerate(wire["exchanges"]):
                if time.monotonic() > deadline:
                    raise _Verdict(
                        "error",
                        f"the case did not end within {CASE_SECONDS:g} s (plus the waits it "
                        f"declares): {i} of {len(wire['exchanges'])} exchanges done",
                    )
                name = wire_script.connection_of(wire, i)
                plan = plans[name]
                conn = conns.get(name)
                opens = conn is None
                if conn is None:
                    try:
                        conn = WireConnection.to(
                            server, timeout=timeout, started=started, plan=plan,
                            transcript=transcript, label=name if labelled else "",
                            handshake=plan.starts_tls,
                        )  # fmt: skip
                    except HandshakeError as exc:  # the suite's transport setup, not a finding
                        at, label = time.monotonic() - started, name if labelled else ""
                        transcript.add(at, "close", f"connect: {exc}".encode(), label)
                        why = f"{server.transport} handshake with {server.url} failed: {exc}"
                        raise _Verdict("error", why) from exc
                    except OSError as exc:
                        at, label = time.monotonic() - started, name if labelled else ""
                        transcript.add(at, "close", f"connect: {exc}".encode(), label)
                        if isinstance(exc, ConnectionResetError):  # a listener that resets at once
                            why = (
                                f"no INFO: the connection ended before the server sent INFO ({exc})"
                            )
                            raise _Verdict("fail", why, greeting=not conns) from exc
                        raise _Verdict("error", f"cannot connect to {server.url}: {exc}") from exc
                    conns[name] = conn
                    seen[name] = []
                    # No probe PING in clear where the server waits for a TLS handshake.
                    conn.probes = plan.starts_tls or server.transport not in TLS_WAITERS
                    if plan.greeting:
                        first = len(conns) == 1
                        _expect_info(conn, timeout, first=first, name=name, seen=seen[name])
                    if server.transport == "tls" and plan.starts_tls:  # upgrade after the INFO
                        _start_tls(conn, server, timeout)
                if exchange.get("start_tls", False) and not conn.closed:  # closed: it says so
                    _start_tls(conn, server, timeout)
                _run_exchange(
                    conn, exchange, i, timeout, opens=opens, seen=seen[name], layout=layout
                )
        finally:
            for conn in conns.values():
                conn.close()
        outcome, message = "pass", ""
    except _Verdict as verdict:
        outcome, message = verdict.outcome, verdict.message
        greeting, category = verdict.greeting, verdict.category
    except vectors.Mismatch as exc:
        outcome, message = "error", f"cannot run the wire script: {exc.field}: {exc}"
    except (vectors.BytesError, KeyError, TypeError, ValueError) as exc:
        outcome, message = "error", f"cannot run the wire script: {type(exc).__name__}: {exc}"
    elapsed = (time.monotonic() - started) * 1000
    shown = transcript if transcript.events else None
    # A case about its transport records what the WebSocket upgrade accepted, too.
    pinned = wire_script.transport_of(wire) is not None
    observed = observation(
        {name: wire_script.observed_connection(
            events, conns[name].closed, wire_script.queue_members(wire, name),
            conns[name].upgraded if pinned else None)
         for name, events in seen.items()}
    )  # fmt: skip
    return ServerRun.of(
        outcome, message, elapsed, shown, greeting_broken=greeting, observed=observed,
        category=category,
    )  # fmt: skip


def _framed(wire: WireConnection, layout: Layout, data: bytes) -> list[bytes] | None:
    """``data`` in ``layout``'s frames (None: nowhere to cut it, it goes whole); an error where a
    deflated layout's connection did not negotiate permessage-deflate."""
    problem = layout.unsendable(wire.deflating)
    if problem:
        raise _Verdict("error", problem)
    return layout.frames(data)


def _expect_info(
    wire: WireConnection, timeout: float, *, first: bool, name: str, seen: list[protocol.Event]
) -> None:
    """The connection's first operation is INFO; otherwise a verdict (``greeting`` when it is
    the script's first connection)."""
    which = "" if first else f"connection {name}: "
    arrivals = wire.receive_timed(1, timeout=timeout)
    got = [event for _, event in arrivals]
    seen += got[:1]
    if got and isinstance(got[0], protocol.Info):
        # What came with the INFO in the same bytes is the first exchange's, bytes too.
        del wire.raw[: wire.raw.index(b"\n") + 1]
        wire.give_back(arrivals[1:])
        return
    if not got and wire.closed:
        why = f"the connection ended before the server sent INFO ({wire.stopped})"
    elif got and not isinstance(got[0], protocol.ProtocolError):
        why = f"the server's first operation is {protocol.OP_NAMES[type(got[0])]}"
    else:
        why = wire.stopped
    raise _Verdict("fail", f"{which}no INFO: {why}", greeting=first)


def _start_tls(wire: WireConnection, server: RunningServer, timeout: float) -> None:
    assert server.tls is not None
    try:
        wire.start_tls(server.tls, server.host, timeout=timeout)
    except HandshakeError as exc:  # the suite's TLS setup, not a protocol finding
        wire.note(f"TLS handshake failed: {exc}")
        raise _Verdict("error", f"TLS handshake with {server.url} failed: {exc}") from exc


def _run_exchange(
    wire: WireConnection,
    exchange: dict[str, Any],
    index: int,
    timeout: float,
    *,
    opens: bool,
    seen: list[protocol.Event],
    layout: Layout | None = None,
) -> None:
    """Run one exchange; what the server sent in it goes on ``seen``, a mismatch is a verdict.

    A ``wait`` is watched whole: the runner reads for all of it, and where the script expects the
    connection open afterwards, a probe PING proves it still open and answering at its end."""
    path = f"wire.exchanges[{index}]"
    if wire.closed:
        raise _Verdict("fail", f"{path}: the server closed the connection before this exchange")
    if not opens:  # the opening exchange's raw bytes are what came after the INFO
        wire.raw.clear()
    data = vectors.decode_bytes(exchange.get("send", ""), f"{path}.send")
    if data:
        frames = None if layout is None else _framed(wire, layout, data)
        fragments = layout is not None and layout.fragments
        wire.send(
            data, timeout=timeout, text=exchange.get("text", False), frames=frames,
            fragments=fragments,
        )  # fmt: skip
    clock = wire.opened if opens else time.monotonic()
    wait = exchange.get("wait", 0)
    if "expect_bytes" in exchange:
        size = len(vectors.decode_bytes(exchange["expect_bytes"], f"{path}.expect_bytes"))
        count = _UNBOUNDED

        def enough(_: list[protocol.Event]) -> bool:
            return len(wire.raw) >= size
    else:
        patterns = exchange["expect"]
        count = len(patterns)

        def enough(got: list[protocol.Event]) -> bool:  # every pattern met, optional ones too
            return wire_script.compare_exchange(
                {"expect": patterns, "then": "closed" if wire.closed else "open"},
                index, got, wire.closed, "",
            ) is None  # fmt: skip

    arrivals = wire.receive_timed(count, timeout=timeout + wait, enough=enough, hold=wait)
    # A close is told by a probe; so is being open (and answering) after a wait, where a probe
    # may be sent (otherwise the wait, watched whole, told it).
    probed = exchange["then"] == "closed" or (wait > 0 and wire.probes)
    answered = True
    if probed:  # a close is told by a probe; so is being open (and answering) after a wait
        more, answered = wire.probe(timeout=timeout)
        arrivals += more
    received = [event for _, event in arrivals]
    seen += received
    arrived_ms = [(at - clock) * 1000 for at, _ in arrivals]
    mismatch = wire_script.compare_exchange(
        exchange, index, received, wire.closed, "the server", bytes(wire.raw), arrived_ms,
        wire.upgraded,
    )  # fmt: skip
    if mismatch is None:
        return
    ending = f"; {wire.stopped}" if wire.stopped else ""
    message = f"{mismatch.field}: {mismatch}{ending}"
    if exchange["then"] == "open" and not wire.closed and not wire.broken and wire.probes:
        if not probed:  # whether the server still answers, and what else it sent first
            more, answered = wire.probe(timeout=timeout)
            seen += [event for _, event in more]
        if not answered and not wire.closed and not wire.broken:  # silent, not broken
            raise _Verdict(
                "fail",
                f"{message}; the server stopped answering: no PONG to a probe PING, and the "
                f"connection is still open ({wire.stopped})",
                category=ROBUSTNESS,
            )
    raise _Verdict("fail", message)
