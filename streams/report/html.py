"""The report as one self-contained HTML file: jinja2 (autoescaped) + inline CSS, SVG and a little JS.

No external resource of any kind (a Content-Security-Policy in the page forbids fetching one), so the
file can be attached to a ticket and archived. Every table is complete in the HTML; the script only
adds sorting and filtering.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from schemas.timefmt import format_ts
from streams.report.model import Report, evidence_of, summary_counts
from streams.report.plot import SEVERITY_COLOURS, domain_svg

_TEMPLATES = Path(__file__).with_name("templates")


def _ts(value: float | None) -> str:
    if value is None:
        return "–"
    return format_ts(value).replace("T", " ").removesuffix("Z")


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    s = max(0.0, float(seconds))
    if s < 60:
        return f"{s:.1f} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(s % 60)} s"
    if s < 86400:
        return f"{int(s // 3600)} h {int(s % 3600 // 60)} min"
    return f"{int(s // 86400)} d {int(s % 86400 // 3600)} h"


def _num(value: Any) -> str:
    return "–" if value is None else f"{value:,}"


def environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(_TEMPLATES),
        autoescape=select_autoescape(["html", "j2"], default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(ts=_ts, duration=_duration, num=_num)
    env.globals.update(severity_colours=SEVERITY_COLOURS, evidence_of=evidence_of)
    return env


def render(report: Report, *, title: str, inputs: list[str], problems: Any, settings_note: str = "") -> str:
    svgs: list[tuple[str, Markup]] = []
    tl = report.timeline
    if tl is not None:
        hit = Counter(r.cache_domain for r in report.affected)
        for name in sorted(tl.domains, key=lambda d: (-hit[d], d)):  # the domains with affected responses first
            # matplotlib escapes every text it writes; the SVG is ours, so it is inlined as markup.
            svgs.append((name, Markup(domain_svg(tl, tl.domains[name], report.incidents))))
    return (
        environment()
        .get_template("report.html.j2")
        .render(
            title=title,
            generated=_ts(datetime.now(tz=UTC).timestamp()),
            inputs=inputs,
            report=report,
            counts=summary_counts(report),
            svgs=svgs,
            problems=problems,
            settings_note=settings_note,
            timeline=tl,
        )
    )


def write_html(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)  # a reader never sees half a report
