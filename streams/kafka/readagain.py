"""The one place crosstalk corrects Faust: stream messages cleared unread at the end of a table recovery are read again.

What Faust does (faust-streaming 0.15.3, followed by digest in tests/kafka/test_faust_internals.py): a recovery ends
in `Recovery.on_recovery_completed`, which resumes the stream partitions and seeks them to their committed offsets
while the flow is already on for the changelogs (`_resume_streams`), and then resumes the app's flow control.
Resuming the flow control clears every stream buffer (`FlowControlEvent.resume` -> `clear`). What was fetched and
delivered into those buffers in between is gone, and the Kafka client's position has moved past it: nobody reads
those messages. A restart test lost 158 messages of an input partition this way, in about 1 of 10 loaded restarts
(ADR 0012, 2026-12-03).

The fix has two halves, both here:
- `ReadAgainFlowControl` is the app's flow control. Before it clears the buffers it notes the first offset of each
  partition they hold, and tells `ReadAgain`.
- `ReadAgain` decides which of those partitions to read again (`to_read_again`: only while the flow is on, which is
  the end of a recovery; a rebalance's clear is Faust's intent, since the next assignment seeks to the committed
  offsets) and has the consumer read them again from there (`BatchGuardConsumer.reread`, which passes over any
  message fetched before the seek until the sought one comes).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Mapping
from typing import Any, Protocol, cast

from faust.types import TP
from mode.utils.queues import FlowControlEvent

log = logging.getLogger("crosstalk.kafka")


class ReadAgainFlowControl(FlowControlEvent):
    """Faust's flow control, which clears every stream buffer when it resumes, telling `on_clear` which partitions'
    messages it cleared and the first offset of each."""

    on_clear: Callable[[dict[TP, int]], None] | None = None

    def clear(self) -> None:
        lowest: dict[TP, int] = {}
        if self.on_clear is not None:
            for queue in self._queues:
                for item in list(getattr(queue, "_queue", ())):  # an asyncio.Queue's items; a channel's are events
                    message = getattr(item, "message", None)
                    tp, offset = getattr(message, "tp", None), getattr(message, "offset", None)
                    if isinstance(tp, tuple) and isinstance(offset, int):
                        key = cast(TP, tp)
                        if offset < lowest.get(key, offset + 1):
                            lowest[key] = offset
        super().clear()
        if lowest and self.on_clear is not None:
            self.on_clear(lowest)


def to_read_again(
    lowest: Mapping[TP, int], *, flow_active: bool, changelogs: Collection[str], assigned: Collection[TP]
) -> dict[TP, int]:
    """Of the partitions whose messages were cleared (`lowest`: the first cleared offset of each), those to read again:
    none while the flow is stopped (a rebalance); never a changelog (the recovery reads those itself), never a
    partition no longer assigned."""
    if not flow_active:
        return {}
    return {tp: o for tp, o in lowest.items() if tp.topic not in changelogs and tp in assigned}


class Rereads(Protocol):
    """What `ReadAgain` needs of the consumer (`BatchGuardConsumer`)."""

    @property
    def flow_active(self) -> bool: ...

    def assignment(self) -> Any: ...

    def reread(self, partitions: dict[TP, int]) -> asyncio.Future[None]: ...


class ReadAgain:
    """The flow control's `on_clear`: cleared partitions read again by `consumer`, counted in `count`."""

    def __init__(self, consumer: Callable[[], Rereads], changelogs: Callable[[], Collection[str]]) -> None:
        # Looked up at each clear: the consumer and the tables exist by then (the first clear is a rebalance's).
        self.consumer = consumer
        self.changelogs = changelogs
        self.count = 0  # partitions read again (`cleared_reread` on /counters)
        self._seeks: set[asyncio.Future[None]] = set()  # held until done: the loop keeps only a weak reference

    def __call__(self, lowest: dict[TP, int]) -> None:
        consumer = self.consumer()
        tps = to_read_again(
            lowest, flow_active=consumer.flow_active, changelogs=self.changelogs(), assigned=consumer.assignment()
        )
        if not tps:
            return
        for tp, offset in tps.items():
            log.warning(
                "%s partition %s: messages from offset %s were cleared from the stream buffers unread; reading "
                "them again",
                *(tp.topic, tp.partition, offset),
            )
        self.count += len(tps)
        task = consumer.reread(tps)
        self._seeks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Future[None]) -> None:
        self._seeks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("reading cleared messages again failed: %r", task.exception())
