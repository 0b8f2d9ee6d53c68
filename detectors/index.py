"""A domain's content index: fingerprints of recent prompts and outputs, bounded by time and size.

For each fingerprint it keeps, per tenant, the newest text that contained it. That is enough to
(1) explain a match away when the receiving tenant had the passage itself, (2) call a fingerprint
boilerplate when several tenants had it, and (3) attribute a leak to the tenant that explains most
unexplained passages. Memory is bounded by `max_docs` and `max_fingerprints`; old texts expire.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field


@dataclass(slots=True)
class Doc:
    doc_id: int
    tenant_id: str
    session_id: str | None
    request_id: str
    ts: float
    hashes: list[int]


@dataclass(slots=True)
class Overlap:
    """What an output shares with the index, after explaining away and boilerplate removal."""

    total: int = 0
    own_prompt: int = 0
    own_context: int = 0
    common: int = 0
    novel: int = 0
    by_tenant: Counter[str] = field(default_factory=Counter)
    # A passage several other tenants had is weaker evidence for each of them: credit is split.
    weight: dict[str, float] = field(default_factory=dict)
    newest: dict[str, float] = field(default_factory=dict)
    # Longest run of consecutive output fingerprints matched to one source: a leaked passage is a
    # run; scattered single matches are shared idioms and stock phrases.
    run_by_tenant: Counter[str] = field(default_factory=Counter)
    run_by_session: Counter[str] = field(default_factory=Counter)
    by_session: Counter[str] = field(default_factory=Counter)  # same tenant, other session
    source_requests: dict[str, Counter[str]] = field(default_factory=dict)

    def best_tenant(self) -> tuple[str, int] | None:
        if not self.by_tenant:
            return None
        # Most (split) credit wins, then most passages, then the most recent text (stale pages are
        # the recently freed ones), then the lexically first id so the verdict is stable.
        tenant = min(
            self.by_tenant,
            key=lambda t: (-round(self.weight[t], 9), -self.by_tenant[t], -self.newest[t], t),
        )
        return tenant, self.by_tenant[tenant]

    def best_session(self) -> tuple[str, int] | None:
        if not self.by_session:
            return None
        return min(self.by_session.items(), key=lambda kv: (-kv[1], kv[0]))


class ContentIndex:
    def __init__(self, window_s: float, max_docs: int, max_fingerprints: int, common_min_tenants: int) -> None:
        self.window_s = window_s
        self.max_docs = max_docs
        self.max_fingerprints = max_fingerprints
        self.common_min_tenants = common_min_tenants
        # fingerprint -> {tenant_id: doc_id of that tenant's newest text with it}
        self._postings: dict[int, dict[str, int]] = {}
        self._docs: dict[int, Doc] = {}
        self._order: deque[int] = deque()
        self._next_id = 0
        self.docs_seen = 0
        self._fingerprints = 0

    def add(self, tenant_id: str, session_id: str | None, request_id: str, ts: float, hashes: list[int]) -> None:
        if not hashes:
            return
        doc = Doc(self._next_id, tenant_id, session_id, request_id, ts, hashes)
        self._next_id += 1
        self.docs_seen += 1
        self._docs[doc.doc_id] = doc
        self._order.append(doc.doc_id)
        self._fingerprints += len(hashes)
        postings = self._postings
        for h in hashes:
            owners = postings.get(h)
            if owners is None:
                postings[h] = {tenant_id: doc.doc_id}
            else:
                owners[tenant_id] = doc.doc_id
        self._expire(ts)

    def _expire(self, now: float) -> None:
        horizon = now - self.window_s
        while self._order and (
            len(self._order) > self.max_docs
            or self._fingerprints > self.max_fingerprints
            or self._docs[self._order[0]].ts < horizon
        ):
            self._drop(self._order.popleft())

    def advance(self, now: float) -> None:
        self._expire(now)

    def _drop(self, doc_id: int) -> None:
        doc = self._docs.pop(doc_id)
        self._fingerprints -= len(doc.hashes)
        postings = self._postings
        for h in doc.hashes:
            owners = postings.get(h)
            # Only the tenant's newest text is recorded; a newer one keeps the entry alive.
            if owners is not None and owners.get(doc.tenant_id) == doc_id:
                del owners[doc.tenant_id]
                if not owners:
                    del postings[h]

    def query(self, tenant_id: str, session_id: str | None, hashes: list[int], own_prompt: set[int]) -> Overlap:
        ov = Overlap(total=len(hashes))
        postings = self._postings
        docs = self._docs
        common_min = self.common_min_tenants
        runs: dict[str, int] = {}  # source -> length of the run ending at the previous fingerprint
        for h in hashes:
            prev, runs = runs, {}
            if h in own_prompt:
                ov.own_prompt += 1
                continue
            owners = postings.get(h)
            if owners is None:
                ov.novel += 1
                continue
            if len(owners) >= common_min:
                ov.common += 1
                continue
            own_doc = owners.get(tenant_id)
            if own_doc is not None:
                sess = docs[own_doc].session_id
                if session_id is None or sess is None or sess == session_id:
                    ov.own_context += 1
                else:
                    ov.by_session[sess] += 1
                    runs[sess] = prev.get(sess, 0) + 1
                    ov.run_by_session[sess] = max(ov.run_by_session[sess], runs[sess])
                    ov.source_requests.setdefault(tenant_id, Counter())[docs[own_doc].request_id] += 1
                continue
            share = 1.0 / len(owners)
            for other, doc_id in owners.items():
                doc = docs[doc_id]
                ov.by_tenant[other] += 1
                runs[other] = prev.get(other, 0) + 1
                ov.run_by_tenant[other] = max(ov.run_by_tenant[other], runs[other])
                ov.weight[other] = ov.weight.get(other, 0.0) + share
                ov.newest[other] = max(ov.newest.get(other, doc.ts), doc.ts)
                ov.source_requests.setdefault(other, Counter())[doc.request_id] += 1
        return ov

    def state_size(self) -> dict[str, int]:
        return {
            "docs": len(self._docs),
            "fingerprints": self._fingerprints,
            "distinct_fingerprints": len(self._postings),
        }
