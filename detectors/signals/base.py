"""What a per-exchange detector is, and the list of them (the registry).

The river model (https://riverml.xyz): one small estimator interface, fed one item at a time, and one
set of checks run over every estimator. Here the item is an Exchange (in event-time order, time taken
from the exchange, never from a clock) and a detector:

- `observe(ex, domain)` judges it: the signals it raises (usually none);
- `learn(ex, include_output)` updates state once the verdict is known (most detectors keep none);
- `state_size()` says how much it holds, so bounds are measurable; it must stay bounded however
  many exchanges it sees.

Each registered detector is checked by tests/detectors/test_detector_contract.py: bounded state after
many exchanges, no wall-clock use, picklable (detectors live in snapshots), silent on plain traffic.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from detectors.settings import DetectionSettings
from schemas.alert import Signal
from schemas.exchange import Exchange


class DomainFacts(Protocol):
    """What a detector may read of its cache domain's state (CapacityTracker provides it)."""

    @property
    def prefill_capacity(self) -> int | None: ...


class Detector(Protocol):
    def observe(self, ex: Exchange, domain: DomainFacts) -> list[Signal]: ...

    def learn(self, ex: Exchange, include_output: bool = True) -> None: ...

    def state_size(self) -> int: ...


class Stateless:
    """For detectors that judge each exchange on its own figures: nothing to learn, nothing held."""

    def learn(self, ex: Exchange, include_output: bool = True) -> None:
        return None

    def state_size(self) -> int:
        return 0


@dataclass(frozen=True)
class Registration:
    """One detector: its name in a domain's state, the signals it may raise, how to make it, and the most
    state it may hold."""

    name: str
    signals: tuple[str, ...]
    make: Callable[[DetectionSettings], Detector]
    max_state: Callable[[DetectionSettings], int] = lambda _: 0
