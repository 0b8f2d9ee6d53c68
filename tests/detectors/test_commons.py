"""detectors/commons.py: what a warm domain has learned is common, for another deployment to start with. A text that
three tenants sent is common; one tenant's own text is not; a cold domain gives nothing."""

from __future__ import annotations

from factories import request, response

from detectors.commons import learned_commons
from detectors.monitor import Monitor, make_fingerprinter
from detectors.settings import DetectionSettings

S = DetectionSettings.model_validate({"fingerprint_key": "commons", "overlap_warmup_docs": 20, "overlap_warmup_s": 60})
SHARED = "please summarise the quarterly report and list the three largest risks with their owners"
PRIVATE = "the merger with northwind closes on the ninth and the price stays confidential until then"


def _monitor(exchanges: int) -> tuple[Monitor, float]:
    m = Monitor(S)
    ts = 0.0
    for i in range(exchanges):
        ts = 10.0 * i
        tenant = f"t{i % 4}"
        text = PRIVATE if tenant == "t0" and i == 0 else SHARED if i % 4 != 0 else f"hello number {i}"
        m.observe(request(f"r{i}", tenant, ts, text=text))
        m.observe(response(f"r{i}", tenant, ts + 1, text=f"answer number {i} on item {i * 7}"))
    return m, ts


def _prints(text: str) -> set[int]:
    return set(make_fingerprinter(S).fingerprint_text(text).hashes)


def test_a_warm_domain_gives_what_three_tenants_shared_and_not_what_one_sent() -> None:
    m, ts = _monitor(30)
    (dm,) = m.domains.values()
    commons = learned_commons(dm, ts + 1)
    assert commons is not None
    got = set(commons.tolist())
    assert _prints(SHARED) <= got
    assert not (_prints(PRIVATE) & got)
    assert list(commons) == sorted(got)  # sorted, unique


def test_a_cold_domain_gives_nothing() -> None:
    m, ts = _monitor(5)  # 10 texts over 40 s: under the warm-up
    (dm,) = m.domains.values()
    assert learned_commons(dm, ts + 1) is None
