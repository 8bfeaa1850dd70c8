"""A consumer group's members, as the daemon asks for them: through the Java client when its JVM runs
(admin.Cluster.members: librdkafka's DescribeConsumerGroups can abort the process on a dropped connection)."""

from __future__ import annotations

from mirrord.kafka.admin import Cluster, Member


def test_a_daemon_asks_for_a_groups_members_through_the_java_client_and_never_librdkafka():
    target = Cluster("target", {"bootstrap.servers": "127.0.0.1:9"})  # nothing listens: librdkafka would time out
    asked = []

    def java_members(group: str, timeout: float) -> list[Member]:
        asked.append((group, timeout))
        return [Member("mirrord-a", "/10.0.0.1", True), Member("mirrord-b", "/10.0.0.2", False)]

    target.java_members = java_members
    assert target.assigned_clients("flow.leader") == ["mirrord-a"]
    assert target.group_members("billing") == ["mirrord-a@/10.0.0.1", "mirrord-b@/10.0.0.2"]
    assert target.group_has_members("billing")
    assert [g for g, _ in asked] == ["flow.leader", "billing", "billing"]
