"""Transforms: records filtered, sampled and rewritten in flight, in Spark SQL (prod → dev copies).

A `[transform:NAME]` section of mirrord.conf applies to the source topics its `topics` regex matches
(whole name). Every section whose regex matches a topic applies, in the order of the file, each to
what the one before left: first `filter` and `sample` decide whether the record goes on, then `key`,
`value` and `drop.headers` rewrite it. Timestamp, partition and source offset are never touched:
the writer takes them after the transforms, from the source's own.

This module only writes the SQL (plain strings, no Spark): `pipeline` applies it to the source's
DataFrame and asks Spark to analyse it against the Kafka source's schema before anything runs.
A dropped record is counted in the JVM by `mirrord_dropped(transform, topic)` (io.mirrord.metrics.DroppedUdf),
which is only called for records the filter or the sample drops and always returns false.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

DROPPED_UDF = ("mirrord_dropped", "io.mirrord.metrics.DroppedUdf")
SECTION_PREFIX = "transform:"
# What a transform's expressions can name: the columns of Spark's Kafka source, as it reads them.
COLUMNS = ("key", "value", "headers", "timestamp", "partition", "offset", "topic", "timestampType")
SAMPLE_BUCKETS = 1_000_000  # a fraction's resolution: one in a million


@dataclass(frozen=True)
class Transform:
    """One [transform:NAME] section; empty strings and a sample of 1.0 mean "not set"."""

    name: str
    topics: str  # regex over source topic names, matched against the whole name
    filter: str = ""
    sample: float = 1.0
    key: str = ""
    value: str = ""
    drop_headers: str = ""  # regex of header keys, matched against the whole key

    @property
    def section(self) -> str:
        return f"[{SECTION_PREFIX}{self.name}]"

    @property
    def drops(self) -> bool:
        return bool(self.filter) or self.sample < 1.0


def sql_string(text: str) -> str:
    """A Spark SQL string literal (backslashes are escapes in Spark SQL's default string syntax)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def full_match(column: str, regex: str) -> str:
    """`column` matches the whole regex (RLIKE alone finds it anywhere, as Java's Matcher.find)."""
    return f"{column} RLIKE {sql_string(f'^(?:{regex})$')}"


def sample_condition(fraction: float) -> str:
    """Kept when the key's hash falls in the first `fraction` of the buckets: every record of a key is
    kept or dropped together, in every topic sampled at that fraction (so joins across topics still
    match in the copy); keyless records by their offset's hash."""
    kept = round(fraction * SAMPLE_BUCKETS)
    return (f"pmod(CASE WHEN key IS NULL THEN xxhash64(offset) ELSE xxhash64(key) END, {SAMPLE_BUCKETS}) "
            f"< {kept}")


def kept_condition(t: Transform) -> str:
    """The SQL boolean a record of a matching topic must satisfy to go on (a NULL filter drops it, as WHERE)."""
    parts = [f"coalesce(({t.filter}), false)"] if t.filter else []
    if t.sample < 1.0:
        parts.append(sample_condition(t.sample))
    return " AND ".join(parts)


def where(t: Transform) -> str:
    """The stage's filter: records of other topics pass; a dropped record is counted, then dropped."""
    return (f"CASE WHEN NOT ({full_match('topic', t.topics)}) THEN true WHEN {kept_condition(t)} THEN true "
            f"ELSE {DROPPED_UDF[0]}({sql_string(t.name)}, topic) END")


def headers_without(regex: str) -> str:
    return f"filter(headers, h -> NOT ({full_match('h.key', regex)}))"


def replaced(t: Transform) -> dict[str, str]:
    """The columns the stage rewrites, each as its new SQL expression (key and value cast to binary)."""
    out = {}
    if t.key:
        out["key"] = f"CAST(({t.key}) AS BINARY)"
    if t.value:
        out["value"] = f"CAST(({t.value}) AS BINARY)"
    if t.drop_headers:
        out["headers"] = headers_without(t.drop_headers)
    return out


def bytes_kept(ts: Iterable[Transform]) -> bool:
    """Whether every record's key and value reach the writer as the source read them: no transform rewrites either
    (filters, samples and dropped headers keep them). The writer then sends the consumer's own arrays
    (docs/decisions.md §2, "A record's bytes, once")."""
    return not any(t.key or t.value for t in ts)


def select(t: Transform) -> list[str]:
    """The stage's projection: every source column, the rewritten ones only for matching topics."""
    changed = replaced(t)
    matches = full_match("topic", t.topics)
    return [f"CASE WHEN {matches} THEN {changed[c]} ELSE {c} END AS {c}" if c in changed else c for c in COLUMNS]


def parse_sample(text: str) -> float:
    """A fraction in (0, 1]; ValueError with the reason otherwise."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"must be a fraction in (0, 1], got {text!r}") from None
    if not 0.0 < value <= 1.0:
        raise ValueError(f"must be a fraction in (0, 1], got {text!r}")
    if round(value * SAMPLE_BUCKETS) == 0:
        raise ValueError(f"must be at least {1 / SAMPLE_BUCKETS}, got {text!r}")
    return value
