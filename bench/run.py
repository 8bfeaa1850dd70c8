"""`make bench`: the limit, MirrorMaker 2 (twice), mirrord and the reference contenders on one pair of brokers.

One source and one target broker serve the whole run. The backfill topics are loaded once into the
source; each contender then copies them into a fresh target topic (deleted afterwards), started
fresh with state of its own. Repetitions are interleaved (rep 1 of everyone, then rep 2, ...) so
that drift on the machine hits all contenders alike, and ratios are taken pair by pair per rep, against
the better of the two MirrorMaker 2 runs (tasks.max = partitions, tasks.max = num.streams) of that rep.
Raw results go to bench/results/<time>/results.json; the tables in BENCHMARKS.md are regenerated from them.
`--topics T` spreads each workload's `--partitions` over T topics (bench.shape), some of the steady stream's
created only while it runs (`--late-topics`); `python -m bench.report --scaling` puts runs of several shapes
side by side.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, Producer

from bench import report, stages
from bench.cluster import Cluster
from bench.contenders import JARS, PRODUCER, ROOT, STAGES, Contender, Ctx, Run, all_contenders
from bench.latency import PROBE, encode
from bench.procs import (
    TICK,
    TreeSampler,
    cpu_by_kind,
    cpu_seconds,
    dump_flight_recordings,
    terminate,
    thread_cpu,
    threads,
    window_cpu,
)
from bench.shape import Shape, slots
from tests.harness.kafka import KafkaBroker, java

SIZES = {"backfill-100": 100, "backfill-1024": 1024}
WORKLOADS = [*SIZES, "steady"]
IDLE_SETTLE = 5.0  # seconds after the stream's last record before its idle is measured


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


@dataclass
class Config:
    reps: int = 3
    # Long enough that the fastest contender copies each for about 20 s (measured: 550 k records/s of 100 B,
    # 215 k of 1 KiB): shorter backfills ranked start-up and JIT warm-up, not copying.
    records: dict[str, int] = field(default_factory=lambda: {"backfill-100": 10_000_000, "backfill-1024": 5_000_000})
    partitions: int = 12  # of each workload, over all its topics
    topics: int = 1  # the workload's topics, partitions ÷ topics partitions each
    late_topics: int = 0  # of the steady stream's topics, created while it runs
    late_at_seconds: float = 5  # into the measured window: when the late topics are created (at most a quarter in)
    streams: int = 2
    rate: float = 10_000
    # The measured window spans at least one real-time batch boundary (mirrord's and Spark's 30 s batches), as
    # an operator's stream does; the first 10 s (JIT warm-up of the contender) are not measured.
    steady_seconds: float = 40
    warmup_seconds: float = 10
    # after the stream, nothing produced: the contender's CPU and the source broker's, what its empty fetches cost
    idle_seconds: float = 30
    run_timeout: float = 90
    startup_timeout: float = 180
    contenders: dict[str, list[str]] = field(default_factory=dict)  # name -> its workloads ([] = all)
    workloads: list[str] = field(default_factory=lambda: list(WORKLOADS))
    limit: bool = True
    budget_minutes: float = 120  # every contender, 3 repetitions: about 90 min on 2 cores


class ReadyWatch:
    """An sd_notify socket (abstract, so no path length limit) for one contender run: notes when READY=1 came.

    READY is what `systemctl start` waits for; only the contenders that send it (mirrord) get the socket."""

    def __init__(self) -> None:
        self.address = f"@mirrord-bench-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.bind("\0" + self.address[1:])
        self._sock.settimeout(0.1)
        self.launched = time.monotonic()
        self.ready_at: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _read(self) -> bool:
        """Take one message; False when none is waiting."""
        try:
            data = self._sock.recv(4096)
        except (TimeoutError, BlockingIOError):
            return False
        if self.ready_at is None and b"READY=1" in data.split(b"\n"):
            self.ready_at = time.monotonic()
        return True

    def _run(self) -> None:
        while not self._stop.is_set():
            self._read()

    def stop(self) -> float | None:
        """Seconds from launch to the first READY=1, None if none came."""
        self._stop.set()
        self._thread.join()
        self._sock.setblocking(False)
        while self.ready_at is None and self._read():  # what came after the thread's last look
            pass
        self._sock.close()
        return None if self.ready_at is None else self.ready_at - self.launched


NOTIFY_VARS = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")  # the bench's own, never handed on


@dataclass
class Launched:
    proc: subprocess.Popen
    sampler: TreeSampler
    ready: ReadyWatch | None


class Bench:
    def __init__(self, cfg: Config, workdir: Path):
        self.cfg = cfg
        self.workdir = workdir
        # both compilers, as a production broker runs (the tests' brokers run on C1 only)
        self.source_broker = KafkaBroker("source", workdir / "source", heap="1g", jvm_options=[])
        self.target_broker = KafkaBroker("target", workdir / "target", heap="1g", jvm_options=[])
        self.source: Cluster
        self.target: Cluster
        self.ctx: Ctx
        self.tag = f"bench{uuid.uuid4().hex[:6]}"  # topic names of this invocation, apart from anyone else's
        self.shape = Shape(cfg.topics, cfg.partitions, cfg.late_topics)

    def start(self, brokers: tuple[str, str] | None = None) -> None:
        """Start the pair, or (for debugging the harness) use two brokers already running."""
        if brokers is None:
            self.source_broker.launch()
            self.target_broker.launch()
            self.source_broker.wait_ready()
            self.target_broker.wait_ready()
            brokers = (self.source_broker.bootstrap, self.target_broker.bootstrap)
        self.source, self.target = Cluster(brokers[0]), Cluster(brokers[1])
        self.ctx = Ctx(self.source.bootstrap, self.target.bootstrap, self.cfg.partitions, self.cfg.streams)

    def stop(self) -> None:
        if self.source_broker.process is None and hasattr(self, "source"):  # someone else's brokers (--brokers)
            self.source.delete(*[t for t in self.source.topics() if t.startswith(self.tag)])
        for name in ("source", "target"):  # close the admin clients before their brokers go, not after
            self.__dict__.pop(name, None)
        self.source_broker.destroy()
        self.target_broker.destroy()

    # --- the load and the limit: Kafka's own perf tools ---------------------------------------------

    def _tool(self, main: str, args: list[str], logname: str, timeout: float | None = None) -> tuple[str, dict]:
        """A Kafka perf tool (a class name) or a module of the bench (`bench.load`): its output and its cost."""
        out = self.workdir / logname
        argv = ([sys.executable, "-m", main, *args] if main.startswith("bench.")
                else [java(), "-Xmx1G", "-cp", str(JARS / "kafka" / "*"), main, *args])
        with open(out, "w") as f:
            proc = subprocess.Popen(argv, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
            sampler = TreeSampler(proc.pid, 0.25).start()
            rc = proc.wait(timeout=timeout or self.cfg.run_timeout * 4)
            usage = sampler.stop()
        text = out.read_text()
        if rc != 0:
            raise RuntimeError(f"{main} exited {rc}: {text[-2000:]}")
        return text, {"cpu_seconds": usage.cpu_seconds, "peak_rss_bytes": usage.peak_rss_bytes}

    def produce_perf(self, bootstrap: str, topic: str, records: int, size: int, props: dict[str, str],
                     tag: str) -> dict:
        text, usage = self._tool("org.apache.kafka.tools.ProducerPerformance", [
            "--topic", topic, "--num-records", str(records), "--record-size", str(size), "--throughput", "-1",
            "--producer-props", f"bootstrap.servers={bootstrap}", *[f"{k}={v}" for k, v in props.items()],
        ], f"producer-perf-{tag}.log")
        m = re.findall(r"(\d+) records sent, ([\d.]+) records/sec", text)
        if not m:
            raise RuntimeError(f"no summary from ProducerPerformance: {text[-1000:]}")
        return {"records": int(m[-1][0]), "records_per_s": float(m[-1][1]), **usage}

    def load(self, topics: list[str], records: int, size: int, props: dict[str, str], tag: str) -> dict:
        """The preload over several topics (bench.load: round robin over every partition of each)."""
        text, usage = self._tool("bench.load", [
            "--bootstrap", self.source.bootstrap, "--topics", ",".join(topics), "--partitions",
            str(self.shape.per_topic), "--records", str(records), "--size", str(size),
            *[f"--prop={k}={v}" for k, v in props.items()]], f"load-{tag}.log",
            timeout=3600)  # a Python loop: 60 k records/s of 100 B measured on 2 busy cores
        return {**json.loads(text.strip().splitlines()[-1]), **usage}

    def consume_perf(self, workload: str, records: int, tag: str) -> dict:
        topics = self.backfill_topics(workload)
        which = ["--topic", topics[0]] if len(topics) == 1 else ["--include", self.backfill_pattern(workload)]
        text, usage = self._tool("org.apache.kafka.tools.ConsumerPerformance", [
            "--bootstrap-server", self.source.bootstrap, *which, "--num-records", str(records),
            "--timeout", "30000", "--group", f"bench-limit-{uuid.uuid4().hex[:8]}",
        ], f"consumer-perf-{tag}.log")
        lines = [ln for ln in text.splitlines() if ln.count(",") >= 9]
        row = dict(zip([h.strip() for h in lines[0].split(",")], [v.strip() for v in lines[-1].split(",")],
                       strict=True))
        return {"records": int(row["data.consumed.in.nMsg"]), "records_per_s": float(row["fetch.nMsg.sec"]),
                "records_per_s_with_join": float(row["nMsg.sec"]), **usage}

    def preload(self) -> dict:
        out = {}
        for workload, size in SIZES.items():
            if workload not in self.cfg.workloads:
                continue
            topics = self.backfill_topics(workload)
            n = self.cfg.records[workload]
            self.source.delete(*topics)
            self.source.create_many(topics, self.shape.per_topic)
            where = f"source topic {topics[0]}" if len(topics) == 1 else \
                f"{len(topics)} source topics {self.backfill_pattern(workload)}"
            log(f"preloading {n} records of {size} B into {where}")
            t = time.monotonic()
            props = {**PRODUCER, "acks": "1", "enable.idempotence": "false"}
            res = (self.produce_perf(self.source.bootstrap, topics[0], n, size, props, f"preload-{size}")
                   if len(topics) == 1 else self.load(topics, n, size, props, f"preload-{size}"))
            total = sum(self.source.end_offsets_many(topics).values())
            if total != n:
                raise RuntimeError(f"preload of {where}: {total} records on the source, expected {n}")
            out[workload] = {**res, "seconds": time.monotonic() - t}
            self.warm_up(topics)
        return out

    def warm_up(self, topics: list[str]) -> None:
        """Read the preloaded topic once, unmeasured: the first copy after a preload was measured slow (the
        broker's page cache and log segments), so whichever contender ran first lost a ranking to run order."""
        t = time.monotonic()
        consumer = Consumer({"bootstrap.servers": self.source.bootstrap, "group.id": f"warm-{uuid.uuid4().hex}",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False,
                             "fetch.max.bytes": 52428800})
        consumer.subscribe(topics)
        ends = self.source.end_offsets_many(topics)
        seen: dict[tuple[str, int], int] = {}
        try:
            while any(seen.get(tp, 0) < end for tp, end in ends.items()) and time.monotonic() - t < 300:
                for msg in consumer.consume(10_000, timeout=1.0):
                    if msg.error() is None:
                        seen[(msg.topic(), msg.partition())] = msg.offset() + 1
        finally:
            consumer.close()
        log(f"warmed up {topics[0] if len(topics) == 1 else f'{len(topics)} topics'} in {time.monotonic() - t:.1f}s")

    def warm_steady(self, seconds: float) -> None:
        """A paced stream through each broker, unmeasured, before the first contender's: measured, the first
        steady run after the brokers started had a p50 three to five times a later one's (their produce and
        fetch paths not yet compiled), so whichever contender ran first lost to run order."""
        for cluster in (self.source, self.target):
            t = time.monotonic()
            topic = f"{self.tag}-warm{uuid.uuid4().hex[:6]}"
            cluster.create(topic, self.cfg.partitions)
            py = [sys.executable, "-m", "bench.latency"]
            common = ["--topics", topic, "--partitions", str(self.cfg.partitions), "--bootstrap", cluster.bootstrap]
            consumer = subprocess.Popen([*py, "consume", *common, "--grace", "30"], cwd=ROOT, text=True,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            try:
                consumer.stdout.readline()
                produced = subprocess.run([*py, "produce", *common, "--rate", str(self.cfg.rate), "--seconds",
                                           str(seconds), "--warmup", "0"], cwd=ROOT, text=True, capture_output=True,
                                          check=True, timeout=seconds + 120)
                sent = json.loads(produced.stdout.strip().splitlines()[-1])
                consumer.communicate(f"{sent['measured']}\n", timeout=120)
            finally:
                if consumer.poll() is None:
                    consumer.kill()
                cluster.delete(topic)
            log(f"warmed up {cluster.bootstrap} with a {seconds:.0f} s stream in {time.monotonic() - t:.1f}s")

    def backfill_topics(self, workload: str) -> list[str]:
        return self.shape.names(f"{self.tag}-bf{SIZES[workload]}")

    def backfill_pattern(self, workload: str) -> str:
        return self.shape.pattern(f"{self.tag}-bf{SIZES[workload]}")

    def limit(self, rep: int) -> dict:
        out = {}
        for workload, size in SIZES.items():
            if workload not in self.cfg.workloads:
                continue
            n = self.cfg.records[workload]
            topic = f"{self.tag}-limit{size}r{rep}"
            self.target.create(topic, self.cfg.partitions)
            produce = self.produce_perf(self.target.bootstrap, topic, n, size, PRODUCER, f"{size}-r{rep}")
            self.target.delete(topic)
            consume = self.consume_perf(workload, n, f"{size}-r{rep}")
            rate = min(produce["records_per_s"], consume["records_per_s"])
            out[workload] = {"produce": produce, "consume": consume, "records_per_s": rate,
                             "mb_per_s": rate * size / 1e6}
            log(f"limit {workload}: produce {produce['records_per_s']:,.0f}/s, "
                f"consume {consume['records_per_s']:,.0f}/s")
        return out

    # --- one contender run ---------------------------------------------------------------------------

    def _launch(self, c: Contender, run: Run) -> Launched:
        run.workdir.mkdir(parents=True, exist_ok=True)
        argv, env = c.command(self.ctx, run)
        env = {k: v for k, v in {**os.environ, **env}.items() if k not in NOTIFY_VARS}
        ready = ReadyWatch() if c.notifies else None
        if ready:
            env["NOTIFY_SOCKET"] = ready.address
        logf = open(run.workdir / "contender.log", "w")
        try:
            if ready:
                ready.launched = time.monotonic()
            proc = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=logf, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        except BaseException:
            if ready:
                ready.stop()
            raise
        finally:
            logf.close()
        return Launched(proc, TreeSampler(proc.pid).start(), ready)

    def _finish(self, launched: Launched, run: Run) -> dict:
        proc, usage = launched.proc, launched.sampler.stop()
        threads = thread_cpu(proc.pid)
        (run.workdir / "threads.tsv").write_text("".join(f"{cpu:.2f}\t{pid}\t{process}\t{name}\n"
                                                         for cpu, pid, process, name in threads))
        if "FlightRecording" in os.environ.get("BENCH_JAVA_OPTIONS", ""):
            dump_flight_recordings(proc.pid, run.workdir)
        pace = transaction_pace(run)
        terminate(proc)
        ready = launched.ready.stop() if launched.ready else None
        for cluster in (self.source, self.target):  # the run's topics and any internal topics named after it
            mine = [t for t in cluster.topics() if run.id in t or (cluster is self.target and t in run.topics)]
            cluster.delete(*mine)
        return {"cpu_seconds": usage.cpu_seconds, "peak_rss_bytes": usage.peak_rss_bytes, "ready_seconds": ready,
                "cpu_by_thread_kind": cpu_by_kind(threads), "log": str(run.workdir / "contender.log"),
                "transactions": pace}

    def _fail_if_exited(self, proc: subprocess.Popen, run: Run) -> None:
        """A contender that stopped with an error ends the run (one that finished cleanly may have copied all)."""
        if proc.poll():
            tail = (run.workdir / "contender.log").read_text(errors="replace")[-1500:]
            raise RuntimeError(f"contender exited with {proc.returncode}:\n{tail}")

    def backfill(self, c: Contender, workload: str, rep: int) -> dict:
        topics = self.backfill_topics(workload)
        run = Run(uuid.uuid4().hex[:8], topics, self.workdir / f"r{rep}-{c.name}-{workload}",
                  regex=self.backfill_pattern(workload) if len(topics) > 1 else "")
        if not c.creates_topics:
            self.target.create_many(topics, self.shape.per_topic)
        want = self.source.end_offsets_many(topics)
        total = sum(want.values())
        reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
        t_launch = time.monotonic()
        launched = self._launch(c, run)
        proc = launched.proc
        t_first = t_done = t_read = None
        first_copied = copied = first_read = read = 0
        cpu_first = cpu_done = None  # the tree's CPU at the first copied record and when the copy was done
        threads_first: dict = {}  # and each thread's, for threads-copying.tsv
        copying: list = []
        group = c.group(run)
        status = "ok"
        try:
            while True:
                now = time.monotonic()
                ends = self.target.end_offsets_many(topics)
                copied = sum(ends.values())
                committed = self.source.committed_many(group, list(want)) if group else {}
                read = sum(committed.values())
                if copied and t_first is None:
                    t_first, first_copied, first_read = now, copied, read
                    cpu_first = launched.sampler.cpu_now()
                    threads_first = threads(proc.pid)
                if t_read is None and committed and all(committed.get(p, 0) >= e for p, e in want.items()):
                    t_read = now
                if c.drops:
                    done = t_read is not None
                else:
                    done = all(ends.get(p, 0) >= e for p, e in want.items()) if c.keeps_partitions else copied >= total
                if done and t_done is None:
                    t_done = now
                    cpu_done = launched.sampler.cpu_now()
                    copying = window_cpu(threads_first, threads(proc.pid))
                    (run.workdir / "threads-copying.tsv").write_text(
                        "".join(f"{cpu:.2f}\t{pid}\t{process}\t{name}\n" for cpu, pid, process, name in copying))
                if t_done is not None and (t_read is not None or not group or now - t_done > 30):
                    break  # and, for a mirror with a group, its commit of the source's end (for read_per_s)
                self._fail_if_exited(proc, run)
                limit = self.cfg.startup_timeout if t_first is None else self.cfg.run_timeout
                if t_done is None and now - (t_launch if t_first is None else t_first) > limit:
                    status, t_done = "timeout", now
                    break
                time.sleep(0.2)
        finally:
            res = self._finish(launched, run)
            if group:
                self.source.forget(group)
        # A contender that ends by itself (the kcat pipe) may end between two samples; the CPU of the
        # processes it reaped is in our children's rusage, and nothing else of ours ends during a backfill.
        now_reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
        res["cpu_seconds"] = max(res["cpu_seconds"], now_reaped.ru_utime + now_reaped.ru_stime
                                 - reaped.ru_utime - reaped.ru_stime)
        moved = (read - first_read) if c.drops else copied - first_copied
        secs = (t_done - t_first) if t_first else 0.0
        rate = moved / secs if secs > 0 else 0.0
        # Source records per second until the group committed the source's end: measured alike for a mirror
        # that drops records and one that does not, so the two compare (the transform's cost).
        read_secs = (t_read - t_first) if t_first and t_read else 0.0
        res["read_per_s"] = (read - first_read) / read_secs if read_secs > 0 else None
        size = SIZES[workload]
        res["cpu_copying_by_thread_kind"] = cpu_by_kind(copying)
        res.update(status=status, topics=len(topics), partitions=len(want), records=total, copied=copied,
                   seconds=secs, records_per_s=rate,
                   mb_per_s=rate * size / 1e6, startup_seconds=(t_first - t_launch) if t_first else None,
                   wall_seconds=t_done - t_launch,
                   cpu_seconds_per_m_records=1e6 * res["cpu_seconds"] / copied if copied else None,
                   # the same, from the first copied record to the last: without the start-up's CPU (a JVM's
                   # class loading, a query's planning) but with what the JIT compiles while the copy runs
                   cpu_seconds_per_m_copying=(1e6 * (cpu_done - cpu_first) / moved
                                              if cpu_first is not None and cpu_done is not None and moved > 0
                                              else None))
        return res

    @staticmethod
    def _all_started(c: Contender, ends: dict[tuple[str, int], int], partitions: int) -> bool:
        """The probes go to every partition: a record in every target partition means every task or consumer is
        copying; a stream measured before that would time a start-up backlog, not the mirror."""
        if c.keeps_partitions:
            return len(ends) == partitions and all(ends.values())
        return sum(ends.values()) >= partitions

    def late_at(self) -> float:
        """Seconds after the stream's start at which its late topics are created: a few seconds into the
        measured window (parse_args keeps `--late-at` within its first quarter), so that it holds their discovery."""
        return self.cfg.warmup_seconds + self.cfg.late_at_seconds

    def steady(self, c: Contender, rep: int) -> dict:
        run = Run(uuid.uuid4().hex[:8], [], self.workdir / f"r{rep}-{c.name}-steady", follow=True)
        prefix = f"{self.tag}-lat{run.id}"
        early, late = self.shape.split(self.shape.names(prefix))
        per_topic = self.shape.per_topic
        run.topics += early + late  # the late ones too: _finish deletes whatever of them was created
        if self.shape.topics > 1:
            run.regex, run.new_topics = self.shape.pattern(prefix), bool(late)
        self.source.create_many(early, per_topic)
        timed = self.source if c.reads_source else self.target  # where the timing consumer reads the stream
        if not c.creates_topics and not c.reads_source:
            self.target.create_many(early, per_topic)
        probes = slots(early, per_topic)
        t_launch = time.monotonic()
        launched = self._launch(c, run)
        proc = launched.proc
        consumer = producer = probe = None
        try:
            probe = Producer({"bootstrap.servers": self.source.bootstrap, "linger.ms": 0, "log_level": 4})
            seq = 0
            probed: dict[tuple[str, int], float] = {}
            while not c.reads_source and not self._all_started(c, ends := self.target.end_offsets_many(early),
                                                                 len(probes)):
                self._fail_if_exited(proc, run)
                now = time.monotonic()
                if now - t_launch > self.cfg.startup_timeout:
                    got = sum(1 for v in ends.values() if v)
                    raise TimeoutError(f"{c.name} did not copy into every partition in {self.cfg.startup_timeout}s "
                                       f"({got} of {len(probes)})")
                # a probe a second into each partition the contender has not copied into yet (a pipe that reads
                # in blocks needs more than one)
                for tp in probes:
                    if not ends.get(tp) and now - probed.get(tp, -math.inf) >= 1.0:
                        probe.produce(tp[0], encode(time.time_ns(), PROBE, seq, 100), partition=tp[1])
                        probed[tp] = now
                        seq += 1
                probe.flush(5)
                time.sleep(0.1)
            startup = time.monotonic() - t_launch
            py = [sys.executable, "-m", "bench.latency"]
            common = ["--topics", ",".join(early), "--late-topics", ",".join(late), "--partitions", str(per_topic)]
            consumer = subprocess.Popen([*py, "consume", *common, "--bootstrap", timed.bootstrap,
                                         "--grace", "60"],
                                        cwd=ROOT, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            consumer.stdout.readline()
            create_on = [] if c.creates_topics or c.reads_source else [self.target.bootstrap]
            clock = stages.Window(run.workdir / STAGES, self.cfg.warmup_seconds)
            producer = subprocess.Popen(
                [*py, "produce", *common, "--bootstrap", self.source.bootstrap, "--rate", str(self.cfg.rate),
                 "--seconds", str(self.cfg.steady_seconds), "--warmup", str(self.cfg.warmup_seconds),
                 "--late-at", str(self.late_at()), "--create-on", ",".join(create_on)],
                cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            window = StreamWindow(launched.sampler, proc.pid, self.cfg.warmup_seconds)
            out, err = producer.communicate(timeout=self.cfg.steady_seconds + self.cfg.warmup_seconds + 120)
            window.close()
            if producer.returncode:
                raise RuntimeError(f"the stream's producer exited {producer.returncode}: {err[-1500:]}")
            sent = json.loads(out.strip().splitlines()[-1])
            split = clock.close()
            out, _ = consumer.communicate(json.dumps(sent) + "\n", timeout=120)
            lat = json.loads(out.strip().splitlines()[-1])
            idle = self.idle(launched)
        finally:
            if probe is not None:  # closed now, or it would go on calling the brokers after they stopped
                probe.close()
            for child in (producer, consumer):
                if child and child.poll() is None:
                    child.kill()
            res = self._finish(launched, run)
        achieved = sent["sent"] / sent["seconds"]
        res.update(window.result(run.workdir, sent["sent"]))
        res.update(status="ok" if not lat["missing"] else "missing", startup_seconds=startup,
                   rate=self.cfg.rate, achieved_rate=achieved, topics=len(early) + len(late),
                   partitions=per_topic * (len(early) + len(late)), late_topics=len(late), stages=split,
                   source_ack=sent.get("source_ack"), **lat, **idle)
        return res

    def idle(self, launched: Launched) -> dict:
        """After the stream, every record delivered, nothing produced and a few seconds settled: the contender's
        CPU and the source broker's, each as a share of a core (a mirror's cost between bursts, most of it its
        consumers' empty fetches: docs/decisions.md §9). The source broker only when the bench started it."""
        if self.cfg.idle_seconds <= 0:
            return {}
        time.sleep(min(IDLE_SETTLE, self.cfg.idle_seconds / 4))  # the last acknowledgements and commits
        broker = self.source_broker.process.pid if self.source_broker.process else None
        pid = launched.proc.pid
        began, mine, theirs, before = time.monotonic(), launched.sampler.cpu_now(), cpu_seconds(broker), threads(pid)
        time.sleep(self.cfg.idle_seconds)
        seconds = time.monotonic() - began
        after = cpu_seconds(broker)
        broker_share = None if after is None or theirs is None else (after - theirs) / seconds
        return {"idle_seconds": seconds, "idle_core_share": (launched.sampler.cpu_now() - mine) / seconds,
                "idle_source_broker_core_share": broker_share,
                "idle_cpu_by_thread_kind": cpu_by_kind(window_cpu(before, threads(pid)))}


def transaction_pace(run: Run) -> dict | None:
    """Exactly once: the contender's committed transactions, as its /metrics says before it is stopped (kept in
    metrics.txt): how many, a commit's mean time, and the share of the transactions' time their commits took
    (docs/decisions.md §12, a commit's pace). None for a contender without metrics or transactions."""
    if not run.metrics:
        return None
    try:
        with urllib.request.urlopen(f"http://{run.metrics}/metrics", timeout=10) as answer:
            text = answer.read().decode()
    except OSError:
        return None
    (run.workdir / "metrics.txt").write_text(text)
    values = {m.group(1): float(m.group(2)) for m in re.finditer(
        r"^(mirrord_transaction(?:_commit)?_seconds_(?:sum|count))(?:\{[^}]*\})? (\S+)$", text, re.M)}
    commits = values.get("mirrord_transaction_commit_seconds_count", 0)
    lasted = values.get("mirrord_transaction_seconds_sum", 0)
    if not commits or not lasted:
        return None
    committing = values.get("mirrord_transaction_commit_seconds_sum", 0)
    return {"committed": int(commits), "commit_ms_mean": 1000 * committing / commits,
            "transaction_ms_mean": 1000 * lasted / commits, "commit_share": committing / lasted}


class StreamWindow:
    """The contender's CPU over the stream's measured window (after the warmup, to the producer's end): a
    daemon's cost per record while it streams, without its start-up (a JVM's class loading, the JIT's first
    minute, a query's planning), which the whole run's CPU holds and which a long-running mirror pays once."""

    def __init__(self, sampler, pid: int, warmup: float):
        self.sampler, self.pid = sampler, pid
        self.first: tuple[float, dict, float] | None = None
        self.last: tuple[float, dict, float] | None = None
        self._timer = threading.Timer(warmup, self._open)
        self._timer.daemon = True
        self._timer.start()

    def _now(self) -> tuple[float, dict, float]:
        return self.sampler.cpu_now(), threads(self.pid), time.monotonic()

    def _open(self) -> None:
        self.first = self._now()

    def close(self) -> None:
        self._timer.cancel()
        if self.first is not None:
            self.last = self._now()

    def result(self, workdir: Path, records: int) -> dict:
        """cpu_window_seconds, its per-M-records rate and its split by thread kind (threads-window.tsv)."""
        if self.first is None or self.last is None or not records:
            return {}
        rows = window_cpu(self.first[1], self.last[1])
        (workdir / "threads-window.tsv").write_text(
            "".join(f"{cpu:.2f}\t{pid}\t{process}\t{name}\n" for cpu, pid, process, name in rows))
        cpu = self.last[0] - self.first[0]
        return {"cpu_window_seconds": cpu, "window_seconds": self.last[2] - self.first[2],
                "cpu_seconds_per_m_window": 1e6 * cpu / records, "cpu_window_by_thread_kind": cpu_by_kind(rows)}


def _busy_ticks() -> int:
    with open("/proc/stat") as f:
        user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, f.readline().split()[1:9])
    return user + nice + system + irq + softirq + steal


def _first_line(argv: list[str]) -> str:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        return (p.stdout or p.stderr).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        return "n/a"


def _kcat_version() -> str:
    try:
        text = subprocess.run(["kcat", "-V"], capture_output=True, text=True, timeout=10).stdout
    except OSError:
        return "n/a"
    m = re.search(r"[Vv]ersion (\S+).*?librdkafka (\S+)", text)
    return f"{m.group(1)} (librdkafka {m.group(2)})" if m else "n/a"


def machine() -> dict:
    import confluent_kafka
    import pyspark

    cpuinfo = Path("/proc/cpuinfo").read_text()
    model = re.search(r"model name\s*:\s*(.*)", cpuinfo)
    mem = re.search(r"MemTotal:\s*(\d+)", Path("/proc/meminfo").read_text())
    osrel = re.search(r'PRETTY_NAME="([^"]*)"', Path("/etc/os-release").read_text())
    jar = lambda d, prefix: next((p.name[len(prefix):-4] for p in sorted((JARS / d).glob(f"{prefix}*.jar"))), "n/a")  # noqa: E731
    return {
        "cpu": model.group(1) if model else platform.processor(),
        "cores": os.cpu_count(),
        "memory_gib": round(int(mem.group(1)) / 2**20, 1) if mem else None,
        "os": osrel.group(1) if osrel else platform.platform(),
        "kernel": platform.release(),
        "java": _first_line([java(), "-version"]),
        "python": platform.python_version(),
        "pyspark": pyspark.__version__,
        "confluent_kafka": confluent_kafka.__version__,
        "librdkafka": confluent_kafka.libversion()[0],
        "kafka_broker": jar("kafka", "kafka_2.13-"),
        "connect_mirror": jar("mm2", "connect-mirror-"),
        "mirrormaker1": jar("mm1", "kafka_2.13-"),
        "spark_sql_kafka": jar("spark", "spark-sql-kafka-0-10_2.13-"),
        "kcat": _kcat_version(),
        "mirrord_commit": _first_line(["git", "-C", str(ROOT), "log", "-1", "--format=%h %cs", "--", "mirrord", "jvm"]),
    }


def parse_args(argv: list[str] | None) -> tuple[Config, argparse.Namespace]:
    d = Config()
    ap = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=d.reps, help="repetitions of every run (default %(default)s)")
    ap.add_argument("--records-100", type=int, default=d.records["backfill-100"], help="backfill records of 100 B")
    ap.add_argument("--records-1024", type=int, default=d.records["backfill-1024"], help="backfill records of 1 KiB")
    ap.add_argument("--partitions", type=int, default=d.partitions,
                    help="source partitions of each workload, in all over its --topics (so the total, whatever the "
                         "shape), and tasks.max of mm2 (default %(default)s)")
    ap.add_argument("--topics", type=int, default=d.topics,
                    help="topics of each workload, --partitions ÷ --topics partitions each (must divide), all matched "
                         "by one regex given to every contender; 1 = one topic named as before (default %(default)s)")
    ap.add_argument("--late-topics", type=int, default=None,
                    help="of the steady stream's topics, how many are created only while it runs, --late-at seconds "
                         "into the measured window; the stream then spreads over them too and they are measured "
                         "with the rest (default: a tenth of --topics, at least 1, when --topics > 1; else 0). "
                         "MirrorMaker 2 and 1 then look for new topics every 5 s (refresh.topics.interval.seconds, "
                         "metadata.max.age.ms)")
    ap.add_argument("--late-at", type=float, default=d.late_at_seconds,
                    help="seconds into the measured window at which the late topics are created, at most a quarter "
                         "of it (default %(default)s)")
    ap.add_argument("--streams", type=int, default=d.streams,
                    help="mirrord/MM1 num.streams, Spark local[N], tasks.max of mm2-streams (default %(default)s)")
    ap.add_argument("--rate", type=float, default=d.rate, help="steady stream, records/s")
    ap.add_argument("--steady-seconds", type=float, default=d.steady_seconds, help="measured part of the stream")
    ap.add_argument("--warmup-seconds", type=float, default=d.warmup_seconds, help="unmeasured start of the stream")
    ap.add_argument("--idle-seconds", type=float, default=d.idle_seconds,
                    help="after the stream, seconds of nothing produced, measured (0: none; default %(default)s)")
    ap.add_argument("--run-timeout", type=float, default=d.run_timeout,
                    help="a backfill copying longer than this ends, its rate taken from what it copied")
    ap.add_argument("--startup-timeout", type=float, default=d.startup_timeout,
                    help="a contender that copied nothing this long after launch has failed (default %(default)s)")
    ap.add_argument("--contenders", default="",
                    help="comma-separated names, each optionally with its own workloads: "
                         "mm2,mm2-streams,mirrord:steady+backfill-100 (default: all available, all workloads); "
                         f"names: {' '.join(c.name for c in all_contenders())}")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--no-limit", action="store_true", help="skip the perf-tool limit")
    ap.add_argument("--budget-minutes", type=float, default=d.budget_minutes,
                    help="start no repetition that would, at the last one's pace, end after this")
    ap.add_argument("--doc", default=str(ROOT / "BENCHMARKS.md"), help="file whose tables to regenerate ('' = none)")
    ap.add_argument("--doc-block", default="", help="write the tables between <!-- bench:NAME:begin/end --> "
                    "instead of the full run's markers (a partial run, kept apart)")
    ap.add_argument("--brokers", default="", help="SOURCE,TARGET bootstrap of running brokers (debugging)")
    ap.add_argument("--results", default=str(ROOT / "bench" / "results"), help="directory for raw JSON and logs")
    a = ap.parse_args(argv)
    try:
        shape = Shape.of(a.topics, a.partitions, a.late_topics)
    except ValueError as e:
        ap.error(str(e))
    cfg = Config(reps=a.reps, records={"backfill-100": a.records_100, "backfill-1024": a.records_1024},
                 partitions=a.partitions, topics=shape.topics, late_topics=shape.late,
                 late_at_seconds=min(a.late_at, a.steady_seconds / 4),  # the time used, as the results record it
                 streams=a.streams, rate=a.rate, steady_seconds=a.steady_seconds,
                 warmup_seconds=a.warmup_seconds, idle_seconds=a.idle_seconds, run_timeout=a.run_timeout,
                 startup_timeout=a.startup_timeout,
                 workloads=[w for w in a.workloads.split(",") if w], limit=not a.no_limit,
                 budget_minutes=a.budget_minutes)
    for spec in filter(None, a.contenders.split(",")):
        name, _, only = spec.partition(":")
        cfg.contenders[name] = [w for w in only.split("+") if w]
    unknown = (set(cfg.workloads) | {w for ws in cfg.contenders.values() for w in ws}) - set(WORKLOADS)
    if unknown:
        ap.error(f"unknown workloads {sorted(unknown)}; known: {WORKLOADS}")
    return cfg, a


def main(argv: list[str] | None = None) -> dict:
    cfg, a = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: stop the contender, then the brokers
    stamp = time.strftime("%Y%m%dT%H%M%S")
    outdir = Path(a.results) / stamp
    outdir.mkdir(parents=True, exist_ok=True)
    contenders = [c for c in all_contenders() if not cfg.contenders or c.name in cfg.contenders]
    missing = set(cfg.contenders) - {c.name for c in contenders}
    if missing:
        raise SystemExit(f"unknown contenders {sorted(missing)}; known: {[c.name for c in all_contenders()]}")
    skipped = {c.name: why for c in contenders if (why := c.available())}
    contenders = [c for c in contenders if c.name not in skipped]
    for name, why in skipped.items():
        log(f"skipping {name}: {why}")

    results: dict = {"started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "config": asdict(cfg),
                     "producer": PRODUCER, "machine": machine(), "skipped": skipped,
                     "contenders": {c.name: c.describe(cfg.partitions, cfg.streams) for c in contenders},
                     "reps": []}
    log(f"{len(contenders)} contenders x {cfg.workloads} x {cfg.reps} reps; results in {outdir}")
    t0, busy0, last_rep = time.monotonic(), _busy_ticks(), 0.0
    ours = TreeSampler(os.getpid(), 1.0).start()
    with tempfile.TemporaryDirectory(prefix="mirrord-bench-") as tmp:
        bench = Bench(cfg, Path(tmp))
        try:
            bench.start(tuple(a.brokers.split(",")) if a.brokers else None)
            bench.workdir = outdir  # configs and logs of the runs are kept; broker data stays in tmp
            results["preload"] = bench.preload()
            if "steady" in cfg.workloads:
                bench.warm_steady(1.5 * cfg.warmup_seconds)
            for rep in range(1, cfg.reps + 1):
                rep_started = time.monotonic()
                if rep > 1 and rep_started - t0 + last_rep > cfg.budget_minutes * 60:
                    results["stopped_early"] = f"after {rep - 1} of {cfg.reps} repetitions, to stay within " \
                                               f"{cfg.budget_minutes:.0f} min"
                    log(f"stopping {results['stopped_early']}")
                    break
                entry: dict = {"rep": rep, "limit": bench.limit(rep) if cfg.limit else {}, "runs": {}}
                results["reps"].append(entry)
                shift = (rep - 1) % max(1, len(contenders))
                for c in contenders[shift:] + contenders[:shift]:
                    for w in [w for w in cfg.workloads
                              if w in (cfg.contenders.get(c.name) or c.workloads or cfg.workloads)]:
                        log(f"rep {rep}: {c.name} {w}")
                        try:
                            res = bench.steady(c, rep) if w == "steady" else bench.backfill(c, w, rep)
                        except Exception as e:  # noqa: BLE001 - one failed run is reported, the bench goes on
                            res = {"status": "failed", "error": f"{type(e).__name__}: {e}"[-1500:]}
                        entry["runs"].setdefault(c.name, {})[w] = res
                        log(f"  -> {report.brief(w, res)}")
                last_rep = time.monotonic() - rep_started
        finally:
            bench.stop()
    usage = ours.stop()
    wall = time.monotonic() - t0
    busy = (_busy_ticks() - busy0) / TICK
    results.update(wall_seconds=wall, cpu_seconds_all=busy, cpu_seconds_bench=usage.cpu_seconds,
                   cpu_seconds_other=max(0.0, busy - usage.cpu_seconds))
    (outdir / "results.json").write_text(json.dumps(results, indent=1))
    log(f"done in {wall / 60:.1f} min; raw results {outdir / 'results.json'}")
    if a.doc:
        report.update_doc(Path(a.doc), report.render(results), a.doc_block)
        log(f"tables regenerated in {a.doc}")
    return results


if __name__ == "__main__":
    main()
