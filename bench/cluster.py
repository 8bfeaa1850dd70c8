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
        futures = self.admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=30)
        futures[topic].result()
        self._wait(lambda: self.partitions(topic) == partitions, f"topic {topic} to appear")

    def delete(self, *topics: str) -> None:
        present = [t for t in topics if t in self.topics()]
        if not present:
            return
        for f in self.admin.delete_topics(present, operation_timeout=60).values():
            f.result()
        self._wait(lambda: not set(present) & self.topics(), f"topics {present} to go")

    def topics(self) -> set[str]:
        return set(self.admin.list_topics(timeout=10).topics)

    def partitions(self, topic: str) -> int:
        md = self.admin.list_topics(topic, timeout=10).topics.get(topic)
        return 0 if md is None or md.error is not None else len(md.partitions)

    def end_offsets(self, topic: str) -> dict[int, int]:
        """Log-end offset of each partition; {} while the topic does not exist (yet)."""
        n = self.partitions(topic)
        if not n:
            return {}
        request = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(n)}
        try:
            return {tp.partition: f.result().offset
                    for tp, f in self.admin.list_offsets(request, request_timeout=10).items()}
        except KafkaException:
            return {}

    def committed(self, group: str, topic: str, partitions: int) -> dict[int, int]:
        """The group's committed offset of each partition that has one; {} while it has none (yet). Read
        with a consumer of the group that never joins it (the admin client's call crashed librdkafka 2.16
        while the group did not exist yet)."""
        if group not in self._groups:
            self._groups[group] = Consumer({"bootstrap.servers": self.bootstrap, "group.id": group,
                                            "enable.auto.commit": False, "log_level": 4})
        try:
            answer = self._groups[group].committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        except KafkaException:
            return {}
        return {tp.partition: tp.offset for tp in answer if tp.offset >= 0}

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
