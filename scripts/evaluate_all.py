#!/usr/bin/env python
"""The whole evaluation in one command: every profile x shape x seed x key, the worst-of table, before and after.

Profiles: our simulator in two shapes (`sim-24`: 24 tenants, 4 req/s, 20 min; `sim-slow8`: 8 tenants, two writing
Japanese, 0.8 req/s, 60 min), `blind-v1` (streams/sim/blind, written by other hands; a DEVELOPMENT set: its alerts
have been read one by one), `blind-v1b` (the same with its swap labels fixed: a swap in v1 handed both receivers one
text, shown from events and labels alone in tests/sim/test_blind_profile.py), `ext-v2` (../shared/eval/ext-v2,
written by other hands, generated and scored by its own scripts, never copied here) and `blind-v2` (streams/sim/blind2,
a new author under blind-v1's rule; a development set since its documentation informed a change), `blind-v3`
(streams/sim/blind3, another new author; a development set since stop 54, when its documentation informed a change)
and `blind-v4` (streams/sim/blind4, another new author under the same rule: HELD OUT, its individual alerts are never
read, only its pooled figures, once per change). No operator corpus: every run clears CROSSTALK_* and sets only the
fingerprint key.

Each run is `python -m streams.cli replay` in the checkout under test (`--root`, default this one) on events
generated once per profile/shape/seed (they do not depend on the key or on the detector). Every figure is reported
per run, then as the worst over keys, shapes and seeds per profile, with a before -> after column when `--before`
names an earlier result of this script (run it with `--root` on a worktree of the commit before the change):

    python scripts/evaluate_all.py                      # default set (see SETS): about an hour on one free core
    python scripts/evaluate_all.py --quick              # one seed, one short shape per profile: minutes
    git worktree add /tmp/before <commit>
    python scripts/evaluate_all.py --root /tmp/before --out bench/results/x-before
    python scripts/evaluate_all.py --before bench/results/x-before.json

Writes <out>.json and <out>.md (default bench/results/eval-all-<commit>), and prints progress to stderr.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from streams.sim.columns import COLUMNS, RELATIVE, TARGETS  # noqa: E402
from streams.sim.episodes import episode_figures, episodes, flagged_times, from_events, paged_times  # noqa: E402
from streams.sim.episodes import plot as plot_episodes  # noqa: E402
from streams.sim.evaluate import evaluate, incident_figures, load_alerts  # noqa: E402
from streams.sim.misses import ext_shapes, load_leads, miss_counts, misses_table, row_shapes, shape_counts  # noqa: E402

EXT_V2 = Path(os.environ.get("CROSSTALK_EXT_V2", ROOT.parent / "shared" / "eval" / "ext-v2"))
KEYS = ("eval-key-a", "eval-key-b", "eval-key-c", "eval-key-d", "eval-key-e")
# Leak classes scored one by one, where a profile's labels name them (ours names cross-tenant and cross-session;
# blind-v2 its own seven: streams/sim/blind2/README.md; blind-v3 and blind-v4 name their classes `leak_class`).
CLASSES = ("stale_kv_abort", "whole_response", "prefix_collision", "spliced_page", "cross_session", "cross_tenant",
           "misroute", "swap", "interleave", "stale_kv", "page_splice",
           "placeholder_stale_kv", "connection_desync", "response_cache_collision", "stream_interleave",
           "prefix_hash_collision", "pd_kv_misdelivery", "session_history_mixup",
           "prefix_block_shared", "stream_splice", "response_cache_unscoped", "conversation_key_collision",
           "draft_slot_bleed", "tool_result_misroute", "batch_offset_shift", "kv_handoff_mismatch")  # fmt: skip
# Every profile, in the tables' order: (its column in the README, its short name in the "met" column).
PROFILES = {"sim": ("ours (3 shapes)", "ours"), "ext-v2": ("ext-v2", "ext-v2"),
            "blind-v4": ("blind-v4 (held out)", "v4"), "blind-v3": ("blind-v3 (dev)", "v3"),
            "blind-v2": ("blind-v2 (dev)", "v2"), "blind-v1b": ("blind-v1b (dev)", "v1b"),
            "blind-v1": ("blind-v1 (dev)", "v1")}  # fmt: skip
HELD_OUT = ("blind-v4",)  # the profiles whose alerts nobody reads
# profile -> shape -> (generator parameters, seeds)
SETS: dict[str, dict[str, tuple[dict[str, Any], list[int]]]] = {
    "sim": {
        "24t": ({"tenants": 24, "rate": 4.0, "duration": 1200}, [7, 1, 2]),
        "slow8": ({"tenants": 8, "rate": 0.8, "duration": 3600}, [22, 7]),
        # The simulator's default profile: pasted public code and a model that writes it (the numbers of public text).
        "code24": ({"tenants": 24, "rate": 4.0, "duration": 1200, "profile": "stdlib-code"}, [7]),
    },
    "blind-v1": {
        "small-slow-ja": ({}, [1, 2]),
        "eight-2pools": ({}, [1, 2]),
        "mid-24": ({}, [1, 2]),
        "busy-60": ({}, [1]),
    },
    "ext-v2": {"6h": ({"hours": 6.0}, [7, 99])},
    "blind-v2": {
        "seoul-clinics-slow-1h": ({}, [1, 2]),
        "eu-saas-4pools-40m": ({}, [1, 2]),
        "global-api-60t-15m": ({}, [1, 2]),
    },
    "blind-v3": {"eu-pd": ({}, [1, 2]), "apac-otel": ({}, [1, 2]), "levant-tiny": ({}, [1, 2])},
    "blind-v4": {"eurodesk": ({}, [1, 2]), "agentforge": ({}, [1, 2]), "nightbatch": ({}, [1, 2])},
}
SETS["blind-v1b"] = SETS["blind-v1"]
QUICK: dict[str, dict[str, tuple[dict[str, Any], list[int]]]] = {
    "sim": {"24t-5min": ({"tenants": 24, "rate": 4.0, "duration": 300}, [7])},
    "blind-v1": {"quick-small-ja": ({}, [1])},
    "ext-v2": {"1h": ({"hours": 1.0}, [7])},
    "blind-v2": {"quick": ({}, [1])},
    "blind-v3": {"quick": ({}, [1])},
    "blind-v4": {"quick": ({}, [1])},
}
QUICK["blind-v1b"] = QUICK["blind-v1"]


def generate(profile: str, shape: str, params: dict[str, Any], seed: int, work: Path) -> tuple[Path, Path]:
    """Events and labels of one profile/shape/seed, made once (cached in `work`)."""
    where = work / profile / f"{shape}-s{seed}"
    events, labels = where / "events.jsonl", where / "labels.json"
    if events.exists() and labels.exists():
        return events, labels
    where.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    if profile == "sim":
        profile_of = params.get("profile", "multilingual")
        cmd = [py, "-m", "streams.sim.simulate", "--out", str(where), "--profile", profile_of, "--seed", str(seed)]
        cmd += ["--tenants", str(params["tenants"]), "--rate", str(params["rate"])]
        cmd += ["--duration", str(params["duration"])]
        subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    elif profile.startswith("blind-v1"):
        from streams.sim.blind.__main__ import write
        from streams.sim.blind.world import Shape

        sys.path.insert(0, str(ROOT / "scripts"))
        from evaluate_blind import QUICK as BQ
        from evaluate_blind import SHAPES as BS

        crossed = profile == "blind-v1b"  # v1 with its swaps fixed (streams/sim/blind/world.py, crossed_answers)
        paths = write(Shape(seed=seed, crossed_answers=crossed, **{**BS, **BQ}[shape]), where)
        events, labels = paths["events"], paths["labels"]
    elif profile in ("blind-v2", "blind-v3", "blind-v4"):
        from streams.sim import blind2, blind3, blind4

        paths = {"blind-v2": blind2, "blind-v3": blind3, "blind-v4": blind4}[profile].write(shape, seed, where)
        events, labels = paths["events"], paths["labels"]
    else:
        cmd = [py, str(EXT_V2 / "generate.py"), "--seed", str(seed), "--hours", str(params["hours"])]
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        subprocess.run([*cmd, str(events), str(labels)], check=True, **quiet)
    return events, labels


def replay(root: Path, events: Path, alerts: Path, key: str) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CROSSTALK_")}
    env["CROSSTALK_DETECTION__FINGERPRINT_KEY"] = key
    env["CROSSTALK_DATA_DIR"] = str(alerts.parent)
    cmd = [sys.executable, "-m", "streams.cli", "replay", str(events), "--alerts-out", str(alerts)]
    cmd += ["--rejects", str(alerts.with_suffix(".rejects.jsonl")), "--quiet", "--no-progress"]
    cmd += ["--leads-out", str(alerts.with_suffix(".leads.jsonl"))]  # why its misses were missed (misses.py)
    t = time.monotonic()
    alerts.unlink(missing_ok=True)
    subprocess.run(cmd, cwd=root, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - t


def ours(labels_path: Path, alerts_path: Path, classes: tuple[str, ...] = ()) -> dict[str, Any]:
    """Figures of our evaluator (the simulator's and blind-v1's labels share its format)."""
    labels = orjson.loads(labels_path.read_bytes())
    alerts = load_alerts(str(alerts_path))
    ev = evaluate(labels, alerts)
    g = ev.groups
    f: dict[str, Any] = {
        "clean_2xx": ev.clean_2xx,
        "leaks": ev.contaminated,
        "false_high": ev.false_alarms,
        "false_warning": ev.warning_alarms,
        "false_incidents": ev.false_incidents,
        "false_incidents_by_alert": ev.false_incidents_by_alert,
        "unpaged_incidents": ev.unpaged_incidents,
        "incident_delay_s": ev.incident_delay_s,
        "exposure": ev.exposure_recall,
        "content_only": g.get("scenario", {}).get("content_only", {}).get("exposure"),
        "attribution": ev.attribution_accuracy,
        "attribution_cjk_source": g.get("source_script", {}).get("cjk", {}).get("attribution"),
        "attribution_cjk_receiver": g.get("receiver_script", {}).get("cjk", {}).get("attribution"),
        "delay_s": ev.detection_delay_s,
        **ev.episodes,
        # Denominators of the shares, so that seeds pool (`pooled`).
        "n:exposure": ev.contaminated,
        "n:attribution": ev.contaminated,
        "n:content_only": g.get("scenario", {}).get("content_only", {}).get("contaminated"),
        "n:attribution_cjk_source": g.get("source_script", {}).get("cjk", {}).get("contaminated"),
        "n:attribution_cjk_receiver": g.get("receiver_script", {}).get("cjk", {}).get("contaminated"),
    }
    rows = labels["responses"]
    leads = load_leads(alerts_path.with_suffix(".leads.jsonl"))
    f |= miss_counts(alerts, (r["request_id"] for r in rows if r["contaminated"]), leads)
    f |= shape_counts(alerts, row_shapes(rows))
    for c in classes:
        sub = [r for r in rows if r["contaminated"] and (r.get("leak_class") or r.get("leak_kind")) == c]
        if sub:
            e = evaluate({"responses": sub}, alerts)
            f[f"class:{c}"] = e.exposure_recall
            f[f"n:{c}"] = len(sub)
    return f


def ext_v2(labels: Path, alerts: Path, events: Path) -> dict[str, Any]:
    """Figures of ext-v2's own scorer, read from what it prints (its code stays in ../shared)."""
    out = subprocess.run(
        [sys.executable, str(EXT_V2 / "score.py"), str(labels), str(alerts), str(events)],
        capture_output=True,
        text=True,
    ).stdout
    f: dict[str, Any] = {}
    fa = re.search(r"false alarms: high\+ (\d+)/(\d+) = \S+\s+warning\+ (\d+)/(\d+)", out)
    if fa:
        f |= {"false_high": int(fa[1]), "clean_2xx": int(fa[2]), "false_warning": int(fa[3])}
    # Incidents by their own severity (ADR 0018), scored as ours are: its labels name the leaked responses.
    lab, judged = orjson.loads(labels.read_bytes()), load_alerts(str(alerts))
    f |= incident_figures(judged, set(lab.get("positives", {})) | set(lab.get("cross_session", {})))
    f |= miss_counts(judged, lab.get("positives", {}), load_leads(alerts.with_suffix(".leads.jsonl")))
    f |= shape_counts(judged, ext_shapes(lab))
    leaked = set(lab.get("positives", {})) | set(lab.get("cross_session", {}))
    timed = episodes(*from_events(events, leaked), flagged_times(judged), paged_at=paged_times(judged))
    f |= episode_figures(timed)
    del f["incidents_high"]
    inc = re.search(r"incidents: \d+ with a leak, (\d+) false", out)
    if inc:  # its scorer counts an incident as high when any of its alerts is (as before incidents had a severity)
        f["false_incidents_by_alert"] = int(inc[1])
    # The scorer's last line: name=value pairs.
    last = dict(re.findall(r"(\w+)=([0-9.]+|nan)\b", out.strip().splitlines()[-1] if out.strip() else ""))
    names = {"exposure": "exposure", "attribution": "attribution", "content_only_exposure": "content_only",
             "attribution_src_cjk": "attribution_cjk_source", "attribution_cjk": "attribution_cjk_receiver",
             "detect_delay_s": "delay_s", "mechanism_exposure": "mechanism"}  # fmt: skip
    for theirs, mine in names.items():
        if theirs in last and last[theirs] != "nan":
            f[mine] = float(last[theirs])
    groups = dict(re.findall(r"^(\S+)\s+(\d+)\s+[0-9.]+", out, flags=re.M))
    for group, mine in (("overall", "exposure"), ("overall", "attribution"), ("content_only", "content_only"),
                        ("src_cjk", "attribution_cjk_source"), ("recv_cjk", "attribution_cjk_receiver")):  # fmt: skip
        if group in groups:
            f[f"n:{mine}"] = int(groups[group])
    if "overall" in groups:
        f["leaks"] = int(groups["overall"])
    f["_raw"] = out[-4000:]
    return f


def run(a: argparse.Namespace) -> dict[str, Any]:
    sets = QUICK if a.quick else SETS
    keys = KEYS[: a.keys]
    runs: list[dict[str, Any]] = []
    jobs = [
        (p, shape, params, seed)
        for p in a.profiles  # in the order asked
        for shape, (params, seeds) in sets[p].items()
        for seed in seeds
    ]
    t0 = time.monotonic()
    for i, (profile, shape, params, seed) in enumerate(jobs):
        events, labels = generate(profile, shape, params, seed, a.work)
        for key in keys:
            alerts = a.work / profile / f"{shape}-s{seed}" / f"alerts-{a.tag}-{key}.jsonl"
            secs = replay(a.root, events, alerts, key)
            f = ext_v2(labels, alerts, events) if profile == "ext-v2" else ours(labels, alerts, CLASSES)
            runs.append({"profile": profile, "shape": shape, "seed": seed, "key": key, "replay_s": secs, "f": f})
            print(
                f"[{i + 1}/{len(jobs)}] {profile} {shape} s{seed} {key}: false high {f.get('false_high')}"
                f"/{f.get('clean_2xx')}, false incidents {f.get('false_incidents')}, exposure {_p(f.get('exposure'))},"
                f" content-only {_p(f.get('content_only'))}, attribution {_p(f.get('attribution'))}"
                f" ({secs:.0f} s replay, {time.monotonic() - t0:.0f} s in)",
                file=sys.stderr,
                flush=True,
            )
    return {"runs": runs, "keys": list(keys), "quick": a.quick, "wall_s": round(time.monotonic() - t0)}


def value(f: dict[str, Any], name: str, kind: str) -> float | None:
    if name == "class:worst":  # every leak class the labels name must reach the bound, not only the one shown
        classes = [v for k, v in f.items() if k.startswith("class:") and k != "class:worst" and v is not None]
        return min(classes) if classes else None
    v = f.get(name)
    if v is None:
        return None
    if kind == "rate":
        return v / f["clean_2xx"] if f.get("clean_2xx") else None
    if kind == "per10k":
        return 1e4 * v / f["clean_2xx"] if f.get("clean_2xx") else None
    return float(v)


def pooled(fs: list[dict[str, Any]]) -> dict[str, Any]:
    """One shape and key over its seeds: counts add, shares are weighted by their denominators, delays take the max."""
    out: dict[str, Any] = {"clean_2xx": sum(f.get("clean_2xx") or 0 for f in fs)}
    classes = [k for k in dict.fromkeys(k for f in fs for k in f) if k.startswith("class:")]
    columns = [(name, kind) for name, _, _, kind in COLUMNS if name != "class:worst"]
    for name, kind in dict.fromkeys(columns + [(c, "share") for c in classes]):
        if kind in ("rate", "per10k", "n"):
            vals = [f[name] for f in fs if f.get(name) is not None]
            out[name] = sum(vals) if vals else None
        elif kind == "s":
            vals = [f[name] for f in fs if f.get(name) is not None]
            out[name] = max(vals) if vals else None
        else:
            n_key = f"n:{name.removeprefix('class:')}" if name.startswith("class:") else f"n:{name}"
            pairs = [(f[name], f.get(n_key) or 0) for f in fs if f.get(name) is not None]
            n = sum(w for _, w in pairs)
            out[name] = sum(v * w for v, w in pairs) / n if n else None
    return out


def worst(runs: list[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """Per profile: each shape and key pooled over its seeds, then each figure's worst over shapes and keys."""
    out: dict[str, dict[str, float | None]] = {}
    for profile in dict.fromkeys(r["profile"] for r in runs):
        cells = {(r["shape"], r["key"]) for r in runs if r["profile"] == profile}
        mine = [
            pooled([r["f"] for r in runs if r["profile"] == profile and (r["shape"], r["key"]) == c]) for c in cells
        ]
        out[profile] = {}
        for name, _, higher_worse, kind in COLUMNS:
            vals = [v for v in (value(f, name, kind) for f in mine) if v is not None]
            out[profile][name] = (max(vals) if higher_worse else min(vals)) if vals else None
    return out


def overall(runs: list[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """Per profile: every shape, seed and key pooled into one figure each. The worst-of is what the targets are
    judged on; this one shows a change made in one shape that the worst of the others hides."""
    out: dict[str, dict[str, float | None]] = {}
    for profile in dict.fromkeys(r["profile"] for r in runs):
        f = pooled([r["f"] for r in runs if r["profile"] == profile])
        out[profile] = {name: value(f, name, kind) for name, _, _, kind in COLUMNS}
    return out


def _table(now: dict[str, dict[str, float | None]], old: dict[str, dict[str, float | None]] | None) -> list[str]:
    lines = ["| figure | " + " | ".join(now) + " |", "|---|" + "---|" * len(now)]
    for name, label, _, kind in COLUMNS:
        cells = []
        for profile in now:
            v = cell(now[profile].get(name), kind)
            cells.append(f"{cell(old.get(profile, {}).get(name), kind)} → {v}" if old is not None else v)
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def rescore(path: Path, work: Path) -> dict[str, Any]:
    """A result file scored again from the alerts it left in `work` (the scoring changed, not crosstalk)."""
    report = orjson.loads(path.read_bytes())
    for r in report["runs"]:
        where = work / r["profile"] / f"{r['shape']}-s{r['seed']}"
        alerts = where / f"alerts-{report['commit']}-{r['key']}.jsonl"
        labels, events = where / "labels.json", where / "events.jsonl"
        if r["profile"] == "ext-v2":
            r["f"] = ext_v2(labels, alerts, events)
        else:
            r["f"] = ours(labels, alerts, CLASSES)
    report["worst"] = worst(report["runs"])
    return report


def _p(v: float | None, digits: int = 1) -> str:
    return "–" if v is None else f"{100 * v:.{digits}f} %"


def cell(v: float | None, kind: str) -> str:
    if v is None:
        return "–"
    return {"rate": _p(v, 3), "per10k": f"{v:.1f}", "share": _p(v), "s": f"{v:.0f} s", "n": f"{v:.0f}"}[kind]


def markdown(report: dict[str, Any], before: dict[str, Any] | None) -> str:
    w = report["worst"]
    lines = [
        f"# The whole evaluation at {report['commit']} ({report['date']})",
        "",
        f"Each shape pooled over its seeds, then the worst over shapes and keys {', '.join(report['keys'])};"
        " no operator corpus"
        + (f"; before: {before['commit']}" if before else "")
        + ". ext-v2 and the blind profiles were written by other hands; every profile here but "
        + " and ".join(HELD_OUT)
        + " is a development set (its alerts read one by one, or its documentation used to design a change); "
        + " and ".join(HELD_OUT)
        + " is held out: only its pooled figures are looked at, once per change, never its alerts.",
        "",
        *_table(w, before.get("worst", {}) if before else None),
        "",
        "Pooled over every shape, seed and key (not the targets' figure: it shows what the worst-of hides):",
        "",
        *_table(overall(report["runs"]), overall(before["runs"]) if before else None),
        "",
        "Where the missed leaks went, every shape, seed and key pooled (counts, no alert read; streams/sim/misses.py):",
        "",
        *misses_table(report["runs"]),
    ]
    head = "| profile | shape | seed | key | clean | false high | false inc. | exposure | content-only | attribution |"
    lines += ["", "Per run:", "", head, "|---|---|---|---|---|---|---|---|---|---|"]
    for r in report["runs"]:
        f = r["f"]
        lines.append(
            f"| {r['profile']} | {r['shape']} | {r['seed']} | {r['key']} | {f.get('clean_2xx')} | {f.get('false_high')}"
            f" | {f.get('false_incidents')} | {_p(f.get('exposure'))} | {_p(f.get('content_only'))}"
            f" | {_p(f.get('attribution'))} |"
        )
    return "\n".join(lines) + "\n"


def readme_table(report: dict[str, Any]) -> str:
    """The README's table: each target per profile (worst of keys and shapes), and whether every profile meets it."""
    w = report["worst"]
    profiles = [p for p in PROFILES if p in w]
    head = "| target | " + " | ".join(PROFILES[p][0] for p in profiles) + " | met |"
    lines = [head, "|---|" + "---|" * (len(profiles) + 1)]
    # The price of paging on incidents, per episode (the result files keep the per-incident figures); cold episodes
    # (bounded in the README).
    shown = {"false_incidents_by_alert", "ttp_warm_s", "episodes_warm_unpaged", "ttd_cold_s", "episodes_cold_missed"}
    for name, label, higher_worse, kind in COLUMNS:
        if name not in TARGETS and name not in shown and name not in RELATIVE:
            continue
        vals = [w[p].get(name) for p in profiles]
        bound = TARGETS.get(name)
        if bound is None and name not in RELATIVE:
            met = "–"
        else:
            if name in RELATIVE:  # within `points` of another figure of the same profile
                other, points = RELATIVE[name]
                ok = [
                    v is None or w[p].get(other) is None or v >= w[p][other] - points
                    for p, v in zip(profiles, vals, strict=True)
                ]
            else:
                ok = [v is None or (v <= bound if higher_worse else v >= bound) for v in vals]
            missed = [PROFILES[p][1] for p, good in zip(profiles, ok, strict=True) if not good]
            met = "yes" if not missed else "**no**: " + ", ".join(missed)
        lines.append(f"| {label} | " + " | ".join(cell(v, kind) for v in vals) + f" | {met} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="one short shape and seed per profile")
    ap.add_argument("--profiles", nargs="+", default=list(PROFILES), choices=list(PROFILES))
    ap.add_argument("--keys", type=int, default=3, choices=range(1, len(KEYS) + 1))
    ap.add_argument("--root", type=Path, default=ROOT, help="the checkout whose crosstalk is judged")
    ap.add_argument("--work", type=Path, default=Path("/tmp/crosstalk-eval-all"))
    ap.add_argument("--before", type=Path, help="an earlier result JSON of this script: a before column")
    ap.add_argument("--out", type=Path, help="output prefix (default bench/results/eval-all-<commit>)")
    ap.add_argument("--rescore", type=Path, help="score an earlier result file again from its alerts in --work")
    ap.add_argument("--readme", type=Path, help="print the README's table of this result file")
    a = ap.parse_args()
    if a.readme:
        print(readme_table(orjson.loads(a.readme.read_bytes())), end="")
        return 0
    if a.rescore:
        before = orjson.loads(a.before.read_bytes()) if a.before else None
        write(rescore(a.rescore, a.work), before, a.rescore.with_suffix(""))
        return 0
    if "ext-v2" in a.profiles and not (EXT_V2 / "generate.py").exists():
        print(f"ext-v2 not found at {EXT_V2} (set CROSSTALK_EXT_V2)", file=sys.stderr)
        return 2
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=a.root, capture_output=True, text=True)
    # Not a git checkout (a copy of a tree being tried): its directory's name, so two copies evaluated at once
    # never write each other's alert files in the shared work directory.
    a.tag = commit.stdout.strip() or a.root.resolve().name
    report = {"commit": a.tag, "date": time.strftime("%Y-%m-%d"), **run(a)}
    report["worst"] = worst(report["runs"])
    before = orjson.loads(a.before.read_bytes()) if a.before else None
    out = a.out or ROOT / "bench" / "results" / f"eval-all-{a.tag}"
    out.parent.mkdir(parents=True, exist_ok=True)
    print(write(report, before, out))
    return 0


def write(report: dict[str, Any], before: dict[str, Any] | None, out: Path) -> str:
    """The result file (`out`.json), its tables (.md) and its time-to-detect plot (-ttd.png); the tables returned."""
    Path(f"{out}.json").write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2) + b"\n")
    md = markdown(report, before)
    try:
        plot_episodes(report["runs"], {p: label for p, (label, _) in PROFILES.items()}, Path(f"{out}-ttd.png"))
        md += f"\nTime to detect per episode (streams/sim/episodes.py):\n\n![time to detect]({out.name}-ttd.png)\n"
    except ImportError:  # matplotlib comes with the bench extra
        print("no plot: install crosstalk[bench] for matplotlib", file=sys.stderr)
    Path(f"{out}.md").write_text(md, encoding="utf-8")
    return md


if __name__ == "__main__":
    raise SystemExit(main())
