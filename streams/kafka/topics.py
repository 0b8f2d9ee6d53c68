"""Topic admin with kafka-python: every topic the runtime uses is created up front, with our configs.

Faust is told not to declare topics (topic_allow_declare=False): on Kafka 4 the topic-creation path
of some faust versions fails (faust-streaming #667), and its changelog defaults (1 MB messages) are
too small for state snapshots. See docs/adr/0001-kafka-topology.md.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.errors import KafkaError, TopicAlreadyExistsError

from streams.producer import admin_client
from streams.routing import H_DETAIL, H_REASON, H_SEVERITY, H_SRC_LINE, H_SRC_OFFSET, H_SRC_PARTITION, H_SRC_TOPIC
from streams.settings import KafkaSettings, Settings

if TYPE_CHECKING:
    from streams.kafka.stages import DeadLetter


def dead_letter_headers(dl: DeadLetter, topic: str) -> list[tuple[str, bytes]]:
    """What a dead letter says of itself: the reason, and where it came from (topic, partition, offset, and the line
    within a batched input message)."""
    headers = [
        (H_REASON, dl.reason.encode()),
        (H_DETAIL, dl.detail[:2000].encode("utf-8", "replace")),
        (H_SRC_TOPIC, topic.encode()),
        (H_SRC_PARTITION, str(dl.source.partition).encode()),
        (H_SRC_OFFSET, str(dl.offset).encode()),
    ]
    if dl.line is not None:
        headers.append((H_SRC_LINE, str(dl.line).encode()))
    if dl.severity == "warning":
        # Not to be replayed: the event was used; the record says what of it was left out.
        headers.append((H_SEVERITY, b"warning"))
    return headers


@dataclass(frozen=True)
class TopicNames:
    input: str
    alerts: str
    deadletter: str
    join: str
    domain: str
    join_table: str
    domain_table: str
    join_changelog: str
    domain_changelog: str
    direct_table: str
    direct_changelog: str
    assignor_leader: str
    fleet: str


def topic_names(k: KafkaSettings) -> TopicNames:
    # Faust names a table's changelog "<app_id>-<table>-changelog"; the assignor topic is Faust's own.
    return TopicNames(
        input=k.input_topic,
        alerts=k.alerts_topic,
        deadletter=k.deadletter_topic,
        join=f"{k.app_id}.join",
        domain=f"{k.app_id}.domain",
        join_table="joinstate",
        domain_table="domainstate",
        join_changelog=f"{k.app_id}-joinstate-changelog",
        domain_changelog=f"{k.app_id}-domainstate-changelog",
        direct_table="directstate",
        direct_changelog=f"{k.app_id}-directstate-changelog",
        assignor_leader=f"{k.app_id}-__assignor-__leader",
        fleet=f"{k.app_id}.fleet",
    )


def topic_specs(k: KafkaSettings) -> dict[str, tuple[int, dict[str, str]]]:
    """name -> (partitions, configs)."""
    n = topic_names(k)
    big = {"max.message.bytes": str(k.max_message_bytes)}
    compacted = {**big, "cleanup.policy": "compact", "min.compaction.lag.ms": "60000"}
    common = {
        n.input: (k.input_partitions, big),
        n.alerts: (k.alerts_partitions, {}),
        n.deadletter: (1, big),
        n.assignor_leader: (1, {}),
        # What each judging partition told the others (streams/kafka/fleet.py): read whole by every worker from
        # `fleet_replay_s` before its start, so a day is plenty.
        n.fleet: (1, {**big, "retention.ms": str(86_400_000)}),
    }
    if k.topology == "direct":
        # One stage: its state table is co-partitioned with the input (a changelog partition per input one).
        return {**common, n.direct_changelog: (k.input_partitions, compacted)}
    return {
        **common,
        n.join: (k.internal_partitions, big),
        n.domain: (k.internal_partitions, big),
        n.join_changelog: (k.internal_partitions, compacted),
        n.domain_changelog: (k.internal_partitions, compacted),
    }


def ensure_topics(
    k: KafkaSettings, timeout_s: float = 30.0, extra: dict[str, tuple[int, dict[str, str]]] | None = None
) -> dict[str, str]:
    """Create missing topics; check the partition counts of existing ones. Returns name -> created|exists.

    `extra`: more topics (name -> (partitions, configs)) that are created when missing but whose partition
    count is not checked (another party, e.g. the OpenTelemetry Collector, may have created them)."""
    specs = {**(extra or {}), **topic_specs(k)}
    admin = admin_client(k.bootstrap)
    try:
        existing = set(admin.list_topics())
        missing = [
            NewTopic(name, parts, k.replication_factor, topic_configs=cfg)
            for name, (parts, cfg) in specs.items()
            if name not in existing
        ]
        result = {name: "exists" for name in specs if name in existing}
        if missing:
            # Another worker may win the race to create them.
            with contextlib.suppress(TopicAlreadyExistsError):
                admin.create_topics(missing, timeout_ms=int(timeout_s * 1000))
            for t in missing:
                result[t.name] = "created"
        _wait_for_metadata(admin, list(specs), timeout_s)
        actual = describe(admin, list(specs))
        for name, (parts, _) in topic_specs(k).items():
            got = actual.get(name)
            if got is not None and got != parts:
                raise RuntimeError(
                    f"topic {name} has {got} partitions, settings say {parts}: "
                    "partition counts of an existing deployment cannot change (keys would move)"
                )
        return result
    finally:
        admin.close()


def describe(admin: KafkaAdminClient, names: list[str]) -> dict[str, int]:
    """name -> partition count, for the topics that exist."""
    out: dict[str, int] = {}
    for t in admin.describe_topics(names):
        if t.get("error_code", 0) == 0:
            out[t.get("name") or t["topic"]] = len(t["partitions"])
    return out


def _wait_for_metadata(admin: KafkaAdminClient, names: list[str], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if len(describe(admin, names)) == len(names):
                return
        except KafkaError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"topics not visible after {timeout_s}s: {names}")
        time.sleep(0.2)


def delete_topics(bootstrap: str, names: list[str]) -> None:
    admin = admin_client(bootstrap)
    try:
        existing = set(admin.list_topics())
        todo = [n for n in names if n in existing]
        if todo:
            admin.delete_topics(todo)
    finally:
        admin.close()


class TopicsUnavailable(RuntimeError):
    """Topics a command needs are missing and could not be created: one clear message, said once."""


def ensure_bridge_topics(settings: Settings, timeout_s: float = 30.0) -> dict[str, str]:
    """The topics of `crosstalk otlp --from-kafka`: the Collector's (otlp.kafka_topic), which brokers with
    auto-creation off (compose, scripts/kafka.sh, most production clusters) never create, and the
    workers' (input, dead letters). Without this the consumer logged "Topic not found" many times a second."""
    o = settings.otlp
    big = {"max.message.bytes": str(settings.kafka.max_message_bytes)}
    try:
        return ensure_topics(settings.kafka, timeout_s, extra={o.kafka_topic: (o.kafka_partitions, big)})
    except (KafkaError, TimeoutError, OSError) as exc:
        raise TopicsUnavailable(
            f"topic {o.kafka_topic} (and crosstalk's {settings.kafka.input_topic}, {settings.kafka.deadletter_topic}) "
            f"could not be checked or created on {settings.kafka.bootstrap}: {type(exc).__name__}: {exc}. Create "
            f"them (kafka-topics.sh --create --topic {o.kafka_topic} --partitions {o.kafka_partitions}), or let "
            "this process create topics"
        ) from exc
