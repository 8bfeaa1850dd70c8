"""The many-topics shape: topic names, one regex for all of them (late ones too), the even spread of records,
what the stream's producer tells its consumer, and how the contenders are told to look for new topics.

No brokers: tests/bench/test_smoke.py runs the harness itself.
"""

from __future__ import annotations

import math
import re
from collections import Counter

import pytest

from bench import latency, load, run
from bench.contenders import NEW_TOPICS_REFRESH_S, Ctx, Mirrord, MirrorMaker1, MirrorMaker2, Run, SparkBuiltin
from bench.shape import Shape, slots


def test_one_topic_is_todays_shape():
    shape = Shape.of(1, 12)
    assert (shape.topics, shape.partitions, shape.late, shape.per_topic) == (1, 12, 0, 12)
    assert shape.names("bench1a-bf100") == ["bench1a-bf100"]
    assert shape.split(["bench1a-latx"]) == (["bench1a-latx"], [])
    assert re.fullmatch(shape.pattern("bench1a-bf100"), "bench1a-bf100")
    assert not re.fullmatch(shape.pattern("bench1a-bf100"), "bench1a-bf1000")
    assert shape.label() == "12 partitions"


def test_many_topics_split_the_partitions_and_the_late_ones_come_last():
    shape = Shape.of(200, 600)
    assert (shape.per_topic, shape.late) == (3, 20)  # a tenth of the topics by default
    names = shape.names("bench1a-latdeadbeef")
    assert len(names) == len(set(names)) == 200
    assert names[:2] == ["bench1a-latdeadbeef-t000", "bench1a-latdeadbeef-t001"] and names[-1].endswith("-t199")
    early, late = shape.split(names)
    assert (len(early), len(late)) == (180, 20) and late == names[180:]
    assert shape.label() == "600 partitions: 200 topics × 3, 20 created during the stream"
    assert Shape.of(8, 24, 2).late == 2 and Shape.of(5, 10).late == 1 and Shape.of(4, 8, 0).late == 0
    assert Shape.of(8, 24, 0).label() == "24 partitions: 8 topics × 3"


def test_one_regex_matches_every_topic_of_the_workload_and_nothing_else():
    shape = Shape.of(12, 24, 3)
    pattern = shape.pattern("bench1a-bf100")
    assert "," not in pattern  # MirrorMaker 2 splits its topics list at commas
    assert all(re.fullmatch(pattern, t) for t in shape.names("bench1a-bf100"))
    for other in ("bench1a-bf1024-t00", "bench1a-bf100", "bench1a-bf100-t00x", "xbench1a-bf100-t00",
                  "bench2b-bf100-t00"):
        assert not re.fullmatch(pattern, other), other


@pytest.mark.parametrize("topics, partitions, late", [(7, 600, None), (3, 3, 3), (2, 4, 5), (0, 12, 0), (2, 4, -1)])
def test_impossible_shapes_are_refused(topics, partitions, late):
    with pytest.raises(ValueError):
        Shape.of(topics, partitions, late)


def test_records_spread_evenly_over_every_topic_and_partition():
    topics = [f"t{i}" for i in range(8)]
    targets = slots(topics, 3)
    assert len(set(targets)) == 24
    assert [t for t, _ in targets[:8]] == topics  # consecutive records go to different topics
    per_slot = Counter(targets[i % len(targets)] for i in range(10_007))
    assert max(per_slot.values()) - min(per_slot.values()) <= 1
    per_topic = Counter(t for t, _ in (targets[i % len(targets)] for i in range(10_007)))
    assert max(per_topic.values()) - min(per_topic.values()) <= 3


def test_the_preload_values_look_like_producer_performances():
    pool = load.values(100)
    assert len(pool) == load.POOL and all(len(v) == 100 and v.isalpha() and v.isupper() for v in pool)
    assert len(set(pool)) == load.POOL and load.values(100) == pool  # random, but the same every run


def test_the_consumer_is_told_the_count_and_the_late_topics():
    assert latency.parse_expected("1234\n") == {"measured": 1234}  # the warm-up stream's plain count
    assert latency.parse_expected("") == {"measured": -1}
    expected = latency.parse_expected('{"measured": 10, "late_measured": {"a": 3, "b": 2}, '
                                      '"late_created_ns": 1000000000, "late_created_s": 2.5}\n')
    got = latency.late_summary(expected, {"a": [10.0, 30.0, 20.0], "b": [5.0]}, {"a": 3_500_000_000})
    assert (got["topics"], got["expected"], got["received"], got["missing"], got["topics_complete"]) == (2, 5, 4, 1, 1)
    assert (got["p50_ms"], got["max_ms"], got["created_s"]) == (20.0, 30.0, 2.5)
    assert got["first_record_s"] == {"a": 2.5, "b": None} and got["first_record_max_s"] is None  # b: none arrived
    none = latency.late_summary({"measured": 0, "late_measured": {"a": 1}}, {}, {})
    assert none["missing"] == 1 and math.isnan(none["p99_ms"])


def _run(tmp_path, **kw) -> Run:
    return Run("abc123", ["bench1a-latabc123-t0", "bench1a-latabc123-t1"], tmp_path, follow=True, **kw)


def _props(path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines())


def test_mirrormakers_are_given_the_regex_and_look_for_new_topics_only_when_some_are_coming(tmp_path):
    ctx = Ctx("source:9092", "target:9092", 24, 2)
    regex = Shape.of(2, 24, 1).pattern("bench1a-latabc123")
    MirrorMaker2().command(ctx, _run(tmp_path, regex=regex, new_topics=True))
    props = _props(tmp_path / "mm2.properties")
    assert props["srcabc123->tgtabc123.topics"] == regex
    assert props["refresh.topics.interval.seconds"] == str(NEW_TOPICS_REFRESH_S) == "5"
    MirrorMaker2().command(ctx, Run("abc123", ["bench1a-bf100"], tmp_path))  # today's shape: as before
    props = _props(tmp_path / "mm2.properties")
    assert props["srcabc123->tgtabc123.topics"] == "bench1a-bf100" and "refresh.topics.interval.seconds" not in props

    argv, _ = MirrorMaker1().command(ctx, _run(tmp_path, regex=regex, new_topics=True))
    assert argv[argv.index("--include") + 1] == regex
    assert _props(tmp_path / "consumer.properties")["metadata.max.age.ms"] == "5000"
    argv, _ = Mirrord().command(ctx, _run(tmp_path, regex=regex, new_topics=True))
    assert argv[argv.index("--whitelist") + 1] == regex
    argv, _ = SparkBuiltin().command(ctx, _run(tmp_path, regex=regex))
    assert argv[argv.index("--pattern") + 1] == regex


def test_the_shape_flags_are_checked_and_recorded():
    cfg, _ = run.parse_args(["--topics", "200", "--partitions", "600"])
    assert (cfg.topics, cfg.partitions, cfg.late_topics) == (200, 600, 20)
    cfg, _ = run.parse_args(["--topics", "8", "--partitions", "24", "--late-topics", "2", "--late-at", "3"])
    assert (cfg.topics, cfg.late_topics, cfg.late_at_seconds) == (8, 2, 3)
    cfg, _ = run.parse_args(["--topics", "8", "--partitions", "24", "--steady-seconds", "10"])
    assert cfg.late_at_seconds == 2.5  # at most a quarter into the window, recorded as used
    cfg, _ = run.parse_args([])
    assert (cfg.topics, cfg.partitions, cfg.late_topics) == (1, 12, 0)
    with pytest.raises(SystemExit):
        run.parse_args(["--topics", "7", "--partitions", "600"])
