"""Every per-exchange detector, in the order their signals are listed in an alert's evidence.

A new signal is a module with a detector (detectors/signals/base.py) plus one line here; the shared
checks in tests/detectors/test_detector_contract.py then run over it.
"""

from __future__ import annotations

from detectors.settings import DetectionSettings
from detectors.signals.base import Detector, Registration
from detectors.signals.canary import CanaryDetector
from detectors.signals.mechanism import AccountingDetector, OverlongDetector, PrefillDetector
from detectors.signals.overlap import OverlapDetector


def _canary(settings: DetectionSettings) -> Detector:
    return CanaryDetector()


def _overlap_bound(s: DetectionSettings) -> int:
    return s.index_max_docs + s.index_max_fingerprints + s.max_tainted


EXCHANGE_DETECTORS: tuple[Registration, ...] = (
    Registration("overlong", ("overlong_accepted",), OverlongDetector),
    Registration("accounting", ("token_accounting_mismatch",), AccountingDetector),
    Registration("prefill", ("impossible_prefill",), PrefillDetector),
    Registration("canary", ("canary_leak",), _canary),
    Registration(
        "overlap", ("cross_tenant_contamination", "cross_session_contamination"), OverlapDetector, _overlap_bound
    ),
)
