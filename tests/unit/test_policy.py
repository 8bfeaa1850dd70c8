import re

import pytest

from mirrord.settings.policy import (
    IdentityPolicy,
    PrefixPolicy,
    checkpoints_topic,
    is_internal,
    make_policy,
    offset_syncs_topic,
    selects,
    subscribe_pattern,
    topic_config_changes,
    topic_config_deletions,
    topic_configs_to_copy,
)


def test_identity_keeps_the_name_and_prefix_adds_the_source_alias():
    assert IdentityPolicy().target_topic("orders") == "orders"
    assert PrefixPolicy("eu", "central").target_topic("orders") == "eu.orders"
    assert PrefixPolicy("eu", "central", "_").target_topic("orders") == "eu_orders"


def test_prefix_policy_refuses_copies_that_came_from_the_target():
    policy = PrefixPolicy("left", "right")
    assert policy.is_cycle("right.orders")
    assert policy.is_cycle("other.right.orders")
    assert not policy.is_cycle("orders")
    assert not policy.is_cycle("orders.v1")
    assert not policy.is_cycle("right")


def test_subscribe_pattern_excludes_internal_topics_and_cycles():
    pattern = subscribe_pattern(".*", PrefixPolicy("left", "right"))
    assert selects(pattern, "orders")
    assert selects(pattern, "orders.v1")
    for topic in ("__consumer_offsets", "__transaction_state", "mm2-offset-syncs.right.internal",
                  "right.orders", "x.right.orders"):
        assert not selects(pattern, topic), topic
    identity = subscribe_pattern("prd-(a|b)", IdentityPolicy())
    assert selects(identity, "prd-a") and not selects(identity, "prd-ab") and not selects(identity, "xprd-a")


def test_heartbeats_are_mirrored_whatever_the_whitelist_but_never_back_to_their_cluster():
    prefix = subscribe_pattern("orders", PrefixPolicy("left", "right"))
    for topic in ("heartbeats", "east.heartbeats", "east.west.heartbeats"):
        assert selects(prefix, topic), topic
    for topic in ("right.heartbeats", "east.right.heartbeats", "heartbeats2", "myheartbeats"):
        assert not selects(prefix, topic), topic
    identity = subscribe_pattern("orders", IdentityPolicy())
    assert selects(identity, "heartbeats") and not selects(identity, "east.heartbeats")


def test_the_pattern_holds_where_spark_only_searches_for_it():
    """Spark's Kafka source keeps a topic when the pattern is found anywhere in its name (findFirstIn)."""
    prefix = subscribe_pattern(".*orders.*", PrefixPolicy("left", "right"))
    assert re.search(prefix, "orders") and re.search(prefix, "left.orders")
    for topic in ("right.orders", "x.right.orders", "right.heartbeats", "__orders", "orders.internal"):
        assert not re.search(prefix, topic), topic
    identity = subscribe_pattern("prd-(a|b)", IdentityPolicy())
    for topic in ("xprd-a", "prd-ab", "my.heartbeats"):
        assert not re.search(identity, topic), topic
def test_topics_exclude_applies_after_the_whitelist_to_the_whole_name():
    pattern = subscribe_pattern("prd-.*", IdentityPolicy(), "prd-internal-.*|prd-tmp")
    assert selects(pattern, "prd-orders") and selects(pattern, "prd-tmp2") and selects(pattern, "prd-internals")
    for topic in ("prd-internal-audit", "prd-tmp", "dev-orders"):
        assert not selects(pattern, topic), topic


def test_cycle_rule_and_regex_agree():
    policy = PrefixPolicy("left", "right")
    pattern = subscribe_pattern(".*", policy)
    for topic in ("a", "right.a", "a.right", "a.right.b", "right", "rightish.a", "a.b.c", "left.right.a"):
        assert selects(pattern, topic) == (not policy.is_cycle(topic) and not is_internal(topic)), topic


def test_topic_configs_of_the_data_are_copied_and_those_of_the_target_cluster_are_not():
    source_topic = {"retention.ms": "-1", "cleanup.policy": "compact", "max.message.bytes": "2097152",
                    "min.insync.replicas": "2", "unclean.leader.election.enable": "true",
                    "message.timestamp.type": "LogAppendTime", "leader.replication.throttled.replicas": "*",
                    "remote.storage.enable": "true", "local.retention.ms": "3600000"}
    assert topic_configs_to_copy(source_topic) == {
        "retention.ms": "-1", "cleanup.policy": "compact", "max.message.bytes": "2097152"}


def test_only_configs_that_differ_from_the_source_are_set_and_target_only_ones_are_kept():
    source = {"retention.ms": "-1", "cleanup.policy": "compact", "min.insync.replicas": "2"}
    target = {"retention.ms": "604800000", "cleanup.policy": "compact", "segment.bytes": "1048576"}
    assert topic_config_changes(source, target) == {"retention.ms": "-1"}
    assert topic_config_changes(source, {"retention.ms": "-1", "cleanup.policy": "compact"}) == {}


def test_a_config_deleted_on_the_source_is_deleted_on_the_target_only_where_mirrord_copied_it():
    before = {"retention.ms": "-1", "segment.ms": "3600000", "min.insync.replicas": "2"}
    now = {"retention.ms": "-1"}
    target = {"retention.ms": "-1", "segment.ms": "3600000", "segment.bytes": "1048576", "min.insync.replicas": "2"}
    assert topic_config_deletions(before, now, target) == {"segment.ms"}
    assert topic_config_deletions(before, now, {**target, "segment.ms": "60000"}) == set(), "changed on the target"
    assert topic_config_deletions({}, now, target) == set(), "set only on the target"


@pytest.mark.parametrize(("separator", "syncs", "checkpoints"), [
    (".", "mm2-offset-syncs.eu.internal", "eu.checkpoints.internal"),
    ("_", "mm2-offset-syncs_eu_internal", "eu_checkpoints_internal"),
])
def test_internal_topics_are_named_with_the_separator_as_mirrormaker_2s_default_policy(separator, syncs, checkpoints):
    """DefaultReplicationPolicy with replication.policy.internal.topic.separator.enabled (its default): what
    RemoteClusterUtils.translateOffsets looks for, given the same separator."""
    assert offset_syncs_topic("eu", separator) == syncs
    assert checkpoints_topic("eu", separator) == checkpoints
    assert is_internal(syncs, separator) and is_internal(checkpoints, separator)


def test_internal_topics_of_either_separator_are_never_mirrored():
    pattern = subscribe_pattern(".*", make_policy("prefix", "eu", "us", "_"), separator="_")
    for topic in ("mm2-offset-syncs_eu_internal", "eu_checkpoints_internal", "x.internal", "__consumer_offsets"):
        assert not selects(pattern, topic), topic
    assert selects(pattern, "orders") and selects(pattern, "internal_audit")
