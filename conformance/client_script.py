"""Fake-server scripts for client libraries (vector kind ``client.script``), sans-I/O.

A script says what a fake server does and asks of a client library through its driver, step by
step, and what the library must send and report. ``harness.clients.scripts`` executes the steps
(sockets, the driver, clocks); every judgement is made here, so an implementer reading the
vectors and this module sees one reading of a script. ``evaluate`` checks a script against the
reference: its variables are saved before use, its bytes decode, and what a push is expected to
deliver is what the reference client parser makes of the pushed bytes.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass
from typing import Any

from . import headers, judge, protocol
from .transport_model import OPENING_NOTE
from .vector_values import Mismatch, decode_bytes, excerpt, op_pattern

# The one key that says what a step does.
ACTIONS = (
    "call", "push", "push_info", "set", "close",
    "sent", "not_sent", "sent_bytes", "event", "no_event", "events",
    "client_closes", "open", "distinct",
)  # fmt: skip
WITHIN = 2.0  # seconds a step waits for something the library should do, unless it says
QUIET = 0.5  # seconds a step watches for something the library should not do, unless it says
# Variables the runner provides: the address of a second fake server that accepts connections
# (for connect_urls) and nothing more.
BUILTIN_VARS = frozenset({"spare_address"})
_SAMPLE = "1"  # what a variable stands for when the reference reads a script on its own

# Bytes a push may have when it is cut at every position (or into single bytes).
SPLIT_LIMIT = 4096


@dataclass(frozen=True)
class Step:
    index: int
    action: str
    data: dict[str, Any]

    @property
    def path(self) -> str:
        return f"input.steps[{self.index}]"


def steps(script: dict[str, Any]) -> list[Step]:
    """The script's steps with their actions; a step with no action, or two, is a Mismatch."""
    out = []
    for i, data in enumerate(script.get("steps", [])):
        found = [a for a in ACTIONS if a in data]
        if "push" in found and "event" in found:  # a push's event is what it must deliver
            found.remove("event")
        if len(found) != 1:
            raise Mismatch(f"input.steps[{i}]", f"a step has exactly one of {ACTIONS}: {found}")
        out.append(Step(i, found[0], data))
    return out


def runs_over(script: dict[str, Any], transport: str) -> bool:
    """Whether a script runs over ``transport``: every script over every transport of a run but
    a case of the transports themselves, which runs over the one it names (``transport``: what
    the library is asked for; ``server.transport``: what the fake server speaks, when not that)."""
    return script.get("transport", transport) == transport


def opening_problem(want: str, seen: list[str]) -> str | None:
    """``opening``: what the client sent first on its connection, as the fake server reported
    the reference's reading of it (``transport_model.opening_note``), must be ``want``."""
    first = next((s.removeprefix(OPENING_NOTE) for s in seen if s.startswith(OPENING_NOTE)), None)
    if first == want:
        return None
    return f"{OPENING_NOTE}{first or 'not seen'}, expected {want}"


# --- variables -----------------------------------------------------------------------------------


def _is_var(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"var"}


def substitute(value: Any, variables: dict[str, str], path: str) -> Any:
    """``value`` with every ``{"var": name}`` replaced by the variable's value."""
    if _is_var(value):
        name = value["var"]
        if name not in variables:
            raise Mismatch(path, f"variable {name!r} is used before a step saves it")
        return variables[name]
    if isinstance(value, list):
        return [substitute(v, variables, f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {k: substitute(v, variables, f"{path}.{k}") for k, v in value.items()}
    return value


def saves(step: Step) -> dict[str, str]:
    """The variables a step saves: {name: field of what it found}."""
    return dict(step.data.get("save", {}))


# --- values --------------------------------------------------------------------------------------


def same(want: Any, got: Any) -> bool:
    """JSON equality that keeps types apart (``true`` is not ``1``, ``1`` is not ``1.0``)."""
    if type(want) is not type(got):
        return False
    if isinstance(want, dict):
        return want.keys() == got.keys() and all(same(want[k], got[k]) for k in want)
    if isinstance(want, list):
        return len(want) == len(got) and all(same(a, b) for a, b in zip(want, got, strict=True))
    return bool(want == got)


_JSON_TYPES = {"string": str, "boolean": bool, "integer": int, "object": dict, "array": list}


def option_problems(constraints: dict[str, Any], options: dict[str, Any]) -> list[str]:
    """CONNECT options against constraints: a plain value must be equal (types kept); an object
    ``{"equals", "in", "type", "optional"}`` says more (``optional``: the field may be absent)."""
    problems = []
    for name, rule in constraints.items():
        if not (isinstance(rule, dict) and rule.keys() <= {"equals", "in", "type", "optional"}):
            rule = {"equals": rule}
        if name not in options:
            if not rule.get("optional", False):
                problems.append(f"CONNECT has no {name}")
            continue
        value = options[name]
        wanted_type = _JSON_TYPES.get(rule.get("type", ""))
        if wanted_type is not None and (
            not isinstance(value, wanted_type) or (wanted_type is int and isinstance(value, bool))
        ):
            problems.append(f"CONNECT {name} is {value!r}, not of type {rule['type']}")
        if "equals" in rule and not same(rule["equals"], value):
            problems.append(f"CONNECT {name} is {value!r}, expected {rule['equals']!r}")
        if "in" in rule and not any(same(v, value) for v in rule["in"]):
            problems.append(f"CONNECT {name} is {value!r}, not one of {rule['in']!r}")
    return problems


def block_of(data: dict[str, Any]) -> headers.HeaderBlock:
    """A header block written as ``{"status", "description", "headers"}``."""
    return headers.HeaderBlock(
        data.get("status"),
        data.get("description"),
        tuple((k, v) for k, v in data.get("headers", [])),
    )


# --- what the client sends -----------------------------------------------------------------------

_OP_KEYS = ("save", "matches", "options", "block")


def _op_names(pattern: dict[str, Any]) -> tuple[str, ...]:
    names = pattern["op"]
    return tuple(names) if isinstance(names, list) else (names,)


def select_sent(pattern: dict[str, Any], ops: list[dict[str, Any]], start: int) -> int | None:
    """Where the operation a pattern asks about is: the first from ``start`` with one of its op
    names and, when the pattern gives one, its subject. The other fields are then judged."""
    names = _op_names(pattern)
    for i in range(start, len(ops)):
        op = ops[i]
        if op.get("op") in names and (
            "subject" not in pattern or op.get("subject") == pattern["subject"]
        ):
            return i
    return None


def op_problems(pattern: dict[str, Any], op: dict[str, Any], path: str) -> list[str]:
    """An operation the client sent (``protocol.event_fields``) against a pattern: the fields
    given (types kept), ``matches`` regular expressions, CONNECT ``options`` constraints and, for
    HPUB, the ``block`` its header bytes must parse to."""
    fields = {k: v for k, v in pattern.items() if k not in (*_OP_KEYS, "op")}
    problems = [
        f"{name} is {excerpt(op.get(name), 120)}, expected {excerpt(want, 120)}"
        for name, want in op_pattern(fields, path).items()
        if not same(want, op.get(name))
    ]
    for name, regex in pattern.get("matches", {}).items():
        value = op.get(name)
        if not isinstance(value, str) or re.search(regex, value) is None:
            problems.append(f"{name} {value!r} does not match {regex!r}")
    if "options" in pattern:
        problems += option_problems(pattern["options"], op.get("options", {}))
    if "block" in pattern:
        problems += _block_problems(pattern["block"], op.get("headers") or b"")
    return problems


def _block_problems(block: dict[str, Any], sent: bytes) -> list[str]:
    """The header bytes a client sent against a pattern's block, by the one comparison of
    encoded blocks (``conformance.judge.same_block``)."""
    want = headers.encode_block(block_of(block))
    if isinstance(want, headers.HeaderError):
        return [f"the pattern's block cannot be encoded ({want.reason}: {want.detail})"]
    if judge.same_block(want, sent) is None:
        return [f"header block {sent!r} parses to {excerpt(headers.parse_block(sent), 200)}"]
    return []


def saved_values(pattern: dict[str, Any], found: dict[str, Any]) -> dict[str, str]:
    """The variables a pattern saves from what it found (an operation, an answer's result)."""
    return {name: str(found.get(field)) for name, field in pattern.get("save", {}).items()}


def bytes_problem(want: bytes, received: bytes) -> str | None:
    """``sent_bytes``: the client's bytes must hold ``want`` exactly, somewhere."""
    if want in received:
        return None
    return f"the client's bytes do not hold {want!r} (the form the documents write)"


# --- what the library reports --------------------------------------------------------------------


def event_selects(pattern: dict[str, Any], event: dict[str, Any]) -> bool:
    """Whether a driver event is the one a pattern asks about: its kind, its subscription and,
    for an error, its text (a library may report other errors first)."""
    text = pattern.get("message_contains")
    return (
        event.get("event") == pattern["event"]
        and ("sub" not in pattern or event.get("sub") == pattern["sub"])
        and (text is None or text.lower() in str(event.get("message", "")).lower())
    )


def event_problems(pattern: dict[str, Any], event: dict[str, Any]) -> list[str]:
    """A driver event against a pattern: ``subject``, ``reply``, ``payload`` (bytes), ``block``
    (the status line and headers the library reports, judged as ``conformance.judge`` judges a
    header block)."""
    problems = [
        f"{name} {event.get(name)!r}"
        for name in ("subject", "reply")
        if name in pattern and event.get(name) != pattern[name]
    ]
    if "payload" in pattern:
        payload = base64.b64decode(event.get("payload_b64") or "")
        if payload != decode_bytes(pattern["payload"], "payload"):
            problems.append(f"payload {payload[:60]!r}")
    if "block" in pattern:
        pairs = tuple((name, value) for name, value in event.get("headers") or [])
        view = headers.HeaderBlock(event.get("status"), event.get("description"), pairs)
        judgement = judge.judge_block(block_of(pattern["block"]), view)
        if judgement.outcome != "pass":
            problems.append(judgement.message)
    return problems


def answer_problem(expected: str, ok: bool, error_type: str | None) -> str | None:
    """A driver answer against ``answer``: ``ok``, ``error`` (any error), ``any``, or one error
    type (``no_responders``, ``refused``, ...)."""
    if expected == "any":
        return None
    good = ok if expected == "ok" else not ok and expected in ("error", error_type)
    if good:
        return None
    got = "ok" if ok else f"error {error_type}"
    return f"the driver answered {got}, expected {expected}"


def split_plans(size: int, split: Any, path: str = "split") -> list[list[int]]:
    """The ways a push of ``size`` bytes is cut into segments, one send each: none, the offsets
    given, ``"bytes"`` (one byte a segment) or ``"each-position"`` (in two, at every position in
    turn: one send per position). Cutting at every byte is bounded (SPLIT_LIMIT): its cost grows
    with the square of the push."""
    if split is None:
        return [[]]
    if split in ("bytes", "each-position") and size > SPLIT_LIMIT:
        raise Mismatch(path, f"{split} over {size} bytes: at most {SPLIT_LIMIT} bytes are cut so")
    if split == "bytes":
        return [list(range(1, size))]
    if split == "each-position":
        return [[cut] for cut in range(1, size)]
    return [sorted(split)]


# --- the reference reading -----------------------------------------------------------------------


def _reference_event(data: bytes, path: str) -> dict[str, Any]:
    """What the reference client parser makes of pushed bytes meant as one delivery, in the
    driver's event form."""
    events = protocol.Parser(protocol.Direction.SERVER).feed(data)
    if len(events) != 1 or not isinstance(events[0], protocol.Msg | protocol.HMsg):
        raise Mismatch(path, f"the reference parses the pushed bytes to {excerpt(events, 200)}")
    op = events[0]
    event = {
        "event": "message",
        "subject": op.subject,
        "reply": op.reply,
        "payload_b64": base64.b64encode(op.payload).decode("ascii"),
    }
    if isinstance(op, protocol.HMsg):
        block = headers.parse_block(op.headers)
        if isinstance(block, headers.HeaderError):
            raise Mismatch(path, f"the reference rejects the header block: {block.reason}")
        event |= {
            "status": block.status,
            "description": block.description,
            "headers": [list(p) for p in block.fields],
        }
    return event


def evaluate(script: dict[str, Any]) -> None:
    """Read a script as the reference does; a ``Mismatch`` names the field when it is wrong."""
    variables = {name: _SAMPLE for name in BUILTIN_VARS}
    if "transport" in script.get("server", {}) and "transport" not in script:
        # What the fake server speaks differs from what the library is asked for: which that is
        # must be pinned, not every transport of a run.
        raise Mismatch("input.server.transport", "a server's transport needs the case's own")
    served = script.get("server", {}).get("transport", script.get("transport"))
    if script.get("server", {}).get("allow_non_tls") and served != "tls":
        raise Mismatch("input.server.allow_non_tls", f"marks a server of tls, not of {served}")
    if "opening" in script and "transport" not in script:  # only such a case sees it
        raise Mismatch("input.opening", "what the client sends first needs the case's transport")
    for step in steps(script):
        data = substitute({k: v for k, v in step.data.items() if k != "save"}, variables, step.path)
        if step.action == "push":
            pushed = decode_bytes(data["push"], f"{step.path}.push")
            split_plans(len(pushed), data.get("split"), f"{step.path}.split")
            if "event" in data:
                got = _reference_event(pushed, f"{step.path}.push")
                problems = event_problems(data["event"], got)
                if problems:
                    raise Mismatch(f"{step.path}.event", "; ".join(problems))
        elif step.action == "sent_bytes":
            decode_bytes(data["sent_bytes"], f"{step.path}.sent_bytes")
        elif step.action in ("sent", "not_sent"):
            patterns = data[step.action]
            for j, pattern in enumerate(patterns if isinstance(patterns, list) else [patterns]):
                op_pattern({k: v for k, v in pattern.items() if k not in _OP_KEYS},
                           f"{step.path}.{step.action}[{j}]")  # fmt: skip
                variables |= {name: _SAMPLE for name in pattern.get("save", {})}
        variables |= {name: _SAMPLE for name in saves(step)}
