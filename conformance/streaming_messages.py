"""NATS Streaming protocol messages: a hand-written proto3 wire-format codec.

The thirteen messages of streaming-fields.md are frozen dataclasses. Each field carries its
proto3 field number, JSON name and type as dataclass metadata; that table (``field_table``)
drives one generic encoder, one generic decoder and the JSON mapping used by the vectors.

Encoding follows proto3: fields in field-number order, implicit presence (a field equal to its
default is not written), varints for int32/int64/uint32/uint64/bool/enum (negative int32 and
int64 as 10-byte two's-complement varints), length-delimited UTF-8 for string, raw for bytes.

Decoding accepts fields in any order, keeps the last value of a field seen twice, and skips
unknown fields of wire types 0 (varint), 1 (64-bit), 2 (length-delimited) and 5 (32-bit).
Varints are truncated to the field's width as protobuf does (an int32 keeps the low 32 bits).
A 10-byte varint's bits above bit 63 are dropped, as Google's runtimes and the gogo-generated
Go code do. Unknown StartPosition values stay plain ``int`` (proto3 enums are open), and are
written back as their number. Unknown fields are not retained.

Bad input never raises: ``decode`` returns a ``DecodeError`` whose ``reason`` is one of

- ``truncated``: the data ends inside a tag, varint, length-delimited value or fixed value;
- ``varint_too_long``: a varint runs past 10 bytes;
- ``invalid_field_number``: field number 0, or above 2**29 - 1;
- ``invalid_wire_type``: wire type 6 or 7, or 3/4 (groups, which proto3 does not define;
  Google's runtimes and gogo's skip an unknown group instead);
- ``wrong_wire_type``: a known field with a wire type its type does not use (gogo-generated
  code rejects it likewise; Google's runtimes keep it as an unknown field);
- ``invalid_utf8``: a string field whose bytes are not UTF-8.

``detail`` says where (byte offset, field) in words.
"""

from __future__ import annotations

import base64
import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from functools import cache
from typing import Any, ClassVar

DEFAULT_DISCOVER_PREFIX = "_STAN.discover"

# Wire types proto3 uses; 3 and 4 (groups) and 6, 7 are rejected.
WIRE_VARINT, WIRE_I64, WIRE_LEN, WIRE_I32 = 0, 1, 2, 5
MAX_FIELD_NUMBER = (1 << 29) - 1
MAX_VARINT_BYTES = 10
_U64_MASK = (1 << 64) - 1


class StartPosition(IntEnum):
    """Where a subscription starts replaying (SubscriptionRequest.startPosition)."""

    NEW_ONLY = 0
    LAST_RECEIVED = 1
    TIME_DELTA_START = 2
    SEQUENCE_START = 3
    FIRST = 4

    @property
    def proto_name(self) -> str:
        """The .proto spelling (``NewOnly``), which proto3 JSON uses."""
        return "".join(word.capitalize() for word in self.name.split("_"))


_START_POSITION_BY_NAME = {p.proto_name: p for p in StartPosition}
_START_POSITION_BY_NUMBER = {p.value: p for p in StartPosition}


def _start_position(number: int) -> StartPosition | int:
    """The enum member for ``number``, or the bare int for a value the table does not name."""
    return _START_POSITION_BY_NUMBER.get(number, number)


@dataclass(frozen=True)
class ProtoType:
    """A proto3 scalar type: its wire type, default and (for integers) width and signedness."""

    name: str
    wire_type: int
    default: Any
    bits: int = 0
    signed: bool = False

    @property
    def lo(self) -> int:
        return -(1 << (self.bits - 1)) if self.signed else 0

    @property
    def hi(self) -> int:
        return (1 << (self.bits - 1 if self.signed else self.bits)) - 1


STRING = ProtoType("string", WIRE_LEN, "")
BYTES = ProtoType("bytes", WIRE_LEN, b"")
BOOL = ProtoType("bool", WIRE_VARINT, False, bits=1)
INT32 = ProtoType("int32", WIRE_VARINT, 0, bits=32, signed=True)
INT64 = ProtoType("int64", WIRE_VARINT, 0, bits=64, signed=True)
UINT32 = ProtoType("uint32", WIRE_VARINT, 0, bits=32)
UINT64 = ProtoType("uint64", WIRE_VARINT, 0, bits=64)
# Enums are int32 on the wire.
START_POSITION = ProtoType(
    "enum StartPosition", WIRE_VARINT, StartPosition.NEW_ONLY, bits=32, signed=True
)


@dataclass(frozen=True)
class FieldSpec:
    """One row of a message's field table."""

    number: int
    json_name: str
    type: ProtoType
    attr: str = ""


def _field(number: int, json_name: str, ptype: ProtoType) -> Any:
    """A dataclass field with the proto3 default, carrying its table row as metadata."""
    spec = FieldSpec(number, json_name, ptype)
    return dataclasses.field(default=ptype.default, metadata={"proto": spec})


@cache
def field_table(cls: type) -> tuple[FieldSpec, ...]:
    """The message's fields in field-number order (the order they are encoded in)."""
    rows = (dataclasses.replace(f.metadata["proto"], attr=f.name) for f in dataclasses.fields(cls))
    return tuple(sorted(rows, key=lambda spec: spec.number))


def _value_problem(ptype: ProtoType, value: Any) -> str | None:
    """Why ``value`` cannot be held by a field of ``ptype`` (None when it can)."""
    if ptype is STRING:
        if not isinstance(value, str):
            return "expected str"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "string is not valid Unicode (lone surrogate)"
        return None
    if ptype is BYTES:
        return None if isinstance(value, bytes) else "expected bytes"
    if ptype is BOOL:
        return None if isinstance(value, bool) else "expected bool"
    if not isinstance(value, int) or isinstance(value, bool):
        return "expected int"
    if not ptype.lo <= value <= ptype.hi:
        return f"{value} out of {ptype.name} range [{ptype.lo}, {ptype.hi}]"
    return None


class Message:
    """Base of the message dataclasses: checks every field against its proto3 type."""

    NAME: ClassVar[str]

    def __post_init__(self) -> None:
        for spec in field_table(type(self)):
            problem = _value_problem(spec.type, getattr(self, spec.attr))
            if problem:
                raise ValueError(f"{self.NAME}.{spec.attr}: {problem}")


@dataclass(frozen=True)
class ConnectRequest(Message):
    NAME: ClassVar[str] = "ConnectRequest"
    client_id: str = _field(1, "clientID", STRING)
    heartbeat_inbox: str = _field(2, "heartbeatInbox", STRING)
    protocol: int = _field(3, "protocol", INT32)
    conn_id: bytes = _field(4, "connID", BYTES)
    ping_interval: int = _field(5, "pingInterval", INT64)
    ping_timeout: int = _field(6, "pingTimeout", INT64)
    ping_max_out: int = _field(7, "pingMaxOut", INT32)


@dataclass(frozen=True)
class ConnectResponse(Message):
    NAME: ClassVar[str] = "ConnectResponse"
    pub_prefix: str = _field(1, "pubPrefix", STRING)
    sub_requests: str = _field(2, "subRequests", STRING)
    unsub_requests: str = _field(3, "unsubRequests", STRING)
    close_requests: str = _field(4, "closeRequests", STRING)
    error: str = _field(5, "error", STRING)
    sub_close_requests: str = _field(6, "subCloseRequests", STRING)
    ping_requests: str = _field(7, "pingRequests", STRING)
    ping_interval: int = _field(8, "pingInterval", INT64)
    ping_timeout: int = _field(9, "pingTimeout", INT64)
    ping_max_out: int = _field(10, "pingMaxOut", INT32)
    protocol: int = _field(11, "protocol", INT32)
    public_key: str = _field(100, "publicKey", STRING)


@dataclass(frozen=True)
class SubscriptionRequest(Message):
    NAME: ClassVar[str] = "SubscriptionRequest"
    client_id: str = _field(1, "clientID", STRING)
    subject: str = _field(2, "subject", STRING)
    q_group: str = _field(3, "qGroup", STRING)
    inbox: str = _field(4, "inbox", STRING)
    max_in_flight: int = _field(5, "maxInFlight", INT32)
    ack_wait_in_secs: int = _field(6, "ackWaitInSecs", INT32)
    durable_name: str = _field(7, "durableName", STRING)
    # An int outside StartPosition is an unknown value kept as proto3 does. (_field returns a
    # dataclasses.field, which ruff cannot tell for this non-builtin annotation.)
    start_position: StartPosition | int = _field(10, "startPosition", START_POSITION)  # noqa: RUF009
    start_sequence: int = _field(11, "startSequence", UINT64)
    start_time_delta: int = _field(12, "startTimeDelta", INT64)


@dataclass(frozen=True)
class SubscriptionResponse(Message):
    NAME: ClassVar[str] = "SubscriptionResponse"
    ack_inbox: str = _field(2, "ackInbox", STRING)
    error: str = _field(3, "error", STRING)


@dataclass(frozen=True)
class UnsubscribeRequest(Message):
    NAME: ClassVar[str] = "UnsubscribeRequest"
    client_id: str = _field(1, "clientID", STRING)
    subject: str = _field(2, "subject", STRING)
    inbox: str = _field(3, "inbox", STRING)
    durable_name: str = _field(4, "durableName", STRING)


@dataclass(frozen=True)
class PubMsg(Message):
    NAME: ClassVar[str] = "PubMsg"
    client_id: str = _field(1, "clientID", STRING)
    guid: str = _field(2, "guid", STRING)
    subject: str = _field(3, "subject", STRING)
    reply: str = _field(4, "reply", STRING)
    data: bytes = _field(5, "data", BYTES)
    conn_id: bytes = _field(6, "connID", BYTES)
    sha256: bytes = _field(10, "sha256", BYTES)


@dataclass(frozen=True)
class PubAck(Message):
    NAME: ClassVar[str] = "PubAck"
    guid: str = _field(1, "guid", STRING)
    error: str = _field(2, "error", STRING)


@dataclass(frozen=True)
class MsgProto(Message):
    NAME: ClassVar[str] = "MsgProto"
    sequence: int = _field(1, "sequence", UINT64)
    subject: str = _field(2, "subject", STRING)
    reply: str = _field(3, "reply", STRING)
    data: bytes = _field(4, "data", BYTES)
    timestamp: int = _field(5, "timestamp", INT64)  # nanoseconds
    redelivered: bool = _field(6, "redelivered", BOOL)
    crc32: int = _field(10, "CRC32", UINT32)


@dataclass(frozen=True)
class Ack(Message):
    NAME: ClassVar[str] = "Ack"
    subject: str = _field(1, "subject", STRING)
    sequence: int = _field(2, "sequence", UINT64)


@dataclass(frozen=True)
class CloseRequest(Message):
    NAME: ClassVar[str] = "CloseRequest"
    client_id: str = _field(1, "clientID", STRING)


@dataclass(frozen=True)
class CloseResponse(Message):
    NAME: ClassVar[str] = "CloseResponse"
    error: str = _field(1, "error", STRING)


@dataclass(frozen=True)
class Ping(Message):
    NAME: ClassVar[str] = "Ping"
    conn_id: bytes = _field(1, "connID", BYTES)


@dataclass(frozen=True)
class PingResponse(Message):
    NAME: ClassVar[str] = "PingResponse"
    error: str = _field(1, "error", STRING)


MESSAGES: dict[str, type[Message]] = {
    cls.NAME: cls
    for cls in (
        ConnectRequest,
        ConnectResponse,
        SubscriptionRequest,
        SubscriptionResponse,
        UnsubscribeRequest,
        PubMsg,
        PubAck,
        MsgProto,
        Ack,
        CloseRequest,
        CloseResponse,
        Ping,
        PingResponse,
    )
}


def _message_class(message_name: str) -> type[Message]:
    try:
        return MESSAGES[message_name]
    except KeyError:
        raise ValueError(f"unknown NATS Streaming message {message_name!r}") from None


# --- encoding ---------------------------------------------------------------------------------


def encode_varint(value: int) -> bytes:
    """LEB128 of a value in [0, 2**64); negative numbers are passed as two's complement."""
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _encode_value(ptype: ProtoType, value: Any) -> bytes:
    if ptype.wire_type == WIRE_LEN:
        raw = value.encode("utf-8") if ptype is STRING else value
        return encode_varint(len(raw)) + raw
    # Masking to 64 bits sign-extends negative int32/int64 to ten bytes, as proto3 requires.
    return encode_varint(int(value) & _U64_MASK)


def encode(msg: Message) -> bytes:
    """The proto3 wire encoding of ``msg``: set fields in field-number order."""
    out = bytearray()
    for spec in field_table(type(msg)):
        value = getattr(msg, spec.attr)
        if value == spec.type.default:  # implicit presence: defaults are not written
            continue
        out += encode_varint(spec.number << 3 | spec.type.wire_type)
        out += _encode_value(spec.type, value)
    return bytes(out)


# --- decoding ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class DecodeError:
    """Why bytes are not a valid encoding of the message (see the module docstring)."""

    reason: str
    detail: str


class _Invalid(Exception):
    """Internal: stops decoding; ``decode`` turns it into a DecodeError value."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.error = DecodeError(reason, detail)


def _read_varint(data: bytes, pos: int, what: str) -> tuple[int, int]:
    """Value and next position of the varint at ``pos`` (bits beyond 64 dropped)."""
    value = 0
    for i in range(MAX_VARINT_BYTES):
        if pos + i >= len(data):
            raise _Invalid("truncated", f"data ends inside the {what} varint at offset {pos}")
        byte = data[pos + i]
        value |= (byte & 0x7F) << (7 * i)
        if byte < 0x80:
            return value & _U64_MASK, pos + i + 1
    raise _Invalid("varint_too_long", f"the {what} varint at offset {pos} exceeds 10 bytes")


def _take(data: bytes, pos: int, size: int, what: str) -> int:
    """End position of ``size`` bytes starting at ``pos``, which must all be present."""
    left = len(data) - pos
    if size > left:
        raise _Invalid("truncated", f"{what} at offset {pos} needs {size} bytes, has {left}")
    return pos + size


def _read_raw(data: bytes, pos: int, wire_type: int, what: str) -> tuple[int | bytes, int]:
    """One field's raw value (an int for varints, else the bytes) and the next position."""
    if wire_type == WIRE_VARINT:
        return _read_varint(data, pos, what)
    if wire_type == WIRE_LEN:
        size, pos = _read_varint(data, pos, f"{what} length")
        end = _take(data, pos, size, what)
        return data[pos:end], end
    size = 8 if wire_type == WIRE_I64 else 4
    end = _take(data, pos, size, what)
    return data[pos:end], end


def _wrap(value: int, ptype: ProtoType) -> int:
    """Truncate a varint to the type's width, as a C cast of the number would."""
    value &= (1 << ptype.bits) - 1
    if ptype.signed and value >> (ptype.bits - 1):
        value -= 1 << ptype.bits
    return value


def _convert(spec: FieldSpec, raw: int | bytes, offset: int) -> Any:
    """The field value a raw wire value stands for."""
    ptype = spec.type
    if ptype is BYTES:
        return raw
    if ptype is STRING:
        assert isinstance(raw, bytes)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            detail = f"field {spec.json_name} at offset {offset}: {exc.reason}"
            raise _Invalid("invalid_utf8", detail) from None
    assert isinstance(raw, int)
    if ptype is BOOL:
        return raw != 0
    number = _wrap(raw, ptype)
    return _start_position(number) if ptype is START_POSITION else number


def _decode_fields(cls: type[Message], data: bytes) -> dict[str, Any]:
    by_number = {spec.number: spec for spec in field_table(cls)}
    values: dict[str, Any] = {}
    pos = 0
    while pos < len(data):
        offset = pos
        tag, pos = _read_varint(data, pos, "tag")
        number, wire_type = tag >> 3, tag & 7
        if not 1 <= number <= MAX_FIELD_NUMBER:
            raise _Invalid("invalid_field_number", f"field number {number} at offset {offset}")
        if wire_type not in (WIRE_VARINT, WIRE_I64, WIRE_LEN, WIRE_I32):
            detail = f"wire type {wire_type} (field {number}) at offset {offset}"
            raise _Invalid("invalid_wire_type", detail)
        spec = by_number.get(number)
        if spec is None:  # unknown field: skip its value
            _, pos = _read_raw(data, pos, wire_type, f"unknown field {number}")
            continue
        if wire_type != spec.type.wire_type:
            detail = (
                f"field {spec.json_name} ({spec.type.name}) at offset {offset} has wire type "
                f"{wire_type}, expected {spec.type.wire_type}"
            )
            raise _Invalid("wrong_wire_type", detail)
        raw, pos = _read_raw(data, pos, wire_type, f"field {spec.json_name}")
        values[spec.attr] = _convert(spec, raw, offset)  # last value wins
    return values


def decode(message_name: str, data: bytes) -> Message | DecodeError:
    """Decode proto3 bytes as the named message; bad bytes give a DecodeError, never raise."""
    cls = _message_class(message_name)
    try:
        return cls(**_decode_fields(cls, data))
    except _Invalid as exc:
        return exc.error


# --- JSON mapping (vectors) -------------------------------------------------------------------

_DECIMAL = re.compile(r"-?[0-9]+")


def _from_json_value(spec: FieldSpec, value: Any, decode_bytes: Callable[[Any, str], bytes]) -> Any:
    """A field value from its vector JSON form; ValueError names the field."""
    ptype = spec.type
    if ptype is BYTES:
        return decode_bytes(value, f"fields.{spec.json_name}")
    if ptype is START_POSITION and isinstance(value, str):
        if value not in _START_POSITION_BY_NAME:
            raise ValueError(f"{spec.json_name}: unknown StartPosition name {value!r}")
        return _START_POSITION_BY_NAME[value]
    if ptype.bits == 64:  # 64-bit integers are decimal strings, as in proto3 JSON
        if not isinstance(value, str) or not _DECIMAL.fullmatch(value):
            raise ValueError(
                f"{spec.json_name}: {ptype.name} must be a decimal string, got {value!r}"
            )
        value = int(value)
    problem = _value_problem(ptype, value)
    if problem:
        raise ValueError(f"{spec.json_name}: {problem}")
    return _start_position(value) if ptype is START_POSITION else value


def from_json(
    message_name: str, fields: dict[str, Any], *, decode: Callable[[Any, str], bytes]
) -> Message:
    """Build a message from vector ``fields`` (JSON names; missing fields take defaults).

    ``decode`` turns a vector bytes value into bytes (``conformance.vectors.decode_bytes``).
    """
    cls = _message_class(message_name)
    by_json = {spec.json_name: spec for spec in field_table(cls)}
    kwargs = {}
    for key, value in fields.items():
        spec = by_json.get(key)
        if spec is None:
            raise ValueError(f"{message_name} has no field {key!r}")
        kwargs[spec.attr] = _from_json_value(spec, value, decode)
    return cls(**kwargs)


def _to_json_value(ptype: ProtoType, value: Any) -> Any:
    if ptype is BYTES:  # the vector bytes form: text when it is UTF-8, else base64
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return {"base64": base64.b64encode(value).decode("ascii")}
    if isinstance(value, StartPosition):
        return value.proto_name
    if ptype.bits == 64:
        return str(value)
    return value


def to_json(msg: Message) -> dict[str, Any]:
    """The vector ``fields`` of ``msg``: JSON names, default-valued fields left out."""
    return {
        spec.json_name: _to_json_value(spec.type, getattr(msg, spec.attr))
        for spec in field_table(type(msg))
        if getattr(msg, spec.attr) != spec.type.default
    }


# --- subjects ---------------------------------------------------------------------------------


def discover_subject(cluster_id: str, prefix: str = DEFAULT_DISCOVER_PREFIX) -> str:
    """Where a client sends its ConnectRequest: ``<discover-prefix>.<cluster-id>``."""
    return f"{prefix}.{cluster_id}"


def publish_subject(pub_prefix: str, subject: str) -> str:
    """Where a client publishes a PubMsg for ``subject``: pubPrefix + "." + subject."""
    return f"{pub_prefix}.{subject}"
