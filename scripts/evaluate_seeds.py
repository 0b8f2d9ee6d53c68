"""Detection quality on the simulator's ground truth: every profile, the default seed and five others.

Per (profile, seed): simulate (default 20 minutes, fault from the middle) -> the embedded core, in-process
-> `streams.sim.evaluate`. `multilingual+corpus` is the multilingual run with the operator's corpus loaded:
the profile's public documents (`crosstalk simulate --public-corpus-out`) added with `crosstalk corpus add`
(same process, so the same per-process fingerprint key). Writes docs/evaluation.json (every figure, per
scenario and language group), docs/evaluation-seeds.md (the per-seed
tables that docs/evaluation.md summarises) and docs/img/evaluation.png.

    .venv/bin/python scripts/evaluate_seeds.py [--profiles multilingual stdlib-code] [--seeds 7 1 2 3 4 5 11]
        [--held-out 3 4 5 11] [--duration 1200] [--fault-at 600] [--no-fault] [--tenants 24] [--rate 4]

The fingerprint key is pinned (`--key`; a test key, not a secret): winnowing selects different k-grams under
each key, so with a random key per process the same seed gives figures a response or two apart from run to run.
Seeds in `--held-out` were not looked at while the detector was developed: their pooled figures are shown apart.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from schemas.events import EventError, parse_event
from streams.cli.main import main as cli_main
from streams.embedded.runner import EmbeddedRunner
from streams.settings import CorpusSettings, Settings, load_settings
from streams.sim.evaluate import evaluate
from streams.sim.simulate import PROFILES, SimConfig, iter_simulation, write_public_corpus

ROOT = Path(__file__).resolve().parent.parent


def with_corpus(settings: Settings, config: SimConfig, tmp: Path) -> Settings:
    """Settings with the profile's public documents loaded as the operator's corpus, via `crosstalk corpus add`."""
    text, corpus = tmp / "public.txt", tmp / "public.corpus"
    write_public_corpus(text, config)
    with contextlib.redirect_stderr(io.StringIO()):
        if cli_main(["corpus", "add", str(text), "--corpus", str(corpus)]) != 0:
            raise SystemExit("crosstalk corpus add failed")
    return settings.model_copy(update={"corpus": CorpusSettings(path=str(corpus))})


def one(
    variant: str, seed: int, duration_s: float, fault_at_s: float | str | None, tenants: int = 24, rate: float = 4.0
) -> dict[str, Any]:
    profile = variant.removesuffix("+corpus")
    settings = load_settings()
    config = SimConfig(
        profile=profile, seed=seed, duration_s=duration_s, fault_at_s=fault_at_s, tenants=tenants, rate=rate
    )
    if variant.endswith("+corpus"):
        with tempfile.TemporaryDirectory() as tmp:
            settings = with_corpus(settings, config, Path(tmp))
            runner = EmbeddedRunner(settings)  # reads the corpus file now
    else:
        runner = EmbeddedRunner(settings)
    events, labels = iter_simulation(config)
    start = time.perf_counter()
    for obj in events:
        raw = orjson.dumps(obj)
        try:
            runner.feed(parse_event(raw), "sim", None, raw)
        except EventError as exc:
            runner.reject("sim", None, exc.reason, exc.detail, raw)
    result = runner.finish(start)
    out = evaluate(labels.to_dict(), result.alerts).as_dict()
    out |= {"profile": variant, "seed": seed, "events": result.events_total, "alerts_total": len(result.alerts)}
    out["seconds"] = result.seconds
    out["alerts_by_severity"] = {
        sev: sum(1 for a in result.alerts if a.severity == sev) for sev in ("info", "warning", "high", "critical")
    }
    return out


def _pooled(rows: list[dict[str, Any]], group: str, value: str) -> dict[str, Any]:
    """Figures of one group summed over seeds (counts add; rates recomputed)."""
    figs = [r["groups"].get(group, {}).get(value) for r in rows]
    figs = [f for f in figs if f]
    if not figs:
        return {}
    if "contaminated" in figs[0]:
        n = sum(f["contaminated"] for f in figs)
        exp, att = sum(f["exposed"] for f in figs), sum(f["attributed"] for f in figs)
        delays = [f["delay_s"] for f in figs if f["delay_s"] is not None]
        return {"contaminated": n, "exposed": exp, "exposure": exp / n if n else None, "attributed": att,
                "attribution": att / n if n else None, "max_delay_s": max(delays, default=None)}  # fmt: skip
    n = sum(f["clean_2xx"] for f in figs)
    hi, wa = sum(f["high"] for f in figs), sum(f["warning"] for f in figs)
    return {"clean_2xx": n, "high": hi, "high_rate": hi / n if n else None, "warning": wa,
            "warning_rate": wa / n if n else None}  # fmt: skip


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    groups: dict[str, dict[str, Any]] = {}
    for group in ("scenario", "source_script", "receiver_script", "source_lang", "receiver_lang",
                  "scenario_x_source_script", "shortest_passage",
                  "clean_by_decoy", "clean_by_receiver_lang"):  # fmt: skip
        values = sorted({v for r in rows for v in r["groups"].get(group, {})})
        groups[group] = {v: _pooled(rows, group, v) for v in values}
    n = sum(r["contaminated"] for r in rows)
    clean = sum(r["clean_2xx"] for r in rows)
    flagged, attributed = sum(r["flagged_contaminated"] for r in rows), sum(r["attributed"] for r in rows)
    high, warning = sum(r["false_alarms"] for r in rows), sum(r["warning_alarms"] for r in rows)
    return {
        "seeds": [r["seed"] for r in rows],
        "responses": sum(r["responses"] for r in rows),
        "contaminated": n,
        "flagged_contaminated": flagged,
        "attributed": attributed,
        "exposure_recall": flagged / n if n else None,
        "attribution_accuracy": attributed / n if n else None,
        "clean_2xx": clean,
        "false_alarms": high,
        "false_alarm_rate": high / clean if clean else None,
        "warning_alarms": warning,
        "warning_alarm_rate": warning / clean if clean else None,
        "source_alerts": sum(r.get("source_alerts", 0) for r in rows),
        "misnamed_source_alerts": sum(r.get("misnamed_source_alerts", 0) for r in rows),
        "groups": groups,
    }


def _pct(f: dict[str, Any] | None, key: str, count: str) -> str:
    if not f or f.get(key) is None:
        return "–"
    return f"{f[key]:.1%} ({f[count]}/{f.get('contaminated', f.get('clean_2xx'))})"


def _rate(f: dict[str, Any] | None, key: str, count: str, of: int | None = None) -> str:
    if not f or f.get(key) is None:
        return "–"
    return f"{f[key]:.3%} ({f[count]}" + ("" if of is None else f"/{of:,}") + ")"


def markdown(
    rows: list[dict[str, Any]],
    summaries: dict[str, dict[str, Any]],
    held: dict[str, dict[str, dict[str, Any]]] | None = None,
) -> str:
    head = ["profile", "seed", "responses", "leaks (mech / content)", "exposure mechanism", "exposure content_only",
            "attribution", "attribution CJK source", "attribution other source", "false alarms high+",
            "warning+", "public-text decoys high+", "delay mech / content",
            "cross-tenant alerts on leaks naming a non-source"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def line(profile: str, seed: str, r: dict[str, Any]) -> str:
        g = r["groups"]
        sc = g.get("scenario", {})
        mech, cont = sc.get("mechanism"), sc.get("content_only")
        src = g.get("source_script", {})
        dec = g.get("clean_by_decoy", {}).get("any_public_text")
        delay = " / ".join(
            "–" if not f or f.get("delay_s", f.get("max_delay_s")) is None
            else f"{f.get('delay_s', f.get('max_delay_s')):.0f} s"
            for f in (mech, cont)
        )  # fmt: skip
        n_mech = mech["contaminated"] if mech else 0
        n_cont = cont["contaminated"] if cont else 0
        cells = [profile, seed, f"{r['responses']:,}", f"{n_mech} / {n_cont}",
                 _pct(mech, "exposure", "exposed"), _pct(cont, "exposure", "exposed"),
                 _pct(r, "attribution_accuracy", "attributed"),
                 _pct(src.get("cjk"), "attribution", "attributed"), _pct(src.get("rest"), "attribution", "attributed"),
                 _rate(r, "false_alarm_rate", "false_alarms", r["clean_2xx"]),
                 _rate(r, "warning_alarm_rate", "warning_alarms"), _rate(dec, "high_rate", "high"), delay,
                 f"{r.get('misnamed_source_alerts', 0)} of {r.get('source_alerts', 0)}"]  # fmt: skip
        return "| " + " | ".join(cells) + " |"

    for r in rows:
        lines.append(line(r["profile"], str(r["seed"]), r))
    for profile, pooled in summaries.items():
        lines.append(line(f"**{profile}**", "**all**", pooled))
    for name, split in (held or {}).items():
        for profile, pooled in split.items():
            lines.append(line(f"**{profile}**", f"**{name} {','.join(map(str, pooled['seeds']))}**", pooled))
    return "\n".join(lines) + "\n"


def detail(summaries: dict[str, dict[str, Any]]) -> str:
    """Pooled over seeds: per scenario x source script and per language; false alarms per decoy kind."""
    out = []
    head = ["profile", "group", "leaks", "exposure (high+)", "attribution", "worst delay"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for profile, s in summaries.items():
        for group in ("scenario", "scenario_x_source_script", "source_lang", "receiver_lang", "shortest_passage"):
            for value, f in s["groups"].get(group, {}).items():
                if not f:
                    continue
                delay = "–" if f.get("max_delay_s") is None else f"{f['max_delay_s']:.0f} s"
                label = value if group.startswith("scenario") else f"{group.replace('_', ' ')} {value}"
                label = f"shortest passage {value}" if group == "shortest_passage" else label
                rows.append(f"| {profile} | {label} | {f['contaminated']} | {_pct(f, 'exposure', 'exposed')} | "
                            f"{_pct(f, 'attribution', 'attributed')} | {delay} |")  # fmt: skip
    out.append("\n".join(rows))
    head = ["profile", "clean 2xx with", "responses", "high or critical", "warning or above"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for profile, s in summaries.items():
        for group in ("clean_by_decoy", "clean_by_receiver_lang"):
            for value, f in s["groups"].get(group, {}).items():
                label = value if group == "clean_by_decoy" else f"receiver {value}"
                rows.append(f"| {profile} | {label} | {f['clean_2xx']:,} | {_rate(f, 'high_rate', 'high')} | "
                            f"{_rate(f, 'warning_rate', 'warning')} |")  # fmt: skip
    out.append("\n".join(rows))
    return "\n\n".join(out) + "\n"


def plot(summaries: dict[str, dict[str, Any]], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(1, len(summaries), figsize=(6 * len(summaries), 4), squeeze=False)
    for ax, (profile, s) in zip(axes[0], summaries.items(), strict=True):
        bars: list[tuple[str, float]] = []
        for key, label in (("scenario", "{}"), ("source_script", "source {}")):
            for v, f in s["groups"].get(key, {}).items():
                if f.get("exposure") is not None:
                    bars.append((label.format(v) + "\nexposure", f["exposure"]))
                    bars.append((label.format(v) + "\nattribution", f["attribution"]))
        ax.bar(range(len(bars)), [b[1] * 100 for b in bars], color=["#4c72b0", "#dd8452"] * (len(bars) // 2))
        ax.set_xticks(range(len(bars)), [b[0] for b in bars], rotation=60, ha="right", fontsize=7)
        ax.axhline(95, color="grey", linestyle="--", linewidth=0.8)
        fa = s["false_alarm_rate"] or 0.0
        ax.set_title(f"{profile}: seeds {s['seeds']}\nfalse alarms high+ {fa:.3%}", fontsize=9)
        ax.set_ylim(0, 105)
        ax.set_ylabel("% of contaminated responses")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    variants = ["multilingual", "multilingual+corpus", "stdlib-code"]
    ap.add_argument("--profiles", nargs="+", choices=[*PROFILES, *(f"{p}+corpus" for p in PROFILES)], default=variants)
    ap.add_argument("--seeds", type=int, nargs="+", default=[7, 1, 2, 3, 4, 5, 11])
    ap.add_argument("--held-out", type=int, nargs="*", default=[3, 4, 5, 11], help="seeds not used in development")
    ap.add_argument("--key", default="crosstalk-evaluation-seeds", help="fingerprint key (pinned: reproducible)")
    ap.add_argument("--duration", type=float, default=1200.0)
    ap.add_argument("--fault-at", type=float, default=None, help="default: half the duration")
    ap.add_argument("--no-fault", action="store_true")
    ap.add_argument("--tenants", type=int, default=24, help="regular tenants (other traffic than the table's)")
    ap.add_argument("--rate", type=float, default=4.0, help="regular tenants' requests per second")
    ap.add_argument("--out", type=Path, default=ROOT / "docs/evaluation.json")
    ap.add_argument("--md", type=Path, default=ROOT / "docs/evaluation-seeds.md")
    ap.add_argument("--plot", type=Path, default=ROOT / "docs/img/evaluation.png")
    ap.add_argument("--from-json", action="store_true", help="only re-render the tables and plot from --out")
    args = ap.parse_args()
    # Read by load_settings() in `one` and by `crosstalk corpus add`: the runner and the corpus share the key.
    os.environ["CROSSTALK_DETECTION__FINGERPRINT_KEY"] = args.key
    if args.from_json:
        doc = orjson.loads(args.out.read_bytes())
        render(doc, args)
        return 0
    fault: float | str | None = None if args.no_fault else ("auto" if args.fault_at is None else args.fault_at)
    rows: list[dict[str, Any]] = []
    total = len(args.profiles) * len(args.seeds)
    started = time.monotonic()
    for profile in args.profiles:
        for seed in args.seeds:
            n = len(rows) + 1
            print(f"[{n}/{total}] {profile} seed {seed}: simulating and detecting ...", file=sys.stderr, flush=True)
            rows.append(one(profile, seed, args.duration, fault, args.tenants, args.rate))
            r = rows[-1]
            print(f"    {r['contaminated']} leaks, exposure {r['exposure_recall']:.1%}, attribution "
                  f"{r['attribution_accuracy']:.1%}, false alarms {r['false_alarm_rate']:.3%} "
                  f"({time.monotonic() - started:.0f} s so far)", file=sys.stderr, flush=True)  # fmt: skip
    summaries = {p: summary([r for r in rows if r["profile"] == p]) for p in args.profiles}
    held = set(args.held_out)
    splits = {
        name: {p: summary([r for r in rows if r["profile"] == p and keep(r["seed"])]) for p in args.profiles}
        for name, keep in (("development", lambda s: s not in held), ("held-out", lambda s: s in held))
        if held and any(keep(s) for s in args.seeds)
    }
    doc = {
        "generated": datetime.now(UTC).isoformat(timespec="seconds"),
        "duration_s": args.duration,
        "fault_at_s": fault,
        "tenants": args.tenants,
        "rate": args.rate,
        "fingerprint_key": "pinned (--key)",
        "held_out_seeds": sorted(held & set(args.seeds)),
        "summary": summaries,
        "splits": splits,
        "runs": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
    render(doc, args)
    return 0


def render(doc: dict[str, Any], args: argparse.Namespace) -> None:
    table = markdown(doc["runs"], doc["summary"], doc.get("splits")) + "\n" + detail(doc["summary"])
    # A profile re-run alone (its rows merged into --out) is dated apart: generated_<profile>.
    also = "".join(f"; {k[10:]} rows from a run on {v}" for k, v in doc.items() if k.startswith("generated_"))
    head = f"<!-- written by scripts/evaluate_seeds.py from a run on {doc['generated']}{also} -->"
    args.md.write_text(f"{head}\n\n{table}")
    print(table)
    if plot(doc["summary"], args.plot):
        print(f"plot: {args.plot}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
