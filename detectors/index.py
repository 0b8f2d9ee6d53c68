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

import contextlib
from array import array
from collections import deque
from dataclasses import fields
from itertools import compress, filterfalse, repeat
from operator import eq
from sys import intern
from typing import Any

import numpy as np

from detectors.matches import BRIDGE, Overlap, Run, Runs, credit, measure, own, unit_tokens
from detectors.postings import NATIVE, Doc, Restored, native_table, owners_of
from detectors.runshape import RunShapes

__all__ = ["BRIDGE", "NATIVE", "ContentIndex", "Doc", "Overlap", "unit_tokens"]


class ContentIndex(RunShapes):
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
        hashes: list[int] | array[int],
        tokens_per_unit: float = 1.0,
        sentences: list[int] | None = None,
    ) -> None:
        if not hashes:
            return
        whole = array("Q", sentences) if sentences is not None else None
        self._insert(Doc(self._next_id, tenant_id, session_id, request_id, ts, hashes, tokens_per_unit, whole))
        self._expire(ts)

    def sentences(self, doc_ids: set[int]) -> set[int] | None:
        """The whole-sentence hashes of these texts and of the other text of each one's exchange
        (detectors/sentences.py); None when none of them has any. A fingerprint's postings name its newest holder
        alone: an answer that quotes its prompt holds the quote's fingerprints, and the prompt's own copy of it (with
        its sentences as the tenant wrote them) is the text before it, indexed with the answer as one exchange
        (`OverlapDetector.learn`)."""
        docs = self._docs
        exchange: set[int] = set()  # each text once, however many of the matched texts name it
        for doc_id in doc_ids:
            d = docs.get(doc_id)
            if d is not None:
                near = (doc_id - 1, doc_id, doc_id + 1)
                exchange.update(i for i in near if (o := docs.get(i)) is not None and o.request_id == d.request_id)
        held = [d.sentences for d in map(docs.get, exchange) if d is not None and d.sentences is not None]
        return set().union(*held) if held else None

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
        if isinstance(doc.hashes, array):  # the dict path keeps lists, as its snapshots always did
            doc.hashes = doc.hashes.tolist()
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
        The same holds for a fingerprint of the receiver's own prompt or older history that the source's text holds
        too: shared by two holders, as a fingerprint two tenants hold in the window is. What only the receiver holds
        (its own text) and other tenants' text are never bridged: they are the seams of a page, whose straddling
        k-grams nobody holds.

        `positions[i]` (optional) is the k-gram position in the output text of `hashes[i]`: with it each free run
        records the positions it covers (`Overlap.free_runs`)."""
        ov = Overlap(total=len(hashes), long_run=long_run, gap=gap, edge=edge)
        # Per position: the fingerprint if it is the receiver's own text (its prompt or recent context), else None.
        own: list[int | None] = [None] * len(hashes)
        ended = self._scan(ov, tenant_id, session_id, hashes, own_prompt, explained, rarity, bridge, own)
        self._close_runs(ov, ended, hashes, own, explained, attach, junction, in_order, positions)
        if positions is not None:
            self._measure(ov)
        for src in ov.free_run:
            if ov.free_run[src] >= long_run:
                ov.chance[src] = self._chance(src, hashes, own_prompt, explained, ov.long_spans[src])
        return ov

    def _scan(
        self,
        ov: Overlap,
        tenant_id: str,
        session_id: str | None,
        hashes: list[int],
        own_prompt: set[int],
        explained: list[int] | None,
        rarity: list[float] | None,
        bridge: int,
        own: list[int | None],
    ) -> list[tuple[str, Run]]:
        """Count every output fingerprint into `ov` and grow the runs of each source (`query`); marks the receiver's
        own text in `own`. Returns every run, ended or still open at the end."""
        single_get, multi_get, docs, common_min = self._single.get, self._multi.get, self._docs, self.common_min_tenants
        # source -> the run ending at the previous fingerprint (`Run`); `before` at the one before that.
        runs: Runs = {}
        before: Runs = {}
        ended: list[tuple[str, Run]] = []
        for i, h in enumerate(hashes):
            if before:
                ended += [(src, before[src]) for src in before.keys() - runs.keys()]
            before, runs = runs, {}
            prev = before
            if h in own_prompt:
                ov.own_prompt += 1
                own[i] = h
                if prev and bridge:  # shared by two holders when the source has it too (`_bridge`)
                    self._bridge(h, prev, runs, bridge)
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
                    if prev and bridge:
                        self._bridge(h, prev, runs, bridge)
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
                if prev and bridge:
                    self._bridge(h, prev, runs, bridge, owners)
                continue
            share = 1.0 / len(owners)
            for doc_id in owners.values():
                self._credit(ov, docs[doc_id], share, weight * share, h, prev, runs, i)
        ended += [(src, before[src]) for src in before.keys() - runs.keys()]
        ended += runs.items()
        return ended

    def _close_runs(
        self,
        ov: Overlap,
        ended: list[tuple[str, Run]],
        hashes: list[int],
        own: list[int | None],
        explained: list[int] | None,
        attach: int,
        junction: tuple[int, int],
        in_order: int,
        positions: list[int] | None,
    ) -> None:
        """Close every run into `ov`: a tenant run attached to the receiver's own text, a junction of two innocent
        texts or out of order is no page (`_close`); a cross-session run of `long_run` counts as a long one."""
        long_run = ov.long_run
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
                ov.session_spans.setdefault(src, []).append((r.start, r.last))

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
                first = min(at)
                cover = max(at) - first + 1
                ov.free_spans.setdefault(src, []).append((r.length, first, first + cover - 1))
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

    @staticmethod
    def pack(changes: list[Doc | int]) -> list[Any]:
        """`changes()` as stored: each Doc as its fields with its fingerprints as one uint64 array (8 bytes each, no
        per-int pickling), each drop as its doc id; empty when nothing changed."""
        out: list[Any] = []
        for op in changes:
            if isinstance(op, Doc):
                state = {f.name: getattr(op, f.name) for f in fields(Doc)}
                with contextlib.suppress(OverflowError, TypeError, ValueError):  # not 64-bit unsigned: the list
                    state["hashes"] = np.asarray(op.hashes, dtype=np.uint64)
                out.append(state)
            else:
                out.append(op)
        return out

    @staticmethod
    def unpack(packed: list[Any]) -> list[Doc | int]:
        out: list[Doc | int] = []
        for op in packed:
            if isinstance(op, dict):
                hashes = op["hashes"]
                out.append(Doc(**{**op, "hashes": hashes.tolist() if isinstance(hashes, np.ndarray) else hashes}))
            else:
                out.append(op)
        return out

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
