"""The normal engine/gateway token ratio, learned per (model, tenant) within one cache domain.

A gateway that counts prompt tokens with another tokenizer than the engine (LiteLLM's tiktoken in front of
a GLM or Llama engine) reports a steady ratio far from 1: 3x through a real LiteLLM proxy, so a fixed
"engine below half the gateway's count" rule raised a high alert on every normal call. The ratio is a
property of the two tokenizers and of the text's language, so it is learned per model and per tenant (a
tenant writing Japanese has its own), and a call is judged against its own key's norm.

Each key keeps the last `window` ratios, quantised to eighths of an octave (one byte each), and their
median: robust to the occasional odd call, and a lasting change of the ratio (a new gateway tokenizer)
becomes the norm once it is the majority of the window. Keys are bounded (least recently seen evicted).
Ratios below the detector's floor (the placeholder's 1 token for 800k) are never learned, so the obvious
mechanism can never become normal.

A key also keeps its spread (the interquartile range of its window). The usage an engine returns counts the prompt it
answered, so where a key's counts have agreed closely, an answer whose count departs by a factor of 2 either way
counted another prompt: a response delivered to the wrong request carries its usage with it. A key whose counts
spread (images counted by estimate, a template's fixed overhead on prompts of every size) is never judged that way.
Prompts under the placeholder check's size are learned apart, in bands of a factor of 4 (`band`), because a chat
template's fixed overhead makes the ratio of a short prompt depend on its length.
"""

from __future__ import annotations

import math
from collections import OrderedDict

_STEPS = 8  # quantisation: eighths of an octave (a 9 % step; the thresholds are factors of 2 and more)
_OFFSET = 128  # q in [-127, 127] stored as a byte
_LOOSE = 1 << 16  # the spread of a norm restored from before spreads were kept
# (model, tenant) for prompts the placeholder check judges; (model, tenant, band) for shorter ones (`band`).
Key = tuple[str, ...]


def band(tokens: int, large: int) -> str | None:
    """The size band of a prompt under `large` tokens, by factors of 4 below it; None for a large one."""
    if tokens >= large:
        return None
    below = 0
    while tokens < large and below < 4:
        large //= 4
        below += 1
    return f"/{below}"


def quantise(ratio: float) -> int:
    """log2(ratio) in eighths, clamped to what a byte holds (ratios 2**-15.9 .. 2**15.9)."""
    return max(-127, min(127, round(math.log2(ratio) * _STEPS)))


class _Norm:
    """One key's last ratios (a ring of quantised bytes) and their median (in eighths)."""

    __slots__ = ("median", "n", "pos", "ring", "spread")

    def __init__(self, window: int) -> None:
        self.ring = bytearray(window)
        self.pos = 0
        self.n = 0
        self.median = 0.0
        self.spread = 0  # interquartile range, in eighths

    def add(self, q: int) -> None:
        ring = self.ring
        ring[self.pos] = q + _OFFSET
        self.pos = (self.pos + 1) % len(ring)
        if self.n < len(ring):
            self.n += 1
        held = sorted(ring[: self.n])  # the ring fills from 0: its first n bytes are the samples
        mid = self.n // 2
        self.median = (held[mid] + held[(self.n - 1) // 2]) / 2 - _OFFSET
        self.spread = held[(3 * self.n) // 4] - held[self.n // 4] if self.n > 1 else 0


class RatioNorms:
    """Learned normal ratios per key, at most `max_keys` of them, each usable after `learn_min` samples."""

    def __init__(self, window: int, max_keys: int, learn_min: int) -> None:
        self.window = window
        self.max_keys = max_keys
        self.learn_min = learn_min
        self._norms: OrderedDict[Key, _Norm] = OrderedDict()
        self.evicted = 0

    def normal(self, key: Key) -> float | None:
        """The key's normal engine/gateway ratio, or None while it has fewer than `learn_min` samples."""
        norm = self._norms.get(key)
        if norm is None or norm.n < self.learn_min:
            return None
        return float(2.0 ** (norm.median / _STEPS))

    def tight(self, key: Key, max_spread: float) -> float | None:
        """The key's normal ratio if its window's interquartile range is at most `max_spread` octaves, else None.
        A norm restored from before spreads were kept has none: it is not tight until it learns again."""
        norm = self._norms.get(key)
        if norm is None or norm.n < self.learn_min or getattr(norm, "spread", _LOOSE) > max_spread * _STEPS:
            return None
        return float(2.0 ** (norm.median / _STEPS))

    def tight_normals(self, max_spread: float) -> list[float]:
        """Every tight normal ratio (to bound the detector's quick test from above)."""
        held = (n for n in self._norms.values() if n.n >= self.learn_min)
        return [2.0 ** (n.median / _STEPS) for n in held if getattr(n, "spread", _LOOSE) <= max_spread * _STEPS]

    def learn(self, key: Key, ratio: float) -> float | None:
        """Add one ratio; the key's normal ratio afterwards (None while it is still learning)."""
        norms = self._norms
        norm = norms.get(key)
        if norm is None:
            if len(norms) >= self.max_keys:
                norms.popitem(last=False)
                self.evicted += 1
            norm = norms[key] = _Norm(self.window)
        else:
            norms.move_to_end(key)
        norm.add(quantise(ratio))
        return None if norm.n < self.learn_min else float(2.0 ** (norm.median / _STEPS))

    def normals(self) -> list[float]:
        """Every usable normal ratio (to bound the quick test of the detector)."""
        return [2.0 ** (n.median / _STEPS) for n in self._norms.values() if n.n >= self.learn_min]

    def state_size(self) -> int:
        return sum(n.n for n in self._norms.values())

    def __len__(self) -> int:
        return len(self._norms)
