"""Delivery mix-ups: a whole response handed to the wrong tenant, told by the pair of exchanges it leaves behind.

A whole response delivered to another tenant (a streaming gateway that crosses two connections, a response cache
keyed wrongly, a session routed to another tenant) answers *someone else's prompt*. Quoting its own user's document,
it is made of whole sentences of that user's text, which content alone calls an echo (ADR 0008 decision 8). But the
mix-up leaves a second witness no echo has: an answer exists only after its prompt was sent, so it is delivered while
that request is in flight, and the request's own exchange is then wrong too:

- **copy**: the owner got the same answer as well (most of each output's fingerprints shared), and the answer quotes
  one prompt and not the other: the quoted one owns it. Where neither prompt says whose, only the very same answer to
  two prompts that share no uncommon text tells (`identical`, ADR 0028); one text translated for two tenants does not.
  Of stock text, the very same answer tells when one usage came with it, counting one prompt and not the other
  (`usage`, ADR 0036). The rules for a pair are detectors/mixup_pairs.py's.
- **swap**: each output holds text of the *other* request's prompt that its own does not, each delivered while the
  other request was in flight; or each response's usage counts the other's prompt (`counts`, detectors/mixup_counts.py),
  or one counts the prompt of a request that lost its own answer (`counted`, ADR 0031).
- **copy from before**: an answer delivered before the receiver's request was sent, handed to it again (a response
  cache): the earlier receiver owns it, if the answer holds text of its own beyond the owner's prompt.
- **one response id, twice** (`mixup_response_ids`, ADR 0022): one id on two tenants' responses with one answer and
  different prompts: its owner is the one whose prompt the answer quotes, else the request sent first. An id alone is
  no witness: some servers reuse or shorten ids.
- **misroute** (one way): the output holds much text of a prompt in flight whose owner got next to nothing (a server
  error, a timeout, an empty answer). A refused request (4xx) had no answer to lose.
- **numbers** and **history**: detectors/mixup_ids.py (ADR 0027), detectors/mixup_history.py (ADR 0023).

Common or public text (`innocent_of`) is no witness. The ledger keeps a domain's recent deliveries as fingerprints,
ids, counts and times (no text), bounded by `mixup_window_s`, `mixup_max_deliveries` and `mixup_max_prints`; a finding
comes out when the pair's second exchange completes, without warm-up. Pure: no I/O, no clock (ADR 0008, decision 9).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from detectors.changes import StoredAsIs
from detectors.mixup_counts import (
    LOST_WITHIN_S,
    answered,
    asked_of,
    counting_alike,
    counts_of,
    crossed,
    lost_answers,
)
from detectors.mixup_crossed import crossed_back
from detectors.mixup_history import history
from detectors.mixup_ids import IdIndex, answered_elsewhere, id_keys
from detectors.mixup_pairs import Finding as Finding  # re-exported: the ledger's findings
from detectors.mixup_pairs import Innocent as Innocent
from detectors.mixup_pairs import candidates, pair, same_response
from detectors.mixup_tails import Bounds, SessionTails, Sketch, bounds, sketch_keys, unfile
from detectors.mixup_tails import enter as _enter
from detectors.mixup_tails import size as _size
from detectors.printsets import sorted_unique
from detectors.settings import DetectionSettings
from schemas.exchange import Exchange, TextFingerprint

Apart = Callable[["Delivery"], bool] | None  # the deliveries worth pairing with the current one (None: all)
_EMPTY = np.empty(0, dtype=np.uint64)
_UNSET: Any = object()


@dataclass(slots=True)
class Delivery:
    """One 2xx response of the domain, as the ledger keeps it (no text)."""

    ts: float  # event time of the response
    sent: float  # event time of its request (the response's own when unknown)
    request_id: str
    tenant_id: str
    session_id: str | None
    traceparent: str | None
    out: np.ndarray  # sorted unique output fingerprints
    prompt: np.ndarray  # sorted unique prompt fingerprints
    named: set[str]  # tenants a high or critical alert on this response already names
    response: str | None = None  # the provider's response id (a delivery pickled before it existed has none)
    out_ids: frozenset[int] | None = None  # identifiers of the output, of the prompt (detectors/mixup_ids.py);
    prompt_ids: frozenset[int] | None = None  # None: unknown (a delivery pickled before them has neither)
    counts: tuple[int, int] | None = None  # the gateway's prompt count, the engine's input tokens (ADR 0029)
    asked: int | None = None  # the gateway's prompt count of an exchange that lost its answer (ADR 0031)


def _keys(tp: TextFingerprint | None) -> np.ndarray:
    """The print's fingerprints, sorted and unique."""
    if tp is None or not tp.hashes:
        return _EMPTY
    return sorted_unique(np.array(tp.hashes, dtype=np.uint64))


class MixupLedger(StoredAsIs):
    def __init__(self) -> None:
        # No settings held: a piece is plain data (a checkpoint copies it apart, and the key must not be in it).
        self.recent: deque[Delivery] = deque()
        self.found = 0  # mix-ups found (cumulative)
        self.prints = 0  # fingerprints held (8 bytes each): bounded by mixup_max_prints
        # Since the last `mark` (a checkpoint copied the ledger): deliveries added and dropped; None: never marked.
        self._since: tuple[int, int] | None = None
        # Deliveries by their sketch's fingerprints, and the newest by response id; derived from `recent`, so never
        # copied (rebuilt when asked).
        self._sketch: Sketch | None = None
        self._ids: dict[str, Delivery] | None = None
        self._by_id: IdIndex | None = None  # and by the identifiers their texts hold (ADR 0027)
        # The newest with an answer long enough to tell (mixup_min_matches) by (tenant, session).
        self._sessions: dict[tuple[str, str], Delivery] | None = None
        # Each conversation's latest answer past the window (detectors/mixup_tails.py, ADR 0026).
        self.tails = SessionTails()
        self._bounds: Bounds | None = None  # the tails' bounds as of the last add: a checkpoint's replay puts with them

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_sketch": None, "_ids": None, "_sessions": None, "_by_id": None}

    # A piece (detectors/signals/base.py): a checkpoint copies the ledger as the deliveries it gained and lost.
    def changes(self) -> tuple[int, list[Delivery], Bounds | None] | None:
        """(dropped from the front, added at the back, the tails' bounds) since the mark; None when only a whole copy
        will do."""
        if self._since is None or self._since[0] > len(self.recent):
            return None
        added, dropped = self._since
        return dropped, list(self.recent)[len(self.recent) - added :] if added else [], self._bounds

    def mark(self) -> None:
        self._since = (0, 0)

    def replay(self, changes: tuple[Any, ...]) -> None:
        dropped, added = changes[0], changes[1]
        b = changes[2] if len(changes) > 2 else None  # a record from before the tails has no bounds
        for _ in range(min(dropped, len(self.recent))):
            self.recent.popleft()
        self.recent.extend(added)
        if b is not None:
            tails = self._tails()
            for d in added:
                tails.put(b, d)
        self.prints = sum(_size(d) for d in self.recent)
        self.forget_derived()

    def forget_derived(self) -> None:
        """Drops the indexes derived from `recent` (the sketch, the ids), rebuilt when next asked: after `recent` was
        changed other than by `add` (a checkpoint replayed, a delivery heard late put in its place)."""
        self._sketch = self._ids = self._sessions = self._by_id = None

    def delivery(self, ex: Exchange) -> Delivery | None:
        """The exchange as the ledger would keep it; None for what cannot witness (no response, a refusal, or neither
        an output nor a prompt). A server error, a timeout or an empty answer is kept with no output: the owner of an
        answer handed to another tenant one way got nothing of it (a misroute)."""
        resp = ex.response
        if resp is None:
            return None
        witness, failed = answered(resp.status_code)
        if not witness:
            return None
        out = _EMPTY if failed else _keys(ex.output_print)
        prompt = _keys(ex.prompt_print)
        if not out.size and not prompt.size:
            return None
        sent = ex.request.ts if ex.request is not None else ex.ts
        rid = ex.response_id
        out_ids = frozenset() if failed else id_keys(ex.output_print)
        return Delivery(
            ex.ts, sent, ex.request_id, ex.tenant_id, ex.session_id, ex.traceparent, out, prompt, set(), rid,
            out_ids, id_keys(ex.prompt_print), counts_of(ex), asked_of(ex),
        )  # fmt: skip

    def check(
        self,
        s: DetectionSettings,
        current: Delivery,
        innocent: Innocent,
        named: frozenset[str] = frozenset(),
        apart: Apart = None,
    ) -> list[Finding]:
        """Mix-ups between `current` (just completed) and the deliveries made while its request was in flight, and
        copies of an answer delivered before it was sent (`mixup_copy_before_s`). `named`: the tenants the current
        output's content signals name (`named_by`; the overlap index's postings hold every prompt in flight), whose
        deliveries are asked for a misroute even when their outputs hold nothing of the current prompt. `apart`: the
        deliveries worth pairing with it (None: all; the fleet's ledger: those of other domains)."""
        found = []
        # With next to no output of its own, the current exchange can only be the owner of a misroute.
        short = current.out.size < s.mixup_min_matches
        if short and not current.prompt.size:
            return []
        others = []
        for other in reversed(self.recent):
            if other.ts < current.sent:
                break  # delivered before this request was sent: it cannot carry its answer, nor be answered by it
            if other.tenant_id != current.tenant_id and (apart is None or apart(other)):
                others.append(other)
        # Counting alike is read once, and only for a pair that needs it (one answer of stock text, ADR 0036).
        alike = cache(lambda: s.mixup_counts and counting_alike(self.recent))
        for other in candidates(s, current, others, named):
            f = pair(s, current, other, innocent, alike=alike)
            if f is not None:
                found.append(f)
        # Delivered before this request was sent, an answer can still have been handed to it again (a response cache
        # keyed wrongly): a copy whose owner is the earlier receiver.
        earlier = [] if short else self._earlier(s, current)
        if apart is not None:
            earlier = [o for o in earlier if apart(o)]
        for other in candidates(s, current, earlier, frozenset(), copies_only=True):
            f = pair(s, current, other, innocent, earlier=True, alike=alike)
            if f is not None:
                found.append(f)
        twin = self._twin(s, current, apart)
        if twin is not None:  # one response id says whose more surely than the same answer does (ADR 0022)
            found = [f for f in found if f.mode != "identical" or (twin is not f.leaked and twin is not f.owner)]
            if all(twin is not f.leaked and twin is not f.owner for f in found):
                f = same_response(s, current, twin, innocent)
                if f is not None:
                    found.append(f)
        if s.mixup_counts:  # the two answers' usage crossed (ADR 0029), where no swap was told by their text
            found += [Finding("counts", o, current, 0) for o in crossed(current, others, self.recent, found)]
            one = lambda a, b: a.out.size >= s.mixup_min_matches and np.array_equal(a.out, b.out)  # noqa: E731
            lost = lost_answers(current, self.recent, min(s.mixup_copy_before_s, LOST_WITHIN_S), found, apart, one)
            found += [Finding("counted", *p, 0) for p in lost]
        if s.mixup_identifiers:
            pairs = [(f.leaked, f.owner) for f in found]
            found += [Finding("identifiers", *hit) for hit in answered_elsewhere(s, current, self._idx(), apart, pairs)]
        found += [Finding("crossed", *hit) for hit in crossed_back(found, innocent)]  # the other direction (ADR 0030)
        if s.mixup_history and current.session_id is not None and not any(f.leaked is current for f in found):
            tails = self._tails()
            sketches = (self._copies(), tails.sketch()) if len(tails) else (self._copies(),)
            hit = history(s, current, self.latest(s, current), sketches, innocent, apart)
            if hit is not None:
                found.append(Finding("history", current, *hit))
        self.found += len(found)
        return found

    def latest(self, s: DetectionSettings, current: Delivery) -> Delivery | None:
        """The newest delivery the ledger holds of `current`'s session, other than `current` itself, whose answer is
        long enough to tell whether a prompt holds it (a chat's "Good morning to you too" is not)."""
        sessions = getattr(self, "_sessions", None)  # a ledger pickled before the index existed has none
        if sessions is None:
            sessions = self._sessions = {}
            for d in self.recent:
                if d.session_id is not None and d.out.size >= s.mixup_min_matches:
                    sessions[(d.tenant_id, d.session_id)] = d
        assert current.session_id is not None
        own = sessions.get((current.tenant_id, current.session_id))
        if own is None:  # answered before the window: kept as a tail
            own = self._tails().get(current.tenant_id, current.session_id)
        return None if own is current else own

    def _tails(self) -> SessionTails:
        """The conversations' latest answers; a ledger pickled before they existed starts them now."""
        if getattr(self, "tails", _UNSET) is _UNSET:
            self.tails = SessionTails()
            self._bounds = None
        return self.tails

    def _twin(self, s: DetectionSettings, current: Delivery, apart: Apart) -> Delivery | None:
        """The newest delivery the ledger holds with `current`'s response id, to another tenant (`apart`)."""
        rid = current.response
        if not rid or not s.mixup_response_ids:
            return None
        ids = getattr(self, "_ids", None)  # a ledger pickled before the index existed has none
        if ids is None:
            ids = self._ids = {r: d for d in self.recent if (r := getattr(d, "response", None))}
        other = ids.get(rid)
        if other is None or other is current or other.tenant_id == current.tenant_id:
            return None
        return other if apart is None or apart(other) else None

    def _earlier(self, s: DetectionSettings, current: Delivery) -> list[Delivery]:
        """Other tenants' deliveries of the `mixup_copy_before_s` before `current` was sent that share a sketch
        fingerprint with it, newest first."""
        if s.mixup_copy_before_s <= 0:
            return []
        sketch, since, seen, out = self._copies(), current.sent - s.mixup_copy_before_s, set(), []
        for key in sketch_keys(current):
            for other in sketch.get(key, ()):
                if since <= other.ts < current.sent and other.tenant_id != current.tenant_id and id(other) not in seen:
                    seen.add(id(other))
                    out.append(other)
        out.sort(key=lambda d: d.ts, reverse=True)
        return out

    def _idx(self) -> IdIndex:
        index = getattr(self, "_by_id", None)  # a ledger pickled before the index existed has none
        if index is None:
            index = self._by_id = IdIndex(self.recent)
        return index

    def _copies(self) -> Sketch:
        sketch = getattr(self, "_sketch", None)  # a ledger pickled before the sketch existed has none
        if sketch is None:
            sketch = self._sketch = {}
            for d in self.recent:
                _enter(sketch, d)
        return sketch

    def add(self, s: DetectionSettings, d: Delivery) -> None:
        recent = self.recent
        sketch = getattr(self, "_sketch", None)
        if sketch is not None:
            _enter(sketch, d)
        ids = getattr(self, "_ids", None)
        if ids is not None and getattr(d, "response", None):
            ids[d.response] = d
        sessions = getattr(self, "_sessions", None)
        if sessions is not None and d.session_id is not None and d.out.size >= s.mixup_min_matches:
            sessions[(d.tenant_id, d.session_id)] = d
        by_id = getattr(self, "_by_id", None)
        if by_id is not None:
            by_id.enter(d)
        recent.append(d)
        self.prints = getattr(self, "prints", 0) + _size(d)
        tails = self._tails()
        self._bounds = bounds(s)
        if self._bounds is not None:
            tails.put(self._bounds, d)
        horizon, dropped = d.ts - s.mixup_window_s, 0
        while recent and (
            recent[0].ts < horizon or len(recent) > s.mixup_max_deliveries or self.prints > s.mixup_max_prints
        ):
            gone = recent.popleft()
            self.prints -= _size(gone)
            if sketch is not None:
                unfile(sketch, sketch_keys(gone), gone)
            if by_id is not None:
                by_id.leave(gone)
            if ids is not None and ids.get(getattr(gone, "response", None) or "") is gone:
                del ids[gone.response]
            at = (gone.tenant_id, gone.session_id or "")
            if sessions is not None and sessions.get(at) is gone:
                del sessions[at]
            dropped += 1
        if self._since is not None:
            self._since = (self._since[0] + 1, self._since[1] + dropped)

    def empty(self) -> bool:
        """Whether the ledger holds no delivery to pair with, in its window or as a conversation's latest answer."""
        return not self.recent and not len(self._tails())

    def state_size(self) -> int:
        return len(self.recent) + len(self._tails())
