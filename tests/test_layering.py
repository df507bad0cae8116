"""The layering the import contract (``make contracts``, pyproject's ``[tool.importlinter]``)
enforces, checked once more at the finest grain: no import cycle between any two modules of the
library, a package's ``__init__`` included (import-linter's ``acyclic_siblings`` compares
siblings only), and no import of the app or the training stack from it."""

from __future__ import annotations

import grimp
import pytest


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("memory_bank", "silicon_friend", "finetune", include_external_packages=True)


def _cycles(graph: grimp.ImportGraph, package: str) -> list[list[str]]:
    """Strongly connected components (more than one module) of ``package``'s import graph."""
    modules = sorted(m for m in graph.modules if m == package or m.startswith(package + "."))
    edges = {m: sorted(graph.find_modules_directly_imported_by(m) & set(modules)) for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan
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
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for m in modules:
        if m not in index:
            visit(m)
    return found


@pytest.mark.parametrize("package", ["memory_bank", "silicon_friend", "finetune"])
def test_no_import_cycles(graph: grimp.ImportGraph, package: str) -> None:
    assert _cycles(graph, package) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    g = grimp.ImportGraph()
    for m in ("p", "p.a", "p.b", "p.c"):
        g.add_module(m)
    g.add_import(importer="p.a", imported="p.b")
    g.add_import(importer="p.b", imported="p")
    g.add_import(importer="p", imported="p.a")
    g.add_import(importer="p.c", imported="p.a")
    assert _cycles(g, "p") == [["p", "p.a", "p.b"]]


@pytest.mark.parametrize("forbidden", ["silicon_friend", "finetune", "gradio", "peft", "trl"])
def test_the_library_never_imports_the_app_or_the_training_stack(
    graph: grimp.ImportGraph, forbidden: str
) -> None:
    # An external package that nothing imports is not in the graph at all.
    chains = (
        graph.find_shortest_chains(importer="memory_bank", imported=forbidden, as_packages=True)
        if forbidden in graph.modules
        else set()
    )
    assert not chains, sorted(chains)[:3]
