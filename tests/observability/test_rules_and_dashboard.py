"""The shipped alert rules and dashboard, checked the way their users check them: promtool, Grafana's schema."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "etc" / "prometheus" / "mirrord-alerts.yml"
RULE_TESTS = ROOT / "etc" / "prometheus" / "mirrord-alerts.test.yml"
DASHBOARD = ROOT / "etc" / "grafana" / "mirrord-dashboard.json"


def promtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["promtool", *args], capture_output=True, text=True, check=False)


def test_promtool_check_rules_passes():
    proc = promtool("check", "rules", str(RULES))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_promtool_rule_unit_tests_pass():
    proc = promtool("test", "rules", str(RULE_TESTS))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_alert_has_a_unit_test_that_fires_it():
    alerts = set(re.findall(r"^\s*- alert: (\w+)", RULES.read_text(), re.M))
    # A case that expects alerts: "alertname: X" followed by a non-empty exp_alerts list.
    fired = set(re.findall(r"alertname: (\w+)\n\s*exp_alerts:\n", RULE_TESTS.read_text()))
    assert alerts and alerts == fired, f"alerts no test fires: {sorted(alerts - fired)}"


def test_dashboard_shows_throughput_lag_latency_errors_and_restarts():
    dash = json.loads(DASHBOARD.read_text())
    panels = [p for p in dash["panels"] if p["type"] != "row"]
    assert len({p["id"] for p in dash["panels"]}) == len(dash["panels"]), "duplicate panel ids"
    exprs = " ".join(t["expr"] for p in panels for t in p["targets"])
    for metric in ("mirrord_records_total", "mirrord_bytes_total", "mirrord_partition_lag", "mirrord_lag_records",
                   "mirrord_replication_latency_seconds_bucket", "mirrord_batch_duration_seconds_bucket",
                   "mirrord_errors_total", "mirrord_up", "mirrord_last_commit_timestamp_seconds",
                   "process_start_time_seconds", "mirrord_build_info", "mirrord_records_lost_total",
                   "mirrord_heartbeat_age_seconds", "mirrord_last_checkpoint_timestamp_seconds",
                   "mirrord_cycle_detected", "mirrord_records_filtered_total", "mirrord_transaction_seconds_bucket",
                   "mirrord_transaction_commit_seconds_bucket", "mirrord_transactions_total"):
        assert metric in exprs, f"no panel shows {metric}"
    for p in panels:
        assert p["datasource"]["uid"] == "${datasource}", f"panel {p['title']!r} is tied to one data source"
        assert p["targets"] and all(t.get("expr") and t.get("refId") for t in p["targets"]), p["title"]
