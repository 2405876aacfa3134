"""Small tree-sitter helpers shared by the judgment operations: node text, node kinds, typed node queries."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tree_sitter import Node, Query, Tree

__all__ = ["CLASS_TYPES", "JS_FUNCTION_TYPES", "JS_FUNCTION_VALUES", "node_text", "nodes_of"]


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


def nodes_of(tree: Tree, language: str, types: frozenset[str]) -> list[Node]:
    """Nodes of the given types in document order, found by a tree-sitter query (in C, not a Python walk)."""
    from tree_sitter import QueryCursor

    captures = QueryCursor(_type_query(tree, language, types)).captures(tree.root_node)
    nodes = [node for found in captures.values() for node in found]
    nodes.sort(key=lambda n: (n.start_byte, -n.end_byte))
    return nodes


_QUERIES: dict[tuple[str, frozenset[str]], Query] = {}


def _type_query(tree: Tree, language: str, types: frozenset[str]) -> Query:
    from tree_sitter import Query

    query = _QUERIES.get((language, types))
    if query is None:
        grammar = tree.language
        known = sorted(t for t in types if grammar.id_for_node_kind(t, True))
        query = _QUERIES[(language, types)] = Query(grammar, "[" + " ".join(f"({t})" for t in known) + "] @n")
    return query
