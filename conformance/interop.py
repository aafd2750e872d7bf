"""Interop vectors: what library B must report when library A publishes or requests.

A case of kind ``interop`` says what A does (publish messages to B's subscriptions, or send a
request B answers) and what B (and, for a request, A) must report. Everything here is pure: the
rules that give the expectation from what A sent (``expected_*``), the capabilities each side
needs, and the comparisons that judge what a library reported. The harness only drives the
libraries and hands their reports to ``judge_receiver``, ``judge_request`` and
``judge_response``.

Subjects in a vector are relative to a prefix the runner picks per pair and case, so cases never
see each other's messages: ``x`` stands for ``P.x`` and the empty subject for ``P`` itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from .subjects import matches
from .vector_values import (
    BytesError,
    Mismatch,
    decode_bytes,
    encode_bytes,
)

Headers = tuple[tuple[str, str], ...]
HeaderOrder = Literal["exact", "per-name"]
Action = Literal["publish", "request"]
WINDOW = 16  # bytes a byte-level difference shows
OWS = " \t"  # the optional whitespace around a header value (ADR-4: "optional whitespace")
SYMBOLIC_PREFIX = "P"  # the prefix the pure rules place relative subjects under


def under(prefix: str, relative: str) -> str:
    """A vector's relative subject below ``prefix`` (the empty subject is the prefix itself)."""
    return f"{prefix}.{relative}" if relative else prefix


def relative(prefix: str, subject: str) -> str:
    """The inverse of ``under``: ``subject`` relative to ``prefix``; one outside it as it is (a
    library's own inbox)."""
    if subject == prefix:
        return ""
    return subject[len(prefix) + 1 :] if subject.startswith(prefix + ".") else subject


@dataclass(frozen=True)
class Message:
    """One message: subject and reply relative to the case's prefix until ``under`` places them."""

    subject: str
    reply: str | None = None
    headers: Headers | None = None  # None: sent without a header block
    payload: bytes = b""

    def under(self, prefix: str) -> Message:
        reply = None if self.reply is None else under(prefix, self.reply)
        return replace(self, subject=under(prefix, self.subject), reply=reply)

    def relative(self, prefix: str) -> Message:
        """The inverse of ``under`` (what a library reported, in the vector's terms)."""
        reply = None if self.reply is None else relative(prefix, self.reply)
        return replace(self, subject=relative(prefix, self.subject), reply=reply)

    def to_vector(self) -> dict[str, Any]:
        out: dict[str, Any] = {"subject": self.subject}
        if self.reply is not None:
            out["reply"] = self.reply
        if self.headers is not None:
            out["headers"] = [list(pair) for pair in self.headers]
        out["payload"] = encode_bytes(self.payload)
        return out


@dataclass(frozen=True)
class Subscription:
    subject: str  # a pattern, relative to the prefix
    queue: str | None = None


@dataclass(frozen=True)
class Receiver:
    """Subscriptions (indices into the case's) that together get each message exactly once: one
    plain subscription, or the members of one queue group."""

    subscriptions: tuple[int, ...]
    messages: tuple[Message, ...]


@dataclass(frozen=True)
class InteropSpec:
    """An interop case's input and expectation, decoded.

    publish: B subscribes ``subscriptions``, A publishes ``messages`` in order, and each receiver
    gets its messages. request: B subscribes to the request's subject and answers each request by
    publishing ``response`` to the reply subject it received; A requests (its library supplies
    the reply subject). ``expect_request`` is what B must report of the request (its reply
    subject: any, but present), ``expect_response`` what A must report of the answer (its subject:
    the reply subject B received); a case may check either or both.
    """

    action: Action
    capabilities_a: tuple[str, ...]
    capabilities_b: tuple[str, ...]
    subscriptions: tuple[Subscription, ...] = ()
    messages: tuple[Message, ...] = ()
    receivers: tuple[Receiver, ...] = ()
    request: Message | None = None
    response: Message | None = None
    expect_request: Message | None = None
    expect_response: Message | None = None
    # exact: the same header pairs in the same order. per-name: for each exact (case-sensitive)
    # name the same values in the same order; the order across names is not compared, because
    # the documents do not fix it (an API keyed by name may group or reorder names).
    header_order: HeaderOrder = "per-name"


# --- decoding a vector -------------------------------------------------------------------------


def _message(data: dict[str, Any], path: str) -> Message:
    headers = data.get("headers")
    return Message(
        subject=data.get("subject", ""),
        reply=data.get("reply"),
        headers=None if headers is None else tuple((name, value) for name, value in headers),
        payload=decode_bytes(data.get("payload", ""), f"{path}.payload"),
    )


def _receiver(data: dict[str, Any], path: str, count: int) -> Receiver:
    indices = tuple(data["subscriptions"])
    for i, index in enumerate(indices):
        if index >= count:
            raise Mismatch(
                f"{path}.subscriptions[{i}]",
                f"subscription {index} does not exist (input.subscriptions has {count})",
            )
    messages = data["messages"]
    return Receiver(
        indices, tuple(_message(m, f"{path}.messages[{i}]") for i, m in enumerate(messages))
    )


def parse(data: dict[str, Any]) -> InteropSpec:
    """A schema-valid interop case's ``input`` and ``expect`` decoded; ``Mismatch`` (with the
    field) for what the schema cannot see, such as a receiver naming a missing subscription."""
    inp, exp = data["input"], data["expect"]
    needs = inp.get("capabilities", {})
    common = {
        "action": inp["action"],
        "capabilities_a": tuple(needs.get("a", ())),
        "capabilities_b": tuple(needs.get("b", ())),
        "header_order": exp.get("header_order", "per-name"),
    }
    try:
        if inp["action"] == "publish":
            subscriptions = tuple(
                Subscription(s["subject"], s.get("queue")) for s in inp["subscriptions"]
            )
            return InteropSpec(
                **common,
                subscriptions=subscriptions,
                messages=tuple(
                    _message(m, f"input.messages[{i}]") for i, m in enumerate(inp["messages"])
                ),
                receivers=tuple(
                    _receiver(r, f"expect.receivers[{i}]", len(subscriptions))
                    for i, r in enumerate(exp["receivers"])
                ),
            )
        return InteropSpec(
            **common,
            request=_message(inp["request"], "input.request"),
            response=_message(inp["response"], "input.response"),
            expect_request=_optional(exp, "request"),
            expect_response=_optional(exp, "response"),
        )
    except BytesError as exc:
        raise Mismatch(exc.path, str(exc)) from exc


def _optional(exp: dict[str, Any], key: str) -> Message | None:
    return _message(exp[key], f"expect.{key}") if key in exp else None


# --- the rules: what the documents say arrives -------------------------------------------------


def arrives(sent: Message) -> Message:
    """What B gets of a message A sent: the same subject, reply, header names and payload; each
    header value without whitespace around it, which ADR-4 makes optional padding."""
    if sent.headers is None:
        return sent
    return replace(sent, headers=tuple((name, value.strip(OWS)) for name, value in sent.headers))


def _delivers(subscription: Subscription, message: Message) -> bool:
    pattern = under(SYMBOLIC_PREFIX, subscription.subject)
    return matches(pattern, under(SYMBOLIC_PREFIX, message.subject))


def expected_receivers(
    subscriptions: Sequence[Subscription], messages: Sequence[Message]
) -> tuple[Receiver, ...]:
    """Who gets what: each plain subscription every message its subject pattern matches; each
    queue group (same subject and queue name) every such message once, at one of its members."""
    groups: dict[tuple[str, str | None, int], list[int]] = {}
    for index, subscription in enumerate(subscriptions):
        # A plain subscription is a group of its own (keyed by its index, never shared).
        key = (subscription.subject, subscription.queue, -1 if subscription.queue else index)
        groups.setdefault(key, []).append(index)
    return tuple(
        Receiver(
            tuple(members),
            tuple(arrives(m) for m in messages if _delivers(subscriptions[members[0]], m)),
        )
        for members in groups.values()
    )


def needed_capabilities(spec: InteropSpec) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The driver capabilities (A's, B's) a case needs: headers on either side that sends or
    receives a header block, queue_groups for a queue subscription, request for the requester."""
    if spec.action == "publish":
        headed = any(m.headers is not None for m in spec.messages)
        queues = any(s.queue is not None for s in spec.subscriptions)
        a = ("headers",) if headed else ()
        b = (("headers",) if headed else ()) + (("queue_groups",) if queues else ())
        return a, b
    assert spec.request is not None and spec.response is not None
    headed = spec.request.headers is not None or spec.response.headers is not None
    return ("request",) + (("headers",) if headed else ()), ("headers",) if headed else ()


def expected_problems(spec: InteropSpec) -> list[tuple[str, str]]:
    """Where a case's stated expectation differs from what the rules give: (field, message)."""
    out = []
    a, b = needed_capabilities(spec)
    if (tuple(sorted(spec.capabilities_a)), tuple(sorted(spec.capabilities_b))) != (
        tuple(sorted(a)),
        tuple(sorted(b)),
    ):
        out.append(("input.capabilities", f"the case needs a: {list(a)}, b: {list(b)}"))
    if spec.action == "publish":
        want = expected_receivers(spec.subscriptions, spec.messages)
        if want != spec.receivers:
            shown = [
                {
                    "subscriptions": list(r.subscriptions),
                    "messages": [m.to_vector() for m in r.messages],
                }
                for r in want
            ]
            out.append(("expect.receivers", f"the documents give {shown!r}"))
        return out
    assert spec.request is not None and spec.response is not None
    if spec.expect_request is None and spec.expect_response is None:
        out.append(("expect", "a request case expects the request, the response or both"))
    for key, sent, stated in (
        ("request", spec.request, spec.expect_request),
        ("response", spec.response, spec.expect_response),
    ):
        if stated is not None and stated != arrives(sent):
            out.append((f"expect.{key}", f"the documents give {arrives(sent).to_vector()!r}"))
    return out


# --- comparing what a library reported ---------------------------------------------------------


def describe_bytes(what: str, expected: bytes, got: bytes) -> str | None:
    """None when equal; else where they first differ, with the bytes around it in hex."""
    if expected == got:
        return None
    at = next((i for i, (x, y) in enumerate(zip(expected, got, strict=False)) if x != y), None)
    at = min(len(expected), len(got)) if at is None else at
    start = max(0, at - 4)  # a little context before the difference
    end = start + WINDOW

    def window(data: bytes) -> str:
        shown = data[start:end].hex(" ") + ("..." if len(data) > end else "")
        ends = "(ends)" if len(data) <= at else ""
        return " ".join(part for part in (f"[{start}:]", shown, ends) if part)

    return (
        f"{what}: expected {len(expected)} bytes, received {len(got)}; "
        f"first difference at byte {at}: expected {window(expected)}, received {window(got)}"
    )


def describe_text(what: str, expected: str, got: str) -> str | None:
    """A byte-level difference of two strings (their UTF-8), with both shown when short."""
    detail = describe_bytes(what, expected.encode(), got.encode())
    if detail is None:
        return None
    if len(expected) + len(got) <= 160:
        detail += f" (expected {expected!r}, received {got!r})"
    return detail


def _by_name(headers: Headers) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for name, value in headers:
        grouped.setdefault(name, []).append(value)
    return grouped


def describe_headers(expected: Headers, got: Headers, order: HeaderOrder) -> list[str]:
    """The differences between two header lists (no headers is the empty list)."""
    if order == "exact":
        if list(expected) == list(got):
            return []
        problems = [f"headers: expected {list(expected)!r}, received {list(got)!r}"]
        for index, (mine, theirs) in enumerate(zip(expected, got, strict=False)):
            for part, x, y in (("name", mine[0], theirs[0]), ("value", mine[1], theirs[1])):
                if (detail := describe_text(f"header {index} {part}", x, y)) is not None:
                    return [*problems, detail]
        return problems
    want, have = _by_name(expected), _by_name(got)
    problems = []
    for name, values in want.items():
        if name not in have:
            folded = [other for other in have if other.lower() == name.lower()]
            hint = f" (received names differing only in case: {folded!r})" if folded else ""
            problems.append(f"header {name!r}: expected {values!r}, not received{hint}")
        elif have[name] != values:
            problem = f"header {name!r}: expected values {values!r}, received {have[name]!r}"
            for mine, theirs in zip(values, have[name], strict=False):
                if (detail := describe_text("first differing value", mine, theirs)) is not None:
                    problem += f"; {detail}"
                    break
            problems.append(problem)
    problems.extend(
        f"header {name!r}: received {values!r}, not expected"
        for name, values in have.items()
        if name not in want
    )
    return problems


def compare(
    expected: Message,
    got: Message,
    *,
    reply: Literal["exact", "present"] = "exact",
    order: HeaderOrder = "per-name",
) -> list[str]:
    """What differs between the message a library should have reported and the one it did."""
    problems = []
    if (detail := describe_text("subject", expected.subject, got.subject)) is not None:
        problems.append(detail)
    if reply == "present":
        if got.reply is None:
            problems.append("reply: none received, where the requester's library supplies one")
    elif expected.reply is None or got.reply is None:
        if expected.reply != got.reply:
            problems.append(f"reply: expected {expected.reply!r}, received {got.reply!r}")
    elif (detail := describe_text("reply", expected.reply, got.reply)) is not None:
        problems.append(detail)
    problems += describe_headers(expected.headers or (), got.headers or (), order)
    if (detail := describe_bytes("payload", expected.payload, got.payload)) is not None:
        problems.append(detail)
    return problems


def _label(message: Message) -> str:
    payload = message.payload if len(message.payload) <= 24 else message.payload[:24] + b"..."
    return f"{message.subject} {payload!r}"


def judge_receiver(
    expected: Sequence[Message],
    got: Sequence[tuple[int, Message]],
    order: HeaderOrder = "per-name",
) -> list[str]:
    """One receiver's deliveries, each (subscription index, message) as B reported them, against
    the messages it must get: each exactly once, at any member, nothing else."""
    unmatched = list(got)
    missing: list[Message] = []
    problems = []
    for message in expected:
        found = [(i, m) for i, m in unmatched if not compare(message, m, order=order)]
        if not found:
            missing.append(message)
        elif len(found) > 1:
            members = sorted(i for i, _ in found)
            problems.append(
                f"{_label(message)} delivered {len(found)} times (subscriptions {members})"
            )
        for entry in found:
            unmatched.remove(entry)
    if len(missing) == 1 and len(unmatched) == 1:
        # One message arrived changed: say field by field how.
        return problems + compare(missing[0], unmatched[0][1], order=order)
    problems += [f"{_label(m)} not received" for m in missing]
    problems += [f"{_label(m)} received, not expected" for _, m in unmatched]
    return problems


def judge_request(expected: Message, got: Message) -> list[str]:
    """The request as B reported it: A's subject, headers and payload, and some reply subject."""
    return [f"request as B received it: {p}" for p in compare(expected, got, reply="present")]


def judge_response(expected: Message, reply_subject: str, got: Message) -> list[str]:
    """The response as A reported it: B's headers and payload, on the reply subject B got."""
    want = replace(expected, subject=reply_subject)
    return [f"response as A received it: {p}" for p in compare(want, got)]
