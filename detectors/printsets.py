"""Sets of fingerprints as sorted unique uint64 arrays: the few operations the mix-up rules (detectors/mixup*.py)
are written in."""

from __future__ import annotations

import numpy as np


def sorted_unique(keys: np.ndarray) -> np.ndarray:
    """`keys` (a copy it may sort in place) sorted and unique. A selection holds each value once already, so a sort
    does; the check for neighbours alike keeps wire prints (a producer's, which may repeat) right. np.unique's hash
    pass cost ~5x the sort."""
    keys.sort()
    if keys.size > 1 and (keys[1:] == keys[:-1]).any():
        keys = np.unique(keys)
    return keys


def common(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The values of sorted unique `a` that sorted unique `b` holds."""
    if not a.size or not b.size:
        return a[:0]
    out: np.ndarray = a[held(a, b)]
    return out


def without(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The values of sorted unique `a` that sorted unique `b` does not hold."""
    if not a.size or not b.size:
        return a
    out: np.ndarray = a[~held(a, b)]
    return out


def held(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per value of `a`: whether sorted unique `b` holds it."""
    if not b.size:
        return np.zeros(a.size, dtype=bool)
    at = np.searchsorted(b, a)
    at[at == b.size] = 0
    found: np.ndarray = b[at] == a
    return found
