"""Write packaging/spark-jars.txt: the jars of pyspark's jars/ directory that mirrord loads.

`make jar-list` runs this. It runs the integration tests of RECORDED with every JVM they start logging
the classes it loads (`-Xlog:class+load` in JAVA_TOOL_OPTIONS, one file per process: mirrord's Spark
driver, spark-submit's launcher, the JVM that checks the .properties files, and the standalone
cluster's master, worker and executors), then keeps every jar of pyspark/jars that a class came from,
plus the few that hold no class at all (a class-load record cannot show them being read). The
packages ship those jars only (packaging/build.sh); the development tree keeps all of pyspark.

Run it again after upgrading pyspark (build.sh refuses a list naming a jar pyspark no longer has) and
after teaching mirrord to use more of Spark; the run's logs stay in build/out/jar-list/.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parents[1]
LIST = ROOT / "packaging" / "spark-jars.txt"
LOGS = ROOT / "build" / "out" / "jar-list"

# Every mode mirrord supports: real-time and micro-batch triggers, restarts from a checkpoint, transforms
# and --check's analysis of them, SASL/SCRAM and SSL clients, reloads, a query failing, a spark:// master.
RECORDED = (
    "tests/integration/test_mirror.py",
    "tests/integration/test_transforms.py",
    "tests/integration/test_secrets.py",
    "tests/integration/test_claims.py",
    "tests/integration/test_resilience.py",
    "tests/integration/test_failure_kinds.py",
    "tests/integration/test_spark_cluster.py",
)

# "<class> source: file:/…/x.jar" (class path) or "source: jar:file:/…/x.jar!/" (a class loader's URL).
SOURCE = re.compile(r" source: (?:jar:)?file:(\S+?\.jar)(?:!/)?$")


def pyspark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def record(logs: Path) -> None:
    """Run RECORDED with class-load logging into `logs`; a failed test is run once more (the timing of some
    depends on how busy the machine is), and a second failure stops here: the record may be partial."""
    shutil.rmtree(logs, ignore_errors=True)
    (logs / "classes").mkdir(parents=True)
    env = {**os.environ,
           "JAVA_TOOL_OPTIONS": f"-Xlog:class+load=info:file={logs}/classes/%p.log:none:filecount=0"}
    pytest = [sys.executable, "-m", "pytest", "-q", "-o", f"cache_dir={logs / 'pytest-cache'}"]
    for attempt in (pytest, [*pytest, "--last-failed"]):
        if subprocess.run([*attempt, *RECORDED], cwd=ROOT, env=env, check=False).returncode == 0:
            return
    sys.exit(f"jar_list.py: tests failed twice, {LIST.name} not written; if they failed for reasons of their own "
             f"after mirrord ran, `{Path(__file__).relative_to(ROOT)} --from-logs` writes it from this run's logs")


def loaded_jars(logs: Path, jars: Path) -> set[str]:
    """The jars under `jars` (paths relative to it) that any logged class was loaded from."""
    sources = set()
    for log in (logs / "classes").glob("*.log"):
        with open(log, errors="replace") as f:
            sources.update(m.group(1) for line in f if (m := SOURCE.search(line.rstrip("\n"))))
    paths = {Path(unquote(source)).resolve() for source in sources}
    return {str(path.relative_to(jars)) for path in paths if path.is_relative_to(jars)}


def classless_jars(jars: Path) -> set[str]:
    names = set()
    for jar in jars.rglob("*.jar"):
        with zipfile.ZipFile(jar) as z:
            if not any(n.endswith(".class") for n in z.namelist()):
                names.add(str(jar.relative_to(jars)))
    return names


def write_list(names: set[str], jars: Path) -> None:
    mb = sum((jars / n).stat().st_size for n in names) / 1e6
    everything = sorted(jars.rglob("*.jar"))
    all_mb = sum(j.stat().st_size for j in everything) / 1e6
    header = (
        "# The jars of pyspark/jars that the .deb and .rpm ship, relative to it; packaging/build.sh deletes\n"
        "# the others (connect-repl/ among them).\n"
        "# Recorded, not chosen: every jar a class was loaded from (-Xlog:class+load, every JVM) while the\n"
        "# tests below ran, plus the jars that hold no class. Regenerate after a pyspark upgrade or when\n"
        "# mirrord uses more of Spark: `make jar-list` (packaging/jar_list.py; 15 to 20 minutes).\n"
        + "".join(f"#   {t}\n" for t in RECORDED)
        + f"# {len(names)} of {len(everything)} jars, {mb:.0f} MB of {all_mb:.0f} MB.\n"
    )
    LIST.write_text(header + "".join(f"{n}\n" for n in sorted(names)))
    print(f"{LIST.relative_to(ROOT)}: {len(names)} jars, {mb:.0f} MB")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="packaging/jar_list.py", description=__doc__.splitlines()[0])
    parser.add_argument("--from-logs", action="store_true",
                        help=f"read the logs of the last run in {LOGS.relative_to(ROOT)} instead of running the tests")
    args = parser.parse_args(argv)
    jars = pyspark_jars()
    if not args.from_logs:
        record(LOGS)
    loaded = loaded_jars(LOGS, jars)
    if not loaded:
        sys.exit(f"jar_list.py: no class loaded from {jars} in {LOGS}/classes")
    write_list(loaded | classless_jars(jars), jars)
    return 0


if __name__ == "__main__":
    sys.exit(main())
