"""The run: sessions over time, each turn a request and a response event, faults that leak, and the labels."""

from __future__ import annotations

import heapq
import json
import random
from typing import Any

from streams.sim.blind import leaks as lk
from streams.sim.blind.data import engine_tokens, gateway_tokens, units
from streams.sim.blind.model import Message, Model, Seg, plain
from streams.sim.blind.tasks import TOOLS, Session, Turn, ask, next_turn, start
from streams.sim.blind.world import START_TS, TASKS, Shape, World, build_world

MEAN_TURNS = {"chat": 3.5, "rag": 1.5, "agent": 4.0, "translate": 2.0, "code": 2.5, "summarise": 1.5}
PROMPT_TEXT_MAX = 48_000  # characters the gateway logs of a prompt


def render(messages: list[Message], fmt: str) -> str:
    if fmt == "json":
        return json.dumps([{"role": m.role, "content": m.text} for m in messages], ensure_ascii=False)
    if fmt == "chatml":
        return "".join(f"<|im_start|>{m.role}\n{m.text}<|im_end|>\n" for m in messages) + "<|im_start|>assistant\n"
    return "\n\n".join(f"{m.role}: {m.text}" for m in messages)


class Simulator:
    def __init__(self, shape: Shape) -> None:
        self.shape = shape
        self.world: World = build_world(shape)
        self.model = Model(self.world.knowledge)
        self.rnd = random.Random(f"blind-run-{shape.seed}")
        self.t0 = START_TS + 86400.0 * (shape.seed % 97)
        self.rings: list[list[lk.Exchange]] = [[] for _ in self.world.domains]
        self.events: list[tuple[float, int, dict[str, Any]]] = []
        self.rows: list[dict[str, Any]] = []
        self.n = 0
        self._faults()

    def _faults(self) -> None:
        rnd, sh = self.rnd, self.shape
        doms = self.world.domains
        for d in rnd.sample(doms, max(1, round(len(doms) / 2))):
            d.faulty = True
            t = sh.leak_start * sh.duration_s + rnd.uniform(0, 0.05 * sh.duration_s)
            while t < sh.duration_s:
                # a fault comes and goes (load, a bad node in and out of rotation) until it is fixed
                on = min(600.0, max(90.0, rnd.expovariate(1 / 240)))
                d.windows.append((self.t0 + t, self.t0 + min(sh.duration_s, t + on)))
                t += on + min(300.0, max(20.0, rnd.expovariate(1 / 120)))

    def _id(self, prefix: str, bits: int = 96) -> str:
        return f"{prefix}{self.rnd.getrandbits(bits):0{bits // 4}x}"

    def run(self) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        heap: list[tuple[float, int, Any]] = []
        total_w = sum(t.weight for t in self.world.tenants)
        seq = 0
        for t in self.world.tenants:
            mix_total = sum(t.mix.values())
            turns = sum(MEAN_TURNS[k] * w for k, w in t.mix.items()) / mix_total
            lam = self.shape.rate * t.weight / total_w / turns
            ts = self.rnd.expovariate(lam)
            while ts < self.shape.duration_s:
                heapq.heappush(heap, (self.t0 + ts, seq, t))
                seq += 1
                ts += self.rnd.expovariate(lam)
        end = self.t0 + self.shape.duration_s
        while heap:
            ts, _, item = heapq.heappop(heap)
            if not isinstance(item, Session):
                task = self.rnd.choices(TASKS, weights=[item.mix[k] for k in TASKS])[0]
                sid = self._id("sess-", 64) if item.sends_session else None
                item = start(self.world, item, task, self.rnd, f"s{seq}", sid)
                if len(self.world.domains) > 1 and self.rnd.random() < 0.1:
                    item.domain = self.rnd.randrange(len(self.world.domains))  # spill-over to another pool
            resp_ts = self._exchange(item, ts)
            if item.step < item.turns:
                gap = self.rnd.uniform(0.3, 3.0) if item.task == "agent" else self.rnd.uniform(8.0, 120.0)
                if resp_ts + gap < end:
                    seq += 1
                    heapq.heappush(heap, (resp_ts + gap, seq, item))
        self._cache_stats(end)
        self.events.sort(key=lambda e: (e[0], e[1]))
        labels = {"profile": "blind-v1", "shape": self.shape.__dict__, "responses": self.rows}
        return [e[2] for e in self.events], labels

    def _overlong(self, s: Session, turn: Turn) -> int:
        """Turns this request into a paste of far more than the context window; returns the gateway's count."""
        ctx = self.world.domains[s.domain].context_window
        blob = "\n\n".join(d.text for d in self.rnd.sample(s.tenant.docs + s.tenant.code, min(6, len(s.tenant.docs))))
        user = Message(
            "user", [ask(s.lang, "explain", self.rnd), Seg("\n\n"), Seg(blob[:40000], s.tenant.id, "private")]
        )
        turn.messages = [*s.system, user]
        turn.user = [user]
        return int(ctx * self.rnd.uniform(1.05, 4.0))

    def _exchange(self, s: Session, ts: float) -> float:
        rnd, dom = self.rnd, self.world.domains[s.domain]
        turn = next_turn(self.world, self.model, s, rnd)
        overlong = rnd.random() < self.shape.overlong_rate and bool(s.tenant.docs)
        prompt_text = render(turn.messages, self.world.prompt_format)
        gw_tokens = self._overlong(s, turn) if overlong else gateway_tokens(prompt_text)
        if overlong:
            prompt_text = render(turn.messages, self.world.prompt_format)
        self.n += 1
        rid = self._id("chatcmpl-")
        request: dict[str, Any] = {
            "event_id": self._id("evt-", 64),
            "type": "request",
            "ts": round(ts, 3),
            "request_id": rid,
            "tenant_id": s.tenant.id,
            "model": dom.model,
            "prompt_tokens": gw_tokens,
            "session_id": s.id,
            "cache_domain": dom.name,
            "max_output_tokens": turn.max_output,
            "context_window": dom.context_window,
            "prompt_text": prompt_text[:PROMPT_TEXT_MAX],
        }
        self.events.append((request["ts"], 2 * self.n, request))
        row: dict[str, Any] = {
            "request_id": rid,
            "tenant_id": s.tenant.id,
            "session_id": s.id,
            "task": s.task,
            "cache_domain": dom.name,
            "receiver_lang": turn.answer_lang,
            "contaminated": False,
            "decoys": sorted(turn.decoys),
        }
        ex = lk.Exchange(self.n, rid, s.tenant, s, ts, ts, dom, turn, turn.answer, row, {})
        status, kind = self._status(ex, overlong)
        answer: list[Seg] = [] if status >= 300 else self._deliver(ex, kind)
        return self._respond(ex, status, answer, prompt_text, overlong and kind == "stale_kv_abort")

    def _status(self, ex: lk.Exchange, overlong: bool) -> tuple[int, str | None]:
        r, fault = self.rnd.random(), ex.domain.fault_at(ex.ts)
        if overlong:
            return (200, "stale_kv_abort") if fault else (400, None)
        if r < 0.01:
            return 429, None
        if r < 0.013:
            return 500, None
        if r < 0.017:
            return 499, None
        if fault and self.rnd.random() < self.shape.leak_rate:
            kinds = ["whole_response", "prefix_collision", "spliced_page", "cross_session"]
            return 200, self.rnd.choices(kinds, weights=[3, 3, 2.5, 1.5])[0]
        return 200, None

    def _deliver(self, ex: lk.Exchange, kind: str | None) -> list[Seg]:
        """The answer the receiver gets: its own, or what the fault puts there (and the label that says so)."""
        rnd, ring, me = self.rnd, self.rings[self.world.domains.index(ex.domain)], ex
        other = lambda e: e.tenant.id != me.tenant.id  # noqa: E731
        if kind == "stale_kv_abort":
            pieces = lk.stale_pages(ring, me, rnd)
            if pieces:
                lk.mark(me.label, kind, pieces)
                out: list[Seg] = []
                for _, p in pieces:  # pages of several requests run into each other
                    out += [p, Seg(" " if rnd.random() < 0.5 else "", None, "sep")]
                return out
            return []
        if kind == "cross_session" and me.session.id is not None:
            same = lk.recent(
                ring, me.ts, 900.0, lambda e: e.tenant.id == me.tenant.id and e.session.id not in (None, me.session.id)
            )
            if same:
                src = rnd.choice(same[:6])
                if rnd.random() < 0.5 and src.answer:
                    lk.mark(me.label, kind, [(src, x) for x in src.answer if units(x.text)], whole=True)
                    return list(src.answer)
                page = lk.take_pages(src, lk.PAGE * rnd.randint(2, 4), rnd)
                if page is not None:
                    lk.mark(me.label, kind, [(src, page)])
                    return lk.splice(ex.answer, page, ex.turn.answer_lang, rnd)
            kind = "spliced_page"
        if kind == "whole_response":
            srcs = lk.recent(
                ring,
                me.ts,
                30.0,
                lambda e: (
                    other(e) and e.answer and e.response.get("status_code") == 200 and not e.label["contaminated"]
                ),
            )
            if srcs:
                src = srcs[0]
                mine = ex.answer
                lk.mark(me.label, kind, [(src, x) for x in src.answer if units(x.text)], whole=True)
                theirs = list(src.answer)
                if src.resp_ts > me.ts and rnd.random() < 0.5:  # both in flight: the two answers swap
                    self._swap_into(src, me, mine)
                return theirs if self.shape.crossed_answers else list(src.answer)
            kind = "spliced_page"
        if kind == "prefix_collision":
            tmpl = me.session.template
            srcs = lk.recent(ring, me.ts, 600.0, lambda e: other(e) and e.leakable)
            srcs = [e for e in srcs if tmpl and e.session.template == tmpl] or srcs
            if srcs:
                src = rnd.choice(srcs[:10])
                out = src.turn.regen(rnd)
                owned = [s for s in out if s.owner == src.tenant.id and units(s.text)]
                lk.mark(me.label, kind, [(src, s) for s in owned] or [(src, Seg(plain(out), None))])
                return out
            kind = "spliced_page"
        if kind == "spliced_page":
            srcs = lk.recent(ring, me.ts, 300.0, lambda e: other(e) and e.leakable)
            if srcs:
                src = rnd.choice(srcs[:10])
                page = lk.take_pages(src, rnd.choice((16, 24, 32, 48)), rnd)
                if page is not None:
                    lk.mark(me.label, kind, [(src, page)])
                    return lk.splice(ex.answer, page, ex.turn.answer_lang, rnd)
        return ex.answer

    def _swap_into(self, src: lk.Exchange, me: lk.Exchange, mine: list[Seg]) -> None:
        src.answer = list(mine)
        lk.mark(src.label, "whole_response", [(me, x) for x in mine if units(x.text)], whole=True)
        src.response["output_text"] = plain(mine)
        out = engine_tokens(plain(mine), src.domain.cjk_per_token, src.domain.latin_chars)
        src.response["usage"] = {**(src.response.get("usage") or {}), "output_tokens": out}
        if src.history_msg is not None:
            src.history_msg.segs = list(mine)

    def _respond(self, ex: lk.Exchange, status: int, answer: list[Seg], prompt_text: str, placeholder: bool) -> float:
        rnd, dom, s = self.rnd, ex.domain, ex.session
        text = plain(answer)
        out_tokens = engine_tokens(text, dom.cjk_per_token, dom.latin_chars)
        finish = ex.turn.finish
        if out_tokens > ex.turn.max_output:
            keep = int(len(text) * ex.turn.max_output / out_tokens)
            text, out_tokens, finish = text[:keep], ex.turn.max_output, "length"
        in_tokens = 1 if placeholder else engine_tokens(prompt_text, dom.cjk_per_token, dom.latin_chars) + 3
        ttft = rnd.uniform(8, 30) if placeholder else 60 + in_tokens / 9.0 + rnd.expovariate(1 / 150)
        dur = ttft + (out_tokens * rnd.uniform(18, 35) if status == 200 else rnd.uniform(2, 40))
        ex.resp_ts = ex.ts + dur / 1000.0
        ok = status == 200
        resp: dict[str, Any] = {
            "event_id": self._id("evt-", 64),
            "type": "response",
            "ts": round(ex.resp_ts, 3),
            "request_id": ex.request_id,
            "tenant_id": s.tenant.id,
            "model": dom.model,
            "cache_domain": dom.name,
            "status_code": status,
            "session_id": s.id,
            "finish_reason": finish if ok else None,
            "usage": {"input_tokens": in_tokens, "output_tokens": out_tokens} if ok else None,
            "ttft_ms": round(ttft, 1) if ok else None,
            "duration_ms": round(dur, 1),
            "output_text": text if ok else None,
        }
        ex.response = resp
        ex.answer = answer
        ex.label.update(ts=resp["ts"], status_code=status)
        self.rows.append(ex.label)
        self.events.append((resp["ts"], 2 * ex.n + 1, resp))
        if ok:
            s.history += ex.turn.user
            ex.history_msg = Message("assistant", list(answer))
            s.history.append(ex.history_msg)
            s.history += ex.turn.after
            ex.leakable = lk.leakable(ex.turn.messages, answer, s.tenant.id)
            self.rings[self.world.domains.index(dom)].append(ex)
        return ex.resp_ts

    def _cache_stats(self, end: float) -> None:
        if not self.shape.cache_stats:
            return
        for i, dom in enumerate(self.world.domains):
            ring, evicted, t = self.rings[i], 0, self.t0
            cap = 1_500_000
            while t < end:
                live = sum((e.response.get("usage") or {}).get("input_tokens", 0) for e in ring if t - 300 <= e.ts < t)
                used = min(cap, int(live * 0.7))
                evicted += max(0, int(live * 0.7) - cap)
                self.events.append(
                    (
                        round(t, 3),
                        0,
                        {
                            "event_id": self._id("evt-", 64),
                            "type": "cache_stats",
                            "ts": round(t, 3),
                            "cache_domain": dom.name,
                            "role": "unified",
                            "capacity_tokens": cap,
                            "used_tokens": used,
                            "model": dom.model,
                            "context_window": dom.context_window,
                            "evicted_tokens_total": evicted,
                        },
                    )
                )
                t += 15.0


def simulate(shape: Shape) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    return Simulator(shape).run()


__all__ = ["TOOLS", "Simulator", "simulate", "units"]
