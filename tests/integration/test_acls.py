"""Topic ACLs copied to the target as MirrorMaker 2 does (sync.topic.acls.enabled), against brokers with
StandardAuthorizer, mirrord reading the source over SASL (SCRAM-SHA-512) as a user with ACLs of its own."""

from __future__ import annotations

from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from tests.harness.kafka import SCRAM_USER
from tests.harness.mirrord import Mirrord, write_flow
from tests.harness.records import create_topic, wait_until

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
LITERAL, PREFIXED = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


def acl(name: str, pattern: ResourcePatternType, principal: str, operation: AclOperation,
        permission: AclPermissionType = ALLOW) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, name, pattern, principal, "*", operation, permission)


def topic_acls(bootstrap: str, names: set[str]) -> set[tuple]:
    """The cluster's topic ACLs on these names, as kafka-acls --list shows them."""
    admin = AdminClient({"bootstrap.servers": bootstrap})  # held until the answer came: its handle serves it
    found = admin.describe_acls(AclBindingFilter(ResourceType.TOPIC, None, ResourcePatternType.ANY, None, None,
                                                 AclOperation.ANY, AclPermissionType.ANY)).result(30)
    return {(b.name, b.resource_pattern_type.name, b.principal, b.operation.name, b.permission_type.name)
            for b in found if b.name in names}


def test_topic_acls_are_copied_as_mirrormaker_2_does_allow_write_dropped_and_all_read(kafka_pair, unique, tmp_path):
    source, target = kafka_pair
    topic, prefix, outside = unique("acl"), unique("aclp"), unique("acl-outside")
    for name in (topic, f"{prefix}-x", outside):
        create_topic(source.bootstrap, name, 1)
    bindings = [
        acl(topic, LITERAL, "User:alice", AclOperation.READ),
        acl(topic, LITERAL, "User:alice", AclOperation.WRITE),  # a mirror is written by mirrord only
        acl(topic, LITERAL, "User:mallory", AclOperation.READ, DENY),
        acl(prefix, PREFIXED, "User:bob", AclOperation.ALL),  # prefixed: not copied, as MirrorMaker 2
        acl(outside, LITERAL, "User:alice", AclOperation.READ),  # not mirrored: not copied
        # mirrord's own user reads the topics and their configs (sync.topic.configs)
        acl(topic, LITERAL, f"User:{SCRAM_USER}", AclOperation.ALL),
        acl(prefix, PREFIXED, f"User:{SCRAM_USER}", AclOperation.ALL),
    ]
    admin = AdminClient({"bootstrap.servers": source.bootstrap})
    for future in admin.create_acls(bindings).values():
        future.result(30)
    password = source.scram_users[SCRAM_USER]
    sasl = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": f'{SCRAM} required username="{SCRAM_USER}" password="{password}";'}
    # the target is written by a super user: copied ACLs make its topics READ-only for everyone else
    # as MirrorMaker 2, prefixed ACLs stay behind: on the target they would cover its own topics too
    config = write_flow(tmp_path, source.sasl_bootstrap, target.bootstrap, f"{topic}|{prefix}.*",
                        group=unique("acl-group"), consumer=sasl,
                        conf={"sync.topic.acls.enabled": "true", "sync.topic.acls.interval.seconds": "1"})
    expected = {
        (topic, "LITERAL", "User:alice", "READ", "ALLOW"),
        (topic, "LITERAL", "User:mallory", "READ", "DENY"),
        (topic, "LITERAL", f"User:{SCRAM_USER}", "READ", "ALLOW"),
    }
    daemon = Mirrord(config).start()
    try:
        daemon.wait_ready()
        names = {topic, prefix, outside}
        wait_until(lambda: topic_acls(target.bootstrap, names) == expected, 60, "the source's topic ACLs copied")
        assert daemon.stop() == 0
    finally:
        daemon.stop()
