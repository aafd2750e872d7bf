"""NATS Streaming messages (conformance.streaming_messages) against Google's protobuf runtime.

The protobuf descriptors are built here from streaming-fields.md's table, typed again below
independently of the module's own field table, so a wrong number or type in either shows up as
a byte difference.
"""

from __future__ import annotations

import base64
import dataclasses
from typing import Any

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message as PbMessage
from hypothesis import given
from hypothesis import strategies as st

from nats_conformance.conformance import streaming_messages
from nats_conformance.conformance.streaming_messages import DecodeError, StartPosition

# streaming-fields.md, typed again: message, field, number, proto3 type.
FIELDS_MD = """
PubMsg clientID 1 string
PubMsg guid 2 string
PubMsg subject 3 string
PubMsg reply 4 string
PubMsg data 5 bytes
PubMsg connID 6 bytes
PubMsg sha256 10 bytes
PubAck guid 1 string
PubAck error 2 string
MsgProto sequence 1 uint64
MsgProto subject 2 string
MsgProto reply 3 string
MsgProto data 4 bytes
MsgProto timestamp 5 int64
MsgProto redelivered 6 bool
MsgProto CRC32 10 uint32
Ack subject 1 string
Ack sequence 2 uint64
ConnectRequest clientID 1 string
ConnectRequest heartbeatInbox 2 string
ConnectRequest protocol 3 int32
ConnectRequest connID 4 bytes
ConnectRequest pingInterval 5 int64
ConnectRequest pingTimeout 6 int64
ConnectRequest pingMaxOut 7 int32
ConnectResponse pubPrefix 1 string
ConnectResponse subRequests 2 string
ConnectResponse unsubRequests 3 string
ConnectResponse closeRequests 4 string
ConnectResponse error 5 string
ConnectResponse subCloseRequests 6 string
ConnectResponse pingRequests 7 string
ConnectResponse pingInterval 8 int64
ConnectResponse pingTimeout 9 int64
ConnectResponse pingMaxOut 10 int32
ConnectResponse protocol 11 int32
ConnectResponse publicKey 100 string
Ping connID 1 bytes
PingResponse error 1 string
SubscriptionRequest clientID 1 string
SubscriptionRequest subject 2 string
SubscriptionRequest qGroup 3 string
SubscriptionRequest inbox 4 string
SubscriptionRequest maxInFlight 5 int32
SubscriptionRequest ackWaitInSecs 6 int32
SubscriptionRequest durableName 7 string
SubscriptionRequest startPosition 10 StartPosition
SubscriptionRequest startSequence 11 uint64
SubscriptionRequest startTimeDelta 12 int64
SubscriptionResponse ackInbox 2 string
SubscriptionResponse error 3 string
UnsubscribeRequest clientID 1 string
UnsubscribeRequest subject 2 string
UnsubscribeRequest inbox 3 string
UnsubscribeRequest durableName 4 string
CloseRequest clientID 1 string
CloseResponse error 1 string
"""
START_POSITION_VALUES = {
    "NewOnly": 0,
    "LastReceived": 1,
    "TimeDeltaStart": 2,
    "SequenceStart": 3,
    "First": 4,
}

TABLE: dict[str, dict[str, tuple[int, str]]] = {}
for _line in FIELDS_MD.strip().splitlines():
    _msg, _field, _number, _type = _line.split()
    TABLE.setdefault(_msg, {})[_field] = (int(_number), _type)

FDP = descriptor_pb2.FieldDescriptorProto
PB_TYPES = {
    "string": FDP.TYPE_STRING,
    "bytes": FDP.TYPE_BYTES,
    "bool": FDP.TYPE_BOOL,
    "int32": FDP.TYPE_INT32,
    "int64": FDP.TYPE_INT64,
    "uint32": FDP.TYPE_UINT32,
    "uint64": FDP.TYPE_UINT64,
    "StartPosition": FDP.TYPE_ENUM,
}


def _build_pb_classes() -> dict[str, type[PbMessage]]:
    fdp = descriptor_pb2.FileDescriptorProto(name="stan_test.proto", package="pb", syntax="proto3")
    enum = fdp.enum_type.add(name="StartPosition")
    for name, number in START_POSITION_VALUES.items():
        enum.value.add(name=name, number=number)
    for msg, fields in TABLE.items():
        mdp = fdp.message_type.add(name=msg)
        for name, (number, ptype) in fields.items():
            f = mdp.field.add(name=name, json_name=name, number=number, label=FDP.LABEL_OPTIONAL)
            f.type = PB_TYPES[ptype]
            if ptype == "StartPosition":
                f.type_name = ".pb.StartPosition"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return {
        msg: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"pb.{msg}"))
        for msg in TABLE
    }


PB = _build_pb_classes()


def to_pb(msg: streaming_messages.Message) -> PbMessage:
    """The protobuf runtime's message with the same field values, paired by JSON name."""
    out = PB[msg.NAME]()
    for spec in streaming_messages.field_table(type(msg)):
        value = getattr(msg, spec.attr)
        setattr(out, spec.json_name, int(value) if isinstance(value, StartPosition) else value)
    return out


def from_pb(pb: PbMessage) -> streaming_messages.Message:
    cls = streaming_messages.MESSAGES[pb.DESCRIPTOR.name]
    kwargs = {}
    for spec in streaming_messages.field_table(cls):
        value = getattr(pb, spec.json_name)
        if (
            spec.type is streaming_messages.START_POSITION
            and value in START_POSITION_VALUES.values()
        ):
            value = StartPosition(value)
        kwargs[spec.attr] = value
    return cls(**kwargs)


# --- strategies from the module's field table ----------------------------------------------


def value_strategy(ptype: streaming_messages.ProtoType) -> st.SearchStrategy[Any]:
    if ptype is streaming_messages.STRING:
        return st.text()
    if ptype is streaming_messages.BYTES:
        return st.binary()
    if ptype is streaming_messages.BOOL:
        return st.booleans()
    numbers = st.integers(ptype.lo, ptype.hi)
    if ptype is streaming_messages.START_POSITION:
        known = st.sampled_from(StartPosition)
        return st.one_of(known, numbers.filter(lambda n: n not in START_POSITION_VALUES.values()))
    return numbers


def message_strategy(
    cls: type[streaming_messages.Message],
) -> st.SearchStrategy[streaming_messages.Message]:
    fields = {spec.attr: value_strategy(spec.type) for spec in streaming_messages.field_table(cls)}
    return st.builds(cls, **fields)


messages = st.sampled_from(list(streaming_messages.MESSAGES.values())).flatmap(message_strategy)


# --- the table itself ---------------------------------------------------------------------------


def test_table_matches_streaming_fields_md() -> None:
    assert set(streaming_messages.MESSAGES) == set(TABLE)
    for name, cls in streaming_messages.MESSAGES.items():
        got = {
            spec.json_name: (spec.number, spec.type.name.removeprefix("enum "))
            for spec in streaming_messages.field_table(cls)
        }
        assert got == TABLE[name], name


def test_table_rows_are_the_dataclass_fields_in_number_order() -> None:
    for cls in streaming_messages.MESSAGES.values():
        table = streaming_messages.field_table(cls)
        assert {s.attr for s in table} == {f.name for f in dataclasses.fields(cls)}
        numbers = [s.number for s in table]
        assert numbers == sorted(set(numbers))


def test_defaults_are_proto3_defaults() -> None:
    req = streaming_messages.SubscriptionRequest()
    assert (req.client_id, req.max_in_flight, req.start_sequence) == ("", 0, 0)
    assert req.start_position is StartPosition.NEW_ONLY
    assert (
        streaming_messages.MsgProto().data == b""
        and streaming_messages.MsgProto().redelivered is False
    )
    assert all(
        streaming_messages.encode(cls()) == b"" for cls in streaming_messages.MESSAGES.values()
    )


# --- properties ------------------------------------------------------------------------------


@given(messages)
def test_decode_inverts_encode(msg: streaming_messages.Message) -> None:
    assert streaming_messages.decode(msg.NAME, streaming_messages.encode(msg)) == msg


@given(messages)
def test_encode_matches_protobuf_runtime(msg: streaming_messages.Message) -> None:
    assert streaming_messages.encode(msg) == to_pb(msg).SerializeToString(deterministic=True)


@given(messages)
def test_decode_reads_protobuf_runtime_output(msg: streaming_messages.Message) -> None:
    assert streaming_messages.decode(msg.NAME, to_pb(msg).SerializeToString()) == msg


@given(messages)
def test_json_round_trip(msg: streaming_messages.Message) -> None:
    fields = streaming_messages.to_json(msg)
    assert streaming_messages.from_json(msg.NAME, fields, decode=_decode_bytes) == msg


# Well-formed wire data in any shape: known fields in any order and repeated, plus unknown
# fields of every wire type. The decoder must read it as the protobuf runtime does.
def _varint(n: int) -> bytes:
    out = b""
    while n > 0x7F:
        out += bytes([n & 0x7F | 0x80])
        n >>= 7
    return out + bytes([n])


def _len_prefixed(payload: bytes) -> bytes:
    return _varint(len(payload)) + payload


VARINTS = st.one_of(st.integers(0, 300), st.integers(0, 2**64 - 1)).map(_varint)
UNKNOWN_VALUES = {
    0: VARINTS,
    1: st.binary(min_size=8, max_size=8),
    2: st.binary().map(_len_prefixed),
    5: st.binary(min_size=4, max_size=4),
}


def _known_value(ptype: str) -> st.SearchStrategy[bytes]:
    if ptype == "string":
        return st.text().map(lambda s: _len_prefixed(s.encode()))
    if ptype == "bytes":
        return st.binary().map(_len_prefixed)
    return VARINTS


@st.composite
def wire_data(draw: st.DrawFn, msg: str) -> bytes:
    known = TABLE[msg]
    taken = {number for number, _ in known.values()}
    out = b""
    for _ in range(draw(st.integers(0, 12))):
        if draw(st.booleans()):
            number, ptype = known[draw(st.sampled_from(sorted(known)))]
            wire = 2 if ptype in ("string", "bytes") else 0
            out += _varint(number << 3 | wire) + draw(_known_value(ptype))
        else:
            number = draw(st.integers(1, 2**29 - 1).filter(lambda n: n not in taken))
            wire = draw(st.sampled_from(sorted(UNKNOWN_VALUES)))
            out += _varint(number << 3 | wire) + draw(UNKNOWN_VALUES[wire])
    return out


@given(st.sampled_from(sorted(TABLE)).flatmap(lambda m: st.tuples(st.just(m), wire_data(m))))
def test_decode_agrees_with_protobuf_runtime_on_any_well_formed_input(
    case: tuple[str, bytes],
) -> None:
    msg, data = case
    assert streaming_messages.decode(msg, data) == from_pb(PB[msg].FromString(data))


# --- DecodeError reasons ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "data", "reason"),
    [
        ("MsgProto", b"\x08\xff", "truncated"),
        ("PubAck", b"\x0a\x05ab", "truncated"),
        ("PubAck", b"\x79\x01\x02", "truncated"),
        ("MsgProto", b"\x08" + b"\xff" * 10 + b"\x01", "varint_too_long"),
        ("PubAck", b"\x08\x01", "wrong_wire_type"),
        ("MsgProto", b"\x55\x26\x39\xf4\xcb", "wrong_wire_type"),
        ("PubAck", b"\x0a\x02\xc3\x28", "invalid_utf8"),
        ("PubAck", b"\x00\x00", "invalid_field_number"),
        ("PubAck", _varint(2**29 << 3) + b"\x00", "invalid_field_number"),
        ("PubAck", b"\x0f", "invalid_wire_type"),
        ("PubAck", b"\x7b\x7c", "invalid_wire_type"),
    ],
)
def test_decode_error_reasons(message: str, data: bytes, reason: str) -> None:
    result = streaming_messages.decode(message, data)
    assert isinstance(result, DecodeError)
    assert result.reason == reason
    assert result.detail


@given(messages, st.data())
def test_every_proper_prefix_is_an_error_or_a_message(
    msg: streaming_messages.Message, data: st.DataObject
) -> None:
    encoded = streaming_messages.encode(msg)
    cut = data.draw(st.integers(0, max(len(encoded) - 1, 0)))
    result = streaming_messages.decode(msg.NAME, encoded[:cut])
    # A cut between fields is a valid shorter message; inside a field it is truncated.
    assert isinstance(result, streaming_messages.MESSAGES[msg.NAME]) or result.reason == "truncated"


@given(st.sampled_from(sorted(streaming_messages.MESSAGES)), st.binary())
def test_decode_never_raises(message: str, data: bytes) -> None:
    assert isinstance(
        streaming_messages.decode(message, data), (streaming_messages.Message, DecodeError)
    )


def test_wrong_wire_type_is_rejected_where_protobuf_runtime_skips() -> None:
    # Documented divergence: the reference follows the gogo-generated Go code.
    assert PB["PubAck"].FromString(b"\x08\x01").guid == ""
    assert streaming_messages.decode("PubAck", b"\x08\x01") == DecodeError(
        "wrong_wire_type", "field guid (string) at offset 0 has wire type 0, expected 2"
    )


def test_unknown_enum_value_is_kept_as_int() -> None:
    result = streaming_messages.decode("SubscriptionRequest", b"\x50\x07")
    assert isinstance(result, streaming_messages.SubscriptionRequest)
    assert result.start_position == 7 and not isinstance(result.start_position, StartPosition)
    assert streaming_messages.encode(result) == b"\x50\x07"
    assert streaming_messages.to_json(result) == {"startPosition": 7}


# --- JSON mapping and validation ----------------------------------------------------------------


def _decode_bytes(value: Any, path: str) -> bytes:
    if isinstance(value, str):
        return value.encode()
    return base64.b64decode(value["base64"])


def test_from_json_forms() -> None:
    msg = streaming_messages.from_json(
        "SubscriptionRequest",
        {
            "clientID": "c",
            "startPosition": "TimeDeltaStart",
            "startTimeDelta": "-5",
            "maxInFlight": 7,
        },
        decode=_decode_bytes,
    )
    assert msg == streaming_messages.SubscriptionRequest(
        client_id="c",
        start_position=StartPosition.TIME_DELTA_START,
        start_time_delta=-5,
        max_in_flight=7,
    )
    ping = streaming_messages.from_json(
        "Ping", {"connID": {"base64": "/w=="}}, decode=_decode_bytes
    )
    assert ping == streaming_messages.Ping(conn_id=b"\xff")
    assert streaming_messages.to_json(ping) == {"connID": {"base64": "/w=="}}
    assert streaming_messages.to_json(streaming_messages.Ping(conn_id=b"ok")) == {"connID": "ok"}


@pytest.mark.parametrize(
    ("message", "fields", "named"),
    [
        ("PubAck", {"guid": "g", "bogus": 1}, "bogus"),
        ("PubAck", {"client_id": "c"}, "client_id"),
        ("MsgProto", {"sequence": 5}, "sequence"),  # 64-bit must be a decimal string
        ("MsgProto", {"sequence": "-1"}, "sequence"),
        ("MsgProto", {"CRC32": "5"}, "CRC32"),  # 32-bit must be a number
        ("MsgProto", {"CRC32": 2**32}, "CRC32"),
        ("MsgProto", {"redelivered": 1}, "redelivered"),
        ("SubscriptionRequest", {"startPosition": "Last"}, "startPosition"),
    ],
)
def test_from_json_rejects(message: str, fields: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        streaming_messages.from_json(message, fields, decode=_decode_bytes)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"sequence": -1},
        {"sequence": 2**64},
        {"crc32": 2**32},
        {"timestamp": 2**63},
        {"subject": b"x"},
    ],
)
def test_out_of_range_values_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        streaming_messages.MsgProto(**kwargs)


def test_unknown_message_name() -> None:
    with pytest.raises(ValueError, match="Nope"):
        streaming_messages.decode("Nope", b"")


def test_subjects() -> None:
    assert streaming_messages.discover_subject("mycluster") == "_STAN.discover.mycluster"
    assert streaming_messages.discover_subject("c", "x.y") == "x.y.c"
    assert streaming_messages.publish_subject("_STAN.pub.1", "a.b") == "_STAN.pub.1.a.b"
