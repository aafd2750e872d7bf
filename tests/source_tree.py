"""A copy of this working tree as a source distribution sees it, for the tests that build or
install the suite from source."""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Not source: VCS data, the virtualenv, build outputs, caches, published results, the tests.
NOT_SOURCE = shutil.ignore_patterns(
    ".git", ".venv", "build", "out", "*.egg-info", "__pycache__", ".*_cache", "results",
    "published", "tests", "bench",
)  # fmt: skip


def suite_source(directory: Path) -> Path:
    """This working tree without what is not source, copied to ``directory``. A temporary
    directory inside the tree (TMPDIR there, so ``directory`` is under it) is left out too: it
    is not source, and copying it would copy the copy being made."""
    into = directory.resolve()

    def ignore(where: str, names: list[str]) -> set[str]:
        holds_copy = {name for name in names if into.is_relative_to(Path(where, name).resolve())}
        return set(NOT_SOURCE(where, names)) | holds_copy

    return Path(shutil.copytree(ROOT, directory, ignore=ignore))
