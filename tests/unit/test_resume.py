"""Where a query resumes: the positions' owner's commits for the topic's current incarnation, else the checkpoint,
or a legacy group's offsets when they are ahead; a recreated topic from its start; never below the log start."""

from __future__ import annotations

import json
from types import SimpleNamespace

from mirrord.spark.resume import Resume, resume, resume_committed


class Source:
    """committed: {tp: offset} (no metadata, as MirrorMaker 1 commits) or {tp: (offset, metadata)}."""

    def __init__(self, committed: dict, log_starts: dict | None = None, ids: dict | None = None):
        self._committed, self._log_starts, self._ids = committed, log_starts or {}, ids or {}

    def committed_with_metadata(self, group: str, topics: dict) -> dict:
        return {tp: v if isinstance(v, tuple) else (v, "") for tp, v in self._committed.items()}

    def topic_ids(self, topics) -> dict:
        return {t: i for t, i in self._ids.items() if t in topics}

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


def owned(offset: int, topic_id: str = "AAAAAAAAAAAAAAAAAAAAAQ") -> tuple[int, str]:
    """A commit by the positions' owner (io.mirrord.positions.GroupCommitter): the topic's id in its metadata."""
    return offset, f"mirrord topic-id={topic_id}"


def test_the_owners_commit_for_the_topic_as_it_is_now_wins_also_behind_the_checkpoint(tmp_path):
    """The checkpoint may be from before the topic was recreated: the owner's commit is this incarnation's truth."""
    checkpoint(tmp_path, {"t": {"0": 50, "1": 20}})
    source = Source({("t", 0): owned(5), ("t", 1): owned(20)}, ids={"t": "AAAAAAAAAAAAAAAAAAAAAQ"})
    where = resume(settings(tmp_path), "earliest", source, TOPICS)
    assert json.loads(where.starting) == {"t": {"0": 5, "1": 20}}
    assert not (tmp_path / "checkpoint").exists()


def test_a_topic_recreated_since_the_owners_commit_is_read_from_its_start(tmp_path):
    checkpoint(tmp_path, {"t": {"0": 50, "1": 60}})
    source = Source({("t", 0): owned(50, "old"), ("t", 1): owned(60, "old")}, ids={"t": "new"})
    where = resume(settings(tmp_path), "latest", source, TOPICS)
    assert json.loads(where.starting) == {"t": {"0": -2, "1": -2}} and where.lost == {}


def test_the_checkpoint_decides_when_the_owners_commits_say_the_same(tmp_path):
    checkpoint(tmp_path, {"t": {"0": 10, "1": 20}})
    source = Source({("t", 0): owned(10), ("t", 1): owned(20)}, ids={"t": "AAAAAAAAAAAAAAAAAAAAAQ"})
    assert resume(settings(tmp_path), "earliest", source, TOPICS) == Resume("earliest")


def test_an_owners_commit_read_with_bytes_past_its_end_still_names_its_topic(tmp_path):
    """confluent-kafka copies fetched metadata up to a NUL: a commit without one (mirrord before 0.5) came back
    with whatever followed it in memory; the id is the 22 characters after the prefix."""
    checkpoint(tmp_path, {"t": {"0": 50, "1": 60}})
    topic_id = "AAAAAAAAAAAAAAAAAAAAAQ"
    source = Source({("t", 0): owned(5, topic_id + "\x01\x7f"), ("t", 1): owned(6, topic_id)}, ids={"t": topic_id})
    where = resume(settings(tmp_path), "earliest", source, TOPICS)
    assert json.loads(where.starting) == {"t": {"0": 5, "1": 6}}


class SourceWithEnds(Source):
    def __init__(self, committed: dict, ends: dict, log_starts: dict | None = None):
        super().__init__(committed, log_starts)
        self._ends = ends

    def end_offsets(self, tps) -> dict:
        return {tp: self._ends[tp] for tp in tps}


def test_exactly_once_resumes_from_the_targets_committed_positions_whatever_the_checkpoint_and_group_say(tmp_path):
    checkpoint(tmp_path, {"t": {"0": 50, "1": 60}})  # ahead: a batch the transactions never committed
    source = SourceWithEnds({("t", 0): 45, ("t", 1): 9}, ends={("t", 0): 70})
    where = resume_committed(settings(tmp_path), "earliest", source, TOPICS,
                             {("t", 0): (40, "id-t"), ("x", 0): (3, None)}, {"t": "id-t"})
    # t-0 from the target's position (behind the group: the group is for the lag tools); t-1, which no
    # transaction reached yet, from the group; a topic no longer mirrored is left out
    assert json.loads(where.starting) == {"t": {"0": 40, "1": 9}} and where.lost == {}
    assert not (tmp_path / "checkpoint").exists()


def test_exactly_once_reads_a_partition_from_its_start_when_its_position_is_past_its_end(tmp_path):
    source = SourceWithEnds({}, ends={("t", 0): 5, ("t", 1): 30}, log_starts={("t", 1): 25})
    where = resume_committed(settings(tmp_path), "latest", source, TOPICS,
                             {("t", 0): (900, None), ("t", 1): (20, None)}, {})
    assert json.loads(where.starting) == {"t": {"0": -2, "1": 25}}  # recreated; below the log start: lost
    assert where.lost == {("t", 1): (20, 25)}
    assert resume_committed(settings(tmp_path), "latest", SourceWithEnds({}, {}), TOPICS, {}, {}) == Resume("latest")


def test_exactly_once_reads_a_recreated_topic_from_its_start_though_it_grew_past_the_position(tmp_path):
    source = SourceWithEnds({}, ends={("t", 0): 300, ("t", 1): 300})
    where = resume_committed(settings(tmp_path), "latest", source, TOPICS,
                             {("t", 0): (200, "old-id"), ("t", 1): (200, "new-id")}, {"t": "new-id"})
    assert json.loads(where.starting) == {"t": {"0": -2, "1": 200}}
