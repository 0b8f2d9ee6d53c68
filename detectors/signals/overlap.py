"""Content overlap: an output carrying passages of another tenant's (or session's) recent context.

A shared fingerprint is evidence only when it is not explained by the receiver's own prompt or own
recent context and is not common to many tenants. The source is the tenant whose recent context
explains most unexplained passages (credit split between tenants that share a passage). Overlap
alone is graded by how much is shared: one or two fingerprints are `info` (unrelated code shares
idioms), a few are a warning, many are critical. Next to the placeholder mechanism (overlong,
accounting, prefill signals) any overlap is no coincidence: the verdict makes it critical.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from detectors.exchange import Exchange
from detectors.index import ContentIndex
from detectors.settings import DetectionSettings
from schemas.alert import Signal

_MAX_SOURCE_IDS = 5


class OverlapDetector:
    def __init__(self, settings: DetectionSettings) -> None:
        self.s = settings
        self.index = ContentIndex(
            settings.index_window_s,
            settings.index_max_docs,
            settings.index_max_fingerprints,
            settings.common_min_tenants,
        )

    def observe(self, ex: Exchange) -> list[Signal]:
        if ex.output_print is None or not ex.output_print.hashes:
            return []
        own = set(ex.prompt_print.hashes) if ex.prompt_print is not None else set()
        ov = self.index.query(ex.tenant_id, ex.session_id, ex.output_print.hashes, own)
        base = {
            "output_fingerprints": ov.total,
            "explained_own_prompt": ov.own_prompt,
            "explained_own_context": ov.own_context,
            "common": ov.common,
            "novel": ov.novel,
        }
        best = ov.best_tenant()
        session = ov.best_session()
        cross_tenant = best is not None and best[1] >= self.s.overlap_min_matches
        cross_session = session is not None and session[1] >= self.s.overlap_min_matches
        if cross_tenant and cross_session:
            # The conclusion is the origin that explains more of the output.
            assert best is not None and session is not None
            cross_tenant = best[1] >= session[1]
        if cross_tenant:
            assert best is not None
            tenant, n = best
            run = ov.run_by_tenant[tenant]
            return [
                self._signal("cross_tenant_contamination", n, run, ov.total, base, tenant, ov.source_requests[tenant])
            ]
        if cross_session:
            assert session is not None
            sess, n = session
            figures = dict(base, source_session_id=sess)
            run = ov.run_by_session[sess]
            reqs = ov.source_requests[ex.tenant_id]
            return [self._signal("cross_session_contamination", n, run, ov.total, figures, None, reqs)]
        return []

    def _signal(
        self, name: str, n: int, run: int, total: int, figures: dict[str, Any], source: str | None, reqs: Counter[str]
    ) -> Signal:
        if self.index.docs_seen < self.s.overlap_warmup_docs:
            # Cold start: nothing is common yet, so stock phrases look like rare shared passages.
            # Until the index has seen enough texts, overlap counts only next to the mechanism.
            severity = "info"
        elif run >= self.s.overlap_strong_matches:
            severity = "critical" if name == "cross_tenant_contamination" else "warning"
        elif run >= self.s.overlap_alone_matches:
            severity = "warning"
        else:
            # One or two shared k-grams happen between unrelated texts (code idioms); alone they are
            # no finding, but next to the placeholder mechanism they attribute the leak.
            severity = "info"
        top = sorted(reqs.items(), key=lambda kv: (-kv[1], kv[0]))[:_MAX_SOURCE_IDS]
        return Signal(
            name=name,
            severity=severity,
            score=min(1.0, 0.4 + 0.6 * n / self.s.overlap_strong_matches),
            source_tenant_id=source,
            figures=dict(
                figures,
                matched_fingerprints=n,
                longest_run=run,
                matched_share=round(n / total, 4) if total else 0.0,
                source_request_ids=[r for r, _ in top],
            ),
        )

    def learn(self, ex: Exchange, include_output: bool = True) -> None:
        """Add the exchange's own texts to the index, after it has been judged."""
        for tp in (ex.prompt_print, ex.output_print if include_output else None):
            if tp is not None and tp.hashes:
                self.index.add(ex.tenant_id, ex.session_id, ex.request_id, ex.ts, tp.hashes)
