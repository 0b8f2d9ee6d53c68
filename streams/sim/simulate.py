"""Deterministic traffic model of a multi-tenant, prefill/decode-disaggregated inference service.

It replays the shape of the Aug–Sep 2026 GLM-5.3 incident: prompts longer than the prefill KV pool
(681,280 tokens) but within the advertised context window (1,048,576) were swapped for a one-token
placeholder and still decoded; the decoder read stale KV pages of earlier requests on the same pool and
returned their content with HTTP 200, input_tokens=1 and a collapsed time-to-first-token.

What is modelled, and why:
- Texts are real Python source from the interpreter's standard library (sorted by path, picked with the
  seeded RNG), so detectors face code, docstrings and comments rather than uniform filler. Files that share
  any 16-word passage with an earlier file are dropped, so that tenants' private repositories are truly
  private and every cross-tenant overlap in clean traffic is a deliberate decoy (shared system prompts,
  popular files, stock phrases), never an accident of the corpus.
- Each cache domain keeps a queue of recently freed "pages" (text chunks of finished requests' private
  content, with their owner). Freed pages keep their content, which is exactly what the faulty path reads.
- Every random choice about a request comes from an RNG seeded by (seed, request number), so a run with
  `--no-fault` has the very same traffic and differs only in the answers to over-long prompts.
- Events are produced in event-time order from a heap of pending completions; nothing but small per-session
  state and the label rows is kept, so memory stays bounded whatever the duration.
"""

from __future__ import annotations

import argparse
import functools
import gzip
import heapq
import itertools
import math
import random
import re
import sys
import sysconfig
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

import orjson

# 2026-08-27T09:00:00Z, inside the incident period.
DEFAULT_START_TS = 1787821200.0
CHARS_PER_TOKEN = 4
PROBES = ("probe-canary-a", "probe-canary-b")
MARKER_PREFIX = "CTK-CANARY-"


@dataclass(frozen=True)
class CacheDomain:
    """One KV-cache pool (a prefill/decode pair) of a deployment."""

    name: str
    model: str
    deployment: str
    capacity_tokens: int  # prefill pool
    context_window: int  # advertised to clients
    decode_capacity_tokens: int
    fault_prone: bool  # runs the faulty placeholder path once the fault is switched on
    weight: float  # share of sessions routed here


INCIDENT_CAPACITY = 681_280
INCIDENT_WINDOW = 1_048_576

DEFAULT_DOMAINS: tuple[CacheDomain, ...] = (
    CacheDomain("glm53-pd-1", "glm-5.3", "glm53-pd", INCIDENT_CAPACITY, INCIDENT_WINDOW, 2_621_440, True, 0.35),
    CacheDomain("glm53-pd-2", "glm-5.3", "glm53-pd", INCIDENT_CAPACITY, INCIDENT_WINDOW, 2_621_440, True, 0.35),
    # Large enough that every prompt within the window fits: the fault can never trigger here.
    CacheDomain("glm53-big-1", "glm-5.3", "glm53-big", 2_097_152, INCIDENT_WINDOW, 4_194_304, False, 0.30),
)


@dataclass(frozen=True)
class SimConfig:
    seed: int = 7
    duration_s: float = 1200.0
    rate: float = 4.0  # regular tenants' requests per second (probes come on top)
    tenants: int = 24
    fault_at_s: float | None = 600.0  # None: the fault never happens
    max_prompt_text_chars: int = 60_000
    start_ts: float = DEFAULT_START_TS
    domains: tuple[CacheDomain, ...] = DEFAULT_DOMAINS
    probe_interval_s: float = 8.0  # mean gap between one probe account's requests
    probe_overlong_every: int = 3  # every n-th probe request is over-long
    cache_domain_share: float = 0.5  # requests whose gateway event knows the cache domain
    stats_interval_s: float = 5.0
    tail_share: float = 0.03  # share of regular prompts drawn from the 300k..1.2M-token tail


@dataclass
class Labels:
    """Ground truth. `to_dict()` is the labels.json shape; `leaks` is per-passage detail (leaks.jsonl)."""

    meta: dict[str, Any]
    responses: list[dict[str, Any]] = field(default_factory=list)
    leaks: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"meta": self.meta, "responses": self.responses}


# --------------------------------------------------------------------------------------------------
# Shared texts. Stock phrases are said by the assistant to every tenant; the long ones are ≥ 16 words on
# purpose, so a detector that does not discount text common to many tenants raises false alarms on them.

SYSTEM_HEADERS = (
    "You are an autonomous coding agent working inside the user's repository. Read files before you edit "
    "them, keep changes minimal and focused on the task, never invent APIs that do not exist in the code "
    "base, and explain every change in one or two sentences. When a command fails, show the error and "
    "propose a fix instead of retrying blindly. The following project conventions apply to all answers.",
    "You are a senior Python engineer pair-programming with the user. Prefer the standard library over new "
    "dependencies, write type hints for every public function, keep functions short, and add a regression "
    "test for every bug you fix. Answer with a unified diff when you change code and with prose otherwise. "
    "Use the style of the reference module below for naming, docstrings and error handling.",
    "You are a code review assistant. For each change, list correctness problems first, then security "
    "issues, then performance, then style. Quote the exact lines you comment on, give a concrete "
    "suggestion for each finding, and say clearly when you found nothing. Do not rewrite working code for "
    "taste. The reference material below describes the idioms this team expects to see.",
    "You are a terminal assistant for a developer. You can run shell commands, read and write files, and "
    "search the code base. Think step by step, run the tests after each edit, and stop when the tests pass. "
    "Never delete files outside the working tree and never push to remote branches without asking first. "
    "Background documentation for the project follows.",
)

OPENINGS = (
    "Here is the updated function:",
    "Sure! Let me take a look at the code first.",
    "I'll start by reading the relevant files.",
    "Good catch, the problem is in the code below.",
    "I looked through the module and found the cause.",
    "Let me walk you through the change step by step.",
)
BEFORE_CODE = (
    "Here is the updated function:",
    "The relevant part is this block:",
    "This is the code in question:",
    "Here is the fixed version:",
)
CLOSINGS = (
    "Let me know if you want me to add tests for this.",
    "I have made the requested changes. Please review the diff below carefully and run the full test suite "
    "before merging it into the main branch.",
    "This keeps the public interface unchanged, so existing callers do not need to be modified and the "
    "behaviour stays backwards compatible with older releases of the library.",
    "Run the tests again and tell me if anything still fails.",
    "If you want, I can also update the documentation to describe the new behaviour in more detail.",
)
USER_TEMPLATES = (
    "Refactor `{func}` in {file} so that it is easier to test.",
    "Why does `{func}` in {file} fail when the input is empty? Please fix it.",
    "Add type hints to `{func}` in {file} and keep the behaviour identical.",
    "Write a unit test for `{func}` from {file}.",
    "Explain what `{func}` in {file} does and where it is called from.",
    "The CI job fails in {file} near `{func}`. Find the bug and propose a patch.",
    "Can you make `{func}` in {file} faster? It shows up in the profile.",
    "Rename `{func}` in {file} to something clearer and update all callers.",
)

_WORD = re.compile(r"\w+")
_DEF = re.compile(r"^[ \t]*(?:async[ \t]+)?def[ \t]+(\w+)", re.MULTILINE)
_COMMENT = re.compile(r"^[ \t]*#[ \t]?(.+)$", re.MULTILINE)
# The marker as the detector sees it: consecutive normalised words ctk, canary, <hex>.
_MARKER_IN_TEXT = re.compile(r"(?<!\w)ctk[^\w]+canary[^\w]+([0-9a-f]{16})(?!\w)")
_EXCLUDED = re.compile(
    r"/(?:site-packages|dist-packages|test|tests|idle_test|__pycache__|encodings|lib2to3|pydoc_data|turtledemo|"
    r"ensurepip|config-[^/]*)/|/_sysconfigdata"
)


def words_of(text: str) -> list[str]:
    """Normalised words, as the detector counts them."""
    return _WORD.findall(text.lower())


# --------------------------------------------------------------------------------------------------
# Corpus


@dataclass(frozen=True)
class _File:
    path: str  # relative to the stdlib directory
    text: str
    funcs: tuple[str, ...]


@dataclass(frozen=True)
class _Corpus:
    files: tuple[_File, ...]
    chain: dict[str, tuple[str, ...]]  # order-1 word chain for fresh prose
    starters: tuple[str, ...]


@functools.lru_cache(maxsize=1)
def _corpus() -> _Corpus:
    root = Path(sysconfig.get_paths()["stdlib"])
    paths = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.py"))
    seen: set[int] = set()
    files: list[_File] = []
    comments: list[str] = []
    for rel in paths:
        if _EXCLUDED.search("/" + rel):
            continue
        try:
            text = (root / rel).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        comments.extend(m.group(1) for m in _COMMENT.finditer(text))
        if not 3_000 <= len(text) <= 400_000:
            continue
        words = words_of(text)
        # Python's tuple hash is salted per process, but a 64-bit collision among a few million
        # shingles is so unlikely that the selection is the same in every run.
        shingles = {hash(tuple(words[i : i + 16])) for i in range(len(words) - 15)}
        if shingles & seen:
            continue
        seen |= shingles
        funcs = tuple(dict.fromkeys(f for f in _DEF.findall(text) if not f.startswith("__")))
        files.append(_File(rel, text, funcs or ("main",)))
    nexts: dict[str, list[str]] = {}
    starters: list[str] = []
    for line in comments:
        toks = [t for t in line.split() if t.isascii() and any(c.isalpha() for c in t) and len(t) < 24]
        for a, b in itertools.pairwise(toks):
            nexts.setdefault(a, []).append(b)
        if toks and toks[0][0].isupper() and len(toks) >= 5:
            starters.append(toks[0])
    chain = {k: tuple(v) for k, v in nexts.items()}
    return _Corpus(tuple(files), chain, tuple(dict.fromkeys(starters)) or ("The",))


def _prose(rng: random.Random, corpus: _Corpus, sentences: int) -> str:
    """Fresh text: sentences from an order-1 word chain over stdlib comments.

    Order 1 keeps long verbatim runs of the corpus (and between two outputs) practically impossible,
    so fresh text never creates overlap a detector could mistake for a leak.
    """
    out = []
    for _ in range(sentences):
        word = rng.choice(corpus.starters)
        toks = [word]
        target = rng.randint(8, 22)
        while len(toks) < target:
            follow = corpus.chain.get(word)
            word = rng.choice(follow) if follow else rng.choice(corpus.starters).lower()
            toks.append(word)
            if word.endswith(".") and len(toks) >= 6:
                break
        sentence = " ".join(toks).rstrip(".,;:")
        out.append(sentence[0].upper() + sentence[1:] + ".")
    return " ".join(out)


def _length_class(words: int) -> str:
    """Passage length relative to the detector's guarantee of 16 words."""
    return "short" if words < 16 else "threshold" if words <= 24 else "medium" if words < 50 else "long"


def _window(rng: random.Random, text: str, chars: int) -> str:
    """A slice of about `chars` characters starting and ending at line boundaries."""
    if len(text) <= chars:
        return text
    start = rng.randrange(0, len(text) - chars)
    nl = text.rfind("\n", 0, start)
    start = nl + 1 if nl >= 0 else 0
    end = text.find("\n", start + chars)
    return text[start : end if end >= 0 else len(text)]


def _head(text: str, chars: int) -> str:
    """The first `chars` characters, cut back to a line end when there is one."""
    if len(text) <= chars:
        return text
    cut = text.rfind("\n", 0, chars)
    return text[: cut if cut > chars // 2 else chars]


# --------------------------------------------------------------------------------------------------
# World state


class _Page(NamedTuple):
    text: str
    tenant_id: str
    session_id: str
    request_id: str


class _Block(NamedTuple):
    text: str
    private: bool  # content that identifies its owner (goes to freed pages)


@dataclass
class _Tenant:
    tenant_id: str
    system_prompt: str
    repo: list[int]  # corpus file indices, private to this tenant
    weight: float
    sessions: list[_Session] = field(default_factory=list)
    probe_files: list[int] = field(default_factory=list)


@dataclass
class _Session:
    session_id: str
    tenant: _Tenant
    domain: CacheDomain
    files: list[int]
    turns_left: int
    history: deque[str] = field(default_factory=lambda: deque(maxlen=6))
    marker: str | None = None
    turn: int = 0


@dataclass
class _Active:
    arrival: float
    prefill_end: float
    end: float
    in_tokens: int
    out_tokens: int


@dataclass
class _DomainState:
    domain: CacheDomain
    pages: deque[_Page] = field(default_factory=lambda: deque(maxlen=512))
    active: list[_Active] = field(default_factory=list)
    retained: float = 0.0  # prefix cache kept after prefill, evicted over time
    evicted_total: float = 0.0
    last_tick: float | None = None


@dataclass
class _Pending:
    """A response waiting for its completion time, with what its completion frees."""

    event: dict[str, Any]
    label: dict[str, Any]
    pages: list[_Page]
    domain: str


class _Simulator:
    def __init__(self, config: SimConfig) -> None:
        if config.duration_s <= 0 or config.rate < 0 or config.tenants < 1:
            raise ValueError("duration_s must be > 0, rate >= 0, tenants >= 1")
        self.cfg = config
        self.corpus = _corpus()
        self.seq = 0
        self.n_requests = 0
        self.heap: list[tuple[float, int, object]] = []
        self.domains = {d.name: _DomainState(d) for d in config.domains}
        self.markers: dict[str, str] = {}  # marker -> owner tenant
        self.fault_onset = None if config.fault_at_s is None else config.start_ts + config.fault_at_s
        self.horizon = config.start_ts + config.duration_s
        self.last_ts = config.start_ts
        self.arr_rng = random.Random(f"{config.seed}:arrivals")
        self._build_world(random.Random(f"{config.seed}:world"))
        fault_domains = [d.name for d in config.domains if d.fault_prone] if self.fault_onset is not None else []
        self.labels = Labels(
            meta={
                "seed": config.seed,
                "fault_onset_ts": self.fault_onset,
                "fault_domains": fault_domains,
                "start_ts": config.start_ts,
                "end_ts": self.horizon,
                "capacity": {d.name: d.capacity_tokens for d in config.domains},
                "context_window": {d.name: d.context_window for d in config.domains},
                "tenants": [t.tenant_id for t in self.tenants],
                "probes": [p.tenant_id for p in self.probes],
            }
        )

    # -- world ----------------------------------------------------------------------------------

    def _build_world(self, rng: random.Random) -> None:
        cfg = self.cfg
        order = list(range(len(self.corpus.files)))
        rng.shuffle(order)
        n_sys = len(SYSTEM_HEADERS)
        sys_files, order = order[:n_sys], order[n_sys:]
        # A few moderately sized "vendored" files that many tenants paste: they become common (seen in
        # several tenants) quickly, as popular open-source code does in real traffic.
        self.popular = [i for i in order if 4_000 <= len(self.corpus.files[i].text) <= 16_000][:6]
        order = [i for i in order if i not in self.popular]
        probe_files, order = order[: 2 * len(PROBES)], order[2 * len(PROBES) :]
        self.system_prompts = [
            f"{header}\n\n# Reference: {self.corpus.files[f].path}\n{_window(rng, self.corpus.files[f].text, 2_500)}\n"
            for header, f in zip(SYSTEM_HEADERS, sys_files, strict=True)
        ]
        # Skewed popularity of system prompts, but with a floor, so each is used by several tenants.
        sys_weights = [0.4, 0.3, 0.2, 0.1][:n_sys]
        self.tenants = []
        for i in range(cfg.tenants):
            sp = i % n_sys if i < 2 * n_sys else rng.choices(range(n_sys), sys_weights)[0]
            self.tenants.append(
                _Tenant(
                    tenant_id=f"tenant-{i + 1:03d}",
                    system_prompt=self.system_prompts[sp],
                    repo=[],
                    weight=rng.lognormvariate(0.0, 0.8),
                )
            )
        # Deal the remaining files round-robin; with more tenants than files repos wrap and overlap.
        per = max(2, min(24, len(order) // cfg.tenants))
        for i, t in enumerate(self.tenants):
            t.repo = [order[(i * per + j) % len(order)] for j in range(per)]
        self.probes = []
        for i, name in enumerate(PROBES):
            p = _Tenant(name, "", [], 0.0, probe_files=probe_files[2 * i : 2 * i + 2])
            self.probes.append(p)
        self.probe_rngs = [random.Random(f"{cfg.seed}:probe:{p.tenant_id}") for p in self.probes]
        self.probe_session_count = [0] * len(self.probes)
        self.tenant_weights = [t.weight for t in self.tenants]
        self.fault_prone = [d for d in cfg.domains if d.fault_prone]

    # -- helpers ----------------------------------------------------------------------------------

    def _push(self, ts: float, item: object) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (ts, self.seq, item))

    def _event_id(self) -> str:
        self.seq += 1
        return f"ev-{self.cfg.seed}-{self.seq:09d}"

    def _flush(self, until: float) -> Iterator[dict[str, Any]]:
        while self.heap and self.heap[0][0] <= until:
            ts, _, item = heapq.heappop(self.heap)
            self.last_ts = ts
            if isinstance(item, _Pending):
                self.domains[item.domain].pages.extend(item.pages)
                self.labels.responses.append(item.label)
                yield item.event
            else:
                assert isinstance(item, dict)
                yield item

    # -- main loop --------------------------------------------------------------------------------

    def events(self) -> Iterator[dict[str, Any]]:
        cfg = self.cfg
        next_tick = cfg.start_ts
        next_arrival = cfg.start_ts + self.arr_rng.expovariate(cfg.rate) if cfg.rate > 0 else math.inf
        next_probe = [cfg.start_ts + r.uniform(0.5, cfg.probe_interval_s) for r in self.probe_rngs]
        while True:
            t = min(next_tick, next_arrival, *next_probe)
            if t >= self.horizon:
                break
            yield from self._flush(t)
            if t == next_tick:
                self._tick(t)
                next_tick += cfg.stats_interval_s
            elif t == next_arrival:
                self._regular_request(t)
                next_arrival += self.arr_rng.expovariate(cfg.rate)
            else:
                i = next_probe.index(t)
                self._probe_request(i, t)
                next_probe[i] += self.probe_rngs[i].expovariate(1.0 / cfg.probe_interval_s)
        yield from self._flush(math.inf)
        self.labels.meta["end_ts"] = max(self.horizon, self.last_ts)

    # -- cache stats ------------------------------------------------------------------------------

    def _tick(self, t: float) -> None:
        ts = round(t, 6)
        for st in self.domains.values():
            d = st.domain
            dt = 0.0 if st.last_tick is None else t - st.last_tick
            last = -math.inf if st.last_tick is None else st.last_tick
            decay = math.exp(-dt / 8.0)
            st.evicted_total += st.retained * (1.0 - decay)
            st.retained *= decay
            prefill_inflight = 0
            decode_used = 0.0
            for a in st.active:
                if last < a.prefill_end <= t:
                    st.retained += a.in_tokens
                if a.arrival <= t < a.prefill_end:
                    prefill_inflight += a.in_tokens
                elif a.prefill_end <= t < a.end:
                    progress = (t - a.prefill_end) / max(a.end - a.prefill_end, 1e-9)
                    decode_used += a.in_tokens + a.out_tokens * progress
            st.active = [a for a in st.active if a.end >= t]
            over = prefill_inflight + st.retained - d.capacity_tokens
            if over > 0:
                moved = min(over, st.retained)
                st.retained -= moved
                st.evicted_total += moved
            st.last_tick = t
            used = min(d.capacity_tokens, int(prefill_inflight + st.retained))
            base = {"ts": ts, "type": "cache_stats", "cache_domain": d.name, "model": d.model}
            self._push(
                ts,
                {
                    "event_id": self._event_id(),
                    **base,
                    "role": "prefill",
                    "capacity_tokens": d.capacity_tokens,
                    "used_tokens": used,
                    "context_window": d.context_window,
                    "evicted_tokens_total": int(st.evicted_total),
                },
            )
            self._push(
                ts,
                {
                    "event_id": self._event_id(),
                    **base,
                    "role": "decode",
                    "capacity_tokens": d.decode_capacity_tokens,
                    "used_tokens": min(d.decode_capacity_tokens, int(decode_used)),
                },
            )

    # -- traffic ----------------------------------------------------------------------------------

    def _new_session(self, tenant: _Tenant, domain: CacheDomain, rng: random.Random) -> _Session:
        k = min(len(tenant.repo), rng.randint(2, 6))
        files = rng.sample(tenant.repo, k)
        if rng.random() < 0.35:
            files.append(rng.choice(self.popular))
        s = _Session(
            session_id=f"sess-{rng.getrandbits(48):012x}",
            tenant=tenant,
            domain=domain,
            files=files,
            turns_left=1 + int(rng.expovariate(1 / 11)),
        )
        tenant.sessions.append(s)
        return s

    def _regular_request(self, t: float) -> None:
        rng = self.arr_rng
        tenant = rng.choices(self.tenants, self.tenant_weights)[0]
        open_sessions = tenant.sessions
        if open_sessions and (len(open_sessions) >= 4 or rng.random() < 0.85):
            session = rng.choice(open_sessions)
        else:
            domain = rng.choices(self.cfg.domains, [d.weight for d in self.cfg.domains])[0]
            session = self._new_session(tenant, domain, rng)
        self._request(t, session)

    def _probe_request(self, i: int, t: float) -> None:
        probe = self.probes[i]
        rng = self.probe_rngs[i]
        if not probe.sessions:
            # Probe sessions walk the domains round-robin (offset per probe), so every pool gets probed.
            n = self.probe_session_count[i]
            self.probe_session_count[i] += 1
            domain = self.cfg.domains[(n + i) % len(self.cfg.domains)]
            s = _Session(
                session_id=f"sess-{rng.getrandbits(48):012x}",
                tenant=probe,
                domain=domain,
                files=list(probe.probe_files),
                turns_left=6,
                marker=f"{MARKER_PREFIX}{rng.getrandbits(64):016x}",
            )
            probe.sessions.append(s)
            assert s.marker is not None
            self.markers[s.marker] = probe.tenant_id
            self._push(
                round(t, 6),
                {
                    "event_id": self._event_id(),
                    "ts": round(t, 6),
                    "type": "canary",
                    "tenant_id": probe.tenant_id,
                    "marker": s.marker,
                    "session_id": s.session_id,
                },
            )
        self._request(t, probe.sessions[0])

    def _prompt_tokens(self, rng: random.Random, session: _Session) -> int:
        if session.marker is not None:
            if session.turn % self.cfg.probe_overlong_every == self.cfg.probe_overlong_every - 1:
                cap = min(d.capacity_tokens for d in self.cfg.domains)
                window = session.domain.context_window
                return rng.randint(cap + 2_048, max(cap + 2_048, window - 2_048))
            return rng.randint(1_500, 20_000)
        if rng.random() < self.cfg.tail_share:
            return int(math.exp(rng.uniform(math.log(300_000), math.log(1_200_000))))
        return max(150, min(280_000, int(rng.lognormvariate(math.log(6_000), 1.25))))

    # -- prompt -----------------------------------------------------------------------------------

    def _file_block(self, idx: int, marker: str | None) -> str:
        f = self.corpus.files[idx]
        text = f.text
        if marker is not None:
            # Marker every ~10 lines, so any stale page of a probe prompt is likely to carry one.
            lines = text.split("\n")
            text = "\n".join(line if j % 10 else f"# probe reference {marker}\n{line}" for j, line in enumerate(lines))
        return f"### File: {f.path}\n```python\n{text}\n```\n"

    def _user_message(self, rng: random.Random, session: _Session) -> str:
        f = self.corpus.files[rng.choice(session.files)]
        msg = rng.choice(USER_TEMPLATES).format(func=rng.choice(f.funcs), file=f.path)
        msg += " " + _prose(rng, self.corpus, rng.randint(1, 3))
        if session.marker is not None:
            msg = f"Canary check {session.marker}. Keep the reference {session.marker} verbatim in your notes. " + msg
        return f"### User\n{msg}\n"

    def _build_prompt(self, rng: random.Random, session: _Session, budget: int) -> list[_Block]:
        """Blocks of the prompt text, about `budget` characters in all (less only if the repo runs out)."""
        tenant = session.tenant
        user = self._user_message(rng, session)
        system = tenant.system_prompt if session.marker is None else ""
        if budget < len(system) + len(user) + 400:
            # Small side calls (titles, summaries) go without the agent's system prompt.
            room = max(0, budget - len(user) - 1)
            snippet = _window(rng, self.corpus.files[rng.choice(session.files)].text, room) if room > 200 else ""
            blocks = [_Block(user, True)]
            if snippet:
                blocks.insert(0, _Block(snippet[:room] + "\n", session.files[0] not in self.popular))
            return blocks
        room = budget - len(system) - len(user)
        chosen_hist: list[str] = []
        for h in reversed(session.history):
            if len(h) > room * 0.5:
                break
            chosen_hist.insert(0, h)
            room -= len(h)
        file_blocks: list[_Block] = []
        extra = [f for f in tenant.repo if f not in session.files]
        rng.shuffle(extra)
        more_popular = [f for f in self.popular if f not in session.files]
        candidates = session.files + (extra if session.marker is None else []) + rng.sample(more_popular, 2)
        for idx in candidates:
            if room < 300:
                break
            block = self._file_block(idx, session.marker)
            if len(block) > room:
                block = _head(block, room - 5) + "\n```\n"
            file_blocks.append(_Block(block, idx not in self.popular))
            room -= len(block)
        blocks = [_Block(system, False)] if system else []
        # History repeats earlier answers, which may quote shared files and stock phrases; their private
        # parts were already freed as pages when those answers completed, so history is not private here.
        return blocks + file_blocks + [_Block(h, False) for h in chosen_hist] + [_Block(user, True)]

    # -- output -----------------------------------------------------------------------------------

    def _clean_output(self, rng: random.Random, blocks: list[_Block]) -> tuple[str, list[str]]:
        """Assistant answer: stock phrases, quotes of its own (included) prompt, fresh prose.

        Returns the text and its private parts (what a freed page of this output may hold).
        """
        parts = [rng.choice(OPENINGS)]
        private: list[str] = []
        fresh = _prose(rng, self.corpus, rng.randint(1, 4))
        parts.append(fresh)
        private.append(fresh)
        quotable = [b for b in blocks if b.text.startswith("### File") or b.private]
        for _ in range(rng.randint(1, 3) if quotable else 0):
            b = rng.choice(quotable)
            body = b.text.split("\n", 2)[-1] if b.text.startswith("### File") else b.text
            quote = _window(rng, body, rng.randint(200, 1_800)).strip("\n`")
            if not quote.strip():
                continue
            parts.append(f"{rng.choice(BEFORE_CODE)}\n```python\n{quote}\n```")
            if b.private:
                private.append(quote)
            if rng.random() < 0.5:
                more = _prose(rng, self.corpus, rng.randint(1, 3))
                parts.append(more)
                private.append(more)
        parts.append(rng.choice(CLOSINGS))
        return "\n\n".join(parts), private

    def _stale_output(
        self, rng: random.Random, session: _Session, st: _DomainState
    ) -> tuple[str, list[dict[str, Any]]] | None:
        """What the decoder produces from stale pages; None if the pool holds nothing of anyone else."""
        recent = list(st.pages)
        tenant_id = session.tenant.tenant_id
        same_tenant = [p for p in recent if p.tenant_id == tenant_id and p.session_id != session.session_id]
        others = [p for p in recent if p.tenant_id != tenant_id]
        pool = same_tenant if same_tenant and (rng.random() < 0.25 or not others) else others
        if not pool:
            return None
        n = min(len(pool), rng.choices((1, 2, 3, 4), (0.3, 0.35, 0.25, 0.1))[0])
        parts: list[str] = [rng.choice(OPENINGS)] if rng.random() < 0.6 else []
        passages: list[dict[str, Any]] = []
        for page in rng.sample(pool, n):
            spans = [m.span() for m in _WORD.finditer(page.text)]
            if len(spans) < 8:
                continue
            r = rng.random()
            # Mostly long runs (stale pages hold long runs); some right at the detector's 16-word guarantee,
            # a few below it, so recall can be judged by passage length.
            if r < 0.07:
                want = rng.randint(8, 15)
            elif r < 0.22:
                want = rng.randint(16, 24)
            else:
                want = rng.randint(50, 400)
            want = min(want, len(spans))
            s = rng.randrange(0, len(spans) - want + 1)
            text = page.text[spans[s][0] : spans[s + want - 1][1]]
            v = rng.random()
            variant = "verbatim" if v < 0.5 else "lower" if v < 0.7 else "respaced" if v < 0.9 else "lower+respaced"
            shown = text
            if "lower" in variant:
                shown = shown.lower()
            if "respaced" in variant:
                toks = shown.split()
                seps = [rng.choice((" ", "  ", "\n", " \n  ", "   ")) for _ in toks[1:]]
                shown = toks[0] + "".join(sep + tok for sep, tok in zip(seps, toks[1:], strict=True))
            parts.append(shown)
            if rng.random() < 0.3:
                parts.append(_prose(rng, self.corpus, 1))
            passages.append(
                {
                    "words": want,
                    "length_class": _length_class(want),
                    "variant": variant,
                    "source_tenant_id": page.tenant_id,
                    "source_session_id": page.session_id,
                    "source_request_id": page.request_id,
                    "text": shown,
                }
            )
        if not passages:
            return None
        if rng.random() < 0.5:
            parts.append(rng.choice(CLOSINGS))
        return "\n\n".join(parts), passages

    def _pages(self, rng: random.Random, texts: list[str], owner: tuple[str, str, str], limit: int) -> list[_Page]:
        pages = []
        for _ in range(limit):
            text = rng.choice(texts)
            chunk = _window(rng, text, rng.randint(400, 2_800)).strip()
            # A KV page run worth the name; tiny fragments would make "long" leaks that are not.
            if len(_WORD.findall(chunk)) >= 40:
                pages.append(_Page(chunk, *owner))
        return pages

    # -- one request ------------------------------------------------------------------------------

    def _request(self, t: float, session: _Session) -> None:
        cfg = self.cfg
        self.n_requests += 1
        rng = random.Random(f"{cfg.seed}:req:{self.n_requests}")
        tenant = session.tenant
        domain = session.domain
        st = self.domains[domain.name]
        request_id = f"req-{rng.getrandbits(64):016x}"
        prompt_tokens = self._prompt_tokens(rng, session)
        session.turn += 1
        session.turns_left -= 1
        if session.turns_left <= 0:
            tenant.sessions.remove(session)
        budget = min(prompt_tokens * CHARS_PER_TOKEN, cfg.max_prompt_text_chars)
        blocks = self._build_prompt(rng, session, budget)
        prompt_text = "".join(b.text for b in blocks)
        if prompt_tokens * CHARS_PER_TOKEN <= cfg.max_prompt_text_chars:
            # The whole prompt is on the wire, so the gateway's count follows from it.
            prompt_tokens = max(1, math.ceil(len(prompt_text) / CHARS_PER_TOKEN))
        max_out = rng.choice((4_096, 8_192, 16_384, 32_768))
        ts = round(t, 6)
        req: dict[str, Any] = {
            "event_id": self._event_id(),
            "ts": ts,
            "type": "request",
            "request_id": request_id,
            "tenant_id": tenant.tenant_id,
            "model": domain.model,
            "prompt_tokens": prompt_tokens,
            "session_id": session.session_id,
        }
        if rng.random() < cfg.cache_domain_share:
            req["cache_domain"] = domain.name
        req["max_output_tokens"] = max_out
        req["context_window"] = domain.context_window
        req["prompt_text"] = prompt_text
        if session.marker is not None:
            req["canaries"] = [session.marker]
        self._push(ts, req)

        overlong = prompt_tokens > domain.capacity_tokens
        faulty = (
            overlong
            and prompt_tokens <= domain.context_window
            and domain.fault_prone
            and self.fault_onset is not None
            and t >= self.fault_onset
        )
        label: dict[str, Any] = {
            "request_id": request_id,
            "tenant_id": tenant.tenant_id,
            "session_id": session.session_id,
            "cache_domain": domain.name,
            "ts": 0.0,
            "status_code": 200,
            "overlong": overlong,
            "contaminated": False,
            "leak_kind": None,
            "source_tenant_id": None,
            "source_session_id": None,
            "source_request_ids": [],
            "source_tenant_ids": [],
            "leaked_words": 0,
            "shortest_passage_words": None,
            "canary_markers": [],
        }
        resp: dict[str, Any] = {
            "type": "response",
            "request_id": request_id,
            "tenant_id": tenant.tenant_id,
            "model": domain.model,
            "cache_domain": domain.name,
            "session_id": session.session_id,
        }
        pages: list[_Page] = []
        owner = (tenant.tenant_id, session.session_id, request_id)
        if prompt_tokens > domain.context_window or (overlong and not faulty):
            status = 400 if prompt_tokens > domain.context_window or rng.random() < 0.5 else 413
            duration_ms = rng.uniform(3.0, 40.0)
            resp.update(status_code=status, duration_ms=round(duration_ms, 3))
            label["status_code"] = status
        else:
            decode_rate = rng.uniform(40.0, 110.0)
            stale = self._stale_output(rng, session, st) if faulty else None
            if faulty:
                # The one-token placeholder: nothing to prefill, so the first token comes at once.
                in_tokens = 1
                ttft_ms = rng.uniform(20.0, 80.0)
                if stale is None:
                    output = _prose(rng, self.corpus, rng.randint(2, 6))
                else:
                    output, passages = stale
                    self._label_leak(label, tenant.tenant_id, passages, request_id)
                out_tokens = max(1, math.ceil(len(output) / CHARS_PER_TOKEN))
                finish = "stop" if rng.random() < 0.85 else "length"
            else:
                in_tokens = max(1, round(prompt_tokens * (1.0 + rng.uniform(-0.03, 0.03))))
                ttft_ms = prompt_tokens / rng.uniform(20_000.0, 60_000.0) * 1000.0 + rng.uniform(20.0, 90.0)
                output, private = self._clean_output(rng, blocks)
                out_tokens = max(1, math.ceil(len(output) / CHARS_PER_TOKEN))
                finish = rng.choices(("stop", "tool_calls", "length"), (0.65, 0.3, 0.05))[0]
                if domain.fault_prone:
                    prompt_private = [b.text for b in blocks if b.private]
                    n_pages = 8 if session.marker is None else 24  # canary documents are planted densely
                    pages = self._pages(rng, prompt_private, owner, n_pages) if prompt_private else []
                    pages += self._pages(rng, private, owner, 2)
                # Only answers the client could use become history: failed and garbled ones are retried.
                session.history.append(f"### Assistant\n{output}\n")
            duration_ms = ttft_ms + out_tokens / decode_rate * 1000.0
            resp.update(
                status_code=200,
                finish_reason=finish,
                usage={"input_tokens": in_tokens, "output_tokens": out_tokens},
                ttft_ms=round(ttft_ms, 3),
                duration_ms=round(duration_ms, 3),
                output_text=output,
            )
            st.active.append(_Active(t, t + ttft_ms / 1000.0, t + duration_ms / 1000.0, in_tokens, out_tokens))
            found = {MARKER_PREFIX + m for m in _MARKER_IN_TEXT.findall(output.lower())}
            label["canary_markers"] = sorted(
                m for m in found if self.markers.get(m, tenant.tenant_id) != tenant.tenant_id
            )
        done = round(t + resp["duration_ms"] / 1000.0, 6)
        resp["ts"] = done
        resp["event_id"] = self._event_id()
        label["ts"] = done
        self._push(done, _Pending(resp, label, pages, domain.name))

    def _label_leak(self, label: dict[str, Any], victim: str, passages: list[dict[str, Any]], request_id: str) -> None:
        by_tenant: dict[str, int] = {}
        for p in passages:
            by_tenant[p["source_tenant_id"]] = by_tenant.get(p["source_tenant_id"], 0) + p["words"]
        source = max(by_tenant, key=lambda k: by_tenant[k])  # first-seen wins ties: deterministic
        by_session: dict[str, int] = {}
        for p in passages:
            if p["source_tenant_id"] == source:
                by_session[p["source_session_id"]] = by_session.get(p["source_session_id"], 0) + p["words"]
        label.update(
            contaminated=True,
            leak_kind="cross_tenant" if source != victim else "cross_session",
            source_tenant_id=source,
            source_session_id=max(by_session, key=lambda k: by_session[k]),
            source_request_ids=list(dict.fromkeys(p["source_request_id"] for p in passages)),
            # Every tenant whose pages leaked, most words first: a mixed output has several origins.
            source_tenant_ids=sorted(by_tenant, key=lambda k: -by_tenant[k]),
            leaked_words=sum(p["words"] for p in passages),
            shortest_passage_words=min(p["words"] for p in passages),
        )
        for p in passages:
            self.labels.leaks.append({"request_id": request_id, **p})


def iter_simulation(config: SimConfig) -> tuple[Iterator[dict[str, Any]], Labels]:
    """Events as plain dicts in event-time order, and the labels (complete once the iterator is exhausted)."""
    sim = _Simulator(config)
    return sim.events(), sim.labels


def write_simulation(
    out_dir: Path, config: SimConfig, *, gzip_events: bool = False, progress: bool = False
) -> dict[str, Any]:
    """Write out_dir/events.jsonl(.gz), labels.json and leaks.jsonl; return a summary."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    events, labels = iter_simulation(config)
    path = out_dir / ("events.jsonl.gz" if gzip_events else "events.jsonl")
    counts: dict[str, int] = {"request": 0, "response": 0, "cache_stats": 0, "canary": 0}
    raw = path.open("wb")
    # mtime=0: the gzip header would otherwise differ between runs of the same seed.
    sink: BinaryIO | gzip.GzipFile = (
        gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) if gzip_events else raw
    )
    bar = None
    if progress:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        bar = Progress(
            TextColumn("simulating"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"), TimeElapsedColumn()
        )
        bar.start()
        task = bar.add_task("sim", total=config.duration_s)
    try:
        buf: list[bytes] = []
        for n, ev in enumerate(events, 1):
            counts[ev["type"]] += 1
            buf.append(orjson.dumps(ev))
            if len(buf) >= 512:
                sink.write(b"\n".join(buf) + b"\n")
                buf.clear()
            if bar is not None and n % 1000 == 0:
                bar.update(task, completed=min(config.duration_s, ev["ts"] - config.start_ts))
        if buf:
            sink.write(b"\n".join(buf) + b"\n")
    finally:
        if sink is not raw:
            sink.close()
        raw.close()
        if bar is not None:
            bar.update(task, completed=config.duration_s)
            bar.stop()
    (out_dir / "labels.json").write_bytes(orjson.dumps(labels.to_dict(), option=orjson.OPT_INDENT_2))
    (out_dir / "leaks.jsonl").write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in labels.leaks))
    rows = labels.responses
    contaminated = [r for r in rows if r["contaminated"]]
    return {
        "events_path": str(path),
        "labels_path": str(out_dir / "labels.json"),
        "events": sum(counts.values()),
        "bytes": path.stat().st_size,
        "requests": counts["request"],
        "responses": counts["response"],
        "cache_stats": counts["cache_stats"],
        "canaries": counts["canary"],
        "overlong": sum(r["overlong"] for r in rows),
        "overlong_rejected": sum(r["overlong"] and r["status_code"] >= 400 for r in rows),
        "rejected": sum(r["status_code"] >= 400 for r in rows),
        "contaminated": len(contaminated),
        "cross_session": sum(r["leak_kind"] == "cross_session" for r in contaminated),
        "canary_leaks": sum(bool(r["canary_markers"]) for r in rows),
        "fault_onset_ts": labels.meta["fault_onset_ts"],
        "seconds": round(time.monotonic() - started, 2),
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    d = SimConfig()
    parser.add_argument("--out", required=True, type=Path, help="output directory")
    parser.add_argument("--seed", type=int, default=d.seed)
    parser.add_argument("--duration", type=float, default=d.duration_s, help="simulated seconds")
    parser.add_argument("--rate", type=float, default=d.rate, help="requests per second of regular tenants")
    parser.add_argument("--tenants", type=int, default=d.tenants)
    parser.add_argument("--fault-at", type=float, default=d.fault_at_s, help="fault onset, seconds after start")
    parser.add_argument("--no-fault", action="store_true", help="never switch the fault on")
    parser.add_argument("--gzip", action="store_true", help="write events.jsonl.gz")
    parser.add_argument(
        "--max-prompt-chars", type=int, default=d.max_prompt_text_chars, help="prompt_text cut (producer truncation)"
    )


def config_from_args(args: argparse.Namespace) -> SimConfig:
    return SimConfig(
        seed=args.seed,
        duration_s=args.duration,
        rate=args.rate,
        tenants=args.tenants,
        fault_at_s=None if args.no_fault else args.fault_at,
        max_prompt_text_chars=args.max_prompt_chars,
    )


def run(args: argparse.Namespace) -> int:
    summary = write_simulation(args.out, config_from_args(args), gzip_events=args.gzip, progress=sys.stderr.isatty())
    sys.stdout.write(orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode() + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streams.sim.simulate", description=__doc__.split("\n", 1)[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
