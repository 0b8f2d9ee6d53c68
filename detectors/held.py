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

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from detectors.commonness import TenantSpread
from detectors.fleet import AUTHORED, Fleet
from detectors.index import ContentIndex
from detectors.matches import BRIDGE
from detectors.public import PublicSet
from detectors.settings import DetectionSettings
from detectors.signals.pages import strong_run
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
    response_id: str | None = None  # the provider's id of the response (gen_ai.response.id), for the alert


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


class HeldJudge:
    """Judging a held finding again (`OverlapDetector` is one): what it reads of the detector's state."""

    s: DetectionSettings
    index: ContentIndex
    spread: TenantSpread
    model_spread: TenantSpread
    fleet: Fleet | None
    public: PublicSet | None

    def _model_writing(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per fingerprint: the sessions whose answers held it (up to `fleet.model_record`'s levels) and whether a
        prompt introduced it first, by this domain's record and the fleet's (detectors/fleet.py): a habit of other
        domains is one here, and text a prompt authored anywhere stays authored."""
        sessions = self.model_spread.tenants(keys)
        authored = self.spread.tagged(AUTHORED, keys)
        if self.fleet is not None:
            sessions = np.maximum(sessions, self.fleet.sessions(keys))
            authored = authored | self.fleet.authored(keys)
        return sessions, authored

    def recheck(self, held: Held, receivers: dict[tuple[str, int], set[str]]) -> list[Signal]:
        """The held response's signals, judged with what the domain knows now: a flagged source none of whose runs
        still has the matches a page needs (`_stands`) is dismissed (info). `receivers`: per (source, fingerprint),
        the tenants of the held responses whose runs of that source hold it (this one's included). The runs that
        stand are not tainted now: the receiver learned them while cold, and text tainted late, when wrongly held,
        could never become common."""
        out = []
        for s in held.signals:
            src = s.source_tenant_id
            if (
                s.name == "cross_tenant_contamination"
                and src is not None
                and src in held.runs
                and not any(self._stands(r, src, held.needs[src], receivers) for r in held.runs[src])
            ):
                s = s.model_copy(update={"severity": "info", "figures": dict(s.figures, held_dismissed=True)})
            out.append(s)
        return out

    def _stands(self, run: HeldRun, src: str, need: int, receivers: dict[tuple[str, int], set[str]]) -> bool:
        """Whether a held run is still a page: with its fingerprints that are now public or common taken out, it keeps
        a strong run, or (a free run) the run its source needed. Common here counts independent holders: tenants in
        the window other than the source and the held receivers of that page (`receivers`), or a page held for
        `common_min_tenants` receivers itself. The long-horizon record cannot tell those apart (a page that reached
        two receivers while the domain was cold is in three tenants' texts, like a stock phrase), nor can the
        receiver's own history (its output was learned while cold); the window (900 s) still holds the minutes
        after the finding (judged `overlap_hold_s` = 600 s later). The model's stock phrases are asked as when
        judging at once."""
        if not run.hashes:
            return False
        others = self.s.shared_min_tenants - 1
        holders = self.index.holders
        none: set[str] = set()
        # Held for that many receivers: what the model writes to everyone (a public text it
        # echoes) more likely than one stale page read that often in a domain's first minutes.
        many = self.s.common_min_tenants
        explained = np.zeros(len(run.hashes), dtype=bool)
        got_n = np.zeros(len(run.hashes), dtype=np.int64)
        for i, h in enumerate(run.hashes):
            got = receivers.get((src, h), none)
            got_n[i] = len(got)
            explained[i] = len(got) >= many or len(holders(h) - got - {src}) >= others
        if self.s.common_min_sessions:
            # The model's habit (`_common`), with the same provenance: text the model wrote first, in that many
            # sessions' answers besides the held receivers' own (their outputs were learned while cold, so each of
            # them adds a session of its own to the record).
            sessions, authored = self._model_writing(np.asarray(run.hashes, dtype=np.uint64))
            explained |= (sessions.astype(np.int64) - got_n >= self.s.common_min_sessions) & ~authored
        if self.public is not None:
            explained |= np.asarray(self.public.contains(run.hashes), dtype=bool)
        left = standing((~explained).tolist(), BRIDGE)
        return left >= strong_run(self.s, need) or (run.free and left >= need)


def held_receivers(held: Iterable[Held]) -> dict[tuple[str, int], set[str]]:
    """Per (source, fingerprint of one of its held runs), the tenants of the held responses holding it: the receivers
    of that page of the source while the domain was cold."""
    out: dict[tuple[str, int], set[str]] = {}
    for h in held:
        for src, runs in h.runs.items():
            for run in runs:
                for fp in run.hashes:
                    out.setdefault((src, fp), set()).add(h.tenant_id)
    return out
