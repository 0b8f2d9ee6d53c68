"""Delivery mix-ups: a whole response handed to the wrong tenant, told by the pair of exchanges it leaves behind.

A whole response delivered to another tenant (a streaming gateway that crosses two connections, a response cache
keyed wrongly, a session routed to another tenant) is an answer to *someone else's prompt*. When that answer quotes
its own user's document it is made of whole sentences of that user's text, which is also what a model writes when it
reproduces a text it knows (the whole-sentence rule, ADR 0008 decision 8): content alone calls it an echo. But the
mix-up leaves a second witness that no echo has. The answer can only exist after the prompt it answers was sent, so
it is delivered while that request is in flight, and the request's own exchange is then wrong too:

- **copy**: the owner got the same answer as well. Two tenants received one answer (most of each output's
  fingerprints shared), and the answer quotes one of the two prompts and not the other: the quoted one is its owner,
  the other receiver is the leak. A model never writes the same long answer for two prompts; where neither prompt
  explains the answer (the same public text translated for two tenants) nothing is concluded.
- **swap**: the two answers crossed. Each output holds text of the *other* request's prompt that its own prompt does
  not hold, and each was delivered while the other request was in flight. An echo would need two independent echoes
  mirroring each other within one request's lifetime.

Text the domain counts as common or public (`innocent_of`: the overlap detector's long-horizon record and the
corpus) is no witness. The ledger keeps the recent deliveries of a domain (output and prompt fingerprints as sorted
uint64 arrays, ids and times), bounded by event time (`mixup_window_s`), count (`mixup_max_deliveries`) and
fingerprints held (`mixup_max_prints`: 16 MB at the default); no text. Both witnesses are events the domain already
sees, so a finding comes out when the second exchange of the pair completes, without waiting for warm-up.
Pure: no I/O, no clock (ADR 0008, decision 9).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from detectors.held import Held
from detectors.settings import DetectionSettings
from detectors.signals.overlap import OverlapDetector
from schemas.alert import SEVERITY_RANK, Signal
from schemas.exchange import Exchange, TextFingerprint

Innocent = Callable[[np.ndarray], np.ndarray]  # uint64 fingerprints -> mask of the common or public ones
_EMPTY = np.empty(0, dtype=np.uint64)
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


@dataclass(slots=True)
class Finding:
    """A mix-up found when `current` completed: `leaked` received `owner`'s answer."""

    mode: Literal["copy", "swap"]
    leaked: Delivery
    owner: Delivery
    shared: int  # fingerprints witnessing it (copy: shared by the two outputs; swap: the smaller direction)


def _keys(tp: TextFingerprint | None) -> np.ndarray:
    """The print's fingerprints, sorted and unique. A selection holds each value once already, so a sort does; the
    check for neighbours alike keeps wire prints (a producer's, which may repeat) right. np.unique's hash pass cost
    ~5x the sort."""
    if tp is None or not tp.hashes:
        return _EMPTY
    keys = np.array(tp.hashes, dtype=np.uint64)
    keys.sort()
    if keys.size > 1 and (keys[1:] == keys[:-1]).any():
        keys = np.unique(keys)
    return keys


def _common(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The values of sorted unique `a` that sorted unique `b` holds."""
    if not a.size or not b.size:
        return _EMPTY
    out: np.ndarray = a[_held(a, b)]
    return out


def _without(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if not a.size or not b.size:
        return a
    out: np.ndarray = a[~_held(a, b)]
    return out


def _held(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per value of `a`: whether sorted unique `b` holds it."""
    at = np.searchsorted(b, a)
    at[at == b.size] = 0
    held: np.ndarray = b[at] == a
    return held


class MixupLedger:
    def __init__(self) -> None:
        # No settings held: a piece is plain data (a checkpoint copies it apart, and the key must not be in it).
        self.recent: deque[Delivery] = deque()
        self.found = 0  # mix-ups found (cumulative)
        self.prints = 0  # fingerprints held (8 bytes each): bounded by mixup_max_prints
        # Since the last `mark` (a checkpoint copied the ledger): deliveries added and dropped; None: never marked.
        self._since: tuple[int, int] | None = None

    # A piece (detectors/signals/base.py): a checkpoint copies the ledger as the deliveries it gained and lost.
    def changes(self) -> tuple[int, list[Delivery]] | None:
        """(dropped from the front, added at the back) since the mark; None when only a whole copy will do."""
        if self._since is None or self._since[0] > len(self.recent):
            return None
        added, dropped = self._since
        return dropped, list(self.recent)[len(self.recent) - added :] if added else []

    def mark(self) -> None:
        self._since = (0, 0)

    def replay(self, changes: tuple[int, list[Delivery]]) -> None:
        dropped, added = changes
        for _ in range(min(dropped, len(self.recent))):
            self.recent.popleft()
        self.recent.extend(added)
        self.prints = sum(d.out.size + d.prompt.size for d in self.recent)

    def delivery(self, ex: Exchange) -> Delivery | None:
        """The exchange as the ledger would keep it; None for what cannot witness (no output, not 2xx)."""
        resp = ex.response
        if resp is None or ex.output_print is None or not ex.output_print.hashes:
            return None
        if resp.status_code is not None and not 200 <= resp.status_code <= 299:
            return None
        sent = ex.request.ts if ex.request is not None else ex.ts
        out, prompt = _keys(ex.output_print), _keys(ex.prompt_print)
        return Delivery(ex.ts, sent, ex.request_id, ex.tenant_id, ex.session_id, ex.traceparent, out, prompt, set())

    def check(self, s: DetectionSettings, current: Delivery, innocent: Innocent) -> list[Finding]:
        """Mix-ups between `current` (just completed) and the deliveries made while its request was in flight."""
        found = []
        if current.out.size < s.mixup_min_matches:
            return []
        others = []
        for other in reversed(self.recent):
            if other.ts < current.sent:
                break  # delivered before this request was sent: it cannot carry its answer, nor be answered by it
            if other.tenant_id != current.tenant_id:
                others.append(other)
        for other in _candidates(s, current, others):
            f = _pair(s, current, other, innocent)
            if f is not None:
                found.append(f)
        self.found += len(found)
        return found

    def add(self, s: DetectionSettings, d: Delivery) -> None:
        recent = self.recent
        recent.append(d)
        self.prints = getattr(self, "prints", 0) + d.out.size + d.prompt.size
        horizon, dropped = d.ts - s.mixup_window_s, 0
        while recent and (
            recent[0].ts < horizon or len(recent) > s.mixup_max_deliveries or self.prints > s.mixup_max_prints
        ):
            gone = recent.popleft()
            self.prints -= gone.out.size + gone.prompt.size
            dropped += 1
        if self._since is not None:
            self._since = (self._since[0] + 1, self._since[1] + dropped)

    def state_size(self) -> int:
        return len(self.recent)


def _candidates(s: DetectionSettings, cur: Delivery, others: list[Delivery]) -> list[Delivery]:
    """The deliveries of `others` (in order) that `_pair` could find a mix-up with, tested for all of them at once: a
    copy needs its two outputs to share `mixup_copy_share` of the shorter, a swap needs at least _WEAK of the other's
    output in the current prompt. A busy domain has many deliveries in flight and almost none of them qualify; one
    search over all their outputs replaces a few per delivery (the exact same pairs go on to `_pair`)."""
    n = len(others)
    if n < 3:
        return others
    sizes = np.fromiter((o.out.size for o in others), dtype=np.intp, count=n)
    outs = np.concatenate([o.out for o in others])
    owner = np.repeat(np.arange(n), sizes)
    shared = np.bincount(owner[_held(outs, cur.out)], minlength=n) if cur.out.size else np.zeros(n, dtype=np.intp)
    quoted = np.bincount(owner[_held(outs, cur.prompt)], minlength=n) if cur.prompt.size else np.zeros(n, np.intp)
    copy = shared >= s.mixup_copy_share * np.minimum(sizes, cur.out.size)
    keep = np.flatnonzero(copy | (quoted >= _WEAK))
    return [others[i] for i in keep.tolist()]


def _pair(s: DetectionSettings, cur: Delivery, other: Delivery, innocent: Innocent) -> Finding | None:
    shared = _common(cur.out, other.out)
    if shared.size >= s.mixup_copy_share * min(cur.out.size, other.out.size):
        # One answer delivered twice (stock text and public quotes inside it count for the sameness, not as its
        # evidence: at least mixup_min_matches uncommon fingerprints must be shared).
        shared = shared[~innocent(shared)]
        if shared.size < s.mixup_min_matches:
            return None
        mine, theirs = _common(shared, cur.prompt).size, _common(shared, other.prompt).size
        if _owns(mine, theirs):
            return Finding("copy", other, cur, int(shared.size))
        if _owns(theirs, mine):
            return Finding("copy", cur, other, int(shared.size))
        return None  # one answer to two tenants, and neither prompt says whose: nothing concluded
    # A swap: each output holds the other prompt's text that its own prompt does not, and answers the other prompt
    # more than its own (an answer quotes and restates the prompt it answers; a normal answer that shares stock text
    # with another tenant's prompt relates to its own prompt first).
    # (A - B) & C is computed as (A & C) - B: the intersection with the other prompt is small or empty for almost
    # every pair, so most pairs end after one search of the shorter output.
    there = _without(_common(other.out, cur.prompt), other.prompt)
    if there.size < _WEAK:
        return None
    back = _without(_common(cur.out, other.prompt), cur.prompt)
    if back.size < _WEAK or there.size + back.size < 2 * s.mixup_min_matches:
        return None
    there, back = there[~innocent(there)], back[~innocent(back)]
    n, most = sorted((there.size, back.size))
    # Both directions at mixup_min_matches, or one far stronger (twice that) and the other at least _WEAK.
    if n < _WEAK or (n < s.mixup_min_matches and most < 2 * s.mixup_min_matches):
        return None
    own_other, own_cur = _common(other.out, other.prompt), _common(cur.out, cur.prompt)
    own_other, own_cur = own_other[~innocent(own_other)], own_cur[~innocent(own_cur)]
    if there.size <= own_other.size or back.size <= own_cur.size:
        return None
    # Both directions are leaks: `current` holds `other`'s answer and `other` holds current's. The caller raises
    # both; the finding names the one delivered first as leaked, the current one is escalated in place.
    return Finding("swap", other, cur, int(n))


def mixup_signal(f: Finding, source: Delivery) -> Signal:
    """The finding as a cross-tenant signal naming `source`'s tenant (the owner of the answer the receiver got)."""
    figures: dict[str, Any] = {
        "delivery_mixup": f.mode,
        "matched_fingerprints": f.shared,
        "witness_fingerprints": f.shared,
        "source_request_ids": [source.request_id],
    }
    return Signal(
        name="cross_tenant_contamination",
        severity="high",
        score=1.0,
        source_tenant_id=source.tenant_id,
        figures=figures,
    )


def innocent_of(overlap: OverlapDetector) -> Innocent:
    """What the domain's overlap detector explains away in any output: common over the long horizon, or public."""

    def innocent(keys: np.ndarray) -> np.ndarray:
        mask = overlap._common(keys, overlap.spread.tenants(keys))
        return mask | overlap.public.contains(keys) if overlap.public is not None else mask

    return innocent


def as_held(d: Delivery, signals: list[Signal]) -> Held:
    """A past delivery in the form the domain raises a late alert for (the held findings' form)."""
    return Held(d.ts, d.request_id, d.tenant_id, d.session_id, d.traceparent, signals, {}, {})


def apply(
    signals: list[Signal], current: Delivery, findings: list[Finding]
) -> tuple[list[Signal], list[tuple[Delivery, Signal]]]:
    """The current response's signals after its mix-ups, and the late signals for earlier deliveries.

    Where the current response is a leak (it got the owner's answer), it names the owner at high at least. Where it is
    the owner (a copy: the other receiver got its answer), what its output shares with that receiver's output is its
    own answer, not the other's text: signals naming that receiver are dropped. The earlier delivery that got the
    current one's answer gets a late signal naming the current tenant."""
    late: list[tuple[Delivery, Signal]] = []
    for f in findings:
        if f.mode == "copy" and f.owner is current:
            signals = [x for x in signals if x.source_tenant_id != f.leaked.tenant_id or x.name != _CONTENT]
        if f.leaked is not current and current.tenant_id not in f.leaked.named:
            late.append((f.leaked, mixup_signal(f, current)))
            f.leaked.named.add(current.tenant_id)
        if f.mode == "swap":
            signals = _escalate(signals, mixup_signal(f, f.leaked))
        elif f.leaked is current:
            signals = _escalate(signals, mixup_signal(f, f.owner))
    return signals, late


_CONTENT = "cross_tenant_contamination"


def _escalate(signals: list[Signal], sig: Signal) -> list[Signal]:
    """`signals` with the finding naming `sig`'s source at high at least (the content signal naming it raised, its
    figures kept and the mix-up's added), or with `sig` added first when none names it."""
    out, done = [], False
    for x in signals:
        if not done and x.name == _CONTENT and x.source_tenant_id == sig.source_tenant_id:
            done = True
            if SEVERITY_RANK[x.severity] < SEVERITY_RANK["high"]:
                x = x.model_copy(update={"severity": "high", "figures": {**x.figures, **sig.figures}})
            else:
                x = x.model_copy(update={"figures": {**x.figures, "delivery_mixup": sig.figures["delivery_mixup"]}})
        out.append(x)
    return out if done else [sig, *signals]
