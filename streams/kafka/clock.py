"""The workers' clock for held findings (issue 40): a mixin of `KafkaPipeline` (streams/kafka/app.py).

A cold domain holds a content-only finding for `overlap_hold_s` of event time, and any later event judges it
(`DomainMonitor.advance`). A worker whose input has gone quiet sees no later event, so once a second
(`HELD_TICK_S`) it passes its wall clock to each partition's core (`DirectStage.tick`, `DomainStage.tick`: the core
reads no clock): the finding comes out `overlap_hold_s` after its response, within the tick, with no further input.
Not while input waits to be read: in a backlog the events are older than the clock, and event time judges them, as
in a replay. A finding judged by the clock and not yet in a checkpoint is judged again after a restart: the same
alert id, which the alerts topic's readers already take as a re-delivery.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from detectors.pipeline import new_holds
from streams.kafka.direct import DirectStage, DirectState
from streams.kafka.stages import DomainResult, DomainStage, DomainState
from streams.settings import Settings

log = logging.getLogger("crosstalk.clock")
HOLD_LOG = (
    "domain %s is cold: %d content-only finding(s) held, judged %.0f s after their response (%d waiting, %d in all)"
)
HELD_TICK_S = 1.0  # how late past overlap_hold_s a quiet worker's held finding may come out


class HeldClock:
    """`_tick_held`, run on a Faust timer (set by KafkaPipeline.__init__, whose stages and states it uses)."""

    app: Any
    settings: Settings
    # (stage, partition) -> domain -> holds logged so far; one per worker, shared by its partitions' ticks
    _holds_logged: dict[tuple[str, int], dict[str, int]]
    direct: DirectStage
    domain: DomainStage
    direct_states: dict[int, DirectState]
    domain_states: dict[int, DomainState]

    def consumer_lag(self) -> dict[str, int]:
        raise NotImplementedError

    async def _emit(self, res: DomainResult) -> None:
        raise NotImplementedError

    async def _tick_held(self) -> None:
        self._log_holds()
        if self.app.rebalancing or any(self.consumer_lag().values()):
            return
        wall = time.time()
        ticks: list[DomainResult] = [self.direct.tick(st, p, wall) for p, st in list(self.direct_states.items())]
        ticks += [self.domain.tick(st, p, wall) for p, st in list(self.domain_states.items())]
        for res in ticks:
            if res.published or res.evaluated:  # a tick also judges exchanges that waited for a later instant
                await self._emit(res)

    def _log_holds(self) -> None:
        """Each hold once in the worker's log (per partition, domain and tick, with the count)."""
        seen = self._holds_logged
        tables = [("direct", p, st.table.domains) for p, st in list(self.direct_states.items())]
        tables += [("domain", p, st.table.domains) for p, st in list(self.domain_states.items())]
        for stage, p, domains in tables:
            for name, new, waiting, total in new_holds(domains, seen.setdefault((stage, p), {})):
                hold_s = self.settings.detection.overlap_hold_s
                log.info("%s partition %d: " + HOLD_LOG, stage, p, name, new, hold_s, waiting, total)
