"""A domain's content index: fingerprints of recent prompts and outputs, bounded by time and size.

For each fingerprint it keeps, per tenant, the newest text that contained it. That is enough to
(1) explain a match away when the receiving tenant had the passage itself, (2) call a fingerprint
boilerplate when several tenants had it, and (3) attribute a leak to the tenant that explains most
unexplained passages. Memory is bounded by `max_docs` and `max_fingerprints`; old texts expire.

Checkpoints (streams/kafka/checkpoint.py) copy the index whole once, then only its changes: after `mark()`
the index records, in order, the texts it inserts and the ids of those it drops, and `replay(changes)` on
the copy taken at the mark rebuilds the very same state (postings in the same dict order). The record is
bounded (a copy costs less than a longer record): past the bound it is dropped and `changes()` says a
whole copy is needed.
"""

from __future__ import annotations

from array import array
from collections import deque
from dataclasses import dataclass
from itertools import compress, filterfalse, repeat
from operator import eq
from sys import intern
from typing import Any

from detectors.matches import BRIDGE, Overlap, Run, Runs, credit, measure, own, unit_tokens
from detectors.postings import NATIVE, Restored, first_native, first_positions, native_table, owners_of

__all__ = ["BRIDGE", "NATIVE", "ContentIndex", "Doc", "Overlap", "unit_tokens"]


@dataclass(slots=True)
class Doc:
    doc_id: int
    tenant_id: str
    session_id: str | None
    request_id: str
    ts: float
    # The text's fingerprints in text order, each once: a list, or native uint64 once in the native postings.
    hashes: list[int] | array[int]
    # Model tokens per unit of this text (the engine's own count over the fingerprinter's units): what a
    # matched unit of it weighs when outputs mixing several sources are attributed. 1.0 when unknown.
    tpu: float = 1.0


class ContentIndex:
    # How a match is counted into an Overlap (detectors/matches.py); on the class, as the query has always called them.
    _measure = staticmethod(measure)
    _own = staticmethod(own)
    _credit = staticmethod(credit)

    def __init__(
        self, window_s: float, max_docs: int, max_fingerprints: int, common_min_tenants: int, *, native: bool = True
    ) -> None:
        self.window_s = window_s
        self.max_docs = max_docs
        self.max_fingerprints = max_fingerprints
        self.common_min_tenants = common_min_tenants
        # Postings: fingerprint -> {tenant_id: doc_id of that tenant's newest text with it}, stored in two
        # maps. Almost every fingerprint belongs to one tenant: for those `_single` holds the doc id alone
        # (the tenant is the doc's), which saves a dict per fingerprint (about 3x less memory) and lets
        # add/drop run as C-level bulk dict operations. `_multi` holds the rest, always with >= 2 owners.
        # Invariant: a fingerprint is in at most one of the two. Where the native extension is built, both are one
        # table (`NATIVE`): `_single` is the table itself and `_multi` reads its owner lists (detectors/postings.py).
        # The table answers get / in / len as the dict does (typed as the dict: what the readers use).
        self._single: dict[int, int] = native_table() if native and NATIVE else {}
        self._multi: dict[int, dict[str, int]] = {}
        if type(self._single) is not dict:
            self._multi = owners_of(self._single)
        self._docs: dict[int, Doc] = {}
        self._order: deque[int] = deque()
        self._next_id = 0
        self.docs_seen = 0
        self.first_ts: float | None = None  # event time of the first text: warm-up counts time, not texts alone
        self._fingerprints = 0
        # Since mark(): a Doc inserted or the id of a Doc dropped, in order; None when not recording.
        self._log: list[Doc | int] | None = None
        self._log_fps = 0

    def add(
        self,
        tenant_id: str,
        session_id: str | None,
        request_id: str,
        ts: float,
        hashes: list[int],
        tokens_per_unit: float = 1.0,
    ) -> None:
        if not hashes:
            return
        self._insert(Doc(self._next_id, tenant_id, session_id, request_id, ts, hashes, tokens_per_unit))
        self._expire(ts)

    def _insert(self, doc: Doc) -> None:
        doc_id = doc.doc_id
        hashes = doc.hashes
        self._next_id = doc_id + 1
        self.docs_seen += 1
        if self.first_ts is None:
            self.first_ts = doc.ts
        docs = self._docs
        docs[doc_id] = doc
        self._order.append(doc_id)
        self._fingerprints += len(hashes)
        if type(self._single) is not dict:
            self._insert_native(doc)
        else:
            self._insert_pure(doc)
        log = self._log
        if log is not None:
            log.append(doc)
            self._log_fps += len(hashes)
            # Dropped texts stay alive in the record: bounded by the index's own bounds, beyond which a
            # whole copy is cheaper to write than the record anyway.
            if len(log) > self.max_docs or self._log_fps > self.max_fingerprints:
                self._log = None

    def _insert_native(self, doc: Doc) -> None:
        """The postings of a new text, in the native table (owner lists included). The text keeps its fingerprints
        as native uint64 (8 bytes each, against a list slot and an int object: 48), which the table reads in place
        when the text leaves; its tenant interned: the table tells tenants apart by the str objects."""
        if type(doc.hashes) is not array:
            doc.hashes = array("Q", doc.hashes)
        doc.tenant_id = intern(doc.tenant_id)
        self._single.insert(doc.hashes, doc.doc_id, doc.tenant_id)  # type: ignore[attr-defined]

    def _insert_pure(self, doc: Doc) -> None:
        doc_id, tenant_id, hashes, docs = doc.doc_id, doc.tenant_id, doc.hashes, self._docs
        single = self._single
        multi = self._multi
        shared = False
        for h in single.keys() & hashes:
            prior = single[h]
            other = docs[prior].tenant_id
            if other != tenant_id:  # a second tenant: the fingerprint moves to the multi-owner map
                multi[h] = {other: prior, tenant_id: doc_id}
                del single[h]
                shared = True
        if multi:
            for h in multi.keys() & hashes:
                multi[h][tenant_id] = doc_id
                shared = True
        if shared:
            single.update(dict.fromkeys(filterfalse(multi.__contains__, hashes), doc_id))
        else:
            single.update(dict.fromkeys(hashes, doc_id))

    def _expire(self, now: float) -> None:
        horizon = now - self.window_s
        while self._order and (
            len(self._order) > self.max_docs
            or self._fingerprints > self.max_fingerprints
            or self._docs[self._order[0]].ts < horizon
        ):
            self._drop(self._order.popleft())

    # Called for every exchange: the alias saves a call level.
    advance = _expire

    def _drop(self, doc_id: int) -> None:
        doc = self._docs.pop(doc_id)
        if self._log is not None:
            self._log.append(doc_id)
        hashes = doc.hashes
        self._fingerprints -= len(hashes)
        single = self._single
        if type(single) is not dict:
            single.drop(hashes, doc_id)  # type: ignore[attr-defined]
            return
        # Only the tenant's newest text is recorded; a newer one keeps the entry alive.
        for h in list(compress(hashes, map(eq, map(single.get, hashes), repeat(doc_id)))):
            single.pop(h, None)
        multi = self._multi
        if multi:
            tenant_id = doc.tenant_id
            for h in multi.keys() & hashes:
                owners = multi[h]
                if owners.get(tenant_id) == doc_id:
                    del owners[tenant_id]
                    if len(owners) == 1:
                        single[h] = next(iter(owners.values()))
                        del multi[h]

    def query(
        self,
        tenant_id: str,
        session_id: str | None,
        hashes: list[int],
        own_prompt: set[int],
        explained: list[int] | None = None,
        rarity: list[float] | None = None,
        long_run: int = 3,
        gap: float = 2.5,
        edge: float = 4.0,
        attach: int = 2,
        bridge: int = BRIDGE,
        junction: tuple[int, int] = (0, 0),
        in_order: int = 0,
        positions: list[int] | None = None,
    ) -> Overlap:
        """What the output `hashes` share with the window. `explained[i]` (0 none, 1 own history, 2 public
        corpus, 3 common over the long horizon) and `rarity[i]` (the evidence weight of a match) come from
        the long-horizon record; without them every match weighs 1. `gap` = (w + 1) / 2 and `edge` = k - 1
        turn runs of matches into passage lengths (`Overlap.tokens`); `attach` fingerprints (0: never) tell a run
        that continues the receiver's own text (`_attached`).

        A source's run goes on through up to `bridge` consecutive fingerprints that are explained as common (public
        corpus, long-horizon or window commonness) but that the source's own text holds too: they are its text in
        the output, only not evidence. Without this a page of Japanese or Chinese, whose 5-character k-grams are
        often stock phrases, falls apart into short runs that look like shared vocabulary. Bridged fingerprints
        add no length (runs count matches) and no evidence; they widen the passage's span (`Overlap.tokens`).
        The receiver's own text (prompt, context, history) and other tenants' text are never bridged: they are
        the seams of a page.

        `positions[i]` (optional) is the k-gram position in the output text of `hashes[i]`: with it each free run
        records the positions it covers (`Overlap.free_runs`)."""
        ov = Overlap(total=len(hashes), long_run=long_run, gap=gap, edge=edge)
        single_get = self._single.get
        multi_get = self._multi.get
        docs = self._docs
        common_min = self.common_min_tenants
        # source -> the run ending at the previous fingerprint (`Run`); `before` at the one before that.
        runs: Runs = {}
        before: Runs = {}
        # Per position: the fingerprint if it is the receiver's own text (its prompt or recent context), else None.
        own: list[int | None] = [None] * len(hashes)
        ended: list[tuple[str, Run]] = []
        for i, h in enumerate(hashes):
            if before:
                ended += [(src, before[src]) for src in before.keys() - runs.keys()]
            before, runs = runs, {}
            prev = before
            if h in own_prompt:
                ov.own_prompt += 1
                own[i] = h
                continue
            why = explained[i] if explained is not None else 0
            if why >= 2:
                if why == 2:
                    ov.public += 1
                else:
                    ov.common += 1
                if prev and bridge:
                    self._bridge(h, prev, runs, bridge)
                continue
            weight = rarity[i] if rarity is not None else 1.0
            only = single_get(h)
            if only is not None:
                doc = docs[only]
                if common_min <= 1:
                    ov.common += 1
                elif doc.tenant_id == tenant_id:
                    self._own(ov, doc, session_id, tenant_id, prev, runs, i)
                    own[i] = h
                elif why:  # the receiver had it itself, before the window
                    ov.own_history += 1
                else:
                    self._credit(ov, doc, 1.0, weight, h, prev, runs, i)
                continue
            owners = multi_get(h)
            if owners is None:
                ov.novel += 1
                continue
            if len(owners) >= common_min:
                ov.common += 1
                if prev and bridge:
                    self._bridge(h, prev, runs, bridge, owners)
                continue
            own_doc = owners.get(tenant_id)
            if own_doc is not None:
                self._own(ov, docs[own_doc], session_id, tenant_id, prev, runs, i)
                own[i] = h
                continue
            if why:
                ov.own_history += 1
                continue
            share = 1.0 / len(owners)
            for doc_id in owners.values():
                self._credit(ov, docs[doc_id], share, weight * share, h, prev, runs, i)
        ended += [(src, before[src]) for src in before.keys() - runs.keys()]
        ended += runs.items()
        for src, r in ended:
            if r.tokens >= 0:  # a cross-session run is counted as it grows
                attached = attach > 0 and self._attached(src, r, own, attach)
                if not attached and r.length >= long_run and self._junction(src, r, hashes, own, explained, junction):
                    ov.junctions[src] += 1
                    attached = True
                elif (
                    not attached
                    and long_run <= r.length < in_order
                    and not self._in_order(src, r, hashes, own, explained)
                ):
                    ov.out_of_order[src] += 1
                    attached = True
                self._close(ov, src, r, attached, positions)
            elif r.length >= long_run:
                ov.session_long[src] += r.length
        if positions is not None:
            self._measure(ov)
        for src in ov.free_run:
            if ov.free_run[src] >= long_run:
                ov.chance[src] = self._chance(src, hashes, own_prompt, explained, ov.long_spans[src])
        return ov

    def _chance(
        self,
        src: str,
        hashes: list[int],
        own_prompt: set[int],
        explained: list[int] | None,
        spans: list[tuple[int, int]],
    ) -> tuple[int, int]:
        """(held, n): of the output's n fingerprints outside the source's long runs that could be chance matches
        (not the receiver's prompt, not public, not common over the long horizon or in the window), how many the
        source's window text holds, whoever else holds them too (the receiver included). Text of little information
        per unit (kana, a small vocabulary, tables) shares many short k-grams with text in the same language; a page
        of another script or of private content shares none besides itself."""
        inside = [False] * len(hashes)
        for first, last in spans:
            inside[first : last + 1] = [True] * (last + 1 - first)
        held = n = 0
        single, multi, docs = self._single, self._multi, self._docs
        common_min = self.common_min_tenants
        for i, h in enumerate(hashes):
            if inside[i] or h in own_prompt or (explained is not None and explained[i] >= 2):
                continue
            only = single.get(h)
            if only is not None:
                held += docs[only].tenant_id == src
            else:
                owners = multi.get(h)
                if owners is not None:
                    if len(owners) >= common_min:  # boilerplate of the window: everybody's, not this source's
                        continue
                    held += src in owners
            n += 1
        return held, n

    def _bridge(self, h: int, prev: Runs, runs: Runs, bridge: int, owners: dict[str, int] | None = None) -> None:
        """Carry the open tenant runs whose source holds the explained fingerprint `h` over it (see `query`)."""
        for src, r in prev.items():
            if r.tokens < 0 or r.bridged >= bridge:  # a cross-session run, or the gap is too wide
                continue
            if src in owners if owners is not None else self._holds(src, h):
                runs[src] = r._replace(bridged=r.bridged + 1)

    def _holds(self, tenant_id: str, h: int) -> bool:
        only = self._single.get(h)
        if only is not None:
            return self._docs[only].tenant_id == tenant_id
        owners = self._multi.get(h)
        return owners is not None and tenant_id in owners

    def _attached(self, src: str, r: Run, own: list[int | None], n: int) -> bool:
        """Whether the run continues the receiver's own text: on one side, the `n` fingerprints next to it
        are the receiver's own text AND the source's (the source's text goes on into what the receiver holds:
        a file or document both tenants hold, not a page inserted into the output). A page has a seam on each
        side: the k - 1 k-grams straddling it are a whole window when k - 1 >= w, so winnowing selects one of
        them, and it holds units of both texts, so neither had it; two in a row held by both is no accident.
        """
        holds = self._holds
        before = own[max(0, r.start - n) : r.start]
        after = own[r.last + 1 : r.last + 1 + n]
        return any(len(side) == n and all(h is not None and holds(src, h) for h in side) for side in (before, after))

    def _junction(
        self,
        src: str,
        r: Run,
        hashes: list[int],
        own: list[int | None],
        explained: list[int] | None,
        limits: tuple[int, int],
    ) -> bool:
        """Whether a short run is the junction of two innocent texts rather than a page (docs/adr/0004, 2026-11-30
        "junctions"): its neighbour on one side (`limits[0]`: longest such run) or on both sides (`limits[1]`) is
        innocent (the receiver's own text, the public corpus, common) AND held by the source.

        A page of P private units inserted into other text has a seam on each side whose k - 1 straddling k-grams
        are a whole window (k - 1 >= w): one is selected and, mixing both texts, held by nobody, so it is the
        run's neighbour. A neighbour the source holds therefore means the source's text goes on there as the
        output's does, and then every k-gram holding a page unit, straddling ones included, is the source's:
        P consecutive k-grams (one side) or P + k - 1 (both), so the run has at least P // w or (P + k - 1) // w
        matches. A shorter run with such neighbours is the k - 1 k-grams where two innocent texts meet (a
        disclaimer after a greeting, a closing after a famous quote), which any tenant that wrote the same two
        texts one after the other holds too."""
        one, both = limits
        if r.length > both:
            return False
        sides = 0
        for i in (r.start - 1, r.last + 1):
            if 0 <= i < len(hashes) and self._innocent(i, hashes[i], own, explained) and self._holds(src, hashes[i]):
                sides += 1
        return r.length <= (both if sides == 2 else one if sides == 1 else 0)

    def _in_order(
        self, src: str, r: Run, hashes: list[int], own: list[int | None], explained: list[int] | None
    ) -> bool:
        """Whether the run's fingerprints lie in one text of the source with the same spacing as in the output.

        A stale page is a contiguous piece of one text: inside a shared passage winnowing selects the very same
        k-grams in both texts, so the source's fingerprints of the passage follow each other exactly as the
        output's do. A run whose matches are scattered over the source's text (or over several of its texts) is
        short k-grams the two texts share by chance, which a long text of a small vocabulary (word salad, tables,
        CJK stock phrases) offers many of. (Fingerprints are stored once per text, at their first occurrence: a
        passage that repeats k-grams met earlier in its text can fail this; see docs/adr/0004. Fingerprints bridged
        as common are left out: a stock phrase is the likeliest to have occurred earlier in the text.)"""
        single, multi, docs = self._single, self._multi, self._docs
        matched: list[tuple[int, int]] = []  # (output position, the source's doc holding it)
        for i in range(r.start, r.last + 1):
            h = hashes[i]
            if self._innocent(i, h, own, explained):
                continue
            d = single.get(h)
            if d is None:
                d = multi.get(h, {}).get(src)
            elif docs[d].tenant_id != src:
                d = None
            if d is not None:
                matched.append((i, d))
        needed = [hashes[i] for i, _ in matched]
        first = first_native if type(single) is not dict else first_positions
        for doc_id in dict.fromkeys(d for _, d in matched):
            # The text's offset each match implies (where the text holds it first).
            at = [p - i for p, (i, _) in zip(first(docs[doc_id].hashes, needed), matched, strict=True)]
            if min(at) + len(hashes) < 0:  # a match the text does not hold
                continue
            # A fingerprint met earlier in the text implies an earlier offset (stored once, at its first occurrence),
            # never a later one: the page's offset is the latest implied, and two matches must agree on it.
            if at.count(max(at)) >= min(2, len(at)):
                return True
        return False

    def _innocent(self, i: int, h: int, own: list[int | None], explained: list[int] | None) -> bool:
        """Whether output fingerprint `i` is explained without any other tenant: the receiver's own text (prompt,
        recent context, older history), the public corpus, or common (long horizon or window)."""
        if own[i] is not None or (explained is not None and explained[i] >= 1):
            return True
        if self.common_min_tenants <= 1:
            return h in self._single or h in self._multi
        owners = self._multi.get(h)
        return owners is not None and len(owners) >= self.common_min_tenants

    def _close(self, ov: Overlap, src: str, r: Run, attached: bool, positions: list[int] | None = None) -> None:
        """A tenant's run of matches, ended. A long one is a passage of the source's text: it counts towards the
        source's evidence and tokens either way, and towards the verdict only if it is not one text with the
        receiver's own (`_attached`)."""
        ov.spans.append((r.start, r.last))
        if r.length >= ov.long_run:
            ov.run_spans.setdefault(src, []).append((r.start, r.last, r.length, attached))
        if attached:
            ov.attached[src] += 1
        else:
            ov.free_run[src] = max(ov.free_run[src], r.length)
            # A text's fingerprints are listed once, at their first selection: a k-gram met earlier in the output
            # widens the span (never narrows it), so the coverage is a span, not the run's end minus its start.
            cover = 0
            if positions is not None:
                at = positions[r.start : r.last + 1]
                cover = max(at) - min(at) + 1
            ov.free_runs.setdefault(src, []).append((r.length, cover))
        # With the output's positions the run's page is measured after the query (`_measure`); without, a run over p
        # fingerprints (matches and bridged ones) spans about p * gap + edge units (one selection per gap units), their
        # tokens at the source text's own rate, weighted by the matches' mean share (1 unless other tenants in the
        # window had them).
        if positions is not None:
            tokens = 0.0
            ov.pieces.setdefault(src, []).append(
                (positions[r.start], positions[r.last] + ov.edge, r.units / r.length, r.start, r.last)
            )
        else:
            tokens = r.tokens / r.length * ((r.last - r.start + 1) * ov.gap + ov.edge)
        if r.length < ov.long_run:
            ov.short_tokens[src] = ov.short_tokens.get(src, 0.0) + tokens
            return
        ov.long_spans.setdefault(src, []).append((r.start, r.last))
        if not attached:
            ov.long_passages[src] += 1
        ov.long_matches[src] += r.length
        ov.long_evidence[src] = ov.long_evidence.get(src, 0.0) + r.weight
        ov.tokens[src] = ov.tokens.get(src, 0.0) + tokens

    # --- incremental copies ----------------------------------------------------------------------
    def mark(self) -> None:
        """Start recording changes afresh: `changes()` is relative to the state at this call."""
        self._log = []
        self._log_fps = 0

    def changes(self) -> list[Doc | int] | None:
        """Inserted Docs and dropped doc ids since `mark()`, in order; None if only a whole copy will do
        (never marked, or the record outgrew its bound)."""
        return None if self._log is None else list(self._log)

    def replay(self, changes: list[Doc | int]) -> None:
        """Apply `changes()` taken from another index to a copy of it as it was at its mark."""
        for op in changes:
            if isinstance(op, Doc):
                if op.doc_id != self._next_id:
                    raise ValueError(f"index changes out of sequence: doc {op.doc_id}, expected {self._next_id}")
                self._insert(op)
                continue
            if not self._order or self._order[0] != op:
                raise ValueError(f"index changes out of sequence: drop of doc {op}")
            self._drop(self._order.popleft())

    def __getstate__(self) -> dict[str, object]:
        state = self.__dict__.copy()
        state["_log"] = None  # what changed since a mark is not part of a copy
        state["_log_fps"] = 0
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if isinstance(self._single, Restored):  # native postings restored without the extension: the dicts
            self._single = dict(self._single)

    def holders(self, h: int) -> set[str]:
        """The tenants whose texts in the window hold fingerprint `h`."""
        only = self._single.get(h)
        if only is not None:
            return {self._docs[only].tenant_id}
        return set(self._multi.get(h, ()))

    def state_size(self) -> dict[str, int]:
        return {
            "docs": len(self._docs),
            "fingerprints": self._fingerprints,
            "distinct_fingerprints": len(self._single) + len(self._multi),
        }
