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
    code = BLOCK + "import mirrord.cli, mirrord.supervisor.daemon, pyspark.sql.streaming\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr


# Where the code, tests and docs may cite the design: docs/decisions.md, never a file outside the repository.
CITING = ["mirrord", "jvm/src", "tests", "bench", "packaging", "ansible", "systemd", "etc", "docs",
          "README.md", "BENCHMARKS.md", "Makefile"]
OUTSIDE = re.compile(r"\bDESIGN\b|DESIGN\.md|\.\./shared|shared/notes|/work/")
SECTION = re.compile(r"decisions(?:\.md)?\)?,?\s(?:§\s?|sections?\s)(\d+)")


def citing_files() -> list[Path]:
    files = []
    for entry in CITING:
        path = ROOT / entry
        found = [path] if path.is_file() else [p for p in sorted(path.rglob("*")) if p.is_file()]
        files += [p for p in found if p.suffix not in (".jar", ".class", ".pyc") and p != Path(__file__)
                  and "__pycache__" not in p.parts and not str(p.relative_to(ROOT)).startswith(GENERATED)]
    return files


def test_nothing_cites_a_design_file_outside_the_repository():
    bad = []
    for path in citing_files():
        text = path.read_text(errors="replace")
        bad += [f"{path.relative_to(ROOT)}: {m.group(0)}" for m in OUTSIDE.finditer(text)]
    assert not bad, f"cite docs/decisions.md instead: {bad}"


def test_every_cited_decision_section_exists():
    sections = set(re.findall(r"^## (\d+)\. ", (ROOT / "docs/decisions.md").read_text(), re.M))
    cited = {(str(path.relative_to(ROOT)), m.group(1))
             for path in citing_files() if path.name != "decisions.md"
             for m in SECTION.finditer(path.read_text(errors="replace"))}
    assert cited, "no citation of docs/decisions.md found: the pattern is wrong"
    missing = sorted(c for c in cited if c[1] not in sections)
    assert not missing, f"docs/decisions.md has no such section: {missing}"
