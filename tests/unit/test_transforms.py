"""The SQL the transforms become (Spark analyses and runs it in tests/integration/test_transforms.py)."""

from __future__ import annotations

from mirrord.settings.transforms import COLUMNS, Transform, bytes_kept, full_match, select, sql_string, where


def test_records_of_other_topics_pass_and_dropped_records_are_counted_under_the_transform():
    t = Transform("dev", "prd-.*", filter="value IS NOT NULL", sample=0.25)
    assert where(t) == (
        "CASE WHEN NOT (topic RLIKE '^(?:prd-.*)$') THEN true "
        "WHEN coalesce((value IS NOT NULL), false) AND "
        "pmod(CASE WHEN key IS NULL THEN xxhash64(offset) ELSE xxhash64(key) END, 1000000) < 250000 THEN true "
        "ELSE mirrord_dropped('dev', topic) END")


def test_only_the_rewritten_columns_change_and_only_on_matching_topics():
    t = Transform("mask", "prd-users", value="upper(CAST(value AS STRING))", drop_headers="authorization")
    columns = select(t)
    assert len(columns) == len(COLUMNS)
    assert columns[COLUMNS.index("value")] == (
        "CASE WHEN topic RLIKE '^(?:prd-users)$' THEN CAST((upper(CAST(value AS STRING))) AS BINARY) "
        "ELSE value END AS value")
    assert columns[COLUMNS.index("headers")] == (
        "CASE WHEN topic RLIKE '^(?:prd-users)$' THEN filter(headers, h -> NOT (h.key RLIKE "
        "'^(?:authorization)$')) ELSE headers END AS headers")
    assert [c for c in columns if " AS " not in c] == ["key", "timestamp", "partition", "offset", "topic",
                                                       "timestampType"]


def test_regexes_and_names_are_quoted_for_spark_sql():
    assert sql_string("it's a \\d") == "'it\\'s a \\\\d'"
    assert full_match("topic", "a'b") == "topic RLIKE '^(?:a\\'b)$'"


def test_the_writer_sends_the_consumers_arrays_only_when_no_transform_rewrites_key_or_value():
    keeps = [Transform("f", ".*", filter="value IS NOT NULL"), Transform("s", ".*", sample=0.5),
             Transform("h", ".*", drop_headers="authorization")]
    assert bytes_kept([]) and bytes_kept(keeps)
    assert not bytes_kept([*keeps, Transform("k", "prd-.*", key="upper(CAST(key AS STRING))")])
    assert not bytes_kept([Transform("v", "prd-users", value="CAST(value AS STRING)"), *keeps])
