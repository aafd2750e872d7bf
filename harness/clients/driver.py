"""Talk to a client-library driver: a child process speaking nats-conformance-driver/2 (or /1).

The protocol (schemas/driver-protocol.schema.json, harness/drivers/README.md) is JSON lines:
requests on the driver's stdin, responses and events on its stdout, free-form log on stderr.
This module adds what makes a misbehaving driver harmless: every wait has a deadline, every read a
size limit, every line from the driver is checked against the schema, and a driver that crashes,
hangs or writes garbage becomes a DriverError that says which, with the end of its stderr.
Drivers run in their own process group and die with the harness (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import io
import json
import os
import select
import signal
import subprocess
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal

import jsonschema

from ...conformance.verdicts import CONFORMANCE, ROBUSTNESS
from ..results import bounded
from ..runtime.certs import run_certificates
from ..runtime.processes import (
    SPAWNER,
    STOP_GRACE,
    exit_status,
    stop_process,
    wait_unreaped,
)

PROTOCOL = "nats-conformance-driver/2"
# Drivers still on /1 are accepted while they migrate: their hello has no capabilities.
PROTOCOLS = ("nats-conformance-driver/2", "nats-conformance-driver/1")
SCHEMA_PATH = Path(__file__).resolve().parents[2] / "schemas" / "driver-protocol.schema.json"
MAX_LINE = 64 << 20  # bytes in one line from the driver (a 32 MiB payload, base64, fits)
MAX_PENDING_EVENTS = 100_000  # unread events before a driver counts as flooding the harness
STDERR_KEPT = 64 << 10  # bytes of stderr kept for error messages
STDERR_TAIL_LINES = 20  # lines of stderr an error message shows
TRANSCRIPT_LIMIT = 20_000  # lines a transcript keeps; later ones are counted, not kept
TRANSCRIPT_KEPT = 4096  # characters of one line a transcript keeps
TEXT_SHOWN = 300  # characters of one line Transcript.text() shows
EXCHANGED_LINES = 8  # lines of the transcript a DriverError keeps: the last lines exchanged
EXIT_GRACE = 2.0  # seconds a driver has to exit after `exit` and EOF, before SIGTERM (schema)
CLOSE_WRITE_TIMEOUT = 1.0  # seconds close() spends sending `exit`
READER_JOIN = 2.0  # seconds close() waits for the reader threads after the process is gone
# Seconds to answer a command the schema gives no deadline (one it does not name, sent to see
# the driver refuse it; a command of a protocol whose schema has none, such as the streaming one).
DEFAULT_DEADLINE = 5.0

Direction = Literal["send", "recv", "stderr", "note"]
_MARKS: dict[str, str] = {"send": ">", "recv": "<", "stderr": "!", "note": "#"}


class DriverError(Exception):
    """The driver crashed, hung or broke the protocol; str(e) says which, with its stderr's end.

    ``cause`` is ``crashed``, ``hung`` or ``broken`` (garbage, a closed driver). ``command`` is the
    request in flight ("" when none was: it died while its events were awaited), ``exchanged``
    the last lines of its transcript. ``server_input`` is set by whoever knows: whether a server
    had just given the library something (bytes, a close) when it crashed or hung (``rule``)."""

    def __init__(
        self, message: str, cause: str = "broken", command: str = "", exchanged: str = ""
    ) -> None:
        super().__init__(message)
        self.cause = cause
        self.command = command
        self.exchanged = exchanged
        self.server_input = False


@dataclass
class DriverReply:
    ok: bool
    result: dict[str, Any]
    error_type: str | None
    error_message: str | None


@dataclass(frozen=True)
class TranscriptLine:
    at: float  # seconds since the driver was started
    direction: Direction
    text: str  # the line (cut to TRANSCRIPT_KEPT characters)
    size: int  # its full length in characters


@dataclass
class Transcript:
    """Every line both ways (and stderr, and notes such as the exit status), with times."""

    lines: list[TranscriptLine] = field(default_factory=list)
    dropped: int = 0
    started: float = field(default_factory=time.monotonic)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, direction: Direction, text: str) -> None:
        line = TranscriptLine(
            time.monotonic() - self.started, direction, text[:TRANSCRIPT_KEPT], len(text)
        )
        with self._lock:
            if len(self.lines) < TRANSCRIPT_LIMIT:
                self.lines.append(line)
            else:
                self.dropped += 1

    def text(self) -> str:
        """One line per entry: time in ms, direction (> sent, < received, ! stderr, # note)."""
        with self._lock:
            lines, dropped = list(self.lines), self.dropped
        shown = []
        for line in lines:
            text = line.text[:TEXT_SHOWN]
            if line.size > TEXT_SHOWN:
                text += f"... ({line.size} characters in all)"
            shown.append(f"  +{line.at * 1000:.1f}ms {_MARKS[line.direction]} {text}")
        if dropped:
            shown.append(f"  ... {dropped} more lines not kept")
        return "\n".join(shown)

    def tail(self, count: int) -> str:
        """The last ``count`` lines of ``text()`` (notes, stderr and both directions)."""
        return "\n".join(self.text().splitlines()[-count:])


@cache
def protocol_schema(path: Path = SCHEMA_PATH) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(path.read_text())
    return schema


@cache
def _validator(pointer: str, path: Path = SCHEMA_PATH) -> Any:
    """A validator for the schema's definition at ``pointer`` (e.g. "commands/flush/result")."""
    root = {key: value for key, value in protocol_schema(path).items() if key != "oneOf"}
    return jsonschema.Draft202012Validator({**root, "$ref": f"#/$defs/{pointer}"})


def commands(path: Path = SCHEMA_PATH) -> list[str]:
    """The commands the protocol of the schema at ``path`` names (default: driver/2's)."""
    return sorted(protocol_schema(path)["$defs"]["commands"])


def deadline(cmd: str, request: Mapping[str, Any], path: Path = SCHEMA_PATH) -> float:
    """Seconds the driver has to answer ``request`` (a ``cmd``): the command's documented
    deadline (its ``deadline`` in the schema: ``seconds``, plus the request's own timeout in ms at
    the path ``plus_ms``, or ``default_ms`` where the request leaves it out); DEFAULT_DEADLINE for
    a command without one. Fixed, not scaled by observed round trips: a hang is a robustness
    claim, so the library gets the full deadline, loaded machine or not (patience.HANG_AFTER)."""
    spec = protocol_schema(path)["$defs"]["commands"].get(cmd, {}).get("deadline")
    if spec is None:
        return DEFAULT_DEADLINE
    seconds = float(spec["seconds"])
    if "plus_ms" in spec:
        found: Any = request
        for key in spec["plus_ms"].split("/"):
            found = found.get(key) if isinstance(found, Mapping) else None
        own = found if isinstance(found, int | float) and not isinstance(found, bool) else None
        seconds += (spec["default_ms"] if own is None else own) / 1000
    return seconds


def capability_names() -> list[str]:
    """The capabilities a protocol-2 hello may declare (the schema's fixed vocabulary)."""
    return list(protocol_schema()["$defs"]["capability"]["enum"])


# What a driver must declare to be asked to connect over each transport (the URL's scheme says
# the rest: harness.runtime.streams.URL_SCHEMES).
TRANSPORT_CAPABILITIES: dict[str, tuple[str, ...]] = {
    "tcp": (),
    "tls": ("tls",),
    "tls-first": ("tls", "tls_first"),
    "ws": ("websocket",),
    "wss": ("websocket", "tls"),
    "ws-deflate": ("websocket", "websocket_compression"),
}


def transport_options(transport: str, ca: str | None = None) -> dict[str, Any]:
    """The ``connect`` options that ask a library for ``transport`` (beside the URL's scheme):
    where TLS is used, the CA file the server is verified by (``ca``; by default the run's CA,
    harness.runtime.certs, which signed the fake server's and the launched servers'
    certificates); the TLS-first handshake; permessage-deflate offered."""
    options: dict[str, Any] = {}
    if "tls" in TRANSPORT_CAPABILITIES[transport]:
        options["tls_ca_file"] = ca if ca is not None else str(run_certificates().ca)
    if transport == "tls-first":
        options["tls_first"] = True
    if transport == "ws-deflate":
        options["ws_compression"] = True
    return options


def schema_problem(value: Any, pointer: str, path: Path = SCHEMA_PATH) -> str | None:
    """Why ``value`` does not match the schema's definition at ``pointer`` (its most relevant
    errors, at most three); None when it does."""
    errors = sorted(
        _validator(pointer, path).iter_errors(value), key=jsonschema.exceptions.relevance
    )
    reasons: list[str] = []
    for error in errors:
        where = "/".join(str(part) for part in error.absolute_path)
        reason = f"{error.message} (at /{where})" if where else error.message
        if reason not in reasons:
            reasons.append(reason)
    return "; ".join(reasons[:3]) or None


def _describe_status(status: int) -> str:
    if status < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-status).name}"
        return f"was killed by signal {-status}"
    return f"exited with status {status}"


# --- what the driver's answers and failures make of a case ---------------------------------------

# Error types that speak of the driver, not of the library (the schema's error_type): the library
# has no such API, so the case cannot be asked (skip); the driver calls the suite's request
# malformed, so the driver and the suite disagree and nobody is judged (error). Every other error
# type is the library's own answer, which the case judges like any other.
ABOUT_THE_DRIVER: dict[str, str] = {"unsupported": "skip", "invalid": "error"}


@dataclass(frozen=True)
class Ruling:
    """What a driver's answer or failure makes of the case in flight, in place of a verdict on
    the library's behaviour."""

    outcome: Literal["skip", "error", "fail"]  # fail: in category robustness
    message: str
    category: str = CONFORMANCE


def rule(answer: DriverReply | DriverError, cmd: str = "", case: str = "") -> Ruling | None:
    """The one place where an answer about the driver, or its failure, becomes an outcome:

    - ``unsupported`` is a skip with the driver's reason; ``invalid`` an error (the driver and
      the suite disagree about the request ``cmd``);
    - a driver that broke the protocol (garbage, a wrong id, an answer of the wrong shape) is an
      error naming the command;
    - a crash or a hang is a robustness failure when a server had just given the library
      something (``DriverError.server_input``: the library died on what a server sent), an
      error otherwise (it died on a suite command); both name ``case``, the command in flight
      and the last lines exchanged.

    None for an answer that is the library's own: ok, or an error the case judges."""
    if isinstance(answer, DriverReply):
        outcome = None if answer.ok else ABOUT_THE_DRIVER.get(answer.error_type or "")
        if outcome == "skip":
            return Ruling("skip", f"{cmd} unsupported: {answer.error_message}")
        if outcome == "error":
            return Ruling(
                "error",
                f"the driver calls the suite's {cmd} request malformed (invalid: "
                f"{answer.error_message}): the driver and the suite disagree",
            )
        return None
    where = f"case {case}, " if case else ""
    command = answer.command or "none"
    exchanged = f"\nthe last lines exchanged:\n{answer.exchanged}" if answer.exchanged else ""
    if answer.cause in ("crashed", "hung") and answer.server_input:
        said = f"the library {answer.cause} on what a server sent it ({where}in flight: {command})"
        return Ruling("fail", f"{said}: {answer}{exchanged}", ROBUSTNESS)
    if answer.cause in ("crashed", "hung"):
        said = f"the driver {answer.cause} on a command of the suite ({where}command {command})"
        return Ruling("error", f"{said}: {answer}{exchanged}")
    said = f"the driver failed, not the library ({where}command {command})"
    return Ruling("error", f"{said}: {answer}{exchanged}")


_OPEN: weakref.WeakSet[DriverProcess] = weakref.WeakSet()


class DriverProcess:
    """One running driver. ``call`` sends a request and returns its reply; ``events`` returns
    the events that arrived (in order, each once); ``close`` stops the driver for good.
    A subclass speaking another JSON-lines protocol names its schema and protocol."""

    schema_path: Path = SCHEMA_PATH
    protocol: str = PROTOCOL

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        name: str,
        transcript: Transcript,
        cleanup: Callable[[], None] | None,
    ) -> None:
        self._proc = proc
        self.pid = proc.pid
        self.name = name
        self.transcript = transcript
        self._cleanup = cleanup
        self._cond = threading.Condition()
        self._responses: collections.deque[dict[str, Any]] = collections.deque()
        self._events: collections.deque[dict[str, Any]] = collections.deque()
        self._problem: str | None = None  # why the driver can no longer be trusted
        self._eof = False  # its stdout closed
        self._stderr = bytearray()
        self._stderr_done = threading.Event()
        self._call_lock = threading.Lock()
        self._next_id = 1
        self._asked = ""  # the request in flight, e.g. "'publish' (id 7)"; "" between requests
        self._closed = False
        assert proc.stdin is not None
        self._stdin = proc.stdin.fileno()
        os.set_blocking(self._stdin, False)  # writes wait in poll, with a deadline
        self._readers = [
            threading.Thread(target=self._read_stdout, name=f"{name}-stdout", daemon=True),
            threading.Thread(target=self._read_stderr, name=f"{name}-stderr", daemon=True),
        ]
        for reader in self._readers:
            reader.start()
        _OPEN.add(self)

    @classmethod
    def start(
        cls,
        cmd: list[str],
        *,
        cwd: str | Path | None = None,
        env: Mapping[str, str] | None = None,
        name: str | None = None,
        cleanup: Callable[[], None] | None = None,
    ) -> DriverProcess:
        """Start ``cmd`` as a driver. ``cleanup`` runs after the process is gone (e.g. removing
        a container the process ran)."""
        label = name or Path(cmd[0]).name
        transcript = Transcript()
        try:
            proc = SPAWNER.popen(
                list(cmd),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=dict(env) if env is not None else None,
                bufsize=0,
                close_fds=True,
                start_new_session=True,  # its own process group: close() stops the whole group
            )
        except OSError as exc:
            if cleanup is not None:
                cleanup()
            raise DriverError(f"driver {label}: cannot start {cmd[0]}: {exc}") from None
        transcript.add("note", f"started pid {proc.pid}: {' '.join(cmd)}")
        return cls(proc, label, transcript, cleanup)

    # --- reading ---------------------------------------------------------------------------------

    def _read_stdout(self) -> None:
        assert self._proc.stdout is not None
        stream = io.BufferedReader(self._proc.stdout, 1 << 16)  # readline without byte reads
        number = 0
        skipping = False  # inside an overlong line: drop the rest of it
        try:
            while line := stream.readline(MAX_LINE + 1):
                if skipping:
                    skipping = not line.endswith(b"\n")
                    continue
                number += 1
                if not line.endswith(b"\n") and len(line) > MAX_LINE:
                    self.transcript.add("recv", line[:TRANSCRIPT_KEPT].decode(errors="replace"))
                    self._fail(f"wrote garbage: line {number} is longer than {MAX_LINE} bytes")
                    skipping = True
                    continue
                self._take_line(number, line.removesuffix(b"\n"))
        except (OSError, ValueError):
            pass  # the pipe was closed under us by close()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def _take_line(self, number: int, raw: bytes) -> None:
        text = raw.decode("utf-8", errors="replace")
        self.transcript.add("recv", text)
        try:
            message = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            self._fail(f"wrote garbage: line {number} is not JSON ({exc}): {text[:200]!r}")
            return
        if not isinstance(message, dict):
            self._fail(f"wrote garbage: line {number} is not a JSON object: {text[:200]!r}")
            return
        kind = "event" if "event" in message else "response"
        problem = schema_problem(message, kind, self.schema_path)
        if problem is not None:
            self._fail(
                f"wrote a line that breaks {self.protocol}: line {number} is no valid {kind}: "
                f"{problem}: {text[:200]!r}"
            )
            return
        with self._cond:
            if kind == "response":
                self._responses.append(message)
            elif len(self._events) >= MAX_PENDING_EVENTS:
                self._fail_locked(f"flooded the harness: more than {MAX_PENDING_EVENTS} events")
            else:
                self._events.append(message)
            self._cond.notify_all()

    def _read_stderr(self) -> None:
        stream = self._proc.stderr
        assert stream is not None
        partial = b""
        try:
            while chunk := stream.read(1 << 16):  # whatever is there, up to 64 KiB
                with self._cond:
                    self._stderr += chunk
                    del self._stderr[:-STDERR_KEPT]
                *lines, partial = (partial + chunk).split(b"\n")
                for line in lines:
                    self.transcript.add("stderr", line.decode(errors="replace"))
                partial = partial[-TRANSCRIPT_KEPT:]
        except (OSError, ValueError):
            pass
        if partial:
            self.transcript.add("stderr", partial.decode(errors="replace"))
        self._stderr_done.set()

    def _fail(self, problem: str) -> None:
        with self._cond:
            self._fail_locked(problem)

    def _fail_locked(self, problem: str) -> None:
        if self._problem is None:  # the first problem is the one to report
            self._problem = problem
            self.transcript.add("note", problem)
        self._cond.notify_all()

    # --- the process -----------------------------------------------------------------------------

    def _status(self) -> int | None:
        """The exit status without reaping (runtime.processes.exit_status); None while it runs."""
        return exit_status(self._proc)

    def _stderr_tail(self) -> str:
        if self._status() is not None:
            self._stderr_done.wait(0.5)  # what it wrote just before dying
        with self._cond:
            text = self._stderr.decode(errors="replace")
        lines = text.rstrip("\n").splitlines()[-STDERR_TAIL_LINES:]
        return "\n".join(lines) if lines else "(nothing)"

    def _error(self, problem: str) -> DriverError:
        tail = self._stderr_tail()
        cause = next((c for c in ("crashed", "hung") if problem.startswith(c)), "broken")
        return DriverError(
            f"driver {self.name} (pid {self.pid}) {problem}; its stderr ends:\n{tail}",
            cause,
            self._asked,
            self.transcript.tail(EXCHANGED_LINES),
        )

    def _gone_error(self, doing: str) -> DriverError:
        """The error for a driver whose stdout closed (or whose stdin broke) while ``doing``."""
        deadline = time.monotonic() + 1.0
        while (status := self._status()) is None and time.monotonic() < deadline:
            time.sleep(0.01)
        what = (
            f"closed its stdout {doing} but still runs"
            if status is None
            else f"crashed: {_describe_status(status)} {doing}"
        )
        self._fail(what)
        return self._error(what)

    # --- requests --------------------------------------------------------------------------------

    def call(self, cmd: str, *, timeout: float | None = None, **args: Any) -> DriverReply:
        """Send one request and return its reply within ``timeout`` seconds (by default the
        command's documented deadline: ``deadline``).

        A request for a command the protocol names must match its arguments (ValueError: the
        caller's mistake); any other cmd is sent as given. DriverError when the driver crashed,
        hung, or wrote anything that breaks the protocol (then every later call fails too).
        """
        with self._call_lock:
            request_id = self._next_id
            self._next_id += 1
            request = {"id": request_id, "cmd": cmd, **args}
            if cmd in commands(self.schema_path):
                problem = schema_problem(request, f"commands/{cmd}/request", self.schema_path)
                if problem is not None:
                    raise ValueError(f"not a valid {cmd} request: {problem}")
            if timeout is None:
                timeout = deadline(cmd, request, self.schema_path)
            line = json.dumps(request, ensure_ascii=False, separators=(",", ":")).encode()
            what = f"{cmd!r} (id {request_id})"
            return self._reply(cmd, self._exchange(line, request_id, what, timeout))

    def call_raw(self, line: bytes, *, timeout: float = DEFAULT_DEADLINE) -> DriverReply:
        """Send one raw line (say, a malformed request) and return the reply, which must have id
        null; DriverError otherwise."""
        line = line.removesuffix(b"\n")
        if b"\n" in line:
            raise ValueError("call_raw sends one line: no newline inside")
        with self._call_lock:
            return self._reply(None, self._exchange(line, None, "a raw line", timeout))

    def _exchange(
        self, line: bytes, request_id: int | None, what: str, timeout: float
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        self._check_usable()
        self._asked = what
        self.transcript.add("send", line.decode(errors="replace"))
        self._write(line + b"\n", deadline, what)
        with self._cond:
            while not (self._responses or self._problem or self._eof):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self._fail_locked(f"hung: no response to {what} within {timeout:g} s")
                    break
                self._cond.wait(remaining)
            response = self._responses.popleft() if self._responses else None
            problem = self._problem
        if problem is not None:
            raise self._error(problem)
        if response is None:
            raise self._gone_error(f"before responding to {what}")
        if response["id"] != request_id:
            problem = f"answered id {response['id']} to {what}"
            if not response["ok"]:
                problem += f" ({response['error']['type']}: {response['error']['message']})"
            self._fail(problem)
            raise self._error(problem)
        self._asked = ""
        return response

    def _reply(self, cmd: str | None, response: dict[str, Any]) -> DriverReply:
        if not response["ok"]:
            error = response["error"]  # its message kept as a row's is (results.bounded)
            return DriverReply(False, {}, error["type"], bounded(error["message"]))
        result: dict[str, Any] = response["result"]
        if cmd in commands(self.schema_path):
            problem = schema_problem(result, f"commands/{cmd}/result", self.schema_path)
            if problem is not None:
                problem = f"answered {cmd!r} with a result that breaks {self.protocol}: {problem}"
                self._asked = repr(cmd)
                self._fail(problem)
                raise self._error(problem)
        return DriverReply(True, result, None, None)

    def check_alive(self) -> None:
        """DriverError when the driver broke the protocol or its process is gone (it may have
        died after its last answer, with nobody waiting on it)."""
        self._check_usable()
        if self._status() is not None:
            raise self._gone_error("after its last answer")

    def _check_usable(self) -> None:
        if self._closed:
            raise DriverError(f"driver {self.name} (pid {self.pid}) is closed")
        with self._cond:
            problem = self._problem
        if problem is not None:
            raise self._error(problem)

    def _write(self, data: bytes, deadline: float, what: str) -> None:
        """Write all of ``data`` to the driver's stdin before ``deadline`` (it may not read)."""
        outcome = self._send(data, deadline)
        if outcome == "timeout":
            problem = f"hung: does not read its stdin (writing the request {what})"
            self._fail(problem)
            raise self._error(problem)
        if outcome == "broken":  # EPIPE: it closed its stdin or exited
            raise self._gone_error(f"before reading the request {what}")

    def _send(self, data: bytes, deadline: float) -> Literal["sent", "timeout", "broken"]:
        poller = select.poll()
        poller.register(self._stdin, select.POLLOUT)
        view = memoryview(data)
        while view:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout"
            try:
                if poller.poll(remaining * 1000):
                    view = view[os.write(self._stdin, view) :]
            except BlockingIOError:
                continue
            except OSError:
                return "broken"
        return "sent"

    # --- events ----------------------------------------------------------------------------------

    def events(self, *, timeout: float, count: int | None = None) -> list[dict[str, Any]]:
        """The events not returned before, in order: with ``count``, the first ``count`` of them
        as soon as they are there (fewer if ``timeout`` passes first); without, all that arrive
        within ``timeout``. DriverError if the driver broke the protocol, or died before
        ``count`` events came."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while (count is None or len(self._events) < count) and not (self._problem or self._eof):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
            problem = self._problem
            taken = len(self._events) if count is None else min(count, len(self._events))
            found = [self._events.popleft() for _ in range(taken)]
            died = self._eof and count is not None and taken < count and not self._closed
        if problem is not None:
            raise self._error(problem)
        if died:
            raise self._gone_error(f"while {count} events were awaited ({taken} came)")
        return found

    # --- stopping --------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def returncode(self) -> int | None:
        """The exit status (negative: the signal); None while it runs."""
        return self._status()

    def close(self) -> None:
        """Stop the driver: send exit, close its stdin, wait EXIT_GRACE, then SIGTERM and SIGKILL
        its process group; reap it and run the cleanup. Idempotent."""
        with self._call_lock:
            if self._closed:
                return
            self._closed = True
        with self._cond:
            usable = self._problem is None
        if usable and self._status() is None:
            line = json.dumps({"id": self._next_id, "cmd": "exit"}, separators=(",", ":"))
            self.transcript.add("send", line)
            self._send(line.encode() + b"\n", time.monotonic() + CLOSE_WRITE_TIMEOUT)
        with contextlib.suppress(OSError):
            if self._proc.stdin is not None:
                self._proc.stdin.close()  # EOF: every driver exits on it
        self._stop_group(grace=EXIT_GRACE if usable else 0.0)
        for reader in self._readers:
            reader.join(READER_JOIN)
        for stream in (self._proc.stdout, self._proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        _OPEN.discard(self)
        if self._cleanup is not None:
            self._cleanup()

    def _stop_group(self, grace: float) -> None:
        """Wait ``grace`` for a clean exit, then stop it and what is left of its process and
        control groups (runtime.processes.stop_process)."""
        wait_unreaped(self._proc, grace)
        self.transcript.add("note", _describe_status(stop_process(self._proc, STOP_GRACE)))

    def __enter__(self) -> DriverProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"DriverProcess({self.name!r}, pid={self.pid})"


@atexit.register
def _close_open_drivers() -> None:
    for driver in list(_OPEN):
        driver.close()
