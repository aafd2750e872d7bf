"""The ``nats-conformance`` command."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from conformance import vectors


def _check(args: argparse.Namespace) -> int:
    paths = [Path(p) for p in args.dirs] or [vectors.BUNDLED_DIR]
    missing = [p for p in paths if not p.exists()]
    if missing:
        print(f"nats-conformance: no such file or directory: {missing[0]}", file=sys.stderr)
        return 2
    loaded = vectors.load_all(paths)
    problems = list(loaded.problems)
    passed: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    for case in loaded.cases:
        problem = vectors.evaluate(case)
        if problem is None:
            passed[case.group] += 1
        else:
            failed[case.group] += 1
            problems.append(problem)
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
    file_problems = len(loaded.problems)
    print(
        f"vectors check: {n_pass + n_fail} cases in {len(groups)} groups: "
        f"{n_pass} passed, {n_fail} failed, {file_problems} file problems"
    )
    return 0 if not problems and n_pass else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nats-conformance", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    vec = commands.add_parser("vectors", help="work with vector files")
    vec_commands = vec.add_subparsers(dest="vectors_command", required=True)
    check = vec_commands.add_parser(
        "check",
        help="validate vector files against the schema and evaluate each case with the reference",
    )
    check.add_argument(
        "dirs", nargs="*", metavar="DIR", help="files or directories (default: the bundled vectors)"
    )
    check.set_defaults(func=_check)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
