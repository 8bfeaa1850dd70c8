"""Tables for BENCHMARKS.md from a bench run's results.json (`python -m bench.report results.json` redoes them)."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"
SIZE_LABEL = {"backfill-100": "100 B", "backfill-1024": "1 KiB"}
REFERENCE = "mm2"


def brief(workload: str, res: dict) -> str:
    if res.get("status") == "failed":
        return f"FAILED {res.get('error', '')[:300]}"
    if workload == "steady":
        return (f"{res['status']}: p50 {res['p50_ms']:.1f} ms, p99 {res['p99_ms']:.1f} ms, max {res['max_ms']:.1f} ms, "
                f"{res['received']}/{res['expected']} records, cpu {res['cpu_seconds']:.0f} s")
    return (f"{res['status']}: {res['records_per_s']:,.0f} records/s ({res['mb_per_s']:.1f} MB/s) over "
            f"{res['seconds']:.1f} s, startup {res['startup_seconds'] or 0:.1f} s, cpu {res['cpu_seconds']:.0f} s, "
            f"rss {res['peak_rss_bytes'] / 2**20:.0f} MiB")


def spread(values: list[float], fmt: str = "{:,.0f}") -> str:
    """median (min–max) of the values, or the one value."""
    values = [v for v in values if v is not None]
    if not values:
        return "–"
    med = fmt.format(statistics.median(values))
    if len(values) == 1:
        return med
    return f"{med} ({fmt.format(min(values))}–{fmt.format(max(values))})"


def _runs(results: dict, name: str, workload: str) -> list[dict | None]:
    """This contender's runs of the workload, one per rep that ran it, None where it failed."""
    out = []
    for rep in results["reps"]:
        r = rep["runs"].get(name, {}).get(workload)
        if r is not None:
            out.append(r if r.get("status") != "failed" else None)
    return out


def _ratios(results: dict, name: str, workload: str, against: str) -> list[float]:
    """contender rate / reference rate, pair by pair within each rep."""
    out = []
    for rep in results["reps"]:
        mine = rep["runs"].get(name, {}).get(workload)
        if mine is None or mine.get("status") == "failed":
            continue
        if against == "limit":
            ref = rep["limit"].get(workload, {}).get("records_per_s")
        else:
            theirs = rep["runs"].get(against, {}).get(workload)
            ref = theirs["records_per_s"] if theirs and theirs.get("status") in ("ok", "timeout") else None
        if ref:
            out.append(mine["records_per_s"] / ref)
    return out


def _status(runs: list[dict | None]) -> str:
    bad = sum(r is None for r in runs)
    timeouts = sum(1 for r in runs if r and r["status"] == "timeout")
    notes = [f"{bad} failed" for _ in [0] if bad] + [f"{timeouts} hit the time limit (partial copy)" for _ in [0]
                                                       if timeouts]
    return "; ".join(notes) or "ok"


def _mib(b: float) -> float:
    return b / 2**20


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
        f"{cfg['records']['backfill-1024']:,} of 1 KiB, {cfg['partitions']} partitions; steady stream of "
        f"{cfg['rate']:,.0f} records/s of 100 B for {cfg['steady_seconds']:.0f} s after {cfg['warmup_seconds']:.0f} s "
        f"of warm-up; {cfg['streams']} streams (mirrord/MM1 `num.streams`, Spark `local[{cfg['streams']}]`), "
        f"MM2 `tasks.max={cfg['partitions']}`",
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
                  "| contender | records/s | MB/s | ÷ MM2 | ÷ limit | startup s | CPU s | CPU s per M records "
                  "| peak RSS MiB | runs |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
        limits = [rep["limit"].get(workload) for rep in results["reps"] if rep["limit"].get(workload)]
        if limits:
            lines.append(f"| **limit** (min of producer-perf into target and consumer-perf from source) | "
                         f"{spread([x['records_per_s'] for x in limits])} | "
                         f"{spread([x['mb_per_s'] for x in limits], '{:.1f}')} | | 1 | | | | | |")
        for name, label in names.items():
            runs = _runs(results, name, workload)
            ok = [r for r in runs if r]
            if not runs:
                continue
            lines.append(
                f"| {label} | {spread([r['records_per_s'] for r in ok])} | "
                f"{spread([r['mb_per_s'] for r in ok], '{:.1f}')} | "
                f"{spread(_ratios(results, name, workload, REFERENCE), '{:.2f}')} | "
                f"{spread(_ratios(results, name, workload, 'limit'), '{:.2f}')} | "
                f"{spread([r['startup_seconds'] for r in ok], '{:.1f}')} | "
                f"{spread([r['cpu_seconds'] for r in ok], '{:.0f}')} | "
                f"{spread([1e6 * r['cpu_seconds'] / r['copied'] for r in ok if r['copied']], '{:.1f}')} | "
                f"{spread([_mib(r['peak_rss_bytes']) for r in ok], '{:.0f}')} | {_status(runs)} |")
        if limits:
            lines += ["", f"Limit parts ({size}): producer-perf into the target "
                      f"{spread([x['produce']['records_per_s'] for x in limits])} records/s; consumer-perf from the "
                      f"source {spread([x['consume']['records_per_s'] for x in limits])} records/s (fetch rate, "
                      "without the group join)."]
        lines.append("")

    if "steady" in cfg["workloads"]:
        lines += [f"### Steady stream, {cfg['rate']:,.0f} records/s, latency from send to target consume", "",
                  "| contender | p50 ms | p99 ms | max ms | delivered | startup s | CPU s | peak RSS MiB | runs |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
        for name, label in names.items():
            runs = _runs(results, name, "steady")
            ok = [r for r in runs if r]
            if not runs:
                continue
            delivered = [100 * r["received"] / r["expected"] for r in ok if r["expected"]]
            lines.append(
                f"| {label} | {spread([r['p50_ms'] for r in ok], '{:.1f}')} | "
                f"{spread([r['p99_ms'] for r in ok], '{:.1f}')} | {spread([r['max_ms'] for r in ok], '{:.0f}')} | "
                f"{spread(delivered, '{:.1f}')} % | {spread([r['startup_seconds'] for r in ok], '{:.1f}')} | "
                f"{spread([r['cpu_seconds'] for r in ok], '{:.0f}')} | "
                f"{spread([_mib(r['peak_rss_bytes']) for r in ok], '{:.0f}')} | {_status(runs)} |")
        lines.append("")

    lines += ["### Ratios (records/s, pair by pair within each repetition)", ""]
    for name, label in names.items():
        parts = []
        for workload, size in SIZE_LABEL.items():
            if workload in cfg["workloads"]:
                parts.append(f"{size}: ÷MM2 {spread(_ratios(results, name, workload, REFERENCE), '{:.2f}')}, "
                             f"÷limit {spread(_ratios(results, name, workload, 'limit'), '{:.2f}')}")
        lines.append(f"- {label}: " + "; ".join(parts))
    failures = [(rep["rep"], name, w, res["error"]) for rep in results["reps"] for name, ws in rep["runs"].items()
                for w, res in ws.items() if res.get("status") == "failed"]
    if failures:
        lines += ["", "Failed runs (first line of the error):", ""]
        lines += [f"- rep {r}, {names.get(n, n)}, {w}: `{e.splitlines()[0][:200]}`" for r, n, w, e in failures]
    return "\n".join(lines) + "\n"


def update_doc(path: Path, tables: str) -> None:
    """Replace what stands between the markers (appending them if the file has none)."""
    text = path.read_text() if path.exists() else ""
    block = f"{BEGIN}\n{tables}{END}"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + block + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + ("\n\n" if text else "") + block + "\n"
    path.write_text(text)


if __name__ == "__main__":
    doc = Path(sys.argv[2]) if len(sys.argv) > 2 else Path(__file__).resolve().parents[1] / "BENCHMARKS.md"
    update_doc(doc, render(json.loads(Path(sys.argv[1]).read_text())))
