"""What a warm domain has learned is common, as fingerprints another deployment can start with.

A new cache domain is cold: it has not yet seen which passages many tenants share (greetings, a public text
several tenants paste, the model's stock phrases), so content alone raises no alert until it is warm, and what it
finds meanwhile is held `overlap_hold_s` (detectors/held.py). Another deployment of the same model, under the same
key, has learned most of that already. `learned_commons` takes it from a warm domain: the fingerprints of the texts
it still indexes that it counts as common now (held by `common_min_tenants` tenants over the long horizon, or the
model's habit by `common_min_sessions` sessions' answers), the same test its own judging applies
(`OverlapDetector._common`). Keyed hashes only, no tenant and no text; the shell writes them into the public corpus
(`crosstalk corpus learn`), which every domain of the new deployment reads from its first event.

What it does not carry: the new deployment's own tenants' shared texts (they are learned there, as on any warm
domain), and a source's text (a leak needs its source in the receiving domain's own index).
"""

from __future__ import annotations

import numpy as np

from detectors.domain import DomainMonitor


def learned_commons(dm: DomainMonitor, ts: float) -> np.ndarray | None:
    """The fingerprints `dm` counts as common as of event time `ts`, sorted and unique; None while it is cold (what a
    cold domain counts as common is too little to judge by, and would make a new deployment trust it)."""
    overlap = dm.overlap
    if not overlap.warm(ts):
        return None
    docs = list(overlap.index._docs.values())
    if not docs:
        return np.zeros(0, dtype=np.uint64)
    keys = np.unique(np.concatenate([np.asarray(d.hashes, dtype=np.uint64) for d in docs]))
    common: np.ndarray = keys[overlap._common(keys, overlap.spread.tenants(keys))]
    return common
