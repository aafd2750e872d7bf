"""``nats-conformance targets``: the server and client targets available here, with versions."""

from __future__ import annotations

import argparse
import sys

from ...conformance.transports import TRANSPORTS
from ..clients import registry, streaming_bridge
from ..runtime import builds
from ..servers import stan as stan_server
from ..servers.kinds import release_lacks
from ..servers.server_targets import available_targets


def transports_text(version: str) -> str:
    """The transports a nats-server release's wire cases run over, and why any is left out."""
    lacking = {t: why for t in TRANSPORTS if (why := release_lacks(version, t)) is not None}
    offered = ", ".join(t for t in TRANSPORTS if t not in lacking)
    return f"over {offered}" + "".join(f"; {why}" for why in dict.fromkeys(lacking.values()))


def main(args: argparse.Namespace) -> int:
    try:
        registry.extend_registry(args.drivers_dir)
    except registry.ClientError as exc:
        print(f"nats-conformance: {exc}", file=sys.stderr)
        return 2
    for spec, version in available_targets():
        print(f"{spec}\t{version}\t{transports_text(version)}")
    for spec, version in registry.available_clients():
        print(f"{spec}\t{version}")
    for name, library in registry.STREAMING_LIBRARIES.items():
        print(f"client:{name}\t{library.registry}, built on first use")
    with_them = f"{streaming_bridge.PYTHON_CLIENT} (PyPI), run with the streaming clients"
    print(f"{streaming_bridge.PYTHON_CLIENT_SPEC}\t{with_them}")

    built = f"{stan_server.PINNED} (Go module proxy, built on first use)"
    print(f"{stan_server.DEFAULT_SPEC}\t{builds.go_missing() or built}")
    return 0
