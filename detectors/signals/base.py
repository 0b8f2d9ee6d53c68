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
from typing import Any, Protocol, get_args

from detectors.settings import DetectionSettings
from schemas.alert import AlertKind, Signal
from schemas.exchange import Exchange


class DomainFacts(Protocol):
    """What a detector may read of its cache domain's state (CapacityTracker provides it)."""

    @property
    def prefill_capacity(self) -> int | None: ...

    @property
    def pool_tokens(self) -> int | None: ...

    def allocated_since(self, ts: float) -> float: ...


class Detector(Protocol):
    def observe(self, ex: Exchange, domain: DomainFacts) -> list[Signal]: ...

    def learn(self, ex: Exchange, include_output: bool = True) -> None: ...

    def state_size(self) -> int: ...


class Piece(Protocol):
    """A part of the core's state that a snapshot may copy as its changes since the last copy: what a detector
    declares (`HasPieces`), and the front's deduper and waiting halves (`Front.pieces`).

    `changes()` is None when only a whole copy will do (never marked, or a rotation dropped the trail);
    `mark()` says the piece was copied; `replay(changes)` on a copy taken at the mark brings it to the live
    piece. `pack(changes)` is the changes as compact plain data (numbers, strings, arrays), falsy when nothing
    changed, and `unpack` takes it back, also from the packs of earlier releases: a stored snapshot outlives the
    code that wrote it. A piece is plain data (no settings, no corpus); where it is stored is the shell's."""

    def changes(self) -> Any: ...

    def mark(self) -> None: ...

    def replay(self, changes: Any) -> None: ...

    def pack(self, changes: Any) -> Any: ...

    def unpack(self, packed: Any) -> Any: ...


class HasPieces(Protocol):
    """A detector whose state holds large pieces that grow with traffic, not with what changed: it names
    them (`pieces()`, name -> live object, names unique within a domain) so that a snapshot can copy each
    one on its own and as its changes. A detector without the method is copied whole with its domain."""

    def pieces(self) -> dict[str, Piece]: ...


class Stateless:
    """For detectors that judge each exchange on its own figures: nothing to learn, nothing held."""

    def learn(self, ex: Exchange, include_output: bool = True) -> None:
        return None

    def state_size(self) -> int:
        return 0


Words = Callable[[dict[str, Any]], str]  # a signal's figures -> words about them


@dataclass(frozen=True)
class Raises:
    """A signal a detector may raise, and the alert it makes when it is a response's strongest signal.

    - `kind`: the alert's kind, one of the wire contract's AlertKind values (checked here). Consumers
      route and group on kinds, so a new signal says which existing kind its alerts carry; a new kind is a
      deliberate change of the contract (docs/adr/0002-detection-core.md, section 9).
    - `precedence`: when one response raises several signals, the alert takes the kind of the highest.
    - `mechanism`: a sign of the placeholder mechanism itself; next to one, any content overlap counts as
      evidence (verdict.corroborate).
    - `kind=None`: evidence only. The signal is listed in the alert another signal raises for the response and
      decides neither its kind nor, at severity info, whether there is one (`foreign_cache_read`).
    - `summary`, `report`: its words, from its figures alone. `summary`: a clause of the alert's one-line summary
      (detectors/domain.py); `report`: one sentence of the incident report (streams/report/words.py). Both read them
      from here, so a new signal's words are part of its registration (detectors/signals/words.py has the formats).
    """

    signal: str
    kind: AlertKind | None
    precedence: int
    mechanism: bool = False
    summary: Words | None = None
    report: Words | None = None

    def __post_init__(self) -> None:
        if self.kind is not None and self.kind not in get_args(AlertKind):
            raise ValueError(
                f"signal {self.signal!r} raises kind {self.kind!r}, which is not an AlertKind (schemas/alert.py)"
            )


@dataclass(frozen=True)
class Registration:
    """One detector: its name in a domain's state, the signals it may raise, how to make it, the most
    state it may hold, and whether it reads only content (`content_only`)."""

    name: str
    raises: tuple[Raises, ...]
    make: Callable[[DetectionSettings], Detector]
    max_state: Callable[[DetectionSettings], int] = lambda _: 0
    # True for a detector that reads only an exchange's content: its text fingerprints (prompt_print,
    # output_print) and canary hits. On an exchange with none of them its observe returns no signal and
    # its learn changes nothing, so domains skip both calls there (most traffic carries no text). The
    # contract test checks the promise (tests/detectors/test_detector_contract.py).
    content_only: bool = False

    @property
    def signals(self) -> tuple[str, ...]:
        return tuple(r.signal for r in self.raises)
