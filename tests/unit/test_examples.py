"""The topology recipes under etc/examples load as they are, and their aliases make the topology safe."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mirrord.settings.config import load

EXAMPLES = Path(__file__).resolve().parents[2] / "etc" / "examples"


def flows(tmp_path: Path, recipe: str) -> dict[str, object]:
    out = {}
    for conf in sorted((EXAMPLES / recipe).glob("*/mirrord.conf")):
        where = tmp_path / recipe / conf.parent.name
        where.mkdir(parents=True)
        shutil.copy(conf, where / "mirrord.conf")
        for name in ("consumer.properties", "producer.properties"):
            (where / name).write_text("bootstrap.servers=kafka:9092\n")
        out[conf.parent.name] = load(where / "mirrord.conf", environ={})
    return out


def test_active_active_flows_mirror_each_other_under_the_prefix_policy(tmp_path):
    f = flows(tmp_path, "active-active")
    lr, rl = f["left-to-right"], f["right-to-left"]
    assert lr.replication_policy == rl.replication_policy == "prefix"
    assert (lr.source_alias, lr.target_alias) == (rl.target_alias, rl.source_alias)


@pytest.mark.parametrize("recipe", ["aggregation"])
def test_aggregated_regions_share_the_central_alias_and_nothing_else(tmp_path, recipe):
    f = flows(tmp_path, recipe)
    assert len(f) == 2
    assert len({s.target_alias for s in f.values()}) == 1
    assert len({s.source_alias for s in f.values()}) == len({s.metrics_listen for s in f.values()}) == 2
