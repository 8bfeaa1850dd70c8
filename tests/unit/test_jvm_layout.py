"""jvm/'s shape (issue 32): no import circle between its packages, so each can be read and tested from the ones
below it, and no Java file over 300 lines."""

from __future__ import annotations

import re
from pathlib import Path

MAIN = Path(__file__).resolve().parents[2] / "jvm" / "src" / "main" / "java" / "io" / "mirrord"
IMPORT = re.compile(r"^import (?:static )?io\.mirrord\.(\w+)\.", re.M)


def package_imports() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for java in MAIN.rglob("*.java"):
        package = java.parent.name
        graph.setdefault(package, set()).update(p for p in IMPORT.findall(java.read_text()) if p != package)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every package that can reach itself through imports, with the path it takes."""
    found = []
    for start in sorted(graph):
        path, seen = [start], set()

        def walk(package: str, path: list[str] = path, seen: set[str] = seen, start: str = start) -> bool:
            for nxt in sorted(graph.get(package, ())):
                if nxt == start:
                    found.append([*path, start])
                    return True
                if nxt not in seen:
                    seen.add(nxt)
                    path.append(nxt)
                    if walk(nxt):
                        return True
                    path.pop()
            return False

        walk(start)
    return found


def test_no_package_of_jvm_imports_one_that_imports_it_back():
    graph = package_imports()
    assert {"source", "sink", "positions", "metrics", "fencing"} <= set(graph)
    assert circles(graph) == [], f"import circles: {circles(graph)}"


def test_the_circle_finder_sees_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}})[0] == ["a", "b", "c", "a"]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_java_file_is_over_300_lines():
    lengths = {str(f.relative_to(MAIN)): len(f.read_text().splitlines()) for f in MAIN.rglob("*.java")}
    assert lengths and {f: n for f, n in lengths.items() if n > 300} == {}
