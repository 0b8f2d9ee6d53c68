"""A domain's per-exchange detector calls, bound once (`DomainMonitor` runs them for every exchange).

Kept apart from the domain's state and flow (detectors/domain.py): a plan is derived from the registered detectors
and never pickled (a restored domain builds its own on first use).
"""

from __future__ import annotations

from collections.abc import Callable

from detectors.signals import registry
from detectors.signals.base import Detector, Stateless
from detectors.signals.capacity import CapacityTracker
from detectors.signals.mechanism import AccountingDetector, MechanismScreen, OverlongDetector, PrefillDetector
from schemas.alert import Signal
from schemas.events import Request, Response
from schemas.exchange import Exchange

__all__ = ["Plan", "Screen"]

_NO_LEARN: object = Stateless.learn
# The mechanism detectors a plan runs as one MechanismScreen when they lead the registry, as registered.
_SCREENED: list[tuple[str, type]] = [
    ("overlong", OverlongDetector),
    ("accounting", AccountingDetector),
    ("prefill", PrefillDetector),
]
Screen = Callable[[Exchange, Request | None, Response | None, CapacityTracker], list[Signal]]


class Plan:
    """The per-exchange calls of one domain's detectors, bound once (the domain runs them per exchange).

    Detectors that keep no state (Stateless.learn) are left out of `learners`: their learn does nothing.
    The `bare_` calls are those for an exchange without content (no text fingerprints, no canary hits):
    the detectors registered `content_only` are left out, as they say nothing and learn nothing there.
    Keyed by the identity of the domain's `detectors` dict, which is built from the registry and not
    changed in place; a new dict (restore, a test) gets a new plan.

    `screen`: when the three mechanism detectors come first, as registered, one call observes for all three
    (MechanismScreen: same signals, same order) and `observers` holds the others; otherwise None."""

    __slots__ = ("bare_learners", "bare_observers", "detectors", "learners", "observers", "screen")

    def __init__(self, detectors: dict[str, Detector]) -> None:
        self.detectors = detectors
        # A detector no longer registered (restored from an older snapshot) is taken to read everything.
        content_only = {reg.name for reg in registry.registered() if reg.content_only}
        learning = [(name, d) for name, d in detectors.items() if type(d).learn is not _NO_LEARN]
        self.learners = tuple(d.learn for _, d in learning)
        self.bare_learners = tuple(d.learn for name, d in learning if name not in content_only)
        lead = list(detectors.items())[: len(_SCREENED)]
        self.screen: Screen | None = None
        observed = detectors
        if [(name, type(d)) for name, d in lead] == _SCREENED:
            overlong, accounting, prefill = (d for _, d in lead)
            assert isinstance(overlong, OverlongDetector) and isinstance(accounting, AccountingDetector)
            assert isinstance(prefill, PrefillDetector)
            self.screen = MechanismScreen(overlong, accounting, prefill).observe
            observed = {name: d for name, d in detectors.items() if name not in dict(_SCREENED)}
        self.observers = tuple(d.observe for d in observed.values())
        self.bare_observers = tuple(d.observe for name, d in observed.items() if name not in content_only)
