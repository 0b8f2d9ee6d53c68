"""What a Kafka worker reports about itself (its web endpoints and telemetry): status, where event time stands,
consumer lag, state sizes, readiness. A mixin of `KafkaPipeline` (streams/kafka/app.py), whose stages and states it
reads; it changes nothing.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import faust
from faust.types import TP

from streams.kafka.direct import DirectStage, DirectState
from streams.kafka.ingest import IngestStage
from streams.kafka.stages import DomainState, JoinState
from streams.kafka.topics import TopicNames
from streams.settings import KafkaSettings


class PipelineHealth:
    """The read-only views of a worker's state (set by KafkaPipeline.__init__)."""

    kafka: KafkaSettings
    names: TopicNames
    counters: Counter[str]
    started: float
    ingest: IngestStage
    direct: DirectStage
    join_states: dict[int, JoinState]
    domain_states: dict[int, DomainState]
    direct_states: dict[int, DirectState]
    assigned: set[TP]
    app: faust.App

    def status(self) -> dict[str, Any]:
        return {
            "app_id": self.kafka.app_id,
            "uptime_s": round(time.time() - self.started, 1),
            "topology": self.kafka.topology,
            "partitions": {
                "join": sorted(self.join_states),
                "domain": sorted(self.domain_states),
                "direct": sorted(self.direct_states),
            },
            "assigned": sorted(f"{tp.topic}:{tp.partition}" for tp in self.assigned),
            "counters": dict(sorted(self.counters.items())),
            "deadletter": {k[len("deadletter.") :]: v for k, v in self.counters.items() if k.startswith("deadletter.")},
            "warnings": {k[len("warning.") :]: v for k, v in self.counters.items() if k.startswith("warning.")},
            "state_size": self.state_size(),
            "consumer_lag": self.consumer_lag(),
            "event_time": self.event_time(),
        }

    def event_time(self) -> dict[str, Any]:
        """Where event time stands: the newest event read per input partition, the watermark per join
        partition — what a poisoned event would move — and, live, how far the slowest of this worker's
        join watermarks is behind the wall clock (a worker that cannot keep up shows it growing)."""
        if self.kafka.topology == "direct":
            # No watermarks between stages: each partition's event time is the newest event it admitted.
            newest = dict(self.direct.input_max)
            return {
                "input": {str(i): ts for i, ts in sorted(newest.items())},
                "join_watermarks": {},
                "behind_wall_clock_s": round(time.time() - min(newest.values()), 3) if newest else None,
            }
        wms = {str(p): st.wm for p, st in sorted(self.join_states.items()) if st.wm != float("-inf")}
        return {
            "input": {str(i): ts for i, ts in sorted(self.ingest.input_max.items())},
            "join_watermarks": wms,
            "behind_wall_clock_s": round(time.time() - min(wms.values()), 3) if wms else None,
        }

    def consumer_lag(self) -> dict[str, int]:
        """Messages of the input topic not yet ingested, per partition this worker has read."""
        out: dict[str, int] = {}
        positions = self.direct.positions if self.kafka.topology == "direct" else self.ingest.positions
        for partition, offset in list(positions.items()):
            try:
                highwater = self.app.consumer.highwater(TP(self.names.input, partition))
            except Exception:  # not assigned any more, or no fetch yet: nothing to report
                continue
            if highwater is not None:
                out[str(partition)] = max(0, int(highwater) - offset - 1)
        return out

    def state_size(self) -> dict[str, int]:
        size: Counter[str] = Counter()
        for js in self.join_states.values():
            size["pending_joins"] += js.joiner.state_size()
            size["dedup_ids"] += js.dedup.state_size()
            size["canaries"] = max(size["canaries"], js.joiner.canaries.state_size())
        for dst in self.direct_states.values():
            size.update(dst.monitor.state_size())
        for ds in self.domain_states.values():
            size["domains"] += len(ds.table.domains)
            size["pending_ordered"] += len(ds.pending)
            for dm in ds.table.domains.values():
                size.update(dm.state_size())
        return dict(size)

    def is_ready(self) -> bool:
        """Ready = started, not rebalancing, assigned partitions of the input topic and consuming them.

        Faust's own "started" comes long before the consumer group is joined (issue 11): a worker is
        ready only once the group gave it input partitions and the consumer holds positions in them."""
        app = self.app
        if not getattr(app, "started", False) or app.rebalancing:
            return False
        inputs = [tp for tp in self.assigned if tp.topic == self.names.input]
        if not inputs:
            return False
        try:
            assignment = app.consumer.assignment()
        except Exception:
            return False
        return all(tp in assignment for tp in inputs)
