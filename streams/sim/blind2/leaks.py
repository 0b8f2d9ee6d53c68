"""Leak episodes: while a fault window is open, some responses get another request's text, as the bug would do it.

Every contaminated response carries its label: the class, the fault, and each passage that leaked with the request
and tenant whose text it is (`field`: "output" = in the source's delivered response, "prompt" = in the source's
request, "generated" = the answer generated for the source's request, delivered to the receiver instead of it).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from streams.sim.blind2 import corpus, phrases
from streams.sim.blind2.texts import fragment
from streams.sim.blind2.world import World

if TYPE_CHECKING:
    from streams.sim.blind2.traffic import Exchange, Simulation

CONTENT_ONLY = ("misroute", "swap", "interleave", "prefix_collision", "page_splice", "cross_session")
RECENT_S = 600.0


class Injector:
    def __init__(self, world: World) -> None:
        self.w = world
        self.rng = random.Random(f"blind-v2/{world.shape}/{world.seed}/leaks")
        self.fired: dict[str, int] = {f.id: 0 for f in world.faults}

    def _active(self, at: float, domain: str) -> list[Any]:
        return [f for f in self.w.faults if f.start <= at < f.end and f.scope in ("gateway", domain)]

    def wants_overlong(self, domain: str, at: float, app: str) -> bool:
        """A stale-KV window that has not yet seen an over-long prompt gets the next one a document app sends."""
        if app not in ("summarise", "rag", "chat"):
            return False
        return any(f.kind == "stale_kv" and not self.fired[f.id] for f in self._active(at, domain))

    def apply(self, ex: Exchange, sim: Simulation) -> None:
        active = self._active(ex.start, ex.domain)
        if ex.overlong:
            for f in active:
                if f.kind == "stale_kv" and ex.status == 400 and self._stale_kv(ex, sim, f.id):
                    self.fired[f.id] += 1
                    return
            return
        if not ex.ok or ex.receiver_of is not None or ex.source_of:
            return
        for f in active:
            if f.kind == "stale_kv" or (self.fired[f.id] and self.rng.random() >= f.hit_rate):
                continue
            if getattr(self, f"_{f.kind}")(ex, sim, f.id):
                self.fired[f.id] += 1
                return

    # --- sources -------------------------------------------------------------------------------------------------

    def _inflight(self, ex: Exchange, sim: Simulation) -> list[Exchange]:
        return [
            o
            for o in sim.exchanges[-400:]
            if o.end > ex.start and o.ok and o.tenant.id != ex.tenant.id and o.receiver_of is None and not o.source_of
            and len(corpus.units(o.out or "")) >= 20
        ]  # fmt: skip

    def _recent(self, ex: Exchange, sim: Simulation, same_tenant: bool = False) -> list[Exchange]:
        out = []
        for o in reversed(sim.exchanges):
            if o.start < ex.start - RECENT_S:
                break
            if not o.ok or o.receiver_of is not None or (o.tenant.id == ex.tenant.id) != same_tenant:
                continue
            if same_tenant and (o.session.sid is None or o.session.sid == ex.session.sid or ex.session.sid is None):
                continue
            if same_tenant or o.domain == ex.domain:
                out.append(o)
        return out

    @staticmethod
    def _own_answer(src: Exchange) -> str:
        """The tenant-specific part of a source's delivered answer (all of the answer when that part was cut)."""
        own = src.turn.answer_private
        return own if own and own in (src.out or "") else src.out or ""

    @staticmethod
    def _passage(src: Exchange, text: str, field: str) -> dict[str, Any]:
        lang = "code" if src.tenant.lang == "code" and (field == "prompt" or "```" in text) else src.turn.out_lang
        if field == "prompt":
            lang = "code" if src.tenant.lang == "code" else src.tenant.explain_lang
        return {
            "text": text,
            "source_request_id": src.rid,
            "source_tenant_id": src.tenant.id,
            "field": field,
            "tokens": corpus.tokens(text),
            "lang": lang,
        }

    def _label(self, ex: Exchange, kind: str, fault: str, passages: list[dict[str, Any]], **extra: Any) -> None:
        by_tenant: dict[str, int] = {}
        for p in passages:
            by_tenant[p["source_tenant_id"]] = by_tenant.get(p["source_tenant_id"], 0) + p["tokens"]
        order = sorted(by_tenant, key=lambda k: (-by_tenant[k], k))
        main = max((p for p in passages if p["source_tenant_id"] == order[0]), key=lambda p: p["tokens"])
        rids: list[str] = []
        for p in passages:
            if p["source_request_id"] not in rids:
                rids.append(p["source_request_id"])
        ex.receiver_of = {
            "leak_kind": kind,
            "scenario": "content_only" if kind in CONTENT_ONLY else "mechanism",
            "fault_id": fault,
            "source_tenant_id": order[0],
            "source_tenant_ids": order,
            "source_request_ids": rids,
            "source_lang": main["lang"],
            "shortest_passage_tokens": min(p["tokens"] for p in passages),
            "leaked_tokens": sum(p["tokens"] for p in passages),
            "passages": passages,
            **extra,
        }
        ex.usage_out = corpus.tokens(ex.out or "")

    # --- the bugs --------------------------------------------------------------------------------------------------

    def _misroute(self, ex: Exchange, sim: Simulation, fault: str) -> bool:
        cands = self._inflight(ex, sim)
        if not cands:
            return False
        src = self.rng.choice(cands)
        src.source_of = True
        ex.out = src.out
        ex.usage_in, ex.cached, ex.finish = src.usage_in, src.cached, src.finish
        ex.duration_ms = round(max(ex.ttft_ms, (src.end - ex.start) * 1000 + self.rng.uniform(1, 20)), 3)
        self._label(ex, "misroute", fault, [self._passage(src, src.out or "", "output")])
        return True

    def _swap(self, ex: Exchange, sim: Simulation, fault: str) -> bool:
        cands = self._inflight(ex, sim)
        if not cands:
            return False
        src = self.rng.choice(cands)
        mine, theirs = ex.out or "", src.out or ""
        ex.out, src.out = theirs, mine
        ex.usage_in, src.usage_in = src.usage_in, ex.usage_in
        ex.cached, src.cached = src.cached, ex.cached
        end = max(ex.end, src.end) + self.rng.uniform(0.001, 0.02)
        ex.duration_ms = round((end - ex.start) * 1000, 3)
        src.duration_ms = round((end - src.start) * 1000 + self.rng.uniform(0, 5), 3)
        self._label(ex, "swap", fault, [self._passage(src, theirs, "generated")], swapped_with=src.rid)
        self._label(src, "swap", fault, [self._passage(ex, mine, "generated")], swapped_with=ex.rid)
        ex.source_of = src.source_of = True
        return True

    def _interleave(self, ex: Exchange, sim: Simulation, fault: str) -> bool:
        cands = self._inflight(ex, sim)
        if not cands:
            return False
        src = self.rng.choice(cands)
        a, b = self._chunks(ex.out or ""), self._chunks(src.out or "")
        merged: list[tuple[int, str]] = []
        while a or b:  # whichever stream's next chunk is due first goes out next, on the same channel
            take_a = bool(a) and (not b or self.rng.random() < len(a) / (len(a) + len(b)))
            merged.append((0, a.pop(0)) if take_a else (1, b.pop(0)))
        text = "".join(c for _, c in merged)
        runs: list[tuple[int, str]] = []
        for who, c in merged:
            if runs and runs[-1][0] == who:
                runs[-1] = (who, runs[-1][1] + c)
            else:
                runs.append((who, c))
        ex.out = src.out = text
        end = max(ex.end, src.end) + self.rng.uniform(0.001, 0.02)
        ex.duration_ms = round((end - ex.start) * 1000, 3)
        src.duration_ms = round((end - src.start) * 1000, 3)
        to_a = [self._passage(src, c, "output") for who, c in runs if who == 1 and c.strip()]
        to_b = [self._passage(ex, c, "output") for who, c in runs if who == 0 and c.strip()]
        self._label(ex, "interleave", fault, to_a, interleaved_with=src.rid)
        self._label(src, "interleave", fault, to_b, interleaved_with=ex.rid)
        ex.source_of = src.source_of = True
        return True

    def _chunks(self, text: str) -> list[str]:
        u = corpus.units(text)
        out, i = [], 0
        while i < len(u):
            n = self.rng.randint(6, 28)
            out.append("".join(u[i : i + n]))
            i += n
        return out

    def _stale_kv(self, ex: Exchange, sim: Simulation, fault: str) -> bool:
        rng = self.rng
        pool = [o for o in self._recent(ex, sim) if o.turn.private and not o.overlong]
        if not pool:
            return False
        passages = []
        for src in rng.sample(pool, min(len(pool), rng.choice((1, 1, 2, 3)))):
            if rng.random() < 0.5:
                passages.append(self._passage(src, fragment(rng, src.turn.private, 30, 160), "prompt"))
            else:
                src.source_of = True
                passages.append(self._passage(src, fragment(rng, self._own_answer(src), 30, 160), "output"))
        seps = ["\n", " ", "", "\n\n"]
        text = "".join(p["text"] + rng.choice(seps) for p in passages).rstrip()
        if rng.random() < 0.3:
            lang = passages[-1]["lang"]
            text += " " + rng.choice(phrases.CLOSERS.get(lang, phrases.CLOSERS["en"]))
        ex.status, ex.error, ex.out, ex.clean = 200, None, text, ""
        ex.finish = "length" if rng.random() < 0.4 else "stop"
        ex.usage_in, ex.cached = 1, 0
        ex.ttft_ms = round(rng.uniform(18, 70), 3)
        ex.duration_ms = round(ex.ttft_ms + corpus.tokens(text) / rng.uniform(35, 65) * 1000, 3)
        ex.response_id = f"chatcmpl-{rng.getrandbits(96):024x}"
        self._label(ex, "stale_kv", fault, passages)
        return True

    def _prefix_collision(self, ex: Exchange, sim: Simulation, fault: str) -> bool:
        pool = [o for o in self._recent(ex, sim) if len(corpus.units(o.out or "")) >= 20]
        if not pool:
            return False
        src = self.rng.choice(pool)
        src.source_of = True
        u = corpus.units(src.out or "")
        keep = "".join(u[: max(20, int(len(u) * self.rng.uniform(0.6, 1.0)))]).rstrip()
        ex.out = keep
        ex.cached = ex.prompt_tokens // 16 * 16
        ex.ttft_ms = round(self.rng.uniform(15, 45), 3)
        ex.duration_ms = round(ex.ttft_ms + corpus.tokens(keep) / 50 * 1000, 3)
        self._label(ex, "prefix_collision", fault, [self._passage(src, keep, "output")])
        return True

    def _page_splice(self, ex: Exchange, sim: Simulation, fault: str) -> bool:
        rng = self.rng
        pool = [o for o in self._recent(ex, sim) if o.start > ex.start - 300 and o.turn.private]
        if not pool:
            return False
        src = rng.choice(pool)
        if rng.random() < 0.5:
            src.source_of = True
            page, field = fragment(rng, self._own_answer(src), 24, 64), "output"
        else:
            page, field = fragment(rng, src.turn.private, 24, 64), "prompt"
        u = corpus.units(ex.out or "")
        at = rng.randrange(len(u) // 4, max(len(u) // 4 + 1, 3 * len(u) // 4))
        ex.out = "".join(u[:at]) + page + ("" if page.endswith((" ", "\n")) else " ") + "".join(u[at:])
        self._label(ex, "page_splice", fault, [self._passage(src, page, field)])
        return True

    def _cross_session(self, ex: Exchange, sim: Simulation, fault: str) -> bool:
        if ex.session.sid is None:
            return False
        pool = [o for o in self._recent(ex, sim, same_tenant=True) if len(corpus.units(o.out or "")) >= 12]
        if not pool:
            return False
        src = self.rng.choice(pool)
        src.source_of = True
        ex.out = src.out
        ex.usage_in, ex.cached = src.usage_in, src.cached
        ex.ttft_ms = round(self.rng.uniform(3, 15), 3)
        ex.duration_ms = round(ex.ttft_ms + self.rng.uniform(5, 30), 3)
        self._label(ex, "cross_session", fault, [self._passage(src, src.out or "", "output")])
        return True
