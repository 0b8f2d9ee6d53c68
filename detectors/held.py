"""Findings a cold domain holds until it can judge them (docs/adr/0004, "cold domains hold their findings").

A domain's first minutes (`OverlapDetector.warm`) know no stock phrases yet: every greeting two tenants share
looks like a rare passage, so until the domain is warm a content-only match raises no alert. Dropping those
findings made a cold domain blind: a log of a few minutes replayed after the fact, or a small deployment's first
ten minutes, gave no content alert at all. So a response that a warm domain would have flagged high or critical on
content alone is held, text-free (ids, the signals as a warm domain gives them, the output fingerprints of each
source's runs), and judged again `overlap_hold_s` (600 s) of event time later, or sooner when the held list is
full (oldest first), when the domain goes idle, or at the end of the input. By then the domain knows more of what
is common: a run stands if, with what the domain has learned since (public corpus, the model's stock phrases,
tenants other than the source and the page's held receivers holding it in the window), it still has the matches
a page needs (`OverlapDetector.recheck`). The alert raised then carries the event time it was judged at (its delay is
visible) and the id the response would have had at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from schemas.alert import Signal


@dataclass(slots=True)
class HeldRun:
    """One run of a source's matches in the held output."""

    hashes: list[int]  # the output's fingerprints from its first to its last match (bridged common ones included)
    matches: int
    free: bool  # does not continue the receiver's own text (only free runs below a strong run make a page)


@dataclass(slots=True)
class Held:
    """A response a warm domain would have flagged on content alone: what is needed to judge it again."""

    ts: float  # event time of the response
    request_id: str
    tenant_id: str
    session_id: str | None
    traceparent: str | None
    signals: list[Signal]  # the response's signals as a warm domain gives them
    runs: dict[str, list[HeldRun]]  # per source flagged high or critical: its runs
    needs: dict[str, int]  # per such source: the free run it needed (`OverlapDetector.required_run`)


def standing(unexplained: Sequence[bool], bridge: int) -> int:
    """Matches in the longest run left of a held run once the fingerprints now explained are taken out: as in
    `ContentIndex.query`, a run goes on through up to `bridge` consecutive explained (common) fingerprints."""
    best = run = gap = 0
    for u in unexplained:
        if u:
            run += 1
            gap = 0
            if run > best:
                best = run
        else:
            gap += 1
            if gap > bridge:
                run = 0
    return best
