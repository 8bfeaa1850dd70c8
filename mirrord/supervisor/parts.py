"""mirrord's parts, made once at start in the order they depend on each other: each is handed the parts it
uses, already made (or a function of one), never a reference to one that does not exist yet."""

from __future__ import annotations

import logging
import os
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from mirrord.acks import Acknowledgements
from mirrord.fencing import Election, Lease
from mirrord.identity import FlowIdentity
from mirrord.kafka import admin
from mirrord.metrics import Metrics
from mirrord.mm2 import checkpoints
from mirrord.positions import Positions
from mirrord.settings.flow import Flow
from mirrord.spark import modes
from mirrord.spark.pipeline import check_transforms
from mirrord.spark.session import (
    add_progress_listener,
    java_leave,
    java_members,
    one_line,
    spark_session,
    wait_jvm_exit,
)
from mirrord.supervisor.health import ClusterWatch
from mirrord.supervisor.jobs import SideJobs
from mirrord.supervisor.running import Mirroring
from mirrord.supervisor.scheduler import Scheduler

log = logging.getLogger("mirrord")


@dataclass(frozen=True)
class Parts:
    source: admin.Cluster
    target: admin.Cluster
    election: Election
    positions: Positions
    clusters: ClusterWatch
    spark: object  # pyspark's SparkSession
    mirroring: Mirroring
    acks: Acknowledgements

    def close(self, keep_alive: Callable[[], None]) -> None:
        """The other way round: the query stopped without copying anything twice (`keep_alive` while it
        waits), the election left (a standby takes over at once), Spark stopped and its JVM gone."""
        self.mirroring.stop(keep_alive)
        # bounded: the election consumer's close blocked for good once, its session lapsed during an outage just
        # before the stop (the standby then waits for the session, as after a kill)
        self.election.close(timeout=LEAVE_TIMEOUT)
        if self.mirroring.lease is not None:
            self.mirroring.lease.end()
        try:
            self.spark.stop()
        except Exception as exc:  # noqa: BLE001 - the JVM may already be gone; nothing left to save
            log.warning("Spark did not stop cleanly: %s", one_line(str(exc)))
        wait_jvm_exit()


LEAVE_TIMEOUT = 10.0  # seconds a stop waits to leave the election


def build(flow: Flow, metrics: Metrics, stop: threading.Event, spark_started: Callable[[], None]) -> Parts:
    """Every part, Spark's session among them (`spark_started` runs right after it: pyspark has just taken
    SIGINT), the acknowledgements' reader and the side jobs started; the query is not."""
    s = flow.settings
    enter_work_dir(s.state_dir)
    source = admin.Cluster("source", flow.source_admin)
    target = admin.Cluster("target", flow.target_admin)
    identity = FlowIdentities(s.flow, s.group_id, source)
    election = Election(s, target, identity=identity)
    positions = Positions(source, s.group_id, metrics)
    translation = checkpoints.GroupTranslation(source, target, flow.offset_syncs_topic,
                                               checkpoints.checkpoints_topic(s.source_alias, s.separator))
    clusters = ClusterWatch([source, target], metrics, stop)
    clusters.start()
    master = s.spark_master or f"local[{local_slots(s.num_streams)}]"
    log.info("starting Spark (%s)", master)
    spark = spark_session(s, master)
    spark_started()
    target.java_members = java_members(spark, flow)  # groups asked through Java (admin.Cluster.members)
    election.leave = java_leave(spark, flow)
    clusters.on_return = lambda name, away: election.target_returned(away) if name == "target" else None
    lease = Lease(spark, election) if s.leader_election else None
    check_transforms(spark, flow)
    mirroring = Mirroring(spark, flow, master, source, target, positions, metrics, clusters, translation, lease,
                          identity)
    acks = Acknowledgements(spark, positions, metrics, lambda: mirroring.flow.policy.target_prefix, mirroring.topics,
                            partial(clusters.is_up, "source"))
    add_progress_listener(spark, mirroring.on_progress)
    acks.start(stop)
    SideJobs(mirroring, translation, clusters, election, metrics).start(Scheduler(stop, metrics))
    return Parts(source, target, election, positions, clusters, spark, mirroring, acks)


class FlowIdentities:
    """The flow's identity (mirrord/identity.py), asked of the source once it answers, then kept: the flow's
    name and group.id are not reloadable, and a source cluster keeps its id for life."""

    def __init__(self, flow: str, group_id: str, source: admin.Cluster):
        self.flow = flow
        self.group_id = group_id
        self.source = source
        self._identity: FlowIdentity | None = None

    def __call__(self) -> FlowIdentity:
        if self._identity is None:
            self._identity = FlowIdentity.of(self.flow, self.source.cluster_id(), self.group_id)
            log.info("this flow is %s", self._identity)
        return self._identity


def local_slots(num_streams: int | None) -> int:
    """mirrord's own `local[N]`: a slot per stream of the source and the spare real-time mode needs."""
    return modes.local_slots(modes.default_streams(num_streams, os.cpu_count() or 1))


def enter_work_dir(state_dir: Path) -> None:
    """Spark 4.0 writes `artifacts/` into the working directory (SPARK-52396): make that the state dir,
    and clear what a killed predecessor left there."""
    work = state_dir / "spark"
    shutil.rmtree(work / "artifacts", ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    os.chdir(work)
