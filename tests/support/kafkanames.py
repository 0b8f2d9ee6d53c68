"""One isolated pipeline on a shared broker: a unique app id and the topics named after it.

Shared by the Kafka tests (the `kafka_names` fixture of tests/conftest.py) and the Kafka benchmark, so
that runs never see each other's messages and leftovers of an interrupted run are harmless.
"""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass, field
from typing import Any

from streams.settings import Settings
from tests.support.workerproc import kafka_env


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@dataclass
class KafkaNames:
    """Unique app id and topics; as a context manager the topics exist inside the block and are deleted
    after it, whatever happened."""

    bootstrap: str
    app_id: str = field(default_factory=lambda: _unique("ct"))
    kafka: dict[str, Any] = field(default_factory=dict)  # Kafka settings of this pipeline beyond the names

    @classmethod
    def unique(cls, bootstrap: str, prefix: str, **kafka: Any) -> KafkaNames:
        return cls(bootstrap, f"{prefix}-{uuid.uuid4().hex[:8]}", kafka)

    @property
    def input_topic(self) -> str:
        return f"{self.app_id}.events"

    @property
    def alerts_topic(self) -> str:
        return f"{self.app_id}.alerts"

    @property
    def deadletter_topic(self) -> str:
        return f"{self.app_id}.deadletter"

    def env(self) -> dict[str, str]:
        """Settings env for a worker of this pipeline (WorkerProcess)."""
        return kafka_env(self.bootstrap, self.app_id)

    def settings(self, **sections: Any) -> Settings:
        """Settings whose Kafka section names this pipeline; other sections as given."""
        # A dict, not a KafkaSettings: the settings sources merge it with env like any other input.
        kafka: Any = {
            # As the workers of kafka_env: the staged topology unless the test asks for the direct one (the default).
            "topology": "staged",
            "bootstrap": self.bootstrap,
            "app_id": self.app_id,
            "input_topic": self.input_topic,
            "alerts_topic": self.alerts_topic,
            "deadletter_topic": self.deadletter_topic,
            **self.kafka,
            **sections.pop("kafka", {}),
        }
        return Settings(kafka=kafka, **sections)

    def create(self) -> None:
        from streams.kafka.topics import ensure_topics

        ensure_topics(self.settings().kafka)

    def delete(self) -> None:
        from streams.kafka.topics import delete_topics, topic_specs

        with contextlib.suppress(Exception):  # best effort: unique names keep leftovers harmless
            k = self.settings().kafka
            # Either topology's topics: a test may have run its workers with kafka.topology=direct.
            names = set(topic_specs(k)) | set(topic_specs(k.model_copy(update={"topology": "direct"})))
            delete_topics(self.bootstrap, sorted(names))

    def __enter__(self) -> KafkaNames:
        try:
            self.create()
        except BaseException:
            self.delete()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.delete()
