"""`nats-conformance smoke`: one driver checked in seconds."""

from __future__ import annotations

import time

import pytest

from nats_conformance.harness import cli


def test_smoke_passes_for_nats_py(capsys: pytest.CaptureFixture[str]) -> None:
    cli.main(["smoke", "--client", "client:nats-py"])  # builds the driver if not yet built
    started = time.monotonic()
    status = cli.main(["smoke", "--client", "client:nats-py"])
    elapsed = time.monotonic() - started
    out = capsys.readouterr().out
    assert status == 0, out
    assert elapsed < 15, out  # seconds, once built
    for step in ("hello", "connect", "subscribe", "publish", "flush", "receive", "close"):
        assert f"ok   {step}" in out, out
    assert "capabilities: " in out and "flush_roundtrip" in out, out
    assert "smoke passed" in out


def test_smoke_fails_for_a_driver_that_cannot_start(capsys: pytest.CaptureFixture[str]) -> None:
    status = cli.main(["smoke", "--client", "client:no-such-library"])
    out = capsys.readouterr().out
    assert status == 1, out
    assert "FAIL driver" in out and "smoke FAILED" in out, out
