"""launch: targets: a server that is not nats-server, started only as its launch description
says. The "other" server is a wrapper around the wheel's nats-server with flags of its own."""

from __future__ import annotations

import re
import stat
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nats_conformance.conformance.vectors import BUNDLED_DIR, load_all
from nats_conformance.harness.results import NAME_LIMIT
from nats_conformance.harness.servers import described as described_servers
from nats_conformance.harness.servers import launch
from nats_conformance.harness.servers.binaries import binary_version
from nats_conformance.harness.servers.checks import check_case
from nats_conformance.harness.servers.kinds import open_target, parse_spec
from nats_conformance.harness.servers.server_targets import _server_info
from nats_conformance.harness.servers.specs import TargetError, TargetSpec
from tests.test_targets import pid_records, running

NATS_SERVER = Path(sys.executable).parent / "nats-server"
CASES = {case.id: case for case in load_all([BUNDLED_DIR]).cases}
PLAIN_CASE = "protocol.pub.parse.doc-example-hello"
CONFIG_CASE = "protocol.pub.parse.max-payload.over"
WRAPPER = f"""#!/bin/sh
# Another server: --listen-port N [--conf FILE], or --which-version.
if [ "$1" = --which-version ]; then exec {NATS_SERVER} --version; fi
port= conf=
while [ $# -gt 0 ]; do
  case "$1" in
    --listen-port) port=$2; shift 2;;
    --conf) conf=$2; shift 2;;
    *) echo "other-server: unknown flag $1" >&2; exit 2;;
  esac
done
exec {NATS_SERVER} -a 127.0.0.1 -p "$port" ${{conf:+-c "$conf"}}
"""
CONFIGURED = """
command = ["./other-server", "--listen-port", "{port}", "--conf", "{config}"]
config = "nats-server"
ready = {log = "Server is ready"}
version = {command = ["./other-server", "--which-version"], regex = "v([0-9.]+)"}
"""
UNCONFIGURED = """
command = ["./other-server", "--listen-port", "{port}"]
config = "none"
ready = "port"
version = "info"
"""


def described(tmp_path: Path, description: str) -> Path:
    """The wrapper next to a launch description; returns the description's path."""
    wrapper = tmp_path / "other-server"
    wrapper.write_text(WRAPPER)
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    path = tmp_path / "other-server.toml"
    path.write_text(description)
    return path


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"


def test_the_launch_form_names_its_description() -> None:
    assert parse_spec("launch:/srv/x.toml") == TargetSpec(
        "launch:/srv/x.toml", "launch", path="/srv/x.toml"
    )
    with pytest.raises(TargetError, match="launch: needs the path"):
        parse_spec("launch:")


def test_a_configurable_described_server_gets_each_config(tmp_path: Path, state_dir: Path) -> None:
    path = described(tmp_path, CONFIGURED)
    with open_target(f"launch:{path}", state_dir=state_dir) as target:
        assert (target.kind, target.configurable) == ("launch", True)
        assert target.version() == binary_version(NATS_SERVER)
        server = target.server({"max_payload": 33})
        info = _server_info(server.host, server.port)
        assert (server.host, info["max_payload"]) == ("127.0.0.1", 33)
        assert check_case(CASES[PLAIN_CASE], target).found.outcome == "pass"
        assert check_case(CASES[CONFIG_CASE], target).found.outcome == "pass"
        pids = [record["pid"] for record in pid_records(state_dir)]
        assert len(pids) == 3  # one per config: 33, the plain case's {} and the config case's
        argv = pid_records(state_dir)[0]["argv"]
        assert argv[0] == str(tmp_path / "other-server") and "--listen-port" in argv
    assert not any(running(pid) for pid in pids)
    assert pid_records(state_dir) == []


def test_a_described_server_without_configuration_skips_cases_needing_one(
    tmp_path: Path, state_dir: Path
) -> None:
    path = described(tmp_path, UNCONFIGURED)
    with open_target(f"launch:{path}", state_dir=state_dir) as target:
        assert (target.kind, target.configurable) == ("launch", False)
        assert target.version() == binary_version(NATS_SERVER)  # read from its INFO
        assert target.server({}).version == binary_version(NATS_SERVER)
        assert len(pid_records(state_dir)) == 1  # the server that told the version is reused
        assert check_case(CASES[PLAIN_CASE], target).found.outcome == "pass"
        skipped = check_case(CASES[CONFIG_CASE], target)
        assert skipped.found.outcome == "skip"
        assert "needs server configuration max_payload" in skipped.found.message
        with pytest.raises(TargetError, match="takes no configuration: max_payload"):
            target.server({"max_payload": 64})
    assert pid_records(state_dir) == []


def test_a_described_server_that_fails_is_a_target_error_with_its_log(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(launch, "READY_TIMEOUT", 1.0)
    path = described(tmp_path, CONFIGURED.replace('"--conf"', '"--config"'))
    with (
        open_target(f"launch:{path}", state_dir=state_dir) as target,
        pytest.raises(TargetError) as caught,
    ):
        target.server({})
    assert "exited with status 2" in str(caught.value)
    assert "other-server: unknown flag --config" in str(caught.value)
    assert pid_records(state_dir) == []


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (("config = ", "colour = 1\nconfig = "), "unknown key(s) colour"),
        (('"{port}"', '"4222"'), "command must pass the port"),
        ('config = "nats-server"', "config must be"),
        (('"nats-server"\n', '"none"\n'), "{config} in command goes with"),
        (('{log = "Server is ready"}', '"soon"'), "ready must be"),
        (("Server is ready", "(unclosed"), "ready.log is not a regex"),
        (('regex = "v([0-9.]+)"', 'pattern = "v"'), "version must be"),
        (("command = [", "command = "), "cannot read the launch description"),
    ],
)
def test_a_bad_description_is_refused_with_the_reason(
    tmp_path: Path, state_dir: Path, change: tuple[str, str] | str, reason: str
) -> None:
    old, new = change if isinstance(change, tuple) else (change, "")
    assert old in CONFIGURED
    path = described(tmp_path, CONFIGURED.replace(old, new, 1))
    with pytest.raises(TargetError) as caught:
        open_target(f"launch:{path}", state_dir=state_dir)
    assert reason in str(caught.value)
    assert str(path) in str(caught.value)
    assert pid_records(state_dir) == []


def test_a_version_command_that_prints_no_version_says_so(tmp_path: Path, state_dir: Path) -> None:
    path = described(tmp_path, CONFIGURED.replace('"v([0-9.]+)"', '"release ([0-9]+)"'))
    with pytest.raises(TargetError, match="printed nothing matching 'release"):
        open_target(f"launch:{path}", state_dir=state_dir)
    assert pid_records(state_dir) == []


# A regex that backtracks without end on a line of a's with no b (exponential in its length).
BACKTRACKS = "(a+)+b"
A_LINE = "printf 'a%.0s' $(seq 3000); echo"


def test_a_ready_regex_that_backtracks_ends_at_the_readiness_deadline(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(launch, "READY_TIMEOUT", 2.0)
    command = f"{A_LINE}; exec {NATS_SERVER} -a 127.0.0.1 -p {{port}}"
    path = tmp_path / "slow-ready.toml"
    path.write_text(
        f"command = ['sh', '-c', {command!r}]\n"
        f'config = "none"\nready = {{log = "{BACKTRACKS}"}}\nversion = "info"\n'
    )
    started = time.monotonic()
    with pytest.raises(TargetError) as caught:
        open_target(f"launch:{path}", state_dir=state_dir)
    assert time.monotonic() - started < 2.0 + 3.0  # the deadline, and stopping what it started
    assert "ready.log: the regex '(a+)+b' did not finish searching" in str(caught.value)
    assert pid_records(state_dir) == []


def test_a_version_regex_that_backtracks_ends_at_the_version_deadline(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(described_servers, "VERSION_TIMEOUT", 1.0)
    path = described(tmp_path, CONFIGURED)
    path.write_text(
        CONFIGURED.replace(
            '["./other-server", "--which-version"], regex = "v([0-9.]+)"',
            f"['sh', '-c', {A_LINE!r}], regex = '{BACKTRACKS}'",
        )
    )
    started = time.monotonic()
    with pytest.raises(described_servers.SearchTimeout, match="did not finish searching"):
        open_target(f"launch:{path}", state_dir=state_dir)
    assert time.monotonic() - started < 1.0 + 2.0


def test_a_version_as_long_as_a_command_prints_is_stored_bounded(
    tmp_path: Path, state_dir: Path
) -> None:
    path = described(tmp_path, CONFIGURED)
    printed = "v" + "1." * 2000  # 4001 characters, all matched by the regex's group
    path.write_text(
        CONFIGURED.replace(
            '["./other-server", "--which-version"]', f"['sh', '-c', 'echo {printed}']"
        )
    )
    with open_target(f"launch:{path}", state_dir=state_dir) as target:
        version = target.version()
    assert version.startswith("1.1.1.")
    assert len(version) < NAME_LIMIT + 60
    assert f"[{len(printed) - 1} characters, sha256 " in version


def test_a_regex_longer_than_the_limit_is_refused(tmp_path: Path, state_dir: Path) -> None:
    long = "x" * (described_servers.REGEX_LIMIT + 1)
    path = described(tmp_path, CONFIGURED.replace("Server is ready", long))
    with pytest.raises(TargetError, match=f"ready.log must be at most {len(long) - 1}"):
        open_target(f"launch:{path}", state_dir=state_dir)


@given(st.from_regex(r"[a-z0-9 .()|+*?\[\]^$-]{0,12}", fullmatch=True), st.text(max_size=40))
@settings(max_examples=30, deadline=None)
def test_a_bounded_search_finds_what_re_finds(pattern: str, text: str) -> None:
    try:
        compiled = re.compile(pattern)
    except re.error:
        return
    found = compiled.search(text)
    expected = None if found is None else (found.group(1) if found.groups() else found[0]) or ""
    assert described_servers.bounded_search(compiled, text, 10.0) == expected
