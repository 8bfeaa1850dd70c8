"""Topic ACLs copied to the target, as MirrorMaker 2's MirrorSourceConnector does it
(`sync.topic.acls.enabled`, default false as Strimzi advises; every
`sync.topic.acls.interval.seconds`, 600).

Literal ACLs on the mirrored topics are created on the target under the target topic's name. Prefixed
ACLs are not copied, as MirrorMaker 2 (MirrorSourceConnector keeps PatternType.LITERAL only): a copied
prefix covers every topic of that name on the target, its own local topics too. ALLOW WRITE is not
copied (only mirrord writes a mirror), and ALLOW ALL becomes ALLOW READ: consumers keep their access
after a failover, producers do not get one to a copy. ACLs are only
added, never deleted (MirrorMaker 2 neither), and creating one that exists changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, replace

from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from mirrord.errors import MirrordError
from mirrord.kafka.admin import TIMEOUT, Cluster, retrying
from mirrord.settings.policy import Policy, selects

log = logging.getLogger(__name__)


@dataclass(frozen=True, order=True)
class TopicAcl:
    """One topic ACL as plain data: names as Kafka's kafka-acls tool prints them."""

    name: str
    pattern_type: str  # LITERAL, PREFIXED (not copied)
    principal: str
    host: str
    operation: str  # READ, WRITE, ALL, DESCRIBE, ...
    permission: str  # ALLOW or DENY


def target_acls(source: Iterable[TopicAcl], policy: Policy, whitelist: str) -> list[TopicAcl]:
    """The ACLs a target gets for the source's topic ACLs (MirrorMaker 2's rules)."""
    out = set()
    for acl in source:
        if acl.pattern_type != "LITERAL" or acl.name == "*":
            continue  # prefixed: would reach the target's own topics; wildcards: no topic name to map
        if not selects(whitelist, acl.name) or policy.is_cycle(acl.name):
            continue
        if acl.permission == "ALLOW" and acl.operation == "WRITE":
            continue
        operation = "READ" if acl.permission == "ALLOW" and acl.operation == "ALL" else acl.operation
        out.add(replace(acl, name=policy.target_topic(acl.name), operation=operation))
    return sorted(out)


def _plain(binding: AclBinding) -> TopicAcl:
    return TopicAcl(binding.name, binding.resource_pattern_type.name, binding.principal, binding.host,
                    binding.operation.name, binding.permission_type.name)


def _binding(acl: TopicAcl) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, acl.name, ResourcePatternType[acl.pattern_type], acl.principal, acl.host,
                      AclOperation[acl.operation], AclPermissionType[acl.permission])


def topic_acls(cluster: Cluster) -> list[TopicAcl]:
    everything = AclBindingFilter(ResourceType.TOPIC, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                  AclPermissionType.ANY)
    try:
        found = retrying(lambda: cluster.admin.describe_acls(everything, request_timeout=TIMEOUT).result())
    except KafkaException as exc:
        raise MirrordError(f"cannot list the topic ACLs of the {cluster.name} cluster: {exc.args[0].str()}") from None
    return [_plain(b) for b in found]


def sync(source: Cluster, target: Cluster, policy: Policy, whitelist: str) -> int:
    """One round; returns how many ACLs the target refused (each logged)."""
    wanted = target_acls(topic_acls(source), policy, whitelist)
    missing = sorted(set(wanted) - set(topic_acls(target)))
    if not missing:
        return 0
    failed = 0
    futures = target.admin.create_acls([_binding(a) for a in missing], request_timeout=TIMEOUT)
    for binding, future in futures.items():
        try:
            future.result()
            log.info("target ACL created: %s", _plain(binding))
        except KafkaException as exc:
            failed += 1
            log.warning("target refused ACL %s: %s", _plain(binding), exc.args[0].str())
    return failed
