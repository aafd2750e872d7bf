"""The report's text formats: its JSON files' layout, and text from targets and results files
made safe for summary.md (the outputs and the sections write them)."""

from __future__ import annotations

import json


def dumps(data: object) -> str:
    """A report's JSON: a value a line, indented by one space, so that the diff of a regenerated
    report shows the values that changed (and no more bytes than that needs)."""
    return json.dumps(data, indent=1, separators=(",", ":"), ensure_ascii=False) + "\n"


def table_cell(text: str) -> str:
    """Text from a target, safe inside a Markdown table cell (no tag can start: ``<`` is escaped,
    so where Markdown is rendered as HTML the text stays text)."""
    escaped = text.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;")
    return escaped.replace("\n", " ").replace("`", "'")


def code_span(text: str) -> str:
    """Text from a target, safe inside a Markdown code span."""
    return text.replace("`", "'").replace("\n", " ")
