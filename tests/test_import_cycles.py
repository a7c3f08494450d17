"""No import cycle between gpuorch's modules (DESIGN.md 5: the dependency arrows point inward).

Every import counts, wherever it is: a function-level import or one under ``TYPE_CHECKING``
that closes a loop hides the cycle from Python, not from the design. A failure lists each
cycle as ``a -> b -> ... -> a`` with the line of each import; break it by moving the shared
names down a layer, or by typing against a Protocol.
"""

from __future__ import annotations

from collections import deque

import grimp
import pytest


def strongly_connected(graph: grimp.ImportGraph, package: str) -> list[frozenset[str]]:
    """The groups of ``package``'s modules that import each other, directly or not (Tarjan)."""
    mods = sorted(m for m in graph.modules if m == package or m.startswith(package + "."))
    inside = set(mods)
    edges = {m: sorted(set(graph.find_modules_directly_imported_by(m)) & inside) for m in mods}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[frozenset[str]] = []

    def visit(v: str) -> None:  # recursion depth is bounded by the module count (a few hundred)
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(frozenset(group))

    for m in mods:
        if m not in index:
            visit(m)
    return groups


def one_cycle(graph: grimp.ImportGraph, group: frozenset[str]) -> str:
    """The shortest cycle through the group's first module, with the line of each import."""
    start = min(group)
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        v = queue.popleft()
        for w in sorted(set(graph.find_modules_directly_imported_by(v)) & group):
            if w == start:
                path = [v]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                path.reverse()
                path.append(start)
                hops = []
                for a, b in zip(path, path[1:], strict=False):
                    line = graph.get_import_details(importer=a, imported=b)[0]["line_number"]
                    hops.append(f"{a} -(l.{line})-> ")
                return "".join(hops) + start
            if w not in came_from:
                came_from[w] = v
                queue.append(w)
    raise AssertionError(f"no cycle through {start}")  # unreachable for a strongly connected group


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("gpuorch", cache_dir=None)  # a stale cache would hide a new cycle


def test_no_import_cycle_between_gpuorch_modules(graph: grimp.ImportGraph) -> None:
    new = strongly_connected(graph, "gpuorch")
    assert not new, "import cycles in gpuorch:\n" + "\n".join(one_cycle(graph, g) for g in new)


def test_the_check_finds_a_cycle_hidden_in_a_function(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The check itself: a late, function-level import that closes a loop is still a cycle."""
    pkg = tmp_path / "cyc"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from cyc.b import B\n")
    (pkg / "b.py").write_text("B = 1\n\ndef late():\n    from cyc import a\n    return a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    g = grimp.build_graph("cyc", cache_dir=None)
    groups = strongly_connected(g, "cyc")
    assert groups == [frozenset({"cyc.a", "cyc.b"})]
    assert one_cycle(g, groups[0]) == "cyc.a -(l.1)-> cyc.b -(l.4)-> cyc.a"
