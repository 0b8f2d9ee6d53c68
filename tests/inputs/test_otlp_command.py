"""`crosstalk otlp` as a process: listens on its port, writes mapped events, stops cleanly on SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import orjson
from conftest import wait_for

from tests.support.otlp import export_request, span_of
from tests.support.workerproc import free_port


def test_otlp_command_receives_json_and_protobuf_and_stops_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    out, rejects = tmp_path / "events.jsonl", tmp_path / "rejects.jsonl"
    env = {**os.environ, "CROSSTALK_OTLP__PORT": str(port)}
    cmd = [sys.executable, "-m", "streams.cli", "otlp", "--to", "jsonl", "--events-out", str(out)]
    proc = subprocess.Popen([*cmd, "--rejects", str(rejects)], env=env, stderr=subprocess.PIPE)
    try:

        def up() -> bool:
            try:
                return httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200
            except httpx.HTTPError:
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
                return False

        wait_for(up, 60, what="the OTLP receiver")
        span = span_of(
            {"request_id": "r-9", "model": "m", "tenant_id": "acme", "prompt_tokens": 5, "ts": 10.0},
            {"model": "m", "cache_domain": "d1", "status_code": 200, "ts": 11.0},
        )
        r = httpx.post(
            f"http://127.0.0.1:{port}/v1/traces",
            content=orjson.dumps(export_request([span])),
            headers={"content-type": "application/json"},
        )
        assert r.status_code == 200 and r.json() == {}
        bad = httpx.post(
            f"http://127.0.0.1:{port}/v1/traces",
            content=b"\xff\x00",
            headers={"content-type": "application/x-protobuf"},
        )
        assert bad.status_code == 400
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    events = [orjson.loads(x) for x in out.read_bytes().splitlines()]
    assert [(e["type"], e["request_id"]) for e in events] == [("request", "r-9"), ("response", "r-9")]
    assert [orjson.loads(x)["reason"] for x in rejects.read_bytes().splitlines()] == ["not_otlp"]
