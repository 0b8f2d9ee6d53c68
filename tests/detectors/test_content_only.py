"""Detectors registered `content_only` are skipped on exchanges without content, and that changes nothing.

A domain leaves them out for an exchange with no text fingerprints and no canary hits (most traffic), on
their registration's promise: there they raise nothing and learn nothing. These tests hold every such
registration to the promise, and check that a domain that skips them judges exactly as one that runs every
detector on every exchange.
"""

from __future__ import annotations

import dataclasses
import pickle
import random
from collections.abc import Iterator

import pytest
import test_detector_contract as contract

from detectors.domain import DomainMonitor
from detectors.plan import Plan
from detectors.signals.registry import EXCHANGE_DETECTORS
from schemas.alert import Alert
from schemas.events import CacheStats
from schemas.exchange import Exchange

CONTENT_ONLY = [reg for reg in EXCHANGE_DETECTORS if reg.content_only]


def _bare(ex: Exchange) -> Exchange:
    """The same exchange without content: what text-free traffic looks like."""
    return dataclasses.replace(ex, prompt_print=None, output_print=None, canary_hits=[])


def mixed_traffic(n: int, seed: int) -> Iterator[Exchange]:
    """Hostile traffic (shared passages, canary hits) with every other exchange stripped of its content."""
    rng = random.Random(seed)
    for ex in contract.hostile_traffic(n, seed=seed):
        yield _bare(ex) if rng.random() < 0.5 else ex


def test_overlap_and_canary_are_registered_content_only() -> None:
    """Otherwise the skip would never happen: the detectors that read text fingerprints and canary hits (and the
    names read with the prints, ADR 0019)."""
    assert {reg.name for reg in CONTENT_ONLY} == {"overlap", "canary", "toolcall"}


@pytest.mark.parametrize("reg", CONTENT_ONLY, ids=lambda r: r.name)
def test_without_content_they_raise_nothing_and_learn_nothing(reg: contract.Registration) -> None:
    det = reg.make(contract.SETTINGS)
    domain = contract._domain()
    bare_seen = 0
    for ex in mixed_traffic(600, seed=4):
        if ex.prompt_print is None and ex.output_print is None and not ex.canary_hits:
            before = pickle.dumps(det, protocol=pickle.HIGHEST_PROTOCOL)
            assert det.observe(ex, domain) == []
            for include_output in (True, False):
                det.learn(ex, include_output)
            assert pickle.dumps(det, protocol=pickle.HIGHEST_PROTOCOL) == before
            bare_seen += 1
        else:
            signals = det.observe(ex, domain)
            det.learn(ex, include_output=not signals)
    assert bare_seen > 200
    if reg.max_state(contract.SETTINGS):
        assert det.state_size() > 0  # a detector with state had some when the bare ones came


def _judge(dm: DomainMonitor, traffic: list[Exchange]) -> list[list[Alert]]:
    dm.observe_stats(
        CacheStats(
            type="cache_stats",
            event_id="cs",
            ts=999.0,
            cache_domain="d1",
            role="prefill",
            capacity_tokens=contract.CAPACITY,
            used_tokens=1,
        )
    )
    return [dm.observe_exchange(ex) for ex in traffic]


def test_a_domain_skipping_them_judges_as_one_running_everything() -> None:
    traffic = list(mixed_traffic(800, seed=9))
    skipping = DomainMonitor("d1", contract.SETTINGS)
    everything = DomainMonitor("d1", contract.SETTINGS)
    plan = Plan(everything.detectors)
    plan.bare_observers, plan.bare_learners = plan.observers, plan.learners  # never skip
    everything._plan = plan
    alerts = _judge(skipping, traffic)
    assert _judge(everything, traffic) == alerts
    assert sum(map(len, alerts)) > 20
    assert skipping.overlap.state_size() == everything.overlap.state_size() > 0
