"""One active host per flow, and the fence that keeps it one: the one module for both (docs/decisions.md §6).

The election. Every host running the flow joins one consumer group (`mirrord-leader.<flow>.<source cluster
id>`, mirrord/identity.py) subscribed to a one-partition topic on the target (the group's name + `.internal`);
the group coordinator assigns that partition to one member, and that member mirrors; the others stand by.
Nothing is ever consumed from the topic: membership is the whole protocol, as MirrorMaker 1 users ran several
instances in one group.

The lease. The elected host confirms its membership every tenth of the session by committing an offset to
the election's group: Kafka's coordinator accepts a commit only from a member of the group's current
generation, and restarts that member's session when it does, so it cannot hand the flow to another host
before the start of that commit plus the session. Spark's JVM, which sends the records, holds a lease
(io.mirrord.fencing.Fence) granted up to `lease_ms` (half the session) after the start of the last
confirmed commit, checked against a monotonic and a wall clock; the producers' timeouts are bounded so that
a record the JVM accepted before the lease ran out is delivered or failed before the coordinator could
hand the flow over (`Timing`, `bound_producer`). Leaving the election on purpose, or because the lease was
lost, waits for what was sent under it first (`Election.close`), so a standby takes over at once, never
beside this host.
"""

from mirrord.fencing.election import Confirmations, Election, Leadership
from mirrord.fencing.lease import FENCED, HELD, LAPSED, OFF, JvmFence, Lease
from mirrord.fencing.timing import Clock, Stamp, Timing, bound_producer, lease_ms

__all__ = ["FENCED", "HELD", "LAPSED", "OFF", "Clock", "Confirmations", "Election", "JvmFence", "Leadership", "Lease",
           "Stamp", "Timing", "bound_producer", "lease_ms"]
