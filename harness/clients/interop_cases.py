"""Interop vectors on one (A, B) pair: B subscribes, A publishes or requests, and what each
library reports goes to ``conformance.interop`` to be judged.

Cases come from vector files (kind ``interop``); those of one group and action run together as a
batch (one subscription sync, one settling wait), each under a subject prefix of its own so
cases never see each other's messages. A case whose capabilities a library's hello lacks is
skipped with the reason before anything is asked; a library refusing what the documents allow
fails the case, while an answer about the driver (``unsupported``: a skip; ``invalid``: an
error) is never the library's failure (``driver.rule``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from ...conformance import interop, vectors
from ...conformance.interop import InteropSpec, Message
from ...conformance.vectors import Problem, Source
from ..results import Found, bounded
from .driver import DriverError, DriverReply, deadline, rule
from .interop_pair import (
    Delivered,
    Pair,
    Refused,
    message_from_driver,
)

Outcome = Literal["pass", "fail", "error", "skip"]
KIND = "interop"
REQUEST_TIMEOUT_MS = 5000
TRANSCRIPT_LIMIT = 8000  # characters of a row's transcript kept in the details side file


@dataclass(frozen=True)
class InteropCase:
    """An interop vector, decoded."""

    id: str
    group: str
    level: str
    description: str
    source: Source
    spec: InteropSpec


def load_cases(cases: Iterable[vectors.Case]) -> tuple[list[InteropCase], list[Problem]]:
    """The interop cases among loaded vectors, and a problem (file, case, field) for each one the
    schema accepts but that cannot be run (a receiver naming a subscription that is not there)."""
    found, problems = [], []
    for case in cases:
        if case.kind != KIND:
            continue
        try:
            spec = interop.parse(case.data)
        except vectors.Mismatch as exc:
            problems.append(Problem(case.file, case.id, exc.field, str(exc)))
            continue
        found.append(
            InteropCase(
                case.id, case.group, case.level, case.data["description"], case.source, spec
            )
        )
    return found, problems


def batches(cases: Sequence[InteropCase]) -> list[tuple[InteropCase, ...]]:
    """The cases by (group, action), in the order each first appears."""
    grouped: dict[tuple[str, str], list[InteropCase]] = {}
    for case in cases:
        grouped.setdefault((case.group, case.spec.action), []).append(case)
    return [tuple(batch) for batch in grouped.values()]


def judge(problems: Sequence[str], note: str = "") -> Found:
    if problems:
        return Found("fail", "; ".join(problems) + note, 0.0)
    return Found("pass", "", 0.0)


def refused(exc: Refused) -> Found:
    """A library refusing what the documents allow fails the case; an answer about the driver
    (lacking the API, a request it calls malformed) is its ruling instead (driver.rule)."""
    ruling = rule(exc.reply, exc.cmd)
    if ruling is None:
        return Found("fail", str(exc), 0.0)
    message = f"{exc.side}: {ruling.message}"
    return Found(ruling.outcome, message, 0.0, category=ruling.category)


Lacking = Callable[[InteropCase], str | None]  # why a pair's libraries cannot run a case


def run_batch(pair: Pair, batch: Sequence[InteropCase], lacking: Lacking) -> list[Found]:
    """What ``pair`` did with every case of ``batch``, in its order, each with its transcript (the
    interop rows' ``Found``s, built here; a row's duration is its share of the batch's)."""
    verdicts: dict[str, Found] = {}
    running = []
    for case in batch:
        if (reason := lacking(case)) is not None:
            verdicts[case.id] = Found("skip", reason, 0.0)
        else:
            running.append(case)
    if running:
        run = _run_publish if batch[0].spec.action == "publish" else _run_requests
        verdicts.update(run(pair, running))
    return [_with_transcript(verdicts[case.id], pair, case) for case in batch]


def _with_transcript(found: Found, pair: Pair, case: InteropCase) -> Found:
    if found.outcome in ("pass", "skip"):
        return found  # evidence is for what went wrong
    return replace(found, transcript=transcript(pair, case))


def transcript(pair: Pair, case: InteropCase) -> str:
    """What both sides did and reported for ``case``, bounded in size."""
    return bounded(pair.transcript(case.id), TRANSCRIPT_LIMIT)


# --- publish: B's subscriptions, A's messages, B's receivers -------------------------------------


def _run_publish(pair: Pair, cases: Sequence[InteropCase]) -> dict[str, Found]:
    verdicts: dict[str, Found] = {}
    prefixes = {case.id: pair.prefix(f"c{n}") for n, case in enumerate(cases)}
    handles: dict[str, list[str]] = {case.id: [] for case in cases}
    for case in cases:
        try:
            for subscription in case.spec.subscriptions:
                subject = interop.under(prefixes[case.id], subscription.subject)
                handles[case.id].append(pair.subscribe(subject, subscription.queue, tag=case.id))
        except Refused as exc:
            verdicts[case.id] = refused(exc)
    pair.sync(pair.prefix("sync"))
    for case in cases:
        if case.id in verdicts:
            continue
        try:
            for message in case.spec.messages:
                pair.publish(message.under(prefixes[case.id]), tag=case.id)
        except Refused as exc:
            verdicts[case.id] = refused(exc)
    pair.flush("a")
    awaited = [handle for case in cases if case.id not in verdicts for handle in handles[case.id]]
    want = sum(
        len(receiver.messages)
        for case in cases
        if case.id not in verdicts
        for receiver in case.spec.receivers
    )
    delivered = pair.gather(awaited, want=want)
    pair.settle(delivered)
    pair.unsubscribe(handle for found in handles.values() for handle in found)
    for case in cases:
        if case.id not in verdicts:
            problems = _receiver_problems(case, prefixes[case.id], handles[case.id], delivered)
            verdicts[case.id] = judge(problems, delivered.note())
    return verdicts


def _receiver_problems(
    case: InteropCase, prefix: str, handles: list[str], delivered: Delivered
) -> list[str]:
    """Each receiver's deliveries judged; a subscription in no receiver must get nothing."""
    spec = case.spec
    listed = {index for receiver in spec.receivers for index in receiver.subscriptions}
    unlisted = [index for index in range(len(handles)) if index not in listed]
    receivers = (
        [*spec.receivers, interop.Receiver(tuple(unlisted), ())] if unlisted else spec.receivers
    )
    problems = []
    for receiver in receivers:
        got = [
            (index, message)
            for index in receiver.subscriptions
            for message in delivered.messages[handles[index]]
        ]
        expected = [message.under(prefix) for message in receiver.messages]
        problems += interop.judge_receiver(expected, got, spec.header_order)
    return problems


# --- request: A requests, B answers on the reply subject it received ----------------------------


def _run_requests(pair: Pair, cases: Sequence[InteropCase]) -> dict[str, Found]:
    verdicts: dict[str, Found] = {}
    handles: dict[str, tuple[str, str]] = {}
    for n, case in enumerate(cases):
        prefix = pair.prefix(f"c{n}")
        assert case.spec.request is not None
        try:
            subject = interop.under(prefix, case.spec.request.subject)
            handles[case.id] = (prefix, pair.subscribe(subject, tag=case.id))
        except Refused as exc:
            verdicts[case.id] = refused(exc)
    pair.sync(pair.prefix("sync"))
    for case in cases:
        if case.id in verdicts:
            continue
        prefix, handle = handles[case.id]
        verdicts[case.id] = _judge_exchange(case, prefix, _request(pair, handle, case, prefix))
    pair.unsubscribe(handle for _, handle in handles.values())
    return verdicts


@dataclass
class _Seen:
    """One request/reply: what B got (and why it is missing or extra), what A got back."""

    message: Message | None
    problems: list[str]
    note: str
    answered: DriverReply  # A's request command
    requester: str  # A's label
    refused: Refused | None = None  # B's library refused to publish the response


def _request(pair: Pair, handle: str, case: InteropCase, prefix: str) -> _Seen:
    """A requests (in a thread: the call blocks) while B receives and answers."""
    spec = case.spec
    assert spec.request is not None and spec.response is not None
    request = spec.request.under(prefix)
    answer: list[DriverReply | BaseException] = []
    call_timeout = deadline("request", {"timeout_ms": REQUEST_TIMEOUT_MS})

    def request_in_a() -> None:
        try:
            answer.append(pair.request(request, REQUEST_TIMEOUT_MS, call_timeout, tag=case.id))
        except BaseException as exc:  # re-raised in the calling thread
            answer.append(exc)

    worker = threading.Thread(target=request_in_a, name="interop-request", daemon=True)
    worker.start()
    try:
        delivered = pair.gather(
            [handle], want=1, timeout=REQUEST_TIMEOUT_MS / 1000, give_up=lambda: bool(answer)
        )
        got, problems = _single(delivered, handle, "the request")
        no = None
        if got is not None and got.reply is not None:
            response = replace(spec.response, subject=got.reply)
            try:
                pair.answer(response, tag=case.id)
            except Refused as exc:
                no = exc  # A's request then times out
    finally:
        worker.join(call_timeout)
    if not answer:
        raise DriverError(f"A ({pair.a_name})'s request did not return in {call_timeout:g} s")
    if isinstance(answer[0], BaseException):
        raise answer[0]
    return _Seen(got, problems, delivered.note(), answer[0], f"A ({pair.a_name})", no)


def _single(delivered: Delivered, handle: str, what: str) -> tuple[Message | None, list[str]]:
    """The one message ``handle`` should have got, or why there is none (or more)."""
    found = delivered.messages[handle]
    if not found:
        return None, [f"B received nothing for {what} within {REQUEST_TIMEOUT_MS / 1000:g} s"]
    if len(found) > 1:
        return found[0], [f"B received {len(found)} messages for {what}, 1 was sent"]
    return found[0], []


def _judge_exchange(case: InteropCase, prefix: str, seen: _Seen) -> Found:
    """One row from the request as B saw it and the response as A saw it, as the case asks: a
    failure seen outweighs a skip."""
    spec = case.spec
    verdicts = []
    if spec.expect_request is not None:
        verdicts.append(_judge_request(spec.expect_request.under(prefix), seen))
    if spec.expect_response is not None:
        verdicts.append(_judge_response(spec.expect_response, seen))
    for outcome in ("fail", "skip"):
        messages = [v.message for v in verdicts if v.outcome == outcome]
        if messages:
            return Found(outcome, "; ".join(dict.fromkeys(messages)), 0.0)
    return Found("pass", "", 0.0)


def _requester_refused(seen: _Seen) -> Found:
    verdict = refused(Refused(seen.requester, "request", seen.answered))
    return replace(verdict, message=verdict.message + seen.note)


def _judge_request(expected: Message, seen: _Seen) -> Found:
    if seen.message is None and not seen.answered.ok:
        return _requester_refused(seen)  # e.g. the library has no request API
    problems = [f"request as B received it: {p}" for p in seen.problems]
    if seen.message is not None:
        problems += interop.judge_request(expected, seen.message)
    return judge(problems, seen.note)


def _judge_response(expected: Message, seen: _Seen) -> Found:
    if seen.refused is not None:
        return refused(seen.refused)
    if not seen.answered.ok:
        return _requester_refused(seen)
    if seen.message is None or seen.message.reply is None:
        return Found("fail", "A got a response although B never answered", 0.0)
    got = message_from_driver(seen.answered.result["message"])
    return judge(interop.judge_response(expected, seen.message.reply, got), seen.note)
