"""Small tree-sitter helpers shared by the judgment operations: node text, node kinds, typed node queries."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from tree_sitter import Node, Query, Tree

__all__ = [
    "CLASS_TYPES",
    "JS_FUNCTION_TYPES",
    "JS_FUNCTION_VALUES",
    "enclosing",
    "native_import",
    "node_text",
    "nodes_of",
]

T = TypeVar("T")


JS_FUNCTION_VALUES = frozenset({"arrow_function", "function_expression", "function", "generator_function"})

JS_FUNCTION_TYPES = JS_FUNCTION_VALUES | {
    "function_declaration",
    "generator_function_declaration",
    "method_definition",
}

CLASS_TYPES = frozenset({"class_definition", "class_declaration", "abstract_class_declaration"})


def node_text(node: Node | None) -> str:
    """A node's source text ("" for no node)."""
    return (node.text or b"").decode("utf-8", "replace") if node is not None else ""


def enclosing(nodes: Iterable[Node], inner: Callable[[Node, T], T], top: T) -> dict[int, T]:
    """What its enclosing nodes among ``nodes`` make of each node, by ``Node.id``: ``top`` for a node that none
    of them encloses, else ``inner(container, what the container got)`` for its nearest container.

    One sweep in document order over a stack of the nodes still open: linear in ``len(nodes)``, however deep they
    nest. A walk up ``Node.parent`` would cost the depth at every step (tree-sitter finds a parent by descending
    from the root), so the whole walk the cube of the nesting: minutes for a file of 2,000 nested classes.
    """
    found: dict[int, T] = {}
    stack: list[tuple[int, T]] = []  # (end byte of an open node, what a node inside it gets)
    for node in sorted({n.id: n for n in nodes}.values(), key=lambda n: (n.start_byte, -n.end_byte)):
        while stack and stack[-1][0] <= node.start_byte:
            stack.pop()
        value = stack[-1][1] if stack else top
        found[node.id] = value
        stack.append((node.end_byte, inner(node, value)))
    return found


def native_import(node: Node) -> tuple[str, str]:
    """The form and the path kind of a Go import spec, Rust ``use`` or Java ``import``."""
    text = " ".join(node_text(node).split())
    if node.type == "import_spec":
        alias = node.child_by_field_name("name")
        path = node_text(node.child_by_field_name("path")).strip('"`')
        form = "import" if alias is None else f'import {"_" if node_text(alias) == "_" else "alias"} "path"'
        return form, "module" if "." in path.split("/")[0] else "standard library"
    if node.type == "use_declaration":
        form = (
            "use a::{b, c} (grouped)" if "{" in text else ("use a::*" if text.endswith("*;") else "use a::b")
        )
        root = text.removeprefix("pub ").split(" ", 1)[-1].split("::")[0]
        return form, f"{root}::" if root in ("crate", "self", "super") else "external crate"
    static = "static " if " static " in f" {text} " else ""
    return (f"import {static}a.b.*" if text.endswith("*;") else f"import {static}a.b.C"), "package"


def nodes_of(tree: Tree, language: str, types: frozenset[str]) -> list[Node]:
    """Nodes of the given types in document order, found by a tree-sitter query (in C, not a Python walk)."""
    from tree_sitter import QueryCursor

    query = _type_query(tree, language, types)
    if query is None:
        return []  # the grammar has none of these node types (Java has no call_expression)
    captures = QueryCursor(query).captures(tree.root_node)
    nodes = [node for found in captures.values() for node in found]
    nodes.sort(key=lambda n: (n.start_byte, -n.end_byte))
    return nodes


_QUERIES: dict[tuple[str, frozenset[str]], Query | None] = {}


def _type_query(tree: Tree, language: str, types: frozenset[str]) -> Query | None:
    from tree_sitter import Query

    key = (language, types)
    if key not in _QUERIES:
        grammar = tree.language
        known = sorted(t for t in types if grammar.id_for_node_kind(t, True))
        pattern = "[" + " ".join(f"({t})" for t in known) + "] @n"
        _QUERIES[key] = Query(grammar, pattern) if known else None
    return _QUERIES[key]
