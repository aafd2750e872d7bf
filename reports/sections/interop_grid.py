"""Interoperability: the client pairs of the interop matrix, senders down and receivers across,
each cell the pair's must cases passed of judged, coloured by must failures (a pair failing a
must case is red whatever its score), on index.html; a line and the failing pairs in summary.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..html import Links, breakable, counts_title, esc, fraction, must_class, muted, section, tag
from ..model import Counts, Report, TargetReport
from ..section import Given, Index, Section
from . import transport_support
from .compliance_matrix import TABLE_HEAD, markdown_row
from .transport_support import Carried


def pair_of(target: str) -> tuple[str, str]:
    """'client:a->client:b' -> (sender, receiver)."""
    sender, _, receiver = target.partition("->")
    return sender, receiver


def interop_grid(
    targets: Sequence[TargetReport], links: Links, carried: Mapping[str, Sequence[Carried]]
) -> str:
    """Senders down, receivers across; a cell is the pair's must cases passed of judged (over
    tcp), coloured by must failures, and a mark per transport its rows went over (``carried``:
    target -> its transports)."""
    pairs = {pair_of(t.run.target): t for t in targets}
    senders = sorted({s for s, _ in pairs})
    receivers = sorted({r for _, r in pairs})
    head = tag("th", "sender ↓ / receiver →", class_="tname") + "".join(
        tag("th", breakable(r), scope="col") for r in receivers
    )
    rows = []
    for sender in senders:
        cells = []
        for receiver in receivers:
            pair = pairs.get((sender, receiver))
            if pair is None:
                cells.append(tag("td", "·", class_="na", title="not run"))
                continue
            must = pair.must
            text = fraction(must) if must.judged else "—"
            link = tag("a", esc(text), href=links[pair.run.target])
            link += transport_support.marks(carried.get(pair.run.target, []))
            title = (
                f"{pair.run.target} ({pair.run.version})\nmust: {counts_title(must)}\n"
                f"all levels: {counts_title(pair.totals)}"
            )
            cls = must_class(must.failed + must.errored, must.passed)
            cells.append(tag("td", link, class_=f"cell {cls}", title=title))
        rows.append(tag("tr", tag("th", breakable(sender), scope="row") + "".join(cells)))
    return tag(
        "div",
        tag("table", tag("thead", tag("tr", head)) + tag("tbody", "".join(rows)), id="interop"),
        class_="scroll",
    )


class InteropSection(Section[None]):
    name = "interop"

    def compute(self, given: Given) -> None:
        return None  # the core: each pair's latest run

    def nav(self, report: Report) -> tuple[str, str]:
        return ("#interop-section", "Interop")

    def index(self, page: Index) -> str:
        pairs = [t for t in page.report.targets if t.interop]
        return section(
            "Interoperability",
            muted(
                "Each cell: the pair's must cases passed of judged over tcp; red when a must case "
                "fails. Below it, a mark per transport the pair's rows went over, as in the matrix."
            )
            + interop_grid(
                pairs,
                page.links,
                transport_support.by_target(transport_support.SECTION.of(page.report)),
            )
            if pairs
            else muted("No interop pairs in this report."),
            id="interop-section",
        )

    def markdown(self, report: Report) -> list[str]:
        """One line for the whole interop matrix, then the pairs that fail a must case."""
        pairs = [t for t in report.targets if t.interop]
        if not pairs:
            return []
        failing = [t for t in pairs if t.must.judged > t.must.passed]
        must = sum((t.must for t in pairs), Counts())
        lines = [
            "",
            f"Interop: {len(pairs)} ordered client pairs, must {must.passed}/{must.judged}; "
            f"{len(failing)} pair(s) fail a must case.",
        ]
        if failing:
            lines += ["", *TABLE_HEAD, *(markdown_row(t) for t in failing)]
        return lines


SECTION = InteropSection()
