"""Text from targets and results files made safe for summary.md (the outputs and the sections
write its lines)."""

from __future__ import annotations


def table_cell(text: str) -> str:
    """Text from a target, safe inside a Markdown table cell (no tag can start: ``<`` is escaped,
    so where Markdown is rendered as HTML the text stays text)."""
    escaped = text.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;")
    return escaped.replace("\n", " ").replace("`", "'")


def code_span(text: str) -> str:
    """Text from a target, safe inside a Markdown code span."""
    return text.replace("`", "'").replace("\n", " ")
