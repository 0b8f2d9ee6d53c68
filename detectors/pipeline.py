"""The pipeline, declared once: three stages, the state each keeps, and the topologies as cuts of them.

    stage   class (module)                what it does                                         its state (pieces)
    ingest  Ingest (detectors/ingest.py)  text -> prints + marker keys, markers -> plants      none
    join    Front  (detectors/front.py)   admission (checks, dedup), pairing, canaries         dedup, waiting halves,
                                                                                                markers
    judge   Back   (detectors/back.py)    routing by cache domain, domain signals, verdict,    each domain, and the
                                          time, resolve, expire                                pieces it declares;
                                                                                               the fleet record

`Monitor` (detectors/monitor.py) chains the three in one process, with event time. A topology is a cut of that chain
(`TOPOLOGIES`): the embedded runner and the Kafka direct topology run it whole, per process or per input partition;
the staged topology puts Kafka between the stages, each on its own partitions. A runner builds a stage only through the
functions here, so no runner composes the core again, and none knows more of the core than this module exports: the
Kafka shell imports the core through it alone (tests/detectors/test_pipeline.py holds both).

The judge stage's fleet record (detectors/fleet.py) learns every domain's exchanges, judged by this table or not, a
delay after them: in one process it hears them all; a replay job hears the other jobs' from the input every job reads
(`DomainTable.hear`); a Kafka partition hears the others' through the fleet topic (streams/kafka/fleet.py,
`FLEET_HEARS`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from detectors.back import Back, DomainTable, count_alerts, new_holds, route_exchange
from detectors.canaries import CanaryPolicy, CanaryRegistry
from detectors.dedup import Deduper
from detectors.domain import DomainMonitor
from detectors.fingerprint import Fingerprinter, positions_of, sentences_of
from detectors.fleet import Digest
from detectors.front import Front, front_pieces, in_process, weak_canaries
from detectors.ingest import Ingest, Plant, Printed
from detectors.join import Joiner
from detectors.monitor import Monitor, Observed, make_fingerprinter
from detectors.ordering import FUTURE_TS, EventClock
from detectors.public import PublicSet
from detectors.reorder import EventTimeBuffer, OrderKey, order_key
from detectors.session_prints import SessionPrints, session_cache
from detectors.settings import DetectionSettings
from detectors.waiting import Waiting, upgrade


@dataclass(frozen=True)
class Stage:
    name: str
    kind: type
    does: str


STAGES: tuple[Stage, ...] = (
    Stage("ingest", Ingest, "text -> prints and marker keys; markers -> plants; the text dropped"),
    Stage("join", Front, "admission (checks, dedup), pairing by request id, canaries -> exchanges"),
    Stage("judge", Back, "routing by cache domain, domain signals, verdict, time, resolve, expire -> alerts"),
)

# Each topology as the runs of stages that share a process (or a partition's state): Kafka between the runs.
TOPOLOGIES: dict[str, tuple[tuple[str, ...], ...]] = {
    "embedded": (("ingest", "join", "judge"),),
    "direct": (("ingest", "join", "judge"),),
    "staged": (("ingest",), ("join",), ("judge",)),
}


# How each topology's judge tables hear the exchanges of the fleet that other tables judge.
FLEET_HEARS: dict[str, str] = {
    "embedded": "one table judges every domain (`--jobs N`: each job reads every line and hears the others')",
    "direct": "each input partition tells the fleet topic what it judged and hears every other partition there",
    "staged": "each domain partition tells the fleet topic what it judged and hears every other partition there",
}


def whole(
    settings: DetectionSettings,
    public: PublicSet | None = None,
    counters: Counter[str] | None = None,
    owns: Callable[[str], bool] | None = None,
) -> Monitor:
    """The three stages chained in one process (the embedded runner; the direct topology, per input partition)."""
    return Monitor(settings, public, counters, owns)


def ingest_apart(settings: DetectionSettings) -> Ingest:
    """The ingest stage on workers of its own (the staged topology): the markers are not known there, so every text is
    scanned for them, and no session cache is kept (a prompt's prints go on the wire, and the cache's carry sentence
    ends a source lacks)."""
    fingerprinter = make_fingerprinter(settings)
    return Ingest(fingerprinter, CanaryRegistry(fingerprinter), scan_always=True, tools=settings.tool_calls,
                  identifiers=settings.mixup_identifiers)  # fmt: skip


def join_apart(joiner: Joiner, dedup: Deduper, counters: Counter[str]) -> Front:
    """The join stage over one join partition's state (the staged topology): its records come ingested, without
    text, and the canary policy was checked at ingest, where the markers were."""
    return Front(joiner, dedup, None, counters)


def join_state(settings: DetectionSettings) -> tuple[Joiner, Deduper]:
    """A fresh join partition's state: its Joiner (with the markers, as keyed hashes only) and its deduper."""
    joiner = Joiner(settings, CanaryRegistry(make_fingerprinter(settings), settings.max_canaries))
    return joiner, Deduper(settings.dedup_window, settings.dedup_window_s)


def judge_state(settings: DetectionSettings, counters: Counter[str], public: PublicSet | None = None) -> DomainTable:
    """A fresh domain partition's state: its domains, bounded and expired as in one process."""
    return DomainTable(settings, counters, public)


def judge_apart(table: DomainTable) -> Back:
    """The judge stage over one domain partition's domains (the staged topology)."""
    return Back(table)


__all__ = [
    "FLEET_HEARS",
    "FUTURE_TS",
    "STAGES",
    "TOPOLOGIES",
    "Back",
    "CanaryPolicy",
    "CanaryRegistry",
    "Deduper",
    "DetectionSettings",
    "Digest",
    "DomainMonitor",
    "DomainTable",
    "EventClock",
    "EventTimeBuffer",
    "Fingerprinter",
    "Front",
    "Ingest",
    "Joiner",
    "Monitor",
    "Observed",
    "OrderKey",
    "Plant",
    "Printed",
    "PublicSet",
    "SessionPrints",
    "Stage",
    "Waiting",
    "count_alerts",
    "front_pieces",
    "in_process",
    "ingest_apart",
    "join_apart",
    "join_state",
    "judge_apart",
    "judge_state",
    "make_fingerprinter",
    "new_holds",
    "order_key",
    "positions_of",
    "route_exchange",
    "sentences_of",
    "session_cache",
    "upgrade",
    "weak_canaries",
    "whole",
]
