"""The cluster fault bench's moving parts (the cluster itself: tests/support/kafkacluster.py): a paced producer
that counts what the cluster refused, an alert reader that stamps every alert's arrival, and the workers, started
again as a supervisor would if one exits on its own.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import orjson

from streams.producer import make_producer, produce_file
from streams.settings import KafkaSettings
from tests.support.kafkanames import KafkaNames
from tests.support.workerproc import WorkerProcess

LEADER = 1  # the node that leads every input and alerts partition (fault a kills it)


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
        self.pulse_domain: dict[str, str] = {}  # alert id -> pulse domain
        self.shown: dict[str, str] = {}  # alert id -> kind/severity and request ids
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
                    if a["alert_id"] not in self.arrivals:  # what a report shows of an unexpected alert (no text)
                        self.shown[a["alert_id"]] = f"{a.get('kind')}/{a.get('severity')} {a.get('request_ids')}"
                    self.arrivals.setdefault(a["alert_id"], []).append(now)
                    for rid in a.get("request_ids") or ():
                        if "-pulse-" in rid:  # a pulse: which partition's steady alerts it is one of
                            self.pulse_domain[a["alert_id"]] = rid.rsplit("-pulse-", 1)[0]
        self.consumer.close()


class Workers:
    """Workers of one pipeline; one that exits without being killed here is counted and started again on its
    data dir (as compose's restart policy or systemd would)."""

    def __init__(self, names: KafkaNames, env: dict[str, str], workdir: Path, loglevel: str = "warning") -> None:
        self.names, self.env, self.workdir, self.loglevel = names, env, workdir, loglevel
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
            self.loglevel,
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
