"""What one pair of deliveries tells (detectors/mixup.py's ledger asks it of each pair worth asking).

The rules of the module docstring of detectors/mixup.py, one function each: a copy (`pair`), the very same answer to
unrelated prompts (`_identical`, ADR 0028), the same answer with one usage (`_one_usage`, ADR 0036), one response id
twice (`same_response`, ADR 0022), a swap (`_swap`); and `candidates`, which finds the pairs worth asking at once.
Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from detectors.mixup_counts import usage_copied
from detectors.mixup_ids import HANDED_WITHIN_S
from detectors.printsets import common as _common
from detectors.printsets import held as _held
from detectors.printsets import without as _without
from detectors.settings import DetectionSettings

if TYPE_CHECKING:
    from detectors.mixup import Delivery

Innocent = Callable[[np.ndarray], np.ndarray]  # uint64 fingerprints -> mask of the common or public ones

# Of the two prompts, the one the shared answer quotes must hold at least this many of its fingerprints and the other
# at most a quarter as many, or _WEAK of them while the other holds none: the answer is that prompt's.
_OWNER_MIN = 3
# The least evidence one direction of a swap, or a copy's owner, can give when the other side is strong or empty.
_WEAK = 2


def _owns(mine: int, theirs: int) -> bool:
    """Whether a prompt that holds `mine` of a shared answer's fingerprints owns it against one that holds `theirs`."""
    return (mine >= _OWNER_MIN and 4 * theirs <= mine) or (mine >= _WEAK and theirs == 0)


Mode = Literal[
    "copy", "swap", "misroute", "same_response", "history", "identifiers", "identical", "counts", "counted", "crossed",
    "usage",
]  # fmt: skip


@dataclass(slots=True)
class Finding:
    """A mix-up found when `current` completed: `leaked` received `owner`'s answer."""

    mode: Mode
    leaked: Delivery
    owner: Delivery
    shared: int  # fingerprints witnessing it (copy: shared by the two outputs; swap: the smaller direction;
    # misroute: the one direction)


def candidates(
    s: DetectionSettings, cur: Delivery, others: list[Delivery], named: frozenset[str], copies_only: bool = False
) -> list[Delivery]:
    """The deliveries of `others` (in order) that `pair` could find a mix-up with, tested for all of them at once: a
    copy needs its two outputs to share `mixup_copy_share` of the shorter, a swap needs at least _WEAK of the other's
    output in the current prompt, or the other's tenant among those the current output's content signals name (a
    misroute: the current output holds the other prompt's text, the other output nothing of the current one). A
    busy domain has many deliveries in flight and almost none of them qualify; one search over all their outputs
    replaces a few per delivery (the exact same pairs go on to `pair`)."""
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


def pair(
    s: DetectionSettings,
    cur: Delivery,
    other: Delivery,
    innocent: Innocent,
    earlier: bool = False,
    alike: Callable[[], bool] = lambda: False,
) -> Finding | None:
    """The mix-up of `cur` and `other`, if any. `earlier`: `other` was delivered before `cur`'s request was sent, so
    only a copy with `other` as its owner is possible (an answer cannot precede the prompt it answers). `alike`:
    whether the ledger's gateway and engine count alike (`counting_alike`), asked only when a count would tell."""
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
        # Neither prompt says whose: only the very same answer to two unrelated prompts still tells (ADR 0028), or,
        # of stock text, the usage handed over with it (ADR 0036).
        return _identical(s, cur, other, shared, innocent) or _one_usage(cur, other, earlier, alike)
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


def _one_usage(cur: Delivery, other: Delivery, earlier: bool, alike: Callable[[], bool]) -> Finding | None:
    """The very same answer delivered to two tenants with one usage, which counts one's prompt to the token and not
    the other's, where gateway and engine count alike: one response handed over with its usage, whatever its text
    (stock phrases, a public document quoted), and its owner is the one whose prompt it counts (ADR 0036)."""
    if not np.array_equal(cur.out, other.out):
        return None
    owner = usage_copied(cur, other)[1]
    if owner is None or (earlier and owner is cur) or not alike():
        return None  # no count says whose; an answer cannot precede its prompt; or counts that differ as a rule
    return Finding("usage", other if owner is cur else cur, owner, int(cur.out.size))


def same_response(s: DetectionSettings, cur: Delivery, other: Delivery, innocent: Innocent) -> Finding | None:
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
