"""A request with a weak canary marker is kept without it (issue 24): through the replay path, end to end."""

from __future__ import annotations

import json
from pathlib import Path

from factories import PROBE_MARKER, weak_canary_story

from streams.embedded.runner import EmbeddedRunner
from streams.settings import Settings

T0 = 1_780_000_000.0


def test_replay_keeps_the_request_drops_the_weak_marker_and_warns(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    events.write_bytes(b"\n".join(weak_canary_story(T0)) + b"\n")
    rejects = tmp_path / "rejects.jsonl"
    with rejects.open("wb") as out:
        result = EmbeddedRunner(Settings(detection={"fingerprint_key": "k"}), rejects_out=out).run_files([str(events)])
    # The request was used: its prompt explains its answer (no false cross-tenant alarm from probe-a) and its
    # good marker was planted (the other tenant's answer carrying it is the one real finding).
    kinds = sorted((a.kind, a.tenant_id, a.source_tenant_id) for a in result.alerts)
    assert kinds == [("canary_leak", "acme", "probe-b")], kinds
    assert result.events["request"] == 3 and not result.rejects
    assert result.warnings == {"weak_canary": 1} and result.counters["canaries.dropped_weak"] == 1
    # The rejects file says so, as a warning naming the event and the reason, without the line's text.
    (row,) = [json.loads(line) for line in rejects.read_bytes().splitlines()]
    assert row["severity"] == "warning" and row["kept"] is True and row["reason"] == "weak_canary"
    assert (row["event_id"], row["line"]) == ("q2", 3) and row["detail"].startswith("canaries[0]: 4 hex digits")
    text = rejects.read_text()
    assert "prompt" not in row and "raw" not in row and "quick evaluation" not in text
    assert PROBE_MARKER not in text and "CTK-1234" not in text
