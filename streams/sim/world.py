"""The simulated service's world: configuration, cache domains, ground-truth labels and the small state types.

Shared by every traffic profile (streams/sim/profiles.py lists them). Nothing here produces text.
"""

from __future__ import annotations

import random
import re
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

# 2026-08-27T09:00:00Z, inside the incident period.
DEFAULT_START_TS = 1787821200.0
CHARS_PER_TOKEN = 4
# Probe accounts: canary events are accepted only from tenants matching detection.canary_tenants ("probe-*").
PROBES = ("probe-canary-a", "probe-canary-b")
MARKER_PREFIX = "CTK-CANARY-"
MARKER_HEX_DIGITS = 32  # 128 random bits; the contract asks for >= 96
# The marker as the detector sees it: consecutive normalised words ctk, canary, <hex>.
MARKER_IN_TEXT = re.compile(r"(?<!\w)ctk[^\w]+canary[^\w]+([0-9a-f]{" + str(MARKER_HEX_DIGITS) + r"})(?!\w)")
# Default fault onset as a share of the run when none is given: `--duration 300` still makes an incident.
FAULT_SHARE = 0.5

Profile = Literal["stdlib-code", "multilingual"]
PROFILES: tuple[str, ...] = ("stdlib-code", "multilingual")


def new_marker(rng: random.Random) -> str:
    return f"{MARKER_PREFIX}{rng.getrandbits(4 * MARKER_HEX_DIGITS):0{MARKER_HEX_DIGITS}x}"


def markers_in(text: str) -> set[str]:
    return {MARKER_PREFIX + m for m in MARKER_IN_TEXT.findall(text.lower())}


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
    # Second bug class (multilingual profile): after onset, this share of the pool's answers carries stale
    # page fragments of other tenants with no mechanism symptom (a prefix-cache / page-table mix-up).
    stale_page_rate: float = 0.0


INCIDENT_CAPACITY = 681_280
INCIDENT_WINDOW = 1_048_576

DEFAULT_DOMAINS: tuple[CacheDomain, ...] = (
    CacheDomain("glm53-pd-1", "glm-5.3", "glm53-pd", INCIDENT_CAPACITY, INCIDENT_WINDOW, 2_621_440, True, 0.35),
    CacheDomain("glm53-pd-2", "glm-5.3", "glm53-pd", INCIDENT_CAPACITY, INCIDENT_WINDOW, 2_621_440, True, 0.35),
    # Large enough that every prompt within the window fits: the fault can never trigger here.
    CacheDomain("glm53-big-1", "glm-5.3", "glm53-big", 2_097_152, INCIDENT_WINDOW, 4_194_304, False, 0.30),
)

MULTILINGUAL_DOMAINS: tuple[CacheDomain, ...] = (
    CacheDomain("glm53-pd-1", "glm-5.3", "glm53-pd", INCIDENT_CAPACITY, INCIDENT_WINDOW, 2_621_440, True, 0.25),
    CacheDomain("glm53-pd-2", "glm-5.3", "glm53-pd", INCIDENT_CAPACITY, INCIDENT_WINDOW, 2_621_440, True, 0.20),
    CacheDomain("glm53-big-1", "glm-5.3", "glm53-big", 2_097_152, INCIDENT_WINDOW, 4_194_304, False, 0.25),
    # The prefix-cache deployment: every prompt fits, accounting and TTFT stay right; pages get mixed up.
    CacheDomain("glm53-pc-1", "glm-5.3", "glm53-pc", 2_097_152, INCIDENT_WINDOW, 4_194_304, False, 0.30, 0.10),
)


@dataclass(frozen=True)
class SimConfig:
    seed: int = 7
    duration_s: float = 1200.0
    rate: float = 4.0  # regular tenants' requests per second (probes come on top)
    tenants: int = 24
    # Fault onset in seconds after start; "auto": FAULT_SHARE of the duration; None: the fault never happens.
    fault_at_s: float | Literal["auto"] | None = "auto"
    max_prompt_text_chars: int = 60_000
    start_ts: float = DEFAULT_START_TS
    domains: tuple[CacheDomain, ...] | None = None  # None: the profile's own
    probe_interval_s: float = 8.0  # mean gap between one probe account's requests
    probe_overlong_every: int = 3  # every n-th probe request is over-long
    cache_domain_share: float = 0.5  # requests whose gateway event knows the cache domain
    stats_interval_s: float = 5.0
    tail_share: float = 0.03  # share of regular prompts drawn from the 300k..1.2M-token tail
    profile: str = "stdlib-code"

    @property
    def fault_offset_s(self) -> float | None:
        return self.duration_s * FAULT_SHARE if self.fault_at_s == "auto" else self.fault_at_s

    @property
    def cache_domains(self) -> tuple[CacheDomain, ...]:
        if self.domains is not None:
            return self.domains
        return MULTILINGUAL_DOMAINS if self.profile == "multilingual" else DEFAULT_DOMAINS


@dataclass
class Labels:
    """Ground truth. `to_dict()` is the labels.json shape; `leaks` is per-passage detail (leaks.jsonl)."""

    meta: dict[str, Any]
    responses: list[dict[str, Any]] = field(default_factory=list)
    leaks: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"meta": self.meta, "responses": self.responses}


class Page(NamedTuple):
    """A freed KV page run: private text of a finished request, which the faulty paths read back."""

    text: str
    tenant_id: str
    session_id: str
    request_id: str
    lang: str = "code"


class Block(NamedTuple):
    text: str
    private: bool  # content that identifies its owner (goes to freed pages)


@dataclass
class Tenant:
    tenant_id: str
    system_prompt: str
    repo: list[int]  # corpus file indices, private to this tenant
    weight: float
    sessions: list[Session] = field(default_factory=list)
    probe_files: list[int] = field(default_factory=list)
    lang: str = "code"  # dominant language: zh, ja, de, en or code
    entities: dict[str, list[str]] = field(default_factory=dict)  # the tenant's own names, companies, places


@dataclass
class Session:
    session_id: str
    tenant: Tenant
    domain: CacheDomain
    files: list[int]
    turns_left: int
    history: deque[str] = field(default_factory=lambda: deque(maxlen=6))
    marker: str | None = None
    turn: int = 0
    docs: list[str] = field(default_factory=list)  # private documents the session works on (multilingual)
    # Answers on their way to the client: (event time they arrive, text). Only an answer that has arrived
    # can be re-sent in a later turn; a turn sent while the last answer is still streaming cannot hold it.
    arriving: list[tuple[float, str]] = field(default_factory=list)

    def receive(self, t: float) -> None:
        """Answers that reached the client by `t` join the history it re-sends."""
        if self.arriving and min(a[0] for a in self.arriving) <= t:
            ready = sorted(a for a in self.arriving if a[0] <= t)
            self.arriving = [a for a in self.arriving if a[0] > t]
            self.history.extend(text for _, text in ready)


@dataclass
class Active:
    arrival: float
    prefill_end: float
    end: float
    in_tokens: int
    out_tokens: int


@dataclass
class DomainState:
    domain: CacheDomain
    pages: deque[Page] = field(default_factory=lambda: deque(maxlen=512))
    active: list[Active] = field(default_factory=list)
    retained: float = 0.0  # prefix cache kept after prefill, evicted over time
    evicted_total: float = 0.0
    last_tick: float | None = None


@dataclass
class Pending:
    """A response waiting for its completion time, with what its completion frees."""

    event: dict[str, Any]
    label: dict[str, Any]
    pages: list[Page]
    domain: str
