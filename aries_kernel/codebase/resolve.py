"""Import resolution: which indexed file an import statement points at, by each language's rules.

Python: absolute imports through the module names of the indexed files (a package's name comes from its chain of
``__init__.py`` folders; files are also reachable by their path from the root and from ``src/``), relative
imports from the importing file's package, ``from pkg import name`` pointing at ``pkg/name.py`` when that is a
submodule and at ``pkg/__init__.py`` otherwise (re-exports are the ``__init__``'s own imports). Imports inside
``if``/``try`` blocks and functions count the same as top-level ones.

A plain folder (no ``__init__.py``) is a root of top-level modules only where something puts it on
``sys.path``: the repository root, a root ``src/``, and a folder that holds a regular package (site-packages, a
CPython ``Lib/``: the package's absolute name is rooted there). Any other plain folder is a root only for the
files in it and beneath it: the folder of a script being run is ``sys.path[0]``, and pytest's rootdir and
conftest insertion put a test folder there for the tests below it. So ``tools/gc.py`` answers ``import gc`` from
``tools/run.py`` and ``tools/tests/test_x.py``, never from an unrelated package.

JavaScript/TypeScript, by TypeScript's module resolution (node16/nodenext/bundler) for TypeScript importers and
Node's for JavaScript ones: relative specifiers with extension substitution (``.js`` -> ``.ts``/``.tsx``/
``.d.ts``, ``.mjs`` -> ``.mts``/``.d.mts``, ``.cjs`` -> ``.cts``/``.d.cts``; a TypeScript importer takes the
TypeScript file first, a JavaScript importer the file it names), implied extensions, and folders (their
package.json ``types``/``typings``, for TypeScript importers, then ``main``; then ``index``); tsconfig/jsconfig
``paths`` and ``baseUrl`` (following ``extends``); package.json ``imports`` (``#subpath``) of the importer's
package, and its own ``name`` through its ``exports`` (self-reference), with ``*`` patterns and the conditions
``types`` (TypeScript importers), ``import``, ``require``, ``node`` and ``default``. A condition whose target is
not in the repository (built output) gives way to the next one that is. Other bare package names are external
and give no edge.

A :class:`Resolver` depends only on the set of indexed files and the tsconfig and package.json contents, so an
edit that changes none of them leaves every other file's resolution as it was.
"""

from __future__ import annotations

import functools
import posixpath
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from aries_kernel.codebase.bounded import load_json
from aries_kernel.codebase.lang_resolve import (
    MANIFEST_IGNORED,
    NATIVE_LANGUAGES,
    NativeConfig,
    NativeResolvers,
    is_manifest,
    load_manifest,
)

__all__ = [
    "ImportConfig",
    "PackageJson",
    "Resolver",
    "TsConfig",
    "config_problem",
    "load_tsconfigs",
    "parse_jsonc",
]

# Implied extensions, in the order each kind of importer tries them: TypeScript looks for its own sources and
# declarations first; Node and the bundlers take JavaScript first (a .d.ts never runs).
_TS_EXTENSIONS = (".ts", ".tsx", ".d.ts", ".mts", ".cts", ".js", ".jsx", ".mjs", ".cjs")
_JS_EXTENSIONS = (".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".mts", ".cts", ".d.ts")
# TypeScript's extension substitution: a specifier written with the emitted name finds the source.
_JS_TO_TS = {
    ".js": (".ts", ".tsx", ".d.ts"),
    ".jsx": (".tsx", ".d.ts"),
    ".mjs": (".mts", ".d.mts"),
    ".cjs": (".cts", ".d.cts"),
}
# package.json export/import conditions that are on for every importer; TypeScript adds "types". "import" and
# "require" both count: an edge says the file depends on the target, whichever way it loads it.
_CONDITIONS = frozenset({"import", "require", "node", "default"})
_TS_CONDITIONS = _CONDITIONS | {"types"}
# Where something other than plain JSON text may start: a string, a comment, a comma, a closing bracket.
_JSONC_SPECIAL = re.compile(r'["/,}\]]')
_STRING_REST = re.compile(r'(?:[^"\\]|\\.)*"', re.DOTALL)


def parse_jsonc(text: str) -> Any:
    """Parse JSON with comments and trailing commas, as tsconfig.json allows.

    Raises :class:`ValueError` for text that is not such JSON, or that is too large or nested too deeply (see
    :func:`.bounded.load_json`).
    """
    return load_json(strip_jsonc(text))


def strip_jsonc(text: str) -> str:
    """``text`` without comments and trailing commas, in one pass (linear: every character is looked at once,
    and an unterminated string or comment ends the scan instead of being retried further on)."""
    out: list[str] = []
    comma = -1  # index in out of a comma that a closing bracket would make trailing
    pos = 0
    while True:
        match = _JSONC_SPECIAL.search(text, pos)
        if match is None:
            out.append(text[pos:])
            break
        start = match.start()
        if text[pos:start].strip():
            comma = -1
        out.append(text[pos:start])
        char = text[start]
        if char == '"':
            end = _STRING_REST.match(text, start + 1)
            if end is None:  # unterminated: json.loads reports it
                out.append(text[start:])
                break
            out.append(text[start : end.end()])
            pos, comma = end.end(), -1
        elif text.startswith("//", start):
            newline = text.find("\n", start)
            if newline < 0:
                break
            pos = newline
        elif text.startswith("/*", start):
            close = text.find("*/", start + 2)
            if close < 0:
                break
            out.append(" ")
            pos = close + 2
        elif char == ",":
            comma = len(out)
            out.append(",")
            pos = start + 1
        else:
            if char != "/" and comma >= 0:
                out[comma] = ""
            comma = -1
            out.append(char)
            pos = start + 1
    return "".join(out)


@dataclass(frozen=True)
class TsConfig:
    """The module-resolution part of one tsconfig.json: its folder, baseUrl and paths (all root-relative)."""

    folder: str
    base_url: str | None
    paths: tuple[tuple[str, tuple[str, ...]], ...]
    paths_base: str


@dataclass(frozen=True)
class PackageJson:
    """The module-resolution part of one package.json: its folder (root-relative) and the fields that map
    specifiers to files (``types`` also stands for ``typings``; ``exports`` and ``imports`` as parsed JSON)."""

    folder: str
    name: str | None
    main: str | None
    types: str | None
    exports: Any
    imports: Any


ImportConfig = TsConfig | PackageJson | NativeConfig


def load_tsconfigs(
    texts: dict[str, str], read: Callable[[str], str | None]
) -> tuple[dict[str, ImportConfig], list[tuple[str, str]]]:
    """Parse every tsconfig/jsconfig and package.json (root-relative path -> text); returns the configs by
    their path and the problems.

    Files named by ``extends`` are read with ``read`` (root-relative path -> text, or None) and added to
    ``texts``, so the caller can tell when one of them changes.
    """
    raw: dict[str, dict[str, Any]] = {}
    problems: list[tuple[str, str]] = []
    configs: dict[str, ImportConfig] = {}
    pending = sorted(texts)
    while pending:
        rel = pending.pop()
        if is_manifest(rel):  # go.mod, Cargo.toml: see lang_resolve
            manifest, problem = load_manifest(rel, texts[rel])
            if manifest is not None:
                configs[rel] = manifest
            if problem is not None:
                problems.append((rel, problem))
            continue
        if posixpath.basename(rel) == "package.json":
            package = _load_package(rel, texts[rel], problems)
            if package is not None:
                configs[rel] = package
            continue
        try:
            data = parse_jsonc(texts[rel])
        except ValueError as exc:
            problems.append((rel, config_problem(rel, f"not parsed ({exc})")))
            continue
        if not isinstance(data, dict):
            problems.append((rel, config_problem(rel, "not parsed (top level is not an object)")))
            continue
        raw[rel] = data
        parent = _extends_path(rel, data)
        if parent is not None and parent not in texts:
            text = read(parent)
            if text is not None:
                texts[parent] = text
                pending.append(parent)
    for rel in sorted(raw):
        if posixpath.basename(rel) not in ("tsconfig.json", "jsconfig.json"):
            continue  # only extended, not a project of its own
        folder = posixpath.dirname(rel)
        options = _compiler_options(rel, raw, depth=0)
        base_url = options.get("baseUrl")
        base = _norm(posixpath.join(options["__dir__"], base_url)) if isinstance(base_url, str) else None
        paths = options.get("paths") or {}
        entries = (
            tuple(
                (str(pattern), tuple(str(t) for t in targets))
                for pattern, targets in paths.items()
                if isinstance(targets, list)
            )
            if isinstance(paths, dict)
            else ()
        )
        paths_dir = options.get("__paths_dir__", options["__dir__"])
        configs[rel] = TsConfig(folder, base, entries, base if base is not None else paths_dir)
    return dict(sorted(configs.items())), problems


def _load_package(rel: str, text: str, problems: list[tuple[str, str]]) -> PackageJson | None:
    """The resolution fields of a package.json (strict JSON, as npm reads it), or None with a problem."""
    try:
        data = load_json(text)
    except ValueError as exc:
        problems.append((rel, config_problem(rel, f"not parsed ({exc})")))
        return None
    if not isinstance(data, dict):
        problems.append((rel, config_problem(rel, "not parsed (top level is not an object)")))
        return None

    def text_field(*keys: str) -> str | None:
        for key in keys:
            value = data.get(key)
            if isinstance(value, str) and value:
                return value
        return None

    return PackageJson(
        posixpath.dirname(rel),
        text_field("name"),
        text_field("main"),
        text_field("types", "typings"),
        data.get("exports"),
        data.get("imports"),
    )


def config_problem(rel: str, what: str) -> str:
    """The ``skipped()`` reason for an import-config file that could not be used: what went wrong, and what
    is ignored because of it."""
    name = posixpath.basename(rel)
    if name == "package.json":
        return f"package.json {what}; its imports/exports/main/types are ignored"
    if name in MANIFEST_IGNORED:
        return f"{name} {what}; {MANIFEST_IGNORED[name]}"
    return f"tsconfig {what}; its paths/baseUrl are ignored"


def _compiler_options(rel: str, raw: dict[str, dict[str, Any]], depth: int) -> dict[str, Any]:
    """compilerOptions merged along ``extends`` (repository files only), with the folder each came from."""
    data = raw[rel]
    folder = posixpath.dirname(rel)
    merged: dict[str, Any] = {"__dir__": folder}
    parent = _extends_path(rel, data)
    if parent is not None and parent in raw and depth < 8:
        merged.update(_compiler_options(parent, raw, depth + 1))
    options = data.get("compilerOptions")
    if isinstance(options, dict):
        if "baseUrl" in options:
            merged["__dir__"] = folder
        if "paths" in options:
            merged["__paths_dir__"] = folder
        merged.update(options)
    return merged


def _extends_path(rel: str, data: dict[str, Any]) -> str | None:
    """The repository file a config ``extends`` (relative paths only; packages are out of reach)."""
    parent = data.get("extends")
    if not isinstance(parent, str) or not parent.startswith("."):
        return None
    target = _norm(posixpath.join(posixpath.dirname(rel), parent))
    if target.startswith(".."):
        return None
    return target if target.endswith(".json") else target + ".json"


def _norm(path: str) -> str:
    path = posixpath.normpath(path)
    return "" if path == "." else path


class Resolver:
    """Resolves the imports of one file to indexed files, for a fixed file set and config set (tsconfig and
    package.json files by path, as :func:`load_tsconfigs` returns them)."""

    def __init__(self, files: Iterable[str], root_name: str, configs: Mapping[str, ImportConfig]) -> None:
        self.files = set(files)
        self.tsconfigs: dict[str, TsConfig] = {}
        self.packages: dict[str, PackageJson] = {}
        native: list[NativeConfig] = []
        for rel, config in sorted(configs.items()):
            if isinstance(config, NativeConfig):
                native.append(config)
            elif isinstance(config, PackageJson):
                self.packages[config.folder] = config
            elif config.folder not in self.tsconfigs or posixpath.basename(rel) == "tsconfig.json":
                self.tsconfigs[config.folder] = config  # tsconfig.json wins over jsconfig.json in one folder
        self.modules, self.local_roots = _python_module_map(self.files, root_name)
        self.native = NativeResolvers(self.files, native)

    def resolve(self, rel: str, language: str, imports: Iterable[tuple[Any, ...]]) -> dict[str, bool]:
        """Target file -> type_only (True only when every import of that target is type-only)."""
        resolve_one: Callable[[str, tuple[Any, ...]], list[str]]
        if language == "python":
            resolve_one = self._python
        elif language in NATIVE_LANGUAGES:
            resolve_one = self.native.resolver(language)
        else:
            resolve_one = functools.partial(self._js, ts=language in ("typescript", "tsx"))
        targets: dict[str, bool] = {}
        for item in imports:
            for target in resolve_one(rel, item):
                if target != rel:
                    targets[target] = targets.get(target, True) and bool(item[3])
        return targets

    # Python

    def _python(self, rel: str, item: tuple[Any, ...]) -> list[str]:
        module, names, level = item[0], item[1], item[2]
        if level:
            base = posixpath.dirname(rel)
            for _ in range(level - 1):
                if not base:
                    return []  # beyond the top of the repository
                base = posixpath.dirname(base)
            folder = _norm(posixpath.join(base, *module.split("."))) if module else base
            package = self._py_path(folder)
            return self._with_names(folder, package, names)
        if not names:
            # `import a.b.c`: the deepest module of the chain that exists in the repository.
            parts = module.split(".")
            for end in range(len(parts), 0, -1):
                target = self._module(".".join(parts[:end]), rel)
                if target is not None:
                    return [target]
            return []
        target = self._module(module, rel)
        if target is None:
            return []
        package_dir = (
            target[: -len("/__init__.py")]
            if target.endswith("__init__.py") and "/" in target
            else ("" if target == "__init__.py" else None)
        )
        return self._with_names(package_dir, target, names)

    def _module(self, dotted: str, rel: str) -> str | None:
        """The file of the absolute module ``dotted`` as ``rel`` sees it: in the local module roots among its
        folders, nearest first (a script's own folder comes first on ``sys.path``), else by its global name."""
        folder = posixpath.dirname(rel)
        while folder:
            if folder in self.local_roots:
                found = self._py_path(posixpath.join(folder, *dotted.split(".")))
                if found is not None:
                    return found
            folder = posixpath.dirname(folder)
        return self.modules.get(dotted)

    def _with_names(self, folder: str | None, module_file: str | None, names: tuple[str, ...]) -> list[str]:
        """``from <module> import names``: each name that is a submodule, else the module itself."""
        if not names:
            return [module_file] if module_file else []
        out: list[str] = []
        for name in names:
            sub = (
                self._py_path(_norm(posixpath.join(folder, name)))
                if folder is not None and name != "*"
                else None
            )
            if sub is not None:
                out.append(sub)
            elif module_file is not None:
                out.append(module_file)
        return out

    def _py_path(self, dotted_path: str) -> str | None:
        """``a/b`` -> ``a/b.py``, ``a/b.pyi`` or ``a/b/__init__.py``, whichever is indexed."""
        for candidate in (
            f"{dotted_path}.py",
            f"{dotted_path}/__init__.py" if dotted_path else "__init__.py",
            f"{dotted_path}.pyi",
            f"{dotted_path}/__init__.pyi" if dotted_path else "__init__.pyi",
        ):
            if candidate in self.files:
                return candidate
        return None

    # JavaScript / TypeScript

    def _js(self, rel: str, item: tuple[Any, ...], ts: bool) -> list[str]:
        """``ts``: the importer is TypeScript, so TypeScript's resolution applies rather than Node's."""
        spec: str = item[0].split("?", 1)[0]
        if not spec:
            return []
        target: str | None = None
        if spec.startswith(("./", "../")) or spec in (".", ".."):
            target = self._js_path(_norm(posixpath.join(posixpath.dirname(rel), spec)), ts)
        elif spec.startswith("/"):
            target = self._js_path(_norm(spec.lstrip("/")), ts)
        else:
            target = self._js_mapped(rel, spec, ts) or self._js_package(rel, spec, ts)
        return [target] if target else []

    def _js_mapped(self, rel: str, spec: str, ts: bool) -> str | None:
        """A bare specifier through the nearest tsconfig/jsconfig's ``paths``, then its ``baseUrl``."""
        config = self._nearest(self.tsconfigs, rel)
        if config is None:
            return None
        for pattern, substitutions in config.paths:
            star = _match_pattern(pattern, spec)
            if star is None:
                continue
            for substitution in substitutions:
                mapped = substitution.replace("*", star, 1)
                target = self._js_path(_norm(posixpath.join(config.paths_base, mapped)), ts)
                if target:
                    return target
        if config.base_url is not None:
            return self._js_path(_norm(posixpath.join(config.base_url, spec)), ts)
        return None

    def _js_package(self, rel: str, spec: str, ts: bool) -> str | None:
        """``#subpath`` through the ``imports`` of the importer's package (its nearest package.json), or the
        package's own name through its ``exports``, as Node and TypeScript resolve them."""
        package = self._nearest(self.packages, rel)
        if package is None:
            return None
        if spec.startswith("#"):
            targets = _subpath_targets(package.imports, spec) if isinstance(package.imports, dict) else []
        else:
            name, subpath = _package_name(spec)
            if package.exports is None or name != package.name:
                return None
            targets = _subpath_targets(_exports_map(package.exports), subpath)
        conditions = _TS_CONDITIONS if ts else _CONDITIONS
        for target in targets:
            for path in _condition_paths(target, conditions):
                found = self._js_target(package.folder, path, ts)
                if found:
                    return found
        return None

    def _js_target(self, folder: str, target: str, ts: bool) -> str | None:
        """A package.json target (``./dist/x.js``): that file, or for TypeScript its source first; targets are
        exact, with no implied extension or index."""
        if not target.startswith("./"):
            return None  # another package's name: external
        path = _norm(posixpath.join(folder, target))
        if path.startswith(".."):
            return None
        return self._js_substituted(path, ts)

    def _js_substituted(self, path: str, ts: bool) -> str | None:
        """``path`` itself or, by extension substitution, its TypeScript source or declarations (first for a
        TypeScript importer; for a JavaScript importer only when the named file is not indexed)."""
        stem, ext = posixpath.splitext(path)
        if ext == ".ts" and stem.endswith(".d"):
            ext = ""  # `x.d.ts` names itself
        substitutes = [stem + ts_ext for ts_ext in _JS_TO_TS.get(ext, ())]
        for candidate in [*substitutes, path] if ts else [path, *substitutes]:
            if candidate in self.files:
                return candidate
        return None

    def _js_path(self, path: str, ts: bool) -> str | None:
        """A file or folder path: the file, with substitution or an implied extension; else the folder."""
        if path.startswith(".."):
            return None
        found = self._js_substituted(path, ts) if path else None
        if found:
            return found
        for ext in _TS_EXTENSIONS if ts else _JS_EXTENSIONS:
            if path + ext in self.files:
                return path + ext
        return self._js_folder(path, ts)

    def _js_folder(self, path: str, ts: bool) -> str | None:
        """A folder: its package.json ``types``/``typings`` (TypeScript) and ``main``, then its ``index``."""
        package = self.packages.get(path)
        if package is not None:
            for field in (package.types, package.main) if ts else (package.main,):
                if field is None:
                    continue
                entry = _norm(posixpath.join(path, field))
                if entry != path and not entry.startswith(".."):
                    found = self._js_file_or_index(entry, ts)
                    if found:
                        return found
        return self._js_index(path, ts)

    def _js_file_or_index(self, path: str, ts: bool) -> str | None:
        """A package.json ``main``/``types`` entry: a file (substituted or with an implied extension), or the
        index of a folder (not that folder's own package.json: Node reads one per package)."""
        found = self._js_substituted(path, ts)
        if found:
            return found
        for ext in _TS_EXTENSIONS if ts else _JS_EXTENSIONS:
            if path + ext in self.files:
                return path + ext
        return self._js_index(path, ts)

    def _js_index(self, path: str, ts: bool) -> str | None:
        index = posixpath.join(path, "index") if path else "index"
        for ext in _TS_EXTENSIONS if ts else _JS_EXTENSIONS:
            if index + ext in self.files:
                return index + ext
        return None

    @staticmethod
    def _nearest(configs: Mapping[str, Any], rel: str) -> Any:
        """The config of the nearest folder at or above ``rel``'s that has one (None: none does)."""
        folder = posixpath.dirname(rel)
        while True:
            if folder in configs:
                return configs[folder]
            if not folder:
                return None
            folder = posixpath.dirname(folder)


def _package_name(spec: str) -> tuple[str, str]:
    """``@scope/pkg/a/b`` -> (``@scope/pkg``, ``./a/b``); ``pkg`` -> (``pkg``, ``.``)."""
    parts = spec.split("/")
    count = 2 if spec.startswith("@") else 1
    name, rest = "/".join(parts[:count]), "/".join(parts[count:])
    return name, f"./{rest}" if rest else "."


def _exports_map(exports: Any) -> dict[str, Any]:
    """``exports`` as a subpath map: a string, an array or a conditions object is the sugar for ``"."``."""
    if isinstance(exports, dict) and any(str(key).startswith(".") for key in exports):
        return exports
    return {".": exports}


def _subpath_targets(mapping: dict[str, Any], key: str) -> list[Any]:
    """The targets ``key`` maps to in an ``exports``/``imports`` map, ``*`` replaced by what it matched.

    An exact key wins; else the pattern with the longest part before its ``*`` (Node's PATTERN_KEY_COMPARE).
    """
    if key in mapping and "*" not in key:
        return [mapping[key]]
    best: tuple[int, int, str] | None = None
    for pattern in mapping:
        base, star, trailer = str(pattern).partition("*")
        if not star or "*" in trailer or not key.startswith(base) or key == base:
            continue
        if trailer and (not key.endswith(trailer) or len(key) < len(pattern)):
            continue
        rank = (len(base), len(pattern), pattern)
        if best is None or rank[:2] > best[:2]:
            best = rank
    if best is None:
        return []
    base, _, trailer = best[2].partition("*")
    matched = key[len(base) : len(key) - len(trailer)]
    return [_substitute(mapping[best[2]], matched)]


def _substitute(target: Any, matched: str) -> Any:
    """A target with every ``*`` in its strings replaced by ``matched``."""
    if isinstance(target, str):
        return target.replace("*", matched)
    if isinstance(target, list):
        return [_substitute(t, matched) for t in target]
    if isinstance(target, dict):
        return {key: _substitute(value, matched) for key, value in target.items()}
    return target


def _condition_paths(target: Any, conditions: frozenset[str], depth: int = 0) -> list[str]:
    """The paths a target can stand for under ``conditions``, in the order Node tries them: a string itself,
    an array's items, a conditions object's active keys in their written order (nested objects too)."""
    if isinstance(target, str):
        return [target]
    if depth > 16:  # deeper nesting is not a real package.json
        return []
    items: list[Any] = []
    if isinstance(target, list):
        items = target
    elif isinstance(target, dict):
        items = [value for key, value in target.items() if key in conditions]
    return [path for item in items for path in _condition_paths(item, conditions, depth + 1)]


def _match_pattern(pattern: str, spec: str) -> str | None:
    """The text matched by ``*`` in a tsconfig paths pattern ("" for an exact pattern), or None."""
    if "*" not in pattern:
        return "" if pattern == spec else None
    prefix, _, suffix = pattern.partition("*")
    if spec.startswith(prefix) and spec.endswith(suffix) and len(spec) >= len(prefix) + len(suffix):
        return spec[len(prefix) : len(spec) - len(suffix)]
    return None


def _python_module_map(files: set[str], root_name: str) -> tuple[dict[str, str], frozenset[str]]:
    """Dotted module name -> file, for every indexed Python file; and the local module roots.

    The package-aware name (up the chain of ``__init__.py`` folders; a root that is itself a package is named
    after its folder) wins over the name by path from the root, which wins over the name by path from ``src/``.
    A plain module's bare name is global only when its plain folder is on ``sys.path`` for everyone (it holds a
    regular package); other plain folders with Python files are local roots, searched by path from the files
    beneath them (see the module docstring).
    """
    packages = {
        posixpath.dirname(f) for f in files if posixpath.basename(f) in ("__init__.py", "__init__.pyi")
    }
    global_roots = {posixpath.dirname(p) for p in packages if p and posixpath.dirname(p) not in packages}
    global_roots.add("src")
    local_roots: set[str] = set()
    by_priority: list[dict[str, str]] = [{}, {}, {}]
    for rel in sorted(files):
        if not rel.endswith((".py", ".pyi")):
            continue
        stem = rel.rsplit(".", 1)[0]
        parts = stem.split("/")
        if parts[-1] == "__init__":
            parts = parts[:-1]
        folder_parts = stem.split("/")[:-1]
        # Walk up while the folder is a package.
        start = len(folder_parts)
        while start > 0 and "/".join(folder_parts[:start]) in packages:
            start -= 1
        package_parts = parts[start:]
        if start == 0 and "" in packages:
            package_parts = [root_name, *parts]
        folder = "/".join(folder_parts)
        plain_module = start == len(folder_parts) and folder not in packages
        if plain_module and folder and folder not in global_roots:
            local_roots.add(folder)  # `tools/gc.py` is `gc` only to the files in tools/ and beneath it
        elif package_parts:
            by_priority[0].setdefault(".".join(package_parts), rel)
        if parts:
            by_priority[1].setdefault(".".join(parts), rel)
        if len(parts) > 1 and parts[0] == "src":
            by_priority[2].setdefault(".".join(parts[1:]), rel)
    modules: dict[str, str] = {}
    for table in reversed(by_priority):
        modules.update(table)
    return modules, frozenset(local_roots)
