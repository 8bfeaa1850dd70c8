"""Where a query resumes: the checkpoint, or the group's offsets when they are ahead; never below the log start."""

from __future__ import annotations

import json
from types import SimpleNamespace

from mirrord.spark.resume import Resume, resume


class Source:
    def __init__(self, committed: dict, log_starts: dict | None = None):
        self._committed, self._log_starts = committed, log_starts or {}

    def committed(self, group: str, topics: dict) -> dict:
        return dict(self._committed)

    def log_start_offsets(self, tps) -> dict:
        return {tp: self._log_starts.get(tp, 0) for tp in tps}


def settings(tmp_path):
    return SimpleNamespace(checkpoint_dir=tmp_path / "checkpoint", group_id="g")


def checkpoint(tmp_path, offsets: dict) -> None:
    """A Spark checkpoint whose batch 3 committed, ending at `offsets` ({topic: {partition: offset}})."""
    root = tmp_path / "checkpoint"
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    (root / "offsets" / "3").write_text('v1\n{"batchWatermarkMs":0}\n' + json.dumps(offsets) + "\n")
    (root / "commits" / "3").write_text('v1\n{"nextBatchWatermarkMs":0}\n')


TOPICS = {"t": 2}


def test_the_checkpoint_decides_while_the_group_is_not_ahead_of_it(tmp_path):
    checkpoint(tmp_path, {"t": {"0": 10, "1": 20}})
    where = resume(settings(tmp_path), "earliest", Source({("t", 0): 10, ("t", 1): 15}), TOPICS)
    assert where == Resume("earliest")
    assert (tmp_path / "checkpoint").exists()


def test_a_group_ahead_of_the_checkpoint_wins_partition_by_partition_and_the_checkpoint_goes(tmp_path):
    checkpoint(tmp_path, {"t": {"0": 10, "1": 20}})
    where = resume(settings(tmp_path), "earliest", Source({("t", 0): 12, ("t", 1): 15}), TOPICS)
    assert json.loads(where.starting) == {"t": {"0": 12, "1": 20}} and where.lost == {}
    assert not (tmp_path / "checkpoint").exists()


def test_offsets_below_the_log_start_are_reported_lost_and_the_query_starts_at_the_log_start(tmp_path):
    checkpoint(tmp_path, {"t": {"0": 10, "1": 20}})
    source = Source({}, log_starts={("t", 0): 15})
    where = resume(settings(tmp_path), "earliest", source, TOPICS)
    assert json.loads(where.starting) == {"t": {"0": 15, "1": 20}}
    assert where.lost == {("t", 0): (10, 15)}


def test_a_first_start_takes_the_groups_offsets_and_auto_offset_reset_elsewhere(tmp_path):
    (tmp_path / "checkpoint" / "sources" / "0").mkdir(parents=True)  # a first start's leftovers: no batch
    where = resume(settings(tmp_path), "latest", Source({("t", 1): 7}), TOPICS)
    assert json.loads(where.starting) == {"t": {"0": -1, "1": 7}}
    assert not (tmp_path / "checkpoint").exists()
    assert resume(settings(tmp_path), "latest", Source({}), TOPICS) == Resume("latest")
