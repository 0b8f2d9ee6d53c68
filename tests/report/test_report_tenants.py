"""Per-tenant notifications hold only what that tenant may see; the other party is named only as configured."""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from .report_fixtures import Run

# slow: each test runs crosstalk report as a subprocess on a simulated incident
pytestmark = pytest.mark.slow

REQUEST_ID = re.compile(r"req-[0-9a-f]{8,}")
SESSION_ID = re.compile(r"sess-[0-9a-f]{6,}")


def _notices(run: Run, tmp_path: Path, disclose: str | None, key: str = "report-test-key") -> dict[str, dict[str, Any]]:
    env = {"CROSSTALK_REPORT__PSEUDONYM_KEY": key}
    if disclose is not None:
        env["CROSSTALK_REPORT__DISCLOSE_COUNTERPARTY"] = disclose
    out = tmp_path / f"notices-{disclose}-{key}"
    run.report(tmp_path / "r.html", "--per-tenant", str(out), env=env)
    notices = {}
    for path in sorted(out.glob("*.json")):
        notice = orjson.loads(path.read_bytes())
        notices[notice["tenant_id"]] = notice
        assert path.with_suffix(".csv").exists()
    return notices


def _owned(run: Run, tenant: str, text: str) -> None:
    """Every request and session id in a tenant's file is that tenant's own."""
    owner = run.owner_of()
    sessions = {r["session_id"]: r["tenant_id"] for r in run.labels["responses"] if r.get("session_id")}
    for rid in REQUEST_ID.findall(text):
        assert owner.get(rid) == tenant, f"{tenant}'s notice names {rid} of {owner.get(rid)}"
    for sid in SESSION_ID.findall(text):
        assert sessions.get(sid, tenant) == tenant, f"{tenant}'s notice names session {sid} of {sessions.get(sid)}"


@pytest.mark.parametrize("disclose", [None, "false"], ids=["default-pseudonym", "not-named"])
def test_notices_hold_only_the_tenants_own_figures(incident: Run, tmp_path: Path, disclose: str | None) -> None:
    notices = _notices(incident, tmp_path, disclose)
    tenants = incident.tenants()
    received = incident.received_by_tenant()
    # One notice per tenant seen, including those with nothing to disclose.
    assert set(received) <= set(notices)
    assert {t for t in tenants if t.startswith("tenant-")} <= set(notices)
    for tenant, notice in notices.items():
        assert notice["summary"]["responses_with_other_data"] == received.get(tenant, 0)
        assert len(notice["received"]) == received.get(tenant, 0)
        for path in (f"{tenant}.json", f"{tenant}.csv"):
            text = (tmp_path / f"notices-{disclose}-report-test-key" / path).read_text()
            others = [t for t in tenants if t != tenant and re.search(rf"\b{re.escape(t)}\b", text)]
            assert others == [], f"{path} names other tenants: {others}"
            _owned(incident, tenant, text)
        for row in notice["your_data_found_elsewhere"]:
            assert row["your_request_ids"] or row["finding"] == "canary_leak"
    # Someone's data went somewhere, and they are told (with their own request ids).
    assert any(n["your_data_found_elsewhere"] for n in notices.values())
    parties = {r["other_party"] for n in notices.values() for r in n["received"]}
    if disclose is None:
        assert any(p.startswith("party-") for p in parties)
    else:
        assert "another tenant" in parties
        assert not any(p.startswith("party-") for p in parties)


def test_pseudonyms_are_keyed_and_stable(incident: Run, tmp_path: Path) -> None:
    a = _notices(incident, tmp_path, "pseudonym", key="key-one")
    b = _notices(incident, tmp_path, "pseudonym", key="key-one")
    c = _notices(incident, tmp_path, "pseudonym", key="key-two")

    def parties(ns: dict[str, dict[str, Any]]) -> list[str]:
        return [
            r["other_party"] for t in sorted(ns) for r in ns[t]["received"] if r["other_party"].startswith("party-")
        ]

    assert parties(a) and parties(a) == parties(b)
    assert parties(a) != parties(c)


def test_disclosure_configured_names_the_other_tenant(incident: Run, tmp_path: Path) -> None:
    notices = _notices(incident, tmp_path, "true")
    tenants = set(incident.tenants())
    named = {r["other_party"] for n in notices.values() for r in n["received"]} & tenants
    assert named, "with disclose_counterparty = true the other tenant is named"
    for tenant, notice in notices.items():
        text = orjson.dumps(notice).decode()
        _owned(incident, tenant, text)  # named, but still no other tenant's request ids
        for row in notice["your_data_found_elsewhere"]:
            assert row["other_party"] in tenants


def test_csv_matches_json(incident: Run, tmp_path: Path) -> None:
    notices = _notices(incident, tmp_path, None)
    out = tmp_path / "notices-None-report-test-key"
    for tenant, notice in notices.items():
        with (out / f"{tenant}.csv").open(newline="") as fh:
            rows = list(csv.DictReader(fh))
        assert sum(r["direction"] == "received" for r in rows) == len(notice["received"])
        assert sum(r["direction"] == "your_data_found_elsewhere" for r in rows) == len(
            notice["your_data_found_elsewhere"]
        )
        assert {r["your_request_ids"] for r in rows if r["direction"] == "received"} == {
            r["your_request_id"] for r in notice["received"]
        }
