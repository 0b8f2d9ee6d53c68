"""Alerts and incident resolutions for the tests of `crosstalk alerts` (file and Kafka alike)."""

from __future__ import annotations

from schemas.alert import Alert, IncidentResolved

T0 = 1_787_817_600.0


def alert(i: int, kind: str, severity: str, domain: str, tenant: str | None, source: str | None = None) -> Alert:
    return Alert.model_validate(
        {
            "alert_id": f"al-{i}",
            "ts": T0 + i,
            "kind": kind,
            "severity": severity,
            "cache_domain": domain,
            "tenant_id": tenant,
            "source_tenant_id": source,
            "request_ids": [f"req-{i}"],
            "score": 0.9,
            "summary": f"summary {i}",
            "group_key": f"cache_domain={domain}",
            "incident_id": f"inc-{domain}-0000000000",
            "response_id": f"chatcmpl-{i}" if source else None,
        }
    )


SAMPLE = [
    alert(1, "cross_tenant_contamination", "critical", "glm53-pd-1", "acme", "globex"),
    alert(2, "capacity_gap", "warning", "glm53-pd-1", None),
    alert(3, "overlong_accepted", "high", "vllm-a", "initech"),
]
RESOLVED = IncidentResolved(
    incident_id="inc-vllm-a-0000000000",
    group_key="cache_domain=vllm-a",
    cache_domain="vllm-a",
    first_ts=T0 + 3,
    last_ts=T0 + 3,
    resolved_at=T0 + 903,
    alerts=1,
)
