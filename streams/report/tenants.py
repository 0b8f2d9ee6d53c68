"""Per-tenant notifications: one JSON and one CSV file per tenant, holding only what that tenant may see.

A tenant sees their own request ids (received and leaked), times, cache domains, severities and the
signals in words. The other party is named only as `report.disclose_counterparty` says: its tenant id
(true), a keyed pseudonym, stable per key (\"pseudonym\", the default), or not at all (false). Another
tenant's request ids, session ids and alert summaries (which name both parties) are never included.
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import io
import re
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import orjson

from schemas.alert import Alert
from schemas.timefmt import format_ts
from streams.report.model import Report, TenantView, evidence_of

Disclosure = bool | Literal["pseudonym"]
NOT_NAMED = "another tenant"
CSV_FIELDS = (
    "direction",
    "your_request_ids",
    "time",
    "cache_domain",
    "severity",
    "finding",
    "other_party",
    "evidence",
)


class Counterparty:
    """How one tenant's notification names the other party."""

    def __init__(self, disclose: Disclosure, key: bytes | None) -> None:
        self.disclose = disclose
        # No key configured: a random one, so pseudonyms are unlinkable (and differ between runs).
        self.key = key or secrets.token_bytes(32)

    def pseudonym(self, tenant: str) -> str:
        digest = hmac.new(self.key, b"crosstalk-report-pseudonym\x00" + tenant.encode(), hashlib.sha256)
        return "party-" + digest.hexdigest()[:12]

    def name(self, tenant: str | None, viewer: str) -> str:
        if tenant is None:
            return "not identified"
        if tenant == viewer:
            return "you (another of your sessions)"
        if self.disclose is True:
            return tenant
        if self.disclose == "pseudonym":
            return self.pseudonym(tenant)
        return NOT_NAMED

    def name_of(self, viewer: str) -> Callable[[str | None], str]:
        return lambda t: self.name(t, viewer)


def _alerts_by_id(alerts: list[Alert]) -> dict[str, Alert]:
    return {a.alert_id: a for a in alerts}


def tenant_notice(view: TenantView, alerts: dict[str, Alert], party: Counterparty) -> dict[str, Any]:
    """The notification of one tenant as plain data (the JSON file)."""
    me = view.tenant_id
    received = []
    for r in sorted(view.received, key=lambda r: r.ts):
        if r.source_tenants:
            origin = ", ".join(party.name(t, me) for t in r.source_tenants)
        elif r.cross_session:
            origin = party.name(me, me)
        else:
            origin = "not identified"
        evidence: list[str] = []
        for aid in r.alert_ids:
            # Other tenants' request and session ids are theirs: left out; the sentences name the party as configured.
            evidence.extend(
                e.words
                for e in evidence_of(alerts[aid], party.name_of(me), private=r.cross_session and not r.source_tenants)
            )
        received.append(
            {
                "your_request_id": r.request_id,
                "time": format_ts(r.ts),
                "cache_domain": r.cache_domain,
                "severity": r.severity,
                "finding": r.kinds,
                "other_party": origin,
                "evidence": evidence,
            }
        )
    sent = [
        {
            "your_request_ids": leak.source_request_ids,
            "time_found": format_ts(leak.ts),
            "cache_domain": leak.cache_domain,
            "severity": leak.severity,
            "finding": leak.kind,
            "found_by": leak.signal,
            "other_party": party.name(leak.tenant_id, me),
        }
        for leak in sorted(view.sent, key=lambda x: x.ts)
    ]
    return {
        "tenant_id": me,
        "summary": {
            "responses_with_other_data": len(received),
            "times_your_data_was_found_elsewhere": len(sent),
            "your_request_ids_found_elsewhere": view.leaked_request_ids,
        },
        "received": received,
        "your_data_found_elsewhere": sent,
        "counterparty_disclosure": {True: "named", False: "not named", "pseudonym": "keyed pseudonym"}[party.disclose],
    }


# A spreadsheet runs a cell that starts with one of these as a formula (=HYPERLINK(...) exfiltrates,
# =cmd|... ran commands in old Excel); fullwidth forms are read as the ASCII ones by some locales.
_FORMULA_START = tuple("=+-@\t\r\n\uff1d\uff0b\uff0d\uff20")


def _cell(value: Any) -> str:
    """A CSV cell that no spreadsheet evaluates: a leading formula character is quoted with "'" (OWASP)."""
    text = str(value)
    return "'" + text if text.lstrip(" ").startswith(_FORMULA_START) else text


class _SafeWriter(csv.DictWriter):
    def writerow(self, rowdict: Any) -> Any:
        return super().writerow({k: _cell(v) for k, v in rowdict.items()})


def notice_csv(notice: dict[str, Any]) -> str:
    buf = io.StringIO()
    out = _SafeWriter(buf, fieldnames=CSV_FIELDS, lineterminator="\n")
    out.writeheader()
    for r in notice["received"]:
        out.writerow(
            {
                "direction": "received",
                "your_request_ids": r["your_request_id"],
                "time": r["time"],
                "cache_domain": r["cache_domain"],
                "severity": r["severity"],
                "finding": " ".join(r["finding"]),
                "other_party": r["other_party"],
                "evidence": " | ".join(r["evidence"]),
            }
        )
    for s in notice["your_data_found_elsewhere"]:
        out.writerow(
            {
                "direction": "your_data_found_elsewhere",
                "your_request_ids": " ".join(s["your_request_ids"]),
                "time": s["time_found"],
                "cache_domain": s["cache_domain"],
                "severity": s["severity"],
                "finding": s["finding"],
                "other_party": s["other_party"],
                "evidence": s["found_by"],
            }
        )
    return buf.getvalue()


_STEM_CHARS = 96


def _file_stem(tenant: str) -> str:
    """A file name of the tenant id: the id itself when it is short, plain and lower case; else a
    readable prefix plus a hash of the *whole* id, so two ids never share a file (not when they differ
    only past the prefix, only in characters replaced, nor only in case on a case-blind filesystem)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", tenant).strip("._") or "tenant"
    if safe == tenant and len(tenant) <= _STEM_CHARS and tenant == tenant.lower():
        return tenant
    return safe[:_STEM_CHARS] + "-" + hashlib.sha256(tenant.encode()).hexdigest()[:16]


def write_per_tenant(
    out_dir: Path, report: Report, alerts: list[Alert], party: Counterparty, *, only_involved: bool = False
) -> list[Path]:
    """One `<tenant>.json` and `<tenant>.csv` per tenant (every tenant seen, unless `only_involved`)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    by_id = _alerts_by_id(alerts)
    written: list[Path] = []
    for view in report.tenants:
        if only_involved and not (view.received or view.sent):
            continue
        notice = tenant_notice(view, by_id, party)
        stem = _file_stem(view.tenant_id)
        for path, data in (
            (out_dir / f"{stem}.json", orjson.dumps(notice, option=orjson.OPT_INDENT_2) + b"\n"),
            (out_dir / f"{stem}.csv", notice_csv(notice).encode()),
        ):
            path.write_bytes(data)
            written.append(path)
    return written
