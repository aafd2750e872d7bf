"""Every relative link of the repository's Markdown documents leads somewhere: to a file or
directory that exists and, with a ``#fragment``, to a heading of that document (the anchor
GitHub gives it). The documents are split by reader and link to each other; a moved file or a
renamed heading must not leave a link behind."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from source_tree import ROOT

# [text](target) or [text](target "title"), images too; the text may run over lines.
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.DOTALL)  # may run over lines, as in Markdown
HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)  # https:, mailto:, ...


def documents() -> list[Path]:
    """The Markdown files git tracks, less the generated report's (untracked files are left
    out: a temporary directory inside the clone holds other tests' files, coming and going)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "*.md"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split("\0")  # fmt: skip
    paths = (ROOT / name for name in listed if name and not name.startswith("published/"))
    return sorted(path for path in paths if path.is_file())


def outside_fences(text: str) -> list[str]:
    """The lines of ``text`` outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but ``-`` and ``_`` dropped, spaces
    as ``-``; a link in it counts by its text, code marks go."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(document: Path) -> set[str]:
    """The anchors of ``document``'s headings; a repeated heading's get ``-1``, ``-2``, ..."""
    found: set[str] = set()
    for line in outside_fences(document.read_text(encoding="utf-8")):
        if heading := HEADING.match(line):
            base = anchor = slug(heading.group(1))
            repeats = 0
            while anchor in found:
                repeats += 1
                anchor = f"{base}-{repeats}"
            found.add(anchor)
    return found


def broken_links(document: Path) -> list[str]:
    """Each relative link of ``document`` (outside code) that leads nowhere, with the reason."""
    prose = CODE_SPAN.sub("", "\n".join(outside_fences(document.read_text(encoding="utf-8"))))
    problems = []
    for target in LINK.findall(prose):
        if EXTERNAL.match(target):
            continue
        path, _, fragment = target.partition("#")
        into = (document.parent / path).resolve() if path else document
        if not into.exists():
            problems.append(f"{target}: no such file")
        elif fragment and into.suffix == ".md" and fragment not in anchors(into):
            problems.append(f"{target}: no heading with anchor #{fragment}")
    return problems


DOCUMENTS = documents()  # read once, when the tests are collected (git is a process)


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_leads_to_a_file_and_heading(document: Path) -> None:
    assert broken_links(document) == []


def test_a_missing_file_or_heading_is_found_and_code_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other\n\n## The `--x` option, and more\n\n# Other\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n[ok](other.md#the---x-option-and-more) [top](#page) [web](https://x.org)\n"
        "[again](other.md#other-1) [a\nlink over lines](other.md) [dir](.)\n"
        "[gone](missing.md) [no anchor](other.md#nothing) `[code](missing.md)` ``a `[b](c.md)` ``\n"
        "`a span\nover lines [d](e.md)`\n```\n[fenced](missing.md)\n```\n"
    )
    assert broken_links(page) == [
        "missing.md: no such file",
        "other.md#nothing: no heading with anchor #nothing",
    ]


def test_the_readme_stays_short_and_starts_with_the_two_commands() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200  # issue 22: the rest is in the documents by reader it links to
    assert lines[2] == "```sh" and lines[5] == "```"
    assert lines[3].startswith("bin/run     # the main job: every default target")
    assert lines[4].startswith("bin/test    # the tests: ruff, then pytest")


# A module named by its path (harness/clients/scripts.py) or, for the harness, by its dotted name
# (harness.clients.scripts); a dotted name under conformance. or reports. is left alone, as test
# subjects such as conformance.pub share that form.
MODULE_PATH = re.compile(
    r"(?<![\w/.-])((?:harness|conformance|reports)(?:/[a-z_][a-z0-9_]*)+\.py)\b"
)
HARNESS_NAME = re.compile(r"(?<![\w/.-])(?:nats_conformance\.)?(harness(?:\.[a-z_][a-z0-9_]*)+)")


def is_module(root: Path, dotted: str) -> bool:
    """Whether ``dotted`` names a module or package, or something inside a module (an attribute):
    through packages each part must be a module or package of its own."""
    here = root
    for part in dotted.split("."):
        if not (here / "__init__.py").is_file() and here != root:
            return True  # inside a module: an attribute
        if (here / part / "__init__.py").is_file():
            here = here / part
        elif (here / f"{part}.py").is_file():
            here = here / f"{part}.py"
        else:
            return here != root and part in (here / "__init__.py").read_text(encoding="utf-8")
    return True


def stale_names(root: Path, paths: list[Path]) -> list[str]:
    """Each ``file: name`` where a document or module names a module that is not there."""
    found = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        named = {
            m.group(1) for m in MODULE_PATH.finditer(text) if not (root / m.group(1)).is_file()
        }
        named |= {
            m.group(1) for m in HARNESS_NAME.finditer(text) if not is_module(root, m.group(1))
        }
        found += [f"{path.relative_to(root)}: {name}" for name in sorted(named)]
    return found


def package_modules() -> list[Path]:
    return sorted(
        p for part in ("conformance", "harness", "reports") for p in (ROOT / part).rglob("*.py")
    )


def test_no_document_or_module_names_a_module_that_is_gone() -> None:
    """Renamed and moved modules leave no old name behind, in prose or in docstrings."""
    assert stale_names(ROOT, DOCUMENTS + package_modules()) == []


def test_a_gone_module_is_found_by_path_and_by_name(tmp_path: Path) -> None:
    (tmp_path / "harness" / "clients").mkdir(parents=True)
    (tmp_path / "harness" / "__init__.py").write_text("")
    (tmp_path / "harness" / "clients" / "__init__.py").write_text("")
    (tmp_path / "harness" / "clients" / "scripts.py").write_text("")
    doc = tmp_path / "doc.md"
    doc.write_text(
        "See harness/clients/scripts.py and harness.clients.scripts.run_script, not\n"
        "harness/client_scripts.py nor nats_conformance.harness.clients.targets; conformance.pub\n"
    )
    assert stale_names(tmp_path, [doc]) == [
        "doc.md: harness.clients.targets",
        "doc.md: harness/client_scripts.py",
    ]
