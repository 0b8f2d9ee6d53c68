"""Alerts judged against the simulator's ground-truth labels (`crosstalk evaluate`: streams/cli/evaluate.py).

- exposure recall: contaminated responses flagged high or critical;
- attribution accuracy: contaminated responses flagged with the right conclusion and origin
  (cross_tenant_contamination or canary_leak naming the label's source tenant — the one with most
  leaked tokens; for leaks from the same tenant's other session, cross_session_contamination);
  also reported leniently: naming any tenant whose pages leaked into the response;
- false alarms: clean 2xx responses flagged high or critical, and flagged warning or above;
- detection delay: event time from the first contaminated response to the first alert flagging one; per leak
  episode, warm and cold (streams/sim/episodes.py), the figure the targets hold.

Every figure overall, per scenario (`mechanism`, `content_only`), per receiver and source language
(zh, ja, de, en, code) and script group (cjk = zh + ja, rest); false alarms also per receiver language
and per decoy kind (public_doc, public_echo, translation, rag, vendored, boilerplate, session_resend).
"""

from __future__ import annotations

import gzip
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson

from schemas.alert import SEVERITY_RANK, Alert
from streams.sim.episodes import episode_figures, episodes, episodes_met, flagged_times, from_labels, paged_times

_HIGH = SEVERITY_RANK["high"]
_WARNING = SEVERITY_RANK["warning"]
CJK = frozenset({"zh", "ja"})
# Decoys made of public text (as opposed to stock phrases and a session's own history).
PUBLIC_DECOYS = frozenset({"public_doc", "public_echo", "translation", "rag", "vendored"})


def script_of(lang: str | None) -> str | None:
    return None if lang is None else "cjk" if lang in CJK else "rest"


@dataclass
class Evaluation:
    responses: int
    contaminated: int
    clean_2xx: int
    flagged_contaminated: int
    attributed: int
    attributed_any_source: int
    false_alarms: int
    exposure_recall: float
    attribution_accuracy: float
    attribution_any_source: float
    false_alarm_rate: float
    detection_delay_s: float | None
    first_contaminated_ts: float | None
    first_flag_ts: float | None
    alerts: int
    missed_request_ids: list[str]
    misattributed_request_ids: list[str]
    false_alarm_request_ids: list[str]
    warning_alarms: int = 0  # clean 2xx responses flagged warning or above
    warning_alarm_rate: float = 0.0
    # Incidents (alerts grouped by incident_id) that reached high or critical by their own severity (ADR 0018), and
    # those of them none of whose alerts names a leaked response: what an on-call engineer is paged for in vain
    # (issue 39). Beside them, as counted before incidents had a severity of their own (any alert high or critical),
    # the incidents with a leak and a high alert that never paged, and the longest wait from such an incident's first
    # high alert naming a leak to the incident reaching high (`incident_figures`).
    incidents_high: int = 0
    false_incidents: int = 0
    false_incidents_by_alert: int = 0
    unpaged_incidents: int = 0
    incident_delay_s: float | None = None
    # Time to detect per leak episode, warm and cold (streams/sim/episodes.py): counts, never-detected counts, maxima.
    episodes: dict[str, Any] = field(default_factory=dict)
    # High or critical cross-tenant alerts on contaminated responses, and how many of them name a tenant whose
    # pages are not in the response: the price of naming every source (one alert per victim), kept in sight.
    source_alerts: int = 0
    misnamed_source_alerts: int = 0
    # group name -> value -> figures (see _leak_figures / _clean_figures)
    groups: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def unmet(self) -> list[str]:
        """The printed targets (`TARGETS`) this evaluation misses, by name; none when every one is met."""
        return [t.name for t in TARGETS if not t.met(self)]


@dataclass(frozen=True)
class Target:
    """One figure the simulator's evaluation is held to: `crosstalk demo` and `evaluate` print it beside the figure."""

    name: str
    shown: str  # as printed, e.g. "≥ 99 %"
    met: Callable[[Evaluation], bool]


# The targets the console prints (streams/cli/console.py) and tests/e2e/test_cli.py holds the demo to, under
# several keys: one declaration, so a printed target cannot be one nobody checks.
TARGETS = (
    Target("exposure recall", "≥ 99 %", lambda e: e.exposure_recall >= 0.99),
    Target("attribution accuracy", "≥ 95 %", lambda e: e.attribution_accuracy >= 0.95),
    Target("false-alarm rate", "≤ 0.1 %", lambda e: e.false_alarm_rate <= 0.001),
    # Per leak episode (streams/sim/episodes.py): a warm domain's within 60 s, a new one's within its warm-up hold
    # (600 s, the README's bound), and none never flagged.
    Target("time to detect per episode", "≤ 60 s warm, ≤ 600 s cold", lambda e: episodes_met(e.episodes)),
)
TARGET_SHOWN = {t.name: t.shown for t in TARGETS}


def _open(path: str) -> Any:
    return gzip.open(path, "rb") if path.endswith(".gz") else Path(path).open("rb")


def load_alerts(path: str) -> list[Alert]:
    with _open(path) as fh:
        return [Alert.model_validate_json(line) for line in fh if line.strip()]


def load_labels(path: str) -> dict[str, Any]:
    return orjson.loads(Path(path).read_bytes())


def _rank(alerts: list[Alert]) -> int:
    return max((SEVERITY_RANK[a.severity] for a in alerts), default=-1)


def _leak_figures(rows: list[dict[str, Any]], by_request: dict[str, list[Alert]]) -> dict[str, Any]:
    flagged = attributed = attributed_any = 0
    first_flag: float | None = None
    for r in rows:
        found = by_request.get(r["request_id"], [])
        high = [a for a in found if SEVERITY_RANK[a.severity] >= _HIGH]
        if high:
            flagged += 1
            t = min(a.ts for a in high)
            first_flag = t if first_flag is None else min(first_flag, t)
        attributed += any(_attributes(a, r) for a in found)
        attributed_any += any(_attributes(a, r, lenient=True) for a in found)
    n = len(rows)
    first = min((r["ts"] for r in rows), default=None)
    return {
        "contaminated": n,
        "exposed": flagged,
        "exposure": flagged / n if n else None,
        "attributed": attributed,
        "attribution": attributed / n if n else None,
        "attributed_any_source": attributed_any,
        "attribution_any_source": attributed_any / n if n else None,
        "delay_s": None if first is None or first_flag is None else max(0.0, first_flag - first),
    }


def _clean_figures(rows: list[dict[str, Any]], by_request: dict[str, list[Alert]]) -> dict[str, Any]:
    ranks = [_rank(by_request.get(r["request_id"], [])) for r in rows]
    high = sum(k >= _HIGH for k in ranks)
    warn = sum(k >= _WARNING for k in ranks)
    n = len(rows)
    return {
        "clean_2xx": n,
        "high": high,
        "high_rate": high / n if n else None,
        "warning": warn,
        "warning_rate": warn / n if n else None,
    }


def _group(rows: list[dict[str, Any]], key: Callable[[dict[str, Any]], Iterable[str | None]]) -> dict[str, list]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        for k in key(r):
            if k is not None:
                out.setdefault(k, []).append(r)
    return dict(sorted(out.items()))


def evaluate(labels: dict[str, Any], alerts: Iterable[Alert]) -> Evaluation:
    by_request: dict[str, list[Alert]] = {}
    n_alerts = 0
    for a in alerts:
        n_alerts += 1
        for rid in a.request_ids:
            by_request.setdefault(rid, []).append(a)
    rows = labels["responses"]
    contaminated = [r for r in rows if r["contaminated"]]
    clean_ok = [r for r in rows if not r["contaminated"] and 200 <= r["status_code"] <= 299]
    missed, misattributed = [], []
    for r in contaminated:
        found = by_request.get(r["request_id"], [])
        if not any(SEVERITY_RANK[a.severity] >= _HIGH for a in found):
            missed.append(r["request_id"])
        if not any(_attributes(a, r) for a in found):
            misattributed.append(r["request_id"])
    false_alarms = [r["request_id"] for r in clean_ok if _rank(by_request.get(r["request_id"], [])) >= _HIGH]
    overall = _leak_figures(contaminated, by_request)
    clean = _clean_figures(clean_ok, by_request)
    groups = _groups(contaminated, clean_ok, by_request)
    named = [
        (a, r)
        for r in contaminated
        for a in by_request.get(r["request_id"], [])
        if a.kind == "cross_tenant_contamination" and SEVERITY_RANK[a.severity] >= _HIGH
    ]
    misnamed = sum(a.source_tenant_id not in {r["source_tenant_id"], *(r.get("source_tenant_ids") or [])}
                   for a, r in named)  # fmt: skip
    n = len(contaminated)
    return Evaluation(
        responses=len(rows),
        contaminated=n,
        clean_2xx=len(clean_ok),
        flagged_contaminated=overall["exposed"],
        attributed=overall["attributed"],
        attributed_any_source=overall["attributed_any_source"],
        false_alarms=len(false_alarms),
        exposure_recall=overall["exposed"] / n if n else 1.0,
        attribution_accuracy=overall["attributed"] / n if n else 1.0,
        attribution_any_source=overall["attributed_any_source"] / n if n else 1.0,
        false_alarm_rate=len(false_alarms) / len(clean_ok) if clean_ok else 0.0,
        detection_delay_s=overall["delay_s"],
        first_contaminated_ts=min((r["ts"] for r in contaminated), default=None),
        first_flag_ts=_first_flag(contaminated, by_request),
        alerts=n_alerts,
        missed_request_ids=missed,
        misattributed_request_ids=misattributed,
        false_alarm_request_ids=false_alarms,
        warning_alarms=clean["warning"],
        warning_alarm_rate=clean["warning_rate"] or 0.0,
        groups=groups,
        source_alerts=len(named),
        misnamed_source_alerts=misnamed,
        **_incidents(by_request, {r["request_id"] for r in contaminated}),
        episodes=episode_figures(
            episodes(
                *from_labels(rows),
                flagged_times(seen := [a for f in by_request.values() for a in f]),
                paged_at=paged_times(seen),
            )
        ),
    )


def _incidents(by_request: dict[str, list[Alert]], leaked: set[str]) -> dict[str, Any]:
    alerts = {a.alert_id: a for found in by_request.values() for a in found}
    return incident_figures(alerts.values(), leaked)


def incident_figures(alerts: Iterable[Alert], leaked: set[str]) -> dict[str, Any]:
    """Incidents by their own severity (`Alert.incident_severity`: the incident's as of that alert; an alert from
    before it existed counts with its own severity, as incidents were then): those that reached high or critical, the
    false ones (none of their alerts names a `leaked` response), the false ones counted by alert severity (any alert
    high or critical, as ext-v2's scorer counts), the incidents with a leaked response and a high alert that never
    reached high (leaks an on-call engineer was not paged for), and the longest wait from such an incident's first
    high alert naming a leak to the incident reaching high."""
    by_incident: dict[str, list[Alert]] = {}
    for a in alerts:
        if a.request_ids:  # an incident about a configuration names no response
            by_incident.setdefault(a.incident_id or a.alert_id, []).append(a)
    out: dict[str, Any] = {"incidents_high": 0, "false_incidents": 0, "false_incidents_by_alert": 0}
    out |= {"unpaged_incidents": 0, "incident_delay_s": None}
    for group in by_incident.values():
        group.sort(key=lambda a: a.ts)
        true = any(r in leaked for a in group for r in a.request_ids)
        alert_high = [a for a in group if SEVERITY_RANK[a.severity] >= _HIGH]
        paged = [a for a in group if SEVERITY_RANK[a.incident_severity or a.severity] >= _HIGH]
        out["incidents_high"] += bool(paged)
        out["false_incidents"] += bool(paged) and not true
        out["false_incidents_by_alert"] += bool(alert_high) and not true
        first_leak = next((a.ts for a in alert_high if any(r in leaked for r in a.request_ids)), None)
        if first_leak is None:
            continue
        if not paged:
            out["unpaged_incidents"] += 1
            continue
        wait = max(0.0, paged[0].ts - first_leak)
        out["incident_delay_s"] = max(wait, out["incident_delay_s"] or 0.0)
    return out


def _groups(
    contaminated: list[dict[str, Any]], clean_ok: list[dict[str, Any]], by_request: dict[str, list[Alert]]
) -> dict[str, Any]:
    """Every figure per group: scenario, receiver's and source's language and script, the shortest passage, and the
    clean responses by receiver language and by decoy kind."""
    # Older label files (before scenarios) are all the placeholder mechanism.
    scenario = lambda r: [r.get("scenario") or "mechanism"]  # noqa: E731
    return {
        "scenario": {k: _leak_figures(v, by_request) for k, v in _group(contaminated, scenario).items()},
        "receiver_lang": {k: _leak_figures(v, by_request) for k, v in _group(contaminated, _receiver).items()},
        "source_lang": {k: _leak_figures(v, by_request) for k, v in _group(contaminated, _source).items()},
        "receiver_script": {
            k: _leak_figures(v, by_request)
            for k, v in _group(contaminated, lambda r: map(script_of, _receiver(r))).items()
        },
        "source_script": {
            k: _leak_figures(v, by_request)
            for k, v in _group(contaminated, lambda r: map(script_of, _source(r))).items()
        },
        "scenario_x_source_script": {
            k: _leak_figures(v, by_request)
            for k, v in _group(
                contaminated, lambda r: [f"{scenario(r)[0]}/{s}" for s in map(script_of, _source(r)) if s]
            ).items()
        },
        # Recall by the shortest leaked passage (tokens): what a detector's guarantee length misses.
        "shortest_passage": {k: _leak_figures(v, by_request) for k, v in _group(contaminated, _passage_class).items()},
        "clean_by_receiver_lang": {k: _clean_figures(v, by_request) for k, v in _group(clean_ok, _receiver).items()},
        "clean_by_decoy": {
            k: _clean_figures(v, by_request)
            for k, v in _group(clean_ok, lambda r: [*(r.get("decoys") or []), *_public(r)]).items()
        },
    }


def _receiver(r: dict[str, Any]) -> list[str | None]:
    return [r.get("receiver_lang") or "code"]


def _source(r: dict[str, Any]) -> list[str | None]:
    return [r.get("source_lang") or ("code" if r.get("contaminated") else None)]


def _passage_class(r: dict[str, Any]) -> list[str | None]:
    t = r.get("shortest_passage_tokens")
    if t is None:
        return []
    return ["<16 tokens" if t < 16 else "16-24 tokens" if t <= 24 else "25-64 tokens" if t <= 64 else ">64 tokens"]


def _public(r: dict[str, Any]) -> list[str]:
    return ["any_public_text"] if PUBLIC_DECOYS & set(r.get("decoys") or []) else []


def _first_flag(rows: list[dict[str, Any]], by_request: dict[str, list[Alert]]) -> float | None:
    ts = [a.ts for r in rows for a in by_request.get(r["request_id"], []) if SEVERITY_RANK[a.severity] >= _HIGH]
    return min(ts, default=None)


def _attributes(alert: Alert, row: dict[str, Any], lenient: bool = False) -> bool:
    # A canary of another tenant in the output is a certain attribution of (part of) the leak, even
    # where another tenant's pages dominate the output.
    if alert.kind == "canary_leak" and row.get("canary_markers"):
        return True
    if row.get("leak_kind") == "cross_session":
        return alert.kind == "cross_session_contamination" or (
            alert.kind == "canary_leak" and alert.source_tenant_id == row["source_tenant_id"]
        )
    sources = set(row.get("source_tenant_ids") or []) if lenient else set()
    sources.add(row["source_tenant_id"])
    return alert.kind in ("cross_tenant_contamination", "canary_leak") and alert.source_tenant_id in sources


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x:.1%}"


def group_rows(ev: Evaluation) -> list[list[str]]:
    """The per-group figures as table rows: group, value, contaminated, exposure, attribution, delay."""
    out = []
    for group in ("scenario", "receiver_lang", "source_lang", "receiver_script", "source_script"):
        for value, f in ev.groups.get(group, {}).items():
            delay = "–" if f["delay_s"] is None else f"{f['delay_s']:.1f} s"
            out.append(
                [
                    group,
                    value,
                    str(f["contaminated"]),
                    f"{_pct(f['exposure'])} ({f['exposed']})",
                    f"{_pct(f['attribution'])} ({f['attributed']})",
                    delay,
                ]
            )
    return out


def clean_rows(ev: Evaluation) -> list[list[str]]:
    """False alarms per receiver language and per decoy kind: group, value, clean 2xx, high+, warning+."""
    out = [["all", "clean 2xx", str(ev.clean_2xx), f"{ev.false_alarm_rate:.3%} ({ev.false_alarms})",
            f"{ev.warning_alarm_rate:.3%} ({ev.warning_alarms})"]]  # fmt: skip
    for group in ("clean_by_receiver_lang", "clean_by_decoy"):
        for value, f in ev.groups.get(group, {}).items():
            out.append(
                [
                    group.removeprefix("clean_by_"),
                    value,
                    str(f["clean_2xx"]),
                    f"{f['high_rate']:.3%} ({f['high']})",
                    f"{f['warning_rate']:.3%} ({f['warning']})",
                ]
            )
    return out


def print_groups(ev: Evaluation, console: Any = None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = console or Console(highlight=False)
    t = Table(title="per scenario and language group (contaminated responses)")
    for col in ("group", "value", "contaminated", "exposure (high+)", "attribution", "delay"):
        t.add_column(col, justify="left" if col in ("group", "value") else "right")
    for row in group_rows(ev):
        t.add_row(*row)
    console.print(t)
    c = Table(title="false alarms on clean 2xx responses")
    for col in ("group", "value", "responses", "high or critical", "warning or above"):
        c.add_column(col, justify="left" if col in ("group", "value") else "right")
    for row in clean_rows(ev):
        c.add_row(*row)
    console.print(c)
