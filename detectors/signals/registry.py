"""Every per-exchange detector, in the order their signals are listed in an alert's evidence.

A new signal is a module with a detector (detectors/signals/base.py) plus one registration here, which
also says what its signals conclude (`Raises`: the existing AlertKind, the precedence, mechanism or not).
Nothing else changes: domains run every registered detector, and the verdict takes kinds, precedence and
the mechanism signals from here. The shared checks in tests/detectors/test_detector_contract.py then
run over it.

Precedence, strongest first (unchanged since the kinds' order in schemas/alert.py decided it): a
canary proves a leak; content names the origin (another tenant before another session of the same
tenant); then the mechanism signals, from the most to the least direct, and last the one added since (a tool call
its prompt never declared, ADR 0019).
"""

from __future__ import annotations

from detectors.settings import DetectionSettings
from detectors.signals import cacheread, toolcall
from detectors.signals import mechanism as mech
from detectors.signals.base import Detector, Raises, Registration
from detectors.signals.cacheread import CacheReadDetector
from detectors.signals.canary import CanaryDetector
from detectors.signals.mechanism import AccountingDetector, OverlongDetector, PrefillDetector
from detectors.signals.overlap import OverlapDetector
from detectors.signals.toolcall import ToolCallDetector


def _canary(settings: DetectionSettings) -> Detector:
    return CanaryDetector()


def _accounting_bound(s: DetectionSettings) -> int:
    return s.accounting_max_keys * s.accounting_window


def _overlap_bound(s: DetectionSettings) -> int:
    return s.index_max_docs + s.index_max_fingerprints + s.max_tainted


EXCHANGE_DETECTORS: tuple[Registration, ...] = (
    Registration(
        "overlong",
        (
            Raises(
                "overlong_accepted",
                kind="overlong_accepted",
                precedence=30,
                mechanism=True,
                summary=mech.overlong_summary,
                report=mech.overlong_report,
            ),
        ),
        OverlongDetector,
    ),
    Registration(
        "accounting",
        (
            Raises(
                "token_accounting_mismatch",
                kind="token_accounting_mismatch",
                precedence=20,
                mechanism=True,
                summary=mech.accounting_summary,
                report=mech.accounting_report,
            ),
        ),
        AccountingDetector,
        _accounting_bound,
    ),
    Registration(
        "prefill",
        (
            Raises(
                "impossible_prefill",
                kind="impossible_prefill",
                precedence=10,
                mechanism=True,
                summary=mech.prefill_summary,
                report=mech.prefill_report,
            ),
        ),
        PrefillDetector,
    ),
    # A function call its prompt never declared: an answer decoded for another request (docs/adr/0019).
    Registration(
        "toolcall",
        (
            Raises(
                "undeclared_tool_call",
                kind="undeclared_tool_call",
                precedence=5,
                mechanism=True,
                summary=toolcall.summary,
                report=toolcall.report,
            ),
        ),
        ToolCallDetector,
        toolcall.max_state,
        content_only=True,
    ),
    # Evidence only (no kind, info): the engine reused a prefix its tenant never sent in the domain.
    Registration(
        "cache_read",
        (Raises("foreign_cache_read", kind=None, precedence=0, summary=cacheread.summary, report=cacheread.report),),
        CacheReadDetector,
        lambda s: s.cache_read_max_tenants,
    ),
    Registration("canary", (Raises("canary_leak", kind="canary_leak", precedence=60),), _canary, content_only=True),
    Registration(
        "overlap",
        (
            Raises("cross_tenant_contamination", kind="cross_tenant_contamination", precedence=50),
            Raises("cross_session_contamination", kind="cross_session_contamination", precedence=40),
        ),
        OverlapDetector,
        _overlap_bound,
        content_only=True,
    ),
)


# Kinds about a domain's configuration, not about a response (the domain's own findings, not a registered signal):
# their incidents group apart (detectors/incidents.py) and no tenant is "affected" by them (streams/report/model.py).
CONFIGURATION_KINDS: frozenset[str] = frozenset({"capacity_gap"})


def category_of(kind: str) -> str:
    """The incident category of an alert kind: configuration or exposure."""
    return "configuration" if kind in CONFIGURATION_KINDS else "exposure"


def raises_of(signal: str) -> Raises | None:
    """What a signal concludes and its words, if it is registered (context signals such as cache_pressure are not)."""
    return raises_by_signal().get(signal)


def registered() -> tuple[Registration, ...]:
    """The registrations as they are now: read at call time, so a test can register a detector in-process."""
    return EXCHANGE_DETECTORS


class _Tables:
    """What the verdict reads of the registry, derived once per registry (it is read per judged response)."""

    def __init__(self, regs: tuple[Registration, ...]) -> None:
        self.regs = regs
        self.by_signal: dict[str, Raises] = {}
        kind_at: dict[int, str] = {}
        for r in (r for reg in regs for r in reg.raises):
            if r.signal in self.by_signal:
                raise ValueError(f"signal {r.signal!r} registered twice")
            if r.kind is not None and kind_at.setdefault(r.precedence, r.kind) != r.kind:
                raise ValueError(f"kinds {kind_at[r.precedence]!r} and {r.kind!r} share precedence {r.precedence}")
            self.by_signal[r.signal] = r
        self.mechanism = frozenset(name for name, r in self.by_signal.items() if r.mechanism)


_tables = _Tables(EXCHANGE_DETECTORS)


def _current() -> _Tables:
    global _tables
    if _tables.regs is not EXCHANGE_DETECTORS:
        _tables = _Tables(EXCHANGE_DETECTORS)
    return _tables


def raises_by_signal() -> dict[str, Raises]:
    """Signal name -> what it concludes, for every registered signal.

    A signal registered twice, or two kinds sharing a precedence (the kind would then depend on evidence
    order), is refused: at import for the registry above, at first use for one changed in-process."""
    return _current().by_signal


def mechanism_signals() -> frozenset[str]:
    """The signals of the placeholder mechanism (Raises.mechanism)."""
    return _current().mechanism
