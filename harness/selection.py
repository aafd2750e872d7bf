"""Which cases a run takes: ``--case GLOB``, ``--group GLOB``, ``--level L``, ``--role R``.

The same filters apply to every kind of case (server vectors, client-role vectors, interop and
streaming vectors, the streaming server checks), so a selection means one thing everywhere.
A filter that matches nothing is a usage error: a CI job must not pass because it ran nothing.

``--case`` takes every id a run prints, not only case ids: a row id ``<case id>@<path>`` (a
client row, a streaming client row) selects its case (every row of it runs: the rows of a case
share a session); the row a NATS
Streaming library gives a ``streaming.client`` case on a streaming server target
(``streaming.server.<library>.<rest>``) selects that case. Case ids never hold ``@``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from ..conformance import vectors


@dataclass(frozen=True)
class Candidate:
    """What the filters look at in a case, whatever its kind."""

    id: str
    group: str
    level: str
    roles: tuple[str, ...]
    # Globs of the other ids this case's rows are printed with (besides ``<id>@<path>``).
    rows: tuple[str, ...] = ()

    def named_by(self, glob: str) -> bool:
        """Whether ``--case GLOB`` names this case: by its id, by a row id ``<id>@<path>`` (the
        part before ``@``), or by one of its other row ids (a printed id or a glob of them)."""
        return fnmatchcase(self.id, glob.partition("@")[0]) or any(
            fnmatchcase(row, glob) or fnmatchcase(glob, row) for row in self.rows
        )


@dataclass(frozen=True)
class Selection:
    """The filters of one run: a case is selected when every given kind of filter has a value it
    matches (globs on ids and groups, exact levels and roles); no filter selects everything."""

    cases: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    levels: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()

    @property
    def active(self) -> bool:
        return bool(self.cases or self.groups or self.levels or self.roles)

    def matches(self, c: Candidate) -> bool:
        return (
            (not self.cases or any(c.named_by(glob) for glob in self.cases))
            and (not self.groups or any(fnmatchcase(c.group, glob) for glob in self.groups))
            and (not self.levels or c.level in self.levels)
            and (not self.roles or any(role in self.roles for role in c.roles))
        )

    def unmatched(self, candidates: Sequence[Candidate]) -> list[str]:
        """Each filter (``--case GLOB``, ...) that matches none of ``candidates`` on its own."""
        filters: list[tuple[str, tuple[str, ...], Callable[[Candidate, str], bool]]] = [
            ("--case", self.cases, Candidate.named_by),
            ("--group", self.groups, lambda c, glob: fnmatchcase(c.group, glob)),
            ("--level", self.levels, lambda c, level: c.level == level),
            ("--role", self.roles, lambda c, role: role in c.roles),
        ]
        return [
            f"{flag} {value}"
            for flag, values, hit in filters
            for value in values
            if not any(hit(c, value) for c in candidates)
        ]


STREAMING_CLIENT_KIND = "streaming.client"


def of_case(case: vectors.Case) -> Candidate:
    rows: tuple[str, ...] = ()
    if case.kind == STREAMING_CLIENT_KIND:  # harness.clients.stan_client_checks.client_case_id
        rows = (f"streaming.server.*.{case.id.removeprefix('streaming.client.')}",)
    return Candidate(case.id, case.group, case.level, tuple(case.roles), rows)


def select_cases(selection: Selection, cases: Iterable[vectors.Case]) -> list[vectors.Case]:
    return [case for case in cases if selection.matches(of_case(case))]


def empty_selection_error(selection: Selection, candidates: Iterable[Candidate]) -> str:
    """Why a selection that runs nothing is empty: the filters that match no case, or, when each
    matches some case, that no case matches them all (with these targets)."""
    unmatched = selection.unmatched(list(candidates))
    if unmatched:
        return f"no case matches {', '.join(unmatched)}"
    return "no case of these targets matches every filter together"
