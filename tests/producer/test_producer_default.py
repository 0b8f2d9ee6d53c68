"""The fast path is the default (issue 28): with the shipped settings every producer crosstalk ships keys events by
cache domain, so the direct topology (the default) reads them as they are: `GatewayProducer`, the OTLP bridge's
Kafka output, the probe's (the same `KafkaOutput`) and the LiteLLM callback, on the real broker (and LiteLLM itself)."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import orjson
import pytest
from conftest import consume_records, wait_for

from schemas.events import parse_event
from streams.routing import input_partition_of
from streams.settings import KafkaSettings, Settings

pytestmark = pytest.mark.kafka
T0 = 1_787_821_200.0
DEFAULT = KafkaSettings.model_fields["topology"].default


def _defaults(names: Any, **sections: Any) -> Settings:
    """The harness's names with the shipped topology (the harness pins the staged one for the older tests)."""
    return names.settings(kafka={"topology": DEFAULT}, **sections)  # type: ignore[no-any-return]


def _pair(rid: str, domain: str) -> tuple[dict[str, Any], dict[str, Any]]:
    req = {"type": "request", "event_id": f"{rid}-q", "ts": T0, "request_id": rid, "tenant_id": "t", "model": "m",
           "prompt_tokens": 10, "prompt_text": "the quick brown fox jumps over the lazy dog"}  # fmt: skip
    resp = {"type": "response", "event_id": f"{rid}-r", "ts": T0 + 1, "request_id": rid, "tenant_id": "t",
            "model": "m", "cache_domain": domain, "status_code": 200, "output_text": "a fox, and a dog"}  # fmt: skip
    return req, resp


def _where(names: Any, n: int) -> dict[str, tuple[bytes | None, int]]:
    recs = consume_records(names.bootstrap, names.input_topic, n)
    return {orjson.loads(r.value)["event_id"]: (r.key, r.partition) for r in recs}


def test_the_shipped_topology_is_the_direct_one() -> None:
    assert DEFAULT == "direct" and Settings().kafka.topology == "direct"


def test_the_otlp_bridge_and_the_probe_key_by_cache_domain(kafka_names: Any) -> None:
    from streams.outputs import KafkaOutput

    settings = _defaults(kafka_names)
    kafka_names.create()
    parts = settings.kafka.input_partitions
    out = KafkaOutput(settings)
    req, resp = _pair("otlp-1", "dom-a")
    del req["prompt_text"]  # the request names no domain: held until its response does
    out.send([parse_event(orjson.dumps(req)), parse_event(orjson.dumps(resp))])
    out.close()
    probe = KafkaOutput(settings, send_text=True)  # as `crosstalk probe --kafka` builds it: events as dicts
    preq, presp = _pair("probe-1", "dom-b")
    preq["cache_domain"] = "dom-b"
    probe.send([preq])
    probe.send([presp])
    probe.close()
    got = _where(kafka_names, 4)
    for rid, dom in (("otlp-1", "dom-a"), ("probe-1", "dom-b")):
        want = (dom.encode(), input_partition_of(dom.encode(), parts))
        assert got[f"{rid}-q"] == got[f"{rid}-r"] == want, (rid, got)


def test_the_litellm_callback_keys_by_cache_domain(kafka_names: Any) -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    litellm = pytest.importorskip("litellm")
    from streams.integrations.litellm import CrosstalkLogger
    from streams.kafka.topics import ensure_topics

    settings = _defaults(kafka_names, litellm={"guard": False, "cache_domains": {"glm-5.3": "glm53-pd-1"}})
    ensure_topics(settings.kafka)
    logger = CrosstalkLogger(settings)

    async def call() -> None:
        await litellm.acompletion(
            model="openai/glm-5.3", messages=[{"role": "user", "content": "hello there"}], mock_response="Hi.",
            user="team-acme",  # the end user: the default tenant source
        )  # fmt: skip
        for _ in range(100):  # LiteLLM runs its logging callbacks as tasks after returning
            if logger.counters["queued"] >= 2:
                break
            await asyncio.sleep(0.05)

    litellm.callbacks = [logger]
    try:
        asyncio.run(call())
        wait_for(lambda: logger.counters["published.response"] == 1, 30, what="the callback to publish")
        logger.flush()
    finally:
        litellm.callbacks = []
        # LiteLLM keeps a callback in its own lists after a call, and takes one logger of a class: leave none behind
        # for the LiteLLM tests that follow.
        for name in ("_async_success_callback", "_async_failure_callback", "success_callback", "failure_callback",
                     "input_callback"):  # fmt: skip
            listed = getattr(litellm, name, None)
            if isinstance(listed, list):
                listed[:] = [cb for cb in listed if cb is not logger]
        logger.close()
    recs = consume_records(kafka_names.bootstrap, kafka_names.input_topic, 2)
    home = input_partition_of(b"glm53-pd-1", settings.kafka.input_partitions)
    assert {(r.key, r.partition) for r in recs} == {(b"glm53-pd-1", home)}
    assert {orjson.loads(r.value)["type"] for r in recs} == {"request", "response"}
