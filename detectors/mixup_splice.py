"""Two streams spliced: a piece of one answer delivered inside another tenant's answer, told by its usage.

A streaming proxy that reuses a chunk buffer across connections, or an output processor that routes a token burst to
the wrong request, hands a stream a run of another stream's tokens: a sentence or two of another tenant's answer,
inside an answer that is otherwise the receiver's own. Content sees it only when the piece quotes the other prompt,
and an answer restates its prompt's names and numbers in sentences of its own. The ledger sees the pair: two answers
delivered to two tenants at the same time (each while the other was in flight) that share uncommon text neither
prompt holds. Two models do not write the same uncommon sentence for two prompts in the same seconds; stock phrases
are common over the long horizon and no witness.

Which one got the other's text? The shared sentences sit in both outputs. But the splice happens after the engine
counted its tokens: the engine's `usage.output_tokens` is each request's own generation, and the receiver's delivered
text is longer than its usage explains. Each tenant's answers have a ratio of text units to output tokens of their
own (its language, its tokenizer), taken here as the median over the tenant's deliveries the ledger holds. A side is a
receiver when its text exceeds what its usage and that ratio explain by half the shared passage or more; both sides
are when both do (two streams crossed both ways). Without a usage, or without `_NORM_MIN` deliveries of a tenant to
learn its ratio from, nothing is concluded. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import numpy as np

from detectors.printsets import common as _common
from detectors.printsets import held as _held
from detectors.settings import DetectionSettings

if TYPE_CHECKING:
    from detectors.mixup import Delivery

Innocent = Callable[[np.ndarray], np.ndarray]
# tenant -> (its median text units per output token, their median absolute deviation), None when unknown
Norm = Callable[[str], tuple[float, float] | None]
# Deliveries of a tenant with a usage the ratio is learned from: fewer say nothing about its spread.
_NORM_MIN = 5
# A receiver's text exceeds its usage by at least this share of the shared passage (the rest is the ratio's noise),
# and its ratio the tenant's median by this many of the tenant's deviations: a tenant that answers in several languages
# or mixes code and prose has ratios too spread to tell a spliced run from its own variety.
_EXCESS = 0.5
_SPREAD = 3.0


def spliced(
    s: DetectionSettings, cur: Delivery, other: Delivery, innocent: Innocent, norm: Norm
) -> tuple[list[Delivery], int] | None:
    """(the receivers of the pair's shared text, the uncommon fingerprints witnessing it), or None: `cur` and `other`
    (another tenant's, delivered while `cur` was in flight) were streamed at the same time and share uncommon text
    that neither prompt holds, and one or both delivered more text than their usage explains."""
    if cur.ts < other.sent or not _used(cur) or not _used(other):
        return None  # not streamed at the same time, or no usage to tell the receiver by
    shared = _common(cur.out, other.out)
    if shared.size < s.mixup_min_matches:
        return None
    shared = shared[~(_held(shared, cur.prompt) | _held(shared, other.prompt))]
    if shared.size < s.mixup_min_matches:
        return None
    shared = shared[~innocent(shared)]
    if shared.size < s.mixup_min_matches:
        return None
    receivers = [d for d in (other, cur) if _excess(d, shared.size, norm)]
    return (receivers, int(shared.size)) if receivers else None


def norm_of(recent: Iterable[Delivery]) -> Norm:
    """The median text units per output token of each tenant's deliveries in `recent` (with a usage), and their
    median absolute deviation, computed once per tenant asked."""
    memo: dict[str, tuple[float, float] | None] = {}

    def norm(tenant: str) -> tuple[float, float] | None:
        if tenant not in memo:
            ratios = np.array([d.units / d.used for d in recent if d.tenant_id == tenant and _used(d)])
            if ratios.size < _NORM_MIN:
                memo[tenant] = None
            else:
                median = float(np.median(ratios))
                memo[tenant] = (median, float(np.median(np.abs(ratios - median))))
        return memo[tenant]

    return norm


def _used(d: Delivery) -> bool:
    return getattr(d, "used", 0) > 0 and getattr(d, "units", 0) > 0  # one pickled before them has neither


def _excess(d: Delivery, shared: int, norm: Norm) -> bool:
    """Whether `d`'s text exceeds what its usage explains by `_EXCESS` of the shared passage's units (estimated from
    the share of `d`'s fingerprints it holds)."""
    known = norm(d.tenant_id)
    if known is None or not d.out.size:
        return False
    ratio, spread = known
    passage = d.units * shared / d.out.size
    return bool(d.units - ratio * d.used >= _EXCESS * passage and d.units / d.used - ratio > _SPREAD * spread)
