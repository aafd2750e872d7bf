"""One (A, B) pair of client libraries as an interop batch uses it: A's and B's drivers, what
each did and reported (the transcript of a row), B's deliveries, and a driver's messages in the
terms of ``conformance.interop``."""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from ...conformance.interop import Message
from ...conformance.vector_values import excerpt
from ...conformance.verdicts import observation
from . import driver_session
from .driver import DriverProcess, DriverReply
from .driver_session import Overrun

DELIVERY_TIMEOUT = 5.0  # seconds B has to deliver what A sent
POLL = 0.05  # seconds between checks while B's messages are awaited
SETTLE = 0.15  # seconds to wait, after both sides flushed, for extra (duplicate) deliveries
SHOWN_PAYLOAD = 64  # bytes of a payload a transcript line shows


class Refused(Exception):
    """A driver answered a command ok false: the library refused or failed it."""

    def __init__(self, side: str, cmd: str, reply: DriverReply) -> None:
        super().__init__(f"{side}'s {cmd} failed: {reply.error_type}: {reply.error_message}")
        self.side = side
        self.cmd = cmd
        self.reply = reply


def message_from_driver(data: dict[str, Any]) -> Message:
    """A message as a driver reports it (an event or a request's result)."""
    headers = data.get("headers")
    return Message(
        subject=data["subject"],
        reply=data.get("reply") or None,  # an API without "no reply" gives ""
        headers=tuple((name, value) for name, value in headers) if headers else None,
        payload=base64.b64decode(data["payload_b64"]),
    )


def _call(driver: DriverProcess, side: str, cmd: str, **args: Any) -> dict[str, Any]:
    reply = driver.call(cmd, **args)
    if not reply.ok:
        raise Refused(side, cmd, reply)
    return reply.result


def publish_args(message: Message) -> dict[str, Any]:
    """A message as the driver protocol's publish (and request) arguments."""
    return {
        "subject": message.subject,
        "reply": message.reply,
        "headers": None if message.headers is None else [list(pair) for pair in message.headers],
        "payload_b64": base64.b64encode(message.payload).decode("ascii"),
    }


def show(message: Message) -> str:
    """A message on one transcript line: its fields, the payload cut to SHOWN_PAYLOAD bytes."""
    payload = excerpt(message.payload[:SHOWN_PAYLOAD])
    if len(message.payload) > SHOWN_PAYLOAD:
        payload += f"... ({len(message.payload)} bytes)"
    headers = "" if message.headers is None else f" headers={list(message.headers)!r}"
    reply = "" if message.reply is None else f" reply={message.reply!r}"
    return f"subject={message.subject!r}{reply}{headers} payload={payload}"


@dataclass
class Reported:
    """What the libraries reported for one case, in the vector's terms (subjects relative to the
    case's prefix): B's messages per subscription, A's answer to a request, what was refused."""

    received: dict[str, list[Message]] = field(default_factory=dict)
    answer: Message | str | None = None  # the response A got, or the error type it answered
    refused: list[str] = field(default_factory=list)

    def observed(self) -> str:
        """Canonical (conformance.verdicts.observation). A queue group's messages are sorted:
        which member got which is the server's choice, not the libraries'."""
        received = {
            label: sorted(shown, key=str) if label.startswith("queue ") else shown
            for label, messages in self.received.items()
            for shown in [[m.to_vector() for m in messages]]
        }
        answer = self.answer.to_vector() if isinstance(self.answer, Message) else self.answer
        return observation({"received": received, "answer": answer, "refused": self.refused})


@dataclass
class Pair:
    """What a batch of cases needs of one (A, B) pair, and the log of what each side did and
    reported, each line tagged with the case it belongs to (None: the whole batch)."""

    a: DriverProcess
    b: DriverProcess
    a_name: str
    b_name: str
    index: int
    token: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    log: list[tuple[str | None, str]] = field(default_factory=list)
    tags: dict[str, str | None] = field(default_factory=dict)  # B's handles: their case
    labels: dict[str, str] = field(default_factory=dict)  # B's handles: their subscription
    issued: list[str] = field(default_factory=list)  # the prefixes handed out
    reported: dict[str, Reported] = field(default_factory=dict)  # per case
    # The batch's deadline (driver_session.CASE_SECONDS, as for every client case): past it, no
    # command is sent; the batch's cases run again one by one, each with a deadline of its own.
    ends: float = field(default_factory=lambda: time.monotonic() + driver_session.CASE_SECONDS)

    def prefix(self, name: str) -> str:
        """A subject prefix no other pair, batch or case uses."""
        made = f"interop.p{self.index}.{name}.{self.token}"
        self.issued.append(made)
        return made

    def _relative(self, message: Message) -> Message:
        """A message in the vector's terms: under the prefix it was sent below, relative."""
        for prefix in self.issued:
            if message.subject == prefix or message.subject.startswith(prefix + "."):
                return message.relative(prefix)
        return message

    def _of(self, tag: str) -> Reported:
        return self.reported.setdefault(tag, Reported())

    def observed(self, tag: str) -> str:
        """What the libraries reported for the case ``tag`` (canonical; "" for nothing)."""
        return self.reported[tag].observed() if tag in self.reported else ""

    def transcript(self, tag: str) -> str:
        """What both sides did and reported for the case ``tag`` (and the batch as a whole)."""
        return "\n".join(line for mine, line in self.log if mine in (None, tag))

    def _call(self, side: Literal["a", "b"], tag: str | None, cmd: str, **args: Any) -> Any:
        driver, name = (
            (self.a, f"A ({self.a_name})") if side == "a" else (self.b, f"B ({self.b_name})")
        )
        if time.monotonic() >= self.ends:
            raise Overrun(f"stopped at {side.upper()} {cmd}")
        try:
            result = _call(driver, name, cmd, **args)
        except Refused as exc:
            self.log.append((tag, f"{side.upper()} {cmd}: {exc}"))
            if tag is not None:
                self._of(tag).refused.append(f"{side.upper()} {cmd}: {exc.reply.error_type}")
            raise
        return result

    def publish(self, message: Message, tag: str | None = None) -> None:
        self.log.append((tag, f"A publish {show(message)}"))
        self._call("a", tag, "publish", **publish_args(message))

    def answer(self, message: Message, tag: str) -> None:
        """B publishes (its response to a request)."""
        self.log.append((tag, f"B publish {show(message)}"))
        self._call("b", tag, "publish", **publish_args(message))

    def request(
        self, message: Message, timeout_ms: int, call_timeout: float, tag: str
    ) -> DriverReply:
        """A's request (its library supplies the reply subject); the driver's answer as is."""
        self.log.append((tag, f"A request {show(message)} timeout_ms={timeout_ms}"))
        args = publish_args(message)
        del args["reply"]
        reply = self.a.call("request", timeout=call_timeout, timeout_ms=timeout_ms, **args)
        if reply.ok:
            response = message_from_driver(reply.result["message"])
            got = f"response {show(response)}"
            self._of(tag).answer = response
        else:
            got = f"failed: {reply.error_type}: {reply.error_message}"
            self._of(tag).answer = str(reply.error_type)
        self.log.append((tag, f"A request {got}"))
        return reply

    def subscribe(self, subject: str, queue: str | None = None, tag: str | None = None) -> str:
        result = self._call("b", tag, "subscribe", subject=subject, queue=queue)
        handle = str(result["sub"])
        pattern = self._relative(Message(subject)).subject
        index = sum(1 for mine in self.tags.values() if mine is not None and mine == tag)
        self.tags[handle] = tag
        self.labels[handle] = f"queue {queue} {pattern}" if queue else f"{index} {pattern}"
        in_queue = "" if queue is None else f" queue={queue!r}"
        self.log.append((tag, f"B subscribe {subject!r}{in_queue}: sub {handle}"))
        return handle

    def flush(self, side: Literal["a", "b"]) -> None:
        self._call(side, None, "flush", timeout_ms=5000)

    def unsubscribe(self, handles: Iterable[str]) -> None:
        for handle in handles:
            self.b.call("unsubscribe", sub=handle, max=None)

    def gather(
        self,
        handles: Iterable[str],
        want: int,
        timeout: float = DELIVERY_TIMEOUT,
        give_up: Callable[[], bool] = lambda: False,
    ) -> Delivered:
        """B's messages for ``handles`` until ``want`` arrived, ``timeout`` passed or
        ``give_up()`` (polled) says nothing more will come."""
        delivered = Delivered({handle: [] for handle in handles})
        deadline = time.monotonic() + timeout
        while delivered.count < want and (remaining := deadline - time.monotonic()) > 0:
            if give_up():
                break
            for event in self.b.events(timeout=min(remaining, POLL), count=1):
                self.take(delivered, event)
        return delivered

    def take(self, delivered: Delivered, event: dict[str, Any]) -> None:
        """One event of B's into ``delivered``, and into the log."""
        delivered.take(event)
        if event["event"] == "message":
            message = message_from_driver(event)
            tag = self.tags.get(event["sub"])
            self.log.append((tag, f"B event message sub {event['sub']}: {show(message)}"))
            if tag is not None:
                label = self.labels[event["sub"]]
                self._of(tag).received.setdefault(label, []).append(self._relative(message))
        else:
            self.log.append((None, f"B event {event}"))

    def sync(self, prefix: str) -> None:
        """Return once the server knows B's subscriptions: B gets its own message on a subject
        it subscribed after them (the server handles one connection's lines in order). A flush
        alone is not enough: a library's flush may only write its buffer, without PING/PONG."""
        subject = f"{prefix}-sync"  # outside prefix.>, so no scenario subscription matches it
        handle = self.subscribe(subject)
        self._call("b", None, "publish", **publish_args(Message(subject)))
        self.gather([handle], want=1)  # a library that never echoes just costs the timeout
        self.unsubscribe([handle])

    def settle(self, delivered: Delivered) -> None:
        """Flush both sides, then take whatever else B delivers (duplicates, non-matches)."""
        self.flush("a")
        self.flush("b")
        for event in self.b.events(timeout=SETTLE):
            self.take(delivered, event)


@dataclass
class Delivered:
    """Messages B delivered per subscription handle, and the errors it reported meanwhile."""

    messages: dict[str, list[Message]]
    notes: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return sum(len(found) for found in self.messages.values())

    def take(self, event: dict[str, Any]) -> None:
        if event["event"] == "message":
            if event["sub"] in self.messages:  # others are leftovers of earlier batches
                self.messages[event["sub"]].append(message_from_driver(event))
        elif event["event"] == "error":
            self.notes.append(f"B reported {event['type']}: {event['message']}")
        else:
            self.notes.append("B reported its connection closed")

    def note(self) -> str:
        return f" [{'; '.join(self.notes)}]" if self.notes else ""
