"""The docs cite only files that are in the repository, and mirrord runs without pandas, pyarrow or numpy."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ["README.md", "BENCHMARKS.md", *(str(p.relative_to(ROOT)) for p in sorted(ROOT.glob("docs/*.md"))),
        "packaging/README.md", "ansible/roles/mirrord/README.md"]
CITED = re.compile(r"`([^`\s]+)`|\]\(([^)\s#]+)\)")
GENERATED = ("build/out/", "bench/results/", ".cache/")  # made by the build, gitignored


def cited_paths(doc: Path) -> list[str]:
    """Repository paths a document cites in `code` or as a link: those whose first part is a top-level entry."""
    tops = {p.name for p in ROOT.iterdir() if not p.name.startswith(".")}
    out = []
    for match in CITED.finditer(doc.read_text()):
        path = (match.group(1) or match.group(2)).rstrip(".,:;")
        if "://" in path or path.startswith("/") or "<" in path or path.startswith(GENERATED):
            continue
        if path.split("/")[0] in tops and ("/" in path or (ROOT / path).suffix):
            out.append(path)
    return out


@pytest.mark.parametrize("doc", DOCS)
def test_every_repository_path_a_doc_cites_exists(doc):
    base = (ROOT / doc).parent
    missing = [p for p in cited_paths(ROOT / doc)
               if not any(ROOT.glob(p)) and not any(base.glob(p))]
    assert not missing, f"{doc} cites files not in the repository: {missing}"


BLOCK = "import sys\nfor name in ('pandas', 'pyarrow', 'numpy'):\n    sys.modules[name] = None\n"


def test_mirrord_imports_without_pysparks_sql_extras():
    """pyspark[sql] brings pandas, pyarrow and numpy; records never enter Python, so mirrord needs none."""
    code = BLOCK + "import mirrord.cli, mirrord.daemon, pyspark.sql.streaming\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
