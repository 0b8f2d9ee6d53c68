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

`SizeNorms` answers another question: does this answer's usage count this prompt? The usage an engine returns
counts the prompt it answered, so an answer delivered to the wrong request (a swap, a misroute, a response cache
keyed wrongly) carries another prompt's count. Each key keeps its last `window` (gateway, engine) counts, of every
size, and a prompt is judged against those of its neighbours in size (within a factor `_NEAR`): the median of their
ratios, if at least `_MIN_NEAR` of them agree (quartile ratio within `accounting_max_spread` octaves).

Why neighbours in size and not one ratio: a chat template, an injected system prompt or tool schemas the gateway does
not count add a fixed overhead c to the engine's count, e = a*g + c, and then the ratio of a short prompt depends on
its length (measured with two real tokenizers and c = 200: a single learned ratio, even per size band of a factor of
4, raised false alarms for a tenant whose prompts cluster at one size; bench/results/stop53-accounting-noise.txt).
Between neighbours within 1.5x in size, any such count moves its ratio by at most 1.5x, and its expected count by at
most c/2 tokens, so with the detector's bounds (2x and `accounting_min_gap_tokens`) no affine count with |c| under
twice the gap raises anything; what is left is the per-request variation of the two tokenizers on the tenant's text.
"""

from __future__ import annotations

import math
from array import array
from collections import OrderedDict

_STEPS = 8  # quantisation: eighths of an octave (a 9 % step; the thresholds are factors of 2 and more)
_OFFSET = 128  # q in [-127, 127] stored as a byte
_NEAR = 1.5  # neighbours in size: gateway counts within this factor of the judged prompt's
_MIN_NEAR = 4  # neighbours needed for an expectation
_MAX_COUNT = 2**32 - 1  # counts are kept as uint32 (a larger one is clamped: far beyond any window)


def quantise(ratio: float) -> int:
    """log2(ratio) in eighths, clamped to what a byte holds (ratios 2**-15.9 .. 2**15.9)."""
    return max(-127, min(127, round(math.log2(ratio) * _STEPS)))


class _Norm:
    """One key's last ratios (a ring of quantised bytes) and their median (in eighths)."""

    __slots__ = ("median", "n", "pos", "ring")

    def __init__(self, window: int) -> None:
        self.ring = bytearray(window)
        self.pos = 0
        self.n = 0
        self.median = 0.0

    def add(self, q: int) -> None:
        ring = self.ring
        ring[self.pos] = q + _OFFSET
        self.pos = (self.pos + 1) % len(ring)
        if self.n < len(ring):
            self.n += 1
        held = sorted(ring[: self.n])  # the ring fills from 0: its first n bytes are the samples
        mid = self.n // 2
        self.median = (held[mid] + held[(self.n - 1) // 2]) / 2 - _OFFSET


class RatioNorms:
    """Learned normal ratios per key, at most `max_keys` of them, each usable after `learn_min` samples."""

    def __init__(self, window: int, max_keys: int, learn_min: int) -> None:
        self.window = window
        self.max_keys = max_keys
        self.learn_min = learn_min
        self._norms: OrderedDict[tuple[str, str], _Norm] = OrderedDict()
        self.evicted = 0

    def normal(self, key: tuple[str, str]) -> float | None:
        """The key's normal engine/gateway ratio, or None while it has fewer than `learn_min` samples."""
        norm = self._norms.get(key)
        if norm is None or norm.n < self.learn_min:
            return None
        return float(2.0 ** (norm.median / _STEPS))

    def learn(self, key: tuple[str, str], ratio: float) -> float | None:
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


class _Sizes:
    """One key's last (gateway, engine) counts, a ring of two uint32 arrays."""

    __slots__ = ("engine", "gateway", "pos")

    def __init__(self) -> None:
        self.gateway = array("I")
        self.engine = array("I")
        self.pos = 0

    def add(self, gateway: int, engine: int, window: int) -> None:
        g, e = min(gateway, _MAX_COUNT), min(engine, _MAX_COUNT)
        if len(self.gateway) < window:
            self.gateway.append(g)
            self.engine.append(e)
        else:
            self.gateway[self.pos] = g
            self.engine[self.pos] = e
            self.pos = (self.pos + 1) % window


class SizeNorms:
    """Per key, the last `window` (gateway, engine) counts; at most `max_keys` keys (least recently seen evicted).

    `low` and `high` bound every kept ratio (engine / gateway) from below and above: a detector's quick test reads
    them. They may be looser than the kept counts (evicted or overwritten ones), never tighter, until `rebound`."""

    def __init__(self, window: int, max_keys: int) -> None:
        self.window = window
        self.max_keys = max_keys
        self._keys: OrderedDict[tuple[str, str], _Sizes] = OrderedDict()
        self.low = math.inf
        self.high = 0.0

    def learn(self, key: tuple[str, str], gateway: int, engine: int) -> None:
        if gateway <= 0:
            return
        keys = self._keys
        sizes = keys.get(key)
        if sizes is None:
            if len(keys) >= self.max_keys:
                keys.popitem(last=False)
            sizes = keys[key] = _Sizes()
        else:
            keys.move_to_end(key)
        sizes.add(gateway, engine, self.window)
        ratio = engine / gateway
        self.low = min(self.low, ratio)
        self.high = max(self.high, ratio)

    def rebound(self) -> None:
        """`low` and `high` exact again, from the counts kept now."""
        ratios = [e / g for s in self._keys.values() for g, e in zip(s.gateway, s.engine, strict=True) if g]
        self.low, self.high = (min(ratios), max(ratios)) if ratios else (math.inf, 0.0)

    def expected(self, key: tuple[str, str], gateway: int, max_spread: float) -> float | None:
        """The engine count the key's neighbours in size make of `gateway` tokens (the median of their ratios times
        it), or None: fewer than `_MIN_NEAR` neighbours, or neighbours that disagree (the ratio of their upper and
        lower quartile ratios beyond `max_spread` octaves)."""
        sizes = self._keys.get(key)
        if sizes is None or len(sizes.gateway) < _MIN_NEAR:
            return None
        lo, hi = gateway / _NEAR, gateway * _NEAR
        near = sorted(e / g for g, e in zip(sizes.gateway, sizes.engine, strict=True) if lo <= g <= hi and g)
        n = len(near)
        if n < _MIN_NEAR or near[n // 4] <= 0 or near[(3 * n) // 4] > near[n // 4] * 2.0**max_spread:
            return None
        return (near[n // 2] + near[(n - 1) // 2]) / 2 * gateway

    def state_size(self) -> int:
        return sum(len(s.gateway) for s in self._keys.values())

    def __len__(self) -> int:
        return len(self._keys)
