"""canary_leak: a registered marker of one tenant (or session) in another's output."""

from __future__ import annotations

from detectors.signals.base import DomainFacts, Stateless
from schemas.alert import Signal
from schemas.exchange import Exchange


class CanaryDetector(Stateless):
    def observe(self, ex: Exchange, domain: DomainFacts | None = None) -> list[Signal]:
        out = []
        for hit in ex.canary_hits:
            other_tenant = hit.owner_tenant_id != ex.tenant_id
            other_session = (
                not other_tenant
                and hit.owner_session_id is not None
                and ex.session_id is not None
                and hit.owner_session_id != ex.session_id
            )
            if not (other_tenant or other_session):
                continue  # a tenant's own marker echoed back in its own session is expected
            out.append(
                Signal(
                    name="canary_leak",
                    severity="critical" if other_tenant else "high",
                    score=1.0 if other_tenant else 0.8,
                    source_tenant_id=hit.owner_tenant_id,
                    figures={"marker_id": hit.marker_id, "scope": "tenant" if other_tenant else "session"},
                )
            )
        return out
