"""Human-readable output: alert lines as they fire, the end-of-run summary, evaluation tables."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from schemas.alert import Alert
from schemas.timefmt import format_ts
from streams.terminal import err

if TYPE_CHECKING:
    from streams.embedded.runner import RunResult
    from streams.sim.evaluate import Evaluation

_STYLE = {"critical": "bold red", "high": "red", "warning": "yellow", "info": "dim"}


def alert_line(alert: Alert) -> str:
    src = f" ← {alert.source_tenant_id}" if alert.source_tenant_id else ""
    who = f" tenant={alert.tenant_id}{src}" if alert.tenant_id else ""
    return (
        f"{format_ts(alert.ts)} {alert.severity.upper():8} {alert.kind:28} {alert.cache_domain}{who}  {alert.summary}"
    )


def print_alert(alert: Alert, console: Console = err) -> None:
    console.print(alert_line(alert), style=_STYLE.get(alert.severity, ""), markup=False)


def print_summary(result: RunResult, console: Console = err) -> None:
    t = Table(title="crosstalk: run summary", show_header=True)
    t.add_column("what")
    t.add_column("count", justify="right")
    for typ, n in sorted(result.events.items()):
        t.add_row(f"events: {typ}", f"{n:,}")
    for reason, n in sorted(result.rejects.items()):
        t.add_row(f"rejected: {reason}", f"{n:,}")
    for reason, n in sorted(result.warnings.items()):
        t.add_row(f"kept with a warning: {reason}", f"{n:,}", style="yellow")
    keys = ("exchanges", "orphans.no_request", "orphans.no_response", "exchanges.unroutable", "late")
    for key in (*keys, "domains.expired", "domains.evicted"):
        if result.counters.get(key):
            t.add_row(key, f"{result.counters[key]:,}")
    for key in sorted(k for k in result.counters if k.startswith("sink_errors.")):
        t.add_row(key, f"{result.counters[key]:,}", style="red")  # a sink failed; the run went on without it
    kinds: dict[tuple[str, str], int] = {}
    for a in result.alerts:
        kinds[(a.kind, a.severity)] = kinds.get((a.kind, a.severity), 0) + 1
    for (kind, sev), n in sorted(kinds.items()):
        t.add_row(f"alerts: {kind} ({sev})", f"{n:,}")
    rate = result.events_total / result.seconds if result.seconds > 0 else 0.0
    t.add_row("throughput", f"{rate:,.0f} events/s, {result.bytes_in / 1e6 / max(result.seconds, 1e-9):,.1f} MB/s")
    t.add_row("state size", ", ".join(f"{k}={v:,}" for k, v in sorted(result.state_size.items())))
    console.print(t)
    incidents = result.incidents()
    if incidents:
        it = Table(title="incidents (grouped by cache domain and category)")
        for col in ("incident", "domain", "from", "to", "alerts", "requests", "kinds", "tenants hit", "sources"):
            it.add_column(col)
        for inc in incidents:
            it.add_row(
                inc.incident_id[:12],
                inc.cache_domain,
                format_ts(inc.first_ts),
                format_ts(inc.last_ts),
                str(inc.alerts),
                str(len(inc.request_ids) + inc.truncated_request_ids),
                ", ".join(f"{k}×{n}" for k, n in inc.kinds.most_common()),
                str(len(inc.tenants)),
                ", ".join(sorted(inc.source_tenants)[:6]) + (" …" if len(inc.source_tenants) > 6 else ""),
            )
        console.print(it)


def print_evaluation(ev: Evaluation, console: Console | None = None) -> None:
    from streams.sim.evaluate import TARGET_SHOWN as shown

    console = console or Console(file=sys.stdout, highlight=False)
    t = Table(title="crosstalk: evaluation against ground truth")
    t.add_column("figure")
    t.add_column("value", justify="right")
    t.add_column("target", justify="right")
    t.add_row("responses / contaminated / clean 2xx", f"{ev.responses:,} / {ev.contaminated:,} / {ev.clean_2xx:,}", "")
    exposure = f"{ev.exposure_recall:.2%} ({ev.flagged_contaminated}/{ev.contaminated})"
    t.add_row("exposure recall", exposure, shown["exposure recall"])
    attribution = f"{ev.attribution_accuracy:.2%} ({ev.attributed}/{ev.contaminated})"
    t.add_row("attribution accuracy", attribution, shown["attribution accuracy"])
    t.add_row(
        "  … naming any tenant whose pages leaked", f"{ev.attribution_any_source:.2%} ({ev.attributed_any_source})", ""
    )
    t.add_row(
        "  cross-tenant alerts on leaks naming a non-source",
        f"{ev.misnamed_source_alerts} of {ev.source_alerts}",
        "",
    )
    false_alarms = f"{ev.false_alarm_rate:.3%} ({ev.false_alarms}/{ev.clean_2xx})"
    t.add_row("false-alarm rate", false_alarms, shown["false-alarm rate"])
    t.add_row("time to detect per episode", _episodes(ev.episodes), shown["time to detect per episode"])
    console.print(t)


def _episodes(f: dict[str, Any]) -> str:
    """Warm and cold episodes' longest time to detect, how many, and how many were never flagged (event time)."""
    parts = []
    for name in ("warm", "cold"):
        n, missed, worst = f.get(f"episodes_{name}") or 0, f.get(f"episodes_{name}_missed") or 0, f.get(f"ttd_{name}_s")
        if n:
            never = f", {missed} never" if missed else ""
            parts.append(f"{name} {'–' if worst is None else f'{worst:.1f} s'} ({n}{never})")
    return "; ".join(parts) or "n/a"
