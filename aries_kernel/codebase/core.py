"""``Codebase``: the live index of one repository, its lifecycle (background indexing, warm load, reindex) and
the accessors the query and judgment operations build on.

Construction is cheap; :meth:`Codebase.index_in_background` starts the work in a daemon thread, and every
public operation first calls :meth:`Codebase.wait_ready`, which shows a progress bar while it waits.
"""

from __future__ import annotations

import logging
import marshal
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aries_kernel.codebase import bounded, extract
from aries_kernel.codebase.config import AriesCodebase
from aries_kernel.codebase.definitions import Definitions
from aries_kernel.codebase.errors import CodebaseError
from aries_kernel.codebase.extract import Record, content_hash
from aries_kernel.codebase.files import CONFIG_FILES, Problem, SourceFile, Walk, indexable, walk
from aries_kernel.codebase.graph import FileGraph
from aries_kernel.codebase.indexer import default_workers, plan, run_plan, too_large
from aries_kernel.codebase.judgment import JudgmentMixin
from aries_kernel.codebase.languages import language_for_path
from aries_kernel.codebase.languages import parse as parse_source
from aries_kernel.codebase.notebooks import file_cap, is_notebook, notebook_source
from aries_kernel.codebase.progress import Progress
from aries_kernel.codebase.queries import QueryMixin
from aries_kernel.codebase.ranking import Rankings, from_stored, stored_form
from aries_kernel.codebase.resolve import ImportConfig, config_problem, load_tsconfigs
from aries_kernel.codebase.snapshot import BadSnapshot, Snapshot, code_digest, decode, encode
from aries_kernel.codebase.store import IndexStore, Pending, Records, ensure_aries_dir
from aries_kernel.codebase.team_index import adopt, publish
from aries_kernel.codebase.team_settings import TeamChoice, team_index
from aries_kernel.codebase.text_cache import TextCache
from aries_kernel.rootfs import RefusedPathError, read_regular

if TYPE_CHECKING:
    import pandas as pd
    from tree_sitter import Tree

__all__ = ["Codebase", "CodebaseError"]

log = logging.getLogger(__name__)
_STORED_TABLES = frozenset({"roles", "counts"})
# Characters of source text kept for the next query (the files read last): an agent's get_context and
# search calls read the same files again, but a search over a big repository reads all of them.
_TEXT_CACHE_CHARS = 32 << 20


class Codebase(QueryMixin, JudgmentMixin):
    """The tree-sitter graph of a repository: files, symbols, typed edges, and operations over them.

    >>> codebase = Codebase(Path("."))
    >>> codebase.index_in_background()
    >>> codebase.top_files(5)          # waits for the index, with a progress bar
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        config: Any = None,
        root_reason: str = "",
        team: TeamChoice | None = None,
    ) -> None:
        self.root = Path(root).expanduser().resolve()
        self.root_reason = root_reason  # why this folder is the root (found .git ...), shown by status()
        if not self.root.is_dir():
            raise CodebaseError(f"{self.root} is not a folder; give the repository's root folder.")
        self.settings = AriesCodebase(config=config)
        self._lock = threading.RLock()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._progress = (0, 0, "starting")  # done, total, phase
        self._records = Records({}, self._fetch_records)
        self._stale: set[str] = set()  # files whose stored record was unusable and whose file changed since
        self._stat: dict[str, tuple[int, int]] = {}
        self._problems: list[Problem] = []
        self._configs: dict[str, str] = {}  # tsconfig/package.json path -> content hash
        self._tsconfigs: dict[str, ImportConfig] = {}
        self._graph = FileGraph(self.root.name)
        self._rankings = Rankings(self._graph, self._names_of, roles_of=self._roles)
        self._store: IndexStore | None = None
        self._store_problems: list[Problem] = []  # index.db refused or moved aside: shown in skipped()
        self.team_note = ""  # what the team's shared index did for this kernel (codebase.status() says it)
        # The team index as the kernel resolved it at its start (team_settings: a Repl step cannot redirect it);
        # None: resolved from the environment and the config at each index.
        self._team = team
        self._texts = TextCache(_TEXT_CACHE_CHARS)
        self._tables: dict[str, tuple[int, Any]] = {}
        # Tables stored with the graph's scores (see _table), for the graph version they were loaded with.
        self._stored_tables: dict[str, Any] = {}
        self._stored_version = -1
        # The stored graph's MAC while the graph is that one (the version above): stored definitions name it.
        self._graph_tag: bytes | None = None
        self._store_score: Any = None
        # Judgment data by kind and path, (content hash, value), when there is no index.db to keep it in.
        self._judged: dict[str, dict[str, tuple[str, Any]]] = {}
        self.last_run: dict[str, Any] = {}

    # lifecycle

    def index_in_background(self) -> None:
        """Start indexing in a daemon thread and return at once (does nothing if already started)."""
        with self._lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(
                target=self._index_safely, name="aries-codebase-index", daemon=True
            )
            self._thread.start()

    def wait_ready(self, timeout: float | None = None) -> None:
        """Block until the index is ready, showing progress; raises :class:`CodebaseError` if indexing failed."""
        if not self._ready.is_set():
            self.index_in_background()
            progress: Progress | None = None
            deadline = None if timeout is None else time.monotonic() + timeout
            try:
                while not self._ready.wait(0.2):
                    if progress is None:
                        progress = Progress(f"indexing {self.root.name}")
                    done, total, phase = self._progress
                    progress.update(done, total, phase)
                    if deadline is not None and time.monotonic() > deadline:
                        raise TimeoutError(f"The index of {self.root} is not ready yet: {self.status()}")
            finally:  # the bar ends with the wait, also on a timeout or an interrupt
                if progress is not None:
                    progress.close(self.status())
        if self._error is not None:
            raise CodebaseError(
                f"Indexing {self.root} failed: {self._error!r}. Fix the cause and run "
                "codebase.reindex() or %aries index."
            ) from self._error

    @property
    def ready(self) -> bool:
        """True once the index is built (or failed)."""
        return self._ready.is_set()

    def status(self) -> str:
        """How far indexing is, or what the index holds; then, when known, why :attr:`root` is the root."""
        state = self._state()
        if self.team_note:
            state += f"\nteam index: {self.team_note}"
        return f"{state}\nroot: {self.root_reason}" if self.root_reason else state

    def _state(self) -> str:
        if self._error is not None:
            return f"failed: {self._error}"
        if not self._ready.is_set():
            done, total, phase = self._progress
            if phase == "parsing" and total:
                return f"indexing {done:,}/{total:,} files"
            return f"indexing ({phase})"
        run = self.last_run
        records = self._records
        skipped = sum(1 for rel in list(records) if records.status(rel) != "indexed") + len(self._problems)
        return (
            f"ready: {len(self._graph.node_of):,} files, {self._graph.edge_count():,} edges, "
            f"{skipped} skipped or partial; {run.get('mode', '')} index in {run.get('seconds', 0):.2f} s "
            f"({run.get('parsed', 0):,} parsed, {run.get('reused', 0):,} from .aries/index.db)"
        )

    def __repr__(self) -> str:
        return f"<Codebase {self.root} — {self._state()}>"

    def _repr_markdown_(self) -> str:
        lines = [f"**codebase** `{self.root}`: {self.status()}"]
        if self._ready.is_set() and self._error is None:
            languages: dict[str, int] = {}
            for rel in self._graph.node_of:
                language = self._graph.language[rel]
                languages[language] = languages.get(language, 0) + 1
            lines.append(", ".join(f"{k}: {v:,}" for k, v in sorted(languages.items())) or "no source files")
            lines.append("Try `codebase.top_files()`, `codebase.search('...')`, `codebase.communities()`.")
        return "\n\n".join(lines)

    def _index_safely(self) -> None:
        try:
            self._full_index()
        except BaseException as exc:  # reported by wait_ready; a thread must not die silently
            log.exception("Indexing %s failed", self.root)
            self._error = exc
        finally:
            self._ready.set()
        if self._error is None:
            # Queries need none of what a loaded graph leaves for later (what updating it needs): it is built
            # once the index is ready, and a reindex before then builds it first. The stored edges come first,
            # outside the lock, so queries that need none need not wait; no record is read for it (an update
            # reads those of the files it touches), so the first answer does not share the interpreter with
            # decoding them all.
            self._graph.load_edges()
            with self._lock:
                self._graph.complete()
            self._publish_for_team()

    def _publish_for_team(self) -> None:
        """Give the team this commit's index when it has none yet (after ready: no query waits for it)."""
        team, _ = self._team or team_index(self.settings)
        if team is None or self._store is None:
            return
        try:
            note = publish(self._store, self.root, team)
        except Exception as exc:  # the kernel's own index is ready and right; sharing it is a bonus
            log.warning("Could not share the index of %s with the team: %r", self.root, exc)
            return
        if not note.endswith("exists"):
            self.team_note = f"{self.team_note}; {note}" if self.team_note else note

    def _open_store(self) -> IndexStore | None:
        self._store_problems = []
        if not self.settings.persist:
            return None
        try:
            store = IndexStore(ensure_aries_dir(self.root) / "index.db")
        except (OSError, sqlite3.Error) as exc:
            # A read-only checkout, or a symlinked .aries or index.db, still gets an index in memory.
            log.warning("Not persisting the index under %s: %s", self.root, exc)
            self._store_problems = [Problem(".aries/index.db", f"not used: {exc}")]
            return None
        if store.notice:
            self._store_problems = [Problem(".aries/index.db", store.notice)]
        return store

    def _full_index(self) -> None:
        started = time.perf_counter()
        self._progress = (0, 0, "listing files")
        if self._store is not None:
            self._store.close()
        self._store = self._open_store()
        team, why_not = self._team or team_index(self.settings)
        self.team_note = why_not or ""
        adopting: list[str | BaseException] = []
        adopter = None
        if team is not None and self._store is not None and self._store.empty:
            # While this thread walks the tree: most of adopting is waiting for git, hashing and sqlite.
            store = self._store

            def adopt_team_index() -> None:
                try:
                    adopting.append(adopt(store, self.root, team))
                except BaseException as exc:  # raised below, in this thread
                    adopting.append(exc)

            adopter = threading.Thread(target=adopt_team_index, name="aries-team-index", daemon=True)
            adopter.start()
        try:
            found = walk(self.root, self.settings.ignore)
        finally:
            if adopter is not None:  # never left writing the store while this index fails or goes on
                adopter.join()
        if adopter is not None:
            if isinstance(adopting[0], BaseException):
                raise adopting[0]
            self.team_note = adopting[0]
        stored = self._store.load() if self._store is not None else {}
        if self._store is not None and self._store.notice and not self._store_problems:
            self._store_problems = [Problem(".aries/index.db", self._store.notice)]
        max_bytes = self.settings.max_file_size
        work = plan(self.root, found.sources, stored, max_bytes)
        total = len(work.to_parse)
        self._progress = (0, total, "parsing")

        def on_progress(done: int) -> None:
            self._progress = (done, total, "parsing")

        workers = self.settings.workers or default_workers()
        self._judged = {}
        parsed = run_plan(
            self.root,
            work.to_parse,
            max_bytes,
            workers,
            on_progress,
            budget=self.settings.parse_timeout,
            on_judgment=self._save_judgment,
        )
        self._progress = (total, total, "building the graph")
        records = Records(dict(sorted({**work.reused, **parsed}.items())), self._fetch_records)
        stat = {s.rel: (s.size, s.mtime_ns) for s in found.sources}
        if self._store is not None:
            self._store.save(
                [(rel, *stat[rel], parsed[rel]) for rel in sorted(parsed) if _cacheable(parsed[rel])]
                + [(rel, size, mtime, records[rel]) for rel, size, mtime, _ in work.restat]
            )
            gone = set(stored) - set(records)
            if gone:
                self._store.delete(sorted(gone))
        tsconfigs, config_hashes, config_problems = self._read_tsconfigs(found)
        key = repr((code_digest(), self.root.name, sorted(config_hashes.items())))
        graph, tag = self._graph_of(records, tsconfigs, key)
        loaded = tag is not None
        with self._lock:
            self._records = records
            self._stat = stat
            self._problems = found.problems + config_problems + self._store_problems
            self._configs, self._tsconfigs = config_hashes, tsconfigs
            self._graph = graph
            if not loaded and self._store is not None:
                hashes = {rel: records.digest(rel) for rel in graph.node_of}
                statuses = {rel: records.status(rel) for rel in graph.node_of}
                tag = self._store.save_blob("graph", encode(graph.snapshot(key, hashes, statuses)))
            self._rankings = self._rankings_of(graph, tag)
            self._tables.clear()
            self._texts.clear()
            self.last_run = {
                "mode": "warm" if stored else "cold",
                "seconds": time.perf_counter() - started,
                "parsed": len(parsed),
                "reused": len(work.reused),
                "graph": "loaded" if loaded else "built",
            }

    def _graph_of(
        self, records: Records, tsconfigs: dict[str, ImportConfig], key: str
    ) -> tuple[FileGraph, bytes | None]:
        """The graph of ``records``, and the stored graph's MAC when it is that graph unchanged. The stored graph
        is loaded when its ``key`` matches and brought up to date through :meth:`FileGraph.update` (which gives
        exactly what a full build gives), so a warm start resolves and weighs only what changed, and reads only
        the records of files that changed; it is built otherwise."""
        snapshot, tag = self._stored_graph(key)
        if snapshot is not None:
            stored = dict(zip(snapshot.files, snapshot.hashes, strict=True))
            # A record with the hash the stored graph holds it with has the status stored with it.
            for rel, digest, status in zip(snapshot.files, snapshot.hashes, snapshot.statuses, strict=True):
                if rel in records and records.digest(rel) == digest:
                    records.know_status(rel, status)
            indexed = {rel for rel in records if records.status(rel) != "skipped"}
            changed = {
                rel: records[rel] if rel in indexed else None
                for rel in sorted(stored.keys() | indexed)
                if stored.get(rel) != (records.digest(rel) if rel in indexed else None)
            }
            if len(changed) <= len(stored) // 2:  # beyond that, building afresh is quicker
                try:  # the update reads the records of the files it touches only
                    graph = FileGraph.from_snapshot(self.root.name, snapshot, records, tsconfigs)
                    if changed:
                        graph.update(changed, tsconfigs)
                    return graph, None if changed else tag
                except (ValueError, KeyError, IndexError) as exc:  # verified, yet not what this code wrote
                    log.warning("The stored graph of %s does not load (%r); rebuilding it", self.root, exc)
        graph = FileGraph(self.root.name)
        graph.build((r for r in records.values() if r["status"] != "skipped"), tsconfigs)
        return graph, None

    def _fetch_records(self, pending: dict[str, Pending]) -> dict[str, Record]:
        """The stored records of ``pending`` files; those whose rows no longer verify or hold them are parsed
        again (and stored), and when the file changed since the walk it is reindexed at the next reindex."""
        found = self._store.records(pending) if self._store is not None else {}
        missing = [rel for rel in pending if rel not in found]
        if not missing:
            return found
        log.warning(
            "%d stored records of %s are unusable; parsing those files again", len(missing), self.root
        )
        sources = [
            SourceFile(rel, language, pending[rel].size, pending[rel].mtime_ns)
            for rel in missing
            if (language := language_for_path(rel)) is not None
        ]
        workers = self.settings.workers or default_workers()
        parsed = run_plan(
            self.root,
            sources,
            self.settings.max_file_size,
            workers,
            lambda done: None,
            budget=self.settings.parse_timeout,
            on_judgment=self._save_judgment,
        )
        for source in sources:
            record = parsed[source.rel]
            if record["hash"] != pending[source.rel].digest:
                self._stale.add(source.rel)
            if self._store is not None and _cacheable(record):
                self._store.save([(source.rel, source.size, source.mtime_ns, record)])
        for rel in missing:
            if rel not in parsed:  # no longer a language this code indexes
                source = SourceFile(rel, "", pending[rel].size, pending[rel].mtime_ns)
                parsed[rel] = {**too_large(source, 0), "reason": "unreadable: its stored record is unusable"}
        return {**found, **parsed}

    def _stored_graph(self, key: str) -> tuple[Snapshot | None, bytes | None]:
        """The stored graph snapshot and its MAC, when there is one that verifies, decodes and was stored under
        ``key``."""
        found = self._store.load_blob("graph") if self._store is not None else None
        if found is None:
            return None, None
        try:
            snapshot = decode(found[1])
        except BadSnapshot as exc:
            log.warning("The stored graph of %s is damaged (%s); rebuilding it", self.root, exc)
            return None, None
        return (snapshot, found[0]) if snapshot.key == key else (None, None)

    def _rankings_of(self, graph: FileGraph, tag: bytes | None) -> Rankings:
        """Rankings of ``graph`` with the scores stored for it (those stored with ``tag``, the MAC of the stored
        graph it is), storing each score computed while the graph is unchanged."""
        store = self._store
        self._stored_tables, self._stored_version, self._store_score = {}, graph.version, None
        self._graph_tag = tag
        if store is None or tag is None:
            return Rankings(graph, self._names_of, roles_of=self._roles)
        files = tuple(graph.node_of)
        scores: dict[str, Any] = {}
        lock = threading.Lock()  # scores are computed under the rankings' lock, tables under the codebase's
        found = store.load_blob("rankings")
        if found is not None:
            try:
                graph_tag, stored = marshal.loads(found[1])
                if graph_tag == tag:
                    scores = from_stored(stored, files)
            except (ValueError, TypeError, EOFError) as exc:  # verified, yet not what this code wrote
                log.warning("The stored rankings of %s do not load (%s); recomputing them", self.root, exc)

        def on_computed(key: str, value: Any) -> None:
            with lock:
                scores[key] = value
                try:
                    form = {k: stored_form(k, v, files) for k, v in scores.items()}
                except KeyError:  # not a value per file of this graph: nothing to store
                    scores.pop(key)
                    return
                store.save_blob("rankings", marshal.dumps((tag, form)))

        self._stored_tables = {k: scores[k] for k in _STORED_TABLES if k in scores}
        self._store_score = on_computed
        known = {k: v for k, v in scores.items() if k not in _STORED_TABLES}
        return Rankings(graph, self._names_of, known, on_computed, roles_of=self._roles)

    def _read_tsconfigs(self, found: Walk) -> tuple[dict[str, ImportConfig], dict[str, str], list[Problem]]:
        texts: dict[str, str] = {}
        problems: list[Problem] = []
        for rel in found.configs:
            try:
                texts[rel] = self._read_config(rel)
            except (OSError, UnicodeDecodeError) as exc:
                problems.append(Problem(rel, config_problem(rel, f"unreadable ({exc})")))

        def read(rel: str) -> str | None:
            try:
                return self._read_config(rel)
            except (OSError, UnicodeDecodeError):
                return None

        configs, bad = load_tsconfigs(texts, read)
        problems += [Problem(rel, reason) for rel, reason in bad]
        return configs, {rel: content_hash(t.encode()) for rel, t in texts.items()}, problems

    def _read_config(self, rel: str) -> str:
        """An import config's text (tsconfig, package.json, go.mod, Cargo.toml): a regular file inside the root,
        at most :data:`.bounded.MAX_BYTES`."""
        data, _ = read_regular(self.root, rel, bounded.MAX_BYTES, walked=True)
        if len(data) > bounded.MAX_BYTES:
            raise RefusedPathError(f"too large: over the limit of {bounded.MAX_BYTES:,} bytes")
        return data.decode("utf-8")

    # incremental

    def reindex(self, paths: Any = None) -> pd.DataFrame:
        """Re-index changed files (all of the repository, or just ``paths``) and update the graph in place.

        Only files whose content hash changed are re-parsed. Returns one row per change: file, change
        (added, modified, deleted). After a failed index, this builds the whole index again.
        """
        import pandas as pd

        if self._ready.is_set() and self._error is not None:
            return self._retry_full_index()
        self.wait_ready()
        with self._lock:
            started = time.perf_counter()
            if paths is None:
                found = walk(self.root, self.settings.ignore)
                candidates = {s.rel: s for s in found.sources}
                checked = set(self._stat) | set(candidates)
                problems = found.problems
                tsconfigs, config_hashes, config_problems = self._read_tsconfigs(found)
                problems = problems + config_problems + self._store_problems
            else:
                candidates, checked = self._candidates(paths)
                tsconfigs, config_hashes, problems = self._tsconfigs, self._configs, self._problems
                if any(p.rsplit("/", 1)[-1] in CONFIG_FILES for p in checked):
                    return self.reindex(None)
            changes = self._apply(candidates, checked)
            for rel in sorted(r for r in self._stale if r in self._records):  # see _fetch_records
                changes.setdefault(rel, "modified")
            self._stale.clear()
            self._problems = problems
            tsconfig_changed = config_hashes != self._configs
            self._configs, self._tsconfigs = config_hashes, tsconfigs
            if changes or tsconfig_changed:
                graph_changes = {
                    rel: (
                        self._records[rel]
                        if rel in self._records and self._records[rel]["status"] != "skipped"
                        else None
                    )
                    for rel in changes
                }
                self._graph.update(graph_changes, tsconfigs)
                for rel in changes:
                    self._texts.pop(rel)
            self.last_run = {
                **self.last_run,
                "reindex_seconds": time.perf_counter() - started,
                "reindexed": len(changes),
            }
        return pd.DataFrame(sorted(changes.items()), columns=["file", "change"])

    def _retry_full_index(self) -> pd.DataFrame:
        import pandas as pd

        with self._lock:
            self._error = None
            try:
                self._full_index()
            except Exception as exc:
                self._error = exc
                raise CodebaseError(f"Indexing {self.root} failed again: {exc!r}") from exc
            return pd.DataFrame({"file": list(self._records), "change": "added"})

    def _candidates(self, paths: Any) -> tuple[dict[str, SourceFile], set[str]]:
        """Stat the given paths; those gone or no longer indexable are checked (and dropped) too."""
        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        candidates: dict[str, SourceFile] = {}
        checked: set[str] = set()
        for path in paths:
            rel = self._relative(path)
            checked.add(rel)
            language = language_for_path(rel)
            full = self.root / rel
            if language is None or not indexable(self.root, rel, self.settings.ignore):
                continue
            try:
                stat = full.stat()
            except OSError:
                continue
            if full.is_file():
                candidates[rel] = SourceFile(rel, language, stat.st_size, stat.st_mtime_ns)
        return candidates, checked

    def _apply(self, candidates: dict[str, SourceFile], checked: set[str]) -> dict[str, str]:
        """Re-read what changed among ``checked`` and update records, stat keys and the store."""
        max_bytes = self.settings.max_file_size
        changes: dict[str, str] = {}
        to_parse: list[SourceFile] = []
        saved: list[tuple[str, int, int, Record]] = []  # stored at the end, with the profiles: one commit
        for rel in sorted(checked):
            source = candidates.get(rel)
            old = self._records.get(rel)
            if source is None:
                if old is not None:
                    changes[rel] = "deleted"
                continue
            if old is not None and self._stat.get(rel) == (source.size, source.mtime_ns) and _cacheable(old):
                continue
            if source.size > (cap := file_cap(rel, max_bytes)):
                record = too_large(source, cap)
            else:
                try:
                    data = extract.read_source(str(self.root), rel, cap)
                except OSError:
                    data = None
                if old is not None and data is not None and old["hash"] == content_hash(data):
                    self._stat[rel] = (source.size, source.mtime_ns)
                    saved.append((rel, source.size, source.mtime_ns, old))
                    continue
                to_parse.append(source)
                continue
            changes[rel] = "added" if old is None else "modified"
            self._set_record(source, record, saved)
        workers = self.settings.workers or default_workers()
        judged: dict[str, list[tuple[str, str, Any]]] = {}  # stored with the records
        parsed = run_plan(
            self.root,
            to_parse,
            max_bytes,
            workers,
            lambda done: None,
            budget=self.settings.parse_timeout,
            on_judgment=(
                (lambda kind, rows: judged.setdefault(kind, []).extend(rows))
                if self._store is not None
                else self._save_judgment
            ),
        )
        for source in to_parse:
            old = self._records.get(source.rel)
            if old != parsed[source.rel]:  # an unreadable file that is still unreadable is no change
                changes[source.rel] = "added" if old is None else "modified"
            self._set_record(source, parsed[source.rel], saved)
        if self._store is not None:
            self._store.save(saved, judged.pop("profiles", []))
            for kind, rows in judged.items():
                self._store.save_judgment(kind, rows)
        deleted = [rel for rel, change in changes.items() if change == "deleted"]
        for rel in deleted:
            del self._records[rel]
            self._stat.pop(rel, None)
        if self._store is not None and deleted:
            self._store.delete(deleted)
        if deleted or any(change == "added" for change in changes.values()):
            self._records.sort()
        return changes

    def _set_record(
        self, source: SourceFile, record: Record, saved: list[tuple[str, int, int, Record]]
    ) -> None:
        """Put ``record`` in the index, and in ``saved`` (to store) when it may be stored."""
        self._records[source.rel] = record
        self._stat[source.rel] = (source.size, source.mtime_ns)
        if _cacheable(record):
            saved.append((source.rel, source.size, source.mtime_ns, record))

    # accessors shared by the query and judgment operations

    def _relative(self, file: Any) -> str:
        """A root-relative POSIX path for a path given relative to the root or absolute."""
        path = Path(file)
        if path.is_absolute():
            try:
                path = path.resolve().relative_to(self.root)
            except ValueError:
                raise CodebaseError(f"{file} is outside the repository {self.root}.") from None
        return path.as_posix().removeprefix("./")

    def _file(self, file: Any) -> str:
        """The indexed file ``file`` names (relative, absolute, or a unique path suffix), or a clear error."""
        rel = self._relative(file)
        if rel in self._graph.node_of:
            return rel
        matches = [f for f in self._graph.node_of if f.endswith("/" + rel)]
        if len(matches) == 1:
            return matches[0]
        if rel in self._records:
            record = self._records[rel]
            raise CodebaseError(f"{rel} is not indexed: {record['reason']}")
        hint = (
            f" Did you mean one of: {', '.join(sorted(matches)[:5])}?"
            if matches
            else (
                " codebase.list_files() shows the indexed files; run codebase.reindex() after creating files."
            )
        )
        raise CodebaseError(f"{rel} is not an indexed file of {self.root}.{hint}")

    def _counts(self) -> dict[str, tuple[int, int]]:
        """Indexed file -> (symbols, loc), cached and stored with the graph's scores like the roles: a warm
        start's ``stats()`` then reads no record (decoding them all costs more than the rest of its answer)."""

        def build() -> dict[str, tuple[int, int]]:
            # A batch of records at a time (not one query per file), none kept.
            scanned = self._records.scan(self._graph.node_of)
            return {rel: (len(r["symbols"]), r["loc"]) for rel, r in scanned}

        with self._lock:
            return self._table("counts", build)  # type: ignore[no-any-return]

    def _names_of(self, files: Iterable[str]) -> Iterator[str]:
        """The names ``files`` define at top level (a community's label is made of them), read from their
        records a batch at a time and not kept."""
        for _, record in self._records.scan(files):
            yield from (s[0] for s in record["symbols"] if s[5] == "")

    def _table(self, key: str, build: Any) -> Any:
        """A derived table cached until the graph changes. The file roles (built by reading every file's
        header) are stored with the graph's scores too, so the first query after a warm start reads none."""
        value = self._table_at_hand(key)
        if value is None:
            value = build()
            version = self._graph.version
            if version == self._stored_version and key in _STORED_TABLES and self._store_score is not None:
                self._store_score(key, value)
            self._tables[key] = (version, value)
        return value

    def _table_at_hand(self, key: str) -> Any:
        """The derived table ``key`` when it is cached or stored for the graph as it is, else None (not built)."""
        version = self._graph.version
        hit = self._tables.get(key)
        if hit is not None and hit[0] == version:
            return hit[1]
        value = self._stored_tables.pop(key, None) if version == self._stored_version else None
        if value is not None:
            self._tables[key] = (version, value)
        return value

    def _save_judgment(self, kind: str, rows: list[tuple[str, str, Any]]) -> None:
        """Keep ``(path, content hash, value)`` rows of judgment data (see :meth:`IndexStore.judgment`) in
        index.db, or in memory when there is none."""
        if self._store is not None:
            self._store.save_judgment(kind, rows)
        else:
            held = self._judged.setdefault(kind, {})
            held.update((rel, (digest, value)) for rel, digest, value in rows)

    def _judgment_data(self, kind: str, files: list[str]) -> dict[str, Any]:
        """The stored judgment data of ``kind`` for those of ``files`` that have it for their indexed content."""
        # Not under the lock, which a warm start's background completion of the graph holds for a while.
        records = self._records
        wanted = {rel: records.digest(rel) for rel in files if rel in records}
        if self._store is not None:
            return self._store.judgment(kind, wanted)
        held = self._judged.get(kind, {})
        return {rel: held[rel][1] for rel, digest in wanted.items() if rel in held and held[rel][0] == digest}

    def symbol_table(self, hashes: bool = True) -> pd.DataFrame:
        """Every definition: name, kind, file, line, end_line, signature, language, shape_hash, exact_hash, parent.

        The hashes are computed with the index, from the trees it parses; ``hashes`` is accepted for callers
        written when they were computed on first need, and changes nothing. A new table each call, built from
        the compact :meth:`_definitions` (the operations read that, not this).
        """
        return self._definitions().frame().reset_index(drop=True)

    def _definitions(self) -> Definitions:
        """Every definition as compact columns (:class:`Definitions`), cached until the graph changes; built from
        the records a batch at a time, so a warm start's pending records are read, not kept."""
        self.wait_ready()
        with self._lock:
            return self._table("definitions", self._stored_definitions)  # type: ignore[no-any-return]

    def _stored_definitions(self) -> Definitions:
        """The definitions stored with the graph as it is (index.db's ``definitions`` blob, which records the MAC
        of the graph it was read with); else read from the records, and stored when the graph is the stored
        one. Called under the lock."""
        store, tag = self._store, self._graph_tag
        if store is None or tag is None or self._graph.version != self._stored_version:
            return Definitions.of(self._records)
        found = store.load_blob("definitions")
        if found is not None:
            try:
                stored = Definitions.from_blob(self._records, found[1], tag)
                if stored is not None:
                    return stored
            except (ValueError, TypeError, EOFError) as exc:  # verified, yet not what this code wrote
                log.warning(
                    "The stored definitions of %s do not load (%s); reading them again", self.root, exc
                )
        definitions = Definitions.of(self._records)
        store.save_blob("definitions", definitions.blob(tag))
        return definitions

    def source(self, file: Any, typed: bool = False) -> str:
        """The text of an indexed file; of a notebook, its code cells' Python as indexed (one text, cell after
        cell, lines as ``find_symbol`` and ``get_context`` number them), or with ``typed`` the cells as typed
        (``%matplotlib inline`` rather than IPython's call), line for line with it."""
        self.wait_ready()
        with self._lock:
            rel = self._file(file)
            text = None if typed and is_notebook(rel) else self._texts.get(rel)
        if text is None:
            try:
                data = extract.read_source(str(self.root), rel, file_cap(rel, self.settings.max_file_size))
                text = extract.decode_source(data, self.language_of(rel) or "")
                if is_notebook(rel):
                    # Converted here only as the worker converted it (bounded, in its time budget): the same bytes.
                    if content_hash(data) != self._records.digest(rel):
                        raise ValueError("the notebook changed since it was indexed")
                    notebook = notebook_source(text, len(data))
                    if typed:
                        return notebook.typed
                    text = notebook.text
            except (OSError, UnicodeError, LookupError, ValueError) as exc:
                raise CodebaseError(
                    f"Cannot read {rel}: {exc}. Run codebase.reindex() if it changed."
                ) from exc
            with self._lock:
                self._texts.put(rel, text)
        return text

    def language_of(self, file: Any) -> str | None:
        """The language of a file (python, javascript, typescript, tsx), or None for other files."""
        rel = self._relative(file)
        language = self._graph.language.get(rel)  # every file not skipped, without reading its record
        if language is not None:
            return language
        record = self._records.get(rel)
        return record["language"] if record is not None else language_for_path(rel)

    def parse(self, source: bytes, language: str) -> Tree:
        """Parse ``source`` as ``language`` with tree-sitter."""
        return parse_source(source, language)


def _cacheable(record: Record) -> bool:
    """Whether a record may be stored: an unreadable file can become readable without a new mtime (chmod), and a
    parse that ran out of time may finish on a less loaded machine or with a larger ``parse_timeout``."""
    return not record["reason"].startswith(("unreadable", "parse took longer than"))
