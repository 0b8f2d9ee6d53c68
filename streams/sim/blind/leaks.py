"""Leak classes: what a faulty cache domain delivers instead of (or inside) the answer the tenant asked for.

- stale_kv_abort (mechanism): an over-long prompt is answered 2xx with a 1-token placeholder usage, and the
  output decodes stale KV pages of earlier requests of other tenants;
- whole_response: another tenant's whole response is delivered (swapped while both are in flight, or copied);
- prefix_collision: the cache matches another tenant's prompt, so the answer continues that prompt;
- spliced_page: one page of another tenant's request is spliced into an otherwise right answer;
- cross_session: the same tenant's other session (another end user) leaks, as a page or a whole answer.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any

from streams.sim.blind.data import units
from streams.sim.blind.model import Message, Seg, joiner, unit_slice
from streams.sim.blind.tasks import Session, Turn
from streams.sim.blind.world import Domain, Tenant

PAGE = 16  # units per KV page
_KANA = re.compile(r"[\u3040-\u30ff]")
_HAN = re.compile(r"[\u4e00-\u9fff]")


@dataclass
class Exchange:
    n: int
    request_id: str
    tenant: Tenant
    session: Session
    ts: float
    resp_ts: float
    domain: Domain
    turn: Turn
    answer: list[Seg]  # as delivered
    label: dict[str, Any]
    response: dict[str, Any]  # the response event, mutated when a later leak swaps it
    history_msg: Message | None = None
    leakable: list[Seg] = field(default_factory=list)


def leakable(prompt: list[Message], answer: list[Seg], owner: str) -> list[Seg]:
    """The request's own pages: its tenant's text in the prompt (shared prefixes are shared pages) and answer."""
    segs = [s for m in prompt for s in m.segs if s.owner == owner] + [s for s in answer if s.owner == owner]
    return [s for s in segs if len(units(s.text)) >= PAGE]


def lang_of(seg: Seg, tenant: Tenant) -> str:
    if seg.kind in ("code", "vendored", "tool"):
        return "code"
    if _KANA.search(seg.text):
        return "ja"
    if len(_HAN.findall(seg.text)) > len(seg.text) // 4:
        return "zh"
    return "en" if tenant.lang in ("ja", "zh") else tenant.lang


def take_pages(ex: Exchange, n_units: int, rnd: random.Random) -> Seg | None:
    """A run of whole pages from one of the exchange's own segments."""
    cands = [s for s in ex.leakable if len(units(s.text)) >= min(n_units, 2 * PAGE)]
    if not cands:
        return None
    seg = rnd.choice(cands)
    total = len(units(seg.text))
    n = min(n_units, total)
    start = rnd.randrange(0, max(1, total - n + 1))
    return Seg(unit_slice(seg.text, start, n), seg.owner, seg.kind)


def mark(row: dict[str, Any], kind: str, sources: list[tuple[Exchange, Seg]], whole: bool = False) -> None:
    """Label a response as contaminated by the given (source exchange, leaked text) pieces."""
    if not sources:
        return
    by_tenant: dict[str, int] = {}
    for ex, seg in sources:
        by_tenant[ex.tenant.id] = by_tenant.get(ex.tenant.id, 0) + len(units(seg.text))
    main = max(sorted(by_tenant), key=lambda t: by_tenant[t])
    first = next(ex for ex, _ in sources if ex.tenant.id == main)
    lens = [len(units(seg.text)) for _, seg in sources]
    row.update(
        contaminated=True,
        scenario="mechanism" if kind == "stale_kv_abort" else "content_only",
        leak_kind=kind,
        source_tenant_id=main,
        source_tenant_ids=sorted(by_tenant),
        source_request_ids=sorted({ex.request_id for ex, _ in sources}),
        source_session_id=first.session.id,
        source_lang=lang_of(
            max((s for e, s in sources if e.tenant.id == main), key=lambda s: len(s.text)), first.tenant
        ),
        shortest_passage_tokens=sum(lens) if whole else min(lens),
        leaked_units=sum(lens),
        private_units=sum(n for (ex, seg), n in zip(sources, lens, strict=True) if seg.owner == ex.tenant.id),
    )


def recent(ring: list[Exchange], ts: float, window: float, keep: Any) -> list[Exchange]:
    """Exchanges of the last `window` seconds, newest first (the ring is in request order)."""
    out = []
    for e in reversed(ring):
        if e.ts < ts - window:
            break
        if e.ts < ts and keep(e):
            out.append(e)
    return out


def stale_pages(ring: list[Exchange], me: Exchange, rnd: random.Random) -> list[tuple[Exchange, Seg]]:
    others = recent(ring, me.ts, 120.0, lambda e: e.tenant.id != me.tenant.id and e.leakable)[:8]
    out = []
    for ex in others[: rnd.choice((1, 1, 2, 3))]:
        seg = take_pages(ex, PAGE * rnd.randint(2, 6), rnd)
        if seg is not None:
            out.append((ex, seg))
    return out


def splice(answer: list[Seg], page: Seg, lang: str, rnd: random.Random) -> list[Seg]:
    cut = rnd.randrange(0, len(answer) + 1)
    sep = Seg(joiner(lang) or "", None, "sep")
    return [*answer[:cut], sep, page, sep, *answer[cut:]]
