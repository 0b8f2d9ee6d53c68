"""What one output's query found in a domain's content index (`ContentIndex.query`): the Overlap, the runs of
consecutive matches it is built from, and how each match is counted into them.

Kept apart from the index's storage (detectors/index.py) so that each file holds one thing: the index stores and
expires texts and answers queries; this file says what a match counts for.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

__all__ = ["BRIDGE", "Overlap", "Run", "Runs", "credit", "measure", "own", "unit_tokens"]


class Text(Protocol):
    """What counting a match reads of the indexed text it matched (`detectors.index.Doc` is one)."""

    @property
    def tenant_id(self) -> str: ...
    @property
    def session_id(self) -> str | None: ...
    @property
    def request_id(self) -> str: ...
    @property
    def ts(self) -> float: ...
    @property
    def tpu(self) -> float: ...
    @property
    def doc_id(self) -> int: ...


class Run(NamedTuple):
    """The open run of consecutive matches of one source (tenant or session)."""

    length: int  # matches (bridged fingerprints not counted)
    weight: float  # summed evidence weight
    tokens: float  # summed evidence weight x the source text's tokens per unit; -1 for a cross-session run
    start: int  # position of its first fingerprint in the output
    last: int  # position of its last match
    bridged: int = 0  # fingerprints bridged since the last match (`ContentIndex.query`, `bridge`)
    units: float = 0.0  # summed tokens per unit of the source text over the matches, unsplit (`_measure`)


# Model tokens per unit by unit class (docs/adr/0004, tokens table, and "2026-11-30 (attribution)"): a text whose
# engine count is below `CHAR_CLASS_MAX` tokens per unit is mostly character units (Han, Kana, Hangul, Thai...), about
# one token each; above, words, taken at the English ratio. Only the class is used: within one class the per-text
# ratio is measurement noise (code's whitespace and symbols, a template), which would decide near-ties at random.
CHAR_CLASS_MAX = 1.15
WORD_TOKENS = 1.3


def unit_tokens(tpu: float) -> float:
    """What one matched unit of a text with `tpu` engine tokens per unit weighs in `Overlap.tokens`."""
    return 1.0 if tpu < CHAR_CLASS_MAX else WORD_TOKENS


SESSION_RUN = Run(0, 0.0, -1.0, 0, 0)
# Common fingerprints a source's run goes on through (`ContentIndex.query`, `bridge`).
BRIDGE = 3
Runs = dict[str, Run]


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
    # Explained by what the window cannot see: the receiver's own older history, the operator's public
    # corpus, or a spread over many tenants across the long horizon.
    own_history: int = 0
    public: int = 0
    # Rarity-weighted evidence per source (see `rarity`), passages (runs) per source, and the matched
    # fingerprints per source, in output order.
    evidence: dict[str, float] = field(default_factory=dict)
    passages: Counter[str] = field(default_factory=Counter)
    # Runs of at least `long_run` matches that do not continue the receiver's own text (`ContentIndex._close`).
    long_passages: Counter[str] = field(default_factory=Counter)
    long_run: int = 3
    # Evidence inside long passages only: the source of a leak is the tenant whose pages explain the long runs,
    # not the one that shares the most scattered vocabulary with the output.
    long_evidence: dict[str, float] = field(default_factory=dict)
    # Model tokens of the source's text estimated inside long passages (split where several tenants in the window
    # had a match; not weighed by long-horizon rarity, which says how telling a match is, not how long the page
    # is: docs/adr/0004, "information"): a run of r
    # consecutive matches spans about r * gap + edge units (winnowing selects one k-gram per `gap` units
    # on average, and a passage's last k-gram adds k - 1 units), each worth its source text's tokens per unit.
    # A page leak is counted in tokens, so the source that put most tokens into the output is the origin.
    tokens: dict[str, float] = field(default_factory=dict)
    short_tokens: dict[str, float] = field(default_factory=dict)  # the same in shorter runs
    gap: float = 2.5
    edge: float = 4.0
    # Longest run per source that does not continue the receiver's own text, and the runs that do (`_close`).
    free_run: Counter[str] = field(default_factory=Counter)
    attached: Counter[str] = field(default_factory=Counter)
    matched: dict[str, list[int]] = field(default_factory=dict)
    # Matches inside long runs, per tenant and per other session of the receiver (`prefers_tenant`).
    long_matches: Counter[str] = field(default_factory=Counter)
    session_long: Counter[str] = field(default_factory=Counter)
    session_spans: dict[str, list[tuple[int, int]]] = field(default_factory=dict)  # its long runs' first, last
    # Output positions (first, last) of every tenant run, long or short (`foreign_free`).
    spans: list[tuple[int, int]] = field(default_factory=list)
    # Short runs that are the junction of two innocent texts, not a page (`ContentIndex._junction`).
    junctions: Counter[str] = field(default_factory=Counter)
    # Short runs whose fingerprints are not one passage of any one text of the source (`ContentIndex._in_order`).
    out_of_order: Counter[str] = field(default_factory=Counter)
    # Per source with a long free run: (output fingerprints outside its long runs that its window text holds, output
    # fingerprints outside its long runs that could be): how often the source's text meets this output by chance
    # (`ContentIndex._chance`; docs/adr/0004, "information").
    chance: dict[str, tuple[int, int]] = field(default_factory=dict)
    long_spans: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    # Per source, its runs that do not continue the receiver's own text: (matches, k-gram positions the run covers in
    # the output, first to last, or 0 when the output's positions are unknown) (docs/adr/0004, "coverage").
    free_runs: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    # Per source, every run of at least `long_run` matches: (first, last) output positions, matches, and whether it
    # continues the receiver's own text (attached, a junction or out of order): what a cold domain holds to judge
    # again later (`detectors/held.py`).
    run_spans: dict[str, list[tuple[int, int, int, bool]]] = field(default_factory=dict)
    # Per source, its runs where the output's positions are known: (first unit, last unit its k-grams cover, tokens per
    # unit of its text, first and last fingerprint in the output) (`ContentIndex._measure`).
    pieces: dict[str, list[tuple[int, float, float, int, int]]] = field(default_factory=dict)
    # Per source, its free runs where the output's positions are known: (matches, first k-gram position, last k-gram
    # position); and the ids of the source's texts the output matched (the whole-sentence test, ADR 0008 decision 8).
    free_spans: dict[str, list[tuple[int, int, int]]] = field(default_factory=dict)
    docs: dict[str, set[int]] = field(default_factory=dict)

    def leaked_tokens(self, tenant: str) -> float:
        """Estimated tokens of `tenant`'s text in the output: its long passages, and once one proves it a source,
        its shorter runs too (pieces of its pages split where a fingerprint was explained away)."""
        long = self.tokens.get(tenant, 0.0)
        return long + self.short_tokens.get(tenant, 0.0) if long else 0.0

    def prefers_tenant(self, tenant: str, session: str) -> bool:
        """Whether the output's origin is the other tenant rather than the receiver's own other session, when both
        match. The longer passages decide (matches inside long runs): a session of the receiver's that shares much
        scattered vocabulary with the output (Japanese or Chinese stock phrases of its own entities) must not hide
        a page of another tenant. Without a long run on either side, the most matches decide, as before."""
        t_long, s_long = self.long_matches[tenant], self.session_long[session]
        if self._beside(tenant):
            return True
        if t_long or s_long:
            return t_long >= s_long
        return self.by_tenant[tenant] >= self.by_session[session]

    def _beside(self, tenant: str) -> bool:
        """Whether a free long run of the tenant lies clear of every long run of the receiver's other sessions: two
        passages side by side in the output (the receiver's own text from another session, and another tenant's
        page), not one passage both could explain. Then the page is a finding of its own, however long the
        receiver's own text beside it; which origin explains more decides only between explanations of the same
        fingerprints."""
        theirs = [span for spans in self.session_spans.values() for span in spans]
        return any(
            not attached and all(last < s0 or first > s1 for s0, s1 in theirs)
            for first, last, _, attached in self.run_spans.get(tenant, ())
        )

    def foreign_free(self, hashes: list[int]) -> list[int]:
        """The output's fingerprints that no other tenant's text explains: outside every tenant run, its seams
        (one fingerprint on each side) included. What a flagged output still holds of the receiver's own text
        (the model's answer around the leaked pages): learned as the receiver's, so that a later page of it,
        leaked to someone else, is attributed."""
        out = [True] * len(hashes)
        for first, last in self.spans:
            out[max(0, first - 1) : last + 2] = [False] * (min(len(hashes), last + 2) - max(0, first - 1))
        foreign = {h for hs in self.matched.values() for h in hs}
        return [h for h, keep in zip(hashes, out, strict=True) if keep and h not in foreign]

    def best_tenant(self) -> tuple[str, int] | None:
        ranked = self.ranked_tenants()
        return (ranked[0], self.by_tenant[ranked[0]]) if ranked else None

    def ranked_tenants(self) -> list[str]:
        # A source with a passage that is not one text with the receiver's own comes first; then most estimated
        # leaked tokens, then most (split) credit, then most passages, then the most recent text (stale pages
        # are the recently freed ones), then the lexically first id so the verdict is stable.
        return sorted(
            self.by_tenant,
            key=lambda t: (
                self.long_passages[t] == 0,
                -round(self.leaked_tokens(t), 6),
                -round(self.long_evidence.get(t, 0.0), 9),
                -round(self.weight[t], 9),
                -self.by_tenant[t],
                -self.newest[t],
                t,
            ),
        )

    def named_sources(self) -> list[str]:
        """The sources a verdict may name, in rank order: those with a long passage. One whose long passages are all
        text other tenants had too (no evidence of its own: `shared_min_tenants`) proves nothing of its own, so while
        another's passages carry evidence it takes no place, neither named nor crowding out a source that is."""
        ranked = [t for t in self.ranked_tenants() if self.tokens.get(t)]
        return [t for t in ranked if self.long_evidence.get(t, 0.0) > 0.0] or ranked

    def best_session(self) -> tuple[str, int] | None:
        if not self.by_session:
            return None
        return min(self.by_session.items(), key=lambda kv: (-kv[1], kv[0]))


def measure(ov: Overlap) -> None:
    """Each source's pages in the output, measured in the units its runs cover (docs/adr/0004, "measured pages"):
    what the tokens that rank the sources (`Overlap.ranked_tenants`) count when the output's positions are known.

    A run's k-grams cover positions[first] .. positions[last] + k - 1; runs of one source whose coverage touches
    or overlaps are one page, cut where a fingerprint was explained away (the receiver's older history, a k-gram
    selected twice). Winnowing leaves 0 to w - 1 of a page's units unselected at each end (every window of w
    k-grams inside it selects one), (w - 1) / 3 on average (exact for w = 2, measured for w = 3, 4, 6 over 3,000
    random pages each: 0.67, 1.0, 1.67 per end): a page is its covered units plus 2 (w - 1) / 3. A page is
    the source's text whoever else had some of its k-grams: its units count whole, at the source text's rate
    (no split credit). A shared k-gram only says something where it is not inside another source's page: a
    short run of one source within a long run of another (a k-gram both texts hold) adds nothing to it, so
    two candidates are told apart by the units only one of them explains."""
    ends = (2 * ov.gap - 2) * 2 / 3  # 2 (w - 1) / 3: gap = (w + 1) / 2
    inside = [(src, first, last) for src, spans in ov.long_spans.items() for first, last in spans]
    for src, pieces in ov.pieces.items():
        pieces.sort()
        end = -2.0  # no page yet: the first one starts a page
        long = short = 0.0
        for first, last, rate, i, j in pieces:
            is_long = (i, j) in ov.long_spans.get(src, ())
            if not is_long and any(o != src and a <= i and j <= b for o, a, b in inside):
                continue
            units = max(0.0, last - max(first, end + 1) + 1)
            if first > end + 1:
                units += ends
            end = max(end, last)
            if is_long:
                long += units * rate
            else:
                short += units * rate
        if long:
            ov.tokens[src] = long
        if short:
            ov.short_tokens[src] = short


def own(ov: Overlap, doc: Text, session_id: str | None, tenant_id: str, prev: Runs, runs: Runs, i: int) -> None:
    """A passage the receiving tenant had itself: own context, or (other session) cross-session."""
    sess = doc.session_id
    if session_id is None or sess is None or sess == session_id:
        ov.own_context += 1
        return
    ov.by_session[sess] += 1
    before = prev.get(sess, SESSION_RUN)
    run = before.length + 1
    runs[sess] = Run(run, 0.0, -1.0, before.start if before.length else i, i)
    ov.run_by_session[sess] = max(ov.run_by_session[sess], run)
    ov.source_requests.setdefault(tenant_id, Counter())[doc.request_id] += 1


def credit(ov: Overlap, doc: Text, share: float, weight: float, h: int, prev: Runs, runs: Runs, i: int) -> None:
    """A passage another tenant had: credit (split between the tenants that had it)."""
    other = doc.tenant_id
    ov.by_tenant[other] += 1
    r = prev.get(other)
    ut = unit_tokens(doc.tpu)
    if r is None:
        ov.passages[other] += 1
        r = Run(1, weight, share * ut, i, i, 0, ut)
    else:
        r = Run(r.length + 1, r.weight + weight, r.tokens + share * ut, r.start, i, 0, r.units + ut)
    runs[other] = r
    ov.evidence[other] = ov.evidence.get(other, 0.0) + weight
    ov.matched.setdefault(other, []).append(h)
    ov.run_by_tenant[other] = max(ov.run_by_tenant[other], r.length)
    ov.weight[other] = ov.weight.get(other, 0.0) + share
    ov.newest[other] = max(ov.newest.get(other, doc.ts), doc.ts)
    ov.source_requests.setdefault(other, Counter())[doc.request_id] += 1
    ov.docs.setdefault(other, set()).add(doc.doc_id)
