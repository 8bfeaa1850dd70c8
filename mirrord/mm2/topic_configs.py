"""Target topics follow their source topics' configs: MirrorMaker 2's sync.topic.configs, with
incremental alter configs, and without clobbering what an operator set on the target.

Every `sync.topic.configs.interval.seconds` a changed or new config of a source topic is set on its
target topic, and a config deleted from the source topic is deleted from the target topic, but only
where mirrord copied it: what each source topic held at the previous round is remembered in the state
dir (`topic-configs.json`), so a config that was never on the source, or that an operator changed on
the target since, stays. Without that memory (first round, a new host) nothing is deleted.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from pathlib import Path

from mirrord.errors import MirrordError
from mirrord.kafka.admin import Cluster
from mirrord.settings.policy import Policy, topic_config_changes, topic_config_deletions

log = logging.getLogger(__name__)


class SeenConfigs:
    """Each source topic's own configs at the last round, kept in a file so a restart remembers them."""

    def __init__(self, path: Path):
        self.path = path
        try:
            self.topics: dict[str, dict[str, str]] = json.loads(path.read_text())
        except (OSError, ValueError):
            self.topics = {}

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(self.topics, sort_keys=True))
        os.replace(tmp, self.path)


def sync(source: Cluster, target: Cluster, topics: Iterable[str], policy: Policy, seen: SeenConfigs) -> int:
    """One round; returns the number of topics that could not be synced (each logged)."""
    failed = 0
    topics = list(topics)
    wanted = source.topic_configs(topics)
    names = {t: policy.target_topic(t) for t in topics}
    existing = target.partitions()
    have = target.topic_configs(n for n in names.values() if n in existing)
    for topic, name in sorted(names.items()):
        if name not in have:
            continue  # not created yet: ensure_topics copies the configs when it creates it
        now = wanted.get(topic, {})
        changes = topic_config_changes(now, have[name])
        deleted = topic_config_deletions(seen.topics[topic], now, have[name]) if topic in seen.topics else set()
        if changes or deleted:
            try:
                target.set_topic_configs(name, changes, deleted)
            except MirrordError as exc:
                failed += 1
                log.warning("%s", exc)
                continue
            log.info("target topic %s: configs updated (%s)", name, ", ".join(
                [f"{k}={v}" for k, v in sorted(changes.items())] + [f"{k} deleted" for k in sorted(deleted)]))
        seen.topics[topic] = now
    seen.save()
    return failed
