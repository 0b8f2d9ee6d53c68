"""The join and the mechanism detectors keep plain copies of the settings they read per exchange; snapshots
still hold the settings alone, in both directions (a snapshot from before the copies restores with them)."""

from __future__ import annotations

import pickle

from detectors.canaries import CanaryRegistry
from detectors.join import Joiner
from detectors.monitor import make_fingerprinter
from detectors.settings import DetectionSettings
from detectors.signals.mechanism import AccountingDetector, OverlongDetector, PrefillDetector

S = DetectionSettings(request_wait_s=12.0, max_pending_joins=7, prefill_min_tokens=99, accounting_min_ratio=0.25)


def test_a_joiner_pickles_its_settings_only_and_restores_the_copies() -> None:
    j = Joiner(S, CanaryRegistry(make_fingerprinter(S), 10))
    state = j.__getstate__()
    assert "settings" in state and not {"_settings", "_request_wait_s", "_max_pending"} & set(state)
    old = Joiner.__new__(Joiner)
    old.__setstate__(state)  # what a snapshot from before the copies holds: the same keys
    assert (old._request_wait_s, old._max_pending, old.settings) == (12.0, 7, S)
    assert list(old.__getstate__()) == list(state)  # and in the same order
    other = DetectionSettings(request_wait_s=3.0)
    old.settings = other
    assert old._request_wait_s == 3.0


def test_mechanism_detectors_pickle_their_settings_only() -> None:
    for cls in (OverlongDetector, AccountingDetector, PrefillDetector):
        det = cls(S)
        state = det.__getstate__()
        # The accounting detector also holds the ratios and counts it learned (none yet); the others their settings.
        learned = ["norms", "sizes"] if cls is AccountingDetector else []
        assert state.pop("s") is S and list(state) == learned
        copy = pickle.loads(pickle.dumps(det))
        assert (copy.s, copy._prefill_min_tokens, copy._min_ratio) == (S, 99, 0.25)
        plain = cls.__new__(cls)
        plain.__setstate__({"s": S})  # a detector pickled as a plain {"s": settings} object
        assert plain._min_ratio == 0.25
