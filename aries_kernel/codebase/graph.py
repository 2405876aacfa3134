"""The file graph: files are nodes of a ``rustworkx.PyDiGraph``; edges are typed ``import`` and ``reference``.

An ``import`` edge A -> B means A imports B (resolved by :mod:`.resolve`); its weight is 1.0, and
``type_only`` marks TypeScript imports that vanish at runtime. A ``reference`` edge A -> B means A uses names
that B defines at top level and A does not define itself (within one language family: Python, or
JavaScript/TypeScript). Each such name adds ``w / len(definers)`` where ``w``
is 1.0, or 0.3 for private (``_x``) and common names (builtins, generic words, one or two letters); names with
more than :data:`MAX_DEFINERS` definers say nothing about where they come from and are left out.

Every weight depends only on the file's own names and on who defines them, so :meth:`FileGraph.update` can
recompute just the files an edit touches and still produce exactly the graph a full build produces.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from aries_kernel.codebase.resolve import Resolver, TsConfig

if TYPE_CHECKING:
    import rustworkx

__all__ = ["MAX_DEFINERS", "FileGraph", "name_weight", "top_level_names"]

MAX_DEFINERS = 8
_LOW_WEIGHT = 0.3
_TOP_KINDS = frozenset(
    {"function", "class", "variable", "interface", "type", "enum", "struct", "trait", "constant", "macro"}
)
_COMMON = frozenset(dir(builtins)) | frozenset(
    [
        "self",
        "cls",
        "args",
        "kwargs",
        "data",
        "value",
        "values",
        "name",
        "names",
        "key",
        "keys",
        "item",
        "items",
        "result",
        "results",
        "get",
        "set",
        "run",
        "main",
        "init",
        "setup",
        "config",
        "options",
        "default",
        "index",
        "count",
        "size",
        "type",
        "types",
        "path",
        "file",
        "files",
        "text",
        "line",
        "lines",
        "node",
        "nodes",
        "obj",
        "data",
        "df",
        "test",
        "tests",
        "util",
        "utils",
        "helper",
        "helpers",
        "base",
        "error",
        "errors",
        "log",
        "logger",
        "module",
        "parent",
        "child",
        "children",
        "start",
        "end",
        "begin",
        "stop",
        "update",
        "create",
        "delete",
        "add",
        "remove",
        "load",
        "save",
        "read",
        "write",
        "open",
        "close",
        "call",
        "apply",
        "process",
        "handle",
        "handler",
        "callback",
        "fn",
        "func",
        "cb",
        "res",
        "req",
        "request",
        "response",
        "ctx",
        "context",
        "state",
        "props",
        "value",
        "id",
        "ids",
        "info",
        "export",
        "exports",
        "require",
        "default",
        "module",
    ]
)


def _family(language: str) -> str:
    """Languages whose files can use each other's names: JavaScript with TypeScript, every other one alone."""
    return "js" if language in ("javascript", "typescript", "tsx") else language


def name_weight(name: str) -> float:
    """How much one use of ``name`` says about a dependency: lower for private and common names."""
    if name.startswith("_") or name in _COMMON or len(name) <= 2:
        return _LOW_WEIGHT
    return 1.0


def top_level_names(symbols: Iterable[tuple[Any, ...]]) -> frozenset[str]:
    """Names a file defines at module level (functions, classes, variables, TS types), dunders excluded."""
    return frozenset(
        s[0]
        for s in symbols
        if s[5] == "" and s[1] in _TOP_KINDS and not (s[0].startswith("__") and s[0].endswith("__"))
    )


class FileGraph:
    """The graph plus the name tables that let it be updated file by file."""

    def __init__(self, root_name: str) -> None:
        import rustworkx

        self.root_name = root_name
        self.graph: rustworkx.PyDiGraph = rustworkx.PyDiGraph(multigraph=True)
        self.node_of: dict[str, int] = {}
        self.language: dict[str, str] = {}
        self.imports: dict[str, tuple[Any, ...]] = {}
        self.uses: dict[str, tuple[str, ...]] = {}
        self.defines: dict[str, frozenset[str]] = {}
        self.definers: dict[str, set[str]] = {}
        self._users: dict[str, set[str]] | None = None
        self.tsconfigs: dict[str, TsConfig] = {}
        self.resolver = Resolver((), root_name, {})
        # Bumped on every change; ranking caches compare against it.
        self.version = 0

    # building

    def build(self, records: Iterable[dict[str, Any]], tsconfigs: dict[str, TsConfig]) -> None:
        """Add every indexed record and compute all edges."""
        for record in records:
            self._add_file(record)
        self.tsconfigs = tsconfigs
        self.resolver = Resolver(self.node_of, self.root_name, tsconfigs)
        # A fresh graph has no edges to replace: add them all in one call, in the order updates would.
        self.graph.add_edges_from(
            [
                edge
                for rel in self.node_of
                for kind, targets in (
                    ("import", self._import_targets(rel)),
                    ("reference", self._reference_targets(rel)),
                )
                for edge in self._edges(rel, kind, targets)
            ]
        )
        self.version += 1

    def update(self, changed: dict[str, dict[str, Any] | None], tsconfigs: dict[str, TsConfig]) -> None:
        """Apply new records (None = file gone) and recompute exactly the edges they can affect."""
        users = self.users()
        affected_names: set[str] = set()
        file_set_changed = False
        for rel, record in sorted(changed.items()):
            # Other files' reference edges change only through names whose set of definers changes.
            before = self.defines.get(rel, frozenset())
            if rel in self.node_of and record is not None:
                # Same node, so edges into it from files this change does not touch stay as they are.
                self._forget_names(rel)
                self._learn_names(record)
            elif rel in self.node_of:
                self._remove_file(rel)
                file_set_changed = True
            elif record is not None:
                self._add_file(record)
                file_set_changed = True
            affected_names |= before ^ self.defines.get(rel, frozenset())
        sources = {rel for rel in changed if rel in self.node_of}
        for name in affected_names:
            sources |= users.get(name, set())
        if file_set_changed or tsconfigs != self.tsconfigs:
            self.tsconfigs = tsconfigs
            self.resolver = Resolver(self.node_of, self.root_name, tsconfigs)
            import_sources: Iterable[str] = list(self.node_of)
        else:
            import_sources = [rel for rel in changed if rel in self.node_of]
        for rel in import_sources:
            self._replace_edges(rel, "import", self._import_targets(rel))
        for rel in sorted(sources):
            if rel in self.node_of:
                self._replace_edges(rel, "reference", self._reference_targets(rel))
        self.version += 1

    def users(self) -> dict[str, set[str]]:
        """Name -> files that use it; built on the first incremental update, then kept current."""
        if self._users is None:
            users: dict[str, set[str]] = {}
            for rel, names in self.uses.items():
                for name in names:
                    users.setdefault(name, set()).add(rel)
            self._users = users
        return self._users

    def _add_file(self, record: dict[str, Any]) -> None:
        self.node_of[record["file"]] = self.graph.add_node(record["file"])
        self._learn_names(record)

    def _remove_file(self, rel: str) -> None:
        self.graph.remove_node(self.node_of.pop(rel))
        self._forget_names(rel)

    def _learn_names(self, record: dict[str, Any]) -> None:
        rel = record["file"]
        self.language[rel] = record["language"]
        self.imports[rel] = record["imports"]
        self.uses[rel] = record["uses"]
        names = top_level_names(record["symbols"])
        self.defines[rel] = names
        for name in names:
            self.definers.setdefault(name, set()).add(rel)
        if self._users is not None:
            for name in record["uses"]:
                self._users.setdefault(name, set()).add(rel)

    def _forget_names(self, rel: str) -> None:
        for name in self.defines.pop(rel):
            definers = self.definers[name]
            definers.discard(rel)
            if not definers:
                del self.definers[name]
        if self._users is not None:
            for name in self.uses[rel]:
                self._users[name].discard(rel)
        del self.language[rel], self.imports[rel], self.uses[rel]

    def _edges(
        self, rel: str, kind: str, targets: dict[str, tuple[float, bool]]
    ) -> list[tuple[int, int, tuple[str, float, bool]]]:
        node, node_of = self.node_of[rel], self.node_of
        return [(node, node_of[t], (kind, *targets[t])) for t in sorted(targets)]

    def _replace_edges(self, rel: str, kind: str, targets: dict[str, tuple[float, bool]]) -> None:
        graph = self.graph
        for index, (_, _, data) in list(graph.incident_edge_index_map(self.node_of[rel]).items()):
            if data[0] == kind:
                graph.remove_edge_from_index(index)
        graph.add_edges_from(self._edges(rel, kind, targets))

    def _import_targets(self, rel: str) -> dict[str, tuple[float, bool]]:
        resolved = self.resolver.resolve(rel, self.language[rel], self.imports[rel])
        return {t: (1.0, type_only) for t, type_only in resolved.items()}

    def _reference_targets(self, rel: str) -> dict[str, tuple[float, bool]]:
        own = self.defines[rel]
        definers = self.definers
        family = _family(self.language[rel])
        language = self.language
        weights: dict[str, float] = {}
        # Only names some file defines matter; the set intersection runs in C, sorting keeps sums reproducible.
        for name in sorted(definers.keys() & self.uses[rel]):
            if name in own:
                continue
            # A Python file naming `app` says nothing about a JavaScript file defining `app`.
            found = [t for t in definers[name] if _family(language[t]) == family]
            if not found or len(found) > MAX_DEFINERS:
                continue
            share = name_weight(name) / len(found)
            for target in found:
                weights[target] = weights.get(target, 0.0) + share
        return {t: (round(w, 6), False) for t, w in weights.items()}

    # reading

    def edge_rows(self) -> Iterator[tuple[str, str, str, float, bool]]:
        """``(source, target, kind, weight, type_only)`` for every edge."""
        graph = self.graph
        for source, target, data in graph.weighted_edge_list():
            yield graph[source], graph[target], data[0], data[1], data[2]
