"""docs/connect.md's warm-start recipe, run from its own text (`<!-- recipe: warm-start -->`) on simulated logs: a
deployment that ran warm is replayed once into a learned corpus, and a new deployment that reads it flags its
content-only leaks on their own responses, with no false high on its clean ones. The control: the same new logs
cold (held: the same leaks come out late) and with no warm-up and no corpus (false highs)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.support.recipes import commands, recipe

KEY = "warm-start-recipe-key"


def _cli(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "CROSSTALK_DETECTION__FINGERPRINT_KEY": KEY, **env}
    full.pop("CROSSTALK_CONFIG", None)
    return subprocess.run(
        [sys.executable, "-m", "streams.cli", *args], cwd=cwd, env=full, capture_output=True, text=True, timeout=600
    )


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("warm-start")
    for name, extra in (("old-deployment", ["--seed", "1", "--duration", "1200", "--no-fault"]),
                        ("new-deployment", ["--seed", "7", "--duration", "200", "--fault-at", "30"])):  # fmt: skip
        out = _cli(["simulate", "--profile", "multilingual", "--out", name, *extra], where, {})
        assert out.returncode == 0, out.stderr
    return where


def _flagged(where: Path, alerts: str) -> tuple[dict[str, float], int, int]:
    """(content-only leak -> delay of its first high+ alert, leaks, false highs on clean 2xx)."""
    labels = orjson.loads((where / "new-deployment" / "labels.json").read_bytes())["responses"]
    first: dict[str, float] = {}
    for line in (where / alerts).read_bytes().splitlines():
        a: dict[str, Any] = orjson.loads(line)
        if a.get("record") != "incident_resolved" and a["severity"] in ("high", "critical"):
            from datetime import datetime

            ts = datetime.fromisoformat(a["ts"].replace("Z", "+00:00")).timestamp()
            for rid in a["request_ids"]:
                first[rid] = min(first.get(rid, ts), ts)
    leaks = [r for r in labels if r["contaminated"] and r["scenario"] == "content_only"]
    clean = [r for r in labels if not r["contaminated"] and 200 <= r["status_code"] < 300]
    delays = {r["request_id"]: first[r["request_id"]] - r["ts"] for r in leaks if r["request_id"] in first}
    return delays, len(leaks), sum(r["request_id"] in first for r in clean)


def test_a_new_deployment_started_warm_flags_its_leaks_at_once_without_false_alarms(logs: Path) -> None:
    learn, export, replay = commands(recipe("warm-start"))
    assert (
        learn[:3] == ["crosstalk", "corpus", "learn"]
        and export[0] == "export"
        and replay[:2] == ["crosstalk", "replay"]
    )
    out = _cli(learn[1:], logs, {})
    assert out.returncode == 0, out.stderr
    assert "common fingerprints" in out.stderr and (logs / "warm.ctk").stat().st_size > 0
    env = dict(word.split("=", 1) for word in export[1:])
    out = _cli(replay[1:], logs, env)
    assert out.returncode == 0, out.stderr
    warm, leaks, false_high = _flagged(logs, "alerts.jsonl")
    assert leaks >= 10, "the simulated fault must leak"
    assert len(warm) >= 0.9 * leaks and max(warm.values()) <= 5.0, warm  # on the leaking response itself
    assert false_high == 0

    # Controls on the same logs. Cold: the leaks wait for the domain's hold (here: the end of the log).
    out = _cli(["replay", "new-deployment/events.jsonl", "--alerts-out", "cold.jsonl"], logs, {})
    assert out.returncode == 0, out.stderr
    cold, _, _ = _flagged(logs, "cold.jsonl")
    assert sum(d <= 5.0 for d in cold.values()) < len(warm) / 2, cold
    # No warm-up and no corpus: at once, and noisy.
    bare = {k: v for k, v in env.items() if k != "CROSSTALK_CORPUS__PATH"}
    out = _cli(["replay", "new-deployment/events.jsonl", "--alerts-out", "bare.jsonl"], logs, bare)
    assert out.returncode == 0, out.stderr
    _, _, bare_false = _flagged(logs, "bare.jsonl")
    assert bare_false > 0, "without the learned corpus the first minutes raise false highs (else this proves nothing)"


def test_learning_from_logs_too_short_to_warm_writes_nothing(tmp_path: Path) -> None:
    out = _cli(
        ["simulate", "--profile", "multilingual", "--out", "short", "--duration", "30", "--no-fault"], tmp_path, {}
    )
    assert out.returncode == 0, out.stderr
    out = _cli(["corpus", "learn", "short/events.jsonl", "--corpus", "warm.ctk"], tmp_path, {})
    assert out.returncode == 3 and "nothing written" in out.stderr
    assert not (tmp_path / "warm.ctk").exists()
    out = _cli(["corpus", "learn", "--corpus", "warm.ctk"], tmp_path, {})
    assert out.returncode == 2 and "no event logs" in out.stderr
