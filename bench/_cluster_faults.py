"""The cluster fault bench's moving parts: the 3-node cluster (scripts/kafka-cluster.sh), topics whose input and
alerts partitions one node leads, a paced producer that counts what the broker refused, an alert reader that
stamps every alert's arrival, and the workers, restarted as a supervisor would if one exits on its own.
"""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import orjson

from streams.producer import make_producer, produce_file
from streams.settings import KafkaSettings
from streams.testing.kafkanames import KafkaNames
from streams.testing.workerproc import WorkerProcess

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "kafka-cluster.sh"
LEADER = 1  # the node that leads every input and alerts partition (fault a kills it)


def cluster(*argv: str, timeout_s: float = 300.0) -> None:
    subprocess.run(["bash", str(SCRIPT), *argv], check=True, timeout=timeout_s, cwd=ROOT)


def cluster_bootstrap() -> str:
    out = subprocess.run(["bash", str(SCRIPT), "bootstrap"], check=True, capture_output=True, text=True, cwd=ROOT)
    return out.stdout.strip()


def create_led_topics(names: KafkaNames, replication: int = 3) -> None:
    """The input and alerts topics with node LEADER first in every replica list (so it leads them all), then
    the others as the workers create them (RF 3)."""
    from kafka.admin import NewTopic

    from streams.producer import admin_client

    k = names.settings().kafka
    nodes = [LEADER, *[n for n in (1, 2, 3) if n != LEADER]][:replication]
    big = {"max.message.bytes": str(k.max_message_bytes)}
    admin = admin_client(names.bootstrap)
    try:
        admin.create_topics(
            [
                NewTopic(k.input_topic, -1, -1, {p: nodes for p in range(k.input_partitions)}, big),
                NewTopic(k.alerts_topic, -1, -1, {p: nodes for p in range(k.alerts_partitions)}, {}),
            ],
            timeout_ms=30_000,
        )
    finally:
        admin.close()
    names.create()


def leaders(bootstrap: str, topics: list[str]) -> dict[str, Any]:
    """topic -> partition -> leader node id (-1: none); {"error": ...} if the cluster did not answer."""
    from streams.producer import admin_client

    try:
        admin = admin_client(bootstrap)
        try:
            return {
                t.get("name") or t["topic"]: {p["partition_index"]: p["leader_id"] for p in t["partitions"]}
                for t in admin.describe_topics(topics)
            }
        finally:
            admin.close()
    except Exception as exc:  # a figure for the report, not a reason to stop the run
        return {"error": repr(exc)}


class CountingProducer:
    """crosstalk's producer (make_producer: acks=all, its retries) under produce_file, with every send's outcome
    kept: what the cluster refused in the end is counted and sent again afterwards, so that the comparison is
    about the workers; the count is the producer's own finding."""

    def __init__(self, k: KafkaSettings) -> None:
        self.prod = make_producer(k)
        self.failed: list[tuple[str, dict[str, Any], str]] = []
        self.sent = 0
        self.lock = threading.Lock()

    def send(self, topic: str, **kw: Any) -> Any:
        self.sent += 1
        try:
            fut = self.prod.send(topic, **kw)
        except Exception as exc:  # a full buffer or metadata that never came: refused at once
            self._fail(topic, kw, exc)
            return None
        fut.add_errback(lambda exc: self._fail(topic, kw, exc))
        return fut

    def _fail(self, topic: str, kw: dict[str, Any], exc: BaseException) -> None:
        with self.lock:
            self.failed.append((topic, kw, type(exc).__name__))

    def partitions_for(self, topic: str) -> Any:
        return self.prod.partitions_for(topic)

    def flush(self) -> None:
        self.prod.flush()

    def close(self) -> None:
        self.prod.close()

    def resend_failed(self) -> int:
        """Send again what failed (in its order), waiting for each; returns how many."""
        with self.lock:
            todo, self.failed = self.failed, []
        for topic, kw, _ in todo:
            self.prod.send(topic, **kw).get(timeout=120)
        return len(todo)


class Producing(threading.Thread):
    def __init__(self, path: str, k: KafkaSettings, rate: float) -> None:
        super().__init__(daemon=True)
        self.path, self.k, self.rate = path, k, rate
        self.prod = CountingProducer(k)
        self.error: BaseException | None = None
        self.failed_kinds: dict[str, int] = {}
        self.refused = 0

    def run(self) -> None:
        try:
            produce_file(self.path, self.k, rate=self.rate, producer=self.prod)  # type: ignore[arg-type,unused-ignore]
            self.prod.flush()
            with self.prod.lock:
                for _, _, kind in self.prod.failed:
                    self.failed_kinds[kind] = self.failed_kinds.get(kind, 0) + 1
            self.refused = self.prod.resend_failed()
        except BaseException as exc:
            self.error = exc
        finally:
            self.prod.close()


class AlertReader(threading.Thread):
    """Every alert record of the alerts topic from the start: id -> arrival times (wall, monotonic)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        from kafka import KafkaConsumer

        self.consumer = KafkaConsumer(
            topic,
            bootstrap_servers=bootstrap.split(","),
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            group_id=None,
        )
        self.arrivals: dict[str, list[float]] = {}
        self.records = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                batch = self.consumer.poll(timeout_ms=200)
            except Exception:  # a broker going away: the client reconnects on the next poll
                time.sleep(0.5)
                continue
            now = time.monotonic()
            for records in batch.values():
                for r in records:
                    a = orjson.loads(r.value)
                    if a.get("record") == "incident_resolved":
                        continue
                    self.records += 1
                    self.arrivals.setdefault(a["alert_id"], []).append(now)
        self.consumer.close()


class Workers:
    """Workers of one pipeline; one that exits without being killed here is counted and started again on its
    data dir (as compose's restart policy or systemd would)."""

    def __init__(self, names: KafkaNames, env: dict[str, str], workdir: Path) -> None:
        self.names, self.env, self.workdir = names, env, workdir
        self.live: dict[str, WorkerProcess] = {}
        self.killed: list[str] = []
        self.exited: list[dict[str, Any]] = []
        self.all: list[WorkerProcess] = []

    def start(self, label: str) -> WorkerProcess:
        n = sum(1 for w in self.all if w.log_path.name.startswith(label))
        w = WorkerProcess(
            {**self.names.env(), **self.env},
            self.workdir / f"{label}-data",
            self.workdir / f"{label}-{n}.log",
            "warning",
        )
        self.live[label] = w
        self.all.append(w)
        return w

    def kill(self, label: str) -> None:
        self.live.pop(label).kill()
        self.killed.append(label)

    def supervise(self, t0: float) -> None:
        for label, w in list(self.live.items()):
            if not w.alive():
                self.exited.append({"worker": label, "at_s": round(time.monotonic() - t0, 1), "code": w.proc.returncode,
                                    "log_tail": w.log_tail(15)})  # fmt: skip
                self.start(label)

    def wait_ready(self, label: str, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            w = self.live[label]
            if w.ready():
                return True
            if not w.alive():
                self.supervise(time.monotonic())
            time.sleep(0.5)
        return False

    def stop_all(self) -> None:
        for w in self.live.values():
            try:
                w.stop()
            except Exception:
                w.proc.kill()
