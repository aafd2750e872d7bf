"""The nats-server configuration file for a wire script's ``config`` (sizes, credentials,
permissions, timeouts, JetStream) and for the transports a server serves (its listeners: the
``tls`` map of tls.txt, the ``websocket`` block of websocket.txt)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..runtime.certs import CertFiles
from .specs import TargetError

# Which configured server serves each transport (one server per group and wire-script config):
# plain TCP as always; TLS on the client port, with the WebSocket listener over TLS too; TLS
# before INFO (``handshake_first``); a WebSocket listener without TLS, compression allowed (the
# client decides whether to offer it).
TRANSPORT_GROUPS = {"tcp": "tcp", "tls": "tls", "wss": "tls", "tls-first": "tls-first",
                    "ws": "ws", "ws-deflate": "ws"}  # fmt: skip
# The WebSocket listener on the loopback only, on a port it picks (the ports file says which).
_WEBSOCKET = ['  host: "127.0.0.1"', "  port: -1", "  compression: true"]

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


def listeners_text(group: str, certs: Callable[[], CertFiles]) -> str:
    """The listeners' configuration of a server for the transports of ``group`` (a value of
    ``TRANSPORT_GROUPS``); ``certs`` gives the certificates, asked only by the TLS groups."""
    if group not in TRANSPORT_GROUPS.values():
        raise TargetError(f"no server configuration serves transport group {group!r}")
    if group == "tcp":
        return ""
    if group == "ws":
        return "".join(f"{line}\n" for line in ["websocket {", *_WEBSOCKET, "  no_tls: true", "}"])
    made = certs()
    files = [f"cert_file: {_quoted(str(made.chain))}", f"key_file: {_quoted(str(made.key))}"]
    if group == "tls-first":
        lines = ["tls {", *(f"  {line}" for line in files), "  handshake_first: true", "}"]
    else:
        inner = ["  tls {", *(f"    {line}" for line in files), "  }"]
        lines = ["tls {", *(f"  {line}" for line in files), "}", "websocket {", *_WEBSOCKET,
                 *inner, "}"]  # fmt: skip
    return "".join(f"{line}\n" for line in lines)
