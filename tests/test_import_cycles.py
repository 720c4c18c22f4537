"""No module of slotune imports itself back through other modules.

The graph counts the imports under ``if TYPE_CHECKING:`` too: the guard keeps a cycle from
failing at import time, but the modules still depend on each other's names, so a reader (and a
change to either) meets the cycle all the same. ``pyproject.toml``'s import-linter contracts
check the direction between layers; this test checks that no group of modules, inside a layer
or across layers, reaches itself again.
"""

from __future__ import annotations

from collections.abc import Iterator

import grimp

PACKAGES = ("slotune.ui", "slotune.tuner", "slotune.collector", "slotune.migrations")

# Cycles not broken yet, each with why it stays. A new cycle, or one of these grown by a
# module, fails the test; one that is gone fails it too, so that its entry is removed.
KNOWN_CYCLES: dict[frozenset[str], str] = {}


def import_cycles(graph: grimp.ImportGraph) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    work: list[tuple[str, Iterator[str]]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        work.append((module, iter(sorted(graph.find_modules_directly_imported_by(module)))))

    for root in sorted(graph.modules):
        if root in index:
            continue
        visit(root)
        while work:
            module, imported = work[-1]
            for other in imported:
                if other not in index:
                    visit(other)
                    break
                if other in on_stack:
                    low[module] = min(low[module], index[other])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[module])
                if low[module] == index[module]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == module:
                            break
                    if len(component) > 1:
                        found.append(frozenset(component))
    return found


def test_tarjan_finds_each_cycle_once() -> None:
    graph = grimp.ImportGraph()
    for importer, imported in [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("d", "e")]:
        graph.add_import(importer=importer, imported=imported)
    graph.add_import(importer="e", imported="e")  # a module importing itself is no cycle here
    assert import_cycles(graph) == [frozenset("abc")]


def test_no_import_cycles_but_the_known_ones() -> None:
    graph = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=False, cache_dir=None)
    cycles = set(import_cycles(graph))
    for cycle in sorted(cycles, key=lambda c: (len(c), sorted(c))):
        why = KNOWN_CYCLES.get(cycle, "NEW")
        print(f"{len(cycle)} modules ({why}): {', '.join(sorted(cycle))}")
    assert cycles - KNOWN_CYCLES.keys() == set(), "a new import cycle (printed above)"
    assert KNOWN_CYCLES.keys() - cycles == set(), "a known cycle is gone: remove its entry"
