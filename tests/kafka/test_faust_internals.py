"""The Faust internals the Kafka shell builds on, pinned by their source (ADR 0012).

streams/kafka/consumer.py overrides Faust's fetch loop and fetch long-poll, and its app the transport;
streams/kafka/readagain.py corrects the flow control's clear at a recovery's end; streams/kafka/app.py sets the
task-local current event that a RocksDB store files a write by. None of
these is Faust's public API. Each is named here with a digest of the source the override follows: a Faust release
that changes one fails this test, which says what to re-read, before any broker test can fail in a way that points
elsewhere."""

from __future__ import annotations

import contextvars
import hashlib
import importlib
import inspect
from pathlib import Path
from typing import Any

import pytest

FOLLOWED = {
    # what BatchGuardConsumer._drain_messages re-implements (one guard per fetched batch, not per message)
    "faust.transport.consumer.Consumer._drain_messages": "44a2500309e83c63",
    # App._new_transport: how the app builds its transport (ours returns BatchGuardTransport)
    "faust.app.base.App._new_transport": "42db531312dd776f",
    # FetchWaitThread: how Faust builds its aiokafka consumer (fetch_max_wait_ms hard-coded at 1500; ours sets the
    # consumer's attribute after it) and which thread class its consumer makes (BatchGuardConsumer returns ours)
    "faust.transport.drivers.aiokafka.AIOKafkaConsumerThread._create_worker_consumer": "c2701bfc3e6f6cad",
    "faust.transport.drivers.aiokafka.Consumer._new_consumer_thread": "0870ec53dea75083",
    # the stall watch (BatchGuardConsumer.fetchable, next_offsets): perform_seek sets the read offsets to the committed
    # ones at an assignment (ours also forgets what was delivered); the fetched set is the assignment less the paused
    # partitions and those flow control took out; seek_wait sets the read offset to where it sought
    "faust.transport.consumer.Consumer.perform_seek": "0e8c130ff4b0afd8",
    "faust.transport.consumer.Consumer._set_active_tps": "401f4dc883191950",
    "faust.transport.consumer.Consumer.on_buffer_full": "c8961679e0bcdce5",
    "faust.transport.drivers.aiokafka.AIOKafkaConsumerThread._seek_wait": "9d221e816d940467",
    # ReadAgainFlowControl (App.flow_control, a cached property): the flow control's resume clears every managed stream
    # buffer; a recovery ends by resuming the stream partitions and seeking them while the flow is on, then resumes it
    "mode.utils.queues.FlowControlEvent.resume": "4dcdc1253fd0dcb4",
    "mode.utils.queues.FlowControlEvent.clear": "dda5e40d80288a8f",
    "faust.tables.recovery.Recovery.on_recovery_completed": "6ef567acf072e46d",
    "faust.tables.recovery.Recovery._resume_streams": "d986a6710c1aca98",
    # a RocksDB store files a key under the partition of the current event (app.py sets it for the direct topology)
    "faust.stores.rocksdb.Store._set": "4227e561e288d941",
}


def _resolve(dotted: str) -> Any:
    module_name, cls, attr = dotted.rsplit(".", 2)
    return getattr(getattr(importlib.import_module(module_name), cls), attr)


def digest(obj: Any) -> str:
    return hashlib.sha256(inspect.getsource(obj).encode()).hexdigest()[:16]


@pytest.mark.parametrize("dotted", sorted(FOLLOWED))
def test_the_faust_source_an_override_follows_is_unchanged(dotted: str) -> None:
    assert digest(_resolve(dotted)) == FOLLOWED[dotted], (
        f"{dotted} changed in this Faust release: re-read it against streams/kafka/consumer.py and app.py "
        "(ADR 0012), then update its digest here"
    )


def test_the_current_event_is_the_context_variable_tables_read() -> None:
    from faust import streams

    assert isinstance(streams._current_event, contextvars.ContextVar)
    assert "current_event()" in inspect.getsource(_resolve("faust.stores.rocksdb.Store._set"))


def test_every_pinned_internal_is_named_in_the_adr() -> None:
    # ADR 0012 says why each is needed and counts them (issue 41): a pin added here without its row is caught.
    adr = (Path(__file__).resolve().parents[2] / "docs/adr/0012-faust-internals.md").read_text()
    missing = [d for d in FOLLOWED if ".".join(d.rsplit(".", 2)[-2:]) not in adr]
    assert missing == []
    assert f"| {len(FOLLOWED)} |" in adr.split("## Count")[1].split("\n\n")[1].splitlines()[-1]


def test_the_digest_sees_a_change() -> None:
    def f() -> int:
        return 1

    def g() -> int:
        return 2

    assert digest(f) != digest(g)
