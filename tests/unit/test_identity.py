"""A flow's names on the target come from its identity alone, and two identities never spell one name."""

from __future__ import annotations

import itertools
import re
from types import SimpleNamespace

import pytest

from mirrord.fencing import election as election_module
from mirrord.fencing.election import Election
from mirrord.identity import FlowIdentity, Legacy

FLOWS = ["a", "a-b", "a.b", "a_b", "default", "b-c", "a.b.c", "x" * 150]
CLUSTERS = ["MkU3OEVBNTcwNTJENDM2Qk", "c-d_EfGhIjKlMnOpQrStUv", "c", "MkU3OEVBNTcwNTJENDM2Qg"]
GROUPS = ["mirrormaker", "mm-consumer", "a.b/c d"]
TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")


def names(identity: FlowIdentity) -> tuple[str, ...]:
    return (identity.election_group, identity.election_topic, identity.positions_topic,
            f"{identity.transactional_prefix}-0", f"{identity.transactional_prefix}-12")


def test_two_flows_two_source_clusters_or_two_groups_never_share_a_name_on_the_target():
    identities = [FlowIdentity.of(f, c, g) for f, c, g in itertools.product(FLOWS, CLUSTERS, GROUPS)]
    for one, other in itertools.combinations(identities, 2):
        assert not set(names(one)) & set(names(other)), (one, other)


def test_parts_that_ran_together_under_the_release_before_no_longer_collide():
    """flow `a` alias `b-c` and flow `a-b` alias `c` had one transactional id: `mirrord-a-b-c-0`."""
    assert Legacy("g", "a", "b-c").transactional_prefix == Legacy("g", "a-b", "c").transactional_prefix
    cluster = CLUSTERS[0]
    assert (FlowIdentity.of("a", cluster, "g").transactional_prefix
            != FlowIdentity.of("a-b", cluster, "g").transactional_prefix)


def test_the_names_are_legal_kafka_topic_names_whatever_the_cluster_id_holds():
    for identity in (FlowIdentity.of("x" * 150, "ab.c/d", "g" * 300),
                     FlowIdentity.of("f", "MkU3OEVBNTcwNTJENDM2Qk", "")):
        assert "." not in identity.cluster_id
        for topic in (identity.election_topic, identity.positions_topic):
            assert TOPIC.fullmatch(topic) and topic.endswith(".internal"), topic


class FakeTarget:
    def __init__(self, members):
        self.members = members
        self.asked = 0

    def group_members(self, group):
        self.asked += 1
        return list(self.members.get(group, []))


@pytest.fixture
def joined(monkeypatch):
    """Leadership and topic creation replaced: what Election decides, not Kafka's part."""
    made = []

    class Leadership:
        def __init__(self, settings, identity, *rest):
            self.identity = identity
            self.group = identity.election_group
            made.append(identity)

        def start(self):
            pass

        def is_active(self):
            return True

    monkeypatch.setattr(election_module, "Leadership", Leadership)
    monkeypatch.setattr(election_module.admin, "ensure_internal_topic", lambda *a: None)
    monkeypatch.setattr(election_module.atexit, "register", lambda f: None)
    return made


def test_a_host_waits_while_hosts_of_the_release_before_hold_the_old_election_then_joins_its_flows(joined,
                                                                                                   monkeypatch):
    settings = SimpleNamespace(leader_election=True, leader_session_timeout_ms=10_000, group_id="mirrormaker",
                               flow="uk", source_alias="source")
    target = FakeTarget({"mirrormaker.leader": ["mirrord-leader-0123@10.0.0.1"]})
    identity = FlowIdentity.of("uk", "MkU3OEVBNTcwNTJENDM2Qk", "mirrormaker")
    e = Election(settings, target, identity=lambda: identity)
    now = [1000.0]
    monkeypatch.setattr(election_module.time, "monotonic", lambda: now[0])
    assert e.elected({}) is False and not e.active() and not joined
    assert e.standby_reason() == "hosts of an earlier mirrord release are in election group mirrormaker.leader"
    e.elected({})
    assert target.asked == 1  # looked at again only every EARLIER_EVERY seconds
    target.members.clear()
    now[0] += Election.EARLIER_EVERY
    e.elected({})
    assert joined == [identity] and e.active()
    now[0] += 60
    e.elected({})
    assert target.asked == 2  # once seen empty, never asked again
    assert e.standby_reason() == (f"another host mirrors flow uk of source cluster {identity.cluster_id}, group.id "
                                  f"mirrormaker (election group mirrord-leader.uk.{identity.cluster_id}."
                                  f"{identity.group_hash})")
