"""Each benchmark script runs end to end at a tiny size and writes its result file (no timing asserted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# slow: every benchmark script end to end (tiny sizes)
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = [
    "bench_textrich",
    "bench_hotdomain",
    "bench_core",
    "bench_fingerprint",
    "bench_replay",
    "bench_memory",
    "bench_scaling",
    "bench_checkpoint",
]


def _run_tiny(
    name: str, tmp_path: Path, *extra: str, result: str | None = None
) -> tuple[subprocess.CompletedProcess[str], dict]:
    """Run bench/<name>.py at the tiny size; its completed process and the result file it wrote (`result`, by
    default <name>.json)."""
    out = tmp_path / "results"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / f"{name}.py"),
            "--tiny",
            "--no-progress",
            *extra,
            "--out",
            str(out),
            "--data",
            str(tmp_path / "data"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, json.loads((out / f"{result or name}.json").read_text())


@pytest.mark.parametrize("name", SCRIPTS)
def test_bench_script_runs_tiny(name: str, tmp_path: Path) -> None:
    proc, doc = _run_tiny(name, tmp_path)
    assert doc["bench"] == name and doc["mode"] == "tiny"
    for key in ("machine", "params", "figures", "baseline", "ratio"):
        assert key in doc
    assert "==" in proc.stdout  # printed a report


def test_bench_hotdomain_measures_the_packed_edge_prints(tmp_path: Path) -> None:
    # The remedy of issue 43's target 2: the gateways' prints go packed, and the domain reads them to the same texts.
    _, doc = _run_tiny("bench_hotdomain", tmp_path)
    fig = doc["figures"]
    assert fig["edge_packed_events"] > 0 and fig["edge_wire_mb"] > 0
    assert fig["rejects_prints"] == 0 and fig["alerts_prints"] > 0
    # ... and the staged topology's judge stage alone, on the exchange records its join stage hands on.
    assert fig["staged_judge_events_s"] > 0 and fig["staged_record_mb"] > 0 and fig["alerts_staged"] > 0


@pytest.mark.kafka
def test_bench_kafka_runs_tiny(kafka_bootstrap: str, tmp_path: Path) -> None:
    proc, doc = _run_tiny("bench_kafka", tmp_path, "--no-defaults-latency", "--bootstrap", kafka_bootstrap)
    assert doc["bench"] == "bench_kafka" and doc["mode"] == "tiny"
    for key in ("machine", "params", "figures", "baseline", "ratio", "targets", "tables"):
        assert key in doc
    assert doc["runs"]["two_workers"]["workers"] == 2
    # The batched run read the same events (a tiny run is too short for its rates to mean much).
    assert doc["runs"]["one_worker_batched_input"]["messages"] == doc["runs"]["one_worker"]["messages"]
    assert "==" in proc.stdout


@pytest.mark.kafka
def test_bench_kafka_direct_only_runs_tiny(kafka_bootstrap: str, tmp_path: Path) -> None:
    _, doc = _run_tiny(
        "bench_kafka", tmp_path, "--only", "direct", "--bootstrap", kafka_bootstrap, result="bench_kafka_direct"
    )
    assert doc["bench"] == "bench_kafka_direct" and doc["mode"] == "tiny"
    assert doc["baseline"]["core_events_per_s"] > 0
    assert set(doc["ratio"]) == {"direct_over_core", "direct_batched_over_core"}


def test_plot_soaks_draws_every_run(tmp_path: Path) -> None:
    runs = []
    for i, label in enumerate(("before", "after")):
        samples = [{"t_s": t * 10.0, "rss_bytes": (100 + t * (5 - 4 * i)) << 20} for t in range(30)]
        path = tmp_path / f"{label}.json"
        path.write_text(json.dumps({"samples": samples}))
        runs.append(f"{label}={path}")
    out = tmp_path / "soaks.png"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "plot_soaks.py"), str(out), *runs],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("json_body", [False, True])
def test_otlp_hostile_amplify_runs(json_body: bool) -> None:
    """bench/otlp_hostile.py amplify (issue 42's row of docs/security.md) at a small size: one JSON line,
    the receiver refuses the body whole and stays up."""
    extra = ["--json"] if json_body else []
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "otlp_hostile.py"), "amplify", "--spans", "40000", *extra],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
        env={**os.environ, "CROSSTALK_OTLP__MAX_DECODED_OBJECTS": "20000"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    assert row["scenario"] == "amplify" and row["status"] == 413 and row["receiver_alive"]
