"""Issue 25: `crosstalk replay --format otlp-json` goes on past spans the mapping cannot take: each is a
line in the rejects file with its reason (and no text), and the spans after it still raise their alert."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
from otlp_hostile import CASES, T_NOW, batch, good_span, with_attr

from tests.support.otlp import export_request

REPO = Path(__file__).resolve().parents[2]


def test_replay_otlp_json_continues_past_hostile_spans(tmp_path: Path) -> None:
    stats = {"type": "cache_stats", "event_id": "cs-1", "ts": T_NOW - 1, "cache_domain": "d1", "role": "prefill",
             "capacity_tokens": 681_280, "used_tokens": 5}  # fmt: skip
    # after all the hostile lines: an overlong prompt answered 2xx, one overlong_accepted alert
    overlong = with_attr(good_span("late-1", t=T_NOW + 60), "crosstalk.prompt_tokens", {"intValue": "900000"})
    overlong = with_attr(overlong, "gen_ai.usage.input_tokens", {"intValue": "1"})
    lines = [orjson.dumps(stats)]
    lines += [batch(case, (f"g{i}-1", f"g{i}-2")) for i, case in enumerate(CASES)]
    lines.append(orjson.dumps(export_request([overlong])))
    src = tmp_path / "spans.jsonl"
    src.write_bytes(b"\n".join(lines) + b"\n")
    alerts, rejects = tmp_path / "alerts.jsonl", tmp_path / "rejects.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "streams.cli", "replay", "--format", "otlp-json", str(src), "--quiet",
         "--no-progress", "--alerts-out", str(alerts), "--rejects", str(rejects)],
        capture_output=True, text=True, timeout=300, cwd=REPO,
        # the 2.6 M-character prompt's line (7.8 MB) must reach the mapping, past the 4 MiB line limit
        env={**os.environ, "CROSSTALK_INGEST__MAX_EVENT_BYTES": str(16 << 20)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    kinds = [orjson.loads(x)["kind"] for x in alerts.read_bytes().splitlines()]
    assert "overlong_accepted" in kinds
    got = [orjson.loads(x) for x in rejects.read_bytes().splitlines()]
    assert sorted(r["reason"] for r in got) == sorted(CASES.values())
    # a reject holds the span's ids and reason, not the line: no prompt text
    assert all(set(orjson.loads(r["raw"])) == {"reason", "detail", "trace_id", "span_id", "span_name"} for r in got)
    assert not any("\u4e00" <= ch <= "\u9fff" for ch in rejects.read_text())


def test_an_oversized_otlp_line_is_rejected_without_its_text(tmp_path: Path) -> None:
    """Issue 42: the oversized line's reject kept its first 64 KiB, message text included; now its size, a
    hash of what was read, and the reason. The spans after it are still mapped."""
    from streams.embedded.runner import EmbeddedRunner
    from streams.settings import load_settings

    text = "confidential quarterly figures " * 4000  # 124 KB of prompt text
    big = with_attr(good_span("big-1"), "gen_ai.input.messages", {"stringValue": orjson.dumps(
        [{"role": "user", "parts": [{"type": "text", "content": text}]}]).decode()})  # fmt: skip
    src = tmp_path / "spans.jsonl"
    src.write_bytes(orjson.dumps(export_request([big])) + b"\n" + batch("tokens_inf") + b"\n")
    rejects = tmp_path / "rejects.jsonl"
    with rejects.open("wb") as out:
        runner = EmbeddedRunner(load_settings(ingest={"max_event_bytes": 64 * 1024}), rejects_out=out)
        result = runner.run_files([str(src)], format="otlp-json")
    assert result.rejects["oversized"] == 1 and result.events["request"] == 2
    stored = rejects.read_text()
    assert "confidential" not in stored
    oversized = next(r for r in map(orjson.loads, stored.splitlines()) if r["reason"] == "oversized")
    assert oversized["raw"] is None and oversized["raw_withheld"] is True
    assert len(oversized["raw_sha256"]) == 64 and oversized["raw_bytes_read"] > 0
