"""The timeline of one cache domain as a static SVG (matplotlib), for inlining into the report.

Three panels on one time axis: prompt tokens against the prefill capacity and the advertised window,
cache pressure, and alerts by severity; incident windows shaded across all three. The picture that
would have shown the GLM-5.3 gap on day one: dots above the capacity line answered with 200.
"""

from __future__ import annotations

import html
import io
import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from streams.report.model import IncidentRow
from streams.report.timeline import Bucket, DomainSeries, Timeline

# matplotlib is imported where a plot is drawn (it is slow to import); its types only for the checker.
if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

SEVERITY_COLOURS = {"info": "#80868b", "warning": "#e3a008", "high": "#e8710a", "critical": "#c5221f"}
_SEVERITIES = ("info", "warning", "high", "critical")


def _dt(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=UTC)


def domain_svg(timeline: Timeline, series: DomainSeries, incidents: list[IncidentRow]) -> str:
    """An <svg> element (no XML prolog), scaled by its viewBox to the page width."""
    import matplotlib
    import matplotlib.dates as mdates
    from matplotlib.figure import Figure

    idxs = sorted(series.buckets)
    xs = [_dt(timeline.bucket_start(i) + timeline.width / 2) for i in idxs]
    buckets = [series.buckets[i] for i in idxs]
    rc: dict[RcKeyType, Any] = {
        "svg.fonttype": "none",  # text stays text: smaller, selectable, searchable
        "svg.hashsalt": f"crosstalk-{series.name}",  # stable ids, distinct between the inlined figures
        "font.size": 9,
        "axes.spines.top": False,
        "axes.spines.right": False,
    }
    with matplotlib.rc_context(rc):
        fig = Figure(figsize=(10, 5.2), layout="constrained")
        ax_tok, ax_use, ax_al = fig.subplots(3, 1, sharex=True, height_ratios=(3, 1.3, 1.1))
        _prompt_tokens(ax_tok, xs, buckets, series)
        _cache_pressure(ax_use, xs, buckets)
        _alerts(ax_al, xs, buckets)
        for inc in incidents:
            if inc.cache_domain != series.name or not inc.affected:
                continue
            lo, hi = inc.start, max(inc.end, inc.start + timeline.width)
            for ax in (ax_tok, ax_use, ax_al):
                ax.axvspan(_dt(lo), _dt(hi), color="#c5221f", alpha=0.10, linewidth=0, zorder=0)
        locator = mdates.AutoDateLocator()
        ax_al.xaxis.set_major_locator(locator)
        ax_al.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
        ax_al.set_xlabel(f"event time (UTC); one point per {timeline.width:g} s; shaded: incident windows")
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg") :]
    # Scale with the page: keep the viewBox, drop the fixed point size.
    svg = re.sub(r'<svg([^>]*?) width="[^"]+" height="[^"]+"', r'<svg\1 width="100%"', svg, count=1)
    return svg.replace(
        "<svg", f'<svg role="img" aria-label="timeline of cache domain {html.escape(series.name, quote=True)}"', 1
    )


def _prompt_tokens(ax: Any, xs: list[datetime], buckets: list[Bucket], series: DomainSeries) -> None:
    # Prompt tokens: the largest prompt of each bucket; red where it exceeded the pool.
    cap_steps: list[float] = []
    capacity: float | None = None
    for b in buckets:
        capacity = b.capacity if b.capacity is not None else capacity
        cap_steps.append(float("nan") if capacity is None else capacity)
    pts = [(x, b, c) for x, b, c in zip(xs, buckets, cap_steps, strict=True) if b.requests]
    ok = [(x, b.max_prompt) for x, b, c in pts if not b.max_prompt > c]
    over = [(x, b.max_prompt) for x, b, c in pts if b.max_prompt > c and not b.overlong_accepted]
    accepted = [(x, b.max_accepted_overlong) for x, b, c in pts if b.overlong_accepted]
    if ok:
        ax.scatter(*zip(*ok, strict=True), s=7, color="#5f6368", label="largest prompt in the interval", zorder=3)
    if over:
        ax.scatter(
            *zip(*over, strict=True),
            s=16,
            facecolors="none",
            edgecolors="#c5221f",
            label="larger than the pool, refused",
            zorder=4,
        )
    if accepted:
        ax.scatter(
            *zip(*accepted, strict=True),
            s=20,
            color="#c5221f",
            label="larger than the pool, answered 2xx",
            zorder=5,
        )
    if any(c == c for c in cap_steps):  # not all NaN
        ax.step(xs, cap_steps, where="mid", color="#1a73e8", linewidth=1.4, label="prefill capacity")
    if series.context_window:
        ax.axhline(
            series.context_window, color="#e8710a", linestyle="--", linewidth=1.1, label="advertised context window"
        )
    if ok or over or accepted:
        ax.set_yscale("log")
    ax.set_ylabel("prompt tokens")
    ax.legend(loc="lower right", bbox_to_anchor=(1.0, 1.0), fontsize=7, ncols=3, frameon=False)
    # A cache domain name is input: "$...$" in it must stay text, never mathtext (a bad macro raised).
    ax.set_title(series.name, loc="left", fontsize=10, fontweight="bold", parse_math=False, usetex=False)


def _cache_pressure(ax: Any, xs: list[datetime], buckets: list[Bucket]) -> None:
    # Cache pressure.
    use = [(x, b.max_used_share * 100) for x, b in zip(xs, buckets, strict=True) if b.max_used_share >= 0]
    if use:
        ax.plot(*zip(*use, strict=True), color="#1a73e8", linewidth=1.0)
        ax.fill_between(*zip(*use, strict=True), color="#1a73e8", alpha=0.12)
    ax.set_ylim(0, 105)
    ax.set_ylabel("prefill pool\nused %")


def _alerts(ax: Any, xs: list[datetime], buckets: list[Bucket]) -> None:
    # Alerts by severity: one row each, marker area by count.
    for row, sev in enumerate(_SEVERITIES):
        marks = [(x, b.alerts[sev]) for x, b in zip(xs, buckets, strict=True) if b.alerts.get(sev)]
        if marks:
            ax.scatter(
                [p[0] for p in marks],
                [row] * len(marks),
                s=[min(12 + 6 * p[1], 80) for p in marks],
                color=SEVERITY_COLOURS[sev],
                marker="v",
                zorder=3,
            )
    ax.set_yticks(range(len(_SEVERITIES)), _SEVERITIES)
    ax.set_ylim(-0.6, len(_SEVERITIES) - 0.4)
    ax.set_ylabel("alerts")
