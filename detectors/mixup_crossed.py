"""The other direction of a proven mix-up: the owner got the receiver's text too (ADR 0030).

A finding of the mix-up ledger says that one delivery (the receiver) got another's answer, or part of it: a copy,
the very same answer, a misroute, the owner's numbers. Two streams crossed at the gateway hand text both ways, so the
owner's output can hold the receiver's too. Told alone, that other direction is weak: the text crossing back is often
short, or common (a licence the receiver had pasted, a system prompt's phrase), which no finding of its own may rest
on. Told after the first, it needs only to be the receiver's: the owner's output holds at least `_WEAK` fingerprints of
the receiver's prompt, stock and public ones counted (uncommon ones only where the two outputs are one answer), that
the owner's own prompt does not hold, and the two were in flight together (text can only cross between two requests
open at once). A copy delivered from before the receiver was sent is never asked: its owner's answer existed before
the receiver's prompt did.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from detectors.printsets import common, without

if TYPE_CHECKING:
    from detectors.mixup import Delivery, Finding, Innocent

_WEAK = 2  # fingerprints of the receiver's prompt the owner's output must hold beyond its own prompt
# The findings whose owner can have been handed the receiver's text in the same crossing (a swap already names both).
_ONE_WAY = frozenset({"copy", "identical", "misroute", "same_response", "identifiers"})
ONE_ANSWER = frozenset({"copy", "identical", "same_response", "usage"})  # the two outputs are one answer


def crossed_back(found: Iterable[Finding], innocent: Innocent) -> list[tuple[Delivery, Delivery, int]]:
    """(owner, receiver, fingerprints) for each finding whose owner's output holds the receiver's prompt text. Where
    the two outputs are one answer (a copy, the very same answer, one id twice) common text in it is what the owner's
    model wrote from what it knows, for both: only uncommon text of the receiver's prompt crosses back there."""
    found = list(found)
    told = {(id(f.leaked), id(f.owner)) for f in found}
    out = []
    for f in found:
        receiver, owner = f.leaked, f.owner
        if f.mode not in _ONE_WAY or (id(owner), id(receiver)) in told or owner.tenant_id == receiver.tenant_id:
            continue
        if not (owner.sent <= receiver.ts and receiver.sent <= owner.ts):
            continue
        back = without(common(owner.out, receiver.prompt), owner.prompt)
        n = int((~innocent(back)).sum()) if f.mode in ONE_ANSWER and back.size else back.size
        if n >= _WEAK:
            told.add((id(owner), id(receiver)))
            out.append((owner, receiver, int(n)))
    return out
