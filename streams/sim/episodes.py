"""Time to detect, per leak episode, warm and cold (issue 39's target; scripts/evaluate_all.py).

Issue 39 asks for at most 60 s "from the first leaked response of an episode to the first high alert" once the domain
is warm, and for a cold domain the time, reported and bounded. A run's single figure (its first leak to its first
high alert) answers neither: a run whose first leak falls in a new domain's warm-up says nothing of the warm case,
and a later episode that waited for ever hides behind an early one found at once. So:

- an **episode** is a run of leaked responses of one cache domain, each within `quiet_s` of the one before (the
  incident's quiet period: a leak after that much quiet is news to the operator again);
- it is **cold** when its first leak came less than `warmup_s` after the domain's first response (the longest warm-up
  crosstalk documents; the evaluator's own definition, not the detector's notion of warm, so that a detector that
  warms late pays for it in the warm figures);
- its **delay** is from its first leaked response to the first high or critical alert on any of its leaks (the alert's
  event time: a held finding counts when it was raised); an episode none of whose leaks is ever flagged high is
  **never detected**, counted apart: its delay is unbounded, not left out;
- beside it, how **late** a flagged leak can be: the longest any leak waited for its own first high alert (a held
  finding's hold, a mix-up told when its other half completes); and the **page**: from the episode's first leak to the
  first alert on one of its leaks whose incident was high or critical (ADR 0018), or never.

No alert is read one by one to make these: they are counts and maxima, like the other figures.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from schemas.alert import SEVERITY_RANK, Alert
from schemas.timefmt import parse_ts

QUIET_S = 600.0  # DetectionSettings.incident_quiet_s's default
_HIGH = SEVERITY_RANK["high"]
WARMUP_S = 600.0  # the longest warm-up docs/connect.md states (overlap_warmup_slow_s)


@dataclass(frozen=True, slots=True)
class Leak:
    request_id: str
    ts: float
    domain: str


@dataclass(frozen=True, slots=True)
class Episode:
    domain: str
    first_ts: float
    leaks: int
    cold: bool
    delay_s: float | None  # None: no leak of it was ever flagged high
    late_s: float | None = None  # the longest a flagged leak of it waited for its own first high alert
    page_s: float | None = None  # from its first leak to the first alert on one of its leaks whose incident paged


def episodes(
    leaks: Iterable[Leak],
    domain_start: Mapping[str, float],
    flagged_at: Mapping[str, float],
    quiet_s: float = QUIET_S,
    warmup_s: float = WARMUP_S,
    paged_at: Mapping[str, float] | None = None,
) -> list[Episode]:
    """The episodes of `leaks`; `domain_start`: each domain's first response time; `flagged_at`: per request id, the
    event time of its first high or critical alert (absent: never); `paged_at`: the same for its first alert whose
    incident was high or critical (`paged_times`; None: not measured)."""
    by_domain: dict[str, list[Leak]] = {}
    for leak in leaks:
        by_domain.setdefault(leak.domain, []).append(leak)
    out: list[Episode] = []
    for domain, rows in sorted(by_domain.items()):
        rows.sort(key=lambda r: r.ts)
        group: list[Leak] = []
        for leak in rows:
            if group and leak.ts - group[-1].ts > quiet_s:
                out.append(_episode(domain, group, domain_start, flagged_at, warmup_s, paged_at))
                group = []
            group.append(leak)
        if group:
            out.append(_episode(domain, group, domain_start, flagged_at, warmup_s, paged_at))
    return out


def _episode(
    domain: str,
    group: list[Leak],
    start: Mapping[str, float],
    flagged_at: Mapping[str, float],
    warmup_s: float,
    paged_at: Mapping[str, float] | None = None,
) -> Episode:
    first = group[0].ts
    hits = [(r.ts, flagged_at[r.request_id]) for r in group if r.request_id in flagged_at]
    delay = max(0.0, min(at for _, at in hits) - first) if hits else None
    late = max(max(0.0, at - ts) for ts, at in hits) if hits else None
    pages = [paged_at[r.request_id] for r in group if r.request_id in paged_at] if paged_at is not None else []
    page = max(0.0, min(pages) - first) if pages else None
    return Episode(domain, first, len(group), first - start.get(domain, first) < warmup_s, delay, late, page)


def episode_figures(found: list[Episode]) -> dict[str, Any]:
    """A run's figures: per warmth, the episodes, those never detected and the longest delay of the detected ones."""
    f: dict[str, Any] = {}
    for name, cold in (("warm", False), ("cold", True)):
        part = [e for e in found if e.cold is cold]
        delays = [e.delay_s for e in part if e.delay_s is not None]
        f[f"episodes_{name}"] = len(part)
        f[f"episodes_{name}_missed"] = len(part) - len(delays)
        f[f"ttd_{name}_s"] = max(delays) if delays else None
        late = [e.late_s for e in part if e.late_s is not None]
        f[f"late_{name}_s"] = max(late) if late else None  # "one leak was flagged 606 s late" (issue 39)
        # The operator's first job: paged for the episode (its incident high or critical), and how soon.
        pages = [e.page_s for e in part if e.page_s is not None]
        f[f"ttp_{name}_s"] = max(pages) if pages else None
        f[f"episodes_{name}_unpaged"] = len(part) - len(pages)
        f[f"delays_{name}"] = sorted(round(d, 1) for d in delays)  # for the plot (`plot`)
    return f


def episodes_met(f: dict[str, Any], warm_s: float = 60.0, cold_s: float = WARMUP_S) -> bool:
    """Issue 39's time to detect on `episode_figures`: no episode never flagged, warm ones within `warm_s`, cold ones
    within `cold_s` (the hold a new domain's content-only findings wait at most)."""
    if f.get("episodes_warm_missed") or f.get("episodes_cold_missed"):
        return False
    return (f.get("ttd_warm_s") or 0.0) <= warm_s and (f.get("ttd_cold_s") or 0.0) <= cold_s


def plot(runs: list[dict[str, Any]], labels: dict[str, str], path: Path) -> None:
    """Per profile, the share of its episodes (every shape, seed and key) detected within t: warm ones solid, cold ones
    dashed; an episode never flagged keeps its curve below 100 %. The 60-s target is the dotted line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8.5, 4.2))
    for i, profile in enumerate(dict.fromkeys(r["profile"] for r in runs)):
        fs = [r["f"] for r in runs if r["profile"] == profile]
        for name, style in (("warm", "-"), ("cold", "--")):
            n = sum(f.get(f"episodes_{name}") or 0 for f in fs)
            delays = sorted(d for f in fs for d in f.get(f"delays_{name}") or ())
            if not n:
                continue
            xs = [0.0, *[max(d, 0.5) for d in delays]]
            ys = [0.0, *[100 * (j + 1) / n for j in range(len(delays))]]
            missed = n - len(delays)
            label = f"{labels.get(profile, profile)}, {name} ({n}{f', {missed} never' if missed else ''})"
            ax.step(xs, ys, where="post", ls=style, color=f"C{i}", label=label)
    ax.axvline(60, ls=":", color="grey")
    ax.set_xscale("symlog", linthresh=1)
    ax.set_xlim(0, 4000)
    ax.set_ylim(0, 101)
    ax.set_xlabel("seconds from an episode's first leak to its first high alert")
    ax.set_ylabel("% of episodes detected")
    ax.set_title("Time to detect per leak episode (every shape, seed and key; target: warm within 60 s)", fontsize=9)
    ax.legend(fontsize=6.5, loc="lower right", ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})


def from_labels(rows: list[dict[str, Any]]) -> tuple[list[Leak], dict[str, float]]:
    """Our label format (the simulator's and the blind profiles'): the leaked responses, and each domain's start."""
    start: dict[str, float] = {}
    leaks = []
    for r in rows:
        d = r.get("cache_domain") or ""
        start[d] = min(start.get(d, r["ts"]), r["ts"])
        if r["contaminated"]:
            leaks.append(Leak(r["request_id"], r["ts"], d))
    return leaks, start


def from_events(path: Path, leaked: set[str]) -> tuple[list[Leak], dict[str, float]]:
    """The same from an event file's responses (ext-v2's labels name leaked responses without time or domain)."""
    start: dict[str, float] = {}
    leaks = []
    with path.open("rb") as fh:
        for line in fh:
            if b'"response"' not in line:
                continue
            e = orjson.loads(line)
            if e.get("type") != "response":
                continue
            ts, d = parse_ts(e["ts"]), e.get("cache_domain") or ""
            start[d] = min(start.get(d, ts), ts)
            if e["request_id"] in leaked:
                leaks.append(Leak(e["request_id"], ts, d))
    return leaks, start


def paged_times(alerts: Iterable[Alert]) -> dict[str, float]:
    """Per request id, the event time of its first alert whose incident was high or critical as of it (an alert from
    before incidents had a severity counts with its own, as docs/adr/0018 counts them)."""
    return _first_at(alerts, lambda a: a.incident_severity or a.severity)


def flagged_times(alerts: Iterable[Alert]) -> dict[str, float]:
    """Per request id, the event time of its first high or critical alert."""
    return _first_at(alerts, lambda a: a.severity)


def _first_at(alerts: Iterable[Alert], severity: Callable[[Alert], str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for a in alerts:
        if SEVERITY_RANK[severity(a)] >= _HIGH:
            for rid in a.request_ids:
                out[rid] = min(out.get(rid, a.ts), a.ts)
    return out
