"""The probe at large windows (issue 42), over real HTTP on loopback with the real SDK.

A prompt of millions of words has a fingerprint larger than the contract takes: an endpoint advertising
16,000,000 tokens crashed the probe with a ValidationError and exit 1, the code for "leak found". Below that,
request events over `ingest.max_event_bytes` were "not sent (oversized)": with window 1,048,576 and
`--pool-tokens 681280` every request from 613k tokens up was left out, and a replay of the probe's events gave
orphans and no `overlong_accepted`, whereas the probe had judged it. Here the sizes are scaled down with the
event limit (1 MiB), so the same happens from ~100k tokens.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from streams.cli.main import main
from streams.embedded.runner import EmbeddedRunner
from streams.settings import load_settings
from tests.support.hostile import HostileServer

REPO = Path(__file__).resolve().parents[2]
KEY = "probe-large-key"  # a test key, not a secret


def probe(base_url: str, tmp_path: Path, *extra: str, **env: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "streams.cli", "probe", "--base-url", base_url, "--rate", "200",
           "--max-tokens", "100000000", "--events", str(tmp_path / "events.jsonl"), *extra]  # fmt: skip
    return subprocess.run(
        cmd, cwd=REPO, capture_output=True, text=True, timeout=300,
        env={**os.environ, "CROSSTALK_DETECTION__FINGERPRINT_KEY": KEY, **env},
    )  # fmt: skip


def events(tmp_path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(x) for x in (tmp_path / "events.jsonl").read_bytes().splitlines()]


@pytest.fixture
def server() -> Iterator[HostileServer]:
    with HostileServer(window=262_144) as srv:
        yield srv


@pytest.mark.slow  # the probe as a subprocess, prompts of up to 275k words
def test_the_replay_of_the_probes_events_gives_its_judgement(
    server: HostileServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    limit = {"CROSSTALK_INGEST__MAX_EVENT_BYTES": str(1 << 20)}
    proc = probe(server.url("ok") + "/v1", tmp_path, "--pool-tokens", "170320", **limit)
    assert proc.returncode == 1, proc.stderr[-2000:]  # the probe's own judgement: overlong acceptance
    assert "overlong_accepted" in proc.stderr and "not sent" not in proc.stderr
    sent = events(tmp_path)
    requests = [e for e in sent if e["type"] == "request"]
    assert len(requests) == len([e for e in sent if e["type"] == "response"]) > 0
    assert max(e["prompt_tokens"] for e in requests) > 262_144  # the rungs above the window went out too
    assert any("prompt_fingerprint" in e for e in requests)  # the small ones keep theirs
    for name, value in {**limit, "CROSSTALK_DETECTION__FINGERPRINT_KEY": KEY}.items():
        monkeypatch.setenv(name, value)
    result = EmbeddedRunner(load_settings()).run_files([str(tmp_path / "events.jsonl")])
    assert sum(result.rejects.values()) == 0, result.rejects
    assert not {k: n for k, n in result.counters.items() if k.startswith("orphans.") and n}, result.counters
    found = {a.kind for a in result.alerts} | {s.name for a in result.alerts for s in a.evidence}
    assert "overlong_accepted" in found, found


@pytest.mark.slow  # the probe as a subprocess, prompts of 2.8 M words
def test_a_multi_million_token_window_never_exits_1_on_the_probes_own_error(tmp_path: Path) -> None:
    with HostileServer(window=4_000_000) as srv:
        proc = probe(srv.url("ok") + "/v1", tmp_path, CROSSTALK_PROBE__LADDER="[0.7]")
    assert "Traceback" not in proc.stderr and "ValidationError" not in proc.stderr, proc.stderr[-2000:]
    # Prompts above the contract's bound on hashes go out without their fingerprint. The loopback server refuses
    # bodies this large (413): the probe says it could not probe (2), as it does for any endpoint that refuses all.
    assert proc.returncode == 2 and "could not probe" in proc.stderr, proc.stderr[-2000:]
    requests = [e for e in events(tmp_path) if e["type"] == "request"]
    assert len(requests) == 2 and all("prompt_fingerprint" not in e for e in requests)


def test_an_internal_error_of_the_probe_is_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(*args: object, **kw: object) -> None:
        raise RuntimeError("a bug in the prober")

    monkeypatch.setattr("streams.probe.run.Prober._emit_pool", broken)
    monkeypatch.setenv("CROSSTALK_DETECTION__FINGERPRINT_KEY", KEY)
    with HostileServer(window=8192) as srv:
        code = main(["probe", "--base-url", srv.url("ok") + "/v1", "--pool-tokens", "4096"])
    assert code == 2
    assert "could not probe: internal error (a bug in the prober)" in capsys.readouterr().err
