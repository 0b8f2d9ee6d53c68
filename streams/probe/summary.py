"""The probe's summary table (rich, on stderr so stdout can carry events into a pipeline).

Shows sizes, statuses, reported token counts, TTFT and findings; canary markers only by keyed id.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console, JustifyMethod
from rich.table import Table

from streams.probe.run import CycleReport

_CODE_STYLE = {0: "bold green", 1: "bold red", 2: "bold yellow"}


def print_report(report: CycleReport, console: Console) -> None:
    head = f"crosstalk probe: {report.base_url}"
    if report.model:
        head += f"  model={report.model}"
    if report.window:
        head += f"  window={report.window:,}"
    if report.pool:
        head += f"  pool={report.pool:,}"
    flagged: dict[str, list[str]] = {}
    for f in report.findings:
        flagged.setdefault(f.request_id, []).append(f.kind)
    if report.results:
        t = Table(title=head, show_header=True)
        columns: tuple[tuple[str, JustifyMethod], ...] = (
            ("phase", "left"),
            ("rung", "left"),
            ("identity", "left"),
            ("sent tokens", "right"),
            ("status", "right"),
            ("usage.prompt_tokens", "right"),
            ("TTFT ms", "right"),
            ("verdict", "left"),
        )
        for col, just in columns:
            t.add_column(col, justify=just)
        for r in report.results:
            if r.skipped:
                verdict, style = f"skipped ({r.skipped})", "dim"
            elif r.request_id in flagged:
                verdict, style = ", ".join(flagged[r.request_id]), "red"
            elif r.cut is not None:
                verdict, style = f"answer cut: {r.cut}", "yellow"
            elif r.status is None:
                verdict, style = f"no answer: {r.error}", "yellow"
            elif r.accepted:
                verdict, style = "ok", ""
            else:
                verdict, style = f"rejected: {r.error or r.status}", "dim"
            t.add_row(
                r.phase,
                r.rung,
                r.tenant,
                f"{r.sent_tokens:,}",
                "-" if r.status is None else str(r.status),
                "-" if r.usage_prompt_tokens is None else f"{r.usage_prompt_tokens:,}",
                "-" if r.ttft_s is None else f"{r.ttft_s * 1000:.1f}",
                verdict,
                style=style,
            )
        console.print(t)
    else:
        console.print(head)
    for f in report.findings:
        console.print(f"  [{f.kind}] {f.request_id}: {f.detail}", style="red", markup=False, highlight=False)
    b = report.budget
    if b is not None:
        console.print(
            f"budget: {b.requests}/{b.max_requests} requests, {b.tokens:,}/{b.max_tokens:,} tokens, "
            f"{b.rate_per_s:g} req/s; events sent: "
            + (", ".join(f"{k}={v}" for k, v in sorted(report.events.items())) or "none")
            + f"; {report.seconds:.1f} s",
            style="dim",
            markup=False,
        )
    console.print(
        f"{report.verdict} (exit {report.exit_code})",
        style=_CODE_STYLE[report.exit_code],
        markup=False,
        highlight=False,
    )


def report_json(report: CycleReport) -> dict[str, Any]:
    """The cycle as JSON-ready data (no markers, no text), for deploy pipelines."""
    return {
        "base_url": report.base_url,
        "model": report.model,
        "window": report.window,
        "pool": report.pool,
        "exit_code": report.exit_code,
        "verdict": report.verdict,
        "error": report.error,
        "findings": [f.__dict__ for f in report.findings],
        "probes": [
            {
                "request_id": r.request_id,
                "phase": r.phase,
                "rung": r.rung,
                "tenant": r.tenant,
                "sent_tokens": r.sent_tokens,
                "status": r.status,
                "usage_prompt_tokens": r.usage_prompt_tokens,
                "ttft_ms": None if r.ttft_s is None else round(r.ttft_s * 1000, 3),
                "skipped": r.skipped,
                "cut": r.cut,
                "error": r.error,
            }
            for r in report.results
        ],
        "budget": None
        if report.budget is None
        else {
            "requests": report.budget.requests,
            "max_requests": report.budget.max_requests,
            "tokens": report.budget.tokens,
            "max_tokens": report.budget.max_tokens,
        },
        "events": dict(report.events),
    }
