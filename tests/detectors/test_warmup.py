"""When content alone may alert: a domain is warm after `overlap_warmup_docs` texts and `overlap_warmup_s` of event
time, or, for a slow domain, after `overlap_warmup_slow_s` with `overlap_warmup_slow_docs` texts. A slow deployment
(1-2 requests/s over a few domains) took 12-25 minutes to reach 1,000 texts and was blind to content-only leaks all
that time (docs/evaluation.md, "Other traffic than the table's")."""

from __future__ import annotations

import pytest
from factories import request, response

from detectors.monitor import Monitor
from detectors.settings import DetectionSettings
from tests.support.live import observe_now


def _warm_after(exchanges: int, span_s: float) -> bool:
    """Whether the domain is warm once `exchanges` (two texts each) have come over `span_s` of event time."""
    m = Monitor(DetectionSettings.model_validate({"fingerprint_key": "warm-up"}))
    ts = 0.0
    for i in range(exchanges):
        ts = span_s * i / max(1, exchanges - 1)
        observe_now(m, request(f"r{i}", f"t{i % 5}", ts, text=f"question number {i} about item {i * 7}"))
        observe_now(m, response(f"r{i}", f"t{i % 5}", ts, text=f"answer number {i} on item {i * 7}"))
    (dm,) = m.domains.values()
    return dm.overlap.warm(ts)


@pytest.mark.parametrize(
    ("exchanges", "span_s", "warm"),
    [
        (500, 130.0, True),  # a busy domain: 1,000 texts after 120 s
        (500, 100.0, False),  # ... not before 120 s
        (450, 400.0, False),  # 900 texts, under the slow time
        (100, 610.0, True),  # a slow domain: 200 texts after 600 s
        (99, 610.0, False),  # ... but not with fewer texts: a quiet domain has learned nothing common yet
        (10, 3000.0, False),
    ],
)
def test_a_domain_is_warm_on_texts_and_time_or_on_fewer_texts_after_longer(
    exchanges: int, span_s: float, warm: bool
) -> None:
    assert _warm_after(exchanges, span_s) is warm
