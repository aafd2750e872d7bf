"""A regenerated report differs only where its results do: the same results give the same bytes
(no time of rendering unless asked, one stylesheet instead of a copy per page) and its files
hold a row or a value a line, so a diff names what changed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from report_samples import sample_report

from nats_conformance.reports import outputs
from nats_conformance.reports.analysis import generated_micros
from nats_conformance.reports.html import STYLESHEET


def test_the_generated_time_is_source_date_epoch_when_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764300000")
    assert generated_micros() == 1_764_300_000_000_000
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "not a time")
    assert generated_micros() > 1_764_300_000_000_000  # now
    monkeypatch.delenv("SOURCE_DATE_EPOCH")
    assert generated_micros() > 1_764_300_000_000_000


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_the_same_report_writes_the_same_bytes_a_row_a_line(tmp_path: Path) -> None:
    for name in ("a", "b"):
        outputs.write_all(sample_report(), tmp_path / name)
    first, second = _files(tmp_path / "a"), _files(tmp_path / "b")
    assert first == second
    assert STYLESHEET in first
    for name, content in first.items():
        text = content.decode("utf-8")
        if name.endswith(".html"):
            assert "</tr><tr" not in text, name  # a table row a line
            assert "<style>:root" not in text, name  # the stylesheet is not repeated
        elif name.endswith(".json"):
            data = json.loads(text)
            if isinstance(data, dict) and len(data) > 1:
                assert text.count("\n") > len(data), name  # a value a line, not one line
