"""Rust: definitions and imports of a file, ``Cargo.toml`` packages, and import resolution by Rust's module rules.

Imports are ``mod name;`` declarations and the paths of ``use`` declarations (each leaf of a ``use`` tree,
``use a::{b, c::*}`` giving ``a::b`` and ``a::c``) and ``extern crate``. They are stored relative to the file's
own module: inline ``mod x { ... }`` blocks are folded into the path (``mod y;`` inside ``mod x {}`` is
``self::x::y``; ``super::`` inside it climbs the inline modules first), so resolution needs only the file set.

Resolution follows the module layout rustc and Cargo use: a module's children live in the folder of a crate
root (``lib.rs``, ``main.rs``, ``src/bin/x.rs``, ``tests/x.rs``, ...) or of a ``mod.rs``, and in ``foo/`` for a
module file ``foo.rs``; ``mod foo;`` is ``foo.rs`` or ``foo/mod.rs`` there. A path points at the deepest module
of it that is a file (``use crate::net::tcp::Stream`` -> ``src/net/tcp.rs``, or ``src/net.rs`` when ``tcp`` is
inline there, else the crate root): ``crate::`` starts at the crate root, ``self::`` at the file's module,
``super::`` at its parent. A path that starts with a plain name is a child module of the file's module when such
a file exists (2018 paths), else a crate: the package's own library (for its binaries, tests and examples) or a
dependency of the package that is a package of the repository (Cargo workspaces and path dependencies, renames
by ``package = ...`` included), which points at that library's root and modules. Crates from outside the
repository (``std``, crates.io) give no edge. Not followed: ``#[path = ...]`` attributes and macro-made paths.

Definitions: functions, methods (``parent``: the type of the ``impl``, or the trait), structs, unions, enums,
traits, type aliases, constants and statics, ``macro_rules!`` macros.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aries_kernel.codebase.bounded import load_toml
from aries_kernel.codebase.lang_common import captures, definition, header, node_text
from aries_kernel.codebase.syntax import enclosing

if TYPE_CHECKING:
    from tree_sitter import Node

    from aries_kernel.codebase.shapes import Fingerprints

__all__ = ["CargoManifest", "RustResolver", "extract", "parse_cargo_toml"]

_QUERY = """
[(function_item) (function_signature_item) (struct_item) (union_item) (enum_item) (trait_item) (type_item)
 (const_item) (static_item) (macro_definition)] @def
(mod_item !body) @mod
(use_declaration) @use
(extern_crate_declaration) @crate
[(impl_item) (mod_item body: (_)) (closure_expression) (const_block) (block)] @scope
"""
_KINDS = {
    "function_item": "function",
    "function_signature_item": "function",
    "struct_item": "struct",
    "union_item": "struct",
    "enum_item": "enum",
    "trait_item": "trait",
    "type_item": "type",
    "const_item": "constant",
    "static_item": "constant",
    "macro_definition": "macro",
}
_LOCAL_SCOPES = frozenset({"function_item", "closure_expression", "const_block", "block"})
_TARGET_FOLDERS = ("src/bin", "tests", "examples", "benches")
_DEPENDENCY_TABLES = ("dependencies", "dev-dependencies", "build-dependencies")


def extract(
    root: Node, data: bytes, hashes: Fingerprints | None, secret: bool
) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """``(symbols, imports)`` of a parsed Rust file, in the record layout of :mod:`.extract`."""
    found = captures("rust", _QUERY, root)
    scopes: dict[int, tuple[str | None, tuple[str, ...]]] = enclosing(
        (node for nodes in found.values() for node in nodes), _inside, ("", ())
    )
    out: list[tuple[Any, ...]] = []
    for node in found.get("def", ()):
        name = node.child_by_field_name("name")
        owner = scopes[node.id][0]
        if name is None or owner is None:
            continue  # an item inside a function body: not part of the module's interface
        kind = _KINDS[node.type]
        if kind == "function" and owner:
            kind = "method"
        out.append(definition(node, node_text(name), kind, owner, header(node, data, secret), data, hashes))
    out.sort(key=lambda s: (s[2], s[0]))
    imports: list[tuple[Any, ...]] = []
    for node in found.get("mod", ()):
        name = node.child_by_field_name("name")
        if name is not None:
            chain = scopes[node.id][1]
            imports.append(("::".join(["self", *chain, node_text(name)]), (), 0, False, _line(node)))
    for node in found.get("use", ()):
        argument = node.child_by_field_name("argument")
        if argument is None:
            continue
        chain = scopes[node.id][1]
        for segments, wildcard in _use_paths(argument, []):
            path = _from_file_module(segments, chain)
            if path:
                imports.append((path, ("*",) if wildcard else (), 0, False, _line(node)))
    for node in found.get("crate", ()):
        name = node.child_by_field_name("name")
        if name is not None and node_text(name) != "self":
            imports.append((node_text(name), (), 0, False, _line(node)))
    imports.sort(key=lambda i: (i[4], i[0]))
    return tuple(out), tuple(dict.fromkeys(imports))


def _line(node: Node) -> int:
    return node.start_point[0] + 1


def _inside(node: Node, scope: tuple[str | None, tuple[str, ...]]) -> tuple[str | None, tuple[str, ...]]:
    """What an item inside ``node`` gets (``scope``: what ``node`` itself got; see :func:`.syntax.enclosing`):
    the type or trait it belongs to ("" for a module-level item, None inside a function body) and the names of
    the inline ``mod x { ... }`` blocks around it, outermost first."""
    owner, chain = scope
    if node.type == "mod_item":
        name = node.child_by_field_name("name")
        chain = (*chain, node_text(name)) if name is not None else chain
    if owner is None or node.type in _LOCAL_SCOPES:
        return None, chain
    if node.type == "impl_item":
        return _type_name(node.child_by_field_name("type")), chain
    if node.type == "trait_item":
        return node_text(node.child_by_field_name("name")), chain
    return owner, chain


def _type_name(node: Node | None) -> str:
    """``Stack<T>`` -> ``Stack``; ``crate::net::Stream`` -> ``Stream``; ``&'a T`` -> ``T``."""
    while node is not None:
        if node.type in ("type_identifier", "primitive_type"):
            return node_text(node)
        inner = node.child_by_field_name("name")
        if inner is None:
            inner = node.child_by_field_name("type")
        if inner is None:
            named = [c for c in node.named_children if c.type != "lifetime"]
            inner = named[-1] if named else None
        node = inner
    return ""


def _segments(node: Node | None) -> list[str]:
    if node is None:
        return []
    text = "".join(node_text(node).split())
    return [part for part in text.split("::") if part]


def _use_paths(node: Node, prefix: list[str]) -> list[tuple[list[str], bool]]:
    """Every leaf path of a ``use`` tree, with whether it ends in ``*``."""
    kind = node.type
    if kind == "use_list":
        return [path for child in node.named_children for path in _use_paths(child, prefix)]
    if kind == "scoped_use_list":
        inner = node.child_by_field_name("list")
        base = prefix + _segments(node.child_by_field_name("path"))
        return _use_paths(inner, base) if inner is not None else []
    if kind == "use_as_clause":
        path = node.child_by_field_name("path")
        return _use_paths(path, prefix) if path is not None else []
    if kind == "use_wildcard":
        return [(prefix + _segments(node.named_children[0] if node.named_children else None), True)]
    segments = prefix + _segments(node)
    if segments and segments[-1] == "self":  # `use a::{self}` is `a`
        segments = segments[:-1]
    return [(segments, False)] if segments else []


def _from_file_module(segments: list[str], chain: tuple[str, ...]) -> str:
    """A use path rewritten relative to the file's module: inline modules folded in (see the module doc)."""
    head = segments[0].lstrip(":")
    if head in ("crate", "$crate"):
        return "::".join(["crate", *segments[1:]])
    if head == "self":
        return "::".join(["self", *chain, *segments[1:]])
    if head == "super":
        ups = 0
        while ups < len(segments) and segments[ups] == "super":
            ups += 1
        rest = segments[ups:]
        if ups <= len(chain):
            return "::".join(["self", *chain[: len(chain) - ups], *rest])
        return "::".join(["super"] * (ups - len(chain)) + rest)
    return "::".join([head, *segments[1:]])


@dataclass(frozen=True)
class CargoManifest:
    """One ``Cargo.toml``: its folder; for a package, its name, library crate name and root, and dependencies
    as ``(crate name in code, package name)`` (``name`` is None for a virtual workspace manifest); the renames
    its ``[workspace.dependencies]`` make (crate key -> package name)."""

    folder: str
    name: str | None
    lib_name: str
    lib_path: str
    dependencies: tuple[tuple[str, str], ...]
    renames: tuple[tuple[str, str], ...]


def parse_cargo_toml(rel: str, text: str) -> CargoManifest:
    """The parts of a ``Cargo.toml`` that name crates. Raises :class:`ValueError` for text that is not TOML, or
    that is too large or nested too deeply (see :func:`.bounded.load_toml`)."""
    data = load_toml(text)
    folder = posixpath.dirname(rel)
    workspace = data.get("workspace")
    renames: tuple[tuple[str, str], ...] = ()
    if isinstance(workspace, dict) and isinstance(workspace.get("dependencies"), dict):
        renames = tuple(sorted((k, _package_of(k, v)) for k, v in workspace["dependencies"].items()))
    package = data.get("package")
    if not isinstance(package, dict) or not isinstance(package.get("name"), str):
        return CargoManifest(folder, None, "", "", (), renames)
    lib = data.get("lib")
    if not isinstance(lib, dict):
        lib = {}
    lib_name, lib_path = lib.get("name"), lib.get("path")
    if not isinstance(lib_name, str):
        lib_name = package["name"]
    if not isinstance(lib_path, str):
        lib_path = "src/lib.rs"
    tables = [data.get(table) for table in _DEPENDENCY_TABLES]
    targets = data.get("target")
    if isinstance(targets, dict):  # [target.'cfg(unix)'.dependencies]
        for target in targets.values():
            if isinstance(target, dict):
                tables += [target.get(table) for table in _DEPENDENCY_TABLES]
    dependencies = {
        (key.replace("-", "_"), _package_of(key, spec))
        for table in tables
        if isinstance(table, dict)
        for key, spec in table.items()
    }
    return CargoManifest(
        folder,
        package["name"],
        lib_name.replace("-", "_"),
        posixpath.normpath(posixpath.join(folder, lib_path)),
        tuple(sorted(dependencies)),
        renames,
    )


def _package_of(key: str, spec: Any) -> str:
    """The package a dependency entry names: its ``package = ...`` rename, else its key."""
    if isinstance(spec, dict) and isinstance(spec.get("package"), str):
        return str(spec["package"])
    return key


class RustResolver:
    """Resolves Rust module paths of one file to module files, for a fixed file set and Cargo packages."""

    def __init__(self, files: Iterable[str], manifests: Iterable[CargoManifest]) -> None:
        self.files = {f for f in files if f.endswith(".rs")}
        manifests = list(manifests)
        self.packages = sorted(
            (m for m in manifests if m.name is not None), key=lambda p: (-len(p.folder), p.folder)
        )
        # The shallowest package of a name wins over copies nested deeper (vendored, test fixtures).
        self.by_name = {p.name: p for p in self.packages}
        self.renames = dict(pair for m in sorted(manifests, key=lambda m: m.folder) for pair in m.renames)

    def resolve(self, rel: str, item: tuple[Any, ...]) -> list[str]:
        """The module file a stored path points at ([] outside the repository)."""
        segments = item[0].split("::")
        head, rest = segments[0], segments[1:]
        package = self._package_of(rel)
        root_dir, root_file = self._crate_root(rel, package)
        if head == "crate":
            return self._deepest(root_dir, root_file, rest)
        if head == "self":
            return self._deepest(self._module_dir(rel, root_file), rel, rest)
        if head == "super":
            ups = 1
            while ups < len(segments) and segments[ups] == "super":
                ups += 1
            folder = self._module_dir(rel, root_file)
            for _ in range(ups):
                if folder == root_dir or not folder:
                    return []  # above the crate root: not a path rustc accepts
                folder = posixpath.dirname(folder)
            module = root_file if folder == root_dir else self._module_file(folder)
            return self._deepest(folder, module, segments[ups:])
        local = self._deepest(self._module_dir(rel, root_file), None, segments)
        if local:
            return local
        crate = self._crate(package, head, rel)
        if crate is None:
            return []
        return self._deepest(posixpath.dirname(crate.lib_path), crate.lib_path, rest)

    def _package_of(self, rel: str) -> CargoManifest | None:
        return next((p for p in self.packages if not p.folder or rel.startswith(p.folder + "/")), None)

    def _crate(self, package: CargoManifest | None, name: str, rel: str) -> CargoManifest | None:
        """The repository package whose library ``name`` names in code, as seen from ``package``."""
        if package is None:
            return None
        if name == package.lib_name and rel != package.lib_path and package.lib_path in self.files:
            return package
        for key, target in package.dependencies:
            if key == name:
                found = self.by_name.get(self.renames.get(target, target))
                if found is not None and found.lib_path in self.files:
                    return found
        return None

    def _crate_root(self, rel: str, package: CargoManifest | None) -> tuple[str, str | None]:
        """The folder of the crate root ``rel`` belongs to, and that root file (None when not indexed)."""
        if package is None:
            # No manifest: the nearest folder above holding a lib.rs or main.rs is the crate's root.
            folder = posixpath.dirname(rel)
            while True:
                for name in ("lib.rs", "main.rs"):
                    candidate = posixpath.join(folder, name)
                    if candidate in self.files:
                        return folder, candidate
                if not folder:
                    return posixpath.dirname(rel), None
                folder = posixpath.dirname(folder)
        base = package.folder + "/" if package.folder else ""
        inner = rel[len(base) :]
        for target in _TARGET_FOLDERS:
            if inner.startswith(target + "/"):
                parts = inner[len(target) + 1 :].split("/")
                target_dir = base + target
                if len(parts) == 1:
                    return target_dir, rel
                main = f"{target_dir}/{parts[0]}/main.rs"
                return (posixpath.dirname(main), main) if main in self.files else (target_dir, None)
        if inner == "build.rs":
            return package.folder, rel
        if rel == base + "src/main.rs" or package.lib_path not in self.files:
            main = base + "src/main.rs"
            return posixpath.dirname(main), main if main in self.files else None
        return posixpath.dirname(package.lib_path), package.lib_path

    def _module_dir(self, rel: str, root_file: str | None) -> str:
        """Where the child modules of ``rel``'s module live: beside a crate root or ``mod.rs``, else in
        ``foo/`` for ``foo.rs``."""
        if rel == root_file or posixpath.basename(rel) == "mod.rs":
            return posixpath.dirname(rel)
        return rel[: -len(".rs")]

    def _module_file(self, folder: str) -> str | None:
        for candidate in (folder + ".rs", folder + "/mod.rs"):
            if candidate in self.files:
                return candidate
        return None

    def _deepest(self, folder: str, fallback: str | None, segments: list[str]) -> list[str]:
        """The deepest module file along ``segments`` below ``folder``, else ``fallback``."""
        for end in range(len(segments), 0, -1):
            found = self._module_file(posixpath.join(folder, *segments[:end]))
            if found is not None:
                return [found]
        return [fallback] if fallback else []
