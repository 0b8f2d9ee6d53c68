"""`crosstalk otlp --selftest`: one span through a running receiver, and what arrived, in the receiver's words."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from streams.inputs.otlp_http import OtlpReceiver
from streams.outputs import JsonlOutput
from streams.settings import Settings
from tests.support.workerproc import free_port

ROOT = Path(__file__).resolve().parents[2]


def selftest(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CROSSTALK_", "OTEL_"))}
    cmd = [sys.executable, "-m", "streams.cli", "otlp", "--selftest", *args]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture
def receiver() -> Iterator[tuple[OtlpReceiver, io.BytesIO]]:
    events = io.BytesIO()
    r = OtlpReceiver(Settings(), JsonlOutput(events, io.BytesIO()))
    r.start_in_thread()
    yield r, events
    r.stop_thread()


def test_selftest_says_what_arrived(receiver: tuple[OtlpReceiver, io.BytesIO]) -> None:
    r, events = receiver
    out = selftest(f"http://127.0.0.1:{r.port}/v1/traces")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "no span rejected" in out.stdout and "mapped it into a request and a response" in out.stdout
    assert out.stdout.rstrip().endswith("OK")
    got = [orjson.loads(line) for line in events.getvalue().splitlines()]
    assert [(e["type"], e["tenant_id"]) for e in got] == [
        ("request", "crosstalk-selftest"),
        ("response", "crosstalk-selftest"),
    ]


def test_selftest_reports_a_rejected_span() -> None:
    # A receiver that reads the tenant from another attribute: the span is rejected, and the test says why.
    r = OtlpReceiver(Settings(otlp={"tenant_attributes": ["enduser.id"]}), JsonlOutput(io.BytesIO(), io.BytesIO()))
    r.start_in_thread()
    try:
        out = selftest(f"http://127.0.0.1:{r.port}/v1/traces")
    finally:
        r.stop_thread()
    assert out.returncode == 1
    assert "rejected the span: no_tenant" in out.stdout and out.stdout.rstrip().endswith("FAILED")


def test_selftest_without_a_receiver_fails_and_says_so() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1/traces"
    out = selftest(url)
    assert out.returncode == 1 and f"cannot reach {url}" in out.stdout


def test_selftest_presents_the_sdk_headers_to_a_receiver_with_tokens() -> None:
    token = "selftest-token-0123456789"
    sender = {"sender": "gw", "token": token, "tenants": ["crosstalk-*"]}
    r = OtlpReceiver(Settings(otlp={"tokens": [sender]}), JsonlOutput(io.BytesIO(), io.BytesIO()))
    r.start_in_thread()
    try:
        url = f"http://127.0.0.1:{r.port}/v1/traces"
        without = selftest(url)
        env = {"OTEL_EXPORTER_OTLP_HEADERS": f"Authorization=Bearer%20{token}"}
        with_token = subprocess.run(
            [sys.executable, "-m", "streams.cli", "otlp", "--selftest", url],
            cwd=ROOT,
            env={k: v for k, v in os.environ.items() if not k.startswith(("CROSSTALK_", "OTEL_"))} | env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        r.stop_thread()
    assert without.returncode == 1 and "HTTP 401" in without.stdout and "OTEL_EXPORTER_OTLP_HEADERS" in without.stdout
    assert with_token.returncode == 0, with_token.stdout + with_token.stderr
    assert token not in with_token.stdout + with_token.stderr + without.stdout  # never printed
