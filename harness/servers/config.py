"""The nats-server configuration file for a wire script's ``config`` (sizes, credentials,
permissions, timeouts, JetStream) and for the transports a server serves (its listeners: the
``tls`` map of tls.txt, the ``websocket`` block of websocket.txt, with the settings of them a
case about its transport gives)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ...conformance.transport_model import fallback_delay
from ...conformance.transports import DEFAULT_TRANSPORT
from ..runtime.certs import CertFiles
from .specs import TargetError

# Which configured server serves each transport (one server per group and wire-script config):
# plain TCP as always; TLS on the client port, with the WebSocket listener over TLS too; TLS
# before INFO (``handshake_first``); a WebSocket listener without TLS, compression allowed (the
# client decides whether to offer it).
TRANSPORT_GROUPS = {"tcp": "tcp", "tls": "tls", "wss": "tls", "tls-first": "tls-first",
                    "ws": "ws", "ws-deflate": "ws"}  # fmt: skip
# Transports of different groups that one server serves with a listener setting: a server marked
# "tls available" (``allow_non_tls``, tls.txt) takes clients in clear on its TLS client port, and
# its WebSocket listener keeps its own TLS. (Not plain TCP with TLS after INFO: there the TLS side
# would get an INFO without tls_required, after which a library may go on in clear.)
SHARED_BY_SETTING: dict[frozenset[str], dict[str, Any]] = {
    frozenset({"tcp", "wss"}): {"allow_non_tls": True},
}
# The WebSocket listener on the loopback only, on a port it picks (the ports file says which).
_WEBSOCKET = ['  host: "127.0.0.1"', "  port: -1"]
# A case's settings of the listeners (a wire script pinned to its transport): the tls map's
# (tls.txt), "tls available" and the websocket block's (websocket.txt). ``listeners_text``
# writes them; ``config_text`` leaves them to it.
LISTENER_KEYS = ("tls", "allow_non_tls", "websocket")
_TLS_SETTINGS = ("handshake_first", "timeout", "verify")

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
    known = {*_LIMIT_KEYS, *_AUTH_KEYS, *_SECONDS_KEYS, *_OTHER_KEYS, *LISTENER_KEYS}
    unknown = sorted(set(config) - known)
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


def _settings(config: Mapping[str, Any], key: str, allowed: tuple[str, ...]) -> dict[str, Any]:
    value = config.get(key, {})
    if not isinstance(value, dict) or set(value) - set(allowed):
        raise TargetError(f"{key} takes {', '.join(allowed)}, not {value!r}")
    return value


def _flag(key: str, value: object) -> str:
    if not isinstance(value, bool):
        raise TargetError(f"{key} must be true or false, not {value!r}")
    return "true" if value else "false"


def _tls_settings(config: Mapping[str, Any], group: str, made: CertFiles) -> list[str]:
    """The tls map's settings beyond the certificates: TLS first for the ``tls-first`` group
    (``true`` unless the case says ``auto`` or a delay), the handshake timeout, and client
    certificates verified against the run's CA."""
    tls = _settings(config, "tls", _TLS_SETTINGS)
    lines = []
    if group == "tls-first":
        first = tls.get("handshake_first", True)
        try:
            fallback_delay(first)  # the reference's reading of true, auto or a delay
        except ValueError as exc:
            raise TargetError(str(exc)) from None
        lines.append(f"handshake_first: {'true' if first is True else _quoted(first)}")
    elif "handshake_first" in tls:
        raise TargetError("handshake_first configures the tls-first transport's server only")
    if "timeout" in tls:
        lines.append(f"timeout: {_seconds('tls.timeout', tls['timeout'])}")  # fractional seconds
    if tls.get("verify") is not None:
        lines.append(f"verify: {_flag('tls.verify', tls['verify'])}")
        lines.append(f"ca_file: {_quoted(str(made.ca))}")
    return lines


def group_of(transport: str, config: Mapping[str, Any]) -> str:
    """The group (``TRANSPORT_GROUPS``) whose server serves ``transport`` with the listener
    settings of ``config``: plain TCP with ``allow_non_tls`` is the tls group's ("tls
    available"); anything else the table's."""
    if transport == DEFAULT_TRANSPORT and config.get("allow_non_tls") is True:
        return TRANSPORT_GROUPS["tls"]
    return TRANSPORT_GROUPS.get(transport, transport)


def shared_server(a: str, b: str) -> dict[str, Any] | None:
    """The listener settings of one server that serves both ``a`` and ``b`` ({}: none needed, the
    two share a group); None when no configured server serves both."""
    if TRANSPORT_GROUPS[a] == TRANSPORT_GROUPS[b]:
        return {}
    return SHARED_BY_SETTING.get(frozenset({a, b}))


def listeners_text(
    group: str, certs: Callable[[], CertFiles], config: Mapping[str, Any] | None = None
) -> str:
    """The listeners' configuration of a server for the transports of ``group`` (a value of
    ``TRANSPORT_GROUPS``), with the listener settings of a wire script's ``config``
    (``LISTENER_KEYS``); ``certs`` gives the certificates, asked only by the TLS groups."""
    config = config or {}
    if group not in TRANSPORT_GROUPS.values():
        raise TargetError(f"no server configuration serves transport group {group!r}")
    given = [key for key in LISTENER_KEYS if key in config]
    served = {"tcp": (), "ws": ("websocket",), "tls-first": ("tls",)}.get(group, LISTENER_KEYS)
    if set(given) - set(served):
        raise TargetError(f"the {group} transports' server has no listener for {', '.join(given)}")
    websocket = _settings(config, "websocket", ("compression",))
    compression = (
        f"  compression: {_flag('websocket.compression', websocket.get('compression', True))}"
    )
    if group == "tcp":
        return ""
    if group == "ws":
        lines = ["websocket {", *_WEBSOCKET, compression, "  no_tls: true", "}"]
        return "".join(f"{line}\n" for line in lines)
    made = certs()
    files = [f"cert_file: {_quoted(str(made.chain))}", f"key_file: {_quoted(str(made.key))}"]
    tls = ["tls {", *(f"  {line}" for line in [*files, *_tls_settings(config, group, made)]), "}"]
    if group == "tls-first":
        return "".join(f"{line}\n" for line in tls)
    inner = ["  tls {", *(f"    {line}" for line in files), "  }"]
    available = [f"allow_non_tls: {_flag('allow_non_tls', config['allow_non_tls'])}"] if (
        "allow_non_tls" in config) else []  # fmt: skip
    lines = [*tls, *available, "websocket {", *_WEBSOCKET, compression, *inner, "}"]
    return "".join(f"{line}\n" for line in lines)
