"""Shared checks over every registered per-exchange detector (detectors/signals/registry.py).

A new detector gets these for free by registering: bounded state after many exchanges, no wall clock,
picklable (detectors live in Kafka snapshots), silent on plain traffic. The traffic below is hostile
on purpose (overlong prompts, one-token accounting, instant prefill, canary hits, shared passages), so
every detector has something to do and something to remember.
"""

from __future__ import annotations

import ast
import datetime
import inspect
import io
import pickle
import random
import time
from collections.abc import Iterator
from typing import Any, get_args

import pytest

from detectors.domain import DomainMonitor
from detectors.settings import DetectionSettings
from detectors.signals import registry
from detectors.signals.base import Detector, Raises, Registration
from detectors.signals.capacity import CapacityTracker
from detectors.signals.registry import EXCHANGE_DETECTORS
from schemas.alert import AlertKind, Signal
from schemas.events import CacheStats, Request, Response
from schemas.exchange import CanaryHit, Exchange, TextFingerprint

# Small bounds, so that "many exchanges" is well past every one of them in a second of test time.
SETTINGS = DetectionSettings(
    index_max_docs=60,
    index_max_fingerprints=3_000,
    max_tainted=200,
    overlap_warmup_docs=0,
    overlap_warmup_s=0.0,
    spread_bits_log2=12,
    spread_capacity=1_000,
    accounting_max_keys=6,  # one fewer than the (model, tenant) keys below: eviction runs
    accounting_window=16,
    cache_read_max_tenants=5,  # fewer than the tenants below: eviction runs
)
CAPACITY = 681_280
TENANTS = [f"tenant-{i}" for i in range(7)]


def _domain() -> CapacityTracker:
    cap = CapacityTracker()
    cap.prefill_capacity = CAPACITY
    return cap


def _halves(rng: random.Random, i: int, ts: float) -> tuple[Request, Response]:
    tenant = rng.choice(TENANTS)
    rid = f"req-{i}"
    tokens = rng.choice([900, 12_000, 800_000])  # some cannot fit the pool
    req = Request(
        type="request", event_id=f"q{i}", ts=ts, request_id=rid, tenant_id=tenant, model="m", prompt_tokens=tokens
    )
    placeholder = rng.random() < 0.2  # the incident's one-token placeholder
    # A gateway tokenizer that counts 3x the engine's for one tenant (normal, once learned), and now and then a
    # prompt the engine counted at a third of that tenant's norm (a departure only a learned norm sees).
    engine = tokens // 3 if tenant == TENANTS[-1] else tokens
    if i % 29 == 0:
        engine = engine * 3 // 10
    resp = Response.model_validate(
        {
            "type": "response",
            "event_id": f"r{i}",
            "ts": ts + 0.5,
            "request_id": rid,
            "tenant_id": tenant,
            "model": "m",
            "cache_domain": "d1",
            "status_code": rng.choice([200, 200, 200, 500]),
            "session_id": f"{tenant}-s{rng.randrange(3)}",
            # What the engine says it served from its prefix cache: some of it a prefix the tenant never sent.
            "usage": {
                "input_tokens": 1 if placeholder else engine,
                "output_tokens": 40,
                "cached_input_tokens": rng.choice([None, 0, 300, tokens]),
            },
            "ttft_ms": 5.0 if placeholder else 300.0,
        }
    )
    return req, resp


def hostile_traffic(n: int, seed: int = 3, start: float = 1_000.0) -> Iterator[Exchange]:
    """Exchanges in event-time order; outputs often carry passages (hash runs) of other tenants' texts."""
    rng = random.Random(seed)
    names = random.Random(seed + 1)  # its own stream: the other detectors see the traffic they always saw
    passages: list[list[int]] = []
    for i in range(n):
        ts = start + i
        req, resp = _halves(rng, i, ts)
        own = [rng.getrandbits(63) for _ in range(rng.randrange(5, 40))]
        out = [rng.getrandbits(63) for _ in range(rng.randrange(0, 20))]
        if passages and rng.random() < 0.3:
            out += rng.choice(passages)  # a passage some earlier exchange had
        passages = [*passages[-50:], own]
        hits = []
        if rng.random() < 0.05:
            owner = rng.choice(TENANTS)
            hits = [CanaryHit(marker_id=f"m{i}", owner_tenant_id=owner, owner_session_id=f"{owner}-s0")]
        prompt = TextFingerprint(hashes=own, words=len(own) + 4)
        output = TextFingerprint(hashes=out, words=len(out) + 4) if out else None
        # Keyed names (ADR 0019): a prompt declares its tenant's functions; now and then an output calls one, and
        # sometimes a function no prompt of the tenant declares.
        own_names = frozenset(1_000 * TENANTS.index(req.tenant_id) + j for j in range(3))
        prompt.tools = own_names if names.random() < 0.9 else None
        if output is not None and names.random() < 0.3:
            output.tools = frozenset({min(own_names) if names.random() < 0.85 else names.randrange(10**6, 10**7)})
        yield Exchange(
            ts=resp.ts, request=req, response=resp, prompt_print=prompt, output_print=output, canary_hits=hits
        )


def _feed(det: Detector, exchanges: Iterator[Exchange]) -> list[list[Signal]]:
    domain = _domain()
    out = []
    for ex in exchanges:
        signals = det.observe(ex, domain)
        det.learn(ex, include_output=not signals)
        out.append(signals)
    return out


def _id(reg: Registration) -> str:
    return reg.name


REGISTERED = pytest.mark.parametrize("reg", EXCHANGE_DETECTORS, ids=_id)


def test_every_per_exchange_signal_has_a_registered_detector() -> None:
    registered = [name for reg in EXCHANGE_DETECTORS for name in reg.signals]
    assert len(registered) == len(set(registered)), "a signal registered twice"
    assert len({reg.name for reg in EXCHANGE_DETECTORS}) == len(EXCHANGE_DETECTORS), "a name registered twice"
    # Every wire kind has a producer: capacity_gap is the domain's own finding (from cache_stats), every other
    # kind is raised by a registered signal (Raises.kind is checked against AlertKind when registered).
    kinds = {r.kind for reg in EXCHANGE_DETECTORS for r in reg.raises if r.kind is not None}
    assert kinds == set(get_args(AlertKind)) - {"capacity_gap"}


def test_precedence_and_mechanism_as_before_the_registry_declared_them() -> None:
    """The kinds' order and the mechanism signals, now declared per registration, are what alerts were
    judged by when schemas/alert.py's order decided them: alert kinds and ids unchanged."""
    by_signal = registry.raises_by_signal()
    strongest_first = [r.kind for r in sorted(by_signal.values(), key=lambda r: -r.precedence) if r.kind is not None]
    assert strongest_first == [
        "canary_leak",
        "cross_tenant_contamination",
        "cross_session_contamination",
        "overlong_accepted",
        "token_accounting_mismatch",
        "impossible_prefill",
        "undeclared_tool_call",  # added last (ADR 0019): the kinds before it keep their order
    ]
    assert registry.mechanism_signals() == {
        "overlong_accepted",
        "token_accounting_mismatch",
        "impossible_prefill",
        "undeclared_tool_call",
    }


def test_a_registration_cannot_put_a_new_kind_on_the_wire_or_make_the_kind_ambiguous(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ValueError, match="not an AlertKind"):
        Raises("echo", kind="echo_detected", precedence=5)  # type: ignore[arg-type]
    clash = Registration("clash", (Raises("clash", kind="impossible_prefill", precedence=30),), lambda s: _Never())
    monkeypatch.setattr(registry, "EXCHANGE_DETECTORS", (*EXCHANGE_DETECTORS, clash))
    with pytest.raises(ValueError, match="share precedence 30"):
        registry.raises_by_signal()
    twice = Registration("twice", (Raises("canary_leak", kind="canary_leak", precedence=60),), lambda s: _Never())
    monkeypatch.setattr(registry, "EXCHANGE_DETECTORS", (*EXCHANGE_DETECTORS, twice))
    with pytest.raises(ValueError, match="registered twice"):
        registry.raises_by_signal()


class _Never:
    def observe(self, ex: Exchange, domain: Any) -> list[Signal]:
        return []

    def learn(self, ex: Exchange, include_output: bool = True) -> None:
        return None

    def state_size(self) -> int:
        return 0


@REGISTERED
def test_the_traffic_exercises_the_detector(reg: Registration) -> None:
    """Otherwise the checks below would pass on a detector that never does anything."""
    raised = {s.name for signals in _feed(reg.make(SETTINGS), hostile_traffic(600)) for s in signals}
    assert raised & set(reg.signals), f"hostile traffic raised none of {reg.signals}"


@REGISTERED
def test_state_stays_within_its_bound(reg: Registration) -> None:
    det = reg.make(SETTINGS)
    bound = reg.max_state(SETTINGS)
    sizes = []
    for chunk in range(4):
        _feed(det, hostile_traffic(500, seed=chunk, start=1_000.0 + 500 * chunk))
        sizes.append(det.state_size())
    assert max(sizes) <= bound, f"state {sizes} over its bound {bound}"


@REGISTERED
def test_silent_on_plain_traffic(reg: Registration) -> None:
    """Fitting prompts, honest counts and timings, no canaries, outputs sharing nothing: no signal at all."""
    det = reg.make(SETTINGS)
    rng = random.Random(5)
    domain = _domain()
    for i in range(300):
        tenant = TENANTS[i % len(TENANTS)]
        req = Request(
            type="request", event_id=f"q{i}", ts=i, request_id=f"r{i}", tenant_id=tenant, model="m", prompt_tokens=900
        )
        resp = Response.model_validate(
            {
                **{"type": "response", "event_id": f"s{i}", "ts": i + 0.5, "request_id": f"r{i}", "tenant_id": tenant},
                **{"model": "m", "cache_domain": "d1", "status_code": 200, "ttft_ms": 250.0},
                "usage": {"input_tokens": 900, "output_tokens": 30},
            }
        )
        prompt = TextFingerprint(hashes=[rng.getrandbits(63) for _ in range(20)], words=24)
        output = TextFingerprint(hashes=[rng.getrandbits(63) for _ in range(20)], words=24)
        for ex in (
            Exchange(ts=i + 0.5, request=req, response=resp, prompt_print=prompt, output_print=output),
            Exchange(ts=i + 0.5, request=None, response=resp, orphan="no_request"),
            Exchange(ts=i + 0.5, request=req, response=None, orphan="no_response"),
        ):
            assert det.observe(ex, domain) == []
            det.learn(ex)


@REGISTERED
def test_no_wall_clock(reg: Registration, monkeypatch: pytest.MonkeyPatch) -> None:
    """Event time only: the same exchanges give the same signals whenever they are replayed."""

    def clock(*_: Any) -> float:
        raise AssertionError("a detector read the wall clock")

    for name in ("time", "time_ns", "monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns"):
        monkeypatch.setattr(time, name, clock)
    signals = _feed(reg.make(SETTINGS), hostile_traffic(300))
    monkeypatch.undo()
    assert signals == _feed(reg.make(SETTINGS), hostile_traffic(300))
    # Also by construction: the detector's module imports no clock to read later.
    tree = ast.parse(inspect.getsource(inspect.getmodule(type(reg.make(SETTINGS)))))
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not imported & {time.__name__, datetime.__name__}


@REGISTERED
def test_picklable_and_the_copy_carries_on_alike(reg: Registration) -> None:
    det = reg.make(SETTINGS)
    _feed(det, hostile_traffic(400, seed=1))
    copy = pickle.loads(pickle.dumps(det, protocol=pickle.HIGHEST_PROTOCOL))
    assert copy.state_size() == det.state_size()
    rest = list(hostile_traffic(800, seed=1))[400:]
    assert _feed(copy, iter(rest)) == _feed(det, iter(rest))


@REGISTERED
def test_what_a_detector_learned_is_in_its_snapshot(reg: Registration) -> None:
    """A detector that keeps state judges by it: a copy pickled after learning judges the rest as the original
    does, and differently from a fresh detector that learned nothing (else the state would be dead weight,
    or the snapshot would lose it)."""
    det = reg.make(SETTINGS)
    _feed(det, hostile_traffic(400, seed=1))
    if det.state_size() == 0:
        pytest.skip(f"{reg.name} keeps no state")
    copy = pickle.loads(pickle.dumps(det, protocol=pickle.HIGHEST_PROTOCOL))
    rest = list(hostile_traffic(800, seed=1))[400:]
    assert _feed(copy, iter(rest)) == _feed(det, iter(rest)) != _feed(reg.make(SETTINGS), iter(rest))


def _with_pieces(det: Any, replace: dict[str, Any]) -> Any:
    """A pickled copy of `det` whose declared pieces are the objects in `replace` (as a snapshot's assembly puts
    separately copied pieces back in place: streams/kafka/pieces.py)."""
    names = {id(piece): key for key, piece in det.pieces().items()}
    buf = io.BytesIO()
    pickler = pickle.Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.persistent_id = lambda o: names.get(id(o))  # type: ignore[method-assign]
    pickler.dump(det)
    unpickler = pickle.Unpickler(io.BytesIO(buf.getvalue()))
    unpickler.persistent_load = replace.__getitem__  # type: ignore[method-assign]
    return unpickler.load()


@REGISTERED
def test_declared_pieces_replay_their_changes(reg: Registration) -> None:
    """A detector's declared pieces (`HasPieces`), each copied at a mark and brought forward by its own changes, put
    back into the rest of the detector, judge the traffic that follows as the live detector does."""
    det = reg.make(SETTINGS)
    if not hasattr(det, "pieces"):
        pytest.skip(f"{reg.name} declares no pieces")
    traffic = list(hostile_traffic(800, seed=2))
    _feed(det, iter(traffic[:400]))
    marked = {key: pickle.loads(pickle.dumps(piece)) for key, piece in det.pieces().items()}
    for piece in det.pieces().values():
        piece.mark()
    _feed(det, iter(traffic[400:420]))
    replayed = 0
    for key, piece in det.pieces().items():
        changes = piece.changes()
        if changes is None:  # only a whole copy will do (allowed), so take one
            marked[key] = pickle.loads(pickle.dumps(piece))
            continue
        assert pickle.dumps(marked[key]) != pickle.dumps(piece), f"{key}: changes but nothing changed"
        marked[key].replay(changes)
        assert pickle.dumps(marked[key]) == pickle.dumps(piece), f"{key}: the copy plus its changes is not the piece"
        replayed += 1
    assert replayed, "no declared piece could be copied as its changes"
    restored = _with_pieces(det, marked)
    assert all(restored.pieces()[key] is marked[key] for key in marked)
    rest = traffic[420:]
    assert _feed(restored, iter(rest)) == _feed(det, iter(rest))


def test_snapshots_survive_a_change_of_the_registry() -> None:
    """A domain pickled before `detectors` existed (one attribute per detector), lacking a detector registered
    since, restores with every registered detector (the missing one fresh) and judges on alike."""
    dm = DomainMonitor("d1", SETTINGS)
    stats = CacheStats(
        type="cache_stats",
        event_id="cs",
        ts=999.0,
        cache_domain="d1",
        role="prefill",
        capacity_tokens=CAPACITY,
        used_tokens=1,
    )
    dm.observe_stats(stats)
    traffic = list(hostile_traffic(400))
    for ex in traffic[:200]:
        dm.observe_exchange(ex)
    old = DomainMonitor.__new__(DomainMonitor)
    old.__dict__.update({k: v for k, v in dm.__dict__.items() if k != "detectors"})
    old.__dict__.update({name: det for name, det in dm.detectors.items() if name != "canary"})
    restored = pickle.loads(pickle.dumps(old, protocol=pickle.HIGHEST_PROTOCOL))
    assert list(restored.detectors) == [reg.name for reg in EXCHANGE_DETECTORS]
    assert restored.overlap is restored.detectors["overlap"]
    assert restored.overlap.state_size() == dm.overlap.state_size() > 0
    alerts = [dm.observe_exchange(ex) for ex in traffic[200:]]
    assert any(alerts)
    assert [restored.observe_exchange(ex) for ex in traffic[200:]] == alerts
