"""What the Go, Rust and Java extractors share: their one query pass over a tree, and the definition tuple.

Each of :mod:`.lang_go`, :mod:`.lang_rust` and :mod:`.lang_java` captures what it needs in a single tree-sitter
query (a walk in C, as for JavaScript), then builds the same records as :mod:`.extract` does for Python and
JavaScript: ``(name, kind, line, end_line, signature, parent, shape_hash, exact_hash)`` definitions and
``(specifier, names, 0, False, line)`` imports.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from aries_kernel.codebase.extract import _lines, _signature
from aries_kernel.codebase.languages import get_language
from aries_kernel.codebase.syntax import node_text

if TYPE_CHECKING:
    from tree_sitter import Node, QueryCursor

    from aries_kernel.codebase.shapes import Fingerprints

__all__ = ["HASHED_KINDS", "captures", "definition", "header", "node_text"]

# The kinds whose shape and exact hashes serve duplication and shape search (code with a body to copy).
HASHED_KINDS = frozenset({"function", "class", "method"})
_SIGNATURE_MAX = 240


@cache
def _cursor(language: str, query: str) -> QueryCursor:
    from tree_sitter import Query, QueryCursor

    return QueryCursor(Query(get_language(language), query))


def captures(language: str, query: str, root: Node) -> dict[str, list[Node]]:
    """The captures of ``query`` over ``root`` by name, each list in document order."""
    found = _cursor(language, query).captures(root)
    return {name: sorted(nodes, key=lambda n: n.start_byte) for name, nodes in found.items()}


def header(node: Node, data: bytes, secret: bool, start: int | None = None, end: int | None = None) -> str:
    """A definition's header: from ``start`` (the node's start) to ``end`` (its body, else its first line),
    whitespace collapsed and trailing ``{``/``;`` dropped; redacted when the file holds a credential."""
    if start is None and end is None:
        return _signature(node, data, secret).rstrip("{; ")
    from aries_kernel.redact import redact

    begin = node.start_byte if start is None else start
    stop = end if end is not None else data.find(b"\n", begin)
    if stop < 0 or stop > node.end_byte:
        stop = node.end_byte
    text = " ".join(data[begin:stop].decode("utf-8", "replace").split())
    return (redact(text) if secret else text).rstrip("{; ")[:_SIGNATURE_MAX]


def definition(
    node: Node, name: str, kind: str, parent: str, signature: str, data: bytes, hashes: Fingerprints | None
) -> tuple[Any, ...]:
    """The stored tuple of one definition. Hashed kinds with a body get their hashes, through ``hashes``
    (None while pending, as :func:`.extract.extract_source` leaves them without); declarations without a body
    have nothing to duplicate."""
    pair: tuple[str | None, str | None] = ("", "")
    if kind in HASHED_KINDS and node.child_by_field_name("body") is not None:
        if hashes is not None:
            pair = hashes.hashes(node, node, data[node.start_byte : node.end_byte])
        else:
            pair = (None, None)
    return (name, kind, *_lines(node), signature, parent, *pair)
