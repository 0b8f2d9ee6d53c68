"""Clean traffic of blind-v4: sessions, agent turns with tool calls, batch jobs, probes, errors and retries."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

import orjson

from streams.sim.blind4.shapes import TENANTS, Shape
from streams.sim.blind4.texts import (
    ASKS,
    OPENERS,
    PLATFORM_SYSTEM,
    REVIEW,
    Corpus,
    corpora,
    countries,
    public_rows,
    tok,
    vendored,
)


@dataclass(eq=False)
class Call:
    """One request and its response, before they become events (leaks.py rewrites some)."""

    rid: str
    tenant: str
    session: str | None
    pool: str
    model: str
    lang: str  # the receiver language of the labels: it, nl, ..., en, or code
    kind: str
    ts: float
    end: float = 0.0
    messages: list[dict[str, Any]] = field(default_factory=list)
    private: list[str] = field(default_factory=list)  # the tenant's own passages in this prompt (a leak's material)
    out: list[str] = field(default_factory=list)
    out_private: list[str] = field(default_factory=list)  # the tenant's own passages in the answer
    tool_call: dict[str, Any] | None = None
    status: int = 200
    error_type: str | None = None
    finish: str | None = "stop"
    stream: bool = False
    decoys: list[str] = field(default_factory=list)
    markers: list[str] = field(default_factory=list)
    ask: bool = False  # asked the stock summary question (a response-cache key)
    batch: str | None = None
    cached: bool = False  # answered from the gateway's response cache
    prompt_tokens: int = 0
    input_tokens: int | None = None
    max_out: int = 2048
    leak: dict[str, Any] | None = None

    def output_text(self) -> str:
        text = "\n".join(self.out)
        if self.tool_call is None:
            return text
        msg = {"role": "assistant", "content": text or None, "tool_calls": [self.tool_call]}
        return orjson.dumps([msg]).decode()


_FACTOR = {"en": 1.15, "code": 1.5}


def tokens_of(text: str, lang: str) -> int:
    return math.ceil(tok(text) * _FACTOR.get(lang, 1.3))


class Traffic:
    def __init__(self, shape: Shape, seed: int) -> None:
        self.shape = shape
        self.rng = random.Random(f"blind4-{shape.name}-{seed}")
        self.corp = corpora(shape.tenants)
        self.calls: list[Call] = []
        self.canaries: list[dict[str, Any]] = []
        self.n = 0
        rng = self.rng
        self.home: dict[str, list[str]] = {}
        for i, t in enumerate(shape.tenants):
            pools = list(shape.pools)
            first = pools[i % len(pools)]
            second = rng.choice(pools)
            self.home[t] = [first, second]
        self.system = {t: PLATFORM_SYSTEM if rng.random() < 0.7 else self._own_system(t) for t in shape.tenants}
        self.max_out = {t: rng.choice((1024, 2048, 4096)) for t in shape.tenants}
        self.publics = public_rows()

    # -- helpers -----------------------------------------------------------------------------------------------
    def _own_system(self, t: str) -> str:
        c = self.corp[t]
        return f"You assist the staff of {t}. " + " ".join(c.docs[:2])

    def _rid(self, t: str) -> str:
        self.n += 1
        return f"req-{self.n:06d}-{self.rng.getrandbits(40):010x}"

    def _rate(self, t: float) -> float:
        if not self.shape.diurnal:
            return 1.0
        x = t / self.shape.duration_s
        return 0.3 + 0.7 * min(1.0, x / 0.5) + 0.15 * math.sin(6 * math.pi * x)

    def _lang(self, t: str) -> str:
        return "code" if TENANTS[t][1] == "code" else TENANTS[t][0]

    # -- generation --------------------------------------------------------------------------------------------
    def run(self) -> list[Call]:
        shape, rng = self.shape, self.rng
        online = [t for t in shape.tenants if TENANTS[t][1] in ("chat", "agent", "code")]
        rate = shape.sessions_per_hour / 3600.0
        t = 0.0
        while True:
            t += rng.expovariate(rate * 1.5)
            if t >= shape.duration_s:
                break
            if rng.random() < self._rate(t) / 1.5:
                self._session(rng.choice(online), t)
        if "probe-synthetic" in shape.tenants:
            t = rng.uniform(5, 30)
            while t < shape.duration_s - 30:
                self._probe(t)
                t += shape.probe_every_s * rng.uniform(0.7, 1.3)
        self._batches()
        self.calls = [c for c in self.calls if c.ts < shape.duration_s - 2]
        self.calls.sort(key=lambda c: (c.ts, c.rid))
        return self.calls

    def _new(self, t: str, session: str | None, pool: str, ts: float, kind: str) -> Call:
        model = self.shape.models[hash_index(t, len(self.shape.models))]
        return Call(self._rid(t), t, session, pool, model, self._lang(t), kind, ts, max_out=self.max_out[t])

    def _session(self, t: str, start: float) -> None:
        rng, kind = self.rng, TENANTS[t][1]
        c = self.corp[t]
        sid = f"sess-{rng.getrandbits(48):012x}"
        pool = self.home[t][0] if rng.random() < 0.7 else self.home[t][1]
        turns = {"chat": rng.choice((1, 1, 2, 2, 3, 4, 6)), "agent": rng.randint(5, 14), "code": rng.randint(6, 18)}[
            kind
        ]
        case = rng.sample(c.docs, min(len(c.docs), rng.randint(8, 14)))
        ents = [c.entity(rng) for _ in range(3)]
        history: list[dict[str, Any]] = [{"role": "system", "content": self.system[t]}]
        past_answers: list[str] = []
        ts = start
        stream = rng.random() < self.shape.streaming
        for turn in range(turns):
            call = self._new(t, sid, pool, ts, kind)
            call.stream = stream
            if kind == "chat":
                self._chat_turn(call, c, case, ents, turn, past_answers)
            else:
                self._agent_turn(call, c, case, ents, turn, turns, history)
            if call.tool_call is None and kind != "chat" and turn == turns - 1:
                call.out_private.append(" ".join(case[:2]))
            history_msgs = [*history, *call.messages]
            call.messages = history_msgs if len(history_msgs) <= 10 else history_msgs[:1] + history_msgs[-9:]
            self._finish(call, turn)
            history = [*history_msgs, {"role": "assistant", "content": "\n".join(call.out)}]
            if call.tool_call is not None:
                history[-1]["tool_calls"] = [call.tool_call]
            if call.status in (429, 503) and rng.random() < 0.85:  # the client retries the same prompt
                retry = self._new(t, sid, pool, call.end + rng.uniform(1, 8), kind)
                for name in ("messages", "private", "out", "out_private", "tool_call", "stream", "decoys", "ask"):
                    setattr(retry, name, getattr(call, name))
                self._finish(retry, turn, errors=False)
                call = retry
            if self.shape.response_cache and call.status == 200 and kind == "chat" and rng.random() < 0.04:
                dup = self._new(t, sid, pool, call.end + rng.uniform(5, 90), kind)
                for name in ("messages", "private", "out", "out_private", "stream", "ask"):
                    setattr(dup, name, getattr(call, name))
                dup.decoys = [*call.decoys, "session_resend"]
                dup.cached = True
                self._finish(dup, turn, errors=False)
            past_answers += call.out_private
            think = rng.uniform(20, 150) if kind == "chat" else rng.uniform(2, 20)
            ts = call.end + think

    def _chat_turn(self, call: Call, c: Corpus, case: list[str], ents: list[str], turn: int, past: list[str]) -> None:
        rng, lang = self.rng, c.prose_lang
        own = case[(turn * 3) % len(case) :][: rng.randint(2, 5)] or case[:3]
        user = [" ".join(own), f"{ents[turn % 3]}"]
        call.private = [" ".join(own), ents[turn % 3]]
        out = [rng.choice(OPENERS[lang])]
        pub = [r[lang] for r in rng.sample(self.publics, 5) if lang in r][:4]
        r = rng.random()
        if r < 0.14 and pub:
            user.append("Manual: " + " ".join(pub))
            call.decoys.append("public_doc")
            if rng.random() < 0.6:
                out.append(pub[0])
                call.decoys.append("public_echo")
        elif r < 0.2 and lang != "en":
            rows = [row for row in rng.sample(self.publics, 6) if lang in row][:4]
            user.append("Translate: " + " ".join(row["en"] for row in rows))
            out.append(" ".join(row[lang] for row in rows))
            call.decoys.append("translation")
        elif r < 0.27:
            names = countries(lang)
            k = rng.randrange(0, len(names) - 15)
            user.append("Context: " + ", ".join(names[k : k + 15]))
            out.append(", ".join(names[k + 2 : k + 8]))
            call.decoys.append("rag")
        if rng.random() < 0.12 and lang in ASKS:
            user.append(ASKS[lang])
            call.ask = True
        call.messages = [{"role": "user", "content": "\n".join(user)}]
        echo = rng.choice(own)
        out.append(echo)
        answer = " ".join(rng.sample(c.answers, rng.randint(2, 5)))
        out.append(answer + f" ({ents[turn % 3]})")
        call.out_private = [answer]
        if past and rng.random() < 0.15:
            out.append(rng.choice(past))
            call.decoys.append("session_resend")
        if rng.random() < 0.02:
            out.append(PLATFORM_SYSTEM.split(". ")[2] + ".")
            call.decoys.append("boilerplate")
        call.out = out

    def _agent_turn(
        self, call: Call, c: Corpus, case: list[str], ents: list[str], turn: int, turns: int, history: list
    ) -> None:
        rng = self.rng
        code = TENANTS[c.tenant][1] == "code"
        if turn == 0:
            task = " ".join(case[:2]) if not code else "Fix the failing test in " + ents[0].split(" ")[0]
            call.messages = [{"role": "user", "content": task + "\n" + ents[0]}]
            call.private = [task]
        else:
            prev = history[-1].get("tool_calls") or [{"id": f"call_{turn}"}]
            if code:
                body = rng.choice(c.code)
                if rng.random() < 0.15:
                    body = rng.choice(vendored())
                    call.decoys.append("vendored")
                else:
                    call.private = [body]
            else:
                body = " ".join(rng.sample(case, 3)) + "\n" + ents[turn % 3]
                call.private = [body]
            call.messages = [{"role": "tool", "tool_call_id": prev[0]["id"], "content": body}]
        if turn < turns - 1:
            name = rng.choice(c.tools)
            arg = (
                {"path": f"pkg/{rng.choice(('cmd', 'internal', 'api'))}/{rng.getrandbits(20):05x}.go"}
                if code
                else {"query": ents[turn % 3].split(" ")[0]}
            )
            call.tool_call = {
                "id": f"call_{rng.getrandbits(64):016x}",
                "type": "function",
                "function": {"name": name, "arguments": orjson.dumps(arg).decode()},
            }
            call.out = [rng.choice(REVIEW) if code else rng.choice(OPENERS[c.prose_lang])]
            call.finish = "tool_calls"
        else:
            if code and call.private:
                lines = call.private[0].splitlines()
                call.out = [rng.choice(REVIEW), "\n".join(lines[: max(4, len(lines) - 2)])]
                call.out_private = [call.out[1]]
            else:
                answer = " ".join(rng.sample(c.answers, rng.randint(2, 4)))
                call.out = [rng.choice(OPENERS[c.prose_lang]), answer]
                call.out_private = [answer]

    def _finish(self, call: Call, turn: int, errors: bool = True) -> None:
        """Status, token counts and timing of a call."""
        rng, shape = self.rng, self.shape
        text = "\n".join(str(m.get("content") or "") for m in call.messages)
        lang = call.lang
        call.prompt_tokens = tokens_of(text, lang) + 6 * len(call.messages)
        call.input_tokens = call.prompt_tokens + rng.randint(0, 4)
        r = rng.random() if errors else 1.0
        if r < 0.004 and call.kind == "chat":  # a pasted export too long for the model
            call.prompt_tokens = shape.context_window + rng.randint(200, 40000)
            call.status, call.error_type, call.finish = 400, "context_length_exceeded", None
        elif r < 0.02:
            call.status, call.error_type, call.finish = 429, "rate_limit_exceeded", None
        elif r < 0.027:
            call.status, call.error_type, call.finish = 503, "upstream_unavailable", None
        elif r < 0.03:
            call.status, call.error_type, call.finish = 500, "internal_server_error", None
        elif r < 0.035 and call.stream:
            call.status, call.error_type, call.finish = 499, "client_disconnected", None
            call.out = call.out[:1]
        call.end = call.ts + self.timing(call) / 1000
        self.calls.append(call)

    def timing(self, call: Call) -> float:
        rng = self.rng
        if call.status in (400, 429):
            return rng.uniform(3, 40)
        if call.cached:
            return rng.uniform(4, 35)
        out = tokens_of(call.output_text(), call.lang)
        ttft = rng.uniform(60, 400) + call.prompt_tokens * rng.uniform(0.01, 0.05)
        return ttft + out * rng.uniform(12, 40)

    def _probe(self, ts: float) -> None:
        rng = self.rng
        c = self.corp["probe-synthetic"]
        marker = f"XTPROBE-{rng.getrandbits(128):032x}"
        sid = f"probe-{rng.getrandbits(32):08x}"
        self.canaries.append({"ts": ts, "tenant": "probe-synthetic", "marker": marker, "session": sid})
        call = self._new("probe-synthetic", sid, rng.choice(self.shape.pools), ts + 0.05, "probe")
        note = f"Reference code {marker} belongs to this conversation only. " + " ".join(rng.sample(c.docs, 2))
        call.messages = [{"role": "system", "content": PLATFORM_SYSTEM}, {"role": "user", "content": note}]
        call.private, call.markers = [note], [marker]
        call.out = ["Noted. " + rng.choice(c.answers)]
        self._finish(call, 0, errors=False)

    def _batches(self) -> None:
        shape, rng = self.shape, self.rng
        if not shape.batch_jobs:
            return
        owners = [t for t in shape.tenants if TENANTS[t][1] != "probe"]
        for j in range(shape.batch_jobs):
            t = owners[j % len(owners)] if j < len(owners) else rng.choice(owners)
            c = self.corp[t]
            start = rng.uniform(60, shape.duration_s - 900)
            pool = rng.choice(shape.pools)
            job = f"batch_{rng.getrandbits(48):012x}"
            ts = start
            for _line in range(rng.randint(*shape.batch_size)):
                ts += rng.uniform(0.3, 4.0)
                call = self._new(t, None, pool, ts, "batch")
                record = " ".join(rng.sample(c.docs, 2))
                ent = c.entity(rng)
                call.messages = [
                    {"role": "system", "content": "Classify the record and summarise it in one sentence."},
                    {"role": "user", "content": f"{record}\n{ent}"},
                ]
                call.private = [record, ent]
                answer = rng.choice(c.answers)
                call.out = [f"category: {rng.choice(('A', 'B', 'C', 'D'))}", answer, ent]
                call.out_private = [answer]
                call.batch = job
                self._finish(call, 0, errors=False)


def hash_index(text: str, n: int) -> int:
    return sum(text.encode()) % n
