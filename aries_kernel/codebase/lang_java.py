"""Java: definitions and imports of a file, and import resolution by packages and source folders.

A package is a folder under a source root (``src/main/java``, ``src/test/java``, ``src``, a module's own
``src/main/java``...): ``com.acme.util.Strings`` lives in ``<root>/com/acme/util/Strings.java``, the layout
``javac -sourcepath``, Maven and Gradle require of a file's ``package`` declaration. Source roots are not
configured anywhere, so an import is matched against the end of every indexed path:

- ``import a.b.C;`` points at ``a/b/C.java``; a nested class (``import a.b.Outer.Inner;``) and a static import
  (``import static a.b.C.member;``, ``import static a.b.C.*;``) at the deepest class file of the name;
- ``import a.b.*;`` points at every ``.java`` file of the package folder ``a/b`` (failing that, at the class
  ``a/b.java`` whose nested classes it imports).

A package import takes the folder of that name in every source root (the ``src/main`` and ``src/test`` halves
of a package are one package); when several roots hold a class (a multi-module build), the ones sharing the
longest path prefix with the importing file win. Test sources (``src/test/``, Maven's and Gradle's layout) are
seen only from test sources. Names outside the repository
(``java.util``, libraries) give no edge. Classes of the importer's own package need no import and get none.

Definitions: classes, records, interfaces, annotation types and enums (``parent``: the enclosing type for
nested ones), their methods, constructors and annotation elements, and ``static final`` fields (constants).
Local and anonymous classes inside method bodies are left out with their members.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from aries_kernel.codebase.lang_common import captures, definition, header, node_text
from aries_kernel.codebase.syntax import enclosing

if TYPE_CHECKING:
    from tree_sitter import Node

    from aries_kernel.codebase.shapes import Fingerprints

__all__ = ["JavaResolver", "extract"]

_QUERY = """
[(class_declaration) (interface_declaration) (enum_declaration) (record_declaration)
 (annotation_type_declaration) (method_declaration) (constructor_declaration) (compact_constructor_declaration)
 (annotation_type_element_declaration)] @def
[(field_declaration) (constant_declaration)] @field
(import_declaration) @import
[(lambda_expression) (block) (object_creation_expression) (enum_constant)] @scope
"""
_KINDS = {
    "class_declaration": "class",
    "record_declaration": "class",
    "interface_declaration": "interface",
    "annotation_type_declaration": "interface",
    "enum_declaration": "enum",
    "method_declaration": "method",
    "constructor_declaration": "method",
    "compact_constructor_declaration": "method",
    "annotation_type_element_declaration": "method",
}
_TYPES = frozenset(
    {
        "class_declaration",
        "record_declaration",
        "interface_declaration",
        "annotation_type_declaration",
        "enum_declaration",
    }
)
_LOCAL_SCOPES = frozenset(
    {
        "method_declaration",
        "constructor_declaration",
        "compact_constructor_declaration",
        "lambda_expression",
        "block",
        "object_creation_expression",
        "enum_constant",
    }
)
_ANNOTATIONS = frozenset({"annotation", "marker_annotation"})


def extract(
    root: Node, data: bytes, hashes: Fingerprints | None, secret: bool
) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """``(symbols, imports)`` of a parsed Java file, in the record layout of :mod:`.extract`."""
    found = captures("java", _QUERY, root)
    owners: dict[int, str | None] = enclosing(
        (node for nodes in found.values() for node in nodes), _inside, ""
    )
    out: list[tuple[Any, ...]] = []
    for node in found.get("def", ()):
        name = node.child_by_field_name("name")
        parent = owners[node.id]
        if name is None or parent is None:
            continue
        kind = _KINDS[node.type]
        out.append(definition(node, node_text(name), kind, parent, _header(node, data, secret), data, hashes))
    for node in found.get("field", ()):
        parent = owners[node.id]
        modifiers = _modifiers(node)
        # Interface fields are implicitly static final.
        constant = node.type == "constant_declaration" or {"static", "final"} <= modifiers
        if not parent or not constant:
            continue
        signature = _header(node, data, secret)
        for declarator in node.children_by_field_name("declarator"):
            name = declarator.child_by_field_name("name")
            if name is not None:
                out.append(definition(node, node_text(name), "constant", parent, signature, data, hashes))
    out.sort(key=lambda s: (s[2], s[0]))
    imports = [_import(node) for node in found.get("import", ())]
    return tuple(out), tuple(i for i in imports if i is not None)


def _inside(node: Node, owner: str | None) -> str | None:
    """The type a member declared inside ``node`` belongs to ("" at top level), None inside a method body or
    anonymous class (``owner``: what ``node`` itself belongs to; see :func:`.syntax.enclosing`)."""
    if owner is None or node.type in _LOCAL_SCOPES:
        return None
    return node_text(node.child_by_field_name("name")) if node.type in _TYPES else owner


def _modifiers(node: Node) -> set[str]:
    found = next((c for c in node.children if c.type == "modifiers"), None)
    return {c.type for c in found.children} if found is not None else set()


def _header(node: Node, data: bytes, secret: bool) -> str:
    """The declaration before its body, without its annotations (``@Override public void run()``
    -> ``public void run()``)."""
    modifiers = next((c for c in node.children if c.type == "modifiers"), None)
    annotations = [c for c in modifiers.children if c.type in _ANNOTATIONS] if modifiers is not None else []
    body = node.child_by_field_name("body")
    if not annotations:
        return header(node, data, secret) if body is not None else header(node, data, secret, node.start_byte)
    start = annotations[-1].end_byte
    return header(node, data, secret, start, body.start_byte if body is not None else None)


def _import(node: Node) -> tuple[Any, ...] | None:
    """``(dotted name, flags, 0, False, line)``; flags hold "static" and "*" as the declaration has them."""
    name = next((c for c in node.named_children if c.type in ("scoped_identifier", "identifier")), None)
    if name is None:
        return None
    flags = tuple(
        flag
        for flag, present in (
            ("static", any(c.type == "static" for c in node.children)),
            ("*", any(c.type == "asterisk" for c in node.children)),
        )
        if present
    )
    return ("".join(node_text(name).split()), flags, 0, False, node.start_point[0] + 1)


class JavaResolver:
    """Resolves Java imports to the indexed ``.java`` files whose path ends in the imported name."""

    def __init__(self, files: Iterable[str]) -> None:
        self.classes: dict[str, list[str]] = {}  # "a/b/C.java" -> files ending in it
        self.packages: dict[str, list[str]] = {}  # "a/b" -> folders ending in it
        folders: dict[str, list[str]] = {}
        for rel in sorted(files):
            if not rel.endswith(".java"):
                continue
            parts = rel.split("/")
            for start in range(len(parts)):
                self.classes.setdefault("/".join(parts[start:]), []).append(rel)
            folders.setdefault("/".join(parts[:-1]), []).append(rel)
        for folder in folders:
            parts = folder.split("/") if folder else []
            for start in range(len(parts)):
                self.packages.setdefault("/".join(parts[start:]), []).append(folder)
        self.folders = folders

    def resolve(self, rel: str, item: tuple[Any, ...]) -> list[str]:
        """The files an import names ([] for names outside the repository)."""
        parts = item[0].split(".")
        flags = item[1]
        if "*" in flags and "static" not in flags:
            # A package is every source root's folder of that name on the classpath.
            folders = _visible(rel, self.packages.get("/".join(parts), []))
            if folders:
                return [f for folder in folders for f in self.folders[folder]]
        # A class needs a package: `a.b.C.m` tries a/b/C/m.java, a/b/C.java, then a/b.java.
        for end in range(len(parts), 1, -1):
            found = self._nearest(rel, _visible(rel, self.classes.get("/".join(parts[:end]) + ".java", [])))
            if found:
                return found
        return []

    @staticmethod
    def _nearest(rel: str, candidates: list[str]) -> list[str]:
        """The candidates sharing the longest leading folders with ``rel``."""
        if len(candidates) <= 1:
            return candidates
        here = rel.split("/")[:-1]

        def shared(path: str) -> int:
            count = 0
            for a, b in zip(here, path.split("/"), strict=False):
                if a != b:
                    break
                count += 1
            return count

        best = max(shared(c) for c in candidates)
        return [c for c in candidates if shared(c) == best]


def _visible(rel: str, candidates: list[str]) -> list[str]:
    """Candidates on the importer's classpath: test sources (``src/test/``) only for test sources."""
    if _is_test_source(rel):
        return candidates
    return [c for c in candidates if not _is_test_source(c)]


def _is_test_source(rel: str) -> bool:
    return rel.startswith("src/test/") or "/src/test/" in rel
