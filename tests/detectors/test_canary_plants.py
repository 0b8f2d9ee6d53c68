"""A marker planted more than once keeps its earliest plant, in whatever order the plants are read
(detectors/canaries.py, `register_keyed`). The staged join reads plants from every input partition with no order
across them and scans an output as of its event time; in CI and on a loaded machine (the two-worker broker test, about
one run in four) a re-plant read before the first made a canary leak between the two plants come out as plain
contamination."""

from __future__ import annotations

import itertools

import pytest

from detectors.canaries import CanaryRegistry
from detectors.monitor import make_fingerprinter
from detectors.settings import DetectionSettings

MARKER = "CTK-CANARY-f788cfa768fd620603e4d0d352c1762f"
PLANTS = [(399.3, "sess-a"), (417.8, "sess-b"), (426.8, "sess-c")]  # as in the failing run: the leak at 420.7


def _registry() -> CanaryRegistry:
    return CanaryRegistry(make_fingerprinter(DetectionSettings(fingerprint_key="plants")))


@pytest.mark.parametrize("order", list(itertools.permutations(range(len(PLANTS)))))
def test_the_earliest_plant_counts_in_any_order(order: tuple[int, ...]) -> None:
    r = _registry()
    key = r.token_key(MARKER.rpartition("-")[2])
    for i in order:
        ts, session = PLANTS[i]
        r.register_keyed(key, "m1", "probe-canary-a", session, ts)
    (hit,) = r.scan_keys([key], until=420.7)  # an output between the first and the last plant
    assert (hit.owner_tenant_id, hit.owner_session_id) == ("probe-canary-a", "sess-a")
    assert r.scan_keys([key], until=399.0) == []  # before any plant: not in it
    assert r.state_size() == 1
