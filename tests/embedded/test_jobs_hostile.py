"""Hostile inputs against `crosstalk replay --jobs N` and its pre-pass (issue 42).

The parent reads the input once before the jobs fork (streams/embedded/prepass.py). It read lines with no
length bound (a 1 GiB line in a 1 MB `.gz` peaked at 2.18 GB with two jobs), let a truncated `.gz` end the
run with a traceback and exit 1 instead of the documented 6, and drained a pipe (`--jobs 2 <(…)`) so that the
jobs read nothing and the run exited 0 with 0 events.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
import threading
import tracemalloc
import zlib
from pathlib import Path

from streams.cli.main import EXIT_OK, EXIT_PARTIAL
from streams.embedded.jobs import Jobs
from streams.embedded.prepass import moved_requests
from streams.settings import load_settings
from streams.sinks.jsonl import AlertWriter

REPO = Path(__file__).resolve().parents[2]
T0 = 1_787_821_200.0
KEY = "jobs-hostile-key"  # a test key, not a secret


def incident(t: float, rid: str, domain: str = "d") -> list[dict]:
    """An overlong prompt answered 2xx: one overlong_accepted alert."""
    return [
        {"type": "cache_stats", "event_id": f"cs-{rid}", "ts": t, "cache_domain": domain, "role": "prefill",
         "capacity_tokens": 681_280, "used_tokens": 5},
        {"type": "request", "event_id": f"rq-{rid}", "ts": t + 1, "request_id": rid, "tenant_id": "t",
         "model": "m", "prompt_tokens": 900_000},
        {"type": "response", "event_id": f"rs-{rid}", "ts": t + 2, "request_id": rid, "tenant_id": "t",
         "model": "m", "cache_domain": domain, "status_code": 200, "usage": {"input_tokens": 1}},
    ]  # fmt: skip


def lines(events: list[dict]) -> bytes:
    return b"".join(json.dumps(e).encode() + b"\n" for e in events)


def incidents(n: int) -> bytes:
    return lines([e for i in range(n) for e in incident(T0 + 100 * i, f"r{i}", f"d{i % 4}")])


def cli(*args: str, **kw: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CROSSTALK_DETECTION__FINGERPRINT_KEY": KEY}
    return subprocess.run(
        [sys.executable, "-m", "streams.cli", "replay", *args, "--no-progress", "--quiet"],
        capture_output=True, text=True, timeout=300, cwd=REPO, env=env, **kw,  # type: ignore[arg-type]
    )  # fmt: skip


def test_the_pre_pass_skips_a_huge_line_in_bounded_memory(tmp_path: Path) -> None:
    # 64 MiB of one line, well under 1 MB compressed, then a request whose response names another domain.
    bomb = tmp_path / "bomb.jsonl.gz"
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    with bomb.open("wb") as fh:
        fh.write(comp.compress(b'{"type":"request","request_id":"x","prompt_text":"'))
        for _ in range(64):
            fh.write(comp.compress(b"A" * (1 << 20)))
        moved = [
            {"type": "request", "request_id": "m", "cache_domain": "a"},
            {"type": "response", "request_id": "m", "cache_domain": "b"},
        ]
        fh.write(comp.compress(b'"}\n' + lines(moved)))
        fh.write(comp.flush())
    tracemalloc.start()
    try:
        found = moved_requests([str(bomb)], 1 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert found == {"m": "b"}
    assert peak < 16 << 20, f"peak {peak / 2**20:.1f} MiB while reading a 64 MiB line"


def test_the_jobs_reject_an_oversized_line_with_its_reason(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_bytes(b'{"type":"request","prompt_text":"' + b"A" * (3 << 20) + b'"}\n' + incidents(4))
    settings = load_settings(ingest={"max_event_bytes": 1 << 20}, detection={"fingerprint_key": KEY})
    split = Jobs(settings, [str(src)], 2)
    split.start(exchanges=False)
    rejects = io.BytesIO()
    result = split.run([AlertWriter(io.BytesIO())], rejects)
    assert result.rejects == {"oversized": 1} and len(result.alerts) == 4
    [row] = [json.loads(x) for x in rejects.getvalue().splitlines()]
    assert row["reason"] == "oversized" and row["line"] == 1


def test_a_truncated_gzip_with_jobs_exits_6_without_a_traceback(tmp_path: Path) -> None:
    data = gzip.compress(incidents(40))
    gz = tmp_path / "cut.jsonl.gz"
    gz.write_bytes(data[: len(data) * 2 // 3])
    out = tmp_path / "alerts.jsonl"
    proc = cli(str(gz), "--jobs", "2", "--alerts-out", str(out), "--rejects", str(tmp_path / "r.jsonl"))
    assert proc.returncode == EXIT_PARTIAL, proc.stderr[-2000:]
    assert "input ended early" in proc.stderr and "Traceback" not in proc.stderr
    assert 0 < len(out.read_text().splitlines()) < 40


def _through_a_pipe(data: bytes, jobs: str, tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], bytes]:
    """Replay `data` read from a pipe, as `crosstalk replay <(zcat …)` gives it: /dev/fd/N."""
    r, w = os.pipe()

    def feed() -> None:
        with os.fdopen(w, "wb") as fh:
            fh.write(data)

    threading.Thread(target=feed, daemon=True).start()
    out = tmp_path / f"pipe-{jobs}.jsonl"
    try:
        proc = cli(f"/dev/fd/{r}", "--jobs", jobs, "--alerts-out", str(out), "--rejects", str(tmp_path / "r.jsonl"),
                   pass_fds=(r,))  # fmt: skip
    finally:
        os.close(r)
    return proc, out.read_bytes() if out.exists() else b""


def test_a_pipe_is_replayed_in_full_with_one_job_or_several(tmp_path: Path) -> None:
    data = incidents(12)
    src = tmp_path / "in.jsonl"
    src.write_bytes(data)
    ref = tmp_path / "ref.jsonl"
    assert cli(str(src), "--alerts-out", str(ref), "--rejects", str(tmp_path / "r0.jsonl")).returncode == EXIT_OK
    expected = ref.read_bytes()
    assert len(expected.splitlines()) == 12
    one, alerts_one = _through_a_pipe(data, "1", tmp_path)
    assert one.returncode == EXIT_OK and alerts_one == expected, one.stderr[-2000:]
    two, alerts_two = _through_a_pipe(data, "2", tmp_path)
    assert two.returncode == EXIT_OK and alerts_two == expected, two.stderr[-2000:]
    assert "is not a regular file and can be read only once: replaying with one job" in two.stderr
