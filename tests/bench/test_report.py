"""The report's comparison with the better of the two MirrorMaker 2 runs, and the bars, on made-up results.

No brokers: this checks the arithmetic (which MM2 is the reference in each repetition, ratios within a
repetition, medians over them, pass/fail) that the smoke test only runs once on a tiny workload.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

from bench import report

ROOT = Path(__file__).resolve().parents[2]

MiB = 2**20


def backfill(rate: float, cpu: float, copied: int = 1_000_000, rss: float = 900, status: str = "ok",
             ready: float | None = None, startup: float = 10.0) -> dict:
    return {"status": status, "records": copied, "copied": copied, "seconds": copied / rate, "records_per_s": rate,
            "mb_per_s": rate * 100 / 1e6, "startup_seconds": startup, "ready_seconds": ready, "cpu_seconds": cpu,
            "peak_rss_bytes": rss * MiB, "cpu_seconds_per_m_records": 1e6 * cpu / copied}


def steady(p50: float, p99: float, received: int = 1000, expected: int = 1000, rss: float = 900,
           ready: float | None = None, window: float | None = None) -> dict:
    return {"status": "ok" if received >= expected else "missing", "p50_ms": p50, "p99_ms": p99, "max_ms": p99 + 1,
            "received": received, "expected": expected, "missing": expected - received, "startup_seconds": 12.0,
            "ready_seconds": ready, "cpu_seconds": 30.0, "peak_rss_bytes": rss * MiB,
            "cpu_seconds_per_m_window": window}


def results(reps: list[dict]) -> dict:
    return {
        "started": "2026-11-22 00:00:00 UTC", "wall_seconds": 600, "cpu_seconds_other": 0, "cpu_seconds_bench": 100,
        "config": {"records": {"backfill-100": 1_000_000, "backfill-1024": 1_000_000}, "partitions": 12,
                   "streams": 2, "rate": 10_000, "steady_seconds": 20, "warmup_seconds": 5,
                   "workloads": ["backfill-100", "backfill-1024", "steady"]},
        "machine": {k: "x" for k in ("cpu", "memory_gib", "os", "kernel", "java", "python", "pyspark",
                                     "spark_sql_kafka", "confluent_kafka", "librdkafka", "kafka_broker",
                                     "connect_mirror", "mirrormaker1", "kcat", "mirrord_commit")} | {"cores": 2},
        "producer": {"acks": "all"},
        "contenders": {"mm2": "MM2 partitions", "mm2-streams": "MM2 streams", "mirrord": "mirrord (default sink)"},
        "skipped": {},
        "reps": [{"rep": i + 1, "limit": {}, "runs": runs} for i, runs in enumerate(reps)],
    }


# rep 1: mm2-streams is the faster MM2 at 100 B, mm2 at 1 KiB; rep 2 the other way round at 100 B.
# Steady: rep 1 mm2-streams has the lower p99; rep 2 mm2-streams lost records, so mm2 is the reference.
REPS = [
    {"mm2": {"backfill-100": backfill(90_000, 62), "backfill-1024": backfill(40_000, 30),
             "steady": steady(2000, 9000)},
     "mm2-streams": {"backfill-100": backfill(140_000, 44), "backfill-1024": backfill(30_000, 25),
                     "steady": steady(1200, 5300)},
     "mirrord": {"backfill-100": backfill(210_000, 40, ready=8.0), "backfill-1024": backfill(40_000, 20, ready=9.0),
                 "steady": steady(900, 4000, ready=7.0)}},
    {"mm2": {"backfill-100": backfill(100_000, 50), "backfill-1024": backfill(50_000, 28),
             "steady": steady(1500, 6000)},
     "mm2-streams": {"backfill-100": backfill(80_000, 40), "backfill-1024": backfill(45_000, 26),
                     "steady": steady(500, 1000, received=999)},
     "mirrord": {"backfill-100": backfill(130_000, 45, ready=8.5), "backfill-1024": backfill(55_000, 27, ready=9.5),
                 "steady": steady(1000, 5000, ready=7.5)}},
    {"mm2": {"backfill-100": backfill(100_000, 50), "backfill-1024": backfill(50_000, 28),
             "steady": steady(1500, 6000)},
     "mm2-streams": {"backfill-100": {"status": "failed", "error": "boom"}, "backfill-1024": backfill(60_000, 20),
                     "steady": steady(800, 3000)},
     "mirrord": {"backfill-100": backfill(150_000, 40, ready=8.0), "backfill-1024": backfill(60_000, 20, ready=9.0),
                 "steady": steady(1000, 2000, ready=7.5)}},
]


def bar(text: str, name: str) -> list[str]:
    line = next(ln for ln in text.splitlines() if ln.startswith(f"| {name}"))
    return [c.strip() for c in line.strip("|").split("|")]


def test_the_reference_is_the_better_mm2_of_each_repetition():
    res = results(REPS)
    reps = res["reps"]
    assert report.better_mm2(reps[0], "backfill-100")[0] == "mm2-streams"
    assert report.better_mm2(reps[1], "backfill-100")[0] == "mm2"
    assert report.better_mm2(reps[2], "backfill-100")[0] == "mm2"  # the other one failed
    assert report.better_mm2(reps[0], "steady")[0] == "mm2-streams"
    assert report.better_mm2(reps[1], "steady")[0] == "mm2"  # lower p99, but it lost a record
    assert report.better_mm2(reps[2], "steady")[0] == "mm2-streams"
    # ratios within each repetition: 210/140, 130/100, 150/100
    assert report._ratios(res, "mirrord", "backfill-100", report.BEST) == [1.5, 1.3, 1.5]


def test_the_bars_are_judged_on_medians_of_the_ratios_within_each_repetition():
    text = report.render(results(REPS))
    assert "MirrorMaker 2 both with `tasks.max=12` (= partitions, `mm2`) and `tasks.max=2`" in text
    # 100 B: ratios 1.50, 1.30, 1.50 -> median 1.50 >= 1.00
    assert bar(text, "Backfill 100 B: records/s")[2:] == ["1.50 (1.30–1.50); mirrord 150,000 (130,000–210,000) vs "
                                                          "MM2 100,000 (100,000–140,000) records/s", "pass"]
    # 1 KiB: 40/40, 55/50, 60/60 -> 1.00, 1.10, 1.00: median 1.00 < 1.25
    assert bar(text, "Backfill 1 KiB: records/s")[1:] == ["≥ 1.25", "1.00 (1.00–1.10); mirrord 55,000 (40,000–60,000) "
                                                          "vs MM2 50,000 (40,000–60,000) records/s", "**FAIL**"]
    # CPU s per M records at 100 B: 40/44, 45/50, 40/50 -> median 0.90 > 0.60
    assert bar(text, "Backfill 100 B: CPU s")[1:3] == ["≤ 0.60", "0.90 (0.80–0.91); mirrord 40.0 (40.0–45.0) vs MM2 "
                                                       "50.0 (44.0–50.0) s"]
    assert bar(text, "Backfill 100 B: CPU s")[-1] == "**FAIL**"
    # 1 KiB: 20/30, 27/28, 20/20 -> median 0.96
    assert bar(text, "Backfill 1 KiB: CPU s")[-1] == "**FAIL**"
    assert "CPU s per M records in the window" not in text  # no window measured: no row
    assert bar(text, "Steady 10,000 records/s: every record")[-1] == "pass"
    # p99 against the better MM2: 4000/5300, 5000/6000, 2000/3000 -> median 0.75
    assert bar(text, "Steady 10,000 records/s: p99")[2].startswith("0.75 (0.67–0.83)")
    assert bar(text, "Steady 10,000 records/s: p99")[-1] == "pass"
    # p50 against the same MM2 runs: 900/1200, 1000/1500, 1000/800 -> median 0.75 > 0.5
    assert bar(text, "Steady 10,000 records/s: p50")[1:] == ["≤ 0.50", "0.75 (0.67–1.25); mirrord 1,000.0 "
                                                             "(900.0–1,000.0) vs MM2 1,200.0 (800.0–1,500.0) ms",
                                                             "**FAIL**"]
    assert "Spark's plain sink in the same mode" not in text  # no reference ran: no row
    assert bar(text, "READY=1")[2:] == ["8.0 (7.0–9.5) s; first record on the target after 10.0 (10.0–12.0) s",
                                        "pass"]
    assert bar(text, "Peak RSS")[-1] == "pass"
    # which MM2 was the reference, in the rows and tallied in the median row
    assert "| 100 B | 1 | `mm2-streams` (`mm2`: 90,000) |" in text
    assert "| 100 B | 3 | `mm2` |" in text
    assert "| **100 B** | **median** | `mm2` 2×, `mm2-streams` 1× |" in text
    assert "| 2 | `mm2` (`mm2-streams`: 1,000.0) |" in text
    assert "ok; the better MM2 in 2 of 3 |" in text  # the general table says how often each MM2 won


def with_value(workload: str, key: str, per_rep: list[tuple[float, float, float]]) -> list[dict]:
    """REPS with `key` set in each repetition's mirrord, mm2 and mm2-streams run of `workload`."""
    reps = [{k: dict(v) for k, v in rep.items()} for rep in REPS]
    for rep, values in zip(reps, per_rep, strict=True):
        for name, value in zip(("mirrord", "mm2", "mm2-streams"), values, strict=True):
            rep[name][workload] = dict(rep[name][workload], **{key: value})
    return reps


def test_a_backfills_cpu_is_judged_while_copying_where_both_runs_measured_it():
    reps = with_value("backfill-100", "cpu_seconds_per_m_copying", [(2.5, 3.5, 3.3), (2.4, 3.2, 4.0), (2.6, 3.4, 3.0)])
    # the better MM2 by rate: streams, mm2, mm2 (streams failed) -> 2.5/3.3, 2.4/3.2, 2.6/3.4: median 0.76
    text = report.render(results(reps))
    assert bar(text, "Backfill 100 B: CPU s per M records while copying")[1:] == [
        "≤ 0.60", "0.76 (0.75–0.76); mirrord 2.5 (2.4–2.6) vs MM2 3.3 (3.2–3.4) s", "**FAIL**"]
    assert bar(text, "Backfill 1 KiB: CPU s per M records ÷")[2].startswith("0.96")  # not measured: the whole run's


def test_the_streams_cpu_in_its_window_is_judged_against_the_better_mm2_of_each_repetition():
    reps = with_value("steady", "cpu_seconds_per_m_window", [(20, 50, 40), (18, 36, 30), (25, 45, 40)])
    # the better MM2 by p99: streams, mm2 (streams lost a record), streams -> 20/40, 18/36, 25/40: median 0.50
    name = "Steady 10,000 records/s: CPU s per M records in the window"
    assert bar(report.render(results(reps)), name)[1:] == [
        "≤ 0.60", "0.50 (0.50–0.62); mirrord 20.0 (18.0–25.0) vs MM2 40.0 (36.0–40.0) s", "pass"]
    reps[0]["mirrord"]["steady"]["cpu_seconds_per_m_window"] = 30  # 0.75, 0.50, 0.62: median 0.62
    assert bar(report.render(results(reps)), name)[-1] == "**FAIL**"


def test_the_streams_idle_is_its_share_of_a_core_and_the_source_brokers_median_over_repetitions():
    reps = with_value("steady", "idle_core_share", [(0.08, 0.02, 0.019), (0.09, 0.03, 0.02), (0.07, 0.01, 0.018)])
    for rep, broker in zip(reps, (0.074, 0.081, 0.07), strict=True):
        rep["mirrord"]["steady"]["idle_source_broker_core_share"] = broker
    text = report.render(results(reps))
    stream = text[text.index("### Steady stream"):]  # its table: the first rows after its heading
    header = next(ln for ln in stream.splitlines() if ln.startswith("| contender | p50 ms"))
    assert [c.strip() for c in header.strip("|").split("|")][8] == "idle: % of a core, source broker %"
    assert bar(stream, "mirrord (default sink)")[8] == "8.0 (7.0–9.0), 7.4 (7.0–8.1)"
    assert bar(stream, "MM2 partitions")[8] == "2.0 (1.0–3.0)"  # the source broker only where it was measured
    assert report.idle_line({"idle_seconds": 30.2, "idle_core_share": 0.085, "idle_source_broker_core_share": None}) \
        == "; idle 30 s: 8.5 % of a core"


def test_failures_missing_records_and_heavy_memory_fail_their_bars():
    reps = [{k: dict(v) for k, v in rep.items()} for rep in REPS]
    reps[0]["mirrord"]["backfill-100"] = {"status": "failed", "error": "RuntimeError: boom"}
    reps[1]["mirrord"]["backfill-1024"] = backfill(20_000, 60, rss=1600, ready=20.0)
    reps[2]["mirrord"]["steady"] = steady(math.nan, math.nan, received=0, ready=30.0)
    text = report.render(results(reps))
    assert bar(text, "Backfill 100 B: records/s")[-1] == "**FAIL**"  # the remaining ratios pass, a run failed
    assert "1 of 3 runs failed" in bar(text, "Backfill 100 B: records/s")[2]
    assert bar(text, "Backfill 1 KiB: records/s")[2].startswith("1.00 (0.40–1.00)")
    assert bar(text, "Backfill 1 KiB: CPU s")[2].startswith("1.00 (0.67–2.14)")
    assert bar(text, "Steady 10,000 records/s: every record")[2].startswith("100.0 (0.0–100.0) % (2 of 3")
    assert bar(text, "Steady 10,000 records/s: every record")[-1] == "**FAIL**"
    assert bar(text, "Steady 10,000 records/s: p99")[2].startswith("0.83 (0.75–inf)")
    assert bar(text, "Peak RSS")[1:] == ["≤ 1,536 MiB (1.5 GiB)", "1,600 MiB (median 900)", "**FAIL**"]
    assert "| 100 B | 1 | `mm2-streams` (`mm2`: 90,000) | 140,000 | failed | | 44.0 | failed | |" in text


def test_only_one_mm2_and_no_mirrord_still_render():
    reps = [{"mm2": REPS[0]["mm2"], "kcat": {"backfill-100": backfill(250_000, 4)}}]
    res = results(reps)
    res["contenders"] = {"mm2": "MM2 partitions", "kcat": "kcat"}
    text = report.render(res)
    assert "Bars for" not in text and "the better MM2 in" not in text
    assert "| kcat | 250,000 | 25.0 | 2.78 |" in text  # against mm2, the only MM2 that ran
    res = results([{"mirrord": REPS[0]["mirrord"]}])
    res["contenders"] = {"mirrord": "mirrord (default sink)"}
    text = report.render(res)
    assert bar(text, "Backfill 100 B: records/s")[2:] == ["–", "n/a"]
    assert bar(text, "READY=1")[-1] == "pass"


def test_a_mirrord_that_never_ran_fails_every_bar():
    reps = [{**rep, "mirrord": {w: {"status": "failed", "error": "RuntimeError: exited\nmirrord: no jars"}
                                for w in rep["mirrord"]}} for rep in REPS]
    text = report.render(results(reps))
    lines = text[text.index("### Bars for"):text.index("### Ratios")].splitlines()
    assert [ln.rsplit("|", 2)[1].strip() for ln in lines if ln.startswith("| ") and "---" not in ln][1:] == \
        ["**FAIL**"] * 9
    assert "- rep 1, mirrord (default sink), steady: `RuntimeError: exited … mirrord: no jars`" in text


def test_the_transforms_cost_is_its_read_rate_against_plain_mirrords_in_the_same_repetition():
    plain = [200_000, 100_000, 150_000]
    transformed = [170_000, 90_000, 100_000]  # ratios 0.85, 0.90, 0.67: median 0.85
    reps = []
    for p, t, runs in zip(plain, transformed, REPS, strict=True):
        mine = backfill(t, 44) | {"read_per_s": t, "copied": 962_000}
        reps.append({**runs, "mirrord": {**runs["mirrord"], "backfill-100": runs["mirrord"]["backfill-100"]
                                         | {"read_per_s": p}}, report.TRANSFORM: {"backfill-100": mine}})
    res = results(reps)
    res["contenders"][report.TRANSFORM] = "mirrord (filter + mask transform)"
    text = report.render(res)
    assert "### Bars for mirrord (filter + mask transform)" not in text, "its bars are the transform's, not MM2's"
    text = text.split("### What a transform costs")[1]
    assert bar(text, "**100 B** | **median**")[4] == "0.85 (0.67–0.90)"
    assert bar(text, "100 B | 3")[2:] == ["150,000", "100,000", "0.67", "40", "44", "1.10", "962,000 of 1,000,000"]
    assert ("- Backfill 100 B: records read/s with the transform ÷ without, median 0.85 over 3 repetitions "
            "(bar ≥ 0.80): pass; CPU s with ÷ without, median 1.10") in text


def test_mirrord_is_held_to_sparks_plain_sink_in_the_same_mode_within_each_repetition():
    reps = [{k: dict(v) for k, v in rep.items()} for rep in REPS]
    # mirrord's 100 B rates 210, 130, 150 k against real-time Spark's 200, 160, 160 k: 1.05, 0.81, 0.94
    for rep, rate in zip(reps, (200_000, 160_000, 160_000), strict=True):
        rep["spark-realtime"] = {"backfill-100": backfill(rate, 30), "backfill-1024": backfill(40_000, 20)}
    res = results(reps)
    res["contenders"]["spark-realtime"] = "spark built-in sink, real-time mode"
    text = report.render(res)
    assert bar(text, "Backfill 100 B: records/s ÷ Spark's")[1:] == ["≥ 0.90", "0.94 (0.81–1.05)", "pass"]
    # 1 KiB: 40/40, 55/40, 60/40 -> median 1.38
    assert bar(text, "Backfill 1 KiB: records/s ÷ Spark's")[-1] == "pass"
    reps[1]["spark-realtime"]["backfill-100"] = backfill(300_000, 30)  # 1.05, 0.43, 0.94 -> 0.94
    reps[2]["spark-realtime"]["backfill-100"] = backfill(200_000, 30)  # 1.05, 0.43, 0.75 -> 0.75
    text = report.render(res)
    assert bar(text, "Backfill 100 B: records/s ÷ Spark's")[2:] == ["0.75 (0.43–1.05)", "**FAIL**"]


def test_help_prints_the_usage_and_exits_0():
    done = subprocess.run([sys.executable, "-m", "bench.report", "--help"], capture_output=True, text=True,
                          timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: python -m bench.report "), done.stdout
    assert "results" in done.stdout.splitlines()[0]
    assert "Traceback" not in done.stderr


def test_the_command_line_redoes_a_documents_tables_from_results_json(tmp_path):
    (tmp_path / "results.json").write_text(json.dumps(results(REPS)))
    doc = tmp_path / "BENCH.md"
    doc.write_text(f"# Numbers\n\n{report.BEGIN}\nold tables\n{report.END}\n\nAfter.\n")
    report.main([str(tmp_path / "results.json"), str(doc)])
    text = doc.read_text()
    assert "old tables" not in text and text.endswith("\n\nAfter.\n")
    assert report.render(results(REPS)) in text
    report.main([str(tmp_path / "results.json"), str(doc), "partial"])  # a named block, appended
    assert "<!-- bench:partial:begin -->" in doc.read_text()


# --- the scaling table: several runs, one shape each ---------------------------------------------------------

def shaped(reps: list[dict], partitions: int, topics: int = 1, late: int = 0, started: str = "2026-11-26 00:00:00 UTC",
           contenders: dict | None = None) -> dict:
    res = results(reps)
    res["config"].update(partitions=partitions, topics=topics, late_topics=late, late_at_seconds=5)
    res["started"] = started
    res["contenders"] = contenders or {"mm2": f"MM2 tasks.max = {partitions}", "mm2-streams": "MM2 tasks.max = 2",
                                       "mirrord": "mirrord (default sink)"}
    return res


def late_info(complete: int, topics: int, first: float | None) -> dict:
    return {"topics": topics, "expected": 100, "received": 100, "missing": 0, "topics_complete": complete,
            "p50_ms": 900.0, "p99_ms": 7000.0, "max_ms": 7500.0, "first_record_max_s": first}


def scaling_rows(text: str) -> dict[tuple[str, str], list[str]]:
    rows = [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in text.splitlines()
            if ln.startswith("| ") and not ln.startswith("| shape")]
    return {(r[0], r[1]): r[2:] for r in rows}


def test_the_scaling_table_puts_each_shape_and_contender_in_a_row_with_ratios_to_the_better_mm2():
    many = [{k: dict(v) for k, v in REPS[0].items()}]
    many[0]["mm2"]["steady"] = steady(2000, 9000, received=990) | {"late": late_info(18, 20, None)}
    many[0]["mm2-streams"]["steady"] = steady(1200, 5300) | {"late": late_info(20, 20, 6.2)}
    many[0]["mirrord"]["steady"] = steady(900, 4000) | {"late": late_info(20, 20, 9.5)}
    many[0]["mirrord"]["backfill-1024"] = {"status": "failed", "error": "RuntimeError: exited 1\nOutOfMemoryError"}
    text = report.render_scaling([
        ("bench/results/scaling/t200x3/20261126T120000", shaped(many, 600, 200, 20, "2026-11-26 12:00:00 UTC")),
        ("bench/results/scaling/p96/20261126T110000", shaped([REPS[1]], 96)),
        ("bench/results/scaling/p12/20261126T100000", shaped(REPS, 12)),
    ])
    rows = scaling_rows(text)
    shapes = list(dict.fromkeys(s for s, _ in rows))
    assert shapes == ["12 partitions (3 reps)", "96 partitions", "600 partitions: 200 topics × 3, 20 created "
                      "during the stream"]  # ordered by partitions, whatever the order given
    # 12 partitions, 3 reps: medians of the values and of the ratios within each repetition (100 B: 1.5, 1.3, 1.5;
    # 1 KiB: 1.0, 1.1, 1.0)
    assert rows[("12 partitions (3 reps)", "mirrord (default sink)")] == [
        "150 k (1.50×)", "55 k (1.00×)", "40.0 / 20.0", "900", "1,000 / 4,000 (0.75×)", "0", ""]
    assert rows[("96 partitions", "MM2 tasks.max = 96")][:2] == ["100 k (1.00×)", "50 k (1.00×)"]
    assert rows[("96 partitions", "MM2 tasks.max = 2")][:2] == ["80 k (0.80×)", "45 k (0.90×)"]
    big = "600 partitions: 200 topics × 3, 20 created during the stream"
    assert rows[(big, "mirrord (default sink)")] == [
        "210 k (1.50×)", "failed", "40.0 / –", "900", "900 / 4,000 (0.75×)", "0",
        "20 of 20 complete; first record ≤ 9.5 s after creation; p99 7,000 ms"]
    # the MM2 that lost records is not the stream's reference; its undelivered records are counted
    assert rows[(big, "MM2 tasks.max = 600")][4:] == ["2,000 / 9,000 (1.70×)", "10 of 1,000 (1.0 %)",
                                                      "18 of 20 complete; some never arrived; p99 7,000 ms"]
    assert "- **600 partitions: 200 topics × 3, 20 created during the stream**: run of 2026-11-26 12:00:00 UTC, 1 " \
           "repetition" in text
    assert "20 topics created 5 s into it" in text and "`bench/results/scaling/p96/20261126T110000`" in text
    assert f"- {big}, mirrord (default sink), backfill-1024: `RuntimeError: exited 1 … OutOfMemoryError`" in text


def test_old_results_without_a_shape_are_one_topic_and_contenders_that_did_not_run_have_no_row():
    res = results([{"mm2": REPS[0]["mm2"], "mirrord": {"steady": steady(900, 4000)}}])
    res["contenders"] = {"mm2": "MM2", "mirrord": "mirrord", "spark-realtime": "spark"}
    rows = scaling_rows(report.render_scaling([("old", res)]))
    assert set(rows) == {("12 partitions", "MM2"), ("12 partitions", "mirrord")}
    assert rows[("12 partitions", "mirrord")][:5] == ["–", "–", "– / –", "900", "900 / 4,000 (0.44×)"]


def test_the_command_line_writes_the_scaling_block_from_directories_of_runs(tmp_path):
    for name, res in [("p12", shaped(REPS, 12)), ("t8", shaped([REPS[0]], 24, 8, 2))]:
        older, newer = tmp_path / name / "20261126T090000", tmp_path / name / "20261126T100000"
        older.mkdir(parents=True)
        newer.mkdir()
        (older / "results.json").write_text(json.dumps(shaped([REPS[2]], 480)))  # not the newest: left out
        (newer / "results.json").write_text(json.dumps(res))
    assert report.find_results(tmp_path / "p12") == tmp_path / "p12" / "20261126T100000" / "results.json"
    doc = tmp_path / "BENCH.md"
    doc.write_text(f"# Numbers\n\n{report.BEGIN}\nmain tables\n{report.END}\n\n<!-- bench:scaling:begin -->\nold\n"
                   "<!-- bench:scaling:end -->\n\nAfter.\n")
    report.main(["--scaling", str(tmp_path / "t8"), str(tmp_path / "p12" / "20261126T100000"), "--doc", str(doc)])
    text = doc.read_text()
    assert "main tables" in text and "\nold\n" not in text and text.endswith("\n\nAfter.\n")
    assert "| 24 partitions: 8 topics × 3, 2 created during the stream | mirrord (default sink) |" in text
    assert "| 12 partitions (3 reps) | mirrord (default sink) |" in text and "480 partitions" not in text
    done = subprocess.run([sys.executable, "-m", "bench.report"], capture_output=True, text=True, timeout=60,
                          cwd=ROOT)
    assert done.returncode == 2 and "--scaling" in done.stderr


def test_mirrords_exactly_once_is_measured_against_mirrormaker_2s_exactly_once_only():
    reps = [{**REPS[0],
             "mm2-eos": {"backfill-100": backfill(50_000, 80), "steady": steady(2500, 9500)},
             "mirrord-eos": {"backfill-100": backfill(100_000, 50), "steady": steady(1100, 4500)}}]
    res = results(reps)
    assert report.pairs(res, "mirrord-eos", "backfill-100")[0][2] == "mm2-eos"  # not the faster mm2-streams
    assert report.pairs(res, "mirrord", "backfill-100")[0][2] == "mm2-streams"
    assert report._ratios(res, "mirrord-eos", "backfill-100", report.BEST) == [2.0]
    assert report.pairs(res, "mirrord-eos", "steady")[0][2] == "mm2-eos"


def test_the_cpu_by_thread_compares_the_threads_that_move_records_with_the_better_mm2s_pair_by_pair():
    def kinds(res: dict, records: float, jit: float) -> dict:
        return res | {"cpu_by_thread_kind": {"records": records, "jit": jit, "gc": 1.0, "other": 6.0}}

    reps = [{"mm2": {"backfill-100": kinds(backfill(90_000, 62), 30.0, 20.0)},
             "mm2-streams": {"backfill-100": kinds(backfill(140_000, 44), 20.0, 18.0)},  # the better MM2
             "mirrord": {"backfill-100": kinds(backfill(210_000, 40), 10.0, 17.0)}},
            {"mm2": {"backfill-100": kinds(backfill(150_000, 62), 40.0, 20.0)},  # the better MM2 now
             "mm2-streams": {"backfill-100": kinds(backfill(140_000, 44), 20.0, 18.0)},
             "mirrord": {"backfill-100": kinds(backfill(210_000, 40), 12.0, 17.0)}}]
    text = report.render(results(reps))
    table = text[text.index("| contender | moving records |"):]
    # per M records (1 M copied): mirrord 10 and 12, against 20 (mm2-streams) and 40 (mm2): 0.5 and 0.3
    assert "| mirrord (default sink) | 11.0 (10.0–12.0) | 0.40 (0.30–0.50) | 17.0 (17.0–17.0) |" in table
    assert "| MM2 partitions | 35.0 (30.0–40.0) |  | 20.0 (20.0–20.0) | 1.0 (1.0–1.0) | 6.0 (6.0–6.0) |" in table
