"""The file graph: files are nodes of a ``rustworkx.PyDiGraph``; edges are typed ``import`` and ``reference``.

An ``import`` edge A -> B means A imports B (resolved by :mod:`.resolve`); its weight is 1.0, and
``type_only`` marks TypeScript imports that vanish at runtime. A ``reference`` edge A -> B means A uses names
that B defines at top level and A does not define itself (within one language family: Python, or
JavaScript/TypeScript). Each such name adds ``w / len(definers)`` where ``w``
is 1.0, or 0.3 for private (``_x``) and common names (builtins, generic words, one or two letters); names with
more than :data:`MAX_DEFINERS` definers say nothing about where they come from and are left out.

Every weight depends only on the file's own names and on who defines them, so :meth:`FileGraph.update` can
recompute just the files an edit touches and still produce exactly the graph a full build produces.

Kept compact for 20,000+ files and millions of edges: edges with equal ``(kind, weight, type_only)`` share one
payload tuple, and who uses which name is a :class:`Users` index (arrays) rather than a set per name.
:meth:`FileGraph.snapshot` and :meth:`FileGraph.from_snapshot` store and load the whole graph
(:mod:`.snapshot`), so a warm start resolves and weighs nothing.
"""

from __future__ import annotations

import builtins
import threading
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping, MutableMapping
from itertools import chain
from typing import TYPE_CHECKING, Any

import numpy as np

from aries_kernel.codebase.languages import family
from aries_kernel.codebase.lazy_mapping import LazyValues
from aries_kernel.codebase.notebooks import is_notebook
from aries_kernel.codebase.resolve import ImportConfig, Resolver
from aries_kernel.codebase.snapshot import Snapshot

if TYPE_CHECKING:
    import rustworkx

__all__ = ["MAX_DEFINERS", "FileGraph", "Users", "name_weight", "top_level_names"]

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


def _names(uses: Iterable[str]) -> set[str]:
    """Every distinct name of space-separated ``uses``."""
    names: set[str] = set()
    for text in uses:
        names.update(text.split())
    return names


def _holds(vocabulary: tuple[str, ...], groups: list[list[str]]) -> bool:
    """Whether the sorted ``vocabulary`` holds every name of ``groups``."""
    known = set(vocabulary)
    return all(known.issuperset(group) for group in groups)


def _family(language: str) -> str:
    """Languages whose files can use each other's names (see :func:`.languages.family`)."""
    return family(language)


def _definers_key(rel: str, language: str) -> str:
    """The table of definers a file's names join: its family's, but a notebook's own table, as no file can
    import a notebook (its definitions are the notebook's alone; the names it uses point at other files)."""
    return "notebook" if is_notebook(rel) else family(language)


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


class Users:
    """Name -> files that use it: a base of arrays (a sorted vocabulary, and per name the positions of its users
    in ``files``) plus the files whose uses changed since, as sets. A dict of sets would cost a set entry per use
    (millions at 20,000 files) and seconds to build."""

    def __init__(
        self, files: tuple[str, ...], vocabulary: tuple[str, ...], offsets: Any, members: Any
    ) -> None:
        self.files, self.vocabulary, self.offsets, self.members = files, vocabulary, offsets, members
        self.changed: set[str] = set()  # files whose base entries are stale: their uses are in _extra
        self._extra: dict[str, set[str]] = {}

    @classmethod
    def build(cls, uses: Mapping[str, str], vocabulary: tuple[str, ...] | None = None) -> Users:
        """The index of every file's uses (space-separated names), over ``vocabulary`` (sorted, holding every
        name used; default: just those)."""
        files = tuple(uses)
        if vocabulary is None:
            vocabulary = tuple(sorted(_names(uses.values())))
        position = dict(zip(vocabulary, range(len(vocabulary)), strict=True))
        # File by file, so the millions of names are never all split at once.
        per_file = [np.fromiter(map(position.__getitem__, u.split()), np.int32) for u in uses.values()]
        counts = np.fromiter(map(len, per_file), np.int64, len(files))
        ids = np.concatenate([np.zeros(0, np.int32), *per_file])
        del per_file, position
        owners = np.repeat(np.arange(len(files), dtype=np.uint32), counts)
        offsets = np.zeros(len(vocabulary) + 1, np.int64)
        np.cumsum(np.bincount(ids, minlength=len(vocabulary)), out=offsets[1:])
        return cls(files, vocabulary, offsets, owners[np.argsort(ids, kind="stable")])

    def of(self, name: str) -> set[str]:
        """The files that use ``name``."""
        found = set(self._extra.get(name, ()))
        k = bisect_left(self.vocabulary, name)
        if k < len(self.vocabulary) and self.vocabulary[k] == name:
            changed = self.changed
            members = self.members[self.offsets[k] : self.offsets[k + 1]].tolist()
            found.update(f for f in map(self.files.__getitem__, members) if f not in changed)
        return found

    def replace(self, rel: str, old: Iterable[str], new: Iterable[str]) -> None:
        """``rel`` now uses ``new`` (empty: removed) where it used ``old`` (empty: added)."""
        if rel in self.changed:
            for name in old:
                users = self._extra[name]
                users.discard(rel)
                if not users:
                    del self._extra[name]
        self.changed.add(rel)
        for name in new:
            self._extra.setdefault(name, set()).add(rel)

    def rebuilt(self, files: tuple[str, ...], uses: Mapping[str, str], names: Iterable[str]) -> Users | None:
        """The index of ``files`` (those before in the same order, some gone, new ones after) with the changed
        files' current ``uses``, over this vocabulary plus their names and ``names``: the arrays of the files
        that did not change are kept, the changed files' entries replaced (what :meth:`build` gives, over a
        vocabulary that may hold names no file uses any more). None when a file is neither here nor changed."""
        at = dict(zip(files, range(len(files)), strict=True))
        if not at.keys() <= set(self.files) | self.changed:
            return None
        changed = sorted(at[rel] for rel in self.changed if rel in at)
        fresh = {i: uses[files[i]].split() for i in changed}
        added = sorted(set(names).union(*fresh.values()).difference(self.vocabulary))
        vocabulary = tuple(sorted(chain(self.vocabulary, added))) if added else self.vocabulary
        # Each added name gets an empty run, before the old name it sorts before.
        points = np.fromiter((bisect_left(self.vocabulary, name) for name in added), np.int64, len(added))
        runs = np.insert(self.offsets, points, self.offsets[points])
        # The entries of the changed (and gone) files go; the others keep their order (by name, then file).
        if files == self.files:
            members = self.members
            drop = np.isin(members, np.asarray(changed, np.int64))
        else:
            old = np.fromiter(
                (-1 if rel in self.changed else at.get(rel, -1) for rel in self.files), np.int64, len(self.files)
            )
            members = old[self.members]
            drop = members < 0
        dropped = np.flatnonzero(drop)
        gone = np.searchsorted(self.offsets, dropped, side="right") - 1  # their old name ids, then the new ones
        gone += np.searchsorted(points, gone, side="right")
        counts = np.diff(runs) - np.bincount(gone, minlength=len(vocabulary))
        members = members[~drop] if len(dropped) else members
        starts = np.zeros(len(vocabulary) + 1, np.int64)
        np.cumsum(counts, out=starts[1:])
        # The changed files' entries, each put where its name's run has the files before it.
        pairs = sorted((bisect_left(vocabulary, name), i) for i in changed for name in fresh[i])
        at_run = [
            int(starts[k]) + int(np.searchsorted(members[starts[k] : starts[k + 1]], i)) for k, i in pairs
        ]
        members = np.insert(members, np.asarray(at_run, np.int64), np.asarray([i for _, i in pairs], np.int64))
        counts += np.bincount(np.asarray([k for k, _ in pairs], np.int64), minlength=len(vocabulary))
        offsets = np.zeros(len(vocabulary) + 1, np.int64)
        np.cumsum(counts, out=offsets[1:])
        return Users(files, vocabulary, offsets, members.astype(np.uint32, copy=False))


_UNREAD = object()


class _FromRecords(LazyValues[Any]):
    """One field (``imports`` or ``uses``) of each file of a loaded graph, in node order, read from the file's
    record when first asked for, or empty when the record no longer has the hash the graph was stored with
    (changed since: :meth:`FileGraph.update` gives its record)."""

    def __init__(
        self,
        field: str,
        empty: Any,
        records: Mapping[str, dict[str, Any]],
        files: tuple[str, ...],
        hashes: tuple[str, ...],
    ) -> None:
        self._field, self._empty, self._records = field, empty, records
        self._data = dict.fromkeys(files, _UNREAD)
        self._hashes = dict(zip(files, hashes, strict=True))

    def __getitem__(self, rel: str) -> Any:
        value = self._data[rel]
        if value is _UNREAD:
            record = self._records.get(rel)
            found = record is not None and record["hash"] == self._hashes[rel]
            value = self._data[rel] = record[self._field] if found else self._empty  # type: ignore[index]
        return value

    def values(self) -> Any:
        """Every file's value (the records not read yet read first, in one pass)."""
        self.read(list(self._data))
        return [self[rel] for rel in list(self._data)]

    def read(self, rels: Iterable[str]) -> None:
        """Read the records of those of ``rels`` not read yet in one pass, when the records can (not one
        query per file)."""
        load = getattr(self._records, "load", None)
        if load is not None:
            load([rel for rel in rels if self._data.get(rel) is _UNREAD])


class FileGraph:
    """The graph plus the name tables that let it be updated file by file."""

    def __init__(self, root_name: str) -> None:
        import rustworkx

        self.root_name = root_name
        self._graph: rustworkx.PyDiGraph = rustworkx.PyDiGraph(multigraph=True)
        # A loaded graph's edges, added to the rustworkx graph on first use (see the graph property).
        self._stored_edges: tuple[dict[str, np.ndarray], np.ndarray] | None = None
        self._edges_lock = threading.Lock()
        self.node_of: dict[str, int] = {}
        self.language: dict[str, str] = {}
        self.imports: MutableMapping[str, tuple[Any, ...]] = {}
        self.uses: MutableMapping[str, str] = {}  # space-separated, as in the records
        self.defines: dict[str, frozenset[str]] = {}
        # Language family -> name -> files of that family defining it at top level.
        self.definers: dict[str, dict[str, set[str]]] = {}
        self._users: Users | None = None
        self._payloads: dict[tuple[str, float, bool], tuple[str, float, bool]] = {}
        self._pending: tuple[Snapshot, Mapping[str, dict[str, Any]]] | None = None  # see complete()
        self.tsconfigs: dict[str, ImportConfig] = {}
        self.resolver = Resolver((), root_name, {})
        # Bumped on every change; ranking caches compare against it.
        self.version = 0

    # building

    def build(self, records: Iterable[dict[str, Any]], tsconfigs: dict[str, ImportConfig]) -> None:
        """Add every indexed record and compute all edges."""
        for record in records:
            self._add_file(record)
        self.tsconfigs = tsconfigs
        self.resolver = Resolver(self.node_of, self.root_name, tsconfigs)
        # A fresh graph has no edges to replace: add them file by file (not one list of millions of tuples),
        # in the order updates would.
        add = self.graph.add_edges_from
        for rel in self.node_of:
            add(self._edges(rel, "import", self._import_targets(rel)))
            add(self._edges(rel, "reference", self._reference_targets(rel)))
        self.version += 1

    def snapshot(self, key: str, hashes: dict[str, str], statuses: dict[str, str]) -> Snapshot:
        """The graph as stored; ``hashes`` and ``statuses`` are its files' record hashes and statuses, ``key``
        what else its edges depend on."""
        self.complete()
        graph = self.graph
        files = tuple(self.node_of)
        position = np.zeros(max(self.node_of.values(), default=-1) + 1, np.uint32)
        position[np.fromiter(self.node_of.values(), np.int64, len(files))] = np.arange(
            len(files), dtype=np.uint32
        )
        ends = np.asarray(graph.edge_list(), dtype=np.uint32).reshape(-1, 2)
        ids = {id(p): i for i, p in enumerate(self._payloads.values())}
        defines = [sorted(self.defines[rel]) for rel in files]
        users = self._users
        if users is not None and (users.files != files or users.changed):
            # Only the changed files' uses are new: merged into the arrays, not every file's split again.
            users = self._users = users.rebuilt(
                files,
                self.uses,
                chain.from_iterable(defines[i] for i, rel in enumerate(files) if rel in users.changed),
            )
        if users is None or users.files != files or users.changed or not _holds(users.vocabulary, defines):
            vocabulary = tuple(sorted(_names(self.uses.values()).union(*defines)))
            users = self._users = Users.build(self.uses, vocabulary)
        position_of = dict(zip(users.vocabulary, range(len(users.vocabulary)), strict=True))
        counts = np.fromiter(map(len, defines), np.int64, len(files))
        defined_at = np.zeros(len(files) + 1, np.int64)
        np.cumsum(counts, out=defined_at[1:])
        return Snapshot(
            key,
            files,
            tuple(hashes[rel] for rel in files),
            tuple(statuses[rel] for rel in files),
            tuple(self.language[rel] for rel in files),
            tuple(self._payloads),
            users.vocabulary,
            {
                "source": position[ends[:, 0]],
                "target": position[ends[:, 1]],
                "payload": np.fromiter(map(ids.__getitem__, map(id, graph.edges())), np.uint32, len(ends)),
                "offsets": users.offsets,
                "members": users.members,
                "defined_at": defined_at,
                "defined": np.fromiter(
                    map(position_of.__getitem__, chain.from_iterable(defines)), np.uint32, int(defined_at[-1])
                ),
            },
        )

    @classmethod
    def from_snapshot(
        cls,
        root_name: str,
        snapshot: Snapshot,
        records: Mapping[str, dict[str, Any]],
        tsconfigs: dict[str, ImportConfig],
    ) -> FileGraph:
        """The graph ``snapshot`` holds, ready to read. The name tables that only :meth:`update` needs are
        built by :meth:`complete` (called by it, or earlier by whoever has the time): files' imports and uses
        from ``records`` where the hashes match, empty for the others (changed or gone since) until
        :meth:`update` gives their records, which it can, as their top-level names and uses are in the
        snapshot."""
        self = cls(root_name)
        arrays = snapshot.arrays
        self.language = dict(zip(snapshot.files, snapshot.languages, strict=True))
        self.node_of = dict(
            zip(snapshot.files, self._graph.add_nodes_from(list(snapshot.files)), strict=True)
        )
        self.tsconfigs = tsconfigs
        self._pending = (snapshot, records)
        payloads = np.empty(len(snapshot.payloads), dtype=object)
        payloads[:] = [self._payload(p) for p in snapshot.payloads]
        self._stored_edges = (arrays, payloads)
        self.version += 1
        return self

    @property
    def graph(self) -> rustworkx.PyDiGraph:
        """The rustworkx graph; a loaded graph's edges are added to it on first use (or by whoever has the time
        first, see :meth:`Codebase._index_safely`), so a warm start is ready before they are in."""
        if self._stored_edges is not None:
            self.load_edges()
        return self._graph

    def edge_count(self) -> int:
        """How many edges the graph has, without adding the stored ones."""
        stored = self._stored_edges
        return self._graph.num_edges() if stored is None else len(stored[0]["source"])

    def load_edges(self) -> None:
        """Add the stored edges of a loaded graph to the rustworkx graph (at once if already added)."""
        with self._edges_lock:
            if self._stored_edges is None:  # another thread added them meanwhile
                return
            arrays, payloads = self._stored_edges
            step = (
                1 << 18
            )  # bounded batches: one list of 2 million edge tuples would cost hundreds of MB at once
            for start in range(0, len(arrays["source"]), step):
                part = slice(start, start + step)
                # The payloads gathered by numpy and the edges added without returning their indexes: the
                # quickest way in, as rustworkx takes no arrays.
                self._graph.extend_from_weighted_edge_list(
                    list(
                        zip(
                            arrays["source"][part].tolist(),
                            arrays["target"][part].tolist(),
                            payloads[arrays["payload"][part]].tolist(),
                            strict=True,
                        )
                    )
                )
            self._stored_edges = None

    def complete(self) -> None:
        """Build the name tables and the resolver a graph loaded by :meth:`from_snapshot` left for later. The
        files' imports and uses are read from their records when first asked for (:class:`_FromRecords`): an
        update that touches a few files reads a few records, not all of them."""
        if self._pending is None:
            return
        snapshot, records = self._pending
        vocabulary, arrays = snapshot.vocabulary, snapshot.arrays
        self.imports = _FromRecords("imports", (), records, snapshot.files, snapshot.hashes)
        self.uses = _FromRecords("uses", "", records, snapshot.files, snapshot.hashes)
        names = arrays["defined"].tolist()
        cuts = arrays["defined_at"].tolist()
        for i, rel in enumerate(snapshot.files):
            defines = self.defines[rel] = frozenset(map(vocabulary.__getitem__, names[cuts[i] : cuts[i + 1]]))
            definers = self.definers.setdefault(_definers_key(rel, self.language[rel]), {})
            for name in defines:
                definers.setdefault(name, set()).add(rel)
        self.resolver = Resolver(self.node_of, self.root_name, self.tsconfigs)
        # Copies, so the blob the arrays view (tens of MB) is freed.
        self._users = Users(snapshot.files, vocabulary, arrays["offsets"].copy(), arrays["members"].copy())
        self._pending = None

    def update(self, changed: dict[str, dict[str, Any] | None], tsconfigs: dict[str, ImportConfig]) -> None:
        """Apply new records (None = file gone) and recompute exactly the edges they can affect."""
        self.complete()
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
            sources |= users.of(name)
        if file_set_changed or tsconfigs != self.tsconfigs:
            self.tsconfigs = tsconfigs
            self.resolver = Resolver(self.node_of, self.root_name, tsconfigs)
            import_sources: Iterable[str] = list(self.node_of)
        else:
            import_sources = [rel for rel in changed if rel in self.node_of]
        for table, rels in ((self.imports, import_sources), (self.uses, sources)):
            if isinstance(table, _FromRecords):  # the records these edges are computed from, in one pass
                table.read(rels)
        for rel in import_sources:
            self._replace_edges(rel, "import", self._import_targets(rel))
        for rel in sorted(sources):
            if rel in self.node_of:
                self._replace_edges(rel, "reference", self._reference_targets(rel))
        self.version += 1

    def users(self) -> Users:
        """Who uses which name; built on the first incremental update (or loaded), then kept current."""
        self.complete()
        if self._users is None:
            self._users = Users.build(self.uses)
        return self._users

    def _add_file(self, record: dict[str, Any]) -> None:
        self.node_of[record["file"]] = self.graph.add_node(record["file"])
        self._learn_names(record)

    def _remove_file(self, rel: str) -> None:
        self.graph.remove_node(self.node_of.pop(rel))
        self._forget_names(rel, removed=True)

    def _learn_names(self, record: dict[str, Any]) -> None:
        rel = record["file"]
        self.language[rel] = record["language"]
        self.imports[rel] = record["imports"]
        old = self.uses.get(rel, "")
        self.uses[rel] = record["uses"]
        names = top_level_names(record["symbols"])
        self.defines[rel] = names
        definers = self.definers.setdefault(_definers_key(rel, record["language"]), {})
        for name in names:
            definers.setdefault(name, set()).add(rel)
        if self._users is not None:
            self._users.replace(rel, old.split(), record["uses"].split())

    def _forget_names(self, rel: str, removed: bool = False) -> None:
        """Drop ``rel``'s names; ``removed``: the file is gone (else its new record is learned next)."""
        definers = self.definers[_definers_key(rel, self.language[rel])]
        for name in self.defines.pop(rel):
            found = definers[name]
            found.discard(rel)
            if not found:
                del definers[name]
        if removed:
            if self._users is not None:
                self._users.replace(rel, self.uses[rel].split(), ())
            del self.uses[rel]
        del self.language[rel], self.imports[rel]

    def _edges(
        self, rel: str, kind: str, targets: dict[str, tuple[float, bool]]
    ) -> list[tuple[int, int, tuple[str, float, bool]]]:
        node, node_of, payload = self.node_of[rel], self.node_of, self._payload
        return [(node, node_of[t], payload((kind, *targets[t]))) for t in sorted(targets)]

    def _payload(self, data: tuple[str, float, bool]) -> tuple[str, float, bool]:
        """The one shared tuple for this edge data (a few thousand distinct ones for millions of edges)."""
        return self._payloads.setdefault(data, data)

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
        # A Python file naming `app` says nothing about a JavaScript file defining `app`.
        definers = self.definers.get(_family(self.language[rel]), {})
        weights: dict[str, float] = {}
        # Only names some file defines matter; the set intersection runs in C, sorting keeps sums reproducible.
        for name in sorted(definers.keys() & self.uses[rel].split()):
            if name in own:
                continue
            found = definers[name]
            if len(found) > MAX_DEFINERS:
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
