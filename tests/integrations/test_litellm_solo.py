"""LiteLLM without a broker, as docs/connect.md writes it (`litellm-solo-toml`, `litellm-solo-run`): the real
LiteLLM proxy started with deploy/litellm-config.yaml, its callback sending each call to `crosstalk otlp`,
`crosstalk scrape` serving the guard's limits, `crosstalk otlp` detecting and delivering to a webhook. No Kafka
anywhere: the environment points the broker at a closed port, so that anything that tried would fail."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from conftest import wait_for

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
pytest.importorskip("litellm")
openai = pytest.importorskip("openai")

from tests.support.chatserver import ChatServer  # noqa: E402
from tests.support.engines import Engines, sglang_text  # noqa: E402
from tests.support.recipes import ROOT, commands, exports, leading_env, recipe  # noqa: E402
from tests.support.workerproc import free_port  # noqa: E402

pytestmark = pytest.mark.slow
LITELLM = Path(sys.executable).parent / "litellm"
MASTER = "sk-crosstalk-test"
CAPACITY = 500
LONG = " ".join(f"word{i}" for i in range(600))  # ~1,200 tokens: over the 500-token pool
WORDS = ["ledger", "invoice", "margin", "forecast", "vendor", "audit", "payroll", "ticket", "shard", "kernel"]


def private_text(seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) + str(rng.randrange(1000)) for _ in range(80))


class Hooks:
    """A webhook receiver on loopback: the bodies it was sent."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                n = int(self.headers.get("content-length", 0))
                outer.bodies.append(json.loads(self.rfile.read(n)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/crosstalk"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


@pytest.fixture
def engines() -> Iterator[Engines]:
    e = Engines()
    yield e
    e.close()


def _config(tmp_path: Path, engines: Engines, hooks: Hooks, limits_port: int, otlp_port: int) -> Path:
    """The document's TOML with its addresses served on loopback."""
    text = recipe("litellm-solo-toml")
    metrics = engines.add("p", sglang_text(CAPACITY, 100, context_len=1_048_576), 1_048_576)
    text = text.replace("14318", str(otlp_port))  # the receiver's port and the callback's URL
    for documented, here in (
        ('"http://10.0.0.5:30000"', f'"{metrics}"'),
        ('"https://hooks.example.internal/crosstalk"', f'"{hooks.url}"'),
        ("6067", str(limits_port)),
    ):
        assert documented in text, documented
        text = text.replace(documented, here)
    path = tmp_path / "crosstalk.toml"
    path.write_text(text)
    return path


def _logs(tmp_path: Path) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text()[-2000:]}" for p in sorted(tmp_path.glob("*.log")))


def test_the_solo_recipe_guards_detects_and_delivers_without_a_broker(engines: Engines, tmp_path: Path) -> None:
    hooks = Hooks()
    chat = ChatServer()
    chat.start()
    limits_port, otlp_port, proxy_port, closed = free_port(), free_port(), free_port(), free_port()
    config = _config(tmp_path, engines, hooks, limits_port, otlp_port)
    run = recipe("litellm-solo-run")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CROSSTALK_")} | exports(run)
    assert env["CROSSTALK_CONFIG"] == "crosstalk.toml"
    env |= {
        "CROSSTALK_CONFIG": str(config),
        "CROSSTALK_KAFKA__BOOTSTRAP": f"127.0.0.1:{closed}",  # nothing listens: a Kafka client would fail
        "CROSSTALK_DATA_DIR": str(tmp_path / "data"),
        # A fresh deployment holds content-only findings while it warms up (docs/detection.md): off for the test.
        "CROSSTALK_DETECTION__OVERLAP_WARMUP_DOCS": "0",
        "CROSSTALK_DETECTION__OVERLAP_WARMUP_S": "0",
        "CROSSTALK_WEBHOOKS__GROUP_WAIT_S": "0.5",
        "LITELLM_MASTER_KEY": MASTER,
        "ENGINE_BASE_URL": f"http://127.0.0.1:{chat.port}/v1",
        "PYTHONPATH": str(ROOT),
    }
    scrape_cmd, otlp_cmd, litellm_cmd = [leading_env(c)[1] for c in commands(run) if c[0] != "export"]
    assert scrape_cmd[:2] == ["crosstalk", "scrape"] and otlp_cmd[:2] == ["crosstalk", "otlp"]
    assert litellm_cmd[:3] == ["litellm", "--config", "deploy/litellm-config.yaml"] and litellm_cmd[-2] == "--port"
    procs: list[subprocess.Popen[bytes]] = []

    def start(cmd: list[str], cwd: Path, name: str) -> None:
        log = (tmp_path / f"{name}.log").open("wb")
        procs.append(subprocess.Popen(cmd, cwd=cwd, env=env, stdout=log, stderr=log))

    cli = [sys.executable, "-m", "streams.cli"]
    start([*cli, *scrape_cmd[1:]], tmp_path, "scrape")
    start([*cli, *otlp_cmd[1:]], tmp_path, "otlp")
    start([str(LITELLM), *litellm_cmd[1:-1], str(proxy_port)], ROOT, "litellm")
    try:

        def up(url: str) -> bool:
            assert all(p.poll() is None for p in procs), _logs(tmp_path)
            try:
                r = httpx.get(url, timeout=2)
            except httpx.HTTPError:
                return False
            return r.status_code == 200 and (not url.endswith("/limits") or "glm53-pd-1" in r.text)

        wait_for(lambda: up(f"http://127.0.0.1:{limits_port}/limits"), 60, what="crosstalk scrape's /limits")
        wait_for(lambda: up(f"http://127.0.0.1:{otlp_port}/health"), 60, what="crosstalk otlp")
        wait_for(lambda: up(f"http://127.0.0.1:{proxy_port}/health/liveliness"), 180, interval_s=0.5, what="LiteLLM")
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{proxy_port}/v1", api_key=MASTER, max_retries=0)

        def ask(user: str, text: str) -> str:
            r = client.chat.completions.create(model="glm-5.3", messages=[{"role": "user", "content": text}], user=user)
            return r.choices[0].message.content or ""

        def refused() -> openai.BadRequestError | None:
            """The guard reads /limits on its own thread from the first call on (every limits_refresh_s); until
            its first read lands a prompt passes (no_limit), as the document says."""
            try:
                ask("warmup", LONG)
            except openai.BadRequestError as exc:
                return exc
            return None

        exc = wait_for(refused, 60, interval_s=1.0, what="the guard's first limits")
        assert exc.status_code == 400 and f"capacity of {CAPACITY} tokens" in str(exc)
        for i in range(3):
            ask("acme", private_text(100 + i))
            ask("globex", private_text(200 + i))
        ask("acme", private_text(103))
        chat.leak_next = True  # the next answer is the previous caller's prompt: acme's, to globex
        assert ask("globex", private_text(300)) == private_text(103)

        alerts_file = tmp_path / "alerts.jsonl"

        def leak() -> dict[str, Any] | None:
            assert all(p.poll() is None for p in procs), _logs(tmp_path)
            lines = alerts_file.read_text().splitlines() if alerts_file.exists() else []
            found = [orjson.loads(x) for x in lines if x.startswith("{")]
            return next((a for a in found if a["kind"] == "cross_tenant_contamination"), None)

        alert = wait_for(leak, 60, what="the leak alert in alerts.jsonl")
        assert (alert["tenant_id"], alert["source_tenant_id"]) == ("globex", "acme")
        assert alert["response_id"].startswith("chatcmpl-")  # the engine's id of the leaked answer

        def delivered() -> dict[str, Any] | None:
            sent = [a for body in hooks.bodies for a in body.get("alerts", [])]
            return next((a for a in sent if a["alert_id"] == alert["alert_id"]), None)

        assert wait_for(delivered, 60, what="the webhook delivery")["tenant_id"] == "globex"
        counters = httpx.get(f"http://127.0.0.1:{otlp_port}/counters", timeout=5).json()
        # the 8 calls, the refused prompt and any that passed before the guard had its limits: all mapped
        assert counters["spans.mapped"] >= 9 and not [k for k in counters if k.startswith("rejects")], counters
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(60)
        chat.stop()
        hooks.close()
