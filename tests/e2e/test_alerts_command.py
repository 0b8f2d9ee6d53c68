"""`crosstalk alerts` on a JSONL alerts file: readable lines, filters, bad lines named and skipped, and
--follow as `tail -F` (appended alerts, a line written in two pieces, a rotated file)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import wait_for

from streams.cli.alerts import Filter, Viewer, read_file
from tests.support.alerts import RESOLVED, SAMPLE, alert
from tests.support.recipes import ROOT


def _write(path: Path, *records: bytes, mode: str = "wb") -> None:
    with path.open(mode) as fh:
        for r in records:
            fh.write(r + b"\n")


def _lines(path: Path, flt: Filter) -> tuple[list[str], Viewer]:
    got: list[str] = []
    viewer = Viewer(flt, got.append)
    read_file(path, viewer, follow=False, from_beginning=True, stop=threading.Event())
    return got, viewer


@pytest.fixture
def alerts_file(tmp_path: Path) -> Path:
    path = tmp_path / "alerts.jsonl"
    records = [a.model_dump_json().encode() for a in SAMPLE]
    _write(
        path,
        records[0],
        b"{not json",
        records[1],
        b"",
        b'{"kind": "banana"}',
        records[2],
        RESOLVED.model_dump_json().encode(),
    )
    return path


def test_every_alert_is_one_readable_line_and_bad_lines_are_named(
    alerts_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    got, viewer = _lines(alerts_file, Filter())
    assert len(got) == 4  # three alerts and the resolution
    first = got[0]
    for part in ("CRITICAL", "cross_tenant_contamination", "glm53-pd-1", "tenant=acme ← globex", "summary 1",
                 "incident=inc-glm53-pd", "response=chatcmpl-1"):  # fmt: skip
        assert part in first, (part, first)
    assert "RESOLVED" in got[3] and "vllm-a" in got[3] and "1 alert(s)" in got[3]
    err = capsys.readouterr().err
    assert f"{alerts_file}:2: not JSON" in err and f"{alerts_file}:5: " in err
    assert viewer.skipped == {"not_json": 1, "not_an_alert": 1}


@pytest.mark.parametrize(
    ("flt", "want"),
    [
        (Filter(min_severity="high"), ["al-1", "al-3"]),
        (Filter(domains=["glm53-*"]), ["al-1", "al-2"]),
        (Filter(tenants=["globex"]), ["al-1"]),  # the source tenant counts too
        (Filter(kinds=["overlong_accepted", "capacity_gap"]), ["al-2", "al-3"]),
        (Filter(min_severity="high", domains=["vllm-a"]), ["al-3"]),
    ],
)
def test_filters(alerts_file: Path, flt: Filter, want: list[str]) -> None:
    got, _ = _lines(alerts_file, flt)
    assert [f"al-{line.split('summary ')[1][0]}" for line in got] == want


def test_follow_prints_what_is_appended_whole_lines_only_and_follows_a_rotated_file(tmp_path: Path) -> None:
    path = tmp_path / "alerts.jsonl"
    _write(path, SAMPLE[0].model_dump_json().encode())  # there before: not shown (no --from-beginning)
    got: list[str] = []
    stop = threading.Event()
    ready = threading.Event()
    viewer = Viewer(Filter(), got.append)
    kwargs = {"follow": True, "from_beginning": False, "stop": stop, "ready": ready}
    t = threading.Thread(target=read_file, args=(path, viewer), kwargs=kwargs)
    t.start()
    try:
        assert ready.wait(10), "the follower never opened the file"
        line = alert(7, "canary_leak", "critical", "pool-x", "probe-a").model_dump_json().encode()
        with path.open("ab") as fh:  # a writer that flushes half a line first
            fh.write(line[:40])
            fh.flush()
            wait_for(lambda: fh.tell() > 0, 5)
            fh.write(line[40:] + b"\n")
        wait_for(lambda: len(got) == 1, 10, what="the appended alert")
        assert "canary_leak" in got[0] and "pool-x" in got[0]
        # Rotation: the file is moved away and a new one takes its name.
        path.rename(tmp_path / "alerts.jsonl.1")
        _write(path, alert(8, "capacity_gap", "warning", "pool-y", None).model_dump_json().encode())
        wait_for(lambda: len(got) == 2, 10, what="the alert of the new file")
        assert "pool-y" in got[1]
    finally:
        stop.set()
        t.join(10)
    assert not t.is_alive()
    assert viewer.skipped == {}


def test_the_command_as_an_operator_runs_it(alerts_file: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CROSSTALK_")} | {"PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-m", "streams.cli", "alerts", "--file", str(alerts_file), "--min-severity", "critical"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.splitlines()) == 1 and "cross_tenant_contamination" in out.stdout
    assert "crosstalk alerts: 1 shown; skipped 1 not_an_alert, 1 not_json" in out.stderr
