"""The structural operations of ``codebase``: search, ranking, communities, symbols, traversal, listings.

Each returns a pandas DataFrame sorted by its score column (or a numbered source slice for ``get_context``).
They are mixed into :class:`~aries_kernel.codebase.core.Codebase`, which supplies the index.

Every file has a role (source, test, example, fixture, generated; see :mod:`aries_kernel.codebase.roles`), shown
as the ``role`` column of ``list_files()``, ``top_files()``, ``hits()`` and ``search()``. The three rankings take
``roles="source"`` by default, so the product comes first; ``roles="all"``, one role, or a list shows the rest.
Scores (PageRank, HITS) are always computed over the whole graph: a test that imports a module still counts.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aries_kernel.codebase.definitions import SYMBOL_COLUMNS
from aries_kernel.codebase.errors import CodebaseError
from aries_kernel.codebase.notebooks import CellSpan, NotebookSource, cell_label, is_notebook
from aries_kernel.codebase.roles import file_role, read_header, select_roles

if TYPE_CHECKING:
    import pandas as pd

    from aries_kernel.codebase.definitions import Definitions
    from aries_kernel.codebase.files import Problem
    from aries_kernel.codebase.graph import FileGraph
    from aries_kernel.codebase.ranking import Rankings
    from aries_kernel.codebase.store import Records

__all__ = ["EDGE_KINDS", "QueryMixin", "SourceSlice"]

EDGE_KINDS = ("import", "reference")
_SNIPPET = 160
_MAX_CONTENT_HITS_PER_FILE = 20
_WORD = re.compile(r"[A-Za-z0-9_$]+")
# How much a file's PageRank lifts a search score: less than the gap between two match tiers, so centrality only
# orders matches of the same kind and a definition named like the query always beats a mere mention.
_RANK_LIFT = 0.9
# Files that stand for their folder's module: ``pkg/__init__.py`` defines ``pkg``.
_PACKAGE_FILES = frozenset({"__init__", "index", "mod"})


class SourceSlice(str):
    """Numbered source lines; a plain ``str`` that shows as text (not a quoted repr) as a cell result."""

    def __repr__(self) -> str:
        return str(self)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))


class QueryMixin:
    """Operations over the index; see SPEC section 3.1 for the table of names and columns."""

    _graph: FileGraph
    _records: Records
    _rankings: Rankings
    _problems: list[Problem]
    last_run: dict[str, Any]
    _lock: Any
    root: Path

    if TYPE_CHECKING:

        def wait_ready(self, timeout: float | None = None) -> None: ...
        def _table(self, key: str, build: Any) -> Any: ...
        def _table_at_hand(self, key: str) -> Any: ...
        def _counts(self) -> dict[str, tuple[int, int]]: ...
        def _file(self, file: Any) -> str: ...
        def source(self, file: Any, typed: bool = False) -> str: ...
        def _definitions(self) -> Definitions: ...

    # ranking

    def file_roles(self) -> dict[str, str]:
        """File -> role (source, test, example, fixture, generated) for every indexed file."""
        self.wait_ready()
        return dict(self._roles())

    def _roles(self) -> dict[str, str]:
        """:meth:`file_roles` of the index as it is (the communities split by it), cached; not to be changed."""

        def build() -> dict[str, str]:
            return {
                rel: _role_of(self.root, rel) for rel, r in self._records.scan() if r["status"] != "skipped"
            }

        with self._lock:
            return self._table("roles", build)  # type: ignore[no-any-return]

    def top_files(self, limit: int | None = 20, roles: str | Iterable[str] = "source") -> pd.DataFrame:
        """Files by PageRank over the weighted graph: file, role, pagerank, in_degree, out_degree, symbols, loc.

        ``roles`` picks the files listed: ``"source"`` (default), ``"all"``, one role or a list of roles.
        """
        import pandas as pd

        wanted = select_roles(roles)
        self.wait_ready()
        cut = limit if limit is not None and limit >= 0 else None  # None: (nearly) every file is listed
        if cut is None:
            self._roles()  # every role is needed: built, and then kept
        with self._lock:
            ranks = self._rankings.pagerank()
            g = self._graph.graph
            # In rank order, so that only the files down to the last one shown have their role found (a
            # file's header is read for it when the roles are not at hand) and their record read.
            known: dict[str, str] = self._table_at_hand("roles") or {}
            order = sorted(self._graph.node_of.items(), key=lambda item: (-ranks.get(item[0], 0.0), item[0]))
            rows: list[tuple[str, str, float, int, int, int, int]] = []
            for rel, node in order:
                if cut is not None and len(rows) >= cut:
                    break
                role = known.get(rel) or _role_of(self.root, rel)
                if role not in wanted:
                    continue
                record = self._records[rel]
                rows.append(
                    (
                        rel,
                        role,
                        ranks.get(rel, 0.0),
                        g.in_degree(node),
                        g.out_degree(node),
                        len(record["symbols"]),
                        record["loc"],
                    )
                )
        frame = pd.DataFrame(
            rows, columns=["file", "role", "pagerank", "in_degree", "out_degree", "symbols", "loc"]
        )
        return _top(frame, ["pagerank", "file"], [False, True], limit)

    def hits(self, limit: int | None = 20, roles: str | Iterable[str] = "source") -> pd.DataFrame:
        """Hub and authority score per file: file, role, hub, authority, hits_role, score.

        ``hits_role`` (hub, authority, both) comes from the larger normalized score; ``roles`` picks the files
        listed, as for :meth:`top_files`.
        """
        import pandas as pd

        wanted = select_roles(roles)
        role_of = self.file_roles()
        with self._lock:
            hubs, authorities = self._rankings.hits()
        frame = pd.DataFrame(
            [(rel, role_of[rel], hubs[rel], authorities.get(rel, 0.0)) for rel in hubs],
            columns=["file", "role", "hub", "authority"],
        )
        # Normalized over the whole graph, so a file's hub/authority call does not depend on the roles shown.
        hub_n = frame["hub"] / (frame["hub"].max() or 1.0)
        auth_n = frame["authority"] / (frame["authority"].max() or 1.0)
        frame["hits_role"] = "both"
        frame.loc[hub_n > 2 * auth_n, "hits_role"] = "hub"
        frame.loc[auth_n > 2 * hub_n, "hits_role"] = "authority"
        frame["score"] = pd.concat([hub_n, auth_n], axis=1).max(axis=1)
        frame = frame[frame["role"].isin(wanted)]
        return _top(frame, ["score", "file"], [False, True], limit)

    def communities(self, roles: str | Iterable[str] = "source") -> pd.DataFrame:
        """One row per file: its role, community id, readable label, community size and the file's PageRank.

        ``roles`` picks the files listed, as for :meth:`top_files`: ``"source"`` (default), ``"all"``, one role
        or a list. Source files form communities among themselves, and the other files among themselves, so
        source communities come first (lowest ids) and none holds a test or fixture.
        """
        import pandas as pd

        wanted = select_roles(roles)
        self.wait_ready()
        with self._lock:
            role_of = self._roles()
            members = self._rankings.communities()
            ranks = self._rankings.pagerank()
        frame = pd.DataFrame(
            [
                (rel, role_of[rel], cid, label, ranks.get(rel, 0.0))
                for rel, (cid, label) in members.items()
                if role_of[rel] in wanted
            ],
            columns=["file", "role", "community", "label", "pagerank"],
        )
        frame.insert(4, "size", frame.groupby("community")["file"].transform("count").astype(int))
        return _top(frame, ["community", "pagerank", "file"], [True, False, True], None)

    # symbols and search

    def find_symbol(self, name: str) -> pd.DataFrame:
        """Definitions of ``name`` (``Class.method`` allowed): exact matches, else case-insensitive, else substring.

        Columns: name, kind, file, line, end_line, signature, parent, cell, cell_id, score. In a notebook,
        ``line`` counts the lines of its code cells as one text (as ``get_context`` numbers them) and ``cell`` is
        the cell's index among all its cells (markdown included), ``cell_id`` its id ("" before nbformat 4.5);
        for other files ``cell`` is empty (<NA>) and ``cell_id`` "".
        """
        import numpy as np
        import pandas as pd

        definitions = self._definitions()
        parent, _, short = name.rpartition(".")
        low = short.lower()
        in_parent = definitions.parent == parent if parent else None
        tests = [
            (lambda n: n == short, 1.0),
            (lambda n: n.lower() == low, 0.8),
            (lambda n: low in n.lower(), 0.5),
        ]
        rows, score = np.empty(0, dtype=np.int64), 0.0
        for test, weight in tests:
            rows = np.flatnonzero(definitions.named(test, among=in_parent))
            if len(rows):
                score = weight
                break
        found = definitions.frame(rows, [*SYMBOL_COLUMNS[:6], "parent"])
        with self._lock:
            spans = {file: self._cells(file) for file in set(found["file"])}
            cells = [
                notebook.cell_at(line) if (notebook := spans[file]) is not None else None
                for file, line in zip(found["file"], found["line"], strict=True)
            ]
        found = found.assign(
            cell=pd.array([c.index if c else None for c in cells], dtype="Int64"),
            cell_id=[c.cell_id if c else "" for c in cells],
            score=score,
            pagerank=found["file"].map(self._rankings.pagerank()),
        )
        columns = [*SYMBOL_COLUMNS[:6], "parent", "cell", "cell_id", "score"]
        return _top(found, ["score", "pagerank", "file", "line"], [False, False, True, True], None)[columns]

    def search(
        self, query: str, limit: int | None = 20, roles: str | Iterable[str] = "source"
    ) -> pd.DataFrame:
        """Ranked matches over definitions and file content: file, role, line, kind, name, snippet, score.

        Definitions (symbols, and modules: ``kernel.py`` or ``kernel/__init__.py`` defines ``kernel``; a notebook
        ``sales.ipynb`` is ``sales`` of kind "notebook") named exactly like the query score highest, then prefix,
        substring and shared word tokens; then content lines that contain the whole query, then lines that
        contain all its words. Any definition whose name matches
        ranks above every mere mention; the file's PageRank orders matches within a tier. ``roles`` picks the
        files searched, as for :meth:`top_files`.
        """
        import numpy as np
        import pandas as pd

        needle = query.strip().lower()
        if not needle:
            raise ValueError("search() needs a non-empty query.")
        wanted = select_roles(roles)
        role_of = self.file_roles()
        words = [w.lower() for w in _WORD.findall(query)]
        hits: dict[tuple[str, int], tuple[str, str, str, float]] = {}

        def keep(file: str, line: int, kind: str, name: str, snippet: str, score: float) -> None:
            old = hits.get((file, line))
            if old is None or old[3] < score:
                hits[(file, line)] = (kind, name, snippet, score)

        definitions = self._definitions()
        named = {n: score for n in set(definitions.name) if (score := _name_score(n.lower(), needle, words))}
        shown = np.flatnonzero(
            definitions.isin("name", named)
            & definitions.isin("file", [rel for rel, role in role_of.items() if role in wanted])
        )
        matches = definitions.frame(shown, ["file", "line", "kind", "name", "signature"])
        for row in matches.itertuples(index=False):
            keep(row.file, row.line, row.kind, row.name, row.signature[:_SNIPPET], named[row.name])
        with self._lock:
            files = [rel for rel in self._graph.node_of if role_of[rel] in wanted]
            ranks = self._rankings.pagerank()
        for rel in files:
            module = _module_name(rel)
            score = _name_score(module.lower(), needle, words)
            if score:  # keyed at line 0 so that a definition on line 1 does not hide it; shown as line 1
                keep(rel, 0, "notebook" if is_notebook(rel) else "module", module, rel, score)
            try:
                text = self.source(rel)
            except CodebaseError:  # a file that vanished or changed since indexing: reindex will sort it out
                continue
            for line, snippet, score in _content_hits(text, needle, words):
                keep(rel, line, "content", "", snippet, score)
        top_rank = max(ranks.values(), default=0.0) or 1.0
        rows = [
            (
                file,
                role_of[file],
                max(line, 1),
                kind,
                name,
                snippet,
                round(score + _RANK_LIFT * ranks.get(file, 0.0) / top_rank, 4),
            )
            for (file, line), (kind, name, snippet, score) in hits.items()
        ]
        frame = pd.DataFrame(rows, columns=["file", "role", "line", "kind", "name", "snippet", "score"])
        return _top(frame, ["score", "file", "line"], [False, True, True], limit)

    def cluster_by_file(self, matches: pd.DataFrame) -> pd.DataFrame:
        """Group search results by file: file, matches, lines, names, score (sum), best snippet."""
        import pandas as pd

        if "file" not in matches or "line" not in matches:
            raise ValueError(
                "cluster_by_file() takes a DataFrame with file and line columns, e.g. search(...)."
            )
        scored = matches.assign(score=matches.get("score", 1.0))
        rows = []
        for file, group in scored.groupby("file", sort=False):
            best = group.sort_values("score", ascending=False).iloc[0]
            names = sorted({n for n in group.get("name", pd.Series(dtype=str)) if isinstance(n, str) and n})
            rows.append(
                (
                    file,
                    len(group),
                    sorted(int(x) for x in group["line"]),
                    names,
                    float(group["score"].sum()),
                    str(best.get("snippet", "")),
                )
            )
        frame = pd.DataFrame(rows, columns=["file", "matches", "lines", "names", "score", "snippet"])
        return _top(frame, ["score", "file"], [False, True], None)

    # graph

    def edges(self, kind: str | None = None) -> pd.DataFrame:
        """The graph as a DataFrame: source, target, kind, weight, type_only (TypeScript type-only imports)."""
        import pandas as pd

        if kind is not None and kind not in EDGE_KINDS:
            raise ValueError(f"Unknown edge kind {kind!r}; use one of {EDGE_KINDS} or None for all.")
        self.wait_ready()
        with self._lock:
            rows = [row for row in self._graph.edge_rows() if kind is None or row[2] == kind]
        frame = pd.DataFrame(rows, columns=["source", "target", "kind", "weight", "type_only"])
        return _top(frame, ["weight", "source", "target", "kind"], [False, True, True, True], None)

    def show_dependents(self, file: Any, depth: int = 1) -> pd.DataFrame:
        """Files that depend on ``file`` (reverse edges), up to ``depth`` steps: file, distance, kinds, weight, via."""
        return self._traverse(file, depth, reverse=True)

    def show_dependencies(self, file: Any, depth: int = 1) -> pd.DataFrame:
        """Files ``file`` depends on (forward edges), up to ``depth`` steps: file, distance, kinds, weight, via."""
        return self._traverse(file, depth, reverse=False)

    def _traverse(self, file: Any, depth: int, reverse: bool) -> pd.DataFrame:
        import pandas as pd

        if depth < 1:
            raise ValueError(f"depth must be at least 1, not {depth}.")
        self.wait_ready()
        with self._lock:
            start = self._file(file)
            g = self._graph.graph
            seen = {start}
            frontier = [start]
            rows = []
            for distance in range(1, depth + 1):
                reached: dict[str, tuple[set[str], float, str]] = {}
                for rel in frontier:
                    node = self._graph.node_of[rel]
                    edge_list = g.in_edges(node) if reverse else g.out_edges(node)
                    for source, target, data in edge_list:
                        other = g[source] if reverse else g[target]
                        if other in seen:
                            continue
                        kinds, weight, via = reached.get(other, (set(), 0.0, rel))
                        kinds.add(data[0])
                        reached[other] = (kinds, weight + data[1], via)
                for other, (kinds, weight, via) in reached.items():
                    rows.append((other, distance, ", ".join(sorted(kinds)), round(weight, 6), via))
                seen |= reached.keys()
                frontier = sorted(reached)
                if not frontier:
                    break
        frame = pd.DataFrame(rows, columns=["file", "distance", "kinds", "weight", "via"])
        return _top(frame, ["distance", "weight", "file"], [True, False, True], None)

    # source

    def get_context(
        self, file: Any, lines: int | Iterable[int] | None = None, window: int = 5
    ) -> SourceSlice:
        """Numbered source of ``file``: around ``lines`` (one or many, ``window`` lines each side, nearby ranges
        merged, gaps shown as ``...``), or the whole file when ``lines`` is None. A notebook shows its code
        cells as typed, numbered as one text (as ``find_symbol`` gives lines), each under ``# cell N (id ...)``."""
        self.wait_ready()
        with self._lock:
            rel = self._file(file)
        text_lines = self.source(rel, typed=True).splitlines()
        count = len(text_lines)
        if lines is None:
            ranges = [(1, count)]
        else:
            wanted = sorted({int(lines)} if isinstance(lines, int) else {int(n) for n in lines})
            outside = [n for n in wanted if not 1 <= n <= max(count, 1)]
            if outside:
                raise ValueError(f"{rel} has {count} lines; line {outside[0]} is outside it.")
            ranges = []
            for n in wanted:
                lo, hi = max(1, n - window), min(count, n + window)
                if ranges and lo <= ranges[-1][1] + 1:
                    ranges[-1] = (ranges[-1][0], max(ranges[-1][1], hi))
                else:
                    ranges.append((lo, hi))
        width = len(str(count))
        with self._lock:
            spans = self._cells(rel)
        parts = []
        for lo, hi in ranges:
            shown = []
            for n in range(lo, hi + 1):
                cell = spans.cell_at(n) if spans is not None else None
                if cell is not None and (cell.first_line == n or n == lo):  # a notebook: a marker per cell
                    shown.append(f"{'':>{width}} # cell {cell_label(cell)}")
                shown.append(f"{n:>{width}} | {text_lines[n - 1]}")
            parts.append("\n".join(shown))
        return SourceSlice(f"{rel}\n" + "\n...\n".join(parts))

    def _cells(self, rel: str) -> NotebookSource | None:
        """Where the code cells of the notebook ``rel`` are in its text (no text), None for other files."""
        record = self._records.get(rel) if is_notebook(rel) else None
        cells = record.get("cells") if record is not None else None
        return NotebookSource("", tuple(CellSpan(*c) for c in cells), "python") if cells else None

    # listings

    def list_files(self, roles: str | Iterable[str] = "all") -> pd.DataFrame:
        """Indexed files: file, role, language, loc, symbols, status (indexed, or partial after syntax errors).

        A listing, not a ranking: every role by default; ``roles`` narrows it as for :meth:`top_files`.
        """
        import pandas as pd

        wanted = select_roles(roles)
        role_of = self.file_roles()
        with self._lock:
            rows = [
                (rel, role_of[rel], r["language"], r["loc"], len(r["symbols"]), r["status"])
                for rel, r in self._records.scan()
                if r["status"] != "skipped" and role_of[rel] in wanted
            ]
        return pd.DataFrame(rows, columns=["file", "role", "language", "loc", "symbols", "status"])

    def skipped(self) -> pd.DataFrame:
        """Every file skipped (binary, not UTF-8, too large, unreadable, symlink loop...) or only partly indexed."""
        import pandas as pd

        self.wait_ready()
        with self._lock:
            rows = [
                (rel, r["status"], r["reason"]) for rel, r in self._records.scan() if r["status"] != "indexed"
            ]
            rows += [(p.rel, "skipped", p.reason) for p in self._problems]
        return pd.DataFrame(sorted(rows), columns=["file", "status", "reason"])

    def stats(self) -> pd.DataFrame:
        """Counts (files, per language, symbols, edges by kind, skipped, partial) and index timings: metric, value."""
        import pandas as pd

        self.wait_ready()
        counts = self._counts()
        with self._lock:
            graph, records = self._graph, self._records
            edge_kinds: dict[str, int] = dict.fromkeys(EDGE_KINDS, 0)
            for _, _, data in graph.graph.weighted_edge_list():
                edge_kinds[data[0]] += 1
            languages: dict[str, int] = {}
            for rel in counts:
                languages[graph.language[rel]] = languages.get(graph.language[rel], 0) + 1
            rows: list[tuple[str, Any]] = [
                ("files", len(counts)),
                *((f"files ({language})", n) for language, n in sorted(languages.items())),
                ("symbols", sum(symbols for symbols, _ in counts.values())),
                ("loc", sum(loc for _, loc in counts.values())),
                *((f"edges ({kind})", n) for kind, n in edge_kinds.items()),
                ("skipped", len(records) - len(counts) + len(self._problems)),  # the graph holds the rest
                ("partly indexed", sum(1 for rel in counts if records.status(rel) == "partial")),
                ("index mode", self.last_run.get("mode", "")),
                ("index seconds", round(float(self.last_run.get("seconds", 0.0)), 3)),
                ("files parsed", self.last_run.get("parsed", 0)),
                ("files from index.db", self.last_run.get("reused", 0)),
            ]
        return pd.DataFrame(rows, columns=["metric", "value"])


def _top(frame: pd.DataFrame, by: list[str], ascending: list[bool], limit: int | None) -> pd.DataFrame:
    frame = frame.sort_values(by, ascending=ascending, kind="stable").reset_index(drop=True)
    return frame.head(limit).reset_index(drop=True) if limit is not None else frame


def _role_of(root: Path, rel: str) -> str:
    role = file_role(rel)
    # Only a file the path calls fixture cannot change role by its header (see roles.py for the order).
    return role if role == "fixture" else file_role(rel, read_header(root, rel))


def _module_name(rel: str) -> str:
    """The module a file defines: its name without extension, or its folder's for ``__init__.py``/``index.js``."""
    folder, name = posixpath.split(rel)
    stem = name.split(".", 1)[0]
    if stem in _PACKAGE_FILES and folder:
        return posixpath.basename(folder)
    return stem


def _name_score(name: str, needle: str, words: list[str]) -> float:
    if name == needle:
        return 10.0
    if name.startswith(needle):
        return 6.0
    if needle in name:
        return 4.0
    if len(words) > 1 and all(w in name for w in words):
        return 3.0
    return 0.0


def _content_hits(text: str, needle: str, words: list[str]) -> Iterable[tuple[int, str, float]]:
    """(line, snippet, score) for lines holding the whole query (2.0) or, failing that, all its words (1.0)."""
    low = text.lower()
    if needle not in low and not (len(words) > 1 and all(w in low for w in words)):
        return
    lines = text.split("\n")
    found: set[int] = set()
    for number, line_text in enumerate(lines, 1):
        line_low = line_text.lower()
        if needle in line_low:
            score = 2.0
        elif len(words) > 1 and all(w in line_low for w in words):
            score = 1.0
        else:
            continue
        found.add(number)
        yield number, line_text.strip()[:_SNIPPET], score
        if len(found) >= _MAX_CONTENT_HITS_PER_FILE:
            return
