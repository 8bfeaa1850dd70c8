"""Scale-out for real: mirrord's driver on this machine, its executors in a Spark standalone worker.

The module starts one master and one worker with pyspark's own launcher (tests.harness.spark_cluster).
The worker cannot start any Python, so a flow passes here only if its executors run JVM code alone:
Spark's Kafka source and Kafka sink, nothing of mirrord's. (The data path that wrote records from
Python workers, `sink.ProduceTask` in `mapInArrow`, fails here: "Error from python worker".)

Without spark.driver.host, Spark advertises the driver on the host's first non-loopback address
when the host name resolves to loopback; that works too, the flow sets loopback to stay off the network.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.harness.mirrord import Mirrord, metric_value, write_flow
from tests.harness.records import count, create_topic, produce, wait_until
from tests.harness.spark_cluster import NO_PYTHON_HOME, SparkStandalone
from tests.integration.test_mirror import assert_same_records, varied_records

# A driver for the harness's own check: a JVM-only job, then a Python UDF, on the cluster at argv[1].
CHECK_DRIVER = textwrap.dedent("""\
    import json, sys
    from pyspark.sql import SparkSession
    from pyspark.sql.functions import udf

    spark = (SparkSession.builder.master(sys.argv[1]).appName("harness-check")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.executor.memory", "512m").config("spark.ui.enabled", "false")
             .config("spark.task.maxFailures", "1").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    out = {"sum": spark.range(1000).selectExpr("sum(id) AS s").collect()[0]["s"]}
    try:
        out["udf"] = spark.range(10).select(udf(lambda x: x + 1, "long")("id")).collect()
    except Exception as exc:
        out["udf_error"] = str(exc)[:4000]
    spark.stop()
    print("RESULT " + json.dumps(out))
""")


@pytest.fixture(scope="module")
def cluster():
    with SparkStandalone() as c:
        yield c


def app_named(cluster: SparkStandalone, name: str) -> dict | None:
    return next((a for a in cluster.applications() if a["name"] == name), None)


def test_the_worker_runs_jvm_jobs_and_cannot_run_python(cluster, tmp_path):
    assert cluster.url.startswith("spark://127.0.0.1:")
    assert len(cluster.alive_workers()) == 1
    script = tmp_path / "check_driver.py"
    script.write_text(CHECK_DRIVER)
    # the driver's own Python is complete: it names itself as the executors' interpreter (PYSPARK_PYTHON)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    proc = subprocess.run([sys.executable, str(script), cluster.url], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300, check=False)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"driver exited {proc.returncode}:\n{proc.stderr[-4000:]}"
    result = json.loads(lines[-1].removeprefix("RESULT "))

    assert result["sum"] == 499500
    app = app_named(cluster, "harness-check")
    assert app is not None and app["state"] == "FINISHED" and app["cores"] == 2, cluster.state()
    assert "Finished task" in cluster.executor_logs(tail=None), "no task ran in the worker's executor"

    # the Python UDF reached the worker's executor and failed there: no Python can start on it
    assert "udf" not in result, f"a Python UDF ran on the worker: {result}"
    assert "Error from python worker" in result["udf_error"], result["udf_error"]
    assert NO_PYTHON_HOME in result["udf_error"], result["udf_error"]


def add_spark_conf(config: Path, conf: dict[str, str]) -> None:
    """More [spark] settings in a flow written by write_flow (whose last section is [spark])."""
    sections = [line for line in config.read_text().splitlines() if line.startswith("[")]
    assert sections[-1] == "[spark]", "write_flow's layout changed"
    with open(config, "a") as f:
        f.writelines(f"{k} = {v}\n" for k, v in conf.items())


def test_a_flow_with_a_standalone_master_mirrors_every_field(kafka_pair, unique, cluster, tmp_path):
    source, target = kafka_pair
    topic, group = unique("standalone"), unique("standalone-group")
    create_topic(source.bootstrap, topic, 3)
    produce(source.bootstrap, topic, varied_records(300, 3, seed=31))
    config = write_flow(tmp_path / "flow", source.bootstrap, target.bootstrap, topic, group=group,
                        conf={"spark.master": cluster.url})
    # driver on loopback like the cluster; executors smaller than the worker's 1g so one fits
    add_spark_conf(config, {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
                            "spark.executor.memory": "512m"})
    daemon = Mirrord(config).start()

    def explain() -> str:
        return (f"mirrord:\n{daemon.output()[-4000:]}\nmaster: {cluster.state()}\n"
                f"executors:\n{cluster.executor_logs()[-4000:]}")

    def mirrored(n: int):
        def check() -> bool:
            assert daemon.alive(), f"mirrord exited with {daemon.process.returncode}\n{explain()}"
            return count(target.bootstrap, topic) >= n
        return check

    try:
        daemon.wait_ready(180)
        app = wait_until(lambda: app_named(cluster, "mirrord-test"), 60, "mirrord's application on the master")
        assert app["state"] == "RUNNING" and app["cores"] == 2, app
        wait_until(mirrored(300), 180, f"{topic} mirrored through the standalone cluster")
        produce(source.bootstrap, topic, varied_records(150, 3, seed=32))  # and while it runs
        wait_until(mirrored(450), 120, f"{topic} streamed through the standalone cluster")
        assert_same_records(source.bootstrap, target.bootstrap, topic)
        # The records were sent by the worker's executors, not the driver: their interceptors' counts reach
        # the driver's /metrics through mirrord's Spark plugin (README, "Scaling out").
        records = [*varied_records(300, 3, seed=31), *varied_records(150, 3, seed=32)]
        wait_until(lambda: metric_value(daemon.metrics(), "mirrord_records_total", topic=topic) == 450, 60,
                   "mirrord_records_total at 450 from the executors")
        text = daemon.metrics()
        key_value_bytes = sum(len(r["key"] or b"") + len(r["value"] or b"") for r in records)
        assert metric_value(text, "mirrord_bytes_total", topic=topic) == key_value_bytes
        assert metric_value(text, "mirrord_replication_latency_seconds_count") >= 450
        assert daemon.stop() == 0, explain()
        assert app_named(cluster, "mirrord-test")["state"] == "FINISHED", cluster.state()
    finally:
        daemon.stop()
