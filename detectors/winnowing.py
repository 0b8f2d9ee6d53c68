"""The two numeric steps of winnowing, on arrays of 64-bit unit hashes (the numpy path; the native
extension does the same in C, property-tested equal): k-gram hashes, and the window minima selected.

Pure functions of their arrays; `detectors.fingerprint.Fingerprinter` makes the unit hashes and calls them.
"""

from __future__ import annotations

import numpy as np

# Odd multiplier for the polynomial k-gram combination; arithmetic wraps modulo 2**64 on purpose.
_BASE = np.uint64(0x9E3779B97F4A7C15)
_MIX = np.uint64(0xBF58476D1CE4E5B9)
_S31 = np.uint64(31)
_S29 = np.uint64(29)


def kgram_hashes(wh: np.ndarray, k: int) -> np.ndarray:
    """One hash per k consecutive unit hashes (len(wh) - k + 1 of them; empty when fewer than k)."""
    n = wh.shape[0] - k + 1
    if n <= 0:
        return np.empty(0, dtype=np.uint64)
    # sum_j wh[i + j] * BASE**(k - 1 - j) (mod 2**64: array arithmetic wraps silently), by Horner's
    # rule, in place.
    acc = wh[0:n].copy()
    for j in range(1, k):
        acc *= _BASE
        acc += wh[j : j + n]
    # Final avalanche so that the selection (a minimum) does not favour particular words.
    tmp = acc >> _S31
    acc ^= tmp
    acc *= _MIX
    np.right_shift(acc, _S29, out=tmp)
    acc ^= tmp
    return acc


def window_minima(kg: np.ndarray, w: int) -> list[int]:
    """Winnowing: the minimum of every window of w consecutive k-grams, each value once, in text order.

    Text order matters downstream: a leaked passage shows up as a run of consecutive matches.
    Only values are reported, so which of equal minima a window selects (the rightmost, in the
    paper) cannot change the result; the selected positions are non-decreasing, hence the order of
    first selection is the order of first appearance among the window minima.
    """
    n = kg.shape[0]
    if n == 0:
        return []
    if n <= w:
        return [int(kg.min())]
    # Sliding-window minimum by doubling: mins[i] = min(kg[i : i + span]) for span = 2, 4, 8, ...,
    # then two overlapping windows of the largest span cover w: log2(w) + 1 passes instead of w - 1.
    mins = kg
    span = 1
    while span * 2 <= w:
        mins = np.minimum(mins[:-span], mins[span:])
        span *= 2
    m = n - w + 1
    if span < w:
        mins = np.minimum(mins[:m], mins[w - span : w - span + m])
    # Consecutive windows mostly share their minimum: drop repeats in numpy, the rest in a dict.
    change = np.empty(m, dtype=bool)
    change[0] = True
    np.not_equal(mins[1:], mins[:-1], out=change[1:])
    return list(dict.fromkeys(mins[change].tolist()))


def minima_positions(kg: np.ndarray, w: int, selected: list[int]) -> list[int]:
    """The k-gram position of each value of `window_minima(kg, w)` (`selected`) at its first selection: the
    rightmost position of the minimum in the first window that selects it (as the native extension reports)."""
    n = kg.shape[0]
    if n == 0:
        return []
    if n <= w:
        return [int(np.flatnonzero(kg == selected[0])[-1])]
    values = kg.tolist()
    out: list[int] = []
    start = 0  # first window that may select the next value (selection is in order of first selection)
    for v in selected:
        i = start
        while True:
            window = values[i : i + w]
            if min(window) == v:
                break
            i += 1
        out.append(i + w - 1 - window[::-1].index(v))
        start = i
    return out
