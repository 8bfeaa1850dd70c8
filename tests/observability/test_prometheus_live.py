"""A real Prometheus scraping a live mirrord: every dashboard query and every alert rule finds its series.

A typo in a metric or label name makes a panel silently empty or an alert silently never fire;
promtool cannot see that, only data can.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import pytest

from tests.harness.kafka import KafkaBroker, free_port
from tests.harness.mirrord import Mirrord, write_flow
from tests.harness.records import create_topic, produce, wait_until

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "etc" / "prometheus" / "mirrord-alerts.yml"
DASHBOARD = ROOT / "etc" / "grafana" / "mirrord-dashboard.json"
# What Grafana puts in place of the dashboard's variables, for "all flows on all instances".
GRAFANA_VARIABLES = {"$__rate_interval": "30s", "$__range": "5m", "$job": "mirrord", "$instance": ".+", "$flow": ".+",
                     "${datasource}": ""}
SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^{}]*)\}")


class Prometheus:
    def __init__(self, workdir: Path, target: str, rules: Path = RULES):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = workdir / "prometheus.yml"
        config.write_text(json.dumps({  # YAML is a superset of JSON
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(rules)],
            "scrape_configs": [{"job_name": "mirrord", "static_configs": [{"targets": [target]}]}],
        }))
        self.log = workdir / "prometheus.log"
        self.process = subprocess.Popen(
            ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={workdir / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdout=open(self.log, "ab"), stderr=subprocess.STDOUT)

    def get(self, path: str, **params: str) -> dict:
        url = f"{self.url}{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.loads(r.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list:
        return self.get("/api/v1/query", query=expr)["result"]

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as r:
                return r.status == 200
        except OSError:
            assert self.process.poll() is None, self.log.read_text()
            return False

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)


def grafana(expr: str) -> str:
    for var, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(var, value)
    return expr


def dashboard_queries() -> list[tuple[str, str]]:
    dash = json.loads(DASHBOARD.read_text())
    queries = [(p["title"], grafana(t["expr"])) for p in dash["panels"] for t in p.get("targets", [])]
    for var in dash["templating"]["list"]:
        if var["type"] == "query":  # label_values(SELECTOR, LABEL): the series must exist and carry LABEL
            selector, label = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", var["definition"]).groups()
            queries.append((f"variable {var['name']}", grafana(f"count by ({label}) ({selector})")))
    return queries


@pytest.fixture(scope="module")
def scraped(kafka_pair, tmp_path_factory):
    """mirrord copying a live topic (through a transform), and a Prometheus scraping it every second with the
    shipped rules loaded."""
    source, target = kafka_pair
    workdir = tmp_path_factory.mktemp("prometheus")
    topic = f"obs-{uuid.uuid4().hex[:6]}"
    create_topic(source.bootstrap, topic, 2)
    config = write_flow(workdir / "flow", source.bootstrap, target.bootstrap, f"{topic}.*", group=f"{topic}-group",
                        conf={"flow": "obs", "emit.checkpoints.interval.seconds": "2"})
    with open(config, "a") as f:  # a transform that drops a record in ten, for the records-filtered panel
        f.write(f"\n[transform:obs]\ntopics = {topic}.*\nfilter = offset % 10 <> 0\n")
    mirrord = Mirrord(config).start()
    prometheus = None
    try:
        mirrord.wait_ready()
        listen = mirrord.metrics_url.split("/")[2]
        prometheus = Prometheus(workdir, listen)
        wait_until(prometheus.ready, 60, "Prometheus to be ready")
        produce(source.bootstrap, topic, [{"partition": i % 2, "key": b"k%d" % i, "value": b"v" * 100}
                                          for i in range(500)])
        wait_until(lambda: prometheus.query('mirrord_records_total{job="mirrord"}'), 120,
                   "mirrord_records_total in Prometheus")
        yield prometheus
    finally:
        if prometheus is not None:
            prometheus.stop()
        mirrord.stop()


def test_every_dashboard_query_returns_data(scraped):
    empty = []
    for title, expr in dashboard_queries():
        try:
            wait_until(lambda e=expr: scraped.query(e), 15, expr, interval=1)
        except AssertionError:
            empty.append(f"{title}: {expr}")
    assert not empty, "dashboard queries with no data:\n" + "\n".join(empty)


def test_every_alert_rule_evaluates_cleanly_on_series_that_exist(scraped):
    def evaluated() -> list[dict]:
        rules = [r for g in scraped.get("/api/v1/rules")["groups"] for r in g["rules"]]
        return rules if rules and all(r.get("lastEvaluation", "").startswith("2") for r in rules) else []
    rules = wait_until(evaluated, 30, "every rule to be evaluated")
    assert all(r["health"] == "ok" for r in rules), [(r["name"], r.get("lastError")) for r in rules]

    missing = []
    for rule in rules:
        for name, matchers in SELECTOR.findall(rule["query"]):
            selector = f"{name}{{{matchers}}}"
            try:
                wait_until(lambda s=selector: scraped.query(s), 15, selector, interval=1)
            except AssertionError:
                missing.append(f"{rule['name']}: {selector}")
    assert not missing, "alert rules reading series that do not exist:\n" + "\n".join(missing)


UNREACHABLE_FOR = "\n        for: 1m\n"  # the shipped rule's; promtool's rule tests (mirrord-alerts.test.yml) hold it
UNREACHABLE_FOR_HERE = 10  # seconds: the live test waits for this instead of a minute


def rules_firing_sooner(directory: Path) -> Path:
    """The shipped rules, MirrordClusterUnreachable's `for` shortened to UNREACHABLE_FOR_HERE seconds: its
    expression, labels and annotations as shipped."""
    text = RULES.read_text()
    head, sep, tail = text.partition("- alert: MirrordClusterUnreachable\n")
    assert sep and tail.count(UNREACHABLE_FOR) >= 1 and tail.index(UNREACHABLE_FOR) < tail.index("- alert:"), \
        "MirrordClusterUnreachable's for: 1m not found where expected"
    path = directory / "mirrord-alerts.yml"
    path.write_text(head + sep + tail.replace(UNREACHABLE_FOR, f"\n        for: {UNREACHABLE_FOR_HERE}s\n", 1))
    return path


def test_a_real_outage_fires_the_cluster_unreachable_alert_and_its_end_resolves_it(kafka_pair, tmp_path):
    """The shipped MirrordClusterUnreachable rule, evaluated by a real Prometheus on a mirrord whose target broker
    is stopped: pending, then firing with the flow and cluster labels; gone once it is back. Its `for` is
    shortened to seconds here: the minute itself is promtool's to check, on simulated time."""
    source, _ = kafka_pair
    target = KafkaBroker("alerting", tmp_path / "target", heap="384m")
    topic = f"alert-{uuid.uuid4().hex[:6]}"
    create_topic(source.bootstrap, topic, 1)
    mirrord = prometheus = None
    try:
        target.start()
        config = write_flow(tmp_path / "flow", source.bootstrap, target.bootstrap, topic, group=f"{topic}-group",
                            conf={"flow": "alerting"})
        mirrord = Mirrord(config).start()
        mirrord.wait_ready()
        prometheus = Prometheus(tmp_path, mirrord.metrics_url.split("/")[2], rules_firing_sooner(tmp_path))
        wait_until(prometheus.ready, 60, "Prometheus to be ready")

        def alert(state: str) -> list[dict]:
            return [a for a in prometheus.get("/api/v1/alerts")["alerts"]
                    if a["labels"]["alertname"] == "MirrordClusterUnreachable" and a["state"] == state
                    and a["labels"].get("cluster") == "target" and a["labels"].get("flow") == "alerting"]
        wait_until(lambda: prometheus.query('mirrord_cluster_up{cluster="target"} == 1'), 60, "the target up")
        assert not alert("pending") and not alert("firing")
        target.stop()
        wait_until(lambda: alert("pending"), 60, "the alert pending once mirrord sees the target away")
        pending_at = time.monotonic()
        firing = wait_until(lambda: alert("firing"), 120, f"the alert firing {UNREACHABLE_FOR_HERE}s later")
        assert time.monotonic() - pending_at >= UNREACHABLE_FOR_HERE - 2, "firing before its `for` had passed"
        assert firing[0]["labels"]["severity"] == "critical"
        target.start()
        wait_until(lambda: not alert("firing") and not alert("pending"), 120, "the alert resolved")
        assert mirrord.alive(), mirrord.output()[-3000:]
    finally:
        if prometheus is not None:
            prometheus.stop()
        if mirrord is not None:
            mirrord.stop()
        target.destroy()
