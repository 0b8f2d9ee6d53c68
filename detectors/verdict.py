"""From the signals of one response to one alert: kind, severity, score, stable id, summary."""

from __future__ import annotations

import hashlib

from detectors.incidents import IncidentTracker
from detectors.signals import registry
from schemas.alert import SEVERITY_RANK, Alert, AlertKind, Severity, Signal

# What each signal concludes (its kind, precedence, mechanism or not) is declared where it is registered
# (detectors/signals/registry.py): a new signal needs no edit here.


def alert_id(
    kind: str, cache_domain: str, request_ids: list[str], source_tenant_id: str | None, subject: str = ""
) -> str:
    """Same evidence, same id: redelivery and reprocessing are idempotent downstream."""
    material = "\x1f".join([kind, cache_domain, ",".join(sorted(request_ids)), source_tenant_id or "", subject])
    return hashlib.sha256(material.encode()).hexdigest()[:32]


def corroborate(signals: list[Signal]) -> list[Signal]:
    """Content overlap on a response that also shows the placeholder mechanism is no coincidence."""
    mechanism = registry.mechanism_signals()
    if not any(s.name in mechanism for s in signals):
        return signals
    out = []
    for s in signals:
        if s.name == "cross_tenant_contamination" and s.severity != "critical":
            s = s.model_copy(update={"severity": "critical", "figures": dict(s.figures, corroborated=True)})
        elif s.name == "cross_session_contamination" and SEVERITY_RANK[s.severity] < SEVERITY_RANK["high"]:
            s = s.model_copy(update={"severity": "high", "figures": dict(s.figures, corroborated=True)})
        out.append(s)
    return out


def across_senders(signals: list[Signal], request_id: str, scoped: bool) -> list[Signal]:
    """Trust across senders (docs/security.md): with request ids scoped by sender (`<sender>/<id>`), a response
    whose content finding names source requests none of which came through the response's own sender rests on
    that sender's word alone -- its output text and its figures -- and another sender's customer is named by it.
    Such a finding is still raised, and attributed, but it and every signal beside it are at most high (marked
    `cross_sender`): one sender cannot page the operator about another sender's tenant."""
    if not scoped:
        return signals
    sender = request_id.partition("/")[0]

    def foreign(s: Signal) -> bool:
        sources = {str(r).partition("/")[0] for r in s.figures.get("source_request_ids") or ()}
        return s.name == "cross_tenant_contamination" and sender not in sources

    if not any(foreign(s) for s in signals):
        return signals
    top = SEVERITY_RANK["high"]
    return [
        s.model_copy(update={"severity": "high" if SEVERITY_RANK[s.severity] > top else s.severity,
                             "figures": dict(s.figures, cross_sender=True)})
        if foreign(s) or SEVERITY_RANK[s.severity] > top else s
        for s in signals
    ]  # fmt: skip


def kind_of(signals: list[Signal]) -> AlertKind | None:
    """The kind the highest-precedence registered signal raises; None if no signal is registered."""
    raises = registry.raises_by_signal()
    best = None
    for s in signals:
        r = raises.get(s.name)
        if r is not None and r.kind is not None and (best is None or r.precedence > best.precedence):
            best = r
    return None if best is None else best.kind


def severity_of(signals: list[Signal]) -> Severity:
    return max((s.severity for s in signals), key=SEVERITY_RANK.__getitem__, default="info")


def score_of(signals: list[Signal], pressure: float | None, pressure_high: float) -> float:
    """Noisy-or of the signals; high cache pressure makes stale-page reuse likelier, so it boosts."""
    miss = 1.0
    for s in signals:
        if s.name != "cache_pressure":
            miss *= 1.0 - s.score
    score = 1.0 - miss
    if pressure is not None and pressure >= pressure_high:
        score = min(1.0, score * 1.15 + 0.05)
    return round(score, 4)


def source_of(signals: list[Signal], kind: str) -> str | None:
    for s in signals:
        if s.name == kind and s.source_tenant_id:
            return s.source_tenant_id
    for s in signals:
        if s.source_tenant_id:
            return s.source_tenant_id
    return None


def capacity_alert(
    cache_domain: str, incidents: IncidentTracker, sig: Signal, ts: float, traceparent: str | None
) -> Alert:
    """The domain's alert for an advertised context window larger than its prefill pool (`capacity_gap`)."""
    f = sig.figures
    aid = alert_id("capacity_gap", cache_domain, [], None, f"{f['prefill_capacity_tokens']}/{f['context_window']}")
    gkey, iid, inc_sev = incidents.assign(cache_domain, "capacity_gap", sig.severity, ts, aid, [], None, None)
    return Alert(
        alert_id=aid,
        ts=ts,
        kind="capacity_gap",
        severity=sig.severity,
        cache_domain=cache_domain,
        score=sig.score,
        evidence=[sig],
        summary=(
            f"{cache_domain} advertises a context window of {f['context_window']:,} tokens but its prefill "
            f"pool holds {f['prefill_capacity_tokens']:,}: prompts in the gap cannot be prefilled whole"
        ),
        group_key=gkey,
        incident_id=iid,
        traceparent=traceparent,
        incident_severity=inc_sev,
    )
