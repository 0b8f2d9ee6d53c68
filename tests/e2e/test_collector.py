"""The OpenTelemetry recipes of docs/connect.md, as written, against a real OpenTelemetry Collector.

The Collector is v0.165 built with its builder from deploy/otelcol-builder.yaml (scripts/test.sh builds it
once into .tools/bin); its config is deploy/otel-collector.yaml, which the document includes verbatim.
The gateway is the document's own Python, run by `opentelemetry-instrument` with the document's own
environment; the OpenAI SDK and its openai-v2 instrumentation are the real ones.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import consume_records, wait_for

from tests.support.chatserver import ChatServer
from tests.support.recipes import commands, exports, leading_env, recipe
from tests.support.workerproc import free_port

ROOT = Path(__file__).resolve().parents[2]
BINARY = Path(os.environ.get("CROSSTALK_OTELCOL", ROOT / ".tools" / "bin" / "otelcol-crosstalk"))
CONFIG = ROOT / "deploy" / "otel-collector.yaml"
INSTRUMENT = Path(sys.executable).parent / "opentelemetry-instrument"
NO_WARMUP = {"CROSSTALK_DETECTION__OVERLAP_WARMUP_DOCS": "0", "CROSSTALK_DETECTION__OVERLAP_WARMUP_S": "0"}

# What the gateway does after the document's code: calls for two tenants, then one whose answer is the
# previous caller's (acme's) prompt (the chat server's stale-KV failure), inside the victim's block.
DRIVER = """

import random

WORDS = "ledger invoice margin forecast vendor audit payroll ticket shard replica kernel bucket region".split()


def private_text(seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) + str(rng.randrange(1000)) for _ in range(120))


for i in range(3):
    answer("acme", private_text(100 + i))
    answer("globex", private_text(200 + i))
answer("acme", private_text(103))
with tenant("globex"):
    leaked = client.chat.completions.create(
        model="glm-5.3",
        messages=[{"role": "user", "content": private_text(300)}],
        extra_headers={"x-test-leak": "previous"},
    )
assert leaked.choices[0].message.content == private_text(103), "the server did not leak"
"""


def _need_client() -> None:
    """The gateway's client set (crosstalk[otel-client]): without the distro, opentelemetry-instrument exports
    nothing."""
    import importlib.util

    if INSTRUMENT.exists() and importlib.util.find_spec("opentelemetry.distro") is not None:
        return
    msg = f"no opentelemetry-instrument + opentelemetry-distro for {sys.executable}: install crosstalk[otel-client]"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(msg)
    pytest.skip(msg)


def _need_collector() -> None:
    if not BINARY.exists():
        msg = f"no OpenTelemetry Collector at {BINARY} (scripts/test.sh builds it with Go)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg)
        pytest.skip(msg)


def _collector_env(**routes: str) -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")} | routes


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


class Proc:
    """A child process with its output in a file, stopped with SIGTERM at the end."""

    def __init__(self, cmd: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        self._fh = log.open("wb")
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=self._fh, stderr=subprocess.STDOUT)

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._fh.close()
        return self.proc.returncode


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    started: list[Proc] = []
    yield started
    for p in reversed(started):
        p.stop()


def test_the_shipped_config_validates_for_both_routes() -> None:
    _need_collector()
    for route in ("[kafka]", "[otlp_http/crosstalk]", "[kafka, otlp_http/crosstalk]"):
        out = subprocess.run(
            [str(BINARY), "validate", f"--config={CONFIG}"],
            env=_collector_env(CROSSTALK_EXPORTERS=route),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, (route, out.stderr)
    # The form older documentation showed is what current releases reject (issue 26).
    old = CONFIG.read_text().replace(
        "    traces:\n      topic: otlp_spans\n      encoding: otlp_proto\n", "    topic: otlp_spans\n"
    )
    assert old != CONFIG.read_text()
    bad = subprocess.run([str(BINARY), "validate", f"--config=yaml:{old}"], capture_output=True, text=True)
    assert bad.returncode != 0 and "invalid keys: topic" in bad.stderr


def _crosstalk(*args: str) -> list[str]:
    return [sys.executable, "-m", "streams.cli", *args]


@pytest.mark.kafka
def test_gateway_spans_through_the_collector_reach_crosstalk_directly_and_via_kafka(
    kafka_names: Any, workers: Any, procs: list[Proc], tmp_path: Path
) -> None:
    _need_collector()
    _need_client()
    chat = ChatServer()
    chat.start()
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("CROSSTALK_", "OTEL_"))}
    app = kafka_names.app_id
    topic = f"{app}.otlp_spans"

    # crosstalk otlp, the direct route's receiver: detectors in-process, alerts to a file
    direct_port = free_port()
    alerts_file = tmp_path / "direct-alerts.jsonl"
    direct_cmd = ["otlp", "--port", str(direct_port), "--alerts-out", str(alerts_file)]
    # ... taking only its sender's token: the Collector presents it (CROSSTALK_OTLP_TOKEN in the shipped config)
    token = "collector-token-0123456789abcdef"
    sender = json.dumps([{"sender": "collector", "token": token, "tenants": ["*"]}])
    direct_env = base_env | NO_WARMUP | {"CROSSTALK_OTLP__TOKENS": sender}
    procs.append(Proc(_crosstalk(*direct_cmd), direct_env, tmp_path / "otlp.log"))
    # the Kafka route: the bridge (it creates the Collector's topic) and a worker, as the document starts them
    [bridge_cmd, worker_cmd, collector_cmd] = commands(recipe("collector-kafka"))
    assert bridge_cmd[0] == worker_cmd[0] == "crosstalk" and worker_cmd[1:] == ["worker"]
    bridge_env = base_env | kafka_names.env() | {"CROSSTALK_OTLP__KAFKA_TOPIC": topic}
    bridge_env["CROSSTALK_OTLP__KAFKA_GROUP_ID"] = f"{app}-bridge"
    procs.append(Proc(_crosstalk(*bridge_cmd[1:]), bridge_env, tmp_path / "bridge.log"))
    quick = {"CROSSTALK_KAFKA__WATERMARK_IDLE_S": "3", "CROSSTALK_KAFKA__HEARTBEAT_INTERVAL_S": "1"}
    w = workers.start(kafka_names, "otel", **quick, **NO_WARMUP)

    # the Collector, from the shipped config; only the topic is this test's own (a shared broker)
    shipped = CONFIG.read_text()
    assert shipped.count("topic: otlp_spans\n") == 1
    config = tmp_path / "otel-collector.yaml"
    config.write_text(shipped.replace("topic: otlp_spans\n", f"topic: {topic}\n"))
    http_port, grpc_port = free_port(), free_port()
    coll_env, coll_cmd = leading_env(collector_cmd)
    assert coll_cmd[1:] == ["--config", "deploy/otel-collector.yaml"] and "KAFKA_BROKERS" in coll_env
    coll_env = _collector_env(
        OTLP_HTTP_ENDPOINT=f"127.0.0.1:{http_port}",
        OTLP_GRPC_ENDPOINT=f"127.0.0.1:{grpc_port}",
        KAFKA_BROKERS=kafka_names.bootstrap,
        CROSSTALK_OTLP_ENDPOINT=f"http://127.0.0.1:{direct_port}/v1/traces",
        CROSSTALK_EXPORTERS="[kafka, otlp_http/crosstalk]",  # both routes at once, to test both
        CROSSTALK_OTLP_TOKEN=token,
    )
    admin_ready = wait_for(
        lambda: _topic_exists(kafka_names.bootstrap, topic), 90, what=f"the bridge to create {topic}"
    )
    assert admin_ready
    collector = Proc([str(BINARY), "--config", str(config)], coll_env, tmp_path / "collector.log")
    procs.append(collector)
    for p in (http_port, direct_port):
        wait_for(lambda p=p: _listening(p), 60, what=f"port {p}\n{collector.tail()}")  # type: ignore[misc]

    # the selftest, through the Collector: the path works before the gateway runs
    selftest = subprocess.run(
        _crosstalk(
            "otlp",
            "--selftest",
            f"http://127.0.0.1:{http_port}/v1/traces",
            "--counters-url",
            f"http://127.0.0.1:{direct_port}/counters",
        ),
        cwd=ROOT,
        env=base_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert selftest.returncode == 0, selftest.stdout + selftest.stderr + collector.tail()
    assert "crosstalk mapped it" in selftest.stdout

    # the gateway: the document's code and environment, run by opentelemetry-instrument
    gateway = tmp_path / "your_gateway.py"
    gateway.write_text(recipe("otel-gateway") + DRIVER)
    env_block = recipe("otel-env")
    gw_env = base_env | exports(env_block)
    assert gw_env["OTEL_EXPORTER_OTLP_PROTOCOL"] == "http/protobuf"
    gw_env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = f"http://127.0.0.1:{http_port}/v1/traces"
    gw_env |= {"OPENAI_BASE_URL": f"http://127.0.0.1:{chat.port}/v1", "OPENAI_API_KEY": "test", "PYTHONPATH": str(ROOT)}
    [run_cmd] = [c for c in commands(env_block) if c[0] != "export"]
    assert run_cmd == ["opentelemetry-instrument", "python", "your_gateway.py"]
    gw = subprocess.run(
        [str(INSTRUMENT), sys.executable, str(gateway)], env=gw_env, capture_output=True, text=True, timeout=120
    )
    chat.stop()
    assert gw.returncode == 0, gw.stdout + gw.stderr

    # direct route: crosstalk otlp mapped the 8 spans (and the selftest's), and its detectors alert
    def mapped() -> bool:
        import httpx

        try:
            return httpx.get(f"http://127.0.0.1:{direct_port}/counters").json().get("spans.mapped", 0) >= 9
        except httpx.HTTPError:
            return False

    wait_for(mapped, 60, what="the spans at crosstalk otlp\n" + collector.tail())
    import httpx

    # The senders' names are shown only to a caller with a token (9f6eb08): the Collector's own.
    auth = {"Authorization": f"Bearer {token}"}
    counters = httpx.get(f"http://127.0.0.1:{direct_port}/counters", headers=auth).json()
    assert counters["sender.collector.requests"] >= 1 and "rejects.unauthenticated" not in counters
    assert procs[0].stop() == 0, procs[0].tail()
    direct = [json.loads(line) for line in alerts_file.read_text().splitlines()]
    _assert_leak_alert(direct)

    # Kafka route: Collector -> topic -> bridge -> input topic -> worker -> alerts topic
    recs = consume_records(kafka_names.bootstrap, kafka_names.alerts_topic, 1, timeout_s=150)
    _assert_leak_alert([json.loads(r.value) for r in recs if b"incident_resolved" not in r.value])
    assert w.alive(), w.log_tail()


def _assert_leak_alert(alerts: list[dict[str, Any]]) -> None:
    found = [a for a in alerts if a.get("kind") == "cross_tenant_contamination"]
    assert found, [a.get("kind") for a in alerts]
    assert (found[0]["tenant_id"], found[0]["source_tenant_id"]) == ("globex", "acme")
    assert found[0]["severity"] in ("high", "critical") and found[0]["cache_domain"] == "glm53-pd-1"


def _topic_exists(bootstrap: str, topic: str) -> bool:
    from streams.kafka.topics import admin_client

    admin = admin_client(bootstrap)
    try:
        return topic in admin.list_topics()
    finally:
        admin.close()


def test_gateway_spans_straight_to_crosstalk_otlp(procs: list[Proc], tmp_path: Path) -> None:
    """The direct route, no Collector: the document's gateway and environment, its endpoint on `crosstalk otlp`."""
    _need_client()
    chat = ChatServer()
    chat.start()
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("CROSSTALK_", "OTEL_"))}
    port = free_port()
    alerts_file = tmp_path / "alerts.jsonl"
    receiver = Proc(
        _crosstalk("otlp", "--port", str(port), "--alerts-out", str(alerts_file)),
        base_env | NO_WARMUP,
        tmp_path / "otlp.log",
    )
    procs.append(receiver)
    wait_for(lambda: _listening(port), 60, what="crosstalk otlp\n" + receiver.tail())
    gateway = tmp_path / "your_gateway.py"
    gateway.write_text(recipe("otel-gateway") + DRIVER)
    env_block = recipe("otel-env")
    assert "straight to crosstalk: :14318" in env_block  # what the document tells the reader to change
    gw_env = base_env | exports(env_block)
    gw_env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = f"http://127.0.0.1:{port}/v1/traces"
    gw_env |= {"OPENAI_BASE_URL": f"http://127.0.0.1:{chat.port}/v1", "OPENAI_API_KEY": "test", "PYTHONPATH": str(ROOT)}
    gw = subprocess.run(
        [str(INSTRUMENT), sys.executable, str(gateway)], env=gw_env, capture_output=True, text=True, timeout=120
    )
    chat.stop()
    assert gw.returncode == 0, gw.stdout + gw.stderr
    assert receiver.stop() == 0, receiver.tail()  # the spans were exported at the gateway's exit, before this
    _assert_leak_alert([json.loads(line) for line in alerts_file.read_text().splitlines()])
