"""Plain events for tests: small builders with sensible defaults, validated through the wire path."""

from __future__ import annotations

import itertools
import random
from pathlib import Path
from typing import Any

import orjson

from schemas.alert import SEVERITY_RANK, Alert
from schemas.events import CacheStats, Canary, Event, Request, Response, parse_event

_ids = itertools.count()

# Real, distinct English passages (no lorem ipsum): each well over the 16-word guarantee.
TEXTS = [
    "The quick evaluation of every candidate configuration requires that the scheduler keeps a complete "
    "record of which pages were handed to which request and when those pages were returned to the pool",
    "Customer invoices for the northern region are reconciled every Friday afternoon by the finance team "
    "after the warehouse confirms that each pallet left the loading dock with its barcode scanned twice",
    "def rebalance(partitions, members):\n    # spread the partitions evenly across the members of the group\n"
    "    assignment = {m: [] for m in members}\n    for i, p in enumerate(sorted(partitions)):\n"
    "        assignment[members[i % len(members)]].append(p)\n    return assignment",
    "Our quarterly roadmap moves the migration of the billing database to the second half of the year "
    "because the vendor contract for the legacy storage cluster only expires in late September",
    "When the patient reports dizziness after the second dose the nurse records blood pressure lying and "
    "standing and notifies the physician on call before the next scheduled administration",
    "Here is the updated function with the bug fixed and a short explanation of what changed and why the "
    "original version failed on empty input lists",
]


# A private vocabulary: random texts drawn from it share no chance k-grams.
PRIVATE_WORDS = [f"w{i:04d}" for i in range(5000)]


def private_texts(seed: int, n: int) -> list[str]:
    """`n` texts of 60 distinct private words each, none shared between them."""
    pool = random.Random(seed).sample(PRIVATE_WORDS, 60 * n)
    return [" ".join(pool[i * 60 : (i + 1) * 60]) for i in range(n)]


def high_on(alerts: list[Alert], tenant: str) -> list[Alert]:
    """The alerts on `tenant`'s responses at high or critical."""
    return [a for a in alerts if a.tenant_id == tenant and SEVERITY_RANK[a.severity] >= SEVERITY_RANK["high"]]


def nid(prefix: str) -> str:
    return f"{prefix}-{next(_ids)}"


def ev(obj: dict[str, Any]) -> Event:
    return parse_event(orjson.dumps(obj))


def stats(domain: str = "d1", ts: float = 0.0, capacity: int = 681_280, used: int = 100_000, **kw: Any) -> CacheStats:
    obj = {"type": "cache_stats", "event_id": nid("cs"), "ts": ts, "cache_domain": domain, "role": "prefill"}
    obj |= {"capacity_tokens": capacity, "used_tokens": used, "context_window": 1_048_576} | kw
    e = ev(obj)
    assert isinstance(e, CacheStats)
    return e


def request(rid: str, tenant: str, ts: float, tokens: int = 2_000, text: str | None = None, **kw: Any) -> Request:
    obj = {"type": "request", "event_id": nid("rq"), "ts": ts, "request_id": rid, "tenant_id": tenant}
    obj |= {"model": "glm-5.3", "prompt_tokens": tokens, "session_id": f"{tenant}-s1"}
    if text is not None:
        obj["prompt_text"] = text
    e = ev(obj | kw)
    assert isinstance(e, Request)
    return e


def response(
    rid: str,
    tenant: str,
    ts: float,
    domain: str = "d1",
    input_tokens: int | None = 2_000,
    ttft_ms: float | None = 400.0,
    status: int = 200,
    text: str | None = None,
    **kw: Any,
) -> Response:
    obj: dict[str, Any] = {"type": "response", "event_id": nid("rs"), "ts": ts, "request_id": rid, "tenant_id": tenant}
    obj |= {"model": "glm-5.3", "cache_domain": domain, "status_code": status, "session_id": f"{tenant}-s1"}
    if input_tokens is not None:
        obj["usage"] = {"input_tokens": input_tokens, "output_tokens": 50}
    if ttft_ms is not None:
        obj["ttft_ms"] = ttft_ms
    if text is not None:
        obj["output_text"] = text
    e = ev(obj | kw)
    assert isinstance(e, Response)
    return e


def canary(tenant: str, marker: str, ts: float = 0.0, session: str | None = None) -> Canary:
    obj = {"type": "canary", "event_id": nid("cn"), "ts": ts, "tenant_id": tenant, "marker": marker}
    if session:
        obj["session_id"] = session
    e = ev(obj)
    assert isinstance(e, Canary)
    return e


# A probe marker of 64 random bits, the size probe tools in the wild use (token_hex(8)).
PROBE_MARKER = "CTK-CANARY-3f9a0c1be27d5a60"


def weak_canary_story(t0: float) -> list[bytes]:
    """Issue 24's data loss, as input lines: two probe identities send one shared prompt; the second request
    also lists a weak marker (beside a good one) and its answer quotes the prompt; later another tenant's
    answer carries the good marker. Rejecting the second request whole loses its prompt (its answer then
    looks like probe-a's text leaking to probe-b) and its good marker (the real leak goes unseen)."""
    shared = TEXTS[0] + " " + TEXTS[3]

    def pair(i: int, tenant: str, ts: float, prompt: str, output: str, **req: Any) -> list[dict[str, Any]]:
        common = {"request_id": f"r{i}", "tenant_id": tenant, "model": "m", "session_id": f"{tenant}-s"}
        return [
            {"type": "request", "event_id": f"q{i}", "ts": ts, **common, "prompt_tokens": 300,
             "cache_domain": "d1", "prompt_text": prompt, **req},
            {"type": "response", "event_id": f"p{i}", "ts": ts + 1, **common, "cache_domain": "d1",
             "status_code": 200, "usage": {"input_tokens": 300, "output_tokens": 60}, "output_text": output},
        ]  # fmt: skip

    events = [
        *pair(1, "probe-a", t0, shared, "Sure. " + TEXTS[4]),
        *pair(2, "probe-b", t0 + 10, shared, "You wrote: " + shared, canaries=["CTK-1234", PROBE_MARKER]),
        *pair(3, "acme", t0 + 20, TEXTS[5], f"as noted in {PROBE_MARKER} earlier"),
    ]
    return [orjson.dumps(e) for e in events]


def incident_alert(
    rid: str, incident: str, incident_severity: str | None, severity: str = "high", ts: float = 1.0
) -> Alert:
    """A content alert on response `rid` in `incident`, with the incident's severity as of it (docs/adr/0018)."""
    return Alert(
        alert_id=f"a-{rid}-{ts}",
        ts=ts,
        kind="cross_tenant_contamination",
        severity=severity,  # type: ignore[arg-type]
        cache_domain="d1",
        request_ids=[rid],
        score=0.9,
        summary="-",
        group_key="g",
        incident_id=incident,
        incident_severity=incident_severity,  # type: ignore[arg-type]
    )


def edge_printed(gp: Any, events: list[dict[str, Any]], tmp: Path) -> tuple[list[Any], Path, Path]:
    """What a gateway that fingerprints at the edge (`GatewayProducer.prepare`) makes of `events`: each event's print
    (its prompt's or output's, None for others), and the events written twice, as text and as the gateway sends them."""
    prints, wire = [], []
    for e in events:
        ev, raw = gp.prepare(e)
        prints.append(getattr(ev, "prompt_fingerprint", None) or getattr(ev, "output_fingerprint", None))
        wire.append(raw)
    text_path, wire_path = tmp / "text.jsonl", tmp / "wire.jsonl"
    text_path.write_bytes(b"\n".join(orjson.dumps(e) for e in events) + b"\n")
    wire_path.write_bytes(b"\n".join(wire) + b"\n")
    return prints, text_path, wire_path


# (request id, tenant, sent, delivered, domain, prompt, answer): one exchange, times from the run's t0.
Exchanged = tuple[str, str, float, float, str, str, str]


def run_exchanges(settings: Any, events: list[Exchanged], t0: float) -> list[Alert]:
    """The exchanges through one Monitor, their requests and responses in event-time order, each tenant in one session,
    then an hour of quiet event time (a late exchange of another pool) so that everything held comes out."""
    from detectors.monitor import Monitor  # the core, only where a test runs it

    m = Monitor(settings)
    timeline = []
    for rid, tenant, sent, done, domain, prompt, answer in events:
        sent, done = sent + t0, done + t0
        timeline.append((sent, request(rid, tenant, sent, text=prompt, session_id=f"{tenant}-s", cache_domain=domain)))
        timeline.append((done, response(rid, tenant, done, domain=domain, text=answer, session_id=f"{tenant}-s")))
    out: list[Alert] = []
    for _, e in sorted(timeline, key=lambda x: x[0]):
        out += m.observe(e)
    out += m.observe(request("late", "Z", t0 + 4_000.0, text="nothing to see", cache_domain="d9"))
    return out + m.observe(response("late", "Z", t0 + 4_001.0, domain="d9", text="fine thanks"))
