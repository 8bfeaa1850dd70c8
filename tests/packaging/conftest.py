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
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "packages"
UPGRADE_SUFFIX = "+pkgtest1"


@dataclass(frozen=True)
class Built:
    path: Path
    key: str

    @property
    def cache_dir(self) -> Path:
        return CACHE / self.key


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
        pytest.skip("packaging tests need root (run through `make test`)")
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.fail(f"missing {', '.join(missing)}: `make system-deps` installs them")


@pytest.fixture(scope="session")
def package_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("packages")


@pytest.fixture(scope="session")
def deb(package_dir) -> Built:
    require_root_tools("dpkg-deb", "lintian")
    built = build_package("deb", package_dir)
    report = built.cache_dir / "lintian.txt"
    if not report.exists():
        # --fail-on error: exit status 2 on any error not overridden; the report keeps the rest.
        pending = built.cache_dir / "lintian.pending"
        with open(pending, "w") as out:
            subprocess.Popen(
                ["sh", "-c", 'lintian --fail-on error --no-tag-display-limit "$1"; echo "exit $?"', "lintian",
                 str(built.cache_dir / built.path.name)],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )
    return built


@pytest.fixture(scope="session")
def deb_next(package_dir, deb) -> Built:
    """The same tree with a higher version, as the next release would be."""
    return build_package("deb", package_dir, upstream_version() + UPGRADE_SUFFIX)


@pytest.fixture(scope="session")
def rpm(package_dir) -> Built:
    require_root_tools("rpmbuild", "rpm")
    return build_package("rpm", package_dir)
