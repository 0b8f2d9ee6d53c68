"""Multilingual simulator traffic where the run-count and the coverage rule differ (docs/adr/0004, "coverage").

Into a short multilingual simulation go pairs of tenants sharing one cache domain: a source whose prompt holds 80
private words, and a receiver whose answer repeats a passage of them. An 8-word passage is a stock phrase: with
`KEY`, winnowing turns the `STOCK_SEEDS` ones into a run of 3 matches covering under 10 units, a high alert under
the count rule and none under the coverage rule. A 20-word passage is a page: high under both. Whoever judges the
runs without the k-gram positions (a producer older than `Fingerprint.positions`, or a stage that loses them)
raises the stock phrases' alerts; the embedded monitor, fingerprinting the text itself, does not.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson

from detectors.settings import DetectionSettings
from streams.settings import Settings
from tests.support.rawevents import tick_events

KEY = "staged-coverage-key"
# With KEY: the 8-word passages that winnowing turns into a run of 3 (found with the count rule, seeds 0..399).
STOCK_SEEDS = (0, 95, 122, 263, 286, 292, 322, 358)
PAGE_SEEDS = (1, 2)  # 20-word passages: pages, high under either rule
CONTROL_SEEDS = (3, 4, 5)  # 8-word passages that make no run of 3: quiet under either rule
DOMAIN = "glm53-pc-1"  # a multilingual pool: the pairs meet the simulator's Chinese, Japanese, German text
_WORDS = [f"w{i:04d}" for i in range(5000)]  # a private vocabulary: no chance k-grams with anything else


def settings(coverage: bool = True) -> Settings:
    """Detection without warm-up (a short run), keyed with KEY."""
    detection = DetectionSettings.model_validate(
        {"fingerprint_key": KEY, "overlap_warmup_docs": 0, "overlap_warmup_s": 0, "overlap_coverage": coverage}
    )
    return Settings(detection=detection)


def passage_words(seed: int, length: int) -> tuple[list[str], list[str]]:
    """A source's 80 private words, and a receiver's answer holding `length` consecutive ones of them between 60
    words of its own. One seed gives the same texts wherever it is used (here and in the detector's coverage tests,
    tests/detectors/test_content_coverage.py), so the seeds found with KEY mean the same passages in both."""
    rng = random.Random(seed)
    src_words = rng.sample(_WORDS, 80)
    start = rng.randrange(0, 80 - length + 1)
    own = rng.sample([w for w in _WORDS if w not in src_words], 60)
    cut = rng.randrange(5, 55)
    return src_words, own[:cut] + src_words[start : start + length] + own[cut:]


def shared_passage(seed: int, length: int, ts: float, domain: str = DOMAIN) -> list[dict[str, Any]]:
    """A source's prompt and a receiver's answer holding `length` consecutive words of it, between its own."""
    src_words, answer = passage_words(seed, length)
    src, rx = f"cov-src-{seed}", f"cov-rx-{seed}"
    common = {"model": "glm-5.3", "cache_domain": domain}
    return [
        {"type": "request", "event_id": f"{src}-q", "ts": ts, "request_id": f"{src}-r", "tenant_id": src,
         "prompt_tokens": 200, "prompt_text": " ".join(src_words), **common},
        {"type": "response", "event_id": f"{src}-p", "ts": ts + 1, "request_id": f"{src}-r", "tenant_id": src,
         "status_code": 200, "output_text": "noted", **common},
        {"type": "request", "event_id": f"{rx}-q", "ts": ts + 2, "request_id": f"{rx}-r", "tenant_id": rx,
         "prompt_tokens": 10, "prompt_text": "tell me something", **common},
        {"type": "response", "event_id": f"{rx}-p", "ts": ts + 3, "request_id": f"{rx}-r", "tenant_id": rx,
         "status_code": 200, "output_text": " ".join(answer), **common},
    ]  # fmt: skip


def traffic(directory: Path, duration_s: float = 150.0, sim: bool = True) -> list[dict[str, Any]]:
    """The simulator's multilingual events (seed 7, fault at 60 s; none with `sim=False`) with the shared
    passages spread over the run, in event-time order, then one tick per covering key that closes every join."""
    events: list[dict[str, Any]] = []
    t0 = 1_787_821_200.0
    if sim:
        from streams.sim.simulate import SimConfig, write_simulation

        summary = write_simulation(
            directory, SimConfig(profile="multilingual", duration_s=duration_s, fault_at_s=60.0, seed=7)
        )
        events = [orjson.loads(line) for line in Path(summary["events_path"]).read_bytes().splitlines() if line]
        t0 = min(e["ts"] for e in events)
    cases = [(s, 8) for s in STOCK_SEEDS + CONTROL_SEEDS] + [(s, 20) for s in PAGE_SEEDS]
    for i, (seed, length) in enumerate(cases):
        events += shared_passage(seed, length, t0 + 10 + (duration_s - 20) * i / len(cases))
    events.sort(key=lambda e: e["ts"])
    return events + tick_events(events[-1]["ts"], settings().kafka)


def receivers(alerts: Any, seeds: tuple[int, ...]) -> set[str]:
    """The injected receivers among the tenants alerted high or critical."""
    names = {f"cov-rx-{s}" for s in seeds}
    return {a.tenant_id for a in alerts if a.tenant_id in names and a.severity in ("high", "critical")}
