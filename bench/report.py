"""Tables for BENCHMARKS.md from a bench run's results.json (`python -m bench.report results.json` redoes them).

`python -m bench.report --scaling RUN...` writes the partition-scaling table instead, one group of rows per run
(each of another shape: partitions, topics), into the `bench:scaling` block.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

from bench.shape import Shape

BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"
SIZE_LABEL = {"backfill-100": "100 B", "backfill-1024": "1 KiB"}
# The MirrorMaker 2 contenders (tasks.max = partitions, tasks.max = num.streams): the reference of every
# ratio is, per workload and per repetition, the better of those that ran (see better_mm2).
MM2 = ("mm2", "mm2-streams")
# MirrorMaker 2 with exactly.once.source.support=enabled: the peer of mirrord's exactly once
MM2_EOS: tuple[str, ...] = ("mm2-eos",)


def peers(name: str) -> tuple[str, ...]:
    """The MirrorMaker 2 runs a contender is measured against: exactly once against exactly once."""
    return MM2_EOS if name.endswith("-eos") else MM2
BEST = "better MM2"  # `against` of _ratios for that reference

# The bars mirrord must meet (issue 15, against the better of the two MM2 per workload and repetition).
BAR_BACKFILL = {"backfill-100": 1.0, "backfill-1024": 1.25}  # records/s ÷ the better MM2, at least
BAR_P50 = 0.5  # steady stream: p50 ÷ the better MM2's p50, at most (and p99 ÷ its p99 at most 1)
BAR_CPU = 0.6  # CPU s per M records ÷ the better MM2's, at most (issue 32): a backfill's copy, a stream's window
BAR_READY_S = 15.0  # READY (sd_notify) after launch, less than
BAR_RSS_BYTES = 1.5 * 2**30  # peak RSS of the process tree, at most
# mirrord's fidelity (its source and writer, offset syncs, metrics) against Spark's own source → sink in the
# same trigger mode: records/s at least this share of the plain sink's. mirrord's micro-batch mode is held to
# the better-tuned micro-batch reference (async progress tracking, 5 000 records a poll).
BAR_SAME_MODE = 0.9
SAME_MODE = {"mirrord": "spark-realtime", "mirrord-realtime": "spark-realtime", "mirrord-microbatch": "spark-async"}
# mirrord with a transform (filter + mask) against plain mirrord, in the same repetition (issue 9).
TRANSFORM, PLAIN = "mirrord-transform", "mirrord"
BAR_TRANSFORM = 0.80  # source records/s with the transform ÷ without, at least: it costs at most 20 %


def brief(workload: str, res: dict) -> str:
    if res.get("status") == "failed":
        return f"FAILED {res.get('error', '')[:300]}"
    if workload == "steady":
        late = res.get("late")
        late = (f"; late topics: {late['topics_complete']}/{late['topics']} complete, "
                f"{late['received']}/{late['expected']} records, first record ≤ "
                f"{late['first_record_max_s'] if late['first_record_max_s'] is not None else math.nan:.1f} s "
                "after creation") if late else ""
        return (f"{res['status']}: p50 {res['p50_ms']:.1f} ms, p99 {res['p99_ms']:.1f} ms, max {res['max_ms']:.1f} ms, "
                f"{res['received']}/{res['expected']} records, cpu {res['cpu_seconds']:.0f} s{window_line(res)}{late}"
                f"{source_ack_line(res.get('source_ack'))}{stage_line(res.get('stages'))}"
                f"{pace_line(res.get('transactions'))}{idle_line(res)}")
    return (f"{res['status']}: {res['records_per_s']:,.0f} records/s ({res['mb_per_s']:.1f} MB/s) over "
            f"{res['seconds']:.1f} s, startup {res['startup_seconds'] or 0:.1f} s, cpu {res['cpu_seconds']:.0f} s, "
            f"rss {res['peak_rss_bytes'] / 2**20:.0f} MiB{pace_line(res.get('transactions'))}")


def pace_line(pace: dict | None) -> str:
    """Exactly once: the commits' pace (bench/run.py transaction_pace), when the contender has transactions."""
    if not pace:
        return ""
    return (f"; {pace['committed']} transactions of {pace['transaction_ms_mean']:.0f} ms, commits "
            f"{pace['commit_ms_mean']:.1f} ms ({100 * pace['commit_share']:.1f} % of their time)")


def idle_line(res: dict) -> str:
    """After the stream, nothing produced (bench/run.py Bench.idle): the contender's and the source broker's CPU."""
    if res.get("idle_core_share") is None:
        return ""
    broker = res.get("idle_source_broker_core_share")
    return (f"; idle {res['idle_seconds']:.0f} s: {100 * res['idle_core_share']:.1f} % of a core"
            + (f", the source broker {100 * broker:.1f} %" if broker is not None else ""))


def window_line(res: dict) -> str:
    """The stream's CPU in its measured window (bench/run.py StreamWindow), when it was measured."""
    if res.get("cpu_seconds_per_m_window") is None:
        return ""
    return f" ({res['cpu_window_seconds']:.1f} s in the window, {res['cpu_seconds_per_m_window']:.1f} s per M records)"


def source_ack_line(acked: dict | None) -> str:
    """The bench producer's sends to the source's acknowledgement (bench/latency.py ACK_SAMPLE): what any
    contender's latency includes before a mirror can fetch the record."""
    if not acked or not acked.get("timed"):
        return ""
    return f"; source acks p50/p99 {acked['p50_ms']:.1f}/{acked['p99_ms']:.1f} ms"


def stage_line(split: dict | None) -> str:
    """mirrord's stages of a stream (bench/stages.py): each stage's p50/p99 in ms after the source timestamp."""
    if not split:
        return ""
    parts = [f"{k} {v['p50_ms']}/{v['p99_ms']}" for k, v in split.items() if isinstance(v, dict)]
    return f"; stages p50/p99 ms: {', '.join(parts)}, {split.get('records_per_poll')} records a poll"


def spread(values: list[float], fmt: str = "{:,.0f}") -> str:
    """median (min–max) of the values, or the one value."""
    values = [v for v in values if v is not None]
    if not values:
        return "–"
    med = fmt.format(statistics.median(values))
    if len(values) == 1:
        return med
    return f"{med} ({fmt.format(min(values))}–{fmt.format(max(values))})"


def _ok(res: dict | None) -> bool:
    return res is not None and res.get("status") != "failed"


def _num(v: float | None) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else v


def cpu_per_m(res: dict) -> float | None:
    """CPU seconds per million records copied (recorded by the bench since it ran two MM2s, else derived)."""
    if res.get("cpu_seconds_per_m_records") is not None:
        return res["cpu_seconds_per_m_records"]
    return 1e6 * res["cpu_seconds"] / res["copied"] if res.get("copied") else None


def ready_s(res: dict) -> float | None:
    """Seconds from launch to READY=1 (sd_notify) for a contender that sends it, else to its first copied record."""
    return res.get("ready_seconds") if res.get("ready_seconds") is not None else res.get("startup_seconds")


def better_mm2(rep: dict, workload: str, among: tuple[str, ...] = MM2) -> tuple[str, dict] | None:
    """(name, run) of the better MirrorMaker 2 (`among`) of this repetition: the higher records/s in a backfill; in
    the stream the lower p99 among those that delivered every record (among all of them if none did)."""
    runs = [(n, rep["runs"].get(n, {}).get(workload)) for n in among]
    runs = [(n, r) for n, r in runs if _ok(r)]
    if not runs:
        return None
    if workload == "steady":
        return min(runs, key=lambda nr: (nr[1]["received"] < nr[1]["expected"],
                                         _num(nr[1]["p99_ms"]) if _num(nr[1]["p99_ms"]) is not None else math.inf))
    return max(runs, key=lambda nr: nr[1]["records_per_s"])


def pairs(results: dict, name: str, workload: str) -> list[tuple[int, dict, str, dict]]:
    """(rep, this contender's run, the better MM2's name, its run) for each repetition where both ran."""
    out = []
    for rep in results["reps"]:
        mine, best = rep["runs"].get(name, {}).get(workload), better_mm2(rep, workload, peers(name))
        if _ok(mine) and best:
            out.append((rep["rep"], mine, *best))
    return out


def _runs(results: dict, name: str, workload: str) -> list[dict | None]:
    """This contender's runs of the workload, one per rep that ran it, None where it failed."""
    out = []
    for rep in results["reps"]:
        r = rep["runs"].get(name, {}).get(workload)
        if r is not None:
            out.append(r if r.get("status") != "failed" else None)
    return out


def _ratios(results: dict, name: str, workload: str, against: str) -> list[float]:
    """contender rate / reference rate, pair by pair within each rep; `against` is "limit", BEST (the better
    MirrorMaker 2 of the rep) or a contender's name."""
    out = []
    for rep in results["reps"]:
        mine = rep["runs"].get(name, {}).get(workload)
        if not _ok(mine):
            continue
        if against == "limit":
            ref = rep["limit"].get(workload, {}).get("records_per_s")
        elif against == BEST:
            best = better_mm2(rep, workload, peers(name))
            ref = best[1]["records_per_s"] if best else None
        else:
            theirs = rep["runs"].get(against, {}).get(workload)
            ref = theirs["records_per_s"] if _ok(theirs) else None
        if ref:
            out.append(mine["records_per_s"] / ref)
    return out


def _better_count(results: dict, name: str, workload: str) -> str:
    """For a MirrorMaker 2 run: in how many of the repetitions with a reference it was the better one."""
    reps = [better_mm2(rep, workload) for rep in results["reps"]]
    reps = [b for b in reps if b]
    if name not in MM2 or not reps or sum(n in results["contenders"] for n in MM2) < 2:
        return ""
    return f"the better MM2 in {sum(b[0] == name for b in reps)} of {len(reps)}"


def _status(runs: list[dict | None], extra: str = "") -> str:
    bad = sum(r is None for r in runs)
    timeouts = sum(1 for r in runs if r and r["status"] == "timeout")
    notes = [f"{bad} failed" for _ in [0] if bad] + [f"{timeouts} hit the time limit (partial copy)" for _ in [0]
                                                       if timeouts]
    return "; ".join((notes or ["ok"]) + [extra] * bool(extra))


def _mib(b: float) -> float:
    return b / 2**20


def _per_m(res: dict, kind: str) -> float | None:
    """CPU seconds of one kind of thread (bench/procs.py THREAD_KINDS) per million records copied."""
    kinds = res.get("cpu_by_thread_kind")
    return 1e6 * kinds[kind] / res["copied"] if kinds and res.get("copied") else None


def _cpu_by_thread(results: dict, names: dict, workload: str) -> list[str]:
    """Where each contender's CPU went in the backfill, by thread: the threads that move records apart from the
    JIT's, the collector's and the rest (a start-up's, a planner's), per million records copied; the records'
    share against the better MirrorMaker 2's, pair by pair."""
    rows = []
    for name, label in names.items():
        ok = [r for r in _runs(results, name, workload) if r and r.get("cpu_by_thread_kind")]
        if not ok:
            continue
        ratios = [_per_m(mine, "records") / _per_m(best, "records")
                  for _, mine, _, best in pairs(results, name, workload)
                  if _per_m(mine, "records") is not None and _per_m(best, "records")]
        rows.append(f"| {label} | {spread([_per_m(r, 'records') for r in ok], '{:.1f}')} | "
                    f"{spread(ratios, '{:.2f}') if name not in MM2 else ''} | "
                    f"{spread([_per_m(r, 'jit') for r in ok], '{:.1f}')} | "
                    f"{spread([_per_m(r, 'gc') for r in ok], '{:.1f}')} | "
                    f"{spread([_per_m(r, 'other') for r in ok], '{:.1f}')} |")
    if not rows:
        return []
    return ["", "Where the CPU went, by thread, in CPU s per M records (bench/procs.py `THREAD_KINDS`): the threads "
            "that move records (task threads and the producers' I/O threads), the JIT's compilers, the collector, "
            "and the rest (a Spark driver's py4j and main threads, which plan the query at the start; schedulers, "
            "coordinators, Python).", "",
            "| contender | moving records | ÷ better MM2 | JIT | GC | other |",
            "|---|---:|---:|---:|---:|---:|", *rows]


def render(results: dict) -> str:
    cfg, m = results["config"], results["machine"]
    names = results["contenders"]
    reps = len(results["reps"])
    other = results["cpu_seconds_other"]
    lines = [
        f"Run of {results['started']}, {results['wall_seconds'] / 60:.1f} min, {reps} repetitions; "
        "every cell is the median and (min–max) over the repetitions.",
        "",
        f"- Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB, {m['os']}, kernel {m['kernel']}",
        f"- Versions: {m['java']}; Python {m['python']}; pyspark {m['pyspark']} with spark-sql-kafka "
        f"{m['spark_sql_kafka']}; confluent-kafka {m['confluent_kafka']} (librdkafka {m['librdkafka']}); "
        f"Kafka brokers and perf tools {m['kafka_broker']}; connect-mirror {m['connect_mirror']}; "
        f"MirrorMaker 1 from Kafka {m['mirrormaker1']}; kcat {m['kcat']}; mirrord at `{m['mirrord_commit']}`",
        f"- Workloads: backfill of {cfg['records']['backfill-100']:,} records of 100 B and "
        f"{cfg['records']['backfill-1024']:,} of 1 KiB, {_shape_text(cfg)}; steady stream of "
        f"{cfg['rate']:,.0f} records/s of 100 B for {cfg['steady_seconds']:.0f} s after {cfg['warmup_seconds']:.0f} s "
        f"of warm-up; {cfg['streams']} streams (mirrord/MM1 `num.streams`, Spark `local[{cfg['streams']}]`); "
        f"MirrorMaker 2 both with `tasks.max={cfg['partitions']}` (= partitions, `mm2`) and "
        f"`tasks.max={cfg['streams']}` (= streams, `mm2-streams`)",
        "- **÷ better MM2**: pair by pair within each repetition, against whichever MirrorMaker 2 did better in that "
        "repetition and workload (higher records/s in a backfill; lower p99 in the stream, among those that "
        "delivered every record); the cells are the median and (min–max) of those ratios.",
        "- Producer settings, the same for every contender and the limit: "
        + ", ".join(f"`{k}={v}`" for k, v in results["producer"].items()),
        f"- Other load on the machine: processes outside the bench used {other:,.0f} CPU seconds during the run "
        f"({100 * other / (results['wall_seconds'] * m['cores']):.0f} % of the machine); "
        f"the bench's own processes {results['cpu_seconds_bench']:,.0f}.",
    ]
    if results.get("stopped_early"):
        lines.append(f"- Stopped early: {results['stopped_early']}.")
    if results.get("skipped"):
        lines.append("- Not run: " + "; ".join(f"{k} ({v})" for k, v in results["skipped"].items()))
    lines.append("")

    for workload, size in SIZE_LABEL.items():
        if workload not in cfg["workloads"]:
            continue
        lines += [f"### Backfill, {size} values ({cfg['records'][workload]:,} records)", "",
                  "| contender | records/s | MB/s | ÷ better MM2 | ÷ limit | startup s | CPU s | CPU s per M records "
                  "| while copying | peak RSS MiB | runs |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
        limits = [rep["limit"].get(workload) for rep in results["reps"] if rep["limit"].get(workload)]
        if limits:
            lines.append(f"| **limit** (min of producer-perf into target and consumer-perf from source) | "
                         f"{spread([x['records_per_s'] for x in limits])} | "
                         f"{spread([x['mb_per_s'] for x in limits], '{:.1f}')} | | 1 | | | | | | |")
        for name, label in names.items():
            runs = _runs(results, name, workload)
            ok = [r for r in runs if r]
            if not runs:
                continue
            lines.append(
                f"| {label} | {spread([r['records_per_s'] for r in ok])} | "
                f"{spread([r['mb_per_s'] for r in ok], '{:.1f}')} | "
                f"{spread(_ratios(results, name, workload, BEST), '{:.2f}')} | "
                f"{spread(_ratios(results, name, workload, 'limit'), '{:.2f}')} | "
                f"{spread([r['startup_seconds'] for r in ok], '{:.1f}')} | "
                f"{spread([r['cpu_seconds'] for r in ok], '{:.0f}')} | "
                f"{spread([cpu_per_m(r) for r in ok], '{:.1f}')} | "
                f"{spread([r.get('cpu_seconds_per_m_copying') for r in ok], '{:.1f}')} | "
                f"{spread([_mib(r['peak_rss_bytes']) for r in ok], '{:.0f}')} | "
                f"{_status(runs, _better_count(results, name, workload))} |")
        lines += _cpu_by_thread(results, names, workload)
        if limits:
            lines += ["", f"Limit parts ({size}): producer-perf into the target "
                      f"{spread([x['produce']['records_per_s'] for x in limits])} records/s; consumer-perf from the "
                      f"source {spread([x['consume']['records_per_s'] for x in limits])} records/s (fetch rate, "
                      "without the group join)."]
        lines.append("")

    if "steady" in cfg["workloads"]:
        lines += [f"### Steady stream, {cfg['rate']:,.0f} records/s, latency from send to target consume", "",
                  "| contender | p50 ms | p99 ms | max ms | delivered | startup s | CPU s | CPU s per M in the window "
                  "| idle: % of a core, source broker % | peak RSS MiB | runs |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
        for name, label in names.items():
            runs = _runs(results, name, "steady")
            ok = [r for r in runs if r]
            if not runs:
                continue
            delivered = [100 * r["received"] / r["expected"] for r in ok if r["expected"]]
            lines.append(
                f"| {label} | {spread([r['p50_ms'] for r in ok], '{:.1f}')} | "
                f"{spread([r['p99_ms'] for r in ok], '{:.1f}')} | {spread([r['max_ms'] for r in ok], '{:.0f}')} | "
                f"{_pct(delivered)} | {spread([r['startup_seconds'] for r in ok], '{:.1f}')} | "
                f"{spread([r['cpu_seconds'] for r in ok], '{:.0f}')} | "
                f"{spread([r.get('cpu_seconds_per_m_window') for r in ok], '{:.1f}')} | "
                f"{_idle_cell(ok)} | {spread([_mib(r['peak_rss_bytes']) for r in ok], '{:.0f}')} | "
                f"{_status(runs, _better_count(results, name, 'steady'))} |")
        lines.append("")
        lates = [(label, [r["late"] for r in _runs(results, name, "steady") if r and r.get("late")])
                 for name, label in names.items()]
        if any(x for _, x in lates):
            lines += [f"Topics created during the stream ({cfg.get('late_topics')} of {cfg.get('topics')}, "
                      f"{cfg.get('late_at_seconds', 5):g} s into the measured window; their records are in the "
                      "table above too):", ""]
            for label, xs in [(label, xs) for label, xs in lates if xs]:
                firsts = [x["first_record_max_s"] for x in xs]
                lines.append(
                    f"- {label}: {sum(x['topics_complete'] for x in xs)} of {sum(x['topics'] for x in xs)} complete, "
                    f"{sum(x['received'] for x in xs):,} of {sum(x['expected'] for x in xs):,} measured records; "
                    f"p50 {spread([_num(x['p50_ms']) for x in xs], '{:,.0f}')} ms, "
                    f"p99 {spread([_num(x['p99_ms']) for x in xs], '{:,.0f}')} ms; slowest topic's first record "
                    + (f"{spread(firsts, '{:.1f}')} s after its creation" if all(f is not None for f in firsts)
                       else "never arrived in some runs"))
            lines.append("")

    for name in [n for n in names if (n == "mirrord" or n.startswith("mirrord-")) and n != TRANSFORM]:
        lines += _versus_mm2(results, name) + _bars(results, name)
    if TRANSFORM in names:
        lines += _transform_cost(results)

    lines += ["### Ratios (records/s, pair by pair within each repetition)", ""]
    for name, label in names.items():
        parts = []
        for workload, size in SIZE_LABEL.items():
            if workload in cfg["workloads"] and _runs(results, name, workload):
                parts.append(f"{size}: ÷better MM2 {spread(_ratios(results, name, workload, BEST), '{:.2f}')}, "
                             f"÷limit {spread(_ratios(results, name, workload, 'limit'), '{:.2f}')}")
        if parts:
            lines.append(f"- {label}: " + "; ".join(parts))
    failures = [(rep["rep"], name, w, res["error"]) for rep in results["reps"] for name, ws in rep["runs"].items()
                for w, res in ws.items() if res.get("status") == "failed"]
    if failures:
        lines += ["", "Failed runs (the first and last line of the error):", ""]
        lines += [f"- rep {r}, {names.get(n, n)}, {w}: `{_gist(e)}`" for r, n, w, e in failures]
    return "\n".join(lines) + "\n"


def _idle_cell(runs: list[dict]) -> str:
    """The stream's idle after it (bench/run.py Bench.idle): the contender's share of a core, the source broker's."""
    mine = [100 * r["idle_core_share"] for r in runs if r.get("idle_core_share") is not None]
    broker = [100 * r["idle_source_broker_core_share"] for r in runs
              if r.get("idle_source_broker_core_share") is not None]
    if not mine:
        return "–"
    return spread(mine, "{:.1f}") + (f", {spread(broker, '{:.1f}')}" if broker else "")


def _shape_text(cfg: dict) -> str:
    shape = Shape.from_config(cfg)
    if shape.topics == 1:
        return f"{shape.partitions} partitions"
    late = (f", {shape.late} of the stream's topics created {cfg.get('late_at_seconds', 5):g} s into its measured "
            "window") if shape.late else ""
    return f"{shape.partitions} partitions in {shape.topics} topics of {shape.per_topic}{late}"


def _verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else "pass" if ok else "**FAIL**"


def _med(values: list[float]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _ratio(a: float | None, b: float | None) -> float | None:
    a, b = _num(a), _num(b)
    if a is None:
        return math.inf if b is not None else None  # nothing of ours arrived: worse than any reference
    return a / b if b else None


def _p99(res: dict) -> float | None:
    return _num(res.get("p99_ms"))


def _pct(values: list[float | None]) -> str:
    text = spread(values, "{:.1f}")
    return text if text == "–" else f"{text} %"


def _delivered(res: dict) -> float | None:
    return 100 * res["received"] / res["expected"] if res.get("expected") else None


def _rep_rows(results: dict, name: str, workload: str) -> list[tuple[int, dict | None, tuple[str, dict] | None,
                                                                      tuple[str, dict] | None]]:
    """(rep, this contender's run or None if it failed, the better MM2, the other MM2) for every repetition
    in which this contender ran the workload."""
    out = []
    for rep in results["reps"]:
        mine = rep["runs"].get(name, {}).get(workload)
        if mine is None:
            continue
        best = better_mm2(rep, workload, peers(name))
        other = None
        if best:
            others = [(n, rep["runs"].get(n, {}).get(workload)) for n in peers(name) if n != best[0]]
            other = next(((n, r) for n, r in others if _ok(r)), None)
        out.append((rep["rep"], mine if _ok(mine) else None, best, other))
    return out


def _which(best: tuple[str, dict] | None, other: tuple[str, dict] | None, key: str, fmt: str) -> str:
    if not best:
        return "none ran"
    note = f" (`{other[0]}`: {fmt.format(other[1][key]) if _num(other[1][key]) is not None else '–'})" if other else ""
    return f"`{best[0]}`{note}"


def _tally(rows: list) -> str:
    names = [b[0] for _, _, b, _ in rows if b]
    return ", ".join(f"`{n}` {names.count(n)}×" for n in MM2 if n in names) or "–"


def _versus_mm2(results: dict, name: str) -> list[str]:
    """mirrord (or one of its modes) against the better MirrorMaker 2, repetition by repetition."""
    label, cfg = results["contenders"][name], results["config"]
    lines = [f"### {label} against the better MirrorMaker 2, repetition by repetition", "",
             "Each row pairs its run with the better MirrorMaker 2 run of the same repetition (named; the other "
             "one's value in brackets); ratios are taken within the row. The **median** rows give the median and "
             "(min–max) over the repetitions, of the ratios as of the values.", ""]
    backfills = [w for w in SIZE_LABEL if w in cfg["workloads"] and _rep_rows(results, name, w)]
    if backfills:
        lines += ["| backfill | rep | better MM2 (other's records/s) | MM2 records/s | mirrord records/s "
                  "| ÷ records/s | MM2 CPU s per M records | mirrord CPU s per M records | ÷ CPU s per M records |",
                  "|---|---|---|---:|---:|---:|---:|---:|---:|"]
        for w in backfills:
            rows = _rep_rows(results, name, w)
            for rep, mine, best, other in rows:
                ref = best[1] if best else {}
                if mine is None:
                    lines.append(f"| {SIZE_LABEL[w]} | {rep} | {_which(best, other, 'records_per_s', '{:,.0f}')} | "
                                 f"{spread([ref.get('records_per_s')])} | failed | | "
                                 f"{spread([cpu_per_m(ref) if ref else None], '{:.1f}')} | failed | |")
                    continue
                lines.append(
                    f"| {SIZE_LABEL[w]} | {rep} | {_which(best, other, 'records_per_s', '{:,.0f}')} | "
                    f"{spread([ref.get('records_per_s')])} | {spread([mine['records_per_s']])} | "
                    f"{spread([_ratio(mine['records_per_s'], ref.get('records_per_s'))], '{:.2f}')} | "
                    f"{spread([cpu_per_m(ref) if ref else None], '{:.1f}')} | {spread([cpu_per_m(mine)], '{:.1f}')} | "
                    f"{spread([_ratio(cpu_per_m(mine), cpu_per_m(ref) if ref else None)], '{:.2f}')} |")
            paired = [(m, b[1]) for _, m, b, _ in rows if m and b]
            lines.append(
                f"| **{SIZE_LABEL[w]}** | **median** | {_tally(rows)} | "
                f"{spread([b['records_per_s'] for _, b in paired])} | "
                f"{spread([m['records_per_s'] for _, m, _, _ in rows if m])} | "
                f"{spread([_ratio(m['records_per_s'], b['records_per_s']) for m, b in paired], '{:.2f}')} | "
                f"{spread([cpu_per_m(b) for _, b in paired], '{:.1f}')} | "
                f"{spread([cpu_per_m(m) for _, m, _, _ in rows if m], '{:.1f}')} | "
                f"{spread([_ratio(cpu_per_m(m), cpu_per_m(b)) for m, b in paired], '{:.2f}')} |")
        lines.append("")
    rows = _rep_rows(results, name, "steady") if "steady" in cfg["workloads"] else []
    if rows:
        lines += [f"Steady stream, {cfg['rate']:,.0f} records/s:", "",
                  "| rep | better MM2 (other's p99 ms) | MM2 p50 ms | MM2 p99 ms | mirrord p50 ms | mirrord p99 ms "
                  "| p99 ÷ MM2's | MM2 delivered | mirrord delivered |",
                  "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
        for rep, mine, best, other in rows:
            ref = best[1] if best else {}
            ms = "{:,.1f}"
            if mine is None:
                lines.append(f"| {rep} | {_which(best, other, 'p99_ms', ms)} | {spread([_num(ref.get('p50_ms'))], ms)} "
                             f"| {spread([_p99(ref)], ms)} | failed | failed | | "
                             f"{_pct([_delivered(ref)] if ref else [])} | failed |")
                continue
            lines.append(
                f"| {rep} | {_which(best, other, 'p99_ms', ms)} | {spread([_num(ref.get('p50_ms'))], ms)} | "
                f"{spread([_p99(ref)], ms)} | {spread([_num(mine['p50_ms'])], ms)} | {spread([_p99(mine)], ms)} | "
                f"{spread([_ratio(_p99(mine), _p99(ref))] if ref else [], '{:.2f}')} | "
                f"{_pct([_delivered(ref)] if ref else [])} | {_pct([_delivered(mine)])} |")
        paired = [(m, b[1]) for _, m, b, _ in rows if m and b]
        ours = [m for _, m, _, _ in rows if m]
        ms = "{:,.1f}"
        lines += [
            f"| **median** | {_tally(rows)} | {spread([_num(b['p50_ms']) for _, b in paired], ms)} | "
            f"{spread([_p99(b) for _, b in paired], ms)} | {spread([_num(m['p50_ms']) for m in ours], ms)} | "
            f"{spread([_p99(m) for m in ours], ms)} | "
            f"{spread([_ratio(_p99(m), _p99(b)) for m, b in paired], '{:.2f}')} | "
            f"{_pct([_delivered(b) for _, b in paired])} | {_pct([_delivered(m) for m in ours])} |",
            ""]
    if not backfills and not rows:
        lines += ["It ran no workload.", ""]
    return lines


def _bars(results: dict, name: str) -> list[str]:
    """The bars the project set for mirrord, each with the measured value and pass/fail."""
    label, cfg = results["contenders"][name], results["config"]
    lines = [f"### Bars for {label}", "",
             "Ratios are taken pair by pair within each repetition against the better MirrorMaker 2 of that "
             "repetition; a bar on a ratio holds when the median over the repetitions meets it. A failed run "
             "fails its bar; **n/a** where the workload or a MirrorMaker 2 run to compare with is missing.", "",
             "| bar | required | measured | result |", "|---|---|---|---|"]

    def row(bar: str, required: str, measured: str, ok: bool | None) -> None:
        lines.append(f"| {bar} | {required} | {measured} | {_verdict(ok)} |")

    def failed_note(rows: list) -> tuple[int, str]:
        n = sum(m is None for _, m, _, _ in rows)
        return n, f"; {n} of {len(rows)} runs failed" if n else ""

    for w in [w for w in SIZE_LABEL if w in cfg["workloads"]]:
        rows = _rep_rows(results, name, w)
        bad, note = failed_note(rows)
        paired = [(m, b[1]) for _, m, b, _ in rows if m and b]
        ratios = [_ratio(m["records_per_s"], b["records_per_s"]) for m, b in paired]
        med = _med(ratios)
        row(f"Backfill {SIZE_LABEL[w]}: records/s ÷ the better MM2's", f"≥ {BAR_BACKFILL[w]:.2f}",
            f"{spread(ratios, '{:.2f}')}; mirrord {spread([m['records_per_s'] for m, _ in paired])} vs MM2 "
            f"{spread([b['records_per_s'] for _, b in paired])} records/s{note}" if paired else f"–{note}",
            None if med is None and not bad else bool(med is not None and med >= BAR_BACKFILL[w] and not bad))
        ref = SAME_MODE.get(name)
        if ref in results["contenders"]:
            same = _ratios(results, name, w, ref)
            med = _med(same)
            row(f"Backfill {SIZE_LABEL[w]}: records/s ÷ Spark's plain sink in the same mode (`{ref}`)",
                f"≥ {BAR_SAME_MODE:.2f}", f"{spread(same, '{:.2f}')}{note}" if same else f"–{note}",
                None if med is None and not bad else bool(med is not None and med >= BAR_SAME_MODE and not bad))
        # while copying where both runs measured it (a short backfill's whole run is mostly the start-up's CPU)
        copying = all(m.get("cpu_seconds_per_m_copying") and b.get("cpu_seconds_per_m_copying") for m, b in paired)
        per_m = (lambda r: r["cpu_seconds_per_m_copying"]) if paired and copying else cpu_per_m  # noqa: E731
        cpu = [_ratio(per_m(m), per_m(b)) for m, b in paired]
        med = _med(cpu)
        row(f"Backfill {SIZE_LABEL[w]}: CPU s per M records{' while copying' if paired and copying else ''} ÷ the "
            f"better MM2's", f"≤ {BAR_CPU:.2f}",
            f"{spread(cpu, '{:.2f}')}; mirrord {spread([per_m(m) for m, _ in paired], '{:.1f}')} vs MM2 "
            f"{spread([per_m(b) for _, b in paired], '{:.1f}')} s{note}" if paired else f"–{note}",
            None if med is None and not bad else bool(med is not None and med <= BAR_CPU and not bad))

    if "steady" in cfg["workloads"]:
        rows = _rep_rows(results, name, "steady")
        bad, note = failed_note(rows)
        ours = [m for _, m, _, _ in rows if m]
        complete = sum(m["received"] >= m["expected"] > 0 for m in ours)
        row(f"Steady {cfg['rate']:,.0f} records/s: every record delivered", "100 % in every repetition",
            f"{_pct([_delivered(m) for m in ours])} ({complete} of {len(rows)} repetitions "
            f"complete){note}" if rows else "–", bool(complete == len(rows)) if rows else None)
        paired = [(m, b[1]) for _, m, b, _ in rows if m and b]
        ratios = [_ratio(_p99(m), _p99(b)) for m, b in paired]
        med = _med(ratios)
        row(f"Steady {cfg['rate']:,.0f} records/s: p99 ÷ the better MM2's p99", "≤ 1.00",
            f"{spread(ratios, '{:.2f}')}; mirrord {spread([_p99(m) for m, _ in paired], '{:,.0f}')} vs MM2 "
            f"{spread([_p99(b) for _, b in paired], '{:,.0f}')} ms{note}" if paired else f"–{note}",
            None if med is None and not bad else bool(med is not None and med <= 1.0 and not bad))
        ratios = [_ratio(_num(m.get("p50_ms")), _num(b.get("p50_ms"))) for m, b in paired]
        med = _med(ratios)
        row(f"Steady {cfg['rate']:,.0f} records/s: p50 ÷ the better MM2's p50", f"≤ {BAR_P50:.2f}",
            f"{spread(ratios, '{:.2f}')}; mirrord {spread([_num(m.get('p50_ms')) for m, _ in paired], '{:,.1f}')} vs "
            f"MM2 {spread([_num(b.get('p50_ms')) for _, b in paired], '{:,.1f}')} ms{note}" if paired else f"–{note}",
            None if med is None and not bad else bool(med is not None and med <= BAR_P50 and not bad))
        window = [(m["cpu_seconds_per_m_window"], b["cpu_seconds_per_m_window"]) for m, b in paired
                  if m.get("cpu_seconds_per_m_window") and b.get("cpu_seconds_per_m_window")]
        if window:  # runs before the window was measured have none: no row
            ratios = [_ratio(m, b) for m, b in window]
            med = _med(ratios)
            row(f"Steady {cfg['rate']:,.0f} records/s: CPU s per M records in the window ÷ the better MM2's",
                f"≤ {BAR_CPU:.2f}", f"{spread(ratios, '{:.2f}')}; mirrord {spread([m for m, _ in window], '{:.1f}')} "
                f"vs MM2 {spread([b for _, b in window], '{:.1f}')} s{note}", bool(med <= BAR_CPU and not bad))

    every = [r for w in cfg["workloads"] for r in _runs(results, name, w)]
    ours = [r for r in every if r]
    # No run that got going: nothing to measure, and a bar not met.
    none = None if not every else False
    ready = [ready_s(r) for r in ours]
    fallback = sum(r.get("ready_seconds") is None for r in ours)
    how = (f" ({fallback} of {len(ours)} without READY=1: first copied record instead)" if fallback else "")
    first = spread([r.get("startup_seconds") for r in ours], "{:.1f}")
    med = _med(ready)
    row("READY=1 (sd_notify) after launch, median over all its runs", f"< {BAR_READY_S:.0f} s",
        f"{spread(ready, '{:.1f}')} s{how}; first record on the target after {first} s" if ours
        else f"–; {len(every)} of {len(every)} runs failed" if every else "–",
        none if med is None else med < BAR_READY_S)
    rss = [r["peak_rss_bytes"] for r in ours]
    row("Peak RSS of the process tree, largest of all its runs",
        f"≤ {_mib(BAR_RSS_BYTES):,.0f} MiB ({BAR_RSS_BYTES / 2**30:.1f} GiB)",
        f"{_mib(max(rss)):,.0f} MiB (median {_mib(statistics.median(rss)):,.0f})" if rss
        else f"–; {len(every)} of {len(every)} runs failed" if every else "–",
        max(rss) <= BAR_RSS_BYTES if rss else none)
    return lines + [""]


def _transform_cost(results: dict) -> list[str]:
    """What a transform costs: source records read per second with it and without it, repetition by repetition
    (both until the group committed the source's end, so a run that writes fewer records compares)."""
    names = results["contenders"]
    lines = [f"### What a transform costs: {names[TRANSFORM]} against {names.get(PLAIN, PLAIN)}", "",
             "Source records read per second, from the first record on the target until the consumer group "
             "committed the source's end, measured alike for both; the ratio is taken within each repetition. "
             f"Bar: the transformed rate is at least {BAR_TRANSFORM:.2f}× the plain one (a transform costs at most "
             f"{100 * (1 - BAR_TRANSFORM):.0f} %).", "",
             "Rates swing with other load on a shared machine; the CPU time of each run's process tree (start-up "
             "included, the same records read) is steadier: its ratio is what the transform costs in CPU.", "",
             "| backfill | rep | mirrord records read/s | with the transform | ÷ | mirrord CPU s | with the transform "
             "| ÷ | records written (of read) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    ratios_by, cpu_by = {}, {}
    for w in [w for w in SIZE_LABEL if w in results["config"]["workloads"]]:
        ratios, cpus = [], []
        for rep in results["reps"]:
            mine, plain = rep["runs"].get(TRANSFORM, {}).get(w), rep["runs"].get(PLAIN, {}).get(w)
            if mine is None:
                continue
            ok = _ok(mine) and _ok(plain) and mine.get("read_per_s") and plain.get("read_per_s")
            ratio = mine["read_per_s"] / plain["read_per_s"] if ok else None
            ratios += [ratio] if ratio else []
            cpu = mine["cpu_seconds"] / plain["cpu_seconds"] if ok and plain.get("cpu_seconds") else None
            cpus += [cpu] if cpu else []
            written = f"{mine['copied']:,} of {mine['records']:,}" if _ok(mine) else mine.get("status")
            lines.append(f"| {SIZE_LABEL[w]} | {rep['rep']} | "
                         f"{spread([plain.get('read_per_s')] if _ok(plain) else [])} | "
                         f"{spread([mine.get('read_per_s')] if _ok(mine) else [])} | "
                         f"{spread([ratio], '{:.2f}')} | "
                         f"{spread([plain.get('cpu_seconds')] if _ok(plain) else [], '{:.0f}')} | "
                         f"{spread([mine.get('cpu_seconds')] if _ok(mine) else [], '{:.0f}')} | "
                         f"{spread([cpu], '{:.2f}')} | {written} |")
        if ratios:
            ratios_by[w], cpu_by[w] = ratios, cpus
            lines.append(f"| **{SIZE_LABEL[w]}** | **median** | | | {spread(ratios, '{:.2f}')} | | | "
                         f"{spread(cpus, '{:.2f}')} | |")
    lines.append("")
    for w, ratios in ratios_by.items():
        med = _med(ratios)
        lines.append(f"- Backfill {SIZE_LABEL[w]}: records read/s with the transform ÷ without, median {med:.2f} "
                     f"over {len(ratios)} repetitions (bar ≥ {BAR_TRANSFORM:.2f}): {_verdict(med >= BAR_TRANSFORM)}; "
                     f"CPU s with ÷ without, median {_med(cpu_by[w]):.2f}")
    return lines + [""]


def _gist(error: str) -> str:
    """The first line of an error and, if it has more, its last (a contender's log tail ends with the cause)."""
    lines = [ln.strip() for ln in error.splitlines() if ln.strip()] or [""]
    text = lines[0][:200] + (f" … {lines[-1][:200]}" if len(lines) > 1 else "")
    return text.replace("`", "'")


# --- the scaling table: several runs, one shape each --------------------------------------------------------

SCALING = "scaling"  # its block: <!-- bench:scaling:begin --> ... <!-- bench:scaling:end -->


def find_results(path: Path) -> Path:
    """A results.json: the file itself, the one in a run's directory, or the newest run's in a directory of runs
    (bench/results/<time>/, as `--results DIR` leaves them)."""
    if path.is_file():
        return path
    if (path / "results.json").is_file():
        return path / "results.json"
    runs = sorted(path.glob("*/results.json"))
    if not runs:
        raise FileNotFoundError(f"no results.json in {path} or its subdirectories")
    return runs[-1]


def _k(rate: float | None) -> str:
    return "–" if rate is None else f"{rate / 1e3:,.0f} k"


def _x(ratio: float | None) -> str:
    return "" if ratio is None else f" ({ratio:.2f}×)"


def _scaling_row(results: dict, name: str, label: str, shape_cell: str, failures: list[str]) -> str | None:
    cfg = results["config"]
    cells, rss = [], []
    ran = False
    for w in SIZE_LABEL:
        runs = _runs(results, name, w) if w in cfg["workloads"] else []
        ran |= bool(runs)
        ok = [r for r in runs if r]
        rss += [r["peak_rss_bytes"] for r in ok]
        if not runs:
            cells.append(("–", "–"))
        elif not ok:
            cells.append(("failed", "–"))
        else:
            partial = " (partial)" if any(r["status"] == "timeout" for r in ok) else ""
            cells.append((f"{_k(_med([r['records_per_s'] for r in ok]))}{partial}"
                          f"{_x(_med(_ratios(results, name, w, BEST)))}",
                          f"{_med([cpu_per_m(r) for r in ok]):.1f}" if _med([cpu_per_m(r) for r in ok]) else "–"))
    steady = _runs(results, name, "steady") if "steady" in cfg["workloads"] else []
    ran |= bool(steady)
    if not ran:
        return None
    ok = [r for r in steady if r]
    rss += [r["peak_rss_bytes"] for r in ok]
    late = ""
    if not steady:
        latency = undelivered = "–"
    elif not ok:
        latency, undelivered = "failed", "–"
    else:
        ms = "{:,.0f}" if (_med([_num(r["p50_ms"]) for r in ok]) or 0) >= 100 else "{:,.1f}"
        p50, p99 = _med([_num(r["p50_ms"]) for r in ok]), _med([_p99(r) for r in ok])
        ratio = _med([_ratio(_p99(m), _p99(b[1])) for _, m, b, _ in _rep_rows(results, name, "steady") if m and b])
        latency = (f"{ms.format(p50) if p50 is not None else '–'} / {f'{p99:,.0f}' if p99 is not None else '–'}"
                   f"{_x(ratio)}")
        missing, expected = sum(r["missing"] for r in ok), sum(r["expected"] for r in ok)
        undelivered = "0" if not missing else f"{missing:,} of {expected:,} ({100 * missing / expected:.1f} %)"
        lates = [r["late"] for r in ok if r.get("late")]
        if lates:
            done = sum(x["topics_complete"] for x in lates)
            total = sum(x["topics"] for x in lates)
            firsts = [x["first_record_max_s"] for x in lates]
            first = (f"; first record ≤ {max(firsts):.1f} s after creation" if all(f is not None for f in firsts)
                     else "; some never arrived")
            late = f"{done} of {total} complete{first}; p99 {_med([_p99(x) for x in lates]) or math.nan:,.0f} ms"
    failures += [f"{shape_cell}, {label}, {w}: `{_gist(res['error'])}`" for rep in results["reps"]
                 for w, res in rep["runs"].get(name, {}).items() if res.get("status") == "failed"]
    rss_cell = f"{_mib(max(rss)):,.0f}" if rss else "–"
    return (f"| {shape_cell} | {label} | {cells[0][0]} | {cells[1][0]} | {cells[0][1]} / {cells[1][1]} | {rss_cell} | "
            f"{latency} | {undelivered} | {late} |")


def render_scaling(runs: list[tuple[str, dict]]) -> str:
    """The scaling table from several runs (each `(where it came from, its results)`), ordered by shape."""
    runs = sorted(runs, key=lambda sr: (Shape.from_config(sr[1]["config"]).key(), sr[1]["started"]))
    m = runs[0][1]["machine"] if runs else {}
    lines = [f"{len(runs)} run{'s' * (len(runs) != 1)}, each of one shape, all contenders of a run on the same "
             f"pair of brokers; machine of the first: {m.get('cpu', '?')}, {m.get('cores', '?')} cores, "
             f"{m.get('memory_gib', '?')} GiB.", ""]
    for where, res in runs:
        cfg, rm = res["config"], res["machine"]
        other = res.get("cpu_seconds_other", 0)
        load = other / (res["wall_seconds"] * rm["cores"]) if res.get("wall_seconds") and rm.get("cores") else 0
        lines.append(
            f"- **{Shape.from_config(cfg).label()}**: run of {res['started']}, {len(res['reps'])} "
            f"repetition{'s' * (len(res['reps']) != 1)}, {res.get('wall_seconds', 0) / 60:.0f} min; backfill "
            f"{cfg['records']['backfill-100']:,} × 100 B and {cfg['records']['backfill-1024']:,} × 1 KiB; stream "
            f"{cfg['rate']:,.0f} records/s for {cfg['steady_seconds']:.0f} s after {cfg['warmup_seconds']:.0f} s"
            + (f", {cfg['late_topics']} topics created {cfg.get('late_at_seconds', 5):g} s into it"
               if cfg.get("late_topics") else "")
            + f"; mirrord at `{rm.get('mirrord_commit', '?')}`; other load {100 * load:.0f} % of the machine; "
            f"`{where}`")
    lines += ["",
              "| shape | contender | backfill 100 B records/s (÷ better MM2) | backfill 1 KiB records/s (÷ better MM2) "
              "| CPU s per M records, 100 B / 1 KiB | peak RSS MiB | steady p50 / p99 ms (p99 ÷ better MM2) "
              "| undelivered | new topics |",
              "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    failures: list[str] = []
    for _, res in runs:
        shape = Shape.from_config(res["config"])
        reps = len(res["reps"])
        cell = shape.label() + (f" ({reps} reps)" if reps > 1 else "")
        for name, label in res["contenders"].items():
            row = _scaling_row(res, name, label, cell, failures)
            if row:
                lines.append(row)
    if failures:
        lines += ["", "Failed runs (the first and last line of the error):", ""] + [f"- {f}" for f in failures]
    return "\n".join(lines) + "\n"


def markers(block: str = "") -> tuple[str, str]:
    """The markers of the default block (a full run) or of a named one (a partial run kept apart from it)."""
    return (BEGIN, END) if not block else (f"<!-- bench:{block}:begin -->", f"<!-- bench:{block}:end -->")


def update_doc(path: Path, tables: str, block: str = "") -> None:
    """Replace what stands between the block's markers (appending them if the file has none)."""
    begin, end = markers(block)
    text = path.read_text() if path.exists() else ""
    block = f"{begin}\n{tables}{end}"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + block + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + ("\n\n" if text else "") + block + "\n"
    path.write_text(text)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.report", description=__doc__.splitlines()[0],
                                 usage="%(prog)s [-h] results [doc [block]] | --scaling RUN [RUN ...] [--doc DOC]")
    ap.add_argument("results", type=Path, nargs="?",
                    help="a bench run's results.json (bench/results/<time>/results.json)")
    ap.add_argument("doc", type=Path, nargs="?", default=Path(__file__).resolve().parents[1] / "BENCHMARKS.md",
                    help="the document whose tables are replaced (default: BENCHMARKS.md)")
    ap.add_argument("block", nargs="?", default="",
                    help="a named block (<!-- bench:NAME:begin -->) instead of the default one, for a partial run")
    ap.add_argument("--scaling", type=Path, nargs="+", metavar="RUN",
                    help="instead of one run's tables: the scaling table of these runs (each a results.json, a run's "
                         "directory or a directory of runs, whose newest is taken), into the "
                         f"<!-- bench:{SCALING}:begin/end --> block")
    ap.add_argument("--doc", dest="doc_option", type=Path, help="the document (as DOC; with --scaling)")
    a = ap.parse_args(argv)
    doc = a.doc_option or a.doc
    if a.scaling:
        if a.results:
            ap.error("--scaling takes its runs after it, not as RESULTS")
        paths = []
        for where in a.scaling:
            try:
                paths.append(find_results(where))
            except FileNotFoundError as e:  # a shape not run (yet), or whose run broke down: the table goes on
                print(f"bench.report: left out: {e}", file=sys.stderr)
        if not paths:
            ap.error("no results.json in any of the --scaling runs")
        update_doc(doc, render_scaling([(str(p.parent), json.loads(p.read_text())) for p in paths]), SCALING)
        return
    if a.results is None:
        ap.error("RESULTS (a results.json) or --scaling RUN... is required")
    update_doc(doc, render(json.loads(find_results(a.results).read_text())), a.block)


if __name__ == "__main__":
    main()
