"""The leak classes of blind-v4 (README.md, "Leak classes"): each rewrites some clean calls after the warm-up."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from streams.sim.blind4.shapes import Shape
from streams.sim.blind4.texts import OPENERS, cut, tok
from streams.sim.blind4.traffic import Call

# class -> (scenario, leak kind, one line on what happens)
CLASSES: dict[str, tuple[str, str, str]] = {
    "placeholder_stale_kv": (
        "mechanism",
        "cross_tenant",
        "an over-long prompt is aborted, a one-token placeholder still decoded over stale KV pages of earlier "
        "requests in the pool: HTTP 200, usage.input_tokens 1, the answer is other tenants' prompt text",
    ),
    "prefix_block_shared": (
        "content_only",
        "cross_tenant",
        "prefix-cache blocks hashed without a per-tenant salt (or colliding) are reused across tenants: the "
        "answer carries one or two passages of another tenant's recent prompt in the same pool",
    ),
    "stream_splice": (
        "content_only",
        "cross_tenant",
        "a streaming proxy reuses a pooled upstream connection after a cancellation: a run of another "
        "concurrent stream's chunks (a few to forty tokens) lands inside this answer",
    ),
    "response_cache_unscoped": (
        "content_only",
        "cross_tenant",
        "a semantic response cache keyed without tenant scope answers a stock question with another tenant's "
        "cached answer (possibly in another language): the whole answer is foreign",
    ),
    "conversation_key_collision": (
        "content_only",
        "cross_session",
        "the conversation-state store keyed by a truncated conversation id loads another session of the same "
        "tenant: the answer continues that session's case",
    ),
    "draft_slot_bleed": (
        "content_only",
        "cross_tenant",
        "speculative decoding's draft KV slot is not reset after preemption: accepted draft tokens copy one "
        "to three short fragments (4-14 tokens) of another request's answer",
    ),
    "tool_result_misroute": (
        "content_only",
        "cross_tenant",
        "a shared tool executor keys results by a non-unique tool_call_id: another tenant's tool output is "
        "delivered as this agent's tool message, and the answer quotes it",
    ),
    "batch_offset_shift": (
        "content_only",
        "cross_tenant",
        "a batch results writer joins coalesced jobs by line offset after a dropped line: a run of lines gets "
        "the neighbouring tenant's job's answers whole",
    ),
    "kv_handoff_mismatch": (
        "content_only",
        "cross_tenant",
        "prefill/decode disaggregation: a KV transfer is matched to the wrong decode request, which continues "
        "another tenant's prompt",
    ),
}


class Injector:
    def __init__(self, shape: Shape, seed: int, calls: list[Call]) -> None:
        self.shape = shape
        self.rng = random.Random(f"blind4-leaks-{shape.name}-{seed}")
        self.calls = calls
        self.warm = shape.duration_s / 4
        self.used: set[str] = set()  # receivers and sources already in a leak

    def run(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        apply: dict[str, Callable[[Call], bool]] = {
            "placeholder_stale_kv": self._placeholder,
            "prefix_block_shared": self._prefix,
            "stream_splice": self._splice,
            "response_cache_unscoped": self._cache,
            "conversation_key_collision": self._conversation,
            "draft_slot_bleed": self._draft,
            "tool_result_misroute": self._tool,
            "kv_handoff_mismatch": self._handoff,
        }
        for cls in sorted(self.shape.leaks):
            want = self.shape.leaks[cls]
            if cls == "batch_offset_shift":
                counts[cls] = self._batch_shift(want)
                continue
            got = 0
            for target in sorted(self.rng.uniform(self.warm + 20, self.shape.duration_s - 60) for _ in range(want)):
                for c in self.calls:
                    if c.ts < target or c.rid in self.used or c.status != 200 or c.kind == "probe" or c.leak:
                        continue
                    if apply[cls](c):
                        self.used.add(c.rid)
                        got += 1
                        break
            counts[cls] = got
        return counts

    # -- shared ------------------------------------------------------------------------------------------------
    def _sources(self, r: Call, pred: Callable[[Call], bool], lo: float, hi: float) -> list[Call]:
        return [
            c
            for c in self.calls
            if lo <= c.ts <= hi and c.rid != r.rid and c.status == 200 and c.rid not in self.used and pred(c)
        ]

    def _passage(self, src: Call, n: int, out: bool = False) -> str:
        text = " ".join(src.out_private if out else src.private)
        words = text.split()
        if src.markers and not out and self.rng.random() < 0.7:
            start = 0  # from the top: the probe's marker comes with it
        else:
            start = self.rng.randrange(0, max(1, len(words) - int(n * 0.8)))
        return cut(text, n, start)

    def _mark(self, r: Call, cls: str, parts: list[tuple[Call, str]]) -> bool:
        parts = [(s, p) for s, p in parts if tok(p) >= 3]
        if not parts:
            return False
        r.leak = {
            "class": cls,
            "parts": [
                {
                    "tenant": s.tenant,
                    "session": s.session,
                    "lang": s.lang,
                    "tokens": tok(p),
                    "markers": [m for m in s.markers if m in p],
                    "request_id": s.rid,
                }
                for s, p in parts
            ],
        }
        return True

    def _opener(self, r: Call) -> str:
        lang = r.lang if r.lang in OPENERS else "en"
        return self.rng.choice(OPENERS[lang])

    # -- classes -----------------------------------------------------------------------------------------------
    def _placeholder(self, r: Call) -> bool:
        if r.kind not in ("chat", "agent", "code"):
            return False
        srcs = self._sources(r, lambda c: c.pool == r.pool and c.tenant != r.tenant and c.private, r.ts - 600, r.ts)
        if not srcs:
            return False
        probes = [c for c in srcs if c.markers]
        chosen = self.rng.sample(srcs, min(len(srcs), self.rng.randint(1, 3)))
        if probes and self.rng.random() < 0.4:
            chosen[-1] = self.rng.choice(probes)
        parts = [(s, self._passage(s, self.rng.randint(25, 120))) for s in dict.fromkeys(chosen)]
        if not self._mark(r, "placeholder_stale_kv", parts):
            return False
        own = [c.private[0] for c in self.calls if c.tenant == r.tenant and c.private and c.ts < r.ts][-40:]
        paste = dict(r.messages[-1], content=f"{r.messages[-1].get('content') or ''}\n" + "\n".join(own))
        r.messages = [*r.messages[:-1], paste]  # the export pasted whole (the gateway logs its head)
        r.prompt_tokens = self.shape.context_window + self.rng.randint(500, 60000)
        r.input_tokens = 1
        r.out = [p for _, p in parts]
        r.tool_call = None
        r.finish = "length" if self.rng.random() < 0.5 else "stop"
        return True

    def _prefix(self, r: Call) -> bool:
        if r.tool_call is not None:
            return False
        srcs = self._sources(r, lambda c: c.pool == r.pool and c.tenant != r.tenant and c.private, r.ts - 900, r.ts)
        if not srcs:
            return False
        chosen = list(dict.fromkeys(self.rng.sample(srcs, min(len(srcs), 1 if self.rng.random() < 0.7 else 2))))
        parts = [(s, self._passage(s, self.rng.randint(20, 90))) for s in chosen]
        if not self._mark(r, "prefix_block_shared", parts):
            return False
        r.out = [r.out[0], *(p for _, p in parts), *r.out[-1:]]
        return True

    def _splice(self, r: Call) -> bool:
        if not r.stream or len(r.out) < 2:
            return False
        srcs = self._sources(
            r,
            lambda c: c.pool == r.pool and c.tenant != r.tenant and bool(c.out_private) and c.end > r.ts,
            r.ts - 120,
            r.end,
        )
        if not srcs:
            return False
        s = self.rng.choice(srcs)
        frag = self._passage(s, self.rng.randint(6, 40), out=True)
        if not self._mark(r, "stream_splice", [(s, frag)]):
            return False
        at = self.rng.randrange(1, len(r.out))
        words = r.out[at].split()
        k = self.rng.randrange(0, max(1, len(words)))
        r.out = [*r.out[:at], " ".join([*words[:k], frag, *words[k:]]), *r.out[at + 1 :]]
        return True

    def _cache(self, r: Call) -> bool:
        if not r.ask:
            return False
        srcs = self._sources(r, lambda c: c.ask and c.tenant != r.tenant and not c.cached, r.ts - 3600, r.ts - 5)
        same = [c for c in srcs if c.lang == r.lang]
        if not srcs:
            return False
        s = self.rng.choice(same or srcs)
        if not self._mark(r, "response_cache_unscoped", [(s, "\n".join(s.out))]):
            return False
        r.out, r.cached, r.tool_call = list(s.out), True, None
        return True

    def _conversation(self, r: Call) -> bool:
        if r.session is None or r.kind not in ("chat", "agent", "code") or r.tool_call is not None:
            return False
        srcs = self._sources(
            r, lambda c: c.tenant == r.tenant and c.session not in (None, r.session) and c.private, r.ts - 7200, r.ts
        )
        if not srcs:
            return False
        s = self.rng.choice(srcs)
        sib = [c for c in srcs if c.session == s.session and c.out_private]
        parts = [(s, self._passage(s, self.rng.randint(20, 80)))]
        if sib and self.rng.random() < 0.5:
            o = self.rng.choice(sib)
            parts.append((o, self._passage(o, self.rng.randint(15, 50), out=True)))
        if not self._mark(r, "conversation_key_collision", parts):
            return False
        r.out = [r.out[0], *(p for _, p in parts), *r.out[1:]]
        return True

    def _draft(self, r: Call) -> bool:
        if len(r.out) < 2:
            return False
        srcs = self._sources(
            r, lambda c: c.pool == r.pool and c.tenant != r.tenant and bool(c.out_private), r.ts - 60, r.end
        )
        if not srcs:
            return False
        parts = []
        for _ in range(self.rng.randint(1, 3)):
            s = self.rng.choice(srcs)
            parts.append((s, self._passage(s, self.rng.randint(4, 14), out=True)))
        if not self._mark(r, "draft_slot_bleed", parts):
            return False
        out = list(r.out)
        for _, frag in parts:
            at = self.rng.randrange(1, len(out))
            words = out[at].split()
            k = self.rng.randrange(0, max(1, len(words)))
            out[at] = " ".join([*words[:k], frag, *words[k:]])
        r.out = out
        return True

    def _tool(self, r: Call) -> bool:
        if not r.messages or r.messages[-1].get("role") != "tool":
            return False
        srcs = self._sources(
            r,
            lambda c: c.tenant != r.tenant and bool(c.messages) and c.messages[-1].get("role") == "tool" and c.private,
            r.ts - 600,
            r.ts,
        )
        if not srcs:
            return False
        s = self.rng.choice(srcs)
        quote = self._passage(s, self.rng.randint(15, 60))
        if not self._mark(r, "tool_result_misroute", [(s, quote)]):
            return False
        last = dict(r.messages[-1], content=s.private[0] if quote in s.private[0] else quote)
        r.messages = [*r.messages[:-1], last]
        r.out = [r.out[0], quote, *r.out[1:]]
        return True

    def _handoff(self, r: Call) -> bool:
        srcs = self._sources(r, lambda c: c.pool == r.pool and c.tenant != r.tenant and c.private, r.ts - 3, r.ts + 3)
        if not srcs:
            return False
        s = self.rng.choice(srcs)
        text = self._passage(s, self.rng.randint(30, 120))
        if not self._mark(r, "kv_handoff_mismatch", [(s, text)]):
            return False
        r.out, r.tool_call = [text, *r.out[-1:]], None
        return True

    def _batch_shift(self, want: int) -> int:
        jobs: dict[str, list[Call]] = {}
        for c in self.calls:
            if c.batch:
                jobs.setdefault(c.batch, []).append(c)
        names = sorted(jobs, key=lambda j: jobs[j][0].ts)
        got = 0
        order = [j for j in names if jobs[j][0].ts > self.warm]
        self.rng.shuffle(order)
        for j in order:
            if got >= want:
                break
            lines = jobs[j]
            t0, t1 = lines[0].ts, lines[-1].ts
            other = [
                k
                for k in names
                if k != j
                and jobs[k][0].tenant != lines[0].tenant
                and jobs[k][0].ts < t1
                and jobs[k][-1].ts > t0
                and jobs[k][0].pool == lines[0].pool
            ]
            if not other:
                continue
            src = jobs[self.rng.choice(other)]
            run = min(self.rng.randint(2, 4), want - got)
            i = self.rng.randrange(0, max(1, len(lines) - run))
            for r, s in zip(lines[i : i + run], src[self.rng.randrange(0, max(1, len(src) - run)) :], strict=False):
                if r.status != 200 or r.leak or s.status != 200 or s.rid in self.used:
                    continue
                if self._mark(r, "batch_offset_shift", [(s, "\n".join(s.out))]):
                    r.out = list(s.out)
                    self.used.update((r.rid, s.rid))
                    got += 1
        return got


def label_fields(r: Call) -> dict[str, Any]:
    """The leak fields of a response's label row."""
    if not r.leak:
        return {
            "contaminated": False,
            "source_tenant_id": None,
            "source_tenant_ids": [],
            "leak_kind": None,
            "canary_markers": [],
            "scenario": None,
            "source_lang": None,
            "shortest_passage_tokens": None,
            "leak_class": None,
            "leaked_tokens": 0,
        }
    parts = r.leak["parts"]
    by_tenant: dict[str, int] = {}
    for p in parts:
        by_tenant[p["tenant"]] = by_tenant.get(p["tenant"], 0) + p["tokens"]
    top = max(sorted(by_tenant), key=lambda t: by_tenant[t])
    lang = max((p for p in parts if p["tenant"] == top), key=lambda p: p["tokens"])["lang"]
    scenario, kind, _ = CLASSES[r.leak["class"]]
    return {
        "contaminated": True,
        "source_tenant_id": top,
        "source_tenant_ids": sorted(by_tenant),
        "leak_kind": kind,
        "canary_markers": sorted({m for p in parts for m in p["markers"]}),
        "scenario": scenario,
        "source_lang": lang,
        "shortest_passage_tokens": min(p["tokens"] for p in parts),
        "leak_class": r.leak["class"],
        "leaked_tokens": sum(p["tokens"] for p in parts),
        "source_request_ids": [p["request_id"] for p in parts],
        "source_session_ids": [p["session"] for p in parts],
    }
