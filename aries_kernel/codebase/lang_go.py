"""Go: definitions and imports of a file, ``go.mod`` module paths, and import resolution by Go's rules.

A Go package is a directory. ``import "<module>/sub/pkg"`` names the directory ``sub/pkg`` under the folder of
the ``go.mod`` that declares ``module <module>`` (the longest matching module path wins, so nested modules
resolve to their own folder), or ``vendor/<path>`` under the importing file's module; the edge goes to every
non-test ``.go`` file of that directory, the files that make up the package an importer gets (``_test.go``
files belong to ``go test`` builds only, though their own imports give edges like any file's). Old-style
relative imports (``"./x"``) name a directory next to the importer. Anything else (the standard library,
modules outside the repository) gives no edge.

Definitions: functions, methods (``parent`` is the receiver's type), structs, interfaces (with their method
specs), other named types and aliases, and top-level constants and variables.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aries_kernel.codebase.lang_common import captures, definition, header, node_text

if TYPE_CHECKING:
    from tree_sitter import Node

    from aries_kernel.codebase.shapes import Fingerprints

__all__ = ["GoModule", "GoResolver", "extract", "parse_go_mod"]

_QUERY = """
(source_file (function_declaration) @def)
(source_file (method_declaration) @def)
(source_file (type_declaration (type_spec) @type))
(source_file (type_declaration (type_alias) @type))
(source_file (type_declaration (type_spec type: (interface_type (method_elem) @spec))))
(source_file (const_declaration (const_spec) @const))
(source_file (var_declaration (var_spec) @var))
(source_file (var_declaration (var_spec_list (var_spec) @var)))
(import_spec path: (_) @import)
"""
_TYPE_KINDS = {"struct_type": "struct", "interface_type": "interface"}
# Spaces within a line only: `^\s*` would run across blank lines and backtrack, quadratic in a file of newlines.
_MODULE_LINE = re.compile(r"^[^\S\n]*module[^\S\n]+\"?([^\s\"/][^\s\"]*)\"?[^\S\n]*(?://.*)?$", re.MULTILINE)


def extract(
    root: Node, data: bytes, hashes: Fingerprints | None, secret: bool
) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """``(symbols, imports)`` of a parsed Go file, in the record layout of :mod:`.extract`."""
    found = captures("go", _QUERY, root)
    out: list[tuple[Any, ...]] = []
    for node in found.get("def", ()):
        name = node.child_by_field_name("name")
        if name is None:
            continue
        parent = _receiver_type(node) if node.type == "method_declaration" else ""
        kind = "method" if node.type == "method_declaration" else "function"
        out.append(definition(node, node_text(name), kind, parent, header(node, data, secret), data, hashes))
    for node in found.get("type", ()):
        name = node.child_by_field_name("name")
        shape = node.child_by_field_name("type")
        if name is None or shape is None:
            continue
        kind = _TYPE_KINDS.get(shape.type, "type") if node.type == "type_spec" else "type"
        # A struct's or interface's header stops at its brace; `type (...)` groups leave the keyword out.
        brace = next((c for c in shape.children if c.type in ("{", "field_declaration_list")), None)
        signature = "type " + header(node, data, secret, end=brace.start_byte if brace is not None else None)
        out.append(definition(node, node_text(name), kind, "", signature, data, hashes))
    for node in found.get("spec", ()):
        name = node.child_by_field_name("name")
        spec = node.parent.parent if node.parent is not None else None
        owner = spec.child_by_field_name("name") if spec is not None else None
        if name is not None and owner is not None:
            signature = header(node, data, secret)
            out.append(definition(node, node_text(name), "method", node_text(owner), signature, data, hashes))
    for capture, kind, keyword in (("const", "constant", "const "), ("var", "variable", "var ")):
        for node in found.get(capture, ()):
            signature = keyword + header(node, data, secret)
            for name in node.children_by_field_name("name"):
                out.append(definition(node, node_text(name), kind, "", signature, data, hashes))
    out.sort(key=lambda s: (s[2], s[0]))
    imports = tuple(
        (_import_path(node), (), 0, False, node.start_point[0] + 1) for node in found.get("import", ())
    )
    return tuple(out), tuple(i for i in imports if i[0])


def _receiver_type(node: Node) -> str:
    """The type a method is declared on: ``func (s *Stack[T]) Push`` -> ``Stack``."""
    receiver = node.child_by_field_name("receiver")
    stack = [receiver] if receiver is not None else []
    while stack:
        current = stack.pop(0)
        if current.type == "type_identifier":
            return node_text(current)
        stack.extend(current.named_children)
    return ""


def _import_path(node: Node) -> str:
    """The path of an import spec's string literal (interpreted ``"x"`` or raw `` `x` ``)."""
    return node_text(node)[1:-1]


def parse_go_mod(text: str) -> str | None:
    """The module path a ``go.mod`` declares, or None when it declares none."""
    match = _MODULE_LINE.search(text)
    return match.group(1) if match else None


@dataclass(frozen=True)
class GoModule:
    """One ``go.mod``: its folder (root-relative, "" for the root) and module path."""

    folder: str
    path: str


class GoResolver:
    """Resolves Go import paths to the files of the package directory they name."""

    def __init__(self, files: Iterable[str], modules: Iterable[GoModule]) -> None:
        self.packages: dict[str, list[str]] = {}
        for rel in sorted(files):
            if rel.endswith(".go") and not rel.endswith("_test.go"):
                self.packages.setdefault(posixpath.dirname(rel), []).append(rel)
        # Longest module path first: a nested module owns its own folder.
        self.modules = sorted(modules, key=lambda m: (-len(m.path), m.folder))
        self.folders = sorted({m.folder for m in self.modules}, key=len, reverse=True)

    def resolve(self, rel: str, item: tuple[Any, ...]) -> list[str]:
        """The files of the package ``item``'s import path names ([] for packages outside the repository)."""
        path: str = item[0]
        if path.startswith(("./", "../")):
            return self._package(posixpath.normpath(posixpath.join(posixpath.dirname(rel), path)))
        own = next((f for f in self.folders if not f or rel.startswith(f + "/")), None)
        if own is not None:
            vendored = self._package(posixpath.join(own, "vendor", path))
            if vendored:
                return vendored
        for module in self.modules:
            if path == module.path or path.startswith(module.path + "/"):
                return self._package(posixpath.join(module.folder, path[len(module.path) + 1 :]))
        return []

    def _package(self, folder: str) -> list[str]:
        folder = posixpath.normpath(folder) if folder else ""
        return self.packages.get("" if folder == "." else folder, [])
