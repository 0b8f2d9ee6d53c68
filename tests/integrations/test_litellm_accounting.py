"""Issue 24's accounting false alarm, reproduced with the real parts: LiteLLM (counting prompt tokens with its
own tokenizer) in front of the live test engine over HTTP (counting its own way), the callback publishing to
the real broker, and the events judged by the core. The gateway counts several times the engine's count on
every call; once learned, no normal call is an accounting alert, and a placeholder still is."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import orjson
import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network for the model cost map
litellm = pytest.importorskip("litellm")

from conftest import consume_records  # noqa: E402

from detectors.monitor import Monitor  # noqa: E402
from schemas.events import parse_event  # noqa: E402
from streams.integrations.litellm import CrosstalkLogger  # noqa: E402
from streams.kafka.topics import ensure_topics  # noqa: E402
from streams.sim.serving.core import EngineConfig  # noqa: E402
from streams.sim.serving.server import EngineThread, LiveEngine  # noqa: E402

CONFIG = EngineConfig(context_window=8192, prefill_pool_tokens=4096, decode_pool_tokens=8192, cache_domain="sim-t")
CALLS = 12


def _prompt(i: int) -> str:
    return " ".join(f"acme{i}x{j}w" for j in range(300))  # 300 engine tokens (words), more for tiktoken


@pytest.mark.kafka
def test_a_gateway_with_another_tokenizer_raises_no_accounting_alert(kafka_names: Any) -> None:
    # Tenants from the team (as a deployment with LiteLLM's database has them): the metadata below names it.
    litellm_settings = {"guard": False, "cache_domains": {"glm-sim": "sim-t"}, "tenant_from": ["team"]}
    settings = kafka_names.settings(litellm=litellm_settings)
    ensure_topics(settings.kafka)
    logger = CrosstalkLogger(settings)

    async def calls(base_url: str) -> None:
        for i in range(CALLS):
            await litellm.acompletion(
                model="openai/glm-sim",
                api_base=base_url,
                api_key="team-acme",
                messages=[{"role": "user", "content": _prompt(i)}],
                max_tokens=16,
                metadata={"user_api_key_team_id": "team-acme"},
            )
        for _ in range(200):  # the callbacks run as background tasks after each call
            if logger.counters["published.response"] >= CALLS:
                break
            await asyncio.sleep(0.05)

    litellm.callbacks = [logger]
    try:
        with EngineThread(LiveEngine(CONFIG, "fixed")) as engine:
            asyncio.run(calls(engine.base_url))
        logger.flush()
    finally:
        litellm.callbacks = []
        logger.close()
    events = sorted(
        (parse_event(r.value) for r in consume_records(kafka_names.bootstrap, kafka_names.input_topic, 2 * CALLS)),
        key=lambda e: e.ts,
    )
    requests = {e.request_id: e for e in events if e.type == "request"}
    responses = [e for e in events if e.type == "response"]
    ratios = [r.usage.input_tokens / requests[r.request_id].prompt_tokens for r in responses if r.usage]
    assert len(ratios) == CALLS and all(0.0625 < x < 0.5 for x in ratios), ratios  # the old rule fired on each
    m = Monitor(settings.detection)
    alerts = [a for e in events for a in m.observe(e)] + m.flush()
    assert [a for a in alerts if a.kind == "token_accounting_mismatch"] == []
    # The placeholder, on the same learned domain: still an alert at once.
    last = requests[responses[-1].request_id]
    rid = "placeholder-1"
    req = orjson.loads(last.model_dump_json()) | {"event_id": "pq", "request_id": rid, "ts": last.ts + 60}
    resp = orjson.loads(responses[-1].model_dump_json()) | {"event_id": "pr", "request_id": rid, "ts": last.ts + 61}
    resp["usage"] = {"input_tokens": 1, "output_tokens": 16}
    raised = m.observe(parse_event(orjson.dumps(req))) + m.observe(parse_event(orjson.dumps(resp))) + m.flush()
    assert [a.kind for a in raised] == ["token_accounting_mismatch"]
