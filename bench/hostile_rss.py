"""Peak RSS and wall time of `crosstalk scrape --once` and `crosstalk probe` against hostile peers (issue 25).

Each case starts `python -m tests.support.hostile` in a process of its own (so its memory is not counted),
then the command under test, polls the command's VmHWM every 0.2 s, and kills it at `--cap-s` seconds or
`--max-rss-mb` (the unfixed tree grows without end on some cases; the machine is shared).

    python bench/hostile_rss.py [--root DIR] [--cap-s 120] [--only drip,endless]

--root: the source tree to run the command from (e.g. an export of an older commit); the hostile server
always comes from this checkout. Prints one JSON line per case.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

# name -> (hostile server flags, command kind, mode, extra command flags)
CASES: dict[str, tuple[list[str], str, str, list[str]]] = {
    "scrape-drip": (["--drip-s", "3"], "scrape", "drip", []),
    "scrape-endless-5MBps": (["--rate", "5000000"], "scrape", "endless", []),
    "scrape-300MiB-body": (["--big-bytes", str(300 * 2**20)], "scrape", "big", []),
    "probe-200MB-sse-event": (["--big-bytes", str(200 * 10**6)], "probe", "big-event", ["--max-requests", "1"]),
    "probe-endless-sse": ([], "probe", "endless-sse", ["--max-requests", "1"]),
    "probe-10GB-content-length": ([], "probe", "huge-length", ["--max-requests", "1"]),
    "probe-token-every-20s": (["--drip-s", "20"], "probe", "slow-sse", ["--max-requests", "1"]),
    "probe-window-1e15": ([], "probe", "hugewindow", []),
}


def _hwm_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def run_case(name: str, root: Path, cap_s: float, max_rss_mb: int) -> dict[str, object]:
    server_flags, kind, mode, extra = CASES[name]
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.support.hostile", *server_flags], cwd=HERE, stdout=subprocess.PIPE, text=True
    )
    assert server.stdout is not None
    base = server.stdout.readline().strip()
    tmp = Path(tempfile.mkdtemp(prefix="hostile-rss-"))
    env = {**os.environ, "PYTHONPATH": str(root)}
    if kind == "scrape":
        cfg = tmp / "crosstalk.toml"
        cfg.write_text(
            "[scrape]\ntimeout_s = 5.0\n"
            f'[[scrape.targets]]\nurl = "{base}/{mode}"\nengine = "sglang"\ncache_domain = "bad"\nrole = "prefill"\n'
            f'[[scrape.targets]]\nurl = "{base}/ok"\nengine = "sglang"\ncache_domain = "good"\nrole = "prefill"\n'
        )
        cmd = ["--config", str(cfg), "scrape", "--once", "--out", str(tmp / "out.jsonl")]
    else:
        cmd = ["probe", "--base-url", f"{base}/{mode}/v1", "--rate", "200", *extra]
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "streams.cli", *cmd],
        cwd=root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    peak_kb, outcome = 0, "exited"
    try:
        while proc.poll() is None:
            peak_kb = max(peak_kb, _hwm_kb(proc.pid))
            elapsed = time.monotonic() - started
            if elapsed > cap_s or peak_kb > max_rss_mb * 1024:
                outcome = f"killed at {elapsed:.0f} s" + (" (RSS cap)" if peak_kb > max_rss_mb * 1024 else "")
                proc.send_signal(signal.SIGKILL)
                break
            time.sleep(0.2)
        proc.wait()
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(10)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    lines = [x for x in err.splitlines() if x.strip()]
    return {
        "case": name,
        "seconds": round(time.monotonic() - started, 1),
        "peak_rss_mb": round(peak_kb / 1024),
        "outcome": outcome if outcome != "exited" else f"exit {proc.returncode}",
        "last_stderr": lines[-1][:300] if lines else "",
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", type=Path, default=HERE)
    p.add_argument("--cap-s", type=float, default=120.0)
    p.add_argument("--max-rss-mb", type=int, default=4096)
    p.add_argument("--only", help="comma-separated case names")
    a = p.parse_args()
    names = a.only.split(",") if a.only else list(CASES)
    for name in names:
        print(json.dumps(run_case(name, a.root.resolve(), a.cap_s, a.max_rss_mb)), flush=True)


if __name__ == "__main__":
    main()
