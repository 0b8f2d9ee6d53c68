"""Delivery mix-ups: a whole response handed to the wrong tenant, told by the pair of exchanges it leaves behind.

A whole response delivered to another tenant (a streaming gateway that crosses two connections, a response cache
keyed wrongly, a session routed to another tenant) answers *someone else's prompt*. Quoting its own user's document,
it is made of whole sentences of that user's text, which content alone calls an echo (ADR 0008 decision 8). But the
mix-up leaves a second witness no echo has: an answer exists only after its prompt was sent, so it is delivered while
that request is in flight, and the request's own exchange is then wrong too:

- **copy**: the owner got the same answer as well (most of each output's fingerprints shared), and the answer quotes
  one prompt and not the other: the quoted one owns it. Where neither prompt says whose, only the very same answer to
  two prompts that share no uncommon text tells (`identical`, ADR 0028); one text translated for two tenants does not.
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
from typing import Any, Literal

import numpy as np

from detectors.changes import StoredAsIs
from detectors.mixup_counts import LOST_WITHIN_S, answered, asked_of, counts_of, crossed, lost_answers, usage_copied
from detectors.mixup_crossed import crossed_back
from detectors.mixup_history import history
from detectors.mixup_ids import HANDED_WITHIN_S, IdIndex, answered_elsewhere, id_keys
from detectors.mixup_tails import Bounds, SessionTails, Sketch, bounds, sketch_keys, unfile
from detectors.mixup_tails import enter as _enter
from detectors.mixup_tails import size as _size
from detectors.printsets import common as _common
from detectors.printsets import held as _held
from detectors.printsets import sorted_unique
from detectors.printsets import without as _without
from detectors.settings import DetectionSettings
from schemas.exchange import Exchange, TextFingerprint

Innocent = Callable[[np.ndarray], np.ndarray]  # uint64 fingerprints -> mask of the common or public ones
Apart = Callable[["Delivery"], bool] | None  # the deliveries worth pairing with the current one (None: all)
_EMPTY = np.empty(0, dtype=np.uint64)
_UNSET: Any = object()
# Of the two prompts, the one the shared answer quotes must hold at least this many of its fingerprints and the other
# at most a quarter as many, or _WEAK of them while the other holds none: the answer is that prompt's.
_OWNER_MIN = 3
# The least evidence one direction of a swap, or a copy's owner, can give when the other side is strong or empty.
_WEAK = 2


def _owns(mine: int, theirs: int) -> bool:
    """Whether a prompt that holds `mine` of a shared answer's fingerprints owns it against one that holds `theirs`."""
    return (mine >= _OWNER_MIN and 4 * theirs <= mine) or (mine >= _WEAK and theirs == 0)


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


Mode = Literal[
    "copy", "swap", "misroute", "same_response", "history", "identifiers", "identical", "counts", "counted", "crossed"
]


@dataclass(slots=True)
class Finding:
    """A mix-up found when `current` completed: `leaked` received `owner`'s answer."""

    mode: Mode
    leaked: Delivery
    owner: Delivery
    shared: int  # fingerprints witnessing it (copy: shared by the two outputs; swap: the smaller direction;
    # misroute: the one direction)


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
        for other in _candidates(s, current, others, named):
            f = _pair(s, current, other, innocent)
            if f is not None:
                found.append(f)
        # Delivered before this request was sent, an answer can still have been handed to it again (a response cache
        # keyed wrongly): a copy whose owner is the earlier receiver.
        earlier = [] if short else self._earlier(s, current)
        if apart is not None:
            earlier = [o for o in earlier if apart(o)]
        for other in _candidates(s, current, earlier, frozenset(), copies_only=True):
            f = _pair(s, current, other, innocent, earlier=True)
            if f is not None:
                found.append(f)
        twin = self._twin(s, current, apart)
        if twin is not None:  # one response id says whose more surely than the same answer does (ADR 0022)
            found = [f for f in found if f.mode != "identical" or (twin is not f.leaked and twin is not f.owner)]
            if all(twin is not f.leaked and twin is not f.owner for f in found):
                f = _same_response(s, current, twin, innocent)
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


def _candidates(
    s: DetectionSettings, cur: Delivery, others: list[Delivery], named: frozenset[str], copies_only: bool = False
) -> list[Delivery]:
    """The deliveries of `others` (in order) that `_pair` could find a mix-up with, tested for all of them at once: a
    copy needs its two outputs to share `mixup_copy_share` of the shorter, a swap needs at least _WEAK of the other's
    output in the current prompt, or the other's tenant among those the current output's content signals name (a
    misroute: the current output holds the other prompt's text, the other output nothing of the current one). A
    busy domain has many deliveries in flight and almost none of them qualify; one search over all their outputs
    replaces a few per delivery (the exact same pairs go on to `_pair`)."""
    n = len(others)
    if n < 3 and not copies_only:
        return others
    if not n:
        return []
    sizes = np.fromiter((o.out.size for o in others), dtype=np.intp, count=n)
    outs = np.concatenate([o.out for o in others])
    owner = np.repeat(np.arange(n), sizes)
    shared = np.bincount(owner[_held(outs, cur.out)], minlength=n) if cur.out.size else np.zeros(n, dtype=np.intp)
    keep = (shared >= s.mixup_copy_share * np.minimum(sizes, cur.out.size)) & (shared >= s.mixup_min_matches)
    if not copies_only:
        quoted = np.bincount(owner[_held(outs, cur.prompt)], minlength=n) if cur.prompt.size else np.zeros(n, np.intp)
        keep |= quoted >= _WEAK
        if named:
            keep |= np.fromiter((o.tenant_id in named for o in others), dtype=bool, count=n)
    return [others[i] for i in np.flatnonzero(keep).tolist()]


def _one_answer(s: DetectionSettings, a: Delivery, b: Delivery, innocent: Innocent, least: int) -> np.ndarray | None:
    """The uncommon fingerprints two outputs share when they are one answer (they share `mixup_copy_share` of the
    shorter one's fingerprints, and at least `least`); None when they are not. Stock text and public quotes inside an
    answer count for its sameness, not as its evidence."""
    shared = _common(a.out, b.out)
    if shared.size < max(s.mixup_copy_share * min(a.out.size, b.out.size), least):
        return None
    out: np.ndarray = shared[~innocent(shared)]
    return out


def _pair(
    s: DetectionSettings, cur: Delivery, other: Delivery, innocent: Innocent, earlier: bool = False
) -> Finding | None:
    """The mix-up of `cur` and `other`, if any. `earlier`: `other` was delivered before `cur`'s request was sent, so
    only a copy with `other` as its owner is possible (an answer cannot precede the prompt it answers)."""
    shared = _one_answer(s, cur, other, innocent, s.mixup_min_matches)
    if shared is not None:
        # One answer delivered twice: at least mixup_min_matches uncommon fingerprints must be shared.
        if shared.size >= s.mixup_min_matches:
            mine, theirs = _common(shared, cur.prompt).size, _common(shared, other.prompt).size
            if _owns(mine, theirs) and not earlier:
                return Finding("copy", other, cur, int(shared.size))
            # From before, the answer must also hold text of its own beyond the owner's prompt: a model reciting a
            # text it knows for two tenants writes that text alone, an answer handed over again is more than its
            # quotes. Older than HANDED_WITHIN_S, quotes say whose no more (tenants reading one public document
            # over minutes): only the very same answer to an unrelated prompt, or one response id, tells (ADR 0034).
            old = earlier and other.ts < cur.sent - HANDED_WITHIN_S
            if _owns(theirs, mine) and not (earlier and (old or _without(shared, other.prompt).size < _WEAK)):
                return Finding("copy", cur, other, int(shared.size))
        # Neither prompt says whose: only the very same answer to two unrelated prompts still tells (ADR 0028).
        return _identical(s, cur, other, shared, innocent)
    if earlier:
        return None
    return _swap(s, cur, other, innocent)


def _identical(
    s: DetectionSettings, cur: Delivery, other: Delivery, shared: np.ndarray, innocent: Innocent
) -> Finding | None:
    """The very same answer (every fingerprint equal, _OWNER_MIN uncommon) to two tenants whose prompts (each of
    mixup_min_matches fingerprints) share no uncommon text, within mixup_copy_before_s: a model does not write one
    whole answer word for word to two unrelated prompts, so one tenant got the other's (ADR 0028)."""
    if shared.size < _OWNER_MIN or not np.array_equal(cur.out, other.out):
        return None
    first, later = (other, cur) if (other.ts, other.sent) <= (cur.ts, cur.sent) else (cur, other)
    if later.sent - first.ts > s.mixup_copy_before_s or min(cur.prompt.size, other.prompt.size) < s.mixup_min_matches:
        return None  # apart in time (a digest heard late is checked against later ones), or prompts too short to tell
    mine, theirs = _common(shared, cur.prompt).size, _common(shared, other.prompt).size
    both = _common(cur.prompt, other.prompt)
    if _owns(mine, theirs) or _owns(theirs, mine) or (both.size and not innocent(both).all()):
        return None  # the copy's rules have spoken; or one question asked twice (a document both hold), one answer
    # Whose: the prompt holding more of the answer, stock text counted (an answer restates its question in whatever
    # words); else the earlier delivery (a copy is handed over once the answer exists).
    quoted_cur, quoted_other = _common(cur.out, cur.prompt).size, _common(other.out, other.prompt).size
    if quoted_cur != quoted_other:
        first, later = (cur, other) if quoted_cur > quoted_other else (other, cur)
    return Finding("identical", later, first, int(shared.size))


def _same_response(s: DetectionSettings, cur: Delivery, other: Delivery, innocent: Innocent) -> Finding | None:
    """`cur` and `other` carry one response id: one answer handed over twice if their outputs are one answer with
    uncommon text in it and their prompts differ (the same prompt answered from a cache tenants share gives nobody's
    data away). The owner is the one whose prompt the answer quotes, else the one whose request was sent first: an
    answer is made after its prompt is sent and handed over again after it was made, while the owner's own delivery
    can end later (a long stream)."""
    if np.array_equal(cur.prompt, other.prompt):
        return None
    # The id says it is one answer, so the text need only show it is one (the copy's share) and no stock answer: _WEAK
    # uncommon fingerprints, which a short personal answer has ("Nice to meet you, Elvin! How is Palu today?").
    shared = _one_answer(s, cur, other, innocent, _WEAK)
    copied, owner = usage_copied(cur, other)  # or its usage too: one response, stock text or not (ADR 0031)
    if shared is None or (shared.size < _WEAK and not copied):
        return None
    if owner is not None:
        return Finding("same_response", cur if owner is other else other, owner, int(shared.size))
    first, second = (other, cur) if (other.sent, other.ts) <= (cur.sent, cur.ts) else (cur, other)
    quoted_first, quoted_second = _common(shared, first.prompt).size, _common(shared, second.prompt).size
    if _owns(quoted_second, quoted_first) and first.ts >= second.sent:  # an answer cannot precede its prompt
        return Finding("same_response", first, second, int(shared.size))
    return Finding("same_response", second, first, int(shared.size))


def _swap(s: DetectionSettings, cur: Delivery, other: Delivery, innocent: Innocent) -> Finding | None:
    """A swap: each output holds the other prompt's text that its own prompt does not, and answers the other prompt
    more than its own (an answer quotes and restates the prompt it answers; a normal answer that shares stock text
    with another tenant's prompt relates to its own prompt first). One way (a misroute): one output holds twice
    mixup_min_matches of the other prompt and answers it more than its own, while the other prompt's owner got next
    to nothing (an error, an empty answer, or fewer than twice mixup_min_matches fingerprints, none of them its own
    prompt's); only the first is named a leak. An echo leaves the owner its own answer."""
    # (A - B) & C is computed as (A & C) - B: the intersection with the other prompt is small or empty for almost
    # every pair, so most pairs end after one search of the shorter output.
    there = _without(_common(other.out, cur.prompt), other.prompt)
    twice = 2 * s.mixup_min_matches  # one strong direction; and "next to nothing" for a misroute's owner
    if there.size < _WEAK and other.out.size >= twice:
        return None  # no swap (it needs both ways), and no misroute to the current one: the other got an answer
    back = _without(_common(cur.out, other.prompt), cur.prompt)
    if there.size + back.size < twice:
        return None
    there, back = there[~innocent(there)], back[~innocent(back)]
    n, most = sorted((there.size, back.size))
    if most < s.mixup_min_matches or (n < s.mixup_min_matches and most < twice):
        return None
    own_other, own_cur = _common(other.out, other.prompt), _common(cur.out, cur.prompt)
    own_other, own_cur = own_other[~innocent(own_other)], own_cur[~innocent(own_cur)]
    if n < _WEAK:  # one way: the strong one answers the other prompt more than its own; its owner got next to nothing
        if there.size > back.size:
            ok = there.size > own_other.size and not own_cur.size and cur.out.size < twice
            return Finding("misroute", other, cur, int(most)) if ok else None
        ok = back.size > own_cur.size and not own_other.size and other.out.size < twice
        return Finding("misroute", cur, other, int(most)) if ok else None
    if there.size <= own_other.size or back.size <= own_cur.size:
        return None
    # Both directions are leaks: `current` holds `other`'s answer and `other` holds current's. The caller raises
    # both; the finding names the one delivered first as leaked, the current one is escalated in place.
    return Finding("swap", other, cur, int(n))
