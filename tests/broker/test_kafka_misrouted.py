"""Input keyed otherwise into the direct topology, the default (issue 28): a producer still on the staged keys
(request id, tenant) feeds a direct worker on the real broker. Each response and cache_stats event goes on to its
domain's partition (with its request), nothing is judged on a wrong partition, the embedded runner's alerts come
out, and what cannot be placed is dead-lettered `misrouted`, never judged where it landed.

Workers run as subprocesses. Waits are bounded; nothing asserts on wall-clock durations.
"""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import wait_for
from kafka import KafkaConsumer

from streams.embedded.runner import EmbeddedRunner
from streams.producer import produce_file
from streams.settings import Settings
from tests.support.incident import incident_with_ticks

pytestmark = pytest.mark.kafka
WAIT_S = 150.0
DIRECT = {"CROSSTALK_KAFKA__TOPOLOGY": "direct"}


@pytest.fixture(scope="module")
def incident(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return incident_with_ticks(tmp_path_factory.mktemp("incident-misrouted"))


def _seen(names: Any, topic: str, until: Any) -> list[Any]:
    consumer = KafkaConsumer(
        topic, bootstrap_servers=names.bootstrap, auto_offset_reset="earliest", enable_auto_commit=False, group_id=None
    )
    out: list[Any] = []
    try:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and not until(out):
            for records in consumer.poll(timeout_ms=500).values():
                out += records
        end = time.monotonic() + 3.0  # anything more shows up now
        while time.monotonic() < end:
            for records in consumer.poll(timeout_ms=500).values():
                out += records
    finally:
        consumer.close()
    return out


def test_staged_keys_into_the_direct_topology_are_rerouted_not_judged_astray(
    kafka_names: Any, workers: Any, incident: dict[str, Any], tmp_path: Path
) -> None:
    """A bulk load on the staged keys: three quarters of the pairs land on another domain's partition and are sent
    on. Re-routing keeps pairs together but not the order across partitions (an event sent on arrives after what its
    partition read meanwhile), so findings are compared, not alert ids: every request one process flags is flagged.
    The end-of-input ticks go last, once the re-routed events are in."""
    w = workers.start(kafka_names, **DIRECT)
    wait_for(lambda: w.counters() is not None or not w.alive(), 60, what="the worker's web server")
    assert w.alive(), w.log_tail()
    staged = kafka_names.settings().kafka  # the harness's staged keys: by request id, cache_stats by domain
    assert staged.topology == "staged"
    lines = gzip.decompress(Path(incident["path"]).read_bytes()).splitlines()
    ticks = [line for line in lines if orjson.loads(line)["event_id"].startswith("tick-")]
    body, tail = tmp_path / "body.jsonl", tmp_path / "ticks.jsonl"
    body.write_bytes(b"\n".join(line for line in lines if line not in ticks) + b"\n")
    tail.write_bytes(b"\n".join(ticks) + b"\n")
    assert not produce_file(str(body), staged).bad_lines

    def settled() -> bool:  # every event read, the re-routed ones included, twice in a row
        c = w.counters()
        cs = (c or {}).get("counters", {})
        copies = cs.get("direct.rerouted.canary", 0) * (staged.input_partitions - 1)  # a canary to each other one
        moved = copies + sum(v for k, v in cs.items() if k.startswith("direct.rerouted.") and not k.endswith("canary"))
        n = cs.get("direct.messages", 0)
        ok = n >= len(lines) - len(ticks) + moved and n == getattr(settled, "last", -1)
        settled.last = n  # type: ignore[attr-defined]
        return ok

    wait_for(settled, WAIT_S, 1.0, "the worker to read the input and what it sent on")
    assert not produce_file(str(tail), staged).bad_lines
    # What one process finds on the file: each finding (its requests; a domain's own kind for a domain-level one).
    embedded = EmbeddedRunner(Settings()).run_files([incident["path"]]).alerts
    wanted = {(a.kind, a.cache_domain) for a in embedded if not a.request_ids}
    requests = [set(a.request_ids) for a in embedded if a.request_ids]
    assert requests and wanted, "the incident raises request and domain findings"

    def found(out: list[Any]) -> bool:
        got = [json.loads(r.value) for r in out]
        flagged = {rid for a in got for rid in a.get("request_ids") or ()}
        domains = {(a.get("kind"), a.get("cache_domain")) for a in got}
        return all(rs & flagged for rs in requests) and wanted <= domains

    recs = _seen(kafka_names, kafka_names.alerts_topic, found)
    c = w.counters()
    assert c is not None and c["topology"] == "direct", c
    counters = c["counters"]
    # Every finding of one process is raised: the same requests flagged (a kind can differ, as content evidence
    # arrives in another order: an over-long request may be judged a cross-session page first).
    assert found(recs), {k: v for k, v in counters.items() if "direct" in k}
    assert counters.get("direct.rerouted.response", 0) > 0 and counters.get("direct.rerouted.request", 0) > 0
    assert counters.get("direct.rerouted.canary", 0) > 0  # the incident's canaries, once each: copied
    # Nothing was dead-lettered but what could not be placed, with its reason.
    assert set(c["deadletter"]) <= {"misrouted"}, c["deadletter"]
