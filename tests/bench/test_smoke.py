"""The bench harness end to end on a tiny workload, so that `make bench` cannot rot between runs.

No speed is asserted: only that every path of the harness (preload, limit, backfill, steady stream,
process sampling, report) works against the session's brokers and every contender it knows.
The Spark-based contenders and the JVM mirrors start slowly, so each runs one workload here, and
only the 100 B backfill and the stream run: about 2 min on an idle 2-core machine. MirrorMaker 2 with
tasks.max = num.streams runs the stream, so that mirrord has a MirrorMaker 2 to be compared with there
and the bars table is rendered from real runs (tests/bench/test_report.py checks its arithmetic).
"""

from __future__ import annotations

import os

from bench import report, run, stages
from tests.harness.jvm import spark_driver_options

PLAN = ("kcat,mm1:backfill-100,mm2:backfill-100,mm2-streams:steady,mirrord:steady,spark-builtin:backfill-100,"
        "mirrord-transform:backfill-100,spark-realtime:steady,spark-async:backfill-100,none")


def test_bench_runs_every_contender_and_regenerates_the_tables(kafka_pair, tmp_path, monkeypatch):
    source, target = kafka_pair
    # The Spark contenders' JVMs (mirrord's among them) start as the tests' do (tests/harness/jvm.py): no speed is
    # asserted here, and five Spark starts are most of this test.
    if not os.environ.get("BENCH_JAVA_OPTIONS") and spark_driver_options():
        monkeypatch.setenv("BENCH_JAVA_OPTIONS", spark_driver_options())
    doc = tmp_path / "BENCHMARKS.md"
    doc.write_text(f"# Benchmarks\n\nprose\n\n{report.BEGIN}\nold tables\n{report.END}\n\nmore prose\n")

    results = run.main([
        "--brokers", f"{source.bootstrap},{target.bootstrap}", "--contenders", PLAN, "--reps", "1",
        "--workloads", "backfill-100,steady", "--records-100", "3000", "--rate", "200", "--warmup-seconds", "1",
        "--steady-seconds", "2", "--idle-seconds", "1", "--run-timeout", "60", "--doc", str(doc),
        "--results", str(tmp_path / "results"),
    ])

    runs = results["reps"][0]["runs"]
    failed = {(c, w): r["error"] for c, ws in runs.items() for w, r in ws.items() if r["status"] == "failed"}
    assert not failed
    assert not results["skipped"], "a contender could not run: its jars or package are missing"
    assert {c: sorted(ws) for c, ws in runs.items()} == {
        "kcat": ["backfill-100", "steady"], "mm1": ["backfill-100"], "mm2": ["backfill-100"],
        "mm2-streams": ["steady"], "mirrord": ["steady"], "spark-builtin": ["backfill-100"],
        "mirrord-transform": ["backfill-100"], "spark-realtime": ["steady"], "spark-async": ["backfill-100"],
        "none": ["steady"]}
    for workload, res in [(w, r) for c, ws in runs.items() for w, r in ws.items() if c != "none"]:
        assert res["cpu_seconds"] > 0 and res["peak_rss_bytes"] > 0
        if workload == "steady":
            assert res["received"] == res["expected"] > 0
            # the CPU of the measured window only: less than the whole run's, which holds the start-up
            assert 0 < res["cpu_window_seconds"] < res["cpu_seconds"] and res["window_seconds"] >= 1.5, res
            assert res["cpu_seconds_per_m_window"] > 0 and sum(res["cpu_window_by_thread_kind"].values()) > 0
            # its idle after the stream; the source broker's only when the bench started it (not here: --brokers)
            assert res["idle_seconds"] >= 1 and res["idle_core_share"] >= 0, res
            assert res["idle_source_broker_core_share"] is None
        elif res is runs["mirrord-transform"]["backfill-100"]:  # its filter drops about 1 in 26 records
            assert res["status"] == "ok" and 0 < res["copied"] < res["records"] and res["read_per_s"] > 0
        else:
            assert res["status"] == "ok" and res["copied"] >= res["records"]
    assert set(results["reps"][0]["limit"]) == {"backfill-100"}
    assert runs["mirrord"]["steady"]["ready_seconds"] > 0  # its READY=1 came through the bench's NOTIFY_SOCKET
    # mirrord's JVM timed one record in 16 at each stage (bench/stages.py), the target's acknowledgement last
    split = runs["mirrord"]["steady"]["stages"]
    assert all(split[s]["timed"] > 0 for s in stages.STAGES), split
    assert split["fetched"]["p50_ms"] <= split["acked"]["p50_ms"] and split["records_per_poll"] > 0, split
    assert runs["spark-realtime"]["steady"]["stages"] is None  # no clock in Spark's own source
    assert runs["mm2"]["backfill-100"]["ready_seconds"] is None
    assert runs["none"]["steady"]["received"] == runs["none"]["steady"]["expected"] > 0  # read from the source
    # the bench producer timed its measured records to the source's acknowledgement, whoever mirrored them
    assert all(ws["steady"]["source_ack"]["timed"] > 0 for ws in runs.values() if "steady" in ws), runs

    text = doc.read_text()
    assert text.startswith("# Benchmarks\n\nprose\n") and text.endswith("more prose\n")
    assert "old tables" not in text
    assert "| MirrorMaker 2 (dedicated, 4.2.0, tasks.max = 12 = partitions) |" in text
    assert "| MirrorMaker 2 (dedicated, 4.2.0, tasks.max = 2 = streams) |" in text
    assert "| 1 | `mm2-streams` |" in text  # mirrord's stream paired with the only MirrorMaker 2 that ran it
    assert "| idle: % of a core, source broker % |" in text
    assert "### Bars for mirrord (default sink)" in text and "| Peak RSS" in text
    assert "### What a transform costs: mirrord (filter + mask transform)" in text
    assert "| no mirror: the timing consumer reads the source (floor) |" in text  # the stream's floor, in its table
