"""The discrete-event engine every traffic profile runs on: arrivals, probes, cache statistics, completions.

- Every random choice about a request comes from an RNG seeded by (seed, request number), so a run with
  `--no-fault` has the very same traffic and differs only in the faulty answers.
- Each cache domain keeps a queue of recently freed "pages" (private text of finished requests, with their
  owner). Freed pages keep their content, which is exactly what a faulty path reads back.
- Events are produced in event-time order from a heap of pending completions; nothing but small
  per-session state and the label rows is kept, so memory stays bounded whatever the duration.

A profile subclasses `Engine` and supplies the world (`_build_world`), sessions (`_new_session`) and
requests (`_request`).
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Iterator
from typing import Any

from streams.sim.tokens import approx_tokens
from streams.sim.world import (
    PROBES,
    Active,
    CacheDomain,
    DomainState,
    Labels,
    Page,
    Pending,
    Session,
    SimConfig,
    Tenant,
    markers_in,
    new_marker,
)


class Engine:
    profile = "base"

    def __init__(self, config: SimConfig) -> None:
        if config.duration_s <= 0 or config.rate < 0 or config.tenants < 1:
            raise ValueError("duration_s must be > 0, rate >= 0, tenants >= 1")
        self.cfg = config
        self.cache_domains = config.cache_domains
        self.seq = 0
        self.n_requests = 0
        self.heap: list[tuple[float, int, object]] = []
        self.domains = {d.name: DomainState(d) for d in self.cache_domains}
        self.markers: dict[str, str] = {}  # marker -> owner tenant
        offset = config.fault_offset_s
        self.fault_onset = None if offset is None else config.start_ts + offset
        self.horizon = config.start_ts + config.duration_s
        self.last_ts = config.start_ts
        self.arr_rng = random.Random(f"{config.seed}:arrivals")
        self.tenants: list[Tenant] = []
        self.probes = [Tenant(name, "", [], 0.0, lang="en") for name in PROBES]
        self._build_world(random.Random(f"{config.seed}:world"))
        self.probe_rngs = [random.Random(f"{config.seed}:probe:{p.tenant_id}") for p in self.probes]
        self.probe_session_count = [0] * len(self.probes)
        self.tenant_weights = [t.weight for t in self.tenants]
        self.lang_of = {t.tenant_id: t.lang for t in [*self.tenants, *self.probes]}
        on = self.fault_onset is not None
        fault_domains = [d.name for d in self.cache_domains if d.fault_prone] if on else []
        stale_domains = [d.name for d in self.cache_domains if d.stale_page_rate > 0] if on else []
        self.labels = Labels(
            meta={
                "seed": config.seed,
                "profile": self.profile,
                "fault_onset_ts": self.fault_onset,
                "fault_domains": fault_domains,
                # Domains of the second bug class (stale page fragments, no mechanism symptom).
                "content_only_domains": stale_domains,
                "start_ts": config.start_ts,
                "end_ts": self.horizon,
                "capacity": {d.name: d.capacity_tokens for d in self.cache_domains},
                "context_window": {d.name: d.context_window for d in self.cache_domains},
                "tenants": [t.tenant_id for t in self.tenants],
                "tenant_langs": {t.tenant_id: t.lang for t in [*self.tenants, *self.probes]},
                "probes": [p.tenant_id for p in self.probes],
            }
        )

    # -- hooks ------------------------------------------------------------------------------------

    def _build_world(self, rng: random.Random) -> None:
        raise NotImplementedError

    def _new_session(self, tenant: Tenant, domain: CacheDomain, rng: random.Random) -> Session:
        raise NotImplementedError

    def _new_probe_session(self, probe: Tenant, domain: CacheDomain, rng: random.Random, marker: str) -> Session:
        raise NotImplementedError

    def _request(self, t: float, session: Session) -> None:
        raise NotImplementedError

    def _answered(
        self,
        t: float,
        st: DomainState,
        resp: dict[str, Any],
        label: dict[str, Any],
        tenant_id: str,
        output: str,
        finish: str,
        in_tokens: int,
        out_tokens: int,
        ttft_ms: float,
        duration_ms: float,
    ) -> None:
        """A 2xx answer: the response's figures, its load on the domain, and the foreign markers it carries."""
        resp.update(
            status_code=200,
            finish_reason=finish,
            usage={"input_tokens": in_tokens, "output_tokens": out_tokens},
            ttft_ms=round(ttft_ms, 3),
            duration_ms=round(duration_ms, 3),
            output_text=output,
        )
        st.active.append(Active(t, t + ttft_ms / 1000.0, t + duration_ms / 1000.0, in_tokens, out_tokens))
        label["canary_markers"] = self._foreign_markers(output, tenant_id)

    def _respond(
        self,
        t: float,
        session: Session,
        resp: dict[str, Any],
        label: dict[str, Any],
        pages: list[Page],
        answer: str | None,
    ) -> None:
        """The response arrives `duration_ms` after its request; only then can the client re-send its answer."""
        done = round(t + resp["duration_ms"] / 1000.0, 6)
        if answer is not None:
            session.arriving.append((done, answer))
        resp["ts"] = done
        resp["event_id"] = self._event_id()
        label["ts"] = done
        self._push(done, Pending(resp, label, pages, session.domain.name))

    # -- helpers ----------------------------------------------------------------------------------

    def _begin_request(self, t: float, session: Session) -> tuple[random.Random, str]:
        """A request of `session` at `t`: the answers that reached the client by then join the history it re-sends;
        returns the request's own random stream (from the run's seed and the request's number, so one profile's draws
        never shift another's) and its id, the stream's first draw."""
        session.receive(t)
        self.n_requests += 1
        rng = random.Random(f"{self.cfg.seed}:req:{self.n_requests}")
        return rng, f"req-{rng.getrandbits(64):016x}"

    @staticmethod
    def _take_turn(session: Session) -> None:
        """One turn of the session used; its last one ends it."""
        session.turn += 1
        session.turns_left -= 1
        if session.turns_left <= 0:
            session.tenant.sessions.remove(session)

    def _push_request(
        self,
        rng: random.Random,
        t: float,
        session: Session,
        request_id: str,
        prompt_text: str,
        prompt_tokens: int,
        max_out: int | tuple[int, ...],
    ) -> None:
        """The request event as the gateway writes it (a share of them name their cache domain). `max_out`: the
        request's max_tokens, or the values it is drawn from after the cache-domain draw (each profile keeps its own
        order of draws, so that a seed gives the traffic it always gave)."""
        ts = round(t, 6)
        req: dict[str, Any] = {
            "event_id": self._event_id(),
            "ts": ts,
            "type": "request",
            "request_id": request_id,
            "tenant_id": session.tenant.tenant_id,
            "model": session.domain.model,
            "prompt_tokens": prompt_tokens,
            "session_id": session.session_id,
        }
        if rng.random() < self.cfg.cache_domain_share:
            req["cache_domain"] = session.domain.name
        req["max_output_tokens"] = rng.choice(max_out) if isinstance(max_out, tuple) else max_out
        req["context_window"] = session.domain.context_window
        req["prompt_text"] = prompt_text
        if session.marker is not None:
            req["canaries"] = [session.marker]
        self._push(ts, req)

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
            if isinstance(item, Pending):
                self.domains[item.domain].pages.extend(item.pages)
                self.labels.responses.append(item.label)
                yield item.event
            else:
                assert isinstance(item, dict)
                yield item

    def _label(self, request_id: str, session: Session, overlong: bool) -> dict[str, Any]:
        """A clean label row; `_label_leak` turns it into a contaminated one."""
        return {
            "request_id": request_id,
            "tenant_id": session.tenant.tenant_id,
            "session_id": session.session_id,
            "cache_domain": session.domain.name,
            "ts": 0.0,
            "status_code": 200,
            "overlong": overlong,
            "contaminated": False,
            # mechanism | content_only for contaminated rows; clean | decoy otherwise.
            "scenario": "clean",
            "decoys": [],  # kinds of shared/public text in this exchange (decoy rows)
            "receiver_lang": session.tenant.lang,
            "source_lang": None,
            "source_langs": [],
            "leak_kind": None,
            "source_tenant_id": None,
            "source_session_id": None,
            "source_request_ids": [],
            "source_tenant_ids": [],
            "leaked_words": 0,
            "leaked_tokens": 0,
            "shortest_passage_words": None,
            "canary_markers": [],
        }

    def public_documents(self) -> list[str]:
        """The public texts this profile's decoys come from (see writer.write_public_corpus)."""
        return []

    def _foreign_markers(self, output: str, tenant_id: str) -> list[str]:
        """Canary markers of other tenants in an output (ground truth for canary_leak)."""
        return sorted(m for m in markers_in(output) if self.markers.get(m, tenant_id) != tenant_id)

    def _fault_on(self, t: float) -> bool:
        return self.fault_onset is not None and t >= self.fault_onset

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

    def _regular_request(self, t: float) -> None:
        rng = self.arr_rng
        tenant = rng.choices(self.tenants, self.tenant_weights)[0]
        open_sessions = tenant.sessions
        if open_sessions and (len(open_sessions) >= 4 or rng.random() < 0.85):
            session = rng.choice(open_sessions)
        else:
            domain = rng.choices(self.cache_domains, [d.weight for d in self.cache_domains])[0]
            session = self._new_session(tenant, domain, rng)
        self._request(t, session)

    def _probe_request(self, i: int, t: float) -> None:
        probe = self.probes[i]
        rng = self.probe_rngs[i]
        if not probe.sessions:
            # Probe sessions walk the domains round-robin (offset per probe), so every pool gets probed.
            n = self.probe_session_count[i]
            self.probe_session_count[i] += 1
            domain = self.cache_domains[(n + i) % len(self.cache_domains)]
            s = self._new_probe_session(probe, domain, rng, new_marker(rng))
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

    def _label_leak(
        self, label: dict[str, Any], victim: str, passages: list[dict[str, Any]], request_id: str, scenario: str
    ) -> None:
        """Mark a response contaminated; the dominant source is the tenant with most leaked tokens."""
        for p in passages:
            p["tokens"] = approx_tokens(p["text"])
            p["source_lang"] = self.lang_of.get(p["source_tenant_id"], "en")
            p["scenario"] = scenario
        by_tenant: dict[str, int] = {}
        for p in passages:
            by_tenant[p["source_tenant_id"]] = by_tenant.get(p["source_tenant_id"], 0) + p["tokens"]
        source = max(by_tenant, key=lambda k: by_tenant[k])  # first-seen wins ties: deterministic
        by_session: dict[str, int] = {}
        for p in passages:
            if p["source_tenant_id"] == source:
                by_session[p["source_session_id"]] = by_session.get(p["source_session_id"], 0) + p["tokens"]
        label.update(
            scenario=scenario,
            source_lang=self.lang_of.get(source, "en"),
            source_langs=sorted({p["source_lang"] for p in passages}),
            leaked_tokens=sum(p["tokens"] for p in passages),
            shortest_passage_tokens=min(p["tokens"] for p in passages),
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
