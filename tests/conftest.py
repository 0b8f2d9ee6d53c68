"""Kafka fixtures: the real broker of scripts/kafka.sh, and crosstalk workers as subprocesses."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings as hypothesis_settings
from parity import three_runners_agree  # noqa: F401  (autouse: tests/detectors scenarios in every runner)

from tests.support.kafkanames import KafkaNames
from tests.support.workerproc import WorkerProcess

DEFAULT_BOOTSTRAP = "127.0.0.1:19092"
# Workers refuse to start without a configured fingerprint key; the test processes and the workers they
# start share this one (a test of the refusal removes it).
os.environ.setdefault("CROSSTALK_DETECTION__FINGERPRINT_KEY", "crosstalk-test-key-not-secret")
# Property tests explore new examples on every local run, where a counterexample is a finding to keep (as an
# @example). CI runs the same examples every time, so that a change lands or not on what it changed.
hypothesis_settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI") == "true":
    hypothesis_settings.load_profile("ci")


@pytest.fixture(autouse=True)
def _no_litellm_callback_left() -> Iterator[None]:
    """LiteLLM keeps callbacks in module-level lists and takes one logger of a class: a logger an earlier test left
    there would take the next test's calls (with that test's settings). Reset after every test that imported it."""
    yield
    import sys

    litellm = sys.modules.get("litellm")
    if litellm is not None:
        manager = getattr(litellm, "logging_callback_manager", None)
        if manager is not None:
            manager._reset_all_callbacks()
        litellm.callbacks = []


def _broker_reachable(bootstrap: str, timeout_s: float = 5.0) -> str | None:
    """None if a Kafka broker answers a metadata request; else why not."""
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            pass
    except OSError as exc:
        return f"no TCP connection to {bootstrap}: {exc}"
    try:
        from kafka import KafkaAdminClient

        admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","), request_timeout_ms=int(timeout_s * 1000))
        try:
            admin.describe_cluster()
        finally:
            admin.close()
    except Exception as exc:
        return f"{bootstrap} accepts connections but does not answer as Kafka: {exc}"
    return None


@pytest.fixture(scope="session")
def kafka_bootstrap() -> str:
    """The broker's bootstrap address; skips the test without a broker, fails on CI (CI=true)."""
    bootstrap = os.environ.get("CROSSTALK_KAFKA__BOOTSTRAP", DEFAULT_BOOTSTRAP)
    why = _broker_reachable(bootstrap)
    if why is not None:
        msg = f"Kafka broker unavailable ({why}); start it with `scripts/kafka.sh up`"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)
    return bootstrap


@pytest.fixture
def kafka_names(kafka_bootstrap: str) -> Iterator[KafkaNames]:
    """Unique topic names and app id for one test, so tests never see each other's messages."""
    names = KafkaNames(kafka_bootstrap)
    yield names
    names.delete()


class Workers:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.started: list[WorkerProcess] = []

    def start(self, names: KafkaNames, name: str = "w", **extra_env: str) -> WorkerProcess:
        n = len(self.started)
        data = self.tmp_path / f"{name}-{n}-data"
        data.mkdir(parents=True, exist_ok=True)
        w = WorkerProcess({**names.env(), **extra_env}, data, self.tmp_path / f"{name}-{n}.log")
        self.started.append(w)
        return w

    def stop_all(self) -> None:
        for w in self.started:
            try:
                w.stop()
            except Exception:
                w.proc.kill()


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    """Starts workers; every one is stopped at teardown (SIGTERM, then SIGKILL), none left behind."""
    ws = Workers(tmp_path)
    try:
        yield ws
    finally:
        ws.stop_all()


def wait_for(predicate: Any, timeout_s: float = 30.0, interval_s: float = 0.25, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(interval_s)


def consume_records(bootstrap: str, topic: str, expect: int, timeout_s: float = 60.0) -> list[Any]:
    """At least `expect` records of `topic` from its beginning (no consumer group), or an AssertionError."""
    from kafka import KafkaConsumer

    c = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", group_id=None)
    got: list[Any] = []
    try:

        def enough() -> bool:
            for records in c.poll(timeout_ms=500).values():
                got.extend(records)
            return len(got) >= expect

        wait_for(enough, timeout_s, interval_s=0.0, what=f"{expect} records on {topic}")
    finally:
        c.close()
    return got
