"""The LiteLLM recipe of docs/connect.md, as written: a real LiteLLM proxy started with deploy/litellm-config.yaml
and the document's TOML, in front of an OpenAI-compatible server on loopback, called by the OpenAI SDK.
Limits come from a `crosstalk scrape` limits server; events go to the real broker."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import consume_records, wait_for

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
pytest.importorskip("litellm")
openai = pytest.importorskip("openai")

from test_litellm import CAPACITY, LONG, LimitsServer, scraped  # noqa: E402

from schemas.events import parse_event_obj  # noqa: E402
from streams.embedded.runner import EmbeddedRunner  # noqa: E402
from streams.settings import Settings  # noqa: E402
from tests.support.chatserver import ChatServer  # noqa: E402
from tests.support.engines import Engines  # noqa: E402
from tests.support.recipes import ROOT, commands, exports, recipe  # noqa: E402
from tests.support.workerproc import free_port  # noqa: E402

pytestmark = pytest.mark.kafka
LITELLM = Path(sys.executable).parent / "litellm"
MASTER = "sk-crosstalk-test"
WORDS = ["ledger", "invoice", "margin", "forecast", "vendor", "audit", "payroll", "ticket", "shard", "kernel"]


def private_text(seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) + str(rng.randrange(1000)) for _ in range(80))


def _need_proxy() -> None:
    try:
        import litellm.proxy.proxy_server  # noqa: F401
    except ImportError as exc:
        msg = f"LiteLLM's proxy is not installed ({exc}): pip install 'crosstalk[litellm]'"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg)
        pytest.skip(msg)


@pytest.fixture
def engines() -> Iterator[Engines]:
    e = Engines()
    yield e
    e.close()


def test_the_proxy_recipe_guards_publishes_and_catches_a_leak(
    kafka_names: Any, engines: Engines, tmp_path: Path
) -> None:
    _need_proxy()
    kafka_names.create()  # the workers' topics, as a running worker has made them
    limits = LimitsServer(scraped(engines, kafka_names))
    chat = ChatServer()
    chat.start()
    port = free_port()
    # The document's TOML as crosstalk.toml; the environment (env wins over the file) gives this test's broker,
    # key and limits server.
    toml = tmp_path / "crosstalk.toml"
    toml.write_text(recipe("litellm-toml"))
    run = recipe("litellm-run")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CROSSTALK_")} | exports(run)
    assert env["CROSSTALK_CONFIG"] == "crosstalk.toml"
    env |= kafka_names.env() | {
        "CROSSTALK_CONFIG": str(toml),
        "CROSSTALK_LITELLM__LIMITS_URL": f"http://127.0.0.1:{limits.port}/limits",
        # A loaded CI machine can take more than the default 2 s for one read in a busy proxy; the refusal below
        # needs the limits to have been read once (the deadline itself is tested in test_litellm_limits_deadline.py).
        "CROSSTALK_LITELLM__LIMITS_TIMEOUT_S": "15",
        "LITELLM_MASTER_KEY": MASTER,  # the document's is a placeholder
        "ENGINE_BASE_URL": f"http://127.0.0.1:{chat.port}/v1",
        "PYTHONPATH": str(ROOT),
    }
    [cmd] = [c for c in commands(run) if c[0] != "export"]
    assert cmd[:3] == ["litellm", "--config", "deploy/litellm-config.yaml"] and cmd[-2] == "--port"
    log = (tmp_path / "litellm.log").open("wb")
    proc = subprocess.Popen([str(LITELLM), *cmd[1:-1], str(port)], cwd=ROOT, env=env, stdout=log, stderr=log)
    try:
        import httpx

        def up() -> bool:
            assert proc.poll() is None, (tmp_path / "litellm.log").read_text()[-3000:]
            try:
                return httpx.get(f"http://127.0.0.1:{port}/health/liveliness", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(up, 180, interval_s=0.5, what="the LiteLLM proxy")
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=MASTER, max_retries=0)

        def ask(user: str, text: str) -> str:
            r = client.chat.completions.create(model="glm-5.3", messages=[{"role": "user", "content": text}], user=user)
            return r.choices[0].message.content or ""

        for i in range(3):
            ask("acme", private_text(100 + i))
            ask("globex", private_text(200 + i))
        ask("acme", private_text(103))
        chat.leak_next = True  # the next answer is the previous caller's prompt: acme's, to globex
        assert ask("globex", private_text(300)) == private_text(103)
        with pytest.raises(openai.BadRequestError) as refused:
            ask("acme", LONG)
        assert refused.value.status_code == 400 and f"capacity of {CAPACITY} tokens" in str(refused.value)
        # 8 calls answered and 1 refused: 9 pairs, each published by the callback in the proxy
        recs = consume_records(kafka_names.bootstrap, kafka_names.input_topic, 18, timeout_s=120)
    finally:
        proc.terminate()
        proc.wait(60)
        log.close()
        chat.stop()
        limits.close()
    events = [orjson.loads(r.value) for r in recs]
    assert {e["tenant_id"] for e in events} == {"acme", "globex"}
    statuses = sorted(e["status_code"] for e in events if e["type"] == "response")
    assert statuses == [200] * 8 + [400]
    assert all("prompt_text" not in e and "output_text" not in e for e in events)
    # the published events, as a worker reads them, catch the leak and name both tenants
    settings = Settings(
        detection={
            "fingerprint_key": env["CROSSTALK_DETECTION__FINGERPRINT_KEY"],
            "overlap_warmup_docs": 0,
            "overlap_warmup_s": 0.0,
        }
    )
    runner = EmbeddedRunner(settings)
    for e in sorted(events, key=lambda e: e["ts"]):
        runner.feed(parse_event_obj(e))
    alerts = runner.finish(time.perf_counter()).alerts
    leaks = [a for a in alerts if a.kind == "cross_tenant_contamination"]
    assert leaks and (leaks[0].tenant_id, leaks[0].source_tenant_id) == ("globex", "acme")
