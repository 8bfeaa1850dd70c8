"""The periodic side jobs beside the query (scheduler.py runs them): target topics, topic configs, group
offsets, heartbeats, ACLs, checkpoints, the retirement of gone writers' offset syncs. They run on the flow's
active host only, while both clusters answer; their settings are read at every tick from the running
configuration (`Mirroring.flow`, which a reload replaces)."""

from __future__ import annotations

import time

from mirrord.fencing import Election
from mirrord.metrics import Metrics
from mirrord.mm2 import acls, heartbeats, topic_configs
from mirrord.mm2.checkpoints import GroupTranslation
from mirrord.settings.config import Settings
from mirrord.supervisor.health import ClusterWatch
from mirrord.supervisor.running import Mirroring
from mirrord.supervisor.scheduler import Job, Scheduler

TOPICS_EVERY = 1.0  # new source topics get their target copy within this (their records wait in the producer)


class SideJobs:
    def __init__(self, mirroring: Mirroring, translation: GroupTranslation, clusters: ClusterWatch,
                 election: Election, metrics: Metrics):
        self.mirroring = mirroring
        self.translation = translation
        self.clusters = clusters
        self.election = election
        self.metrics = metrics
        self._heartbeats = heartbeats.Heartbeats(metrics)
        self._seen_configs = topic_configs.SeenConfigs(self.settings.state_dir / "topic-configs.json")

    @property
    def settings(self) -> Settings:
        return self.mirroring.flow.settings

    def start(self, scheduler: Scheduler) -> None:
        for job in self.jobs():
            scheduler.start(job)

    def jobs(self) -> list[Job]:
        return [
            Job("topics", lambda: TOPICS_EVERY, self._topics, lambda: self._up() and self.mirroring.running),
            Job("configs", lambda: self.settings.sync_topic_configs_interval, self._configs,
                lambda: self._up() and self.settings.sync_topic_configs),
            Job("groups", lambda: self.settings.sync_group_offsets_interval, self._groups,
                lambda: self._up() and self.settings.sync_group_offsets and self.translation.ready),
            Job("heartbeats", lambda: self.settings.emit_heartbeats_interval, self._heartbeat,
                lambda: self._up() and self.settings.emit_heartbeats),
            Job("acls", lambda: self.settings.sync_topic_acls_interval, self._acls,
                lambda: self._up() and self.settings.sync_topic_acls),
            Job("checkpoints", lambda: self.settings.emit_checkpoints_interval, self._checkpoints,
                lambda: self._up() and self.settings.emit_checkpoints and self.translation.ready),
            # at the checkpoints' pace, whether they are emitted or not: the syncs' writers come and go anyway
            Job("offset-syncs", lambda: self.settings.emit_checkpoints_interval, self.translation.retire,
                lambda: self._up() and self.settings.retire_offset_syncs and self.translation.ready),
        ]

    def _up(self) -> bool:
        return self.clusters.all_up() and self.election.active()

    def _topics(self) -> int:
        return self.mirroring.ensure_target_topics(self.mirroring.topics())

    def _configs(self) -> int:
        m = self.mirroring
        return topic_configs.sync(m.source, m.target, m.topics(), m.flow.policy, self._seen_configs)

    def _groups(self) -> int:
        """Source groups' offsets, translated, into the target's groups (sync.group.offsets.enabled)."""
        s = self.settings
        return self.translation.sync_group_offsets(self.mirroring.topics(), self.mirroring.flow.policy, s.groups,
                                                   s.groups_exclude, s.group_id)

    def _heartbeat(self) -> int:
        m, s = self.mirroring, self.settings
        return self._heartbeats.run(m.source, m.target, s.source_alias, s.target_alias, m.flow.policy)

    def _acls(self) -> int:
        m = self.mirroring
        return acls.sync(m.source, m.target, m.flow.policy, self.settings.whitelist)

    def _checkpoints(self) -> int:
        """Source groups' offsets, translated, into the checkpoints topic on the target."""
        s = self.settings
        self.translation.emit_checkpoints(self.mirroring.topics(), self.mirroring.flow.policy, s.groups,
                                          s.groups_exclude, s.group_id)
        self.metrics.last_checkpoint.labels(s.flow).set(time.time())
        return 0
