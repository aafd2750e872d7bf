"""nats-conformance-driver/2 for nats-py: JSON lines on stdin, responses and events on stdout.

Works with nats-py 2.0 and later; what a release lacks is never called: it is left out of
hello's capabilities and answered `unsupported` (a named, non-durable consumer, which 2.0's
ConsumerConfig cannot express, is answered `unsupported` alone). What it reaches inside nats-py,
and why:
- decode_headers runs Client._process_headers (not in 2.0, which parses inside _process_msg on
  a subscription's message: there it is `unsupported`), the method Client._process_msg calls on
  every received header block, on a client that never connects (the block is all it reads).
- encode_headers runs Client._send_publish, the code publish() uses to build an HPUB, on a
  client that never connects: it leaves the HPUB in the client's pending buffer, whose header
  block is the answer.
- validate_subject uses nats.aio.client._validate_subject (2.16+), the check publish (strict
  off) and subscribe (strict on) apply; validate_name uses the checks the JetStream and KV code
  apply. Where a version has no such check the answer is `unsupported`.
nats-py keeps headers in a dict: one value per name, so publishing several values for a name is
`unsupported`. It presents a status line as the pseudo-headers Status and Description; the
driver reports those as status/description (as nats-py itself reads them, e.g. for no
responders), so a real header named Status looks the same.
Errors: nats-py's own checks before anything is written (BadSubjectError, MaxPayloadError, a
ValueError on an argument, ...) answer `refused`; `invalid` is only for a malformed request.
headers_op is unsupported: nats-py has no header type of its own (headers are a plain dict).
Transports, through connect's own options only: tls:// with `tls=` an ssl context that trusts
tls_ca_file (every release), tls_first as `tls_handshake_first` (where connect() takes it),
ws:// and wss:// through nats-py's WebSocketTransport (where the release has it and aiohttp,
which it needs, is installed). nats-py has no option to offer permessage-deflate: ws_compression
is `unsupported`.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import dataclasses
import importlib
import importlib.metadata
import inspect
import json
import os
import platform
import ssl
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import nats
import nats.aio.client
import nats.errors
import nats.js.api
import nats.js.errors
from nats.aio.client import Client

PROTOCOL = "nats-conformance-driver/2"
# Client._process_headers, nats-py's own header block parser (not in 2.0).
HAS_HEADER_PARSER = hasattr(Client, "_process_headers")
# What nats.connect takes: tls (an ssl context) in every release, tls_handshake_first in some.
CONNECT_PARAMETERS = frozenset(inspect.signature(Client.connect).parameters)
# What a consumer can be created with (2.0 has durable_name but no name).
CONSUMER_FIELDS = frozenset(field.name for field in dataclasses.fields(nats.js.api.ConsumerConfig))
MAX_LINE = 64 << 20  # bytes in one request line
JS_TIMEOUT = 5.0  # seconds nats-py waits for a JetStream API answer
STATUS = nats.js.api.Header.STATUS.value  # nats-py's names for a status line's parts
DESCRIPTION = nats.js.api.Header.DESCRIPTION.value

# The protocol owns stdout: keep a private handle to it and send anything else (a stray print
# in a library) to stderr.
_OUT = os.fdopen(os.dup(1), "wb")
os.dup2(2, 1)
sys.stdout = sys.stderr


class Unsupported(Exception):
    """nats-py has no API for what was asked."""


class Invalid(Exception):
    """The request's arguments are not what the protocol says."""


class Failed(Exception):
    """nats-py failed in a way no exception of its own names; ``kind`` is the error type."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def _classes(*names: str, module: Any = nats.errors) -> tuple[type[BaseException], ...]:
    """Exception classes of ``module`` by name; names an older nats-py lacks are left out (an
    ``except`` naming a missing one would fail with AttributeError instead of catching)."""
    found = (getattr(module, name, None) for name in names)
    return tuple(cls for cls in found if isinstance(cls, type))


# Checked in order: the first match gives the error type.
_ERROR_TYPES: list[tuple[str, tuple[type[BaseException], ...]]] = [
    ("unsupported", (Unsupported,)),
    ("invalid", (Invalid,)),
    ("no_responders", _classes("NoRespondersError")),
    ("timeout", (*_classes("TimeoutError"), asyncio.TimeoutError, TimeoutError)),
    (
        # nats-py raises these in its own checks, before it writes anything.
        "refused",
        _classes(
            "BadSubjectError",
            "BadHeaderError",
            "BadTimeoutError",
            "MaxPayloadError",
            "BadSubscriptionError",
        ),
    ),
    ("protocol", _classes("ProtocolError")),
    (
        "connection",
        (
            *_classes(
                "ConnectionClosedError",
                "NoServersError",
                "StaleConnectionError",
                "AuthorizationError",
                "ConnectionDrainingError",
                "ConnectionReconnectingError",
                "OutboundBufferLimitError",
                "SecureConnRequiredError",
                "SecureConnFailedError",
            ),
            OSError,
        ),
    ),
    # The library's own argument checks (the driver's are Invalid, caught above).
    ("refused", (ValueError, TypeError)),
]


def error_type(exc: BaseException) -> str:
    if isinstance(exc, Failed):
        return exc.kind
    return next((kind for kind, classes in _ERROR_TYPES if isinstance(exc, classes)), "other")


def error_text(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def emit(message: dict[str, Any]) -> None:
    # ensure_ascii: a value with a lone surrogate (nats-py 2.10 decodes with surrogateescape)
    # still makes a line of valid UTF-8.
    _OUT.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")
    _OUT.flush()


def arg(request: dict[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    if name not in request:
        raise Invalid(f"missing argument {name!r}")
    value = request[name]
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _tuple(kind)):
        raise Invalid(f"argument {name!r} has the wrong type: {value!r}")
    return value


def _tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def decode_b64(request: dict[str, Any], name: str) -> bytes:
    try:
        return base64.b64decode(arg(request, name, str), validate=True)
    except binascii.Error as exc:
        raise Invalid(f"argument {name!r} is not base64: {exc}") from None


def header_dict(request: dict[str, Any]) -> dict[str, str] | None:
    """The headers argument as nats-py takes them: a dict, so one value per name."""
    pairs = arg(request, "headers", (list, type(None)))
    if pairs is None:
        return None
    headers: dict[str, str] = {}
    for pair in pairs:
        if not (
            isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair)
        ):
            raise Invalid(f"a header is not a [name, value] pair of strings: {pair!r}")
        name, value = pair
        if name in headers:
            raise Unsupported(f"nats-py headers are a dict: {name!r} cannot have two values")
        headers[name] = value
    return headers


def _strings(values: list[Any]) -> bool:
    return all(isinstance(value, str) for value in values)


def split_status(
    headers: dict[str, str] | None,
) -> tuple[int | None, str | None, list[list[str]] | None]:
    """(status, description, the other headers) of the dict nats-py gives a message."""
    if headers is None:
        return None, None, None
    status_text = headers.get(STATUS, "")
    status = int(status_text) if status_text.isdigit() else None
    description = headers.get(DESCRIPTION) if status is not None else None
    hidden = {STATUS, DESCRIPTION} if status is not None else set()
    pairs = [[str(name), str(value)] for name, value in headers.items() if name not in hidden]
    return status, description, pairs


def message_fields(msg: Any) -> dict[str, Any]:
    status, description, headers = split_status(msg.headers)
    return {
        "subject": msg.subject,
        "reply": msg.reply or None,
        "headers": headers,
        "status": status,
        "description": description,
        "payload_b64": base64.b64encode(msg.data or b"").decode(),
    }


# validate_name: the checks nats-py applies to each ADR-6 production it validates at all.
def _name_checks() -> dict[str, Callable[[str], bool]]:
    checks: dict[str, Callable[[str], bool]] = {}

    def raises_not(check: Callable[[str], None]) -> Callable[[str], bool]:
        def valid(name: str) -> bool:
            try:
                check(name)
            except ValueError:
                return False
            return True

        return valid

    try:
        from nats.js import manager

        checks["stream-name"] = raises_not(manager._validate_stream_name)
        checks["consumer-name"] = raises_not(manager._validate_consumer_name)
        checks["durable-name"] = raises_not(manager._validate_consumer_name)
    except (ImportError, AttributeError):
        pass
    try:
        from nats.js import kv

        checks["kv-key-name"] = kv._is_key_valid
    except (ImportError, AttributeError):
        pass
    try:
        from nats.js.object_store import VALID_BUCKET_RE

        # js.client checks both KV and object store bucket names with this pattern's match().
        checks["kv-bucket-name"] = checks["os-bucket-name"] = lambda name: bool(
            VALID_BUCKET_RE.match(name)
        )
    except ImportError:
        pass
    return checks


def has_websocket() -> bool:
    """Whether the release has its WebSocket transport (ws:// and wss:// URLs) and aiohttp, which
    that transport needs, is there."""
    try:
        transport = importlib.import_module("nats.aio.transport")
        importlib.import_module("aiohttp")
    except ImportError:
        return False
    return hasattr(transport, "WebSocketTransport")


def transport_capabilities() -> list[str]:
    """The transports' capabilities this release has (TLS with a context: every release)."""
    found = ["tls"] if "tls" in CONNECT_PARAMETERS else []
    if found and "tls_handshake_first" in CONNECT_PARAMETERS:
        found.append("tls_first")
    if has_websocket():
        found.append("websocket")
    return found


SCHEME_NEEDS = {"nats": (), "tls": ("tls",), "ws": ("websocket",), "wss": ("websocket", "tls")}


def transport_kwargs(url: str, options: dict[str, Any]) -> dict[str, Any]:
    """connect()'s arguments for the URL's scheme and the transport options; Unsupported for
    what this release cannot do (never another transport in its place)."""
    scheme = url.partition("://")[0]
    if scheme not in SCHEME_NEEDS:
        raise Invalid(f"a URL with the scheme {scheme!r}")
    have = transport_capabilities()
    for needed in SCHEME_NEEDS[scheme]:
        if needed not in have:
            raise Unsupported(f"nats-py {importlib.metadata.version('nats-py')} lacks {needed}")
    if options.get("ws_compression", False):
        raise Unsupported("nats-py has no option to offer permessage-deflate")
    kwargs: dict[str, Any] = {}
    ca_file = arg(options, "tls_ca_file", str) if "tls_ca_file" in options else None
    if ca_file is not None:
        if "tls" not in have:
            raise Unsupported("nats-py lacks connect(tls=)")
        kwargs["tls"] = ssl.create_default_context(cafile=ca_file)
    if options.get("tls_first", False):
        if "tls_first" not in have:
            raise Unsupported("nats-py lacks connect(tls_handshake_first=)")
        kwargs["tls_handshake_first"] = True
    return kwargs


class Driver:
    def __init__(self) -> None:
        self.nc: Client | None = None
        self.subs: dict[str, Any] = {}
        self.next_sub = 1
        self.exiting = False
        self.name_checks = _name_checks()
        self.commands: dict[str, Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]] = {
            "hello": self.hello,
            "connect": self.connect,
            "publish": self.publish,
            "subscribe": self.subscribe,
            "unsubscribe": self.unsubscribe,
            "request": self.request,
            "flush": self.flush,
            "close": self.close,
            "decode_headers": self.decode_headers,
            "encode_headers": self.encode_headers,
            "validate_subject": self.validate_subject,
            "validate_name": self.validate_name,
            "jetstream_create": self.jetstream_create,
            "jetstream_delete": self.jetstream_delete,
            "exit": self.exit,
        }

    async def handle(self, line: bytes) -> dict[str, Any]:
        try:
            request = json.loads(line)
        except ValueError as exc:
            return failure(None, "invalid", f"not a JSON request: {exc}")
        request_id = request.get("id") if isinstance(request, dict) else None
        if not isinstance(request_id, int) or isinstance(request_id, bool):
            return failure(None, "invalid", "a request is a JSON object with an integer id")
        command = request.get("cmd")
        if not isinstance(command, str):
            return failure(request_id, "invalid", "a request has a string cmd")
        handler = self.commands.get(command)
        if handler is None:
            return failure(request_id, "unsupported", f"unknown command {command!r}")
        try:
            result = await handler(request)
        except (Exception, asyncio.CancelledError) as exc:
            return failure(request_id, error_type(exc), error_text(exc))
        return {"id": request_id, "ok": True, "result": result}

    def connection(self) -> Client:
        if self.nc is None:
            raise nats.errors.ConnectionClosedError()
        return self.nc

    # --- commands --------------------------------------------------------------------------------

    async def hello(self, request: dict[str, Any]) -> dict[str, Any]:
        return {
            "protocol": PROTOCOL,
            "library": "nats-py",
            "version": importlib.metadata.version("nats-py"),
            "language": f"Python {platform.python_version()}",
            "capabilities": self.capabilities(),
        }

    def capabilities(self) -> list[str]:
        """What this nats-py version supports through the driver; optional parts only where the
        version loaded has the code they use."""
        found = [
            # connect() takes verbose, pedantic, no_echo, user/password and token; headers and
            # no_responders are always on (it sends them when the server supports headers).
            *("headers", "no_responders", "queue_groups", "request", "unsubscribe_max"),
            *("drain", "verbose", "pedantic", "echo", "user_password", "token"),
            "encode_headers",
            "flush_roundtrip",  # Client.flush sends PING and waits for the PONG
        ]
        if HAS_HEADER_PARSER:
            found.append("decode_headers")
        if getattr(nats.aio.client, "_validate_subject", None) is not None:
            found.append("validate_subject")
        if self.name_checks:
            found.append("validate_name")
        for capability, module in (
            ("jetstream", "nats.js.client"),
            ("kv", "nats.js.kv"),
            ("object_store", "nats.js.object_store"),
        ):
            try:
                importlib.import_module(module)
            except ImportError:
                continue
            found.append(capability)
        found += transport_capabilities()
        return found

    async def connect(self, request: dict[str, Any]) -> dict[str, Any]:
        url = arg(request, "url", str)
        options = arg(request, "options", dict)
        if self.nc is not None and not self.nc.is_closed:
            raise Invalid("already connected: close first")
        transport = transport_kwargs(url, options)
        for switch in ("headers", "no_responders"):
            if options.get(switch) is False:
                raise Unsupported(f"nats-py has no option to turn {switch} off")
        reconnect = bool(options.get("reconnect", False))
        kwargs: dict[str, Any] = {
            "servers": [url],
            "allow_reconnect": reconnect,
            "error_cb": self.on_error,
            "closed_cb": self.on_closed,
            "verbose": bool(options.get("verbose", False)),
            "pedantic": bool(options.get("pedantic", False)),
            "no_echo": not options.get("echo", True),
        }
        for option, keyword in (("name", "name"), ("user", "user"), ("pass", "password")):
            if option in options:
                kwargs[keyword] = options[option]
        if "token" in options:
            kwargs["token"] = options["token"]
        if not reconnect:
            # Even without reconnecting, nats-py retries a failed first connect up to
            # max_reconnect_attempts (60) times, reconnect_time_wait (2 s) apart: 2 minutes.
            # 1 is the least that ends (0 means no limit); it makes two attempts.
            kwargs["max_reconnect_attempts"] = 1
            kwargs["reconnect_time_wait"] = 0
        if "timeout_ms" in options:
            kwargs["connect_timeout"] = options["timeout_ms"] / 1000
        kwargs.update(transport)
        self.nc, self.subs = None, {}
        self.nc = await nats.connect(**kwargs)
        return {}

    async def publish(self, request: dict[str, Any]) -> dict[str, Any]:
        subject = arg(request, "subject", str)
        reply = arg(request, "reply", (str, type(None)))
        headers = header_dict(request)
        payload = decode_b64(request, "payload_b64")
        nc = self.connection()
        await nc.publish(
            subject, payload, reply=reply if reply is not None else "", headers=headers
        )
        return {}

    async def subscribe(self, request: dict[str, Any]) -> dict[str, Any]:
        subject = arg(request, "subject", str)
        queue = arg(request, "queue", (str, type(None)))
        handle = str(self.next_sub)

        async def deliver(msg: Any) -> None:
            emit({"event": "message", "sub": handle, **message_fields(msg)})

        sub = await self.connection().subscribe(subject, queue=queue or "", cb=deliver)
        self.next_sub += 1
        self.subs[handle] = sub
        return {"sub": handle}

    async def unsubscribe(self, request: dict[str, Any]) -> dict[str, Any]:
        handle = arg(request, "sub", str)
        limit = arg(request, "max", (int, type(None)))
        if handle not in self.subs:
            raise Invalid(f"no subscription {handle!r}")
        await self.subs[handle].unsubscribe(limit=limit or 0)
        return {}

    async def request(self, request: dict[str, Any]) -> dict[str, Any]:
        subject = arg(request, "subject", str)
        headers = header_dict(request)
        payload = decode_b64(request, "payload_b64")
        timeout_ms = arg(request, "timeout_ms", int)
        msg = await self.connection().request(
            subject, payload, timeout=timeout_ms / 1000, headers=headers
        )
        return {"message": message_fields(msg)}

    async def flush(self, request: dict[str, Any]) -> dict[str, Any]:
        timeout_ms = arg(request, "timeout_ms", int)
        await self.connection().flush(timeout=timeout_ms / 1000)
        return {}

    async def close(self, request: dict[str, Any]) -> dict[str, Any]:
        drain = arg(request, "drain", bool)
        nc = self.connection()
        if drain:
            await nc.drain()
        else:
            await nc.close()
        self.subs = {}
        return {}

    async def decode_headers(self, request: dict[str, Any]) -> dict[str, Any]:
        block = decode_b64(request, "block_b64")
        if not HAS_HEADER_PARSER:
            raise Unsupported("this nats-py version has no header parser of its own to call")
        client = Client()  # never connected: _process_headers reads only the block
        reported: list[BaseException] = []

        async def record(exc: BaseException) -> None:
            reported.append(exc)

        client._error_cb = record
        try:
            headers = await client._process_headers(block)
        except Exception as exc:  # what _process_msg would fail with on this block
            raise Failed("protocol", f"{type(exc).__name__}: {exc}") from None
        if reported:  # nats-py reports a block it cannot parse to the error callback
            raise Failed("protocol", f"{type(reported[0]).__name__}: {error_text(reported[0])}")
        status, description, pairs = split_status(headers)
        return {"status": status, "description": description, "headers": pairs or []}

    async def encode_headers(self, request: dict[str, Any]) -> dict[str, Any]:
        headers = header_dict(request) or {}
        client = Client()  # never connected: the HPUB stays in its pending buffer
        await client._send_publish("_", "", b"", 0, headers)
        command = b"".join(client._pending)
        control, _, rest = command.partition(b"\r\n")
        fields = control.split()
        if not fields or fields[0] != b"HPUB":
            raise RuntimeError(f"nats-py did not build an HPUB: {control!r}")
        header_size = int(fields[-2])
        return {"block_b64": base64.b64encode(rest[:header_size]).decode()}

    async def validate_subject(self, request: dict[str, Any]) -> dict[str, Any]:
        subject = arg(request, "subject", str)
        use = arg(request, "use", str)
        if use not in ("publish", "subscribe"):
            raise Invalid(f"use is publish or subscribe, not {use!r}")
        check = getattr(nats.aio.client, "_validate_subject", None)
        if check is None:
            raise Unsupported("this nats-py version does not validate subjects")
        try:
            check(subject, strict=use == "subscribe")
        except nats.errors.BadSubjectError:
            return {"valid": False}
        return {"valid": True}

    async def validate_name(self, request: dict[str, Any]) -> dict[str, Any]:
        production = arg(request, "production", str)
        name = arg(request, "name", str)
        check = self.name_checks.get(production)
        if check is None:
            raise Unsupported(f"nats-py does not validate {production!r}")
        return {"valid": bool(check(name))}

    async def jetstream_create(self, request: dict[str, Any]) -> dict[str, Any]:
        kind, name = arg(request, "kind", str), arg(request, "name", str)
        js = self.connection().jetstream(timeout=JS_TIMEOUT)
        try:
            if kind == "stream":
                subjects = arg(request, "subjects", list)
                info = await js.add_stream(name=name, subjects=subjects)
                return {"created": info.config.name}
            if kind in ("consumer", "durable"):
                field = "name" if kind == "consumer" else "durable_name"
                if field not in CONSUMER_FIELDS:
                    raise Unsupported(f"this nats-py version's ConsumerConfig has no {field}")
                config = nats.js.api.ConsumerConfig(**{field: name})
                consumer = await js.add_consumer(arg(request, "stream", str), config)
                return {"created": consumer.name}
            if kind == "kv":
                return {"created": (await (await js.create_key_value(bucket=name)).status()).bucket}
            if kind == "object_store":
                store = await js.create_object_store(bucket=name)
                return {"created": (await store.status()).bucket}
        except nats.js.errors.APIError as exc:
            raise js_api_failure(exc) from None
        except _BUCKET_NAME_ERRORS as exc:  # checked before any request
            raise Failed("refused", f"{type(exc).__name__}: {error_text(exc)}") from None
        raise Invalid(f"unknown kind {kind!r}")

    async def jetstream_delete(self, request: dict[str, Any]) -> dict[str, Any]:
        kind, name = arg(request, "kind", str), arg(request, "name", str)
        js = self.connection().jetstream(timeout=JS_TIMEOUT)
        # Looked up by name: a release without object stores (2.0) has no delete_object_store.
        deletes = {"stream": "delete_stream", "kv": "delete_key_value",
                   "object_store": "delete_object_store"}  # fmt: skip
        try:
            if kind in ("consumer", "durable"):
                await js.delete_consumer(arg(request, "stream", str), name)
            elif kind not in deletes:
                raise Invalid(f"unknown kind {kind!r}")
            elif (delete := getattr(js, deletes[kind], None)) is None:
                raise Unsupported(f"this nats-py version has no JetStreamContext.{deletes[kind]}")
            else:
                await delete(name)
        except nats.js.errors.APIError as exc:
            raise js_api_failure(exc) from None
        return {}

    async def exit(self, request: dict[str, Any]) -> dict[str, Any]:
        self.exiting = True
        return {}

    # --- callbacks -------------------------------------------------------------------------------

    async def on_error(self, exc: Exception) -> None:
        emit({"event": "error", "type": error_type(exc), "message": error_text(exc)})

    async def on_closed(self) -> None:
        emit({"event": "closed"})


# nats-py's own bucket name check (not in 2.0: there none is caught).
_BUCKET_NAME_ERRORS = _classes("InvalidBucketNameError", module=nats.js.errors)


def js_api_failure(exc: nats.js.errors.APIError) -> Failed:
    """The server's JetStream API error, as the protocol's `protocol` error."""
    return Failed("protocol", f"{exc.code} {exc.err_code} {exc.description}")


def failure(request_id: int | None, kind: str, message: str) -> dict[str, Any]:
    return {"id": request_id, "ok": False, "error": {"type": kind, "message": message}}


def read_lines(loop: asyncio.AbstractEventLoop, lines: asyncio.Queue[bytes | None]) -> None:
    """Feed stdin's lines to the event loop (a thread: stdin may be any kind of file)."""
    stdin = sys.stdin.buffer
    while True:
        line = stdin.readline(MAX_LINE + 1)
        if len(line) > MAX_LINE:  # keep the answer coming; drop the rest of the line
            while line and not line.endswith(b"\n"):
                line = stdin.readline(MAX_LINE + 1)
            line = b"(a request line longer than the driver reads)\n"
        loop.call_soon_threadsafe(lines.put_nowait, line or None)
        if not line:
            return


async def main() -> None:
    driver = Driver()
    lines: asyncio.Queue[bytes | None] = asyncio.Queue()
    loop = asyncio.get_running_loop()
    threading.Thread(target=read_lines, args=(loop, lines), daemon=True).start()
    while not driver.exiting and (line := await lines.get()) is not None:
        emit(await driver.handle(line))
    if driver.nc is not None and not driver.nc.is_closed:
        try:
            await asyncio.wait_for(driver.nc.close(), 2)
        except (Exception, asyncio.CancelledError) as exc:
            print(f"closing on exit: {error_text(exc)}", file=sys.stderr)


if __name__ == "__main__":
    asyncio.run(main())
    sys.stderr.flush()
    os._exit(0)  # not sys.exit: the stdin thread may hold stdin's lock at shutdown
