"""The report of a simulated incident, opened in a real headless Chromium: what a security lead sees."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from selenium.webdriver.common.by import By

from .report_fixtures import ROOT, Run

# slow: a real headless Chromium per test (and the simulated incident behind it)
pytestmark = pytest.mark.slow

ARTIFACTS = ROOT / "test-artifacts"


def _texts(run: Run, request_ids: set[str]) -> list[str]:
    """Passages of the raw prompt and output texts of these requests, and every canary marker, as in the events."""
    found: list[str] = []
    with run.events.open("rb") as fh:
        for line in fh:
            ev = orjson.loads(line)
            for key in ("prompt_text", "output_text"):
                text = ev.get(key) or ""
                if ev.get("request_id") in request_ids and len(text) > 200:
                    mid = len(text) // 2
                    found.append(text[mid : mid + 60])
            found.extend(ev.get("canaries") or [])
            if ev["type"] == "canary":
                found.append(ev["marker"])
    return found


def _console_errors(driver: Any) -> list[dict[str, Any]]:
    return [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR", "WARNING")]


def _open(driver: Any, path: Path) -> None:
    driver.get(path.resolve().as_uri())
    assert driver.find_element(By.ID, "verdict")


def test_incident_report_in_chromium(incident: Run, browser: Any, tmp_path: Path) -> None:
    html = incident.report(tmp_path / "report.html")
    _open(browser, tmp_path / "report.html")

    # Every response the ground truth says was contaminated is listed, and nothing else.
    rows = browser.find_elements(By.CSS_SELECTOR, "#affected-table tr.affected-row")
    shown = {r.get_attribute("data-request-id") for r in rows}
    truth = {r["request_id"] for r in incident.contaminated}
    assert truth <= shown, f"affected request ids missing from the page: {sorted(truth - shown)}"
    assert shown == truth, f"responses shown as affected that were not: {sorted(shown - truth)}"
    for rid in truth:  # visible text, not just an attribute
        assert browser.find_element(By.ID, f"r-{rid}").text == rid
    verdict = browser.find_element(By.ID, "verdict")
    assert verdict.get_attribute("data-affected") == str(len(truth))
    assert f"{len(truth)} responses" in verdict.text

    # Per tenant: the received counts match the labels, in the attribute and in the rows of the table.
    sections = browser.find_elements(By.CSS_SELECTOR, "#tenant-list section.tenant")
    counted = {s.get_attribute("data-tenant"): int(s.get_attribute("data-received-count")) for s in sections}
    received = incident.received_by_tenant()
    assert {t: n for t, n in counted.items() if n} == dict(received)
    for s in sections:
        tenant = s.get_attribute("data-tenant")
        assert len(s.find_elements(By.CSS_SELECTOR, "table.received tbody tr")) == received.get(tenant, 0)

    # Evidence in words (not JSON), one timeline per cache domain, incidents with windows.
    assert "more than the prefill pool holds" in html and "fingerprints" in html
    assert '{"' not in browser.find_element(By.ID, "affected").text
    domains = {r["cache_domain"] for r in incident.labels["responses"]}
    figures = browser.find_elements(By.CSS_SELECTOR, "#timeline figure svg")
    assert {f.find_element(By.XPATH, "..").get_attribute("data-domain") for f in figures} == domains
    assert browser.find_elements(By.CSS_SELECTOR, "#incidents-table tbody tr")

    # No raw prompt or output text, no canary marker in clear.
    secrets = _texts(incident, truth)
    assert secrets
    for text in secrets:
        assert text not in html
    assert not re.search(r"CTK-CANARY-[0-9a-f]{16,}", html, re.IGNORECASE)

    # Self-contained: nothing to fetch.
    assert not re.search(r'(?:src|href)="(?:https?:)?//', html)

    # JavaScript adds sorting and filtering, without a console error.
    table = browser.find_element(By.ID, "affected-table")
    header = table.find_elements(By.CSS_SELECTOR, "thead th button.sort")[2]  # tenant
    header.click()
    tenants = [r.find_elements(By.TAG_NAME, "td")[2].text for r in table.find_elements(By.CSS_SELECTOR, "tbody tr")]
    assert tenants == sorted(tenants, key=str.lower)
    header.click()
    tenants = [r.find_elements(By.TAG_NAME, "td")[2].text for r in table.find_elements(By.CSS_SELECTOR, "tbody tr")]
    assert tenants == sorted(tenants, key=str.lower, reverse=True)
    one = next(iter(received))
    expected = sum(
        1 for r in table.find_elements(By.CSS_SELECTOR, "tbody tr") if one in r.get_attribute("textContent").lower()
    )
    assert expected >= received[one]
    box = browser.find_element(By.ID, "affected-filter")
    assert box.is_displayed()
    box.send_keys(one)
    visible = [r for r in table.find_elements(By.CSS_SELECTOR, "tbody tr") if r.is_displayed()]
    assert len(visible) == expected
    assert all(one in r.text for r in visible)
    assert browser.find_element(By.ID, "affected-filter-count").text == f"{len(visible)} shown"
    box.clear()
    box.send_keys("\b")
    assert _console_errors(browser) == []

    ARTIFACTS.mkdir(exist_ok=True)
    browser.execute_script("window.scrollTo(0, 0)")
    assert browser.save_screenshot(str(ARTIFACTS / "report.png"))
    assert (ARTIFACTS / "report.png").stat().st_size > 10_000


@pytest.mark.parametrize("browser", [False], indirect=True, ids=["no-javascript"])
def test_report_usable_without_javascript(incident: Run, browser: Any, tmp_path: Path) -> None:
    incident.report(tmp_path / "report.html")
    _open(browser, tmp_path / "report.html")
    rows = browser.find_elements(By.CSS_SELECTOR, "#affected-table tr.affected-row")
    assert len(rows) == len(incident.contaminated)
    assert all(r.is_displayed() for r in rows)
    # The filter box is of no use without the script, so it is not shown; the tables are complete.
    assert not browser.find_element(By.ID, "affected-filter").is_displayed()
    assert not browser.find_elements(By.CSS_SELECTOR, "button.sort")
    # Evidence opens natively (<details>).
    first = rows[0].find_element(By.TAG_NAME, "summary")
    first.click()
    assert rows[0].find_element(By.CSS_SELECTOR, "details li").is_displayed()


def test_clean_run_says_so(clean: Run, browser: Any, tmp_path: Path) -> None:
    html = clean.report(tmp_path / "clean.html")
    _open(browser, tmp_path / "clean.html")
    verdict = browser.find_element(By.ID, "verdict")
    assert "No response was affected" in verdict.text
    assert "clean" in verdict.get_attribute("class").split()
    assert verdict.get_attribute("data-affected") == "0"
    assert browser.find_element(By.ID, "no-affected").is_displayed()
    assert not browser.find_elements(By.CSS_SELECTOR, ".affected-row, .verdict.affected, section.tenant")
    # Nobody is counted as affected anywhere on the page.
    cards = browser.find_element(By.CSS_SELECTOR, ".cards").text
    assert re.search(r"\b0\s+affected responses", cards)
    assert verdict.text.startswith("No response was affected.")
    # The configuration finding that explains the risk is still there, and every tenant is listed as quiet.
    kinds = Counter(orjson.loads(line)["kind"] for line in clean.alerts.open("rb"))
    assert set(kinds) <= {"capacity_gap"}
    assert len(browser.find_elements(By.CSS_SELECTOR, "#configuration tbody tr")) == kinds["capacity_gap"]
    quiet = browser.find_element(By.ID, "quiet-tenants").text
    assert all(t in quiet for t in clean.tenants() if t.startswith("tenant-"))
    assert "more than the prefill pool holds" not in html
    assert _console_errors(browser) == []
