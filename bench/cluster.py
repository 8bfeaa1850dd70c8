"""Topics and offsets on the bench's source and target clusters (confluent-kafka AdminClient)."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec


class Cluster:
    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap
        self.admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
        self._groups: dict[str, Consumer] = {}  # a client per group whose commits are read, never subscribed

    def create(self, topic: str, partitions: int) -> None:
        self.create_many([topic], partitions)

    def create_many(self, topics: list[str], partitions: int) -> None:
        """Create the topics (in one request) and wait until the metadata shows every partition of each."""
        if not topics:
            return
        for f in self.admin.create_topics([NewTopic(t, partitions, 1) for t in topics], operation_timeout=60).values():
            f.result()

        def there() -> bool:
            md = self.admin.list_topics(timeout=10).topics
            return all(t in md and md[t].error is None and len(md[t].partitions) == partitions for t in topics)

        self._wait(there, f"{len(topics)} topics ({topics[0]}, ...) to appear" if len(topics) > 1
                   else f"topic {topics[0]} to appear")

    def delete(self, *topics: str) -> None:
        present = [t for t in topics if t in self.topics()]
        if not present:
            return
        for f in self.admin.delete_topics(present, operation_timeout=60).values():
            f.result()
        self._wait(lambda: not set(present) & self.topics(), f"topics {present} to go")

    def topics(self) -> set[str]:
        return set(self.admin.list_topics(timeout=10).topics)

    def end_offsets_many(self, topics: list[str]) -> dict[tuple[str, int], int]:
        """Log-end offset of each (topic, partition) of those of the topics that exist, in one metadata and one
        offsets request; a partition whose offset could not be had (a topic just created) is left out."""
        md = self.admin.list_topics(timeout=10).topics
        request = {TopicPartition(t, p): OffsetSpec.latest()
                   for t in topics if t in md and md[t].error is None for p in md[t].partitions}
        if not request:
            return {}
        out = {}
        try:
            futures = self.admin.list_offsets(request, request_timeout=10)
        except KafkaException:
            return {}
        for tp, f in futures.items():
            try:
                out[(tp.topic, tp.partition)] = f.result().offset
            except KafkaException:
                pass
        return out

    def committed_many(self, group: str, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """The group's committed offset of each (topic, partition) that has one; {} while it has none (yet). Read
        with a consumer of the group that never joins it (the admin client's call crashed librdkafka 2.16
        while the group did not exist yet)."""
        if group not in self._groups:
            self._groups[group] = Consumer({"bootstrap.servers": self.bootstrap, "group.id": group,
                                            "enable.auto.commit": False, "log_level": 4})
        try:
            answer = self._groups[group].committed([TopicPartition(t, p) for t, p in partitions], timeout=10)
        except KafkaException:
            return {}
        return {(tp.topic, tp.partition): tp.offset for tp in answer if tp.offset >= 0}

    def forget(self, group: str) -> None:
        """Close the group's client (after its run)."""
        consumer = self._groups.pop(group, None)
        if consumer is not None:
            consumer.close()

    @staticmethod
    def _wait(cond, what: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not cond():
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out waiting for {what}")
            time.sleep(0.1)
