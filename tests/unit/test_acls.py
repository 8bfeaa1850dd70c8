from mirrord.mm2.acls import TopicAcl, target_acls
from mirrord.settings.policy import IdentityPolicy, PrefixPolicy


def acl(name, operation, permission="ALLOW", pattern="LITERAL", principal="User:app"):
    return TopicAcl(name, pattern, principal, "*", operation, permission)


def test_topic_acls_map_as_mirrormaker_2_maps_them():
    source = [acl("orders", "READ"), acl("orders", "WRITE"), acl("orders", "ALL", principal="User:admin"),
              acl("orders", "WRITE", "DENY", principal="User:intruder"), acl("orders.", "DESCRIBE", pattern="PREFIXED"),
              acl("private", "READ"), acl("*", "READ"), acl("right.orders", "READ")]
    assert target_acls(source, PrefixPolicy("left", "right"), "orders.*") == sorted([
        acl("left.orders", "READ"),  # literal, under the target topic's name
        acl("left.orders", "READ", principal="User:admin"),  # ALLOW ALL becomes READ
        acl("left.orders", "WRITE", "DENY", principal="User:intruder"),  # only ALLOW WRITE is dropped
    ])  # not: ALLOW WRITE, prefixed ACLs (they would cover the target's own topics), unmirrored topics, the
    # wildcard, a copy from the target (a cycle)


def test_identity_policy_keeps_the_names():
    assert target_acls([acl("orders", "ALL")], IdentityPolicy(), ".*") == [acl("orders", "READ")]
