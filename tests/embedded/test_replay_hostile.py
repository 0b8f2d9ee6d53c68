"""Hostile files against `crosstalk replay` (issue 11): bombs, truncation, poisoned event time, bad
bytes, SIGINT, and the CLI's one-line errors with distinct exit codes."""

from __future__ import annotations

import base64
import gzip
import json
import os
import signal
import subprocess
import sys
import time
import tracemalloc
import zlib
from pathlib import Path

import pytest

from streams.cli.main import (
    EXIT_CONFIG,
    EXIT_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OUTPUT,
    EXIT_PARTIAL,
    main,
)
from streams.embedded.runner import EmbeddedRunner
from streams.inputs.files import Parsed
from streams.settings import Settings, load_settings

REPO = Path(__file__).resolve().parents[2]
T0 = 1_787_821_200.0  # 2026-08-27T09:00:00Z


def incident(t: float, rid: str, tenant: str = "t", domain: str = "d") -> list[dict]:
    """An overlong prompt answered 2xx: one overlong_accepted alert."""
    return [
        {"type": "cache_stats", "event_id": f"cs-{rid}", "ts": t, "cache_domain": domain, "role": "prefill",
         "capacity_tokens": 681_280, "used_tokens": 5},
        {"type": "request", "event_id": f"rq-{rid}", "ts": t + 1, "request_id": rid, "tenant_id": tenant,
         "model": "m", "prompt_tokens": 900_000},
        {"type": "response", "event_id": f"rs-{rid}", "ts": t + 2, "request_id": rid, "tenant_id": tenant,
         "model": "m", "cache_domain": domain, "status_code": 200, "usage": {"input_tokens": 1}},
    ]  # fmt: skip


def lines(events: list[dict]) -> bytes:
    return b"".join(json.dumps(e).encode() + b"\n" for e in events)


def alerts_of(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def rejects_of(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streams.cli", *args],
        input=None if stdin is None else stdin.decode(), capture_output=True, text=True, timeout=120, cwd=REPO,
    )  # fmt: skip


# --- crashes on schema-valid input -------------------------------------------------------------------------


def test_huge_and_far_future_timestamps_are_rejected_and_the_run_goes_on(tmp_path: Path) -> None:
    good = incident(T0, "r1")
    bad = [
        b'{"type":"canary","event_id":"x1","ts":1'
        + b"0" * 400
        + b',"tenant_id":"probe-a","marker":"P-'
        + b"a" * 32
        + b'"}\n',
        lines([{**good[0], "event_id": "x2", "ts": 1e20}]),
        lines([{**good[0], "event_id": "x3", "ts": "9999-12-31T23:00:00-12:00"}]),
    ]
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"".join(bad) + lines(good))
    out, rej = tmp_path / "a.jsonl", tmp_path / "r.jsonl"
    assert main(["replay", str(src), "--alerts-out", str(out), "--rejects", str(rej), "--quiet"]) == 0
    assert [a["kind"] for a in alerts_of(out)] == ["overlong_accepted"]
    assert [(r["line"], r["reason"]) for r in rejects_of(rej)] == [(1, "invalid"), (2, "invalid"), (3, "invalid")]


@pytest.mark.slow  # inflates a bomb through the real CLI
def test_a_gzip_bomb_without_newlines_is_rejected_in_bounded_memory(tmp_path: Path) -> None:
    # 256 MiB of one line, a few hundred KB compressed, then a valid incident.
    bomb = tmp_path / "bomb.jsonl.gz"
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: gzip container
    block = b"A" * (1 << 20)
    with bomb.open("wb") as fh:
        fh.write(comp.compress(b'{"type":"request","prompt_text":"'))
        for _ in range(256):
            fh.write(comp.compress(block))
        fh.write(comp.compress(b'"}\n' + lines(incident(T0, "r1"))))
        fh.write(comp.flush())
    assert bomb.stat().st_size < 2 << 20
    settings = load_settings(ingest={"max_event_bytes": 1 << 20})
    runner = EmbeddedRunner(settings)
    tracemalloc.start()
    try:
        result = runner.run_files([str(bomb)])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.rejects == {"oversized": 1}
    assert [a.kind for a in result.alerts] == ["overlong_accepted"]
    assert result.bytes_in > 256 << 20
    assert peak < 32 << 20, f"peak {peak / 2**20:.1f} MiB while reading a 256 MiB line"


# --- event time poisoning ----------------------------------------------------------------------------------


def test_a_far_future_event_moves_no_clock_in_replay(tmp_path: Path) -> None:
    clean = incident(T0, "r1") + incident(T0 + 100, "r2") + incident(T0 + 200, "r3")
    # Poison first in the file, in the middle, and past the wall clock; each alone in its time.
    poison = [{**clean[0], "event_id": f"p{i}", "ts": ts} for i, ts in enumerate([T0 + 86_400 * 30, T0 + 50_000])]
    src, ref = tmp_path / "poisoned.jsonl", tmp_path / "clean.jsonl"
    past_wall_clock = {**clean[0], "event_id": "p2", "ts": time.time() + 86_400}
    src.write_bytes(lines([poison[0], *clean[:4], poison[1], *clean[4:], past_wall_clock]))
    ref.write_bytes(lines(clean))
    a, b = EmbeddedRunner(Settings()).run_files([str(src)]), EmbeddedRunner(Settings()).run_files([str(ref)])
    assert [x.alert_id for x in a.alerts] == [x.alert_id for x in b.alerts] and len(a.alerts) == 3
    assert a.rejects == {"future_ts": 3}
    assert a.counters["late"] == 0 and a.monitor is not None and a.monitor.watermark < T0 + 300


def test_a_poisoned_head_of_one_file_does_not_reorder_the_others(tmp_path: Path) -> None:
    f1, f2 = tmp_path / "gw.jsonl", tmp_path / "engine.jsonl"
    events = incident(T0, "r1") + incident(T0 + 10, "r2")
    f1.write_bytes(lines([{**events[0], "event_id": "poison", "ts": T0 + 10_000}, *events[1:3], *events[4:6]]))
    f2.write_bytes(lines([events[0], events[3]]))
    result = EmbeddedRunner(Settings()).run_files([str(f1), str(f2)])
    assert result.rejects == {"future_ts": 1} and result.counters["late"] == 0
    assert [a.kind for a in result.alerts] == ["overlong_accepted", "overlong_accepted"]


def test_a_quiet_hour_in_a_log_is_not_future(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_bytes(lines(incident(T0, "r1") + incident(T0 + 3600, "r2")))
    result = EmbeddedRunner(Settings()).run_files([str(src)])
    assert not result.rejects and len(result.alerts) == 2


# --- rejects file --------------------------------------------------------------------------------------------


def test_invalid_utf8_keeps_the_original_bytes_and_runs_are_told_apart(tmp_path: Path) -> None:
    bad = b'{"type":"request","event_id":"\xff\xfe\xc3","ts":1}'
    src = tmp_path / "in.jsonl"
    src.write_bytes(bad + b"\n" + b"plain bad line\n")
    rej = tmp_path / "sub" / "r.jsonl"
    for _ in range(2):
        assert main(["replay", str(src), "--alerts-out", str(tmp_path / "a.jsonl"), "--rejects", str(rej),
                     "--quiet"]) == 0  # fmt: skip
    rows = rejects_of(rej)
    assert len(rows) == 4 and len({r["run_id"] for r in rows}) == 2
    assert rows[0]["raw"] is None and base64.b64decode(rows[0]["raw_b64"]) == bad
    assert rows[1]["raw"] == "plain bad line" and "raw_b64" not in rows[1]


# --- truncation and interruption -----------------------------------------------------------------------------


def test_a_truncated_gzip_stops_cleanly_with_what_was_read(tmp_path: Path) -> None:
    events = [e for i in range(40) for e in incident(T0 + 100 * i, f"r{i}")]
    data = gzip.compress(lines(events))
    gz = tmp_path / "cut.jsonl.gz"
    gz.write_bytes(data[: len(data) * 2 // 3])
    out = tmp_path / "out" / "alerts.jsonl"
    proc = cli("replay", str(gz), "--alerts-out", str(out), "--rejects", str(tmp_path / "r.jsonl"))
    assert proc.returncode == EXIT_PARTIAL, proc.stderr
    assert "run summary" in proc.stderr and "input ended early" in proc.stderr and "Traceback" not in proc.stderr
    assert 0 < len(alerts_of(out)) < 40


def test_keyboard_interrupt_flushes_and_reports(tmp_path: Path) -> None:
    from schemas.events import parse_event

    def items():  # the second incident's alert is still buffered (domain lateness) when Ctrl-C comes
        for i, e in enumerate(incident(T0, "r1")):
            yield Parsed(e["ts"], i, "f", i + 1, parse_event(json.dumps(e)))
        raise KeyboardInterrupt

    runner = EmbeddedRunner(load_settings(detection={"domain_lateness_s": 60.0}))
    result = runner.run_parsed(items())
    assert result.interrupted and [a.kind for a in result.alerts] == ["overlong_accepted"]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigint_ends_replay_with_summary_alerts_and_exit_130(tmp_path: Path) -> None:
    out = tmp_path / "alerts.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "streams.cli", "replay", "-", "--alerts-out", str(out), "--rejects",
         str(tmp_path / "r.jsonl")],
        stdin=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO,
    )  # fmt: skip
    assert proc.stdin is not None
    proc.stdin.write(lines(incident(T0, "r1") + incident(T0 + 100, "r2")))
    proc.stdin.flush()
    deadline = time.monotonic() + 60
    while not (out.exists() and out.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)  # the first alert is out: the process is reading; stdin stays open
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    text = stderr.decode()
    assert proc.returncode == EXIT_INTERRUPTED, text
    assert "run summary" in text and "interrupted" in text and "Traceback" not in text
    assert [a["kind"] for a in alerts_of(out)] == ["overlong_accepted", "overlong_accepted"]  # the 2nd: by flush


# --- CLI errors: one line, distinct exit codes ---------------------------------------------------------------


@pytest.mark.parametrize("case", ["missing", "directory", "not_gzip"])
def test_unreadable_inputs_are_one_line_errors(tmp_path: Path, case: str) -> None:
    path = {"missing": tmp_path / "nope.jsonl", "directory": tmp_path, "not_gzip": tmp_path / "x.jsonl.gz"}[case]
    if case == "not_gzip":
        path.write_text('{"type": "request"}\n')
    proc = cli("replay", str(path), "--rejects", str(tmp_path / "r.jsonl"))
    assert proc.returncode == EXIT_INPUT
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("crosstalk: error: ") and str(path) in proc.stderr


def test_alerts_out_parents_are_created_and_an_impossible_output_is_an_error(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_bytes(lines(incident(T0, "r1")))
    deep = tmp_path / "a" / "b" / "alerts.jsonl"
    assert main(["replay", str(src), "--alerts-out", str(deep), "--quiet"]) == 0 and alerts_of(deep)
    (tmp_path / "file").write_text("")
    proc = cli("replay", str(src), "--alerts-out", str(tmp_path / "file" / "alerts.jsonl"))
    assert proc.returncode == EXIT_OUTPUT and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    "content, env",
    [("this is [not toml", {}), ("[ingest]\nmax_event_bytes = 'lots'\n", {}), (None, {})],
)
def test_bad_settings_are_one_line_errors(tmp_path: Path, content: str | None, env: dict) -> None:
    cfg = tmp_path / "s.toml"
    if content is not None:
        cfg.write_text(content)
    src = tmp_path / "in.jsonl"
    src.write_bytes(lines(incident(T0, "r1")))
    for command in (["replay", str(src)], ["settings"]):
        proc = cli("--config", str(cfg), *command)
        assert proc.returncode == EXIT_CONFIG, proc.stderr
        assert proc.stderr.count("\n") == 1 and "s.toml" in proc.stderr and "Traceback" not in proc.stderr


def test_bad_settings_from_the_environment_are_one_line_errors(tmp_path: Path) -> None:
    env = os.environ | {"CROSSTALK_INGEST__MAX_EVENT_BYTES": "lots"}
    proc = subprocess.run([sys.executable, "-m", "streams.cli", "settings"], capture_output=True, text=True,
                          env=env, timeout=60, cwd=REPO)  # fmt: skip
    assert proc.returncode == EXIT_CONFIG and "ingest.max_event_bytes" in proc.stderr and proc.stderr.count("\n") == 1
