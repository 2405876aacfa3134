"""Import resolution for Go, Rust and Java: their manifests read into configs, and a resolver per language.

``go.mod`` and ``Cargo.toml`` steer resolution as tsconfig.json does for TypeScript: the walk lists them with
the other config files, :func:`.resolve.load_tsconfigs` parses them here into frozen values kept by path, and
:class:`.resolve.Resolver` hands them to :class:`NativeResolvers`, which builds each language's resolver the
first time a file of that language asks (a Python-only repository never pays for them).
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable
from typing import Any

from aries_kernel.codebase.lang_go import GoModule, GoResolver, parse_go_mod
from aries_kernel.codebase.lang_java import JavaResolver
from aries_kernel.codebase.lang_rust import CargoManifest, RustResolver, parse_cargo_toml

__all__ = [
    "MANIFEST_FILES",
    "MANIFEST_IGNORED",
    "NATIVE_LANGUAGES",
    "NativeConfig",
    "NativeResolvers",
    "is_manifest",
    "load_manifest",
]

MANIFEST_FILES = frozenset({"go.mod", "Cargo.toml"})
# What is lost when a manifest cannot be used, for its skipped() reason.
MANIFEST_IGNORED = {
    "go.mod": "imports of its packages are not resolved",
    "Cargo.toml": "the crates it names are not resolved",
}
NATIVE_LANGUAGES = frozenset({"go", "rust", "java"})
NativeConfig = GoModule | CargoManifest


def is_manifest(rel: str) -> bool:
    """Whether a root-relative path is a ``go.mod`` or ``Cargo.toml``."""
    return posixpath.basename(rel) in MANIFEST_FILES


def load_manifest(rel: str, text: str) -> tuple[NativeConfig | None, str | None]:
    """The config one manifest gives, or None and the problem that makes it unusable."""
    if posixpath.basename(rel) == "go.mod":
        path = parse_go_mod(text)
        if path is None:
            return None, f"go.mod declares no module path; {MANIFEST_IGNORED['go.mod']}"
        return GoModule(posixpath.dirname(rel), path), None
    try:
        return parse_cargo_toml(rel, text), None
    except ValueError as exc:
        return None, f"Cargo.toml not parsed ({exc}); {MANIFEST_IGNORED['Cargo.toml']}"


class NativeResolvers:
    """The Go, Rust and Java resolvers of one file set and its manifests, each built on first use."""

    def __init__(self, files: set[str], configs: Iterable[NativeConfig]) -> None:
        self.files = files
        self.configs = list(configs)
        self._built: dict[str, Callable[[str, tuple[Any, ...]], list[str]]] = {}

    def resolver(self, language: str) -> Callable[[str, tuple[Any, ...]], list[str]]:
        """``resolve(importing file, import tuple) -> target files`` for ``language`` (one of
        :data:`NATIVE_LANGUAGES`)."""
        found = self._built.get(language)
        if found is None:
            if language == "go":
                modules = [c for c in self.configs if isinstance(c, GoModule)]
                found = GoResolver(self.files, modules).resolve
            elif language == "rust":
                manifests = [c for c in self.configs if isinstance(c, CargoManifest)]
                found = RustResolver(self.files, manifests).resolve
            else:
                found = JavaResolver(self.files).resolve
            self._built[language] = found
        return found
