"""The staged topology judges content runs as the embedded monitor does (docs/adr/0004, "coverage").

Ingest fingerprints the text and sends hashes on; the k-gram positions must travel with them (the wire
fingerprint in event records, the prints in exchange records), or the domain stage falls back to the count rule
and raises alerts the embedded runner does not on the same input. Broker-free: the stages wired in memory."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from detectors import fingerprint
from schemas.alert import Alert
from streams.embedded.runner import EmbeddedRunner
from streams.kafka import records
from tests.support.stagepipe import run_lines
from tests.support.stockphrases import PAGE_SEEDS, STOCK_SEEDS, receivers, settings, traffic


def _alerts(alerts: list[Alert]) -> set[tuple[str, str, str, str | None, str | None]]:
    return {(a.alert_id, a.kind, a.severity, a.tenant_id, a.source_tenant_id) for a in alerts}


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("stock")
    lines = [orjson.dumps(e) for e in traffic(d)]
    path = d / "events.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    embedded = EmbeddedRunner(settings()).run_files([str(path)])
    count_rule = EmbeddedRunner(settings(coverage=False)).run_files([str(path)])
    assert not embedded.rejects and not count_rule.rejects
    return {"lines": lines, "embedded": embedded.alerts, "count_rule": count_rule.alerts}


def test_the_input_is_one_where_the_coverage_rule_matters(scenario: dict[str, Any]) -> None:
    """Else the comparison below proves nothing: the stock phrases alert high under the count rule only, the pages
    under both, and the simulator's own traffic raises alerts of its own."""
    assert receivers(scenario["count_rule"], STOCK_SEEDS) == {f"cov-rx-{s}" for s in STOCK_SEEDS}
    assert receivers(scenario["embedded"], STOCK_SEEDS) == set()
    assert receivers(scenario["embedded"], PAGE_SEEDS) == {f"cov-rx-{s}" for s in PAGE_SEEDS}
    assert any(not (a.tenant_id or "").startswith("cov-") for a in scenario["embedded"])


def test_staged_stages_give_the_embedded_alerts(scenario: dict[str, Any]) -> None:
    pipe = run_lines(settings(), scenario["lines"], batch=50)
    assert not pipe.out.dead
    assert _alerts(pipe.out.alerts) == _alerts(scenario["embedded"])


def _older_fields(model: Any) -> dict[str, Any]:
    """records._fields_of as a worker before `Fingerprint.positions` wrote nested models: no such key (nor the keys
    added after it)."""
    added = ("positions", "sentences", "sentence_ends", "hashes_b64", "positions_b64", "tools", "identifiers")
    return {k: v for k, v in model.__dict__.items() if k not in added}


@pytest.mark.parametrize("lost_at", ["ingest", "older event record", "older exchange record"])
def test_without_positions_the_stages_fall_back_to_the_count_rule(
    scenario: dict[str, Any], lost_at: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the stages did before the positions travelled: the stock phrases' high alerts, the embedded runner's
    count rule. Lost at ingest (a wire fingerprint of hashes only), or in records as workers of the previous
    version wrote them (during an upgrade they are still on the topics): an event record whose fingerprint has no
    `positions` key, an exchange record whose prints are [words, hashes]. Those decode, none is dead-lettered."""
    if lost_at == "ingest":
        # The ingest's wire fields (Fingerprinter.wire_fields) without the positions, as a producer older than them.
        monkeypatch.setattr(fingerprint, "positions_of", lambda tp: None)
    elif lost_at == "older event record":
        monkeypatch.setattr(records, "_fields_of", _older_fields)
    else:
        monkeypatch.setattr(records, "positions_of", lambda tp: None)
    pipe = run_lines(settings(), scenario["lines"], batch=50)
    assert not pipe.out.dead
    assert receivers(pipe.out.alerts, STOCK_SEEDS) == receivers(scenario["count_rule"], STOCK_SEEDS)
    assert _alerts(pipe.out.alerts) != _alerts(scenario["embedded"])
