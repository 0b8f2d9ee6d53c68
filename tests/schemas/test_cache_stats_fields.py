"""cache_stats' optional engine figures (issue 40) in the exported JSON Schema: a producer in another language that
validates with the schema accepts and refuses what crosstalk's own validation does."""

from __future__ import annotations

import jsonschema
import pytest

from schemas.events import EventError, parse_event_obj
from schemas.export import schemas

BASE = {"type": "cache_stats", "event_id": "e", "ts": 1787817600, "cache_domain": "d", "role": "decode",
        "capacity_tokens": 900_000, "used_tokens": 10}  # fmt: skip
FIGURES = {
    "prefix_cache_hits_total": 1_200,
    "prefix_cache_queries_total": 5_000,
    "cache_hit_rate": 0.42,
    "swa_usage": 0.1,
    "mamba_usage": 0.0,
    "handoff_queue_reqs": 3,
    "kv_transfer_latency_ms": 38.5,
    "role_source": "derived",
}


def test_the_figures_are_exported_optional_and_accepted_alike() -> None:
    schema = schemas()["cache_stats"]
    assert set(FIGURES) <= set(schema["properties"]) and not set(FIGURES) & set(schema.get("required", []))
    validator = jsonschema.Draft202012Validator(schema)
    for event in (BASE, BASE | FIGURES):
        validator.validate(event)
        parse_event_obj(event)


@pytest.mark.parametrize(
    "bad",
    [{"cache_hit_rate": 1.5}, {"swa_usage": -0.1}, {"handoff_queue_reqs": -1}, {"prefix_cache_hits_total": 2**60},
     {"role_source": "guessed"}, {"kv_transfer_latency_ms": -1}],
)  # fmt: skip
def test_nonsense_is_refused_alike(bad: dict) -> None:
    assert not jsonschema.Draft202012Validator(schemas()["cache_stats"]).is_valid(BASE | bad)
    with pytest.raises(EventError):
        parse_event_obj(BASE | bad)
