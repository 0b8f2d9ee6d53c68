"""The clean traffic of a run: sessions of every tenant, turn by turn in time order, with errors and timings.

Leaks are applied as each request is served (leaks.Injector), so that what a client re-sends in its next turn is
what it really received.
"""

from __future__ import annotations

import heapq
import math
import random
import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from schemas.messages import chat_text
from streams.sim.blind2 import corpus, phrases
from streams.sim.blind2.texts import Turn, Writer
from streams.sim.blind2.world import Tenant, World

MEAN_TURNS = {"chat": 3.2, "rag": 1.3, "agent": 4.0, "translate": 1.0, "code": 2.4, "summarise": 1.0}
THINK_S = {
    "chat": (8, 90),
    "rag": (15, 60),
    "agent": (0.3, 4),
    "translate": (1, 5),
    "code": (20, 200),
    "summarise": (5, 30),
}
OVERLONG_P = {"summarise": 0.04, "rag": 0.015, "chat": 0.004, "code": 0.008, "agent": 0.0, "translate": 0.0}
DECODE_TPS = {"qwen": 62.0, "llama": 38.0, "glm": 45.0, "gemma": 55.0, "mistral": 70.0}
PAGE = 16  # tokens per KV block: cached token counts are whole blocks


@dataclass
class Session:
    tenant: Tenant
    sid: str | None
    domain: str
    turns_left: int
    history: list[dict[str, str]] = field(default_factory=list)
    earlier: list[str] = field(default_factory=list)
    task: str = ""
    code: str | None = None
    step: int = 0
    retry: Exchange | None = None
    retries: int = 0
    last_end: float = 0.0
    done: bool = False


@dataclass
class Exchange:
    rid: str
    tenant: Tenant
    session: Session
    domain: str
    model: str
    window: int
    start: float
    turn: Turn
    messages: list[dict[str, str]]
    prompt_wire: str
    prompt_plain: str
    prompt_tokens: int
    overlong: bool = False
    status: int = 200
    error: str | None = None
    finish: str | None = "stop"
    clean: str = ""
    out: str | None = None
    usage_in: int = 0
    usage_out: int = 0
    cached: int = 0
    ttft_ms: float = 0.0
    duration_ms: float = 0.0
    response_id: str | None = None
    trace: str = ""
    decoys: set[str] = field(default_factory=set)
    receiver_of: dict[str, Any] | None = None  # the leak label when this response is contaminated
    source_of: bool = False  # its text went to someone else: never a receiver after that

    @property
    def end(self) -> float:
        return self.start + self.duration_ms / 1000

    @property
    def ok(self) -> bool:
        return 200 <= self.status <= 299 and self.out is not None


def _rid(rng: random.Random) -> str:
    h = f"{rng.getrandbits(128):032x}"
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{h[16:20]}-{h[20:]}"


def render(t: Tenant, messages: list[dict[str, str]]) -> str:
    """The prompt as the gateway logs it: the messages array as JSON, or a chat template rendered as text."""
    if t.json_log:
        return orjson.dumps(messages).decode()
    return "".join(f"<|{m['role']}|>\n{m['content']}\n" for m in messages) + "<|assistant|>\n"


def truncate_units(text: str, max_tokens: int) -> tuple[str, bool]:
    if corpus.tokens(text) <= max_tokens:
        return text, False
    u = corpus.units(text)
    lo, hi = 1, len(u)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if corpus.tokens("".join(u[:mid])) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    return "".join(u[:lo]), True


class Simulation:
    def __init__(self, world: World, injector: Any) -> None:
        self.w = world
        self.rng = random.Random(f"blind-v2/{world.shape}/{world.seed}/traffic")
        sl = corpus.slices(self.rng, [(t.id, t.explain_lang, t.weight) for t in world.tenants])
        self.writers = {
            t.id: Writer(t, sl[t.id], random.Random(f"blind-v2/{world.shape}/{world.seed}/{t.id}"))
            for t in world.tenants
        }
        self.inj = injector
        self.heap: list[tuple[float, int, Session]] = []
        self.seq = 0
        self.exchanges: list[Exchange] = []
        self.recent_starts: dict[str, list[float]] = {}
        self.system_seen: dict[tuple[str, str], float] = {}

    def _push(self, t: float, s: Session) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, s))

    def _new_session(self, t: Tenant, at: float) -> None:
        rng = self.rng
        turns = max(1, round(rng.expovariate(1 / MEAN_TURNS[t.app]))) if t.app in ("chat", "code", "rag") else 1
        if t.app == "agent":
            turns = rng.randint(2, 7)
        sid = None
        if t.sessions:
            sid = f"sess_{rng.getrandbits(64):016x}" if rng.random() < 0.6 else _rid(rng)
        self._push(at, Session(t, sid, rng.choice(t.pools), turns))

    def plan(self) -> None:
        w, rng = self.w, self.rng
        for t in w.tenants:
            per_s = t.weight * w.rate_rps / MEAN_TURNS[t.app]
            bursty = t.app in ("translate", "summarise")
            steady = per_s * (0.6 if bursty else 1.0)
            at = w.t0 + rng.expovariate(steady)
            while at < w.t0 + w.duration_s:
                self._new_session(t, at)
                at += rng.expovariate(steady)
            if bursty:  # batch jobs: dozens of requests within a minute or two
                for _ in range(max(1, round(per_s * 0.4 * w.duration_s / 25))):
                    b0 = rng.uniform(w.t0, w.t0 + w.duration_s - 60)
                    for _ in range(rng.randint(10, 40)):
                        self._new_session(t, b0 + rng.uniform(0, 90))

    def run(self) -> list[Exchange]:
        self.plan()
        end = self.w.t0 + self.w.duration_s
        while self.heap:
            at, _, s = heapq.heappop(self.heap)
            if at >= end:
                continue
            ex = self._serve(s, at)
            self.inj.apply(ex, self)
            self.exchanges.append(ex)
            self._after(s, ex)
        return self.exchanges

    def _turn(self, s: Session) -> Turn:
        wr = self.writers[s.tenant.id]
        app = s.tenant.app
        if app == "chat":
            return wr.chat(s.earlier)
        if app == "rag":
            return wr.rag()
        if app == "agent":
            turn = wr.agent(s.step, s.task)
            if s.step == 0:
                s.task = turn.private
            return turn
        if app == "translate":
            return wr.translate()
        if app == "code":
            return wr.code(s.code)
        return wr.summarise()

    def _messages(self, s: Session, turn: Turn) -> list[dict[str, str]]:
        t = s.tenant
        system = t.system
        user = turn.user
        if turn.context is not None:
            if t.template == "rag-kit":
                system = phrases.RAG_KIT.format(context=turn.context)
            else:
                user = f"{turn.context}\n\n{user}"
        new = (
            [{"role": "tool", "content": turn.tool_result}] if turn.tool_result else [{"role": "user", "content": user}]
        )
        head = [] if t.app == "translate" and self.rng.random() < 0.5 else [{"role": "system", "content": system}]
        return head + s.history + new

    def _serve(self, s: Session, at: float) -> Exchange:
        rng, t, w = self.rng, s.tenant, self.w
        pool = w.pools[s.domain]
        if s.retry is not None:  # the client retries the same request after a 429
            old, s.retry = s.retry, None
            turn, messages = old.turn, old.messages
        else:
            turn = self._turn(s)
            messages = self._messages(s, turn)
        overlong = False
        forced = self.inj.wants_overlong(s.domain, at, t.app)
        if s.step == 0 and not s.history and (forced or rng.random() < OVERLONG_P[t.app]):
            overlong = True
            doc = self.writers[t.id].huge_document()
            lead = phrases.SUMMARISE[t.explain_lang] if t.explain_lang in phrases.SUMMARISE else phrases.SUMMARISE["en"]
            turn = Turn(f"{lead}\n\n{doc}", doc, turn.answer, turn.answer_private, turn.out_lang, set())
            messages = [{"role": "system", "content": t.system}, {"role": "user", "content": turn.user}]
        wire = render(t, messages)
        ptoks = sum(corpus.tokens(m["content"]) + 4 for m in messages)
        if overlong:
            ptoks = pool.context_window + rng.randint(2_000, 90_000)
            wire = wire[: rng.randint(12_000, 16_000)]  # the gateway logs the first 16 KB of a prompt at most
        plain = chat_text(wire)
        ex = Exchange(_rid(rng), t, s, s.domain, pool.model, pool.context_window, round(at, 3), turn, messages, wire,
                      plain, ptoks, overlong)  # fmt: skip
        ex.trace = f"00-{rng.getrandbits(128):032x}-{rng.getrandbits(64):016x}-01"
        ex.decoys = set(turn.decoys) | ({"session_resend"} if s.history else set())
        if t.template:
            ex.decoys.add("boilerplate")
        starts = self.recent_starts.setdefault(t.id, [])
        starts[:] = [x for x in starts if x > at - 10]
        r = rng.random()
        if len(starts) >= t.rate_limit_10s:
            self._fail(ex, 429, "rate_limit_exceeded", rng.uniform(2, 9))
        elif overlong:
            self._fail(ex, 400, "context_length_exceeded", rng.uniform(8, 40))
        elif r < 0.003:
            self._fail(ex, 500, "internal_server_error", rng.uniform(200, 9000))
        elif r < 0.006:
            self._fail(ex, 503, "overloaded", rng.uniform(5, 60))
        elif r < 0.008:
            self._fail(ex, 400, "invalid_request_error", rng.uniform(3, 15))
        else:
            self._complete(ex, turn.answer)
        if ex.status != 429:
            starts.append(at)
        return ex

    def _fail(self, ex: Exchange, status: int, error: str, ms: float) -> None:
        ex.status, ex.error, ex.finish, ex.duration_ms = status, error, None, round(ms, 3)
        ex.ttft_ms = ex.duration_ms

    def _complete(self, ex: Exchange, answer: str) -> None:
        rng, t = self.rng, ex.tenant
        out, cut = truncate_units(answer, t.max_output_tokens or 8192)
        ex.clean = ex.out = out
        ex.finish = "length" if cut else "stop"
        ex.usage_in = ex.prompt_tokens
        cached = 0
        sys_msg = ex.messages[0]["content"] if ex.messages and ex.messages[0]["role"] == "system" else None
        if sys_msg is not None:
            key = (ex.domain, sys_msg)
            if self.system_seen.get(key, -1e9) > ex.start - 600:
                cached += corpus.tokens(sys_msg)
            self.system_seen[key] = ex.start
        s = ex.session
        if s.history and s.last_end > ex.start - 300:
            cached += sum(corpus.tokens(m["content"]) + 4 for m in s.history)
        ex.cached = min(cached // PAGE * PAGE, max(0, ex.prompt_tokens - 1))
        ex.usage_out = corpus.tokens(out)
        rate = next((v for k, v in DECODE_TPS.items() if k in ex.model.lower()), 50.0) * rng.uniform(0.7, 1.15)
        queue = rng.expovariate(1 / 0.06)
        ex.ttft_ms = round((queue + (ex.prompt_tokens - ex.cached) / 9000 + 0.035) * 1000, 3)
        ex.duration_ms = round(ex.ttft_ms + ex.usage_out / rate * 1000, 3)
        ex.response_id = f"chatcmpl-{rng.getrandbits(96):024x}"

    def _after(self, s: Session, ex: Exchange) -> None:
        rng, app = self.rng, s.tenant.app
        if ex.status == 429 and s.retries < 4:  # exponential backoff, then the client gives up
            s.retry = ex
            s.retries += 1
            self._push(ex.end + 2**s.retries * rng.uniform(0.5, 1.5), s)
            return
        s.retries = 0
        s.turns_left -= 1
        if not ex.ok or s.turns_left <= 0 or ex.overlong:
            return
        s.history = [m for m in ex.messages if m["role"] != "system"]
        s.history.append({"role": "assistant", "content": ex.out or ""})
        if ex.turn.private:
            s.earlier.append(ex.turn.private)
        if app == "code" and s.code is None:
            m = re.search(r"```\w*\n(.*?)\n```", ex.clean, re.S)
            s.code = m.group(1) if m else None
        if app == "agent":
            s.step += 1
            if ex.clean.startswith('{"final_answer"'):
                return
        s.last_end = ex.end
        lo, hi = THINK_S[app]
        think = math.exp(rng.uniform(math.log(lo), math.log(hi)))
        self._push(ex.end + think, s)
