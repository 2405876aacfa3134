"""Import resolution: which indexed file an import statement points at, by each language's rules.

Python: absolute imports through the module names of the indexed files (a package's name comes from its chain of
``__init__.py`` folders; files are also reachable by their path from the root and from ``src/``), relative
imports from the importing file's package, ``from pkg import name`` pointing at ``pkg/name.py`` when that is a
submodule and at ``pkg/__init__.py`` otherwise (re-exports are the ``__init__``'s own imports). Imports inside
``if``/``try`` blocks and functions count the same as top-level ones.

JavaScript/TypeScript: relative specifiers with extension and ``index`` resolution (and ``.js`` written for a
``.ts`` source), tsconfig/jsconfig ``paths`` and ``baseUrl`` (following ``extends``); bare package names that
match nothing in the repository are external and give no edge.

A :class:`Resolver` depends only on the set of indexed files and the tsconfig contents, so an edit that changes
neither leaves every other file's resolution as it was.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["TSCONFIG_MAX_BYTES", "Resolver", "TsConfig", "parse_jsonc"]

_JS_EXTENSIONS = (".ts", ".tsx", ".d.ts", ".mts", ".cts", ".js", ".jsx", ".mjs", ".cjs")
_JS_TO_TS = {".js": (".ts", ".tsx"), ".jsx": (".tsx",), ".mjs": (".mts",), ".cjs": (".cts",)}
# A tsconfig larger than this is reported and not parsed (real ones are a few KB).
TSCONFIG_MAX_BYTES = 1 << 20
# Where something other than plain JSON text may start: a string, a comment, a comma, a closing bracket.
_JSONC_SPECIAL = re.compile(r'["/,}\]]')
_STRING_REST = re.compile(r'(?:[^"\\]|\\.)*"', re.DOTALL)


def parse_jsonc(text: str) -> Any:
    """Parse JSON with comments and trailing commas, as tsconfig.json allows.

    Raises :class:`ValueError` for text that is not such JSON, including JSON nested too deeply to parse.
    """
    try:
        return json.loads(strip_jsonc(text))
    except RecursionError:
        raise ValueError("nested too deeply") from None


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


def load_tsconfigs(
    texts: dict[str, str], read: Callable[[str], str | None]
) -> tuple[dict[str, TsConfig], list[tuple[str, str]]]:
    """Parse every tsconfig/jsconfig (root-relative path -> text); returns configs by folder and problems.

    Files named by ``extends`` are read with ``read`` (root-relative path -> text, or None) and added to
    ``texts``, so the caller can tell when one of them changes.
    """
    raw: dict[str, dict[str, Any]] = {}
    problems: list[tuple[str, str]] = []
    pending = sorted(texts)
    while pending:
        rel = pending.pop()
        try:
            data = parse_jsonc(texts[rel])
        except ValueError as exc:
            problems.append((rel, f"tsconfig not parsed ({exc}); its paths/baseUrl are ignored"))
            continue
        if not isinstance(data, dict):
            problems.append(
                (rel, "tsconfig not parsed (top level is not an object); its paths/baseUrl are ignored")
            )
            continue
        raw[rel] = data
        parent = _extends_path(rel, data)
        if parent is not None and parent not in texts:
            text = read(parent)
            if text is not None:
                texts[parent] = text
                pending.append(parent)
    configs: dict[str, TsConfig] = {}
    for rel in sorted(raw):
        if posixpath.basename(rel) not in ("tsconfig.json", "jsconfig.json"):
            continue  # only extended, not a project of its own
        folder = posixpath.dirname(rel)
        if folder in configs and posixpath.basename(rel) == "jsconfig.json":
            continue  # tsconfig.json wins over jsconfig.json in the same folder
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
        configs[folder] = TsConfig(folder, base, entries, base if base is not None else paths_dir)
    return configs, problems


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
    """Resolves the imports of one file to indexed files, for a fixed file set and tsconfig set."""

    def __init__(self, files: Iterable[str], root_name: str, tsconfigs: dict[str, TsConfig]) -> None:
        self.files = set(files)
        self.tsconfigs = tsconfigs
        self.modules = _python_module_map(self.files, root_name)

    def resolve(self, rel: str, language: str, imports: Iterable[tuple[Any, ...]]) -> dict[str, bool]:
        """Target file -> type_only (True only when every import of that target is type-only)."""
        resolve_one: Callable[[str, tuple[Any, ...]], list[str]]
        resolve_one = self._python if language == "python" else self._js
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
                target = self.modules.get(".".join(parts[:end]))
                if target is not None:
                    return [target]
            return []
        target = self.modules.get(module)
        if target is None:
            return []
        package_dir = (
            target[: -len("/__init__.py")]
            if target.endswith("__init__.py") and "/" in target
            else ("" if target == "__init__.py" else None)
        )
        return self._with_names(package_dir, target, names)

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

    def _js(self, rel: str, item: tuple[Any, ...]) -> list[str]:
        spec: str = item[0].split("?", 1)[0]
        if not spec:
            return []
        if spec.startswith(("./", "../")) or spec in (".", ".."):
            target = self._js_file(_norm(posixpath.join(posixpath.dirname(rel), spec)))
            return [target] if target else []
        if spec.startswith("/"):
            target = self._js_file(_norm(spec.lstrip("/")))
            return [target] if target else []
        config = self._tsconfig_for(rel)
        if config is None:
            return []
        for pattern, substitutions in config.paths:
            star = _match_pattern(pattern, spec)
            if star is None:
                continue
            for substitution in substitutions:
                mapped = substitution.replace("*", star, 1)
                target = self._js_file(_norm(posixpath.join(config.paths_base, mapped)))
                if target:
                    return [target]
        if config.base_url is not None:
            target = self._js_file(_norm(posixpath.join(config.base_url, spec)))
            if target:
                return [target]
        return []

    def _js_file(self, path: str) -> str | None:
        if path.startswith(".."):
            return None
        if path in self.files:
            return path
        for ext in _JS_EXTENSIONS:
            if path + ext in self.files:
                return path + ext
        stem, ext = posixpath.splitext(path)
        for ts_ext in _JS_TO_TS.get(ext, ()):
            if stem + ts_ext in self.files:
                return stem + ts_ext
        index = posixpath.join(path, "index") if path else "index"
        for ext in _JS_EXTENSIONS:
            if index + ext in self.files:
                return index + ext
        return None

    def _tsconfig_for(self, rel: str) -> TsConfig | None:
        folder = posixpath.dirname(rel)
        while True:
            if folder in self.tsconfigs:
                return self.tsconfigs[folder]
            if not folder:
                return None
            folder = posixpath.dirname(folder)


def _match_pattern(pattern: str, spec: str) -> str | None:
    """The text matched by ``*`` in a tsconfig paths pattern ("" for an exact pattern), or None."""
    if "*" not in pattern:
        return "" if pattern == spec else None
    prefix, _, suffix = pattern.partition("*")
    if spec.startswith(prefix) and spec.endswith(suffix) and len(spec) >= len(prefix) + len(suffix):
        return spec[len(prefix) : len(spec) - len(suffix)]
    return None


def _python_module_map(files: set[str], root_name: str) -> dict[str, str]:
    """Dotted module name -> file, for every indexed Python file.

    The package-aware name (up the chain of ``__init__.py`` folders; a root that is itself a package is named
    after its folder) wins over the name by path from the root, which wins over the name by path from ``src/``.
    """
    packages = {
        posixpath.dirname(f) for f in files if posixpath.basename(f) in ("__init__.py", "__init__.pyi")
    }
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
        if package_parts:
            by_priority[0].setdefault(".".join(package_parts), rel)
        if parts:
            by_priority[1].setdefault(".".join(parts), rel)
        if len(parts) > 1 and parts[0] == "src":
            by_priority[2].setdefault(".".join(parts[1:]), rel)
    modules: dict[str, str] = {}
    for table in reversed(by_priority):
        modules.update(table)
    return modules
