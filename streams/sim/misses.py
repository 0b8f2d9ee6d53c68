"""Where the missed leaks went: what the alerts on each one concluded, counted by reason (scripts/evaluate_all.py).

A held-out profile's alerts are never read one by one (docs/evaluation.md), so its misses had no cause anyone could
name. These counts name the rule that held each missed leak below high, pooled, without a single alert being read:
a figure like the others, whose sum is the number of leaks missed. The reasons are tried in this order, on the
strongest content finding that names the response (the most severe, then the one with most matched fingerprints):

- `nothing`: no alert names it, so no finding on it reached a warning. Where the replay kept the core's leads
  (`crosstalk replay --leads-out`: what it judged below an alert), `nothing` means no finding at all (no shared passage
  of 8 units, no mechanism, no mix-up), and a lead says which rule kept its strongest content finding below an alert:
  `lead:cold` (a cold domain's finding, not held or dismissed when judged again), then the rules below as `lead:<rule>`,
  or `lead:other` (other signals only). Without leads (result files before stop 63) they all count as `nothing`;
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
from pathlib import Path
from typing import Any

from detectors.settings import DetectionSettings
from schemas.alert import SEVERITY_RANK, Alert, Lead, Signal

REASONS: dict[str, str] = {
    "nothing": "no alert names it (nor a lead, where kept)",
    "other": "only other signals, below high",
    "cross_session": "its tenant's other session, content alone (info)",
    "echo": "whole sentences of the source (echo warning)",
    "beyond_pools": "the source's text gone from every pool",
    "shared": "text other tenants had too: too little evidence",
    "scattered": "scattered short matches: vocabulary",
    "weak": "a content match below a page",
    # No alert, and the core's own finding below one (`crosstalk replay --leads-out`; evaluations since stop 63).
    "lead:cold": "no alert; a cold domain's finding (not held, or dismissed)",
    "lead:cross_session": "no alert; its tenant's other session",
    "lead:echo": "no alert; whole sentences of the source",
    "lead:beyond_pools": "no alert; the source's text gone from every pool",
    "lead:shared": "no alert; text other tenants had too",
    "lead:scattered": "no alert; scattered short matches",
    "lead:weak": "no alert; a run below a page",
    "lead:other": "no alert; other signals only",
}
_CONTENT = frozenset({"cross_tenant_contamination", "cross_session_contamination"})
_HIGH = SEVERITY_RANK["high"]
_S = DetectionSettings()


def _strongest(alerts: Iterable[Alert]) -> Signal | None:
    return _strongest_signal(e for a in alerts for e in a.evidence)


def _strongest_signal(signals: Iterable[Signal]) -> Signal | None:
    found = [e for e in signals if e.name in _CONTENT]
    return max(
        found,
        key=lambda e: (SEVERITY_RANK[e.severity], e.figures.get("matched_fingerprints") or 0),
        default=None,
    )


def reason(alerts: list[Alert], leads: list[Lead] | None = None) -> str:
    """Why a leaked response that none of `alerts` (the alerts naming it) flags high was missed (the module doc);
    `leads`: the core's findings on it below an alert, where the replay kept them (None: not kept)."""
    if not alerts:
        if not leads:
            return "nothing"
        e = _strongest_signal(s for lead in leads for s in lead.findings)
        if e is None:
            return "lead:other"
        if "held_s" in e.figures or e.figures.get("warm") is False:
            return "lead:cold"  # judged in a cold domain: not held (below high), or held and dismissed
        return "lead:" + _rule(e)
    e = _strongest(alerts)
    if e is None:
        return "other"
    return _rule(e)


def _rule(e: Signal) -> str:
    """The rule that kept content finding `e` below high."""
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


def miss_counts(alerts: list[Alert], leaked: Iterable[str], leads: list[Lead] | None = None) -> dict[str, int]:
    """`miss:<reason>` -> how many of the `leaked` responses no alert flags high were missed for that reason;
    `leads`: the replay's leads (`load_leads`), None where it kept none."""
    naming: dict[str, list[Alert]] = {}
    for a in alerts:
        for r in a.request_ids:
            naming.setdefault(r, []).append(a)
    on: dict[str, list[Lead]] | None = None
    if leads is not None:
        on = {}
        for lead in leads:
            on.setdefault(lead.request_id, []).append(lead)
    counts: Counter[str] = Counter()
    for r in leaked:
        mine = naming.get(r, [])
        if not any(SEVERITY_RANK[a.severity] >= _HIGH for a in mine):
            counts[reason(mine, None if on is None else on.get(r, []))] += 1
    return {f"miss:{k}": counts[k] for k in REASONS}


def load_leads(path: Path) -> list[Lead] | None:
    """A replay's leads file (`--leads-out`); None if the replay kept none (an older result's)."""
    if not path.exists():
        return None
    with path.open("rb") as fh:
        return [Lead.model_validate_json(line) for line in fh if line.strip()]


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
