"""Content overlap: an output carrying passages of another tenant's (or session's) recent context.

A shared fingerprint is evidence only when nothing innocent explains it:
- the receiver's own prompt, or its own recent context (the window index), or its own older history
  (the long-horizon record, `TenantSpread.had`);
- the operator's public corpus (`PublicSet`);
- commonness: held by `common_min_tenants` tenants in the window, or over the long horizon.
What is left is weighed by rarity: a fingerprint no other tenant has ever had (over days) weighs 1,
one that one other tenant has had weighs 1/2. The evidence for a source is the sum over its matched
fingerprints (split when several tenants in the window had one). Winnowing guarantees a fingerprint
for every shared passage of t units, so one page-sized fragment of a tenant's private text gives at
least one rare match: `overlap_high_evidence` (1.0) makes that a high alert once the domain is warm.
A long run of consecutive matches (`overlap_strong_matches`) is critical whatever the rarity, unless the output's
chance background explains it (`required_run`). Next to the placeholder mechanism any overlap is no
coincidence: the verdict makes it critical. The reasoning and its measurements: docs/adr/0003.

Short runs that are no page (the junction of two innocent texts; k-grams a long text shares by chance, out of order)
never make a high alert alone, and a run must carry more information than chance gives (`required_run`): the run
tests are detectors/runshape.py's, the reasoning docs/adr/0004 ("junctions", "information").

The source is the tenant whose recent context explains most unexplained passages (rarity-weighted).
Fingerprints of a flagged leak are remembered (tainted) with their source: when the victim re-sends them
in later turns they are not learned as the victim's, so the passage stays rare and attributable.
"""

from __future__ import annotations

from array import array
from collections import Counter, deque
from typing import Any

import numpy as np

from detectors.commonness import TenantSpread
from detectors.fingerprint import positions_of, sentences_of
from detectors.fleet import AUTHORED, Fleet, model_record
from detectors.held import Held, HeldJudge, HeldRun
from detectors.index import ContentIndex, Overlap
from detectors.public import PublicSet
from detectors.sentences import SentencePrint
from detectors.settings import DetectionSettings
from detectors.signals.base import DomainFacts, Piece
from detectors.signals.pages import page_run, required_run, strong_run, whole_sentences
from schemas.alert import SEVERITY_RANK, Severity, Signal
from schemas.exchange import Exchange, TextFingerprint

_MAX_SOURCE_IDS = 5
_MAX_OTHER_SOURCES = 3
# Plausible model tokens per unit (a word, or one CJK/Thai character): a count outside this range is not the
# text's own (a prompt truncated by the producer, a template's overhead) and is not used.
_TPU_RANGE = (0.25, 4.0)


def _model_record(settings: DetectionSettings) -> TenantSpread:
    """The record of the model's stock phrases: the long-horizon filters, keyed by session (`OverlapDetector.learn`)."""
    return model_record(settings, settings.model_spread_bits_log2, settings.spread_capacity)


def tokens_per_unit(tokens: int | None, units: int) -> float:
    """The engine's token count over the fingerprinter's units for one text; 1.0 when unknown or implausible."""
    if not tokens or units <= 0:
        return 1.0
    tpu = tokens / units
    return tpu if _TPU_RANGE[0] <= tpu <= _TPU_RANGE[1] else 1.0


class OverlapDetector(HeldJudge):
    def __init__(self, settings: DetectionSettings, public: PublicSet | None = None) -> None:
        self.s = settings
        self.index = ContentIndex(
            settings.index_window_s,
            settings.index_max_docs,
            settings.index_max_fingerprints,
            settings.common_min_tenants,
        )
        self.spread = TenantSpread(
            settings.spread_bits_log2, capacity=settings.spread_capacity, epoch_s=settings.spread_epoch_s
        )
        # The model's own stock phrases: sessions (not tenants) whose outputs held each fingerprint. A phrase the
        # model writes in many sessions is its habit ("here is the relevant passage:" in every language), common
        # even where only one or two tenants write that language; prompts never count, so a tenant's private
        # text re-sent in all its sessions (its system prompt, its files) does not become common this way.
        self.model_spread = _model_record(settings)
        # The same over the fleet's domains, learned late (detectors/fleet.py): the table's, never pickled here.
        self.fleet: Fleet | None = None
        self.public = public
        self.tainted: dict[int, str] = {}  # fingerprint of a flagged leak -> its source tenant (insertion order)
        self.victims: dict[int, str] = {}  # fingerprint of a flagged leak -> the tenant that received it
        # The domain's facts as of the exchange being judged: its largest pool and what it allocated since a time.
        self._domain: DomainFacts | None = None
        # The whole-sentence print of the output being judged (detectors/sentences.py), where known.
        self._sentences: SentencePrint | None = None
        # The last text's fingerprints as uint64 (`_keys`): the output's are asked when judging and when learning.
        self._keys_of: tuple[TextFingerprint, array[int], np.ndarray] | None = None
        # Of the exchange just judged: the leaked fingerprints with their source (every source with a long passage;
        # the named one wins a fingerprint several had), and the output's fingerprints no other tenant explains.
        self._last: tuple[dict[int, str], list[int]] | None = None
        # Of the exchange just judged in a cold domain: what a warm one would have flagged (signals, runs per source,
        # run needed per source), for the domain to hold (`detectors/held.py`); the held findings themselves.
        self.cold: tuple[list[Signal], dict[str, list[HeldRun]], dict[str, int]] | None = None
        self.held: deque[Held] = deque()
        # Longest run whose neighbour on one / both sides is innocent text the source holds that is still no page
        # (`ContentIndex._junction`): a page of P units (the shortest that guarantees a run of overlap_high_run) whose
        # source's text goes on past one / both seams gives P // w / (P + k - 1) // w matches. Off when k - 1 < w.
        page = settings.overlap_high_run * settings.w + settings.k - 1
        self._junction_limits = (
            (page // settings.w - 1, (page + settings.k - 1) // settings.w - 1)
            if settings.overlap_junction and settings.k - 1 >= settings.w
            else (0, 0)
        )

    def __getstate__(self) -> dict[str, Any]:
        # The public corpus belongs to the process (loaded from the operator's file), not to the snapshot; the fleet
        # record is the table's, which gives it back (`DomainTable.__setstate__`); the domain's own object is read
        # while judging.
        return self.__dict__ | dict.fromkeys(("public", "fleet", "_domain", "_sentences", "_keys_of"))

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if "model_spread" not in state:  # a snapshot from before the record existed: it starts empty
            self.model_spread = _model_record(self.s)
        if "held" not in state:  # likewise from before cold domains held their findings
            self.cold, self.held = None, deque()
        if "victims" not in state:  # from before leaks remembered their receiver: every re-send stays the source's
            self.victims = {}
        self.__dict__.setdefault("fleet", None)
        self._domain = self._sentences = self._keys_of = None

    def _keys(self, tp: TextFingerprint) -> tuple[array[int], np.ndarray]:
        """`tp.hashes` as uint64 (an array the index keeps, and a numpy view of it for the records), once per text."""
        last = self._keys_of
        if last is not None and last[0] is tp:
            return last[1], last[2]
        raw = array("Q", tp.hashes)
        keys = np.frombuffer(raw, dtype=np.uint64)
        self._keys_of = (tp, raw, keys)
        return raw, keys

    def warm(self, ts: float) -> bool:
        """Cold start: nothing is common yet, so stock phrases look like rare shared passages. Warm-up is
        counted in event time and texts, so a flood of junk texts or tenants cannot end it early."""
        idx = self.index
        if idx.first_ts is None:
            return False
        s, learning = self.s, ts - idx.first_ts
        # A slow domain (few requests/s) is warm after a longer time on fewer texts: its tenants have been seen
        # repeating their stock phrases for that long, and a slow domain must not stay blind for half an hour.
        return (idx.docs_seen >= s.overlap_warmup_docs and learning >= s.overlap_warmup_s) or (
            idx.docs_seen >= s.overlap_warmup_slow_docs and learning >= s.overlap_warmup_slow_s
        )

    def _explain(self, tenant_id: str, hashes: list[int], keys: np.ndarray) -> tuple[list[int], list[float]]:
        """Per output fingerprint (`hashes`, and the same as uint64 `keys`): why it is innocent (0 it is not, 1 own
        history, 2 public, 3 common over the long horizon) and its evidence weight."""
        spread = self.spread.tenants(keys)
        why = np.where(self._common(keys, spread), 3, 0)
        if self.public is not None:
            why[self.public.contains(hashes)] = 2
        why[self.spread.had(tenant_id, keys)] = 1
        # Evidence weight: 1 for text no other tenant has had, 0 for shared text (`shared_min_tenants`, ADR 0008).
        return why.tolist(), np.where(spread >= self.s.shared_min_tenants, 0.0, 1.0).tolist()

    def _common(self, keys: np.ndarray, spread: np.ndarray) -> np.ndarray:
        """Per fingerprint: common over the long horizon (`spread`: its tenants there, `TenantSpread.tenants`)."""
        common = spread >= self.s.common_min_tenants
        if self.s.common_min_sessions:
            # The model's habit: in that many sessions' answers (here or in the fleet). Provenance decides whose text
            # it is: what first came from the model (a greeting, a stock opener, and its re-sends in histories) is
            # the model's whatever tenant received it; what a tenant's prompt introduced stays that tenant's until a
            # second tenant holds it. Only fingerprints some tenant had are asked.
            ask = np.flatnonzero((spread >= 1) & ~common)
            if ask.size:
                sessions, authored = self._model_writing(keys[ask])
                habit = sessions >= self.s.common_min_sessions
                if habit.any():
                    habit &= (spread[ask] >= 2) | ~authored
                    common[ask[habit]] = True
        return common

    def observe(self, ex: Exchange, domain: DomainFacts | None = None) -> list[Signal]:
        self._last = None
        self.cold = None
        if ex.output_print is None or not ex.output_print.hashes:
            return []
        hashes = ex.output_print.hashes
        self._domain = domain
        self._sentences = sentences_of(ex.output_print) if self.s.overlap_whole_sentences else None
        # Only output fingerprints are asked about: the output's that the prompt holds, without a set of the prompt.
        own = set(hashes).intersection(ex.prompt_print.hashes) if ex.prompt_print is not None else set()
        why, rarity = self._explain(ex.tenant_id, hashes, self._keys(ex.output_print)[1])
        s = self.s
        ov = self.index.query(
            ex.tenant_id,
            ex.session_id,
            hashes,
            own,
            why,
            rarity,
            s.overlap_high_run,
            (s.w + 1) / 2,
            s.k - 1,
            # The seam argument (docs/adr/0004) needs k - 1 >= w: off otherwise.
            s.overlap_attach if s.k - 1 >= s.w else 0,
            junction=self._junction_limits,
            in_order=s.overlap_strong_matches if s.overlap_in_order else 0,
            positions=positions_of(ex.output_print) if s.overlap_coverage else None,
        )
        base = {
            "output_fingerprints": ov.total,
            "explained_own_prompt": ov.own_prompt,
            "explained_own_context": ov.own_context,
            "explained_own_history": ov.own_history,
            "explained_public": ov.public,
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
            cross_tenant = ov.prefers_tenant(best[0], session[0])
        warm = self.warm(ex.ts)
        if cross_tenant:
            # The most severe verdict any source with a long passage proves; among equally severe ones, the source
            # of most leaked tokens (ranked first). A dominant source whose own match is vocabulary-like (scatter
            # guard) must not hide the page another source proves.
            assert best is not None
            tenants = ov.named_sources()[:_MAX_OTHER_SOURCES] or [best[0]]
            signals = self._conclude([self._tenant_signal(ov, t, ov.by_tenant[t], base, warm) for t in tenants])
            named = signals[0].source_tenant_id
            assert named is not None
            leaked = {h: t for t in ov.tokens if t != named for h in ov.matched.get(t, [])}
            leaked.update(dict.fromkeys(ov.matched.get(named, []), named))
            self._last = (leaked, ov.foreign_free(hashes))
            if not warm and self.s.overlap_hold_cold:
                self.cold = self._cold_finding(ov, hashes, tenants, base)
            return signals
        if cross_session:
            assert session is not None
            sess, n = session
            figures = dict(base, source_session_id=sess)
            run = ov.run_by_session[sess]
            # A tenant's own text in its other session is its own data: a finding only as a long run.
            severity: Severity = "info"
            return [
                self._signal("cross_session_contamination", severity, n, run, ov.total, figures, None, ov, ex.tenant_id)
            ]
        return []

    @staticmethod
    def _conclude(candidates: list[Signal]) -> list[Signal]:
        """The conclusion first (the most severe candidate; among equally severe ones the first, i.e. the source of most
        leaked tokens), then every other candidate (each source with a long passage). A mixed output holds pages of
        several tenants: each one whose own pages prove a leak by the same rule is a victim of its own, named in a
        signal of its own (the verdict raises one alert per named source: docs/adr/0004, "several sources").
        Estimated token counts cannot order near-equal pages, so naming only the first would hide a victim whenever
        two pages are about the same size."""
        signal = candidates[0]
        for candidate in candidates[1:]:
            if SEVERITY_RANK[candidate.severity] > SEVERITY_RANK[signal.severity]:
                signal = candidate
        # The others too: below high they are evidence, next to the mechanism each is critical, a victim of its own.
        return [signal, *(c for c in candidates if c is not signal)]

    def _cold_finding(
        self, ov: Overlap, hashes: list[int], tenants: list[str], base: dict[str, Any]
    ) -> tuple[list[Signal], dict[str, list[HeldRun]], dict[str, int]] | None:
        """What a warm domain would conclude, when that is high or critical: the signals, and per flagged source its
        runs (output fingerprints) and the free run it needed, to be judged again later (`detectors/held.py`)."""
        signals = self._conclude([self._tenant_signal(ov, t, ov.by_tenant[t], base, True) for t in tenants])
        flagged = [
            s.source_tenant_id
            for s in signals
            if s.source_tenant_id is not None and SEVERITY_RANK[s.severity] >= SEVERITY_RANK["high"]
        ]
        if not flagged:
            return None
        runs = {
            src: [
                HeldRun(hashes[first : last + 1], matches, not attached)
                for first, last, matches, attached in ov.run_spans.get(src, ())
            ]
            for src in flagged
        }
        return signals, runs, {src: required_run(self.s, ov, src) for src in flagged}

    def _by_run(self, run: int, warm: bool, strong: Severity) -> Severity:
        if not warm:
            return "info"
        if run >= self.s.overlap_strong_matches:
            return strong
        # One or two shared k-grams happen between unrelated texts (code idioms); alone they are no
        # finding, but next to the placeholder mechanism they attribute the leak.
        return "warning" if run >= self.s.overlap_alone_matches else "info"

    def _tenant_signal(self, ov: Overlap, tenant: str, n: int, base: dict[str, Any], warm: bool) -> Signal:
        run = ov.run_by_tenant[tenant]
        evidence = round(ov.evidence.get(tenant, 0.0), 4)
        # Below a strong run, only runs with a seam on both sides count (`ContentIndex._close`): one that
        # continues the receiver's own text is a document both tenants hold.
        # A free run the output's chance background expects (`required_run`), or one covering fewer units than any
        # page of that many matches would (`min_cover`), is no finding at all.
        need = required_run(self.s, ov, tenant)
        free, cover = page_run(self.s, ov, tenant, need)
        severity = self._by_run(
            run if run >= strong_run(self.s, need) else free if free >= need else 0, warm, "critical"
        )
        long = ov.long_passages[tenant]
        scattered = ov.passages[tenant] - long - ov.attached[tenant]
        turnovers = self._turnovers(ov, tenant)
        if warm and severity != "critical" and free >= need:
            # A run of consecutive matches is one passage of at least k + (run - 1) units; winnowing puts a run
            # of >= floor((16 - k + 1) / w) = 3 matches into every shared 16-unit passage (docs/adr/0003).
            # Many short scattered matches beside it are shared vocabulary, not pages: they cap the verdict.
            if scattered > self.s.overlap_max_scatter * long:
                severity = "info"
            elif long >= 2 and evidence >= self.s.overlap_critical_evidence:
                severity = "critical"
            elif evidence >= self.s.overlap_high_evidence:
                severity = "high"
        if warm and severity in ("high", "critical") and evidence < self.s.overlap_high_evidence:
            # A long run of shared text (two tenants have had it: a template, a public passage) is no one tenant's
            # page: it names the source next to a mechanism, but alone it is no more than a warning (ADR 0008).
            severity = "warning"
        echo = (
            warm
            and severity in ("high", "critical")
            and whole_sentences(self.s, self._sentences, ov, tenant, need, self.index.sentences)
        )
        if echo:
            # Whole sentences of the source, and not most of the output: what a model writes when it reproduces a
            # text it knows; a page is cut where a token count fell (ADR 0008 decision 8). A lead, not a disclosure.
            severity = "warning"
        if turnovers is not None and turnovers > self.s.overlap_pool_turnovers and severity != "info":
            # Gone from every pool of the domain: only a delivery mix-up still carries it, and that is a whole response.
            severity = "warning" if ov.total and n >= self.s.overlap_beyond_pool_share * ov.total else "info"
        figures = dict(
            base,
            evidence=evidence,
            passages=ov.passages[tenant],
            long_passages=long,
            attached_runs=ov.attached[tenant],
            junction_runs=ov.junctions[tenant],
            out_of_order_runs=ov.out_of_order[tenant],
            required_run=need,
            # Units of the output the page run covers (0: positions unknown, or no such run).
            page_cover_units=cover,
            # Of the output's other fingerprints that could be chance matches: how many the source holds, of how many.
            chance_matches=list(ov.chance.get(tenant, (0, 0))),
            leaked_tokens_estimate=round(ov.leaked_tokens(tenant), 1),
            # A mixed output has several origins: the others with a long passage, most estimated tokens first.
            other_sources=sorted((t for t in ov.tokens if t != tenant), key=lambda t: (-ov.leaked_tokens(t), t))[
                :_MAX_OTHER_SOURCES
            ],
            warm=warm,
        )
        if turnovers is not None:
            figures["pool_turnovers"] = round(turnovers, 2)
        if echo:
            figures["whole_sentences"] = True
        return self._signal("cross_tenant_contamination", severity, n, run, ov.total, figures, tenant, ov)

    def _turnovers(self, ov: Overlap, tenant: str) -> float | None:
        """Turnovers of the domain's largest pool since the newest text of `tenant` that the output matched; None when
        the pool, the token counts or the check are unknown or off."""
        domain, newest = self._domain, ov.newest.get(tenant)
        if domain is None or newest is None or self.s.overlap_pool_turnovers <= 0:
            return None
        pool = domain.pool_tokens
        return domain.allocated_since(newest) / pool if pool else None

    def _signal(
        self,
        name: str,
        severity: Severity,
        n: int,
        run: int,
        total: int,
        figures: dict[str, Any],
        source: str | None,
        ov: Overlap,
        receiver: str | None = None,
    ) -> Signal:
        # Cross-session (no source tenant): the receiver's own other sessions' requests, never another tenant's (a
        # tenant's notice must cite only its own requests).
        owner = source if source is not None else receiver
        reqs: Counter[str] = ov.source_requests.get(owner, Counter()) if owner is not None else Counter()
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

    def pieces(self) -> dict[str, Piece]:
        """The state that grows with traffic (`HasPieces`): the content index, the tenants' long-horizon record and
        the model's session record. Their names are those of existing snapshots: never rename one."""
        return {"ix": self.index, "sp": self.spread, "ms": self.model_spread}

    def state_size(self) -> int:
        """Documents and fingerprints in the window, plus tainted fingerprints (the spread record is fixed-size)."""
        idx = self.index.state_size()
        return idx["docs"] + idx["fingerprints"] + len(self.tainted)

    def learn(self, ex: Exchange, include_output: bool = True) -> None:
        """Add the exchange's own texts to the index and the long-horizon records, after it was judged.

        `include_output=False` marks the output as a flagged leak: its matched fingerprints are tainted with their
        sources and its receiver, and only the rest of it (what no other tenant's text explains) is learned as the
        receiver's; the model's session record learns the whole output (what the model wrote)."""
        own_output: list[int] = []
        # An output a cold domain holds (`detectors/held.py`): its leaked pages go into the long-horizon records (a
        # stock phrase must become common, which is what dismisses it later) but not into the window as the
        # receiver's text, so a page reaching a second receiver still points at its source alone.
        held = include_output and self.cold is not None and self._last is not None
        if held and self._last is not None:
            own_output = self._last[1]
        elif not include_output and self._last is not None:
            leaked, own_output = self._last
            self._taint(leaked, ex.tenant_id)
        self._last = None
        # Tokens per unit from the answer: the engine counted exactly that text (a prompt's count also holds the
        # template, tools and text the producer cut). The prompt is taken to be in the answer's script.
        out = ex.output_print
        tpu = 1.0
        if self.s.overlap_usage_tokens:
            usage = ex.response.usage if ex.response is not None else None
            tpu = tokens_per_unit(usage.output_tokens if usage is not None else None, out.words if out else 0)
        prompt = ex.prompt_print.hashes if ex.prompt_print is not None else []
        # The records' loops take uint64 arrays: each text's converted once (the output's when it was judged).
        arrays = {id(tp): self._keys(tp) for tp in (ex.prompt_print, out) if tp is not None and tp.hashes}
        if prompt and self.s.common_min_sessions:
            # Provenance: prompt text the model had not written before was introduced by a tenant (authored); text it
            # had (a re-sent answer in a multi-turn history) stays the model's (`_common`).
            # A tag met again is written into the current generation, as `add` copies pairs forward: text a tenant keeps
            # sending stays authored after the generation that first saw it is gone.
            fp = arrays[id(ex.prompt_print)][1]
            authored = (self.model_spread.tenants(fp) == 0) | self.spread.tagged(AUTHORED, fp)
            self.spread.tag(AUTHORED, fp[authored], ex.ts)
        if out is not None and out.hashes and self.s.common_min_sessions:
            # What the model wrote in this session, flagged or not. A stock phrase flagged as a leak must still become
            # the model's habit when it writes it again (the next time to the same receiver, who never re-sent it),
            # or it is flagged every time. A leaked page a tenant authored cannot become habit through this: authored
            # text is the model's only once two tenants hold it (`_common`). Keyed by session (a request without one
            # is a session of its own), tenant-qualified.
            self.model_spread.add(f"{ex.tenant_id}\x1f{ex.session_id or ex.request_id}", arrays[id(out)][1], ex.ts)
        for tp, hashes in (
            (ex.prompt_print, prompt),
            (out, out.hashes if include_output and out is not None else own_output),
        ):
            if tp is None or not hashes:
                continue
            hashes = self._not_resent(ex.tenant_id, hashes)
            if hashes:
                raw, keys = arrays[id(tp)] if hashes is tp.hashes else (hashes, hashes)
                indexed = own_output if held and tp is out else raw
                if indexed:
                    sp = sentences_of(tp) if self.s.overlap_whole_sentences else None
                    self.index.add(
                        ex.tenant_id, ex.session_id, ex.request_id, ex.ts, indexed, tpu, sp[0] if sp else None
                    )
                self.spread.add(ex.tenant_id, keys, ex.ts)

    def _taint(self, leaked: dict[int, str], receiver: str) -> None:
        """Remember a flagged leak's fingerprints: their source, and the receiver whose later re-sends must not make the
        page its own (bounded, oldest first)."""
        tainted, victims = self.tainted, self.victims
        tainted.update(leaked)
        victims.update(dict.fromkeys(leaked, receiver))
        while len(tainted) > self.s.max_tainted:
            oldest = next(iter(tainted))
            del tainted[oldest]
            victims.pop(oldest, None)

    def _not_resent(self, tenant: str, hashes: list[int]) -> list[int]:
        """`hashes` without the leaked passages this tenant received and now re-sends: they stay the source's, never
        the victim's context and never common through it. Another tenant holding the same text is an independent
        holder and is learned (before, nobody's later copy counted, so a public text flagged once stayed rare)."""
        tainted = self.tainted
        if not tainted:
            return hashes
        victims = self.victims
        foreign = {h for h in tainted.keys() & hashes if tainted[h] != tenant and victims.get(h, tenant) == tenant}
        return [h for h in hashes if h not in foreign] if foreign else hashes
