"""The package's import graph has no cycle: every import of aries_kernel/, magics/ and widgets/ (at module level,
inside functions and under ``TYPE_CHECKING`` alike) read with :mod:`ast`, each edge from a module to the module
it names (``from pkg import name`` names ``pkg.name`` when that is a module). A cycle means two modules each
need the other, which only a deferred import hides (``codebase/core.py`` and ``codebase/queries.py`` once did,
and ``notebook/context.py`` with ``notebook/frontend.py``): what both need belongs in a module below both."""

from __future__ import annotations

import ast
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
# Where each folder of the checkout is installed (pyproject.toml's package-dir).
PACKAGES = {
    "aries_kernel": "aries_kernel",
    "magics": "aries_kernel.magics",
    "widgets": "aries_kernel.widgets",
}


def _modules() -> dict[str, Path]:
    found = {}
    for folder, package in PACKAGES.items():
        for path in sorted((CHECKOUT / folder).rglob("*.py")):
            parts = list(path.relative_to(CHECKOUT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


def import_graph() -> dict[str, set[str]]:
    """Each module of the package and the modules of the package it imports."""
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([base] if base else [])])
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                    for alias in node.names
                ]
            graph[name].update(target for target in targets if target in modules and target != name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_package_has_no_import_cycle() -> None:
    assert cycles(import_graph()) == []


def test_the_check_finds_a_cycle() -> None:
    graph = import_graph()
    assert "aries_kernel.codebase.errors" in graph["aries_kernel.codebase.queries"]  # edges are read
    graph["aries_kernel.codebase.errors"].add("aries_kernel.codebase.queries")
    assert ["aries_kernel.codebase.errors", "aries_kernel.codebase.queries"] in cycles(graph)
