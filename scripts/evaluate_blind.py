#!/usr/bin/env python
"""Score crosstalk on the frozen blind profile (streams/sim/blind): shapes x seeds x fingerprint keys.

For each shape and seed the profile writes events and labels; for each key `crosstalk replay` (embedded runner,
no operator corpus: CROSSTALK_CORPUS__PATH is cleared) writes alerts and `crosstalk evaluate` scores them.
Every figure is reported per shape and key, and as the WORST over keys and shapes.

    python scripts/evaluate_blind.py            # default: 4 shapes x 3 seeds x 3 keys (about 7 min)
    python scripts/evaluate_blind.py --quick    # 2 small shapes, short runs (under a minute)
    python scripts/evaluate_blind.py --corpus rag   # the operator-corpus dial: the deployment's shared RAG
                                                    # collection loaded with `crosstalk corpus add` (what an
                                                    # operator serving RAG over it holds), nothing else

Writes bench/results/blind-<date>.json and .md (or --out PREFIX).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from schemas.alert import SEVERITY_RANK  # noqa: E402
from streams.sim.blind.__main__ import write  # noqa: E402
from streams.sim.blind.world import Shape, build_world  # noqa: E402
from streams.sim.evaluate import evaluate, load_alerts  # noqa: E402

SHAPES: dict[str, dict[str, Any]] = {
    # a small, slow deployment over a long stretch; two of its nine tenants write Japanese
    "small-slow-ja": {"tenants": 9, "rate": 0.7, "duration_s": 3600.0, "domains": 1, "ja_tenants": 2},
    "eight-2pools": {
        "tenants": 8,
        "rate": 1.0,
        "duration_s": 1200.0,
        "domains": 2,
        "ja_tenants": 2,
        "zh_tenants": 1,
        "de_tenants": 1,
    },
    "mid-24": {"tenants": 24, "rate": 2.0, "duration_s": 1200.0, "domains": 2, "ja_tenants": 2},
    "busy-60": {"tenants": 60, "rate": 6.0, "duration_s": 900.0, "domains": 4, "ja_tenants": 3},
}
QUICK = {
    "quick-small-ja": {"tenants": 9, "rate": 0.8, "duration_s": 420.0, "domains": 1, "ja_tenants": 2},
    "quick-busy": {"tenants": 30, "rate": 3.0, "duration_s": 240.0, "domains": 2, "ja_tenants": 2},
}
KEY_LABELS = ("blind-key-1", "blind-key-2", "blind-key-3", "blind-key-4", "blind-key-5")
CLASSES = ("stale_kv_abort", "whole_response", "prefix_collision", "spliced_page", "cross_session")


def key_of(label: str) -> str:
    # Fixed, public test keys: the figure must hold for any key, so these are as good as secret ones.
    return hashlib.sha256(label.encode()).hexdigest()


def rag_texts(shape: Shape, where: Path) -> list[Path]:
    """The deployment's shared RAG collection, one file per language (the same world for every key)."""
    texts = where / "rag"
    texts.mkdir(parents=True, exist_ok=True)
    for lang, chunks in build_world(shape).rag.items():
        (texts / f"{lang}.txt").write_text("\n\n".join(chunks), encoding="utf-8")
    return sorted(texts.glob("*.txt"))


def rag_corpus(texts: list[Path], where: Path, key: str) -> Path:
    """The RAG collection's files (`rag_texts`) as a corpus under `key`."""
    corpus = where / f"rag-{hashlib.sha256(key.encode()).hexdigest()[:8]}.corpus"
    corpus.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CROSSTALK_")}
    env["CROSSTALK_DETECTION__FINGERPRINT_KEY"] = key
    cmd = [
        sys.executable,
        "-m",
        "streams.cli",
        "corpus",
        "--corpus",
        str(corpus),
        "add",
        *map(str, texts),
    ]
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    return corpus


def replay(events: Path, alerts: Path, rejects: Path, key: str, corpus: Path | None = None) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CROSSTALK_")}
    env["CROSSTALK_DETECTION__FINGERPRINT_KEY"] = key
    if corpus is not None:
        env["CROSSTALK_CORPUS__PATH"] = str(corpus)
    t = time.monotonic()
    cmd = [
        sys.executable,
        "-m",
        "streams.cli",
        "replay",
        str(events),
        "--alerts-out",
        str(alerts),
        "--rejects",
        str(rejects),
        "--quiet",
        "--no-progress",
    ]
    subprocess.run(cmd, cwd=ROOT, env=env, check=True)
    return time.monotonic() - t


def _rate(n: int, d: int) -> float | None:
    return n / d if d else None


def figures(labels: dict[str, Any], alerts_path: Path) -> dict[str, Any]:
    alerts = load_alerts(str(alerts_path))
    ev = evaluate(labels, alerts)
    rows = labels["responses"]
    out: dict[str, Any] = {
        "responses": ev.responses,
        "clean_2xx": ev.clean_2xx,
        "contaminated": ev.contaminated,
        "false_high": ev.false_alarms,
        "false_high_rate": ev.false_alarm_rate,
        "false_warning": ev.warning_alarms,
        "false_warning_rate": ev.warning_alarm_rate,
        "exposure": ev.exposure_recall,
        "attribution": ev.attribution_accuracy,
        "delay_s": ev.detection_delay_s,
        "alerts": ev.alerts,
    }
    scen = ev.groups.get("scenario", {})
    out["content_only_exposure"] = scen.get("content_only", {}).get("exposure")
    out["mechanism_exposure"] = scen.get("mechanism", {}).get("exposure")
    per_class: dict[str, Any] = {}
    for c in CLASSES:
        sub = [r for r in rows if r["contaminated"] and r.get("leak_kind") == c]
        if sub:
            e = evaluate({"responses": sub}, alerts)
            per_class[c] = {"n": len(sub), "exposure": e.exposure_recall, "attribution": e.attribution_accuracy}
    out["per_class"] = per_class
    # Leaks that carry at least 16 units of the source tenant's own text, apart from those that are mostly
    # stock phrasing and public text (a whole answer of public docs is still a leak, but hardly visible).
    rich = [r for r in rows if r["contaminated"] and r.get("private_units", 0) >= 16]
    if rich:
        e = evaluate({"responses": rich}, alerts)
        out["exposure_private16"] = e.exposure_recall
        out["n_private16"] = len(rich)
    by_lang = ev.groups.get("clean_by_receiver_lang", {})
    out["false_high_by_lang"] = {k: v["high"] for k, v in by_lang.items()}
    out["alerts_by_kind"] = _kinds(alerts)
    return out


def _kinds(alerts: list[Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for a in alerts:
        if SEVERITY_RANK[a.severity] >= SEVERITY_RANK["high"]:
            out[a.kind] = out.get(a.kind, 0) + 1
    return dict(sorted(out.items()))


def worst(results: list[dict[str, Any]]) -> dict[str, Any]:
    def hi(k: str) -> Any:
        vals = [r["figures"][k] for r in results if r["figures"].get(k) is not None]
        return max(vals) if vals else None

    def lo(k: str) -> Any:
        vals = [r["figures"][k] for r in results if r["figures"].get(k) is not None]
        return min(vals) if vals else None

    w = {k: hi(k) for k in ("false_high_rate", "false_warning_rate", "false_high", "false_warning", "delay_s")}
    w |= {
        k: lo(k)
        for k in ("exposure", "content_only_exposure", "mechanism_exposure", "attribution", "exposure_private16")
    }
    w["per_class"] = {}
    for c in CLASSES:
        ex = [r["figures"]["per_class"][c]["exposure"] for r in results if c in r["figures"]["per_class"]]
        at = [r["figures"]["per_class"][c]["attribution"] for r in results if c in r["figures"]["per_class"]]
        n = sum(r["figures"]["per_class"][c]["n"] for r in results if c in r["figures"]["per_class"])
        if ex:
            pooled = [r["figures"]["per_class"][c] for r in results if c in r["figures"]["per_class"]]
            w["per_class"][c] = {
                "exposure": min(ex),
                "attribution": min(at),
                "n_total": n,
                # all runs together: a small run with three leaks of a class and none flagged reads 0 %
                "pooled_exposure": sum(x["n"] * x["exposure"] for x in pooled) / n,
                "pooled_attribution": sum(x["n"] * x["attribution"] for x in pooled) / n,
            }
    return w


def _pct(x: float | None, digits: int = 1) -> str:
    return "–" if x is None else f"{100 * x:.{digits}f} %"


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"# Blind profile: crosstalk {report['date']}",
        "",
        f"Profile `{report['profile']}` (streams/sim/blind, frozen); "
        + ("operator corpus: the shared RAG collection" if report.get("corpus") == "rag" else "no operator corpus")
        + "; keys: "
        f"{', '.join(report['keys'])}; crosstalk at {report['commit']}.",
        "",
        "| shape | seed | key | clean 2xx | false high+ | false warning+ | exposure | content-only | "
        "mechanism | attribution | exposure (≥16 own units) | delay |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["runs"]:
        f = r["figures"]
        delay = "–" if f["delay_s"] is None else f"{f['delay_s']:.0f} s"
        lines.append(
            f"| {r['shape']} | {r['seed']} | {r['key']} | {f['clean_2xx']} | {_pct(f['false_high_rate'], 2)} "
            f"({f['false_high']}) | {_pct(f['false_warning_rate'], 2)} ({f['false_warning']}) | "
            f"{_pct(f['exposure'])} ({f['contaminated']}) | {_pct(f['content_only_exposure'])} | "
            f"{_pct(f['mechanism_exposure'])} | {_pct(f['attribution'])} | "
            f"{_pct(f.get('exposure_private16'))} | {delay} |"
        )
    w = report["worst"]
    delay = "–" if w["delay_s"] is None else f"{w['delay_s']:.0f} s"
    lines.append(
        f"| **WORST** | | | | **{_pct(w['false_high_rate'], 2)}** | **{_pct(w['false_warning_rate'], 2)}** | "
        f"**{_pct(w['exposure'])}** | **{_pct(w['content_only_exposure'])}** | **{_pct(w['mechanism_exposure'])}** | "
        f"**{_pct(w['attribution'])}** | **{_pct(w['exposure_private16'])}** | **{delay}** |"
    )
    lines += [
        "",
        "Per leak class: the worst run over shapes, seeds and keys, and all runs pooled:",
        "",
        "| class | leaks, summed over runs (each once per key) | exposure, worst | attribution, worst "
        "| exposure, pooled | attribution, pooled |",
        "|---|---|---|---|---|---|",
    ]
    for c, v in w["per_class"].items():
        lines.append(
            f"| {c} | {v['n_total']} | {_pct(v['exposure'])} | {_pct(v['attribution'])} | "
            f"{_pct(v.get('pooled_exposure'))} | {_pct(v.get('pooled_attribution'))} |"
        )
    lines += ["", "Shapes:", ""]
    for name, s in report["shapes"].items():
        lines.append(f"- `{name}`: {', '.join(f'{k}={v}' for k, v in s.items())}")
    lines += ["", f"Wall time {report['wall_s']:.0f} s on this machine."]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="two small shapes, short runs")
    ap.add_argument("--seeds", type=int, nargs="+", help="default 1 2 3 (--quick: 1)")
    ap.add_argument("--keys", type=int, default=3, help="fingerprint keys per run (3..5)")
    ap.add_argument("--shapes", nargs="+", help="names of shapes to run (default: all)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/crosstalk-blind"), help="events, labels, alerts")
    ap.add_argument("--out", type=Path, help="output prefix (default bench/results/blind-<date>)")
    ap.add_argument("--render", type=Path, help="only re-write the .md (and worst figures) of this results JSON")
    ap.add_argument("--corpus", choices=["none", "rag"], default="none", help="the operator-corpus dial (default none)")
    a = ap.parse_args()
    if a.render:
        report = orjson.loads(a.render.read_bytes())
        report["worst"] = worst(report["runs"])
        a.render.write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2) + b"\n")
        a.render.with_suffix(".md").write_text(markdown(report), encoding="utf-8")
        return 0
    shapes = QUICK if a.quick else SHAPES
    if a.shapes:
        shapes = {k: v for k, v in {**SHAPES, **QUICK}.items() if k in a.shapes}
    a.seeds = a.seeds or ([1] if a.quick else [1, 2, 3])
    keys = KEY_LABELS[: max(1, min(a.keys, len(KEY_LABELS)))]
    date = dt.date.today().isoformat()
    out = a.out or ROOT / "bench" / "results" / (f"blind-{date}" + ("-quick" if a.quick else ""))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    t0 = time.monotonic()
    runs = []
    total = len(shapes) * len(a.seeds) * len(keys)
    for name, params in shapes.items():
        for seed in a.seeds:
            shape = Shape(seed=seed, **params)
            where = a.work / f"{name}-s{seed}"
            paths = write(shape, where)
            labels = orjson.loads(paths["labels"].read_bytes())
            texts = rag_texts(shape, where) if a.corpus == "rag" else []
            for key in keys:
                alerts = where / f"alerts-{key}.jsonl"
                alerts.unlink(missing_ok=True)
                corpus = rag_corpus(texts, where, key_of(key)) if texts else None
                secs = replay(paths["events"], alerts, where / f"rejects-{key}.jsonl", key_of(key), corpus)
                rejects = where / f"rejects-{key}.jsonl"
                n_rej = sum(1 for _ in rejects.open()) if rejects.exists() else 0
                f = figures(labels, alerts)
                f["rejects"] = n_rej
                runs.append({"shape": name, "seed": seed, "key": key, "replay_s": round(secs, 1), "figures": f})
                print(
                    f"[{len(runs)}/{total}] {name} seed {seed} {key}: {f['clean_2xx']} clean, false high+ "
                    f"{f['false_high']} ({_pct(f['false_high_rate'], 2)}), warning+ {f['false_warning']}, exposure "
                    f"{_pct(f['exposure'])} of {f['contaminated']}, content-only {_pct(f['content_only_exposure'])}, "
                    f"rejects {n_rej}, replay {secs:.0f} s, {time.monotonic() - t0:.0f} s in",
                    file=sys.stderr,
                )
    report = {
        "date": date,
        "profile": "blind-v1",
        "corpus": a.corpus,
        "commit": commit.strip(),
        "keys": list(keys),
        "shapes": {k: v for k, v in shapes.items()},
        "seeds": a.seeds,
        "runs": runs,
        "worst": worst(runs),
        "wall_s": time.monotonic() - t0,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{out}.json").write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2) + b"\n")
    md = markdown(report)
    Path(f"{out}.md").write_text(md, encoding="utf-8")
    print(md)
    print(f"wrote {out}.json and {out}.md", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
