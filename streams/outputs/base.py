"""The base class of every event output (httpx-style: an explicit base, one file per implementation)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from schemas.events import Event

# A produced event: a wire model, or its JSON object (the prober and the LiteLLM callback build dicts).
Produced = Event | Mapping[str, Any]


class Refused(NamedTuple):
    """An event an output did not take (an output that detects in-process refuses what its core refuses)."""

    event: Event
    reason: str
    detail: str


class Letter(NamedTuple):
    """A record of input that produced no event (a span that could not be mapped): where it came from (`source`; and
    `position`, the topic, partition and offset it was read at), why, and the record itself (never the input's
    text: a span may carry message text)."""

    source: str
    record: Mapping[str, Any]
    reason: str
    detail: str
    position: tuple[str, int, int] | None = None


class Output:
    """Where produced events go.

    `send` takes a batch in order and returns what it refused; an output that leaves judging to later (a file, the
    Kafka topic) refuses nothing. `dead_letter` keeps a `Letter` where this output keeps such records (a rejects
    file, the dead-letter topic, the runner's rejects). `flush` makes what was sent visible; `close` flushes and lets
    go.
    """

    def send(self, events: Sequence[Produced]) -> list[Refused]:
        raise NotImplementedError

    def dead_letter(self, letter: Letter) -> None:
        return None

    def flush(self) -> None:
        return None

    def tick(self, now: float) -> None:
        """A live producer's wall clock (UNIX s), about once a second: an output that judges (the embedded runner)
        lets a cold domain's held findings come out by it, with no further input. The others have nothing to do."""
        return None

    def state_size(self) -> dict[str, int]:
        """What a judging output holds now (`held_findings`, ...), for the producer's /counters; read on its tick."""
        return {}

    def close(self) -> None:
        self.flush()
