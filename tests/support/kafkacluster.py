"""The 3-node KRaft cluster of scripts/kafka-cluster.sh, driven from Python: the fault bench (bench/bench_cluster.py)
and the cluster test (tests/broker/test_kafka_cluster.py) start it, kill and restart nodes, and create topics
whose input and alerts partitions one node leads.
"""

from __future__ import annotations

import os
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.kafkanames import KafkaNames

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "kafka-cluster.sh"
NODES = (1, 2, 3)


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_bases(start: int = 39092, step: int = 10, tries: int = 200) -> tuple[int, int]:
    """Client and controller base ports with three free ports each (base .. base+2 and base+100 ..)."""
    for i in range(tries):
        base = start + i * step
        if all(_free(base + j) and _free(base + 100 + j) for j in range(3)):
            return base, base + 100
    raise RuntimeError("no free ports for a 3-node cluster")


@dataclass
class Cluster:
    """scripts/kafka-cluster.sh with its own home (configs, log dirs, pids) and ports."""

    home: Path | None = None  # None: the script's default (/tmp/crosstalk-kafka-cluster)
    port_base: int | None = None  # None: 29092
    controller_base: int | None = None  # None: 29192
    env: dict[str, str] = field(default_factory=dict)

    def _env(self) -> dict[str, str]:
        env = {**os.environ, **self.env}
        if self.home is not None:
            env["CLUSTER_HOME"] = str(self.home)
        if self.port_base is not None:
            env["CLUSTER_PORT_BASE"] = str(self.port_base)
        if self.controller_base is not None:
            env["CLUSTER_CONTROLLER_BASE"] = str(self.controller_base)
        return env

    def run(self, *argv: str, timeout_s: float = 300.0) -> subprocess.CompletedProcess[str]:
        """The script's command; raises CalledProcessError (its output attached) when it fails."""
        return subprocess.run(
            ["bash", str(SCRIPT), *argv],
            env=self._env(),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=True,
        )

    @property
    def bootstrap(self) -> str:
        return self.run("bootstrap").stdout.strip()

    def kill(self, node: int) -> None:
        self.run("kill", str(node))

    def start(self, node: int) -> None:
        self.run("start", str(node))

    def up(self) -> None:
        self.run("up", timeout_s=900.0)  # the first run fetches the jars

    def down(self, wipe: bool = False) -> None:
        self.run("down", *(["--wipe"] if wipe else []))


def create_led_topics(names: KafkaNames, leader: int) -> None:
    """The pipeline's input and alerts topics with `leader` first in every replica list (so that it leads all
    their partitions), then the rest as the workers create them (kafka.replication_factor of `names`)."""
    from kafka.admin import NewTopic

    from streams.producer import admin_client

    k = names.settings().kafka
    nodes = [leader, *[n for n in NODES if n != leader]][: k.replication_factor]
    big = {"max.message.bytes": str(k.max_message_bytes)}
    admin = admin_client(names.bootstrap)
    try:
        admin.create_topics(
            [
                NewTopic(k.input_topic, -1, -1, dict.fromkeys(range(k.input_partitions), nodes), big),
                NewTopic(k.alerts_topic, -1, -1, dict.fromkeys(range(k.alerts_partitions), nodes), {}),
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
                t.get("name") or t["topic"]: {str(p["partition_index"]): p["leader_id"] for p in t["partitions"]}
                for t in admin.describe_topics(topics)
            }
        finally:
            admin.close()
    except Exception as exc:  # a figure for a report, not a reason to stop
        return {"error": repr(exc)}
