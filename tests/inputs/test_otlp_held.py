"""A new deployment's content-only leak comes out on time with no further input (issue 40), through the real
`crosstalk otlp` process and spans posted over loopback.

A cold domain holds a content-only finding for `overlap_hold_s`. It was judged only on its own domain's next
exchange: a quiet deployment never raised it. The receiver now ticks the core with its clock once a second
(`OtlpReceiver._tick_output`), so the alert comes out `overlap_hold_s` after the response, within the tick
(`TICK_S`), and the hold shows on /counters (`held_findings`) and is logged once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import orjson
import pytest
from conftest import wait_for
from factories import TEXTS

from streams.inputs.otlp_receiver import TICK_S
from tests.support.otlp import export_request, span_of
from tests.support.workerproc import free_port

HOLD_S = 4.0  # overlap_hold_s for the test (600 s by default)


def _pair(rid: str, tenant: str, ts: float, prompt: str, output: str) -> dict[str, object]:
    return span_of(
        {"request_id": rid, "model": "m", "tenant_id": tenant, "prompt_tokens": 300, "ts": ts, "prompt_text": prompt},
        {"model": "m", "cache_domain": "d1", "status_code": 200, "ts": ts + 0.5, "output_text": output},
    )


@pytest.mark.slow  # a CLI subprocess
def test_a_held_finding_comes_out_with_no_further_input(tmp_path: Path) -> None:
    port = free_port()
    alerts_out, rejects = tmp_path / "alerts.jsonl", tmp_path / "rejects.jsonl"
    env = {**os.environ, "CROSSTALK_OTLP__PORT": str(port), "CROSSTALK_DETECTION__OVERLAP_HOLD_S": str(HOLD_S)}
    cmd = [sys.executable, "-m", "streams.cli", "otlp", "--alerts-out", str(alerts_out), "--rejects", str(rejects)]
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:

        def up() -> bool:
            try:
                return httpx.get(f"{base}/health").status_code == 200
            except httpx.HTTPError:
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
                return False

        wait_for(up, 60, what="the OTLP receiver")
        # A brand-new domain: src quotes a passage, and dst's answer carries it. Cold, so the finding is held.
        now = time.time()
        spans = [_pair("s0", "src", now - 2, TEXTS[0], "Noted."), _pair("d0", "dst", now - 1, "Hi.", TEXTS[0])]
        body = orjson.dumps(export_request(spans))
        r = httpx.post(f"{base}/v1/traces", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 200 and r.json() == {}
        posted = time.time()

        def counters() -> dict[str, int]:
            return dict(httpx.get(f"{base}/counters").json())

        held = wait_for(lambda: counters()["held_findings"] == 1, 30, what="the hold on /counters")
        assert held and (not alerts_out.exists() or alerts_out.read_bytes() == b""), "held, not raised yet"
        # No further input: the receiver's clock alone brings it out. The wait allows for a loaded machine; the
        # figure that states the bound is the alert's own held_s, below.
        wait_for(lambda: alerts_out.exists() and alerts_out.read_bytes().strip(), HOLD_S + 60, what="the alert")
        waited = time.time() - posted
        (alert,) = [orjson.loads(x) for x in alerts_out.read_bytes().splitlines()]
        assert (alert["kind"], alert["tenant_id"], alert["source_tenant_id"]) == (
            "cross_tenant_contamination",
            "dst",
            "src",
        )
        held_s = alert["evidence"][0]["figures"]["held_s"]
        assert held_s >= HOLD_S, "never before the hold is over"
        after = wait_for(lambda: (c := counters())["held_findings"] == 0 and c, 30, what="the hold gone")
        assert (after["held_total"], after["held_raised"]) == (1, 1)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    log = proc.stderr.read().decode() if proc.stderr else ""
    assert log.count("content-only finding(s) held") == 1, log
    print(f"held_s={held_s} (hold {HOLD_S} s + tick {TICK_S} s); seen {waited:.1f} s after the post")
