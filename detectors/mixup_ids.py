"""An answer to another request's prompt, told by the identifiers it carries (ADR 0027).

A model that decodes from another request's prompt (KV pages handed to the wrong decode slot, batch results joined by
offset, a pooled connection read by the next request) writes an answer to *that* prompt, in its own words: no passage
of 8 units is shared with any text the monitor saw, and no second witness is left behind (the owner got an answer of
its own). What the answer does keep is the other case's identifiers, written as its prompt wrote them (an order
number, an amount, a phone number: detectors/identifiers.py).

So a delivery holds another tenant's case when its output holds numbers of that tenant's exchange (its prompt's and
its answer's) that

- are at least `mixup_min_identifiers` (2), one of them at least from the owner's prompt (two answers that share only
  numbers the model wrote, a documentation's examples, are nobody's case), and more than it holds of its own prompt's
  (an answer restates the case it answers); its own prompt holds none of them;
- nobody else wrote in the ledger's window: no third tenant, and the receiver's tenant in no other exchange (a number
  two tenants hold is a public one: a version, a standard, a price list);
- lie outside any passage the output shares with the owner's prompt (content judges passages: it knows what is public
  and what the receiver was shown before);

and the owner's request was sent before the receiver was answered (give or take `mixup_clock_skew_s`: two
components' clocks), and answered after the receiver was sent or up to `HANDED_WITHIN_S` (120 s) before (a prompt in
flight together; an answer or a prefix handed over again, as copies are).

The owner's tenant is named at high. Both orders are checked, as the ledger's other mix-ups are: the receiver
completes first and finds the owner's exchange held, or the owner completes later and finds the receiver held (a late
finding). Only numbers of texts read at ingest count; a print without them (an older producer) is never judged. What
it cannot see: an answer that restates fewer than two numbers, and one whose source was answered long before the
receiver's request (stale pages of a finished request: content and the placeholder check see those). Pure: no I/O, no
clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING

import numpy as np

from detectors.identifiers import is_name
from detectors.mixup_tails import Sketch, file, unfile
from detectors.settings import DetectionSettings
from schemas.exchange import TextFingerprint

if TYPE_CHECKING:
    from detectors.mixup import Delivery

Apart = Callable[["Delivery"], bool] | None
# Held deliveries by identifier: of their prompts, of their outputs; the oldest first under each key.
Holders = Sketch
Ids = frozenset[int]
_NONE: Ids = frozenset()
# Fingerprints the output shares with the owner's prompt that make the two a passage content judges.
_PASSAGE = 2
# How long before the receiver's request the owner can have been answered: numbers are told apart from a third
# tenant's only by who else held them in the window (`IdIndex.only`), and one who writes them later is not held yet;
# the longer the reach back, the more earlier texts can be taken for the case's owner. A cache's copies, told by
# their text, reach further (mixup_copy_before_s, ADR 0034).
HANDED_WITHIN_S = 120.0


def id_keys(tp: TextFingerprint | None) -> Ids | None:
    """The print's identifiers; None when unknown (not read at ingest, or a text with too many)."""
    ids = None if tp is None else getattr(tp, "ids", None)
    return None if ids is None else frozenset(ids)


def _of(d: Delivery, prompt: bool) -> Ids:
    keys = getattr(d, "prompt_ids" if prompt else "out_ids", None)  # a delivery pickled before them has none
    return _NONE if keys is None else keys


class IdIndex:
    """The ledger's deliveries by the identifiers of their prompts and of their outputs: derived from the deliveries
    held (never copied), so bounded by the ledger's own bounds."""

    __slots__ = ("outputs", "prompts")

    def __init__(self, held: Iterable[Delivery] = ()) -> None:
        self.prompts: Holders = {}
        self.outputs: Holders = {}
        for d in held:
            self.enter(d)

    def enter(self, d: Delivery) -> None:
        file(self.prompts, _of(d, True), d)
        file(self.outputs, _of(d, False), d)

    def leave(self, d: Delivery) -> None:
        """Removes `d`, the ledger's oldest delivery and so the oldest under each of its keys."""
        unfile(self.prompts, _of(d, True), d)
        unfile(self.outputs, _of(d, False), d)

    def only(self, x: int, owner: Delivery, receiver: Delivery) -> bool:
        """Whether no delivery held but the owner's tenant's and `receiver` itself holds identifier `x`."""
        for holders in (self.prompts, self.outputs):
            for d in holders.get(x, ()):
                if d is not receiver and d.tenant_id != owner.tenant_id:
                    return False
        return True


def _answers(s: DetectionSettings, receiver: Delivery, owner: Delivery, index: IdIndex) -> int:
    """How many numbers of `owner`'s exchange make `receiver`'s output an answer to `owner`'s prompt (or that answer,
    handed over again); 0 when they do not."""
    own, out = getattr(receiver, "prompt_ids", None), _of(receiver, False)
    if own is None or not out:
        return 0  # its own prompt's numbers unknown: what it quotes of its own cannot be told apart
    theirs = _of(owner, True)
    rare = {x for x in (out & (theirs | _of(owner, False))) - own if index.only(x, owner, receiver)}
    n = _count(rare)
    # At least one of them the owner's prompt introduced: two answers that hold the same numbers and no prompt's are a
    # text the model writes (a documentation's examples), not anybody's case.
    if n < s.mixup_min_identifiers or n <= _count(out & own) or rare.isdisjoint(theirs):
        return 0
    # Numbers inside a passage both texts hold (documentation's examples, a history the receiver was shown before) are
    # that passage's: content judges it, knowing what is public and what is the receiver's own; no evidence here.
    shared = np.intersect1d(receiver.out, owner.prompt, assume_unique=True)
    return 0 if shared.size >= _PASSAGE else n


def _count(ids: AbstractSet[int]) -> int:
    """How many identifiers `ids` makes: its numbers, and its names as one more, only beside a number. Names are words
    a model may write for anyone (a public figure, a place); a person's name with a number of their case is a case."""
    numbers = sum(1 for x in ids if not is_name(x))
    return numbers + int(0 < numbers < len(ids))


def answered_elsewhere(
    s: DetectionSettings,
    current: Delivery,
    index: IdIndex,
    apart: Apart,
    found: list[tuple[Delivery, Delivery]],
) -> list[tuple[Delivery, Delivery, int]]:
    """(leaked, owner, numbers) for each answer to another prompt `current` completes: as the receiver of a held
    delivery's case, or as the owner of a case a held delivery received. `found`: (leaked, owner) pairs the ledger
    concluded already, not repeated."""
    out: list[tuple[Delivery, Delivery, int]] = []
    done = {(id(a), id(b)) for a, b in found}

    before = min(s.mixup_copy_before_s, HANDED_WITHIN_S)

    def answerable(receiver: Delivery, owner: Delivery) -> bool:
        # The owner's request was sent before the receiver was answered, and answered itself after the receiver was
        # sent, or up to HANDED_WITHIN_S before (an answer or a prefix handed over again, as a copy from before).
        # "Before" allows the skew of two clocks: the numbers, not the order, say whose case it is (stop 65).
        other = owner if receiver is current else receiver
        return (
            owner.sent <= receiver.ts + s.mixup_clock_skew_s
            and owner.ts >= receiver.sent - before
            and other.tenant_id != current.tenant_id
            and (apart is None or apart(other))
        )

    def pairs(keys: Ids, holders: tuple[Holders, ...]) -> dict[int, Delivery]:
        return {id(d): d for x in keys for h in holders for d in h.get(x, ())}

    for owner in pairs(_of(current, False), (index.prompts, index.outputs)).values():
        fresh = (id(current), id(owner)) not in done
        if answerable(current, owner) and fresh and (n := _answers(s, current, owner, index)):
            out.append((current, owner, n))
    for receiver in pairs(_of(current, True) | _of(current, False), (index.outputs,)).values():
        fresh = (id(receiver), id(current)) not in done
        if answerable(receiver, current) and fresh and (n := _answers(s, receiver, current, index)):
            out.append((receiver, current, n))
    return out
