"""A checkpoint copies a domain's mix-up ledger whole now and then, as one changelog message (streams/kafka/pieces.py):
at its default bounds, its window and its conversations' latest answers (ADR 0026) together fit that message."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from detectors.mixup import Delivery, MixupLedger
from streams.kafka import pieces
from streams.settings import Settings


@pytest.mark.parametrize("per", [200, 2_000])  # fingerprints per delivery: a chat turn; an agent's turn with history
def test_a_ledger_full_to_its_bounds_fits_one_changelog_message(per: int) -> None:
    s = Settings()
    d = s.detection
    ledger, rng = MixupLedger(), np.random.default_rng(per)
    n_tails = min(d.mixup_session_max, d.mixup_session_prints // per + 1)
    n_window = min(d.mixup_max_deliveries, d.mixup_max_prints // per) + 1
    # Old conversations first (they stay as tails), then a window's worth of requests without a session.
    for i in range(n_tails + n_window):
        halves = [np.sort(rng.integers(0, 2**63, per // 2, dtype=np.uint64)) for _ in range(2)]
        session = f"s{i}" if i < n_tails else None
        ledger.add(d, Delivery(0.1 * i, 0.1 * i - 1.0, f"r{i}", "t", session, None, *halves, set()))
    # Both are full: each at one of its bounds.
    assert len(ledger.recent) == d.mixup_max_deliveries or ledger.prints > d.mixup_max_prints - per
    assert len(ledger.tails) == d.mixup_session_max or ledger.tails.prints > d.mixup_session_prints - per
    name = ("mx", "d1")  # as a domain monitor names its ledger's piece
    stored = pieces.pack(name, pieces.whole(name, ledger, Counter()), True)
    assert len(stored) < s.kafka.max_message_bytes, (len(stored), s.kafka.max_message_bytes)
