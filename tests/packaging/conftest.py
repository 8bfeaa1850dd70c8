"""Built packages for the packaging tests, and a place to install them.

`packaging/build.sh` caches each package under .cache/packages/<hash of its inputs>/, so these
fixtures cost a copy when nothing changed. Lintian takes minutes on a bundle this size: it starts
in the background as soon as the .deb exists, and its report is cached next to the package.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "packages"
UPGRADE_SUFFIX = "+pkgtest1"
MAX_PACKAGE_MB = 200  # each package, in MB of 10^6 bytes (issue 18: pyspark's jars trimmed to what mirrord loads)
SIZES = pytest.StashKey[dict[str, int]]()


@dataclass(frozen=True)
class Built:
    path: Path
    key: str

    @property
    def cache_dir(self) -> Path:
        return CACHE / self.key

    @property
    def megabytes(self) -> float:
        return self.path.stat().st_size / 1e6


def listed_jars() -> set[str]:
    """The pyspark jars the packages keep: packaging/spark-jars.txt (`make jar-list` records it)."""
    lines = (ROOT / "packaging" / "spark-jars.txt").read_text().splitlines()
    return {line.strip() for line in lines if line.strip() and not line.startswith("#")}


def upstream_version() -> str:
    text = (ROOT / "mirrord" / "__init__.py").read_text()
    return re.search(r'^__version__ = "(.+)"$', text, re.M).group(1)


def build_package(kind: str, outdir: Path, version: str | None = None) -> Built:
    env = dict(os.environ)
    if version:
        env["PKG_VERSION"] = version
    proc = subprocess.run([str(ROOT / "packaging" / "build.sh"), kind, str(outdir)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1200, check=False)
    if proc.returncode != 0:
        pytest.fail(f"packaging/build.sh {kind} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr[-4000:]}")
    m = re.search(r"^(\S+) \((?:built|cached), key (\w+)\)$", proc.stdout, re.M)
    assert m, proc.stdout
    return Built(Path(m.group(1)), m.group(2))


def require_root_tools(*tools: str) -> None:
    if os.geteuid() != 0:
        pytest.fail("packaging tests need root: they install packages into a booted container (`make test` as root)")
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.fail(f"missing {', '.join(missing)}: `make system-deps` installs them")


@pytest.fixture(scope="session")
def package_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("packages")


def start_linter(built: Built, name: str, argv: list[str]) -> None:
    """Run a linter on the cached package in the background, unless its report is cached already."""
    if (built.cache_dir / f"{name}.txt").exists():
        return
    with open(built.cache_dir / f"{name}.pending", "w") as out:
        subprocess.Popen(["sh", "-c", '"$@"; echo "exit $?"', name, *argv, str(built.cache_dir / built.path.name)],
                         stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def linter_report(built: Built, name: str, timeout: float = 600) -> str:
    """The report of start_linter's run, ending in a line `exit STATUS`; waits for it."""
    report, pending = built.cache_dir / f"{name}.txt", built.cache_dir / f"{name}.pending"
    deadline = time.monotonic() + timeout
    while not report.exists():
        if pending.exists() and re.search(r"^exit \d+$", pending.read_text(), re.M):
            pending.rename(report)
            break
        if time.monotonic() > deadline:
            pytest.fail(f"{name} did not finish within {timeout:.0f}s")
        time.sleep(2)
    return report.read_text()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "linter: reads a background linter's report (sorted last)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Linter reports are read last: lintian and rpmlint take minutes and run behind the other tests."""
    items.sort(key=lambda item: item.get_closest_marker("linter") is not None)


@pytest.fixture(scope="session")
def packages(package_dir, request) -> dict[str, Built]:
    """Both packages, built first so that their linters run in the background while the tests go on."""
    require_root_tools("dpkg-deb", "lintian", "rpmbuild", "rpm", "rpmlint")
    deb = build_package("deb", package_dir)
    # --fail-on error: exit status 2 on any error not overridden.
    start_linter(deb, "lintian", ["lintian", "--fail-on", "error", "--no-tag-display-limit"])
    rpm = build_package("rpm", package_dir)
    start_linter(rpm, "rpmlint", ["rpmlint", "-r", str(ROOT / "packaging" / "rpm" / "mirrord.rpmlintrc")])
    request.config.stash[SIZES] = {b.path.name: b.path.stat().st_size for b in (deb, rpm)}
    return {"deb": deb, "rpm": rpm}


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    """The packages' sizes at the end of every run that built them (the bar: MAX_PACKAGE_MB each)."""
    sizes = config.stash.get(SIZES, {})
    if sizes:
        terminalreporter.write_line("package sizes: " + ", ".join(f"{name} {size / 1e6:.1f} MB"
                                                                  for name, size in sizes.items())
                                    + f" (at most {MAX_PACKAGE_MB} MB each)")


@pytest.fixture(scope="session")
def deb(packages) -> Built:
    return packages["deb"]


@pytest.fixture(scope="session")
def deb_next(package_dir, deb) -> Built:
    """The same tree with a higher version, as the next release would be."""
    return build_package("deb", package_dir, upstream_version() + UPGRADE_SUFFIX)


@pytest.fixture(scope="session")
def rpm(packages) -> Built:
    return packages["rpm"]
