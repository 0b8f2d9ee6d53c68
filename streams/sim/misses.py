"""Where the missed leaks went: what the alerts on each one concluded, counted by reason (scripts/evaluate_all.py).

A held-out profile's alerts are never read one by one (docs/evaluation.md), so its misses had no cause anyone could
name. These counts name the rule that held each missed leak below high, pooled, without a single alert being read:
a figure like the others, whose sum is the number of leaks missed. The reasons are tried in this order, on the
strongest content finding that names the response (the most severe, then the one with most matched fingerprints):

- `nothing`: no alert names it, so no finding on it reached a warning: no shared passage of 8 units, no mechanism, no
  mix-up, or only an info finding, which raises no alert (another session's text on content alone; a match a rule made
  info: scattered vocabulary, text gone from the pools, a run below `overlap_alone_matches`; a cold domain's held
  finding dismissed when judged again). Telling these apart needs the info findings, which no sink receives;
- `other`: alerts name it, but none with a content finding (a signal below high on its own);

the rest say which rule kept its strongest content finding at a warning:

- `cross_session`: another session of its own tenant, on content alone (ADR 0025: info), next to an alert raised for
  another reason;
- `echo`: whole sentences of the source, not most of the output (ADR 0008 decision 8: a warning);
- `beyond_pools`: the source's text had left every pool of the domain (`overlap_pool_turnovers`);
- `shared`: text other tenants had too, with too little evidence of the source's own (`overlap_high_evidence`);
- `scattered`: short scattered matches beside the long ones: vocabulary (`overlap_max_scatter`);
- `weak`: a content match below a page (a run shorter than the output's chance background allows).

The thresholds are the default settings', which every evaluation run uses.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from detectors.settings import DetectionSettings
from schemas.alert import SEVERITY_RANK, Alert, Signal

REASONS: dict[str, str] = {
    "nothing": "no alert names it",
    "other": "only other signals, below high",
    "cross_session": "its tenant's other session, content alone (info)",
    "echo": "whole sentences of the source (echo warning)",
    "beyond_pools": "the source's text gone from every pool",
    "shared": "text other tenants had too: too little evidence",
    "scattered": "scattered short matches: vocabulary",
    "weak": "a content match below a page",
}
_CONTENT = frozenset({"cross_tenant_contamination", "cross_session_contamination"})
_HIGH = SEVERITY_RANK["high"]
_S = DetectionSettings()


def _strongest(alerts: Iterable[Alert]) -> Signal | None:
    found = [e for a in alerts for e in a.evidence if e.name in _CONTENT]
    return max(
        found,
        key=lambda e: (SEVERITY_RANK[e.severity], e.figures.get("matched_fingerprints") or 0),
        default=None,
    )


def reason(alerts: list[Alert]) -> str:
    """Why a leaked response that none of `alerts` (the alerts naming it) flags high was missed (the module doc)."""
    if not alerts:
        return "nothing"
    e = _strongest(alerts)
    if e is None:
        return "other"
    f: dict[str, Any] = e.figures
    if e.name == "cross_session_contamination":
        return "cross_session"
    if f.get("whole_sentences"):
        return "echo"
    if (f.get("pool_turnovers") or 0.0) > _S.overlap_pool_turnovers:
        return "beyond_pools"
    if (f.get("evidence") or 0.0) < _S.overlap_high_evidence:
        return "shared"
    long = f.get("long_passages") or 0
    if (f.get("passages") or 0) - long - (f.get("attached_runs") or 0) > _S.overlap_max_scatter * long:
        return "scattered"
    return "weak"


def miss_counts(alerts: list[Alert], leaked: Iterable[str]) -> dict[str, int]:
    """`miss:<reason>` -> how many of the `leaked` responses no alert flags high were missed for that reason."""
    naming: dict[str, list[Alert]] = {}
    for a in alerts:
        for r in a.request_ids:
            naming.setdefault(r, []).append(a)
    counts: Counter[str] = Counter()
    for r in leaked:
        mine = naming.get(r, [])
        if not any(SEVERITY_RANK[a.severity] >= _HIGH for a in mine):
            counts[reason(mine)] += 1
    return {f"miss:{k}": counts[k] for k in REASONS}


# What a missed leak was, from its label alone (no alert): its kind, and its shortest leaked passage in tokens against a
# KV page (16-64 model tokens) and the content guarantee (a shared passage of 8 units; 16 for a run of 3).
SHAPES: dict[str, str] = {
    "cross_tenant:short": "another tenant's, shortest passage < 16 tokens",
    "cross_tenant:page": "another tenant's, 16-63 tokens",
    "cross_tenant:long": "another tenant's, 64 tokens or more",
    "cross_tenant:unknown": "another tenant's, length not labelled",
    "cross_session:any": "its tenant's other session (content alone is info)",
}


def shape(kind: str | None, shortest: float | None) -> str:
    """A missed leak's `SHAPES` key from its label: its kind and its shortest passage in tokens."""
    if kind == "cross_session":
        return "cross_session:any"
    if shortest is None:
        return "cross_tenant:unknown"
    return "cross_tenant:short" if shortest < 16 else "cross_tenant:page" if shortest < 64 else "cross_tenant:long"


def row_shapes(rows: list[dict[str, Any]]) -> dict[str, str]:
    """Each leak's `SHAPES` key from our evaluator's label rows (the simulator's and the blind profiles')."""
    return {
        r["request_id"]: shape(r.get("leak_kind"), r.get("shortest_passage_tokens")) for r in rows if r["contaminated"]
    }


def ext_shapes(labels: dict[str, Any]) -> dict[str, str]:
    """The same from ext-v2's labels: its scored leaks are another tenant's; each passage has its tokens."""
    passages = labels.get("leaks", {})
    return {
        r: shape("cross_tenant", min((p.get("tokens") or 0 for p in passages.get(r, ())), default=None))
        for r in labels.get("positives", {})
    }


def shape_counts(alerts: list[Alert], leaks: dict[str, str]) -> dict[str, int]:
    """`missed:<shape>` -> how many of the leaks (request id -> `SHAPES` key) no alert flags high were of that shape."""
    high = {r for a in alerts if SEVERITY_RANK[a.severity] >= _HIGH for r in a.request_ids}
    counts = Counter(k for r, k in leaks.items() if r not in high)
    return {f"missed:{k}": counts[k] for k in SHAPES}


def _shares(runs: list[dict[str, Any]], prefix: str, rows: dict[str, str], head: str) -> list[str]:
    profiles = list(dict.fromkeys(r["profile"] for r in runs))
    total: dict[str, Counter[str]] = {p: Counter() for p in profiles}
    for r in runs:
        total[r["profile"]].update({k: v for k, v in r["f"].items() if k.startswith(prefix)})
    lines = [f"| {head} | " + " | ".join(profiles) + " |", "|---|" + "---|" * len(profiles)]
    for key, label in rows.items():
        cells = []
        for p in profiles:
            n, all_missed = total[p][f"{prefix}{key}"], sum(total[p].values())
            cells.append(f"{100 * n / all_missed:.1f} % ({n})" if all_missed else "–")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def misses_table(runs: list[dict[str, Any]]) -> list[str]:
    """Markdown lines: per profile, every shape, seed and key pooled, each reason's share of the missed leaks; then
    each label shape's share of them."""
    lines = _shares(runs, "miss:", REASONS, "missed leaks: the strongest finding on each")
    return [*lines, "", *_shares(runs, "missed:", SHAPES, "missed leaks: what the label says they were")]
