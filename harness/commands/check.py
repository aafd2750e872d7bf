"""``nats-conformance vectors check``: validate vector files against the schema, evaluate each case
with the reference, and hold its citations and level to the documents' words."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from ...conformance import levels, requirements, vectors

# The documents every vector cites, beside a clone of the repository (../shared/spec).
DEFAULT_SPEC = vectors.BUNDLED_DIR.parent.parent / "shared" / "spec"


def main(args: argparse.Namespace) -> int:
    paths = [Path(p) for p in args.dirs] or [vectors.BUNDLED_DIR]
    missing = [p for p in paths if not p.exists()]
    if missing:
        print(f"nats-conformance: no such file or directory: {missing[0]}", file=sys.stderr)
        return 2
    loaded = vectors.load_all(paths)
    statements = requirements.bundled_index()
    # Every case is held to the bundled levels, whatever files are checked.
    statement_levels = levels.bundled_levels()
    level_file = levels.levels_problems(statement_levels, statements, str(levels.LEVELS_PATH))
    problems = [*loaded.problems, *level_file]
    texts = documents(args.spec)
    if texts is None:
        print(
            f"note: quotes not compared with the documents' words: {args.spec or DEFAULT_SPEC} "
            "is not a directory; put the specification documents there or name their "
            "directory with --spec DIR (the schema, reference and citations are checked)"
        )
    passed: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    for case in loaded.cases:
        problem = vectors.evaluate(case) or (
            vectors.citation_problem(case, texts) if texts is not None else None
        )
        found = [problem] if problem else requirements.citation_problems(case, statements)
        found += levels.case_problems(case, statements, statement_levels)
        if not found:
            passed[case.group] += 1
        else:
            failed[case.group] += 1
            problems += found
    for note in loaded.notes:  # what an older format left out, filled in as it meant
        print(f"NOTE {note}")
    for problem in problems:
        print(f"FAIL {problem}")
    groups = sorted(set(passed) | set(failed))
    if groups:
        width = max(len(g) for g in groups)
        print(f"{'group':<{width}}  {'cases':>6}  {'passed':>6}  {'failed':>6}")
        for group in groups:
            total = passed[group] + failed[group]
            print(f"{group:<{width}}  {total:>6}  {passed[group]:>6}  {failed[group]:>6}")
    n_pass, n_fail = sum(passed.values()), sum(failed.values())
    file_problems = len(loaded.problems) + len(level_file)
    print(
        f"vectors check: {n_pass + n_fail} cases in {len(groups)} groups: "
        f"{n_pass} passed, {n_fail} failed, {file_problems} file problems"
    )
    return 0 if not problems and n_pass else 1


def documents(spec: Path | None) -> dict[str, str] | None:
    """{file name: whitespace-normalised text} of the specification documents, None when the
    directory is not there (an installed package carries no documents)."""
    directory = spec or DEFAULT_SPEC
    if not directory.is_dir():
        return None
    return {
        path.name: vectors.normalise_whitespace(path.read_text(encoding="utf-8"))
        for path in sorted(directory.iterdir())
        if path.is_file()
    }
