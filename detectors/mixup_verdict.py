"""What a mix-up found by the ledger (detectors/mixup.py) does to the responses it concerns: the signal naming the
answer's owner, the current response's signals after its findings, and the late alerts' form for earlier deliveries."""

from __future__ import annotations

from typing import Any

import numpy as np

from detectors.held import Held
from detectors.mixup import Delivery, Finding, Innocent
from detectors.mixup_counts import BOTH_WAYS
from detectors.mixup_crossed import ONE_ANSWER
from detectors.signals.overlap import OverlapDetector
from schemas.alert import SEVERITY_RANK, Signal


def mixup_signal(f: Finding, source: Delivery) -> Signal:
    """The finding as a cross-tenant signal naming `source`'s tenant (the owner of the answer the receiver got); a
    cross-session one where that is the receiver's own tenant (a history carried into another of its sessions)."""
    figures: dict[str, Any] = {
        "delivery_mixup": f.mode,
        "matched_fingerprints": f.shared,
        "witness_fingerprints": f.shared,
        "source_request_ids": [source.request_id],
    }
    if f.mode == "identifiers":  # what it counts is identifiers, not fingerprints (ADR 0027)
        figures = {**figures, "matched_fingerprints": 0, "witness_fingerprints": 0, "identifiers": f.shared}
    receiver = f.owner if source is f.leaked else f.leaked
    own = source.tenant_id == receiver.tenant_id
    if own:
        figures["source_session_id"] = source.session_id
    return Signal(
        name="cross_session_contamination" if own else _CONTENT,
        severity="high",
        score=1.0,
        source_tenant_id=source.tenant_id,
        figures=figures,
    )


def mixup_clause(source: str | None, figures: dict[str, Any]) -> str:
    """The alert summary's clause for a mix-up finding (its evidence figures)."""
    mode = figures["delivery_mixup"]
    if mode == "history":
        session = figures.get("source_session_id")
        whose = f"session {session} of tenant {source}" if session else f"tenant {source}"
        return f"sent with another conversation's history: {whose}'s question and answer (history)"
    if mode == "identifiers":
        n = figures.get("identifiers")
        return f"an answer to tenant {source}'s recent prompt: {n} of its identifiers (identifiers)"
    if mode == "crossed":
        return f"its answer holds tenant {source}'s prompt too: the two streams crossed (crossed)"
    if mode == "counts":
        return f"its usage counts tenant {source}'s prompt, and tenant {source}'s usage this one's (counts)"
    if mode == "counted":
        return f"its usage counts tenant {source}'s prompt, not its own; that request lost its own answer (counted)"
    if mode == "usage":
        return f"the very answer tenant {source} was given, with its usage: it counts tenant {source}'s prompt (usage)"
    if mode == "identical":
        return f"the very answer tenant {source} was given, to an unrelated prompt (identical)"
    # A copy can also be an answer handed over again after its request ended (mixup_copy_before_s): "recent".
    return f"a whole response of tenant {source}'s recent request ({mode})"


def named_by(signals: list[Signal]) -> frozenset[str]:
    """The tenants the response's content signals name: the hint `MixupLedger.check` asks misroutes under."""
    return frozenset(x.source_tenant_id for x in signals if x.name == _CONTENT and x.source_tenant_id)


def innocent_of(overlap: OverlapDetector) -> Innocent:
    """What the domain's overlap detector explains away in any output: common over the long horizon, or public."""

    def innocent(keys: np.ndarray) -> np.ndarray:
        mask = overlap._common(keys, overlap.spread.tenants(keys))
        return mask | overlap.public.contains(keys) if overlap.public is not None else mask

    return innocent


def as_held(d: Delivery, signals: list[Signal]) -> Held:
    """A past delivery in the form the domain raises a late alert for (the held findings' form)."""
    return Held(d.ts, d.request_id, d.tenant_id, d.session_id, d.traceparent, signals, {}, {})


def apply(
    signals: list[Signal], current: Delivery, findings: list[Finding]
) -> tuple[list[Signal], list[tuple[Delivery, Signal]]]:
    """The current response's signals after its mix-ups, and the late signals for earlier deliveries.

    Where the current response is a leak (it got the owner's answer), it names the owner at high at least. Where it is
    the owner (a copy: the other receiver got its answer), what its output shares with that receiver's output is its
    own answer, not the other's text: signals naming that receiver are dropped. The earlier delivery that got the
    current one's answer gets a late signal naming the current tenant."""
    late: list[tuple[Delivery, Signal]] = []
    for f in findings:
        if f.mode in ONE_ANSWER and f.owner is current:
            signals = [x for x in signals if x.source_tenant_id != f.leaked.tenant_id or x.name != _CONTENT]
        if f.leaked is not current and current.tenant_id not in f.leaked.named:
            late.append((f.leaked, mixup_signal(f, current)))
            f.leaked.named.add(current.tenant_id)
        if f.mode in BOTH_WAYS:  # both receivers got the other's answer
            signals = _escalate(signals, mixup_signal(f, f.leaked))
        elif f.leaked is current:
            signals = _escalate(signals, mixup_signal(f, f.owner))
    return signals, late


_CONTENT = "cross_tenant_contamination"


def _escalate(signals: list[Signal], sig: Signal) -> list[Signal]:
    """`signals` with the finding naming `sig`'s source at high at least (the content signal naming it raised, its
    figures kept and the mix-up's added), or with `sig` added first when none names it."""
    out, done = [], False
    for x in signals:
        if not done and x.name == sig.name and x.source_tenant_id == sig.source_tenant_id:
            done = True
            # Numbers (ADR 0027) add their count and keep what content found; the other mix-ups count fingerprints.
            told = {k: sig.figures[k] for k in ("delivery_mixup", "identifiers") if k in sig.figures}
            if SEVERITY_RANK[x.severity] >= SEVERITY_RANK["high"]:
                x = x.model_copy(update={"figures": {**x.figures, **told}})
            elif "identifiers" in told:
                x = x.model_copy(update={"severity": "high", "figures": {**sig.figures, **x.figures, **told}})
            else:
                x = x.model_copy(update={"severity": "high", "figures": {**x.figures, **sig.figures}})
        out.append(x)
    return out if done else [sig, *signals]
