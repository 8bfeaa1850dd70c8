"""The mirrors under test: how to start each one for one run (a regex of topics, a fresh work dir).

Every contender gets the same producer tuning (PRODUCER), reads from the earliest offset and is
started fresh for each run, with state (group id, cluster aliases, checkpoints) no earlier run used.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tests.harness.kafka import LOG4J2, free_port, java

ROOT = Path(__file__).resolve().parents[1]
JARS = ROOT / ".cache" / "jars"
VENV = ROOT / ".venv"

# One producer tuning for every contender and for the limit: acks=all with idempotence (mirrord's
# default delivery), batches up to 256 KiB, linger 5 ms (the Java clients' default since 4.0), no compression.
PRODUCER = {
    "acks": "all",
    "enable.idempotence": "true",
    "max.in.flight.requests.per.connection": "5",
    "linger.ms": "5",
    "batch.size": "262144",
    "compression.type": "none",
}


STAGES = "stages.json"  # a stream's stage clock (jvm/.../metrics/StageClock.java), in the run's directory


@dataclass
class Ctx:
    source: str
    target: str
    partitions: int
    streams: int


# How often a contender that is told to expect new topics looks for them (MirrorMaker 2's
# refresh.topics.interval.seconds, default 600 s; MirrorMaker 1's metadata.max.age.ms, default 300 s): what an
# operator who wants new topics mirrored soon would set. mirrord lists the topics every 5 s by default.
NEW_TOPICS_REFRESH_S = 5


@dataclass
class Run:
    """One contender process copying `topics` into the target: all of them existing before it starts, unless
    `new_topics` (the steady stream's late topics, created while it runs, matched by `regex` all the same)."""

    id: str
    topics: list[str]
    workdir: Path
    follow: bool = False  # a stream that keeps coming (else a backfill: a contender may stop at the end)
    regex: str = ""  # the whitelist; empty: the topics' names
    new_topics: bool = False  # topics matching the regex appear while it runs
    metrics: str = ""  # host:port of the contender's Prometheus endpoint, if it has one (mirrord's metrics.listen)

    @property
    def pattern(self) -> str:
        """One regex for the run's topics, matched against the whole name (as every contender does)."""
        return self.regex or "|".join(re.escape(t) for t in self.topics)


def properties(path: Path, props: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


@dataclass
class Contender:
    name: str
    label: str
    creates_topics: bool = True  # else the bench creates the target topics (brokers do not auto-create)
    keeps_partitions: bool = True  # else completion compares total record counts, not partitions
    notifies: bool = False  # sends sd_notify READY=1: the bench gives it a NOTIFY_SOCKET and times READY
    workloads: tuple[str, ...] = ()  # the workloads it runs unless --contenders says otherwise (empty: all)
    drops: bool = False  # copies fewer records than the source has: done when its group has committed the end
    reads_source: bool = False  # no mirror: the stream's timing consumer reads the source itself

    def available(self) -> str | None:
        """None when it can run here, else why not."""
        return None

    def describe(self, partitions: int, streams: int) -> str:
        """The label in the tables, for a run with this many partitions and streams."""
        return self.label

    def command(self, ctx: Ctx, run: Run) -> tuple[list[str], dict[str, str]]:
        raise NotImplementedError

    def group(self, run: Run) -> str | None:
        """The consumer group that commits its progress on the source after each batch, if it has one."""
        return None


@dataclass
class MirrorMaker2(Contender):
    """Dedicated MirrorMaker 2; `tasks` says what its tasks.max follows: the partitions or num.streams.

    Both run, since neither is the better tuning everywhere: one task per partition keeps every partition
    busy on a big machine, while on few cores as many tasks as the other mirrors' streams costs less CPU
    and copies faster. The report compares with whichever did better in each repetition."""

    name: str = "mm2"
    label: str = "MirrorMaker 2 (dedicated, 4.2.0, tasks.max = partitions)"
    tasks: str = "partitions"  # or "streams"
    exactly_once: bool = False  # KIP-618: exactly.once.source.support=enabled, its internal REST server on

    def available(self) -> str | None:
        return None if any((JARS / "mm2").glob("connect-mirror-4*.jar")) else "connect-mirror jars missing"

    def tasks_max(self, partitions: int, streams: int) -> int:
        return streams if self.tasks == "streams" else partitions

    def describe(self, partitions: int, streams: int) -> str:
        once = ", exactly once" if self.exactly_once else ""
        tasks = self.tasks_max(partitions, streams)
        return f"MirrorMaker 2 (dedicated, 4.2.0, tasks.max = {tasks} = {self.tasks}{once})"

    def command(self, ctx: Ctx, run: Run) -> tuple[list[str], dict[str, str]]:
        src, tgt = f"src{run.id}", f"tgt{run.id}"  # fresh aliases: fresh internal topics and offsets
        props = {
            "clusters": f"{src}, {tgt}",
            f"{src}.bootstrap.servers": ctx.source,
            f"{tgt}.bootstrap.servers": ctx.target,
            f"{src}->{tgt}.enabled": "true",
            f"{tgt}->{src}.enabled": "false",
            f"{src}->{tgt}.topics": run.pattern if run.regex else ",".join(run.topics),  # a list of regexes
            "replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
            "tasks.max": str(self.tasks_max(ctx.partitions, ctx.streams)),
            "emit.heartbeats.enabled": "false",
            "emit.checkpoints.enabled": "false",
            "sync.group.offsets.enabled": "false",
            "sync.topic.configs.enabled": "false",
            "sync.topic.acls.enabled": "false",
            "refresh.groups.enabled": "false",
            "replication.factor": "1",
            "offset-syncs.topic.replication.factor": "1",
            "checkpoints.topic.replication.factor": "1",
            "heartbeats.topic.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "config.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            f"{src}.consumer.auto.offset.reset": "earliest",
            **{f"{tgt}.producer.{k}": v for k, v in PRODUCER.items()},
        }
        if run.new_topics:
            props["refresh.topics.interval.seconds"] = str(NEW_TOPICS_REFRESH_S)
        if self.exactly_once:  # Kafka's docs: dedicated mode needs its internal REST server for it (KIP-710)
            props.update({f"{tgt}.exactly.once.source.support": "enabled",
                          "dedicated.mode.enable.internal.rest": "true", "listeners": f"http://127.0.0.1:{free_port()}",
                          f"{src}.consumer.isolation.level": "read_committed"})
        config = properties(run.workdir / "mm2.properties", props)
        log4j = run.workdir / "log4j2.properties"
        log4j.write_text(LOG4J2.format(log=run.workdir / "mm2.log"))
        return ([java(), "-Xms256M", "-Xmx2G", "-XX:+UseG1GC", f"-Dlog4j2.configurationFile={log4j}",
                 "-cp", str(JARS / "mm2" / "*"), "org.apache.kafka.connect.mirror.MirrorMaker", str(config)], {})


@dataclass
class MirrorMaker1(Contender):
    name: str = "mm1"
    label: str = "MirrorMaker 1 (3.9.1)"
    creates_topics: bool = False
    keeps_partitions: bool = False

    def available(self) -> str | None:
        return None if any((JARS / "mm1").glob("kafka_2.13-3.9*.jar")) else "kafka 3.9 jars missing"

    def command(self, ctx: Ctx, run: Run) -> tuple[list[str], dict[str, str]]:
        refresh = {"metadata.max.age.ms": str(1000 * NEW_TOPICS_REFRESH_S)} if run.new_topics else {}
        consumer = properties(run.workdir / "consumer.properties", {
            "bootstrap.servers": ctx.source, "group.id": f"bench-mm1-{run.id}", "auto.offset.reset": "earliest",
            **refresh})  # its pattern subscription sees new topics when the metadata is refreshed
        producer = properties(run.workdir / "producer.properties", {"bootstrap.servers": ctx.target, **PRODUCER})
        return ([java(), "-Xmx1G", "-XX:+UseG1GC", "-cp", str(JARS / "mm1" / "*"), "kafka.tools.MirrorMaker",
                 "--consumer.config", str(consumer), "--producer.config", str(producer),
                 "--include", run.pattern, "--num.streams", str(ctx.streams)], {})


@dataclass
class NoMirror(Contender):
    """No mirror at all: the steady stream's timing consumer reads the source. Its latency is the bench producer's,
    the source broker's and the timing consumer's part of every contender's, measured in the same repetition."""

    name: str = "none"
    label: str = "no mirror: the timing consumer reads the source (floor)"
    creates_topics: bool = False
    workloads: tuple[str, ...] = ("steady",)
    reads_source: bool = True

    def command(self, ctx: Ctx, run: Run) -> tuple[list[str], dict[str, str]]:
        return (["sleep", "infinity"], {})


@dataclass
class Kcat(Contender):
    name: str = "kcat"
    label: str = "kcat → kcat pipe (floor)"
    creates_topics: bool = False
    keeps_partitions: bool = False

    def available(self) -> str | None:
        return None if shutil.which("kcat") else "kcat not installed (Debian package kcat)"

    def command(self, ctx: Ctx, run: Run) -> tuple[list[str], dict[str, str]]:
        if len(run.topics) != 1:
            raise ValueError("the kcat pipe copies one topic (its producer side writes one): no --topics > 1")
        topic = run.topics[0]
        tune = " ".join(f"-X {k}={v}" for k, v in PRODUCER.items())
        # The producer side reads its input in blocks. A stream (-u) leaves no output buffered in the
        # consumer; a backfill (-e) ends at the end, so the producer gets EOF and sends its last block.
        mode = "-u" if run.follow else "-e"
        pipe = (f"kcat -C -q {mode} -b {ctx.source} -t {topic} -o beginning -f '%s\\n' "
                f"| kcat -P -b {ctx.target} -t {topic} {tune}")
        return (["bash", "-c", pipe], {})


def _spark_env() -> dict[str, str]:
    """The Spark contenders' environment; BENCH_JAVA_OPTIONS reaches their JVMs as JAVA_TOOL_OPTIONS (profiling:
    `-XX:StartFlightRecording=settings=profile,dumponexit=true,filename=/tmp/jfr/%p.jfr`)."""
    py = str(VENV / "bin" / "python")
    env = {"PYSPARK_PYTHON": py, "PYSPARK_DRIVER_PYTHON": py, "SPARK_LOCAL_IP": "127.0.0.1"}
    if os.environ.get("BENCH_JAVA_OPTIONS"):
        env["JAVA_TOOL_OPTIONS"] = os.environ["BENCH_JAVA_OPTIONS"]
    return env


@dataclass
class SparkBuiltin(Contender):
    """Spark's own Kafka source into its own Kafka sink, no fidelity: the reference for each trigger mode."""

    name: str = "spark-builtin"
    label: str = "spark built-in sink (loses timestamps)"
    creates_topics: bool = False
    mode: str = "micro-batch"  # or "async" (async progress tracking, 5 000 records a poll), "real-time"

    def available(self) -> str | None:
        return None if any((JARS / "spark").glob("spark-sql-kafka-0-10_2.13-*.jar")) else "spark kafka jars missing"

    def command(self, ctx: Ctx, run: Run) -> tuple[list[str], dict[str, str]]:
        slots = ctx.partitions + 1 if self.mode == "real-time" else ctx.streams  # a task per partition, a spare
        return ([sys.executable, "-m", "bench.spark_builtin", "--source", ctx.source, "--target", ctx.target,
                 "--pattern", run.pattern, "--checkpoint", str(run.workdir / "checkpoint"),
                 "--master", f"local[{slots}]", "--mode", self.mode,
                 *[f"--producer={k}={v}" for k, v in PRODUCER.items()]],
                _spark_env())


@dataclass
class Mirrord(Contender):
    """mirrord through its MirrorMaker-1 style command line; `conf` adds [mirrord] keys for other modes."""

    name: str = "mirrord"
    label: str = "mirrord (default sink)"
    notifies: bool = True
    conf: dict[str, str] = field(default_factory=dict)
    sections: str = ""  # more mirrord.conf sections ([transform:NAME])

    def available(self) -> str | None:
        return None if (VENV / "bin" / "mirrord").exists() else "mirrord is not installed in .venv"

    def group(self, run: Run) -> str | None:
        return f"bench-mirrord-{run.id}"

    def command(self, ctx: Ctx, run: Run) -> tuple[list[str], dict[str, str]]:
        own = {k: v for k, v in self.conf.items() if not k.startswith(("consumer.", "producer.", "java.", "spark."))}
        spark = {k: v for k, v in self.conf.items() if k.startswith("spark.")}
        extra = {side: {k.removeprefix(side): v for k, v in self.conf.items() if k.startswith(side)}
                 for side in ("consumer.", "producer.")}
        consumer = properties(run.workdir / "consumer.properties", {
            "bootstrap.servers": ctx.source, "group.id": self.group(run), "auto.offset.reset": "earliest",
            **extra["consumer."]})
        tuned = {k: v for k, v in {**PRODUCER, **extra["producer."]}.items() if v}  # `producer.X=` drops X
        producer = properties(run.workdir / "producer.properties", {"bootstrap.servers": ctx.target, **tuned})
        settings = {  # absolute: a mirrord.conf's relative paths are its directory's
            "consumer.config": str(consumer.resolve()), "producer.config": str(producer.resolve()),
            "whitelist": run.pattern, "num.streams": str(ctx.streams),
            "state.dir": str((run.workdir / "state").resolve()),
            "metrics.listen": f"127.0.0.1:{free_port()}", "flow": f"bench{run.id}",
        }
        run.metrics = settings["metrics.listen"]
        mirrord = str(VENV / "bin" / "mirrord")
        env = _spark_env()
        java = [self.conf.get("java.options", "")]  # a variant's JVM options, e.g. the JIT's
        if run.follow:  # a stream: where its records' milliseconds go (bench.stages)
            java.append(f"-Dmirrord.stages={(run.workdir / STAGES).resolve()}")
        if any(java):
            env["JAVA_TOOL_OPTIONS"] = " ".join([env.get("JAVA_TOOL_OPTIONS", ""), *java]).strip()
        if not own and not spark and not self.sections:
            return [mirrord, *[a for k, v in settings.items() for a in (f"--{k}", v)]], env
        conf = run.workdir / "mirrord.conf"
        conf.write_text("[mirrord]\n" + "".join(f"{k} = {v}\n" for k, v in {**settings, **own}.items())
                        + self.sections + ("[spark]\n" if spark else "")
                        + "".join(f"{k} = {v}\n" for k, v in spark.items()))
        return [mirrord, "--config", str(conf)], env


def all_contenders() -> list[Contender]:
    """Every contender, in the order they run; mirrord's extra modes come from BENCH_MIRRORD_MODES.

    BENCH_MIRRORD_MODES is `name:key=value,key=value;name2:...`, each a mirrord.conf [mirrord] variant; keys
    `consumer.X` and `producer.X` go to its consumer.properties and producer.properties as X (`producer.X=` with no
    value leaves the common tuning's X out: `sized:producer.batch.size=,producer.linger.ms=` lets mirrord size each
    stream's producer itself), `java.options` to its JVM (JAVA_TOOL_OPTIONS; one option, as values cannot hold a
    comma), `spark.X` to its mirrord.conf's [spark] section (after mirrord's own JVM options, so
    `spark.driver.extraJavaOptions=-XX:G1HeapRegionSize=1m` undoes mirrord's heap regions)."""
    out: list[Contender] = [MirrorMaker2(), MirrorMaker2(name="mm2-streams", tasks="streams",
                                                         label="MirrorMaker 2 (dedicated, 4.2.0, tasks.max = streams)"),
                            Mirrord(),
                            MirrorMaker2(name="mm2-eos", tasks="streams", exactly_once=True,
                                         label="MirrorMaker 2 (dedicated, 4.2.0, tasks.max = streams, exactly once)"),
                            Mirrord(name="mirrord-eos", label="mirrord (exactly once)",
                                    conf={"delivery": "exactly-once"})]
    for spec in filter(None, os.environ.get("BENCH_MIRRORD_MODES", "").split(";")):
        name, _, kvs = spec.partition(":")
        conf = dict(kv.split("=", 1) for kv in kvs.split(",") if kv)
        out.append(Mirrord(name=f"mirrord-{name}", label=f"mirrord ({name})", conf=conf))
    out += [Mirrord(name=TRANSFORM, label="mirrord (filter + mask transform)", sections=TRANSFORM_SECTIONS,
                    workloads=("backfill-100",), drops=True),
            SparkBuiltin(),
            SparkBuiltin(name="spark-async", label="spark built-in sink, micro-batch, async progress", mode="async"),
            SparkBuiltin(name="spark-realtime", label="spark built-in sink, real-time mode", mode="real-time"),
            MirrorMaker1(), Kcat(), NoMirror()]
    return out


# What a transform costs (issue: "filter + mask on the 100 B backfill"). ProducerPerformance's values are
# random capital letters: the filter reads each value and drops the ~1/26 that start with Z; the mask runs
# a regex over every kept value and rewrites each match, as masking a field in JSON would.
TRANSFORM = "mirrord-transform"
TRANSFORM_SECTIONS = """
[transform:bench]
topics = .*
filter = NOT startswith(CAST(value AS STRING), 'Z')
value = regexp_replace(CAST(value AS STRING), 'Q[A-Z]{3}', 'Q***')
"""
