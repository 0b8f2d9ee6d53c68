"""Shared helpers of the benchmarks: machine info, result files, tables, progress, cached inputs.

Every benchmark measures its figure and its baseline in the same run, on the same input, in the same
process, and writes `bench/results/<name>.json` with both and their ratio. Inputs come from the
simulator with fixed seeds, so the shape of the results is reproducible.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import orjson  # noqa: E402

RESULTS = ROOT / "bench" / "results"
DATA = ROOT / "bench" / "data"  # ignored by git: generated inputs, cached between runs
MB = 1_000_000


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true", help="small sizes: a minute or so")
    # Tiny sizes for the smoke test: checks the script runs end to end, measures nothing meaningful.
    p.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, default=RESULTS, help="directory for <name>.json (default bench/results)")
    p.add_argument("--data", type=Path, default=DATA, help="directory for generated inputs (default bench/data)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--no-progress", action="store_true", help="no progress lines on stderr")
    return p


def mode(args: argparse.Namespace) -> str:
    return "tiny" if args.tiny else "quick" if args.quick else "full"


def pick(args: argparse.Namespace, full: Any, quick: Any, tiny: Any) -> Any:
    return {"full": full, "quick": quick, "tiny": tiny}[mode(args)]


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_total() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5
        )
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def machine() -> dict[str, Any]:
    import numpy
    import pydantic
    import pydantic_core

    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "logical_cpus": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "mem_total_bytes": _mem_total(),
        "numpy": numpy.__version__,
        "pydantic": pydantic.VERSION,
        "pydantic_core": pydantic_core.__version__,
        "orjson": orjson.__version__,
        "git_commit": _git_commit(),
    }


def rss_bytes() -> int:
    """Resident set size of this process now (Linux), else peak RSS."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class Progress:
    """A progress line on stderr, at most twice a second; silent when disabled."""

    def __init__(self, label: str, total: float | None, enabled: bool = True, unit: str = "") -> None:
        self.label = label
        self.total = total
        self.enabled = enabled
        self.unit = unit
        self.start = time.perf_counter()
        self._last = 0.0

    def update(self, done: float, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if not force and now - self._last < 0.5:
            return
        self._last = now
        elapsed = now - self.start
        if self.total:
            share = min(done / self.total, 1.0)
            eta = elapsed / share - elapsed if share > 0 else float("nan")
            msg = f"{self.label}: {share:6.1%} ({done:,.0f}/{self.total:,.0f}{self.unit})"
            msg += f" {elapsed:6.1f}s eta {eta:5.0f}s"
        else:
            msg = f"{self.label}: {done:,.0f}{self.unit} {elapsed:6.1f}s"
        print("\r" + msg, end="", file=sys.stderr, flush=True)

    def done(self) -> None:
        if self.enabled:
            print(f"\r{self.label}: done in {time.perf_counter() - self.start:.1f}s" + " " * 30, file=sys.stderr)


def log(args: argparse.Namespace, msg: str) -> None:
    if not args.no_progress:
        print(msg, file=sys.stderr, flush=True)


def best_of(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """Smallest wall time of `repeat` runs (GC collected before each) and the last result."""
    best = float("inf")
    result = None
    for _ in range(max(1, repeat)):
        gc.collect()
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def table(rows: list[dict[str, Any]], columns: list[str] | None = None) -> str:
    if not rows:
        return "(no rows)"
    columns = columns or list(rows[0])

    def fmt(v: Any) -> str:
        if isinstance(v, float):
            if v != 0 and (abs(v) >= 1e6 or abs(v) < 1e-3):
                return f"{v:.3g}"
            return f"{v:,.3f}" if abs(v) < 10 else f"{v:,.1f}"
        if isinstance(v, int) and not isinstance(v, bool):
            return f"{v:,}"
        if v is None:
            return "-"
        return str(v)

    cells = [[fmt(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    for row in cells:
        lines.append(
            "  ".join(v.rjust(w) if i else v.ljust(w) for i, (v, w) in enumerate(zip(row, widths, strict=True)))
        )
    return "\n".join(lines)


def target(value: float, goal: float, *, at_least: bool = True, unit: str = "") -> dict[str, Any]:
    met = value >= goal if at_least else value <= goal
    return {"value": round(value, 4), "goal": ("≥ " if at_least else "≤ ") + f"{goal}{unit}", "met": bool(met)}


def write(
    name: str,
    args: argparse.Namespace,
    *,
    params: dict[str, Any],
    figures: dict[str, Any],
    baseline: dict[str, Any],
    ratio: dict[str, Any],
    targets: dict[str, Any] | None = None,
    tables: dict[str, str] | None = None,
    extra: dict[str, Any] | None = None,
) -> Path:
    args.out.mkdir(parents=True, exist_ok=True)
    doc = {
        "bench": name,
        "mode": mode(args),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(),
        "params": params,
        "figures": figures,
        "baseline": baseline,
        "ratio": ratio,
        "targets": targets or {},
        "tables": tables or {},
        **(extra or {}),
    }
    path = args.out / f"{name}.json"
    path.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))
    return path


def report(title: str, tables: dict[str, str], targets: dict[str, Any] | None, path: Path) -> None:
    print(f"\n== {title} ==")
    for name, text in tables.items():
        print(f"\n{name}:\n{text}")
    if targets:
        print("\ntargets:")
        for name, t in targets.items():
            print(f"  {'MET ' if t['met'] else 'MISS'} {name}: {t['value']} (goal {t['goal']})")
    print(f"\nwrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")


# --- inputs -------------------------------------------------------------------------------------


def sim_events(seed: int, duration_s: float, rate: float, **kw: Any) -> Iterator[dict[str, Any]]:
    """Simulator events (dicts, event-time order). Labels are discarded as they accrue (bounded memory)."""
    from streams.sim.simulate import SimConfig, iter_simulation

    events, labels = iter_simulation(SimConfig(seed=seed, duration_s=duration_s, rate=rate, **kw))
    for n, ev in enumerate(events):
        if n % 4096 == 0:
            labels.responses.clear()
            labels.leaks.clear()
        yield ev


TEXT_FIELDS = ("prompt_text", "output_text")


def text_free_lines(
    args: argparse.Namespace, copies: int, duration_s: float = 1200.0, rate: float = 8.0
) -> list[bytes]:
    """JSON lines of simulator events without any prompt/output text, `copies` times over.

    One simulated run (cached in bench/data) is repeated with shifted event time and suffixed ids, so
    large inputs cost no simulation time; every copy is a valid, distinct stretch of traffic.
    """
    args.data.mkdir(parents=True, exist_ok=True)
    path = args.data / f"textfree-seed{args.seed}-{int(duration_s)}s-r{rate:g}.jsonl"
    if not path.exists():
        log(args, f"simulating {duration_s:.0f}s of traffic at {rate:g} req/s (cached in {path}) ...")
        tmp = path.with_suffix(".tmp")
        with tmp.open("wb") as fh:
            for ev in sim_events(args.seed, duration_s, rate):
                for f in TEXT_FIELDS:
                    ev.pop(f, None)
                fh.write(orjson.dumps(ev) + b"\n")
        tmp.rename(path)
    base = [orjson.loads(line) for line in path.read_bytes().splitlines() if line]
    span = duration_s + 60.0
    out: list[bytes] = []
    for c in range(copies):
        for ev in base:
            if c:
                ev = dict(ev)
                ev["ts"] = ev["ts"] + c * span
                ev["event_id"] = f"{ev['event_id']}~{c}"
                for f in ("request_id", "session_id"):
                    if ev.get(f):
                        ev[f] = f"{ev[f]}~{c}"
            out.append(orjson.dumps(ev))
    return out
