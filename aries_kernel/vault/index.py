"""The vault's index database: one :class:`VaultIndex` owns its SQLAlchemy engine and its schema.

SQLite by default, in WAL mode with a busy timeout, FTS5 for BM25. Every write runs inside ``BEGIN IMMEDIATE``
(so two processes never deadlock upgrading a read lock) and is retried with backoff while another writer holds
the database, so "database is locked" does not reach the user. The schema is built by named, append-only
migrations recorded in ``_vault_migrations``. A file that is not a database, is damaged, has another schema or
is a symlink is moved aside (kept for inspection, named in :attr:`VaultIndex.recovery`) and rebuilt; notes come
back from the markdown files, learned state from an export.

The file can also vanish under a running kernel: deleted, replaced or truncated by someone else. Before every
transaction the index compares the file's ``st_dev``/``st_ino`` (and that it did not shrink) with the one it
opened, and after every write it checks again; SQLite errors that mean the file is gone ("malformed", "no such
table", "not a database", "readonly") are caught too. Then it reopens the file, or builds a fresh one when none is
left (removing the orphaned ``-wal``/``-shm`` that would make a new file look "malformed"), under an ``flock``
of the folder so two processes never rebuild at once, and calls :attr:`VaultIndex.on_recreate` so its owner
re-indexes the markdown notes: an add whose transaction went to the vanished file is indexed again from its file.

Tables: ``notes`` (+ ``notes_fts``), ``links``, ``embeddings`` (keyed by content hash and model), ``access``,
``q_values``, ``cooccurrence`` (learned state, keyed by title key so it survives a rebuild), ``audit``,
``archive`` and ``state`` (a generation counter bumped whenever notes or links change).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import os
import random
import re
import sqlite3
import stat
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from sqlalchemy import create_engine, event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DatabaseError, OperationalError
from sqlalchemy.pool import QueuePool

from aries_kernel.redact import redact
from aries_kernel.vault.notes import Note, normalize_title

__all__ = ["MIGRATIONS", "VaultBusyError", "VaultIndex", "fts_query", "query_terms"]

T = TypeVar("T")
Migration = Callable[[Connection], None]
MIGRATIONS: list[Migration] = []
migration = MIGRATIONS.append

# Dropped from BM25 queries: they match most notes and say little about any of them.
# fmt: off
_STOPWORDS = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "did", "do", "does", "for", "from", "had",
    "has", "have", "how", "i", "in", "is", "it", "its", "of", "on", "or", "so", "that", "the", "their",
    "them", "then", "there", "these", "they", "this", "to", "was", "were", "what", "when", "where", "which",
    "who", "whom", "why", "will", "with", "you", "your", "he", "she", "his", "her", "him", "we", "our",
    "us", "me", "my",
})
# fmt: on


class VaultBusyError(RuntimeError):
    """Another process kept the vault database locked for longer than the retry budget."""


class _IndexLost(Exception):
    """The database file this process opened is no longer the one at its path (internal signal)."""


_SIDE_FILES = ("-wal", "-shm", "-journal")
_HEADER_BYTES = 100  # a SQLite file starts with a 100-byte header
_RECOVERY_ATTEMPTS = 5


def query_terms(text: str) -> list[str]:
    """The distinct lowercase words of ``text`` without stop words (all words if only stop words)."""
    words = re.findall(r"\w+", text.casefold())
    return list(dict.fromkeys([w for w in words if w not in _STOPWORDS] or words))


def fts_query(terms: Sequence[str]) -> str:
    """An FTS5 MATCH expression: each term quoted, OR-ed; "" for no terms."""
    return " OR ".join(f'"{t}"' for t in terms)


class VaultIndex:
    """The index database of one vault folder (notes, links, embeddings, learned state, audit, archive)."""

    def __init__(self, db_path: Path, retry_seconds: float = 60.0) -> None:
        self.db_path = Path(db_path)
        self.retry_seconds = retry_seconds
        self.recreated = False
        self.corrupt_copy: Path | None = None
        # What the last reopen or rebuild was, and why (None while the file opened first is in use).
        self.recovery: str | None = None
        self.recoveries = 0
        # Called after a reopen or rebuild, so the owner can re-index its files (NoteStore.sync).
        self.on_recreate: Callable[[], None] | None = None
        # Document frequency of query terms, valid for one generation of the notes.
        self._df: dict[str, int] = {}
        self._df_generation = -1
        self._note_count = 0
        self._lock = threading.RLock()
        self._recovering = threading.local()
        self._identity: tuple[int, int] = (0, 0)
        self._size_floor = 0
        self._retired: list[Engine] = []
        self.engine: Engine | None = None
        self._attach(lost=None, why="")

    # -- the file under us ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def _folder_lock(self) -> Iterator[None]:
        # flock on the folder, not on a lock file: a lock file can be deleted along with the index.
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.db_path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    @property
    def identity(self) -> tuple[int, int]:
        """``(st_dev, st_ino)`` of the database file in use; it changes when the file is reopened or rebuilt."""
        return self._identity

    def _on_disk(self) -> os.stat_result | None:
        try:
            return os.lstat(self.db_path)
        except FileNotFoundError:
            return None

    def _is_current(self) -> bool:
        info = self._on_disk()
        if info is None or (info.st_dev, info.st_ino) != self._identity or info.st_size < self._size_floor:
            return False
        # The main file of a SQLite database never shrinks without VACUUM (which the vault never runs).
        self._size_floor = max(self._size_floor, info.st_size)
        return True

    def _attach(self, lost: tuple[int, int] | None, why: str) -> None:
        """Open the file at :attr:`db_path` (first open, or reopen after ``lost`` was found gone or damaged).

        ``lost`` is the identity of the file found broken; when the file on disk is still that one it is moved
        aside, when another process already replaced it this process simply joins the new file."""
        with self._folder_lock():
            info = self._on_disk()
            if info is not None and lost is not None and (info.st_dev, info.st_ino) == lost:
                self.corrupt_copy = self._move_aside("damaged")
                info = None
            elif info is not None and not stat.S_ISREG(info.st_mode):
                # Never write through a symlink (it could point at another program's database).
                self.corrupt_copy = self._move_aside("not-a-file")
                why = why or f"{self.db_path} was a symlink or not a file; kept aside, a new index was built"
                info = None
            elif info is not None and not _has_sqlite_header(self.db_path):
                # Truncated or foreign: never let SQLite open it beside the -wal/-shm of the file it replaced
                # (it would replay that WAL, or reset a -shm that this process still has mapped: SIGBUS).
                self.corrupt_copy = self._move_aside("not-sqlite")
                why = why or (
                    f"{self.db_path} is not a SQLite database (truncated or overwritten); kept as "
                    f"{self.corrupt_copy.name}, rebuilt from the markdown notes"
                )
                info = None
            fresh = info is None
            if fresh:
                # -wal/-shm left by a vanished file would be replayed into the new one: "malformed".
                for suffix in _SIDE_FILES:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(str(self.db_path) + suffix)
                _build_fresh(self.db_path, self.retry_seconds)
            try:
                engine = self._open_engine()
            except DatabaseError as exc:
                if not (_is_corruption(exc) or _is_foreign_schema(exc)):
                    raise
                self.corrupt_copy = self._move_aside("corrupt")
                why = why or (
                    f"{self.db_path} could not be used ({exc.orig}); kept as {self.corrupt_copy.name}, "
                    "a new index was built from the notes"
                )
                fresh = True
                _build_fresh(self.db_path, self.retry_seconds)
                engine = self._open_engine()
            info = os.lstat(self.db_path)
        old, self.engine = self.engine, engine
        self._identity, self._size_floor = (info.st_dev, info.st_ino), info.st_size
        self.recreated = self.recreated or fresh
        if old is not None:
            self._retire(old)
        if lost is not None or why:
            self.recoveries += 1
            self.recovery = why

    def _move_aside(self, label: str) -> Path:
        aside = self.db_path.with_name(f"{self.db_path.name}.{label}-{time.time_ns()}")
        for suffix in ("", *_SIDE_FILES):
            part = Path(str(self.db_path) + suffix)
            if os.path.lexists(part):
                part.replace(Path(str(aside) + suffix))
        return aside

    def _open_engine(self) -> Engine:
        engine = _make_engine(self.db_path)
        try:
            # Reading the schema proves the file is a database before we try to migrate it.
            probe = lambda conn: conn.exec_driver_sql("SELECT count(*) FROM sqlite_master").scalar()  # noqa: E731
            _transaction(engine, probe, self.retry_seconds, self.db_path)
            _transaction(engine, _migrate, self.retry_seconds, self.db_path)
            missing = _missing_tables(engine)
            if missing:
                raise DatabaseError("schema check", None, sqlite3.DatabaseError(f"no such table: {missing}"))
        except BaseException:
            engine.dispose()
            raise
        return engine

    def _retire(self, old: Engine) -> None:
        # Connections other threads still hold go back to the old pool; it is closed once they are all back.
        self._retired.append(old)
        for engine in list(self._retired):
            if engine.pool.checkedout() == 0:  # type: ignore[attr-defined]
                engine.dispose()
                self._retired.remove(engine)

    def _recover(self, lost: tuple[int, int] | None, why: str, resync: bool = False) -> None:
        """Reattach if the file in use is ``lost`` (or, with ``lost=None``, no longer current), then let the
        owner re-index. ``resync`` re-indexes even when another thread already reattached: a commit that went
        to the old file after that thread's re-index would otherwise be missing from the new one."""
        with self._lock:
            stale = lost == self._identity if lost is not None else not self._is_current()
            if stale:
                info = self._on_disk()
                if lost is None and info is not None and (info.st_dev, info.st_ino) == self._identity:
                    lost = self._identity  # same file, shrunk: truncated under us
                self._attach(lost, why)
            if (
                not (stale or resync)
                or getattr(self._recovering, "active", False)
                or self.on_recreate is None
            ):
                return
            self._recovering.active = True
            try:
                self.on_recreate()
                self.log_recovery()
            finally:
                self._recovering.active = False

    def _current_engine(self) -> tuple[Engine, tuple[int, int]]:
        if not self._is_current():
            self._recover(None, self._why_gone())
        with self._lock:
            assert self.engine is not None
            return self.engine, self._identity

    def _why_gone(self) -> str:
        info = self._on_disk()
        if info is None:
            return f"{self.db_path} was deleted while in use; rebuilt from the markdown notes"
        if (info.st_dev, info.st_ino) != self._identity:
            return (
                f"{self.db_path} was replaced while in use; reopened and re-indexed from the markdown notes"
            )
        return f"{self.db_path} was truncated while in use; kept aside and rebuilt from the markdown notes"

    def log_recovery(self) -> None:
        """Write the last reopen or rebuild (if any) to the audit log of the file now in use."""
        if self.recovery:
            note, self.recovery = self.recovery, None
            self.write(lambda c: self.audit(c, time.time(), "recover", "", "", note))

    def _run(self, work: Callable[[Connection], T], write: bool) -> T:
        for attempt in range(_RECOVERY_ATTEMPTS):
            engine, identity = self._current_engine()
            try:
                if write:
                    result = _transaction(engine, work, self.retry_seconds, self.db_path)
                else:
                    with engine.connect() as conn:
                        result = work(conn)
            except DatabaseError as exc:
                # Any database error while the file is no longer the one opened is the vanishing, not a bug.
                lost = _is_lost(exc) or identity != self._identity or not self._is_current()
                if not lost or attempt == _RECOVERY_ATTEMPTS - 1:
                    raise
                self._recover(identity, f"{self.db_path} failed under a running writer ({exc.orig})")
                continue
            if write and (identity != self._identity or not self._is_current()):
                # Committed into a file that was deleted or replaced meanwhile: re-index into the live one.
                self._recover(None, self._why_gone(), resync=True)
            return result
        raise AssertionError("unreachable")  # pragma: no cover

    # -- transactions ---------------------------------------------------------------------------------

    def write(self, work: Callable[[Connection], T]) -> T:
        """Run ``work(conn)`` in one ``BEGIN IMMEDIATE`` transaction, retrying with backoff while locked.

        If the file turns out to be gone or damaged, the index is reopened (see the module docstring) and
        ``work`` runs again on the live file."""
        return self._run(work, write=True)

    def read(self, work: Callable[[Connection], T]) -> T:
        """Run ``work(conn)`` on one consistent snapshot (a deferred read transaction)."""
        return self._run(work, write=False)

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """All rows of one read-only statement (``?`` placeholders)."""
        return self._run(lambda conn: list(conn.exec_driver_sql(sql, tuple(params)).all()), write=False)

    def first(self, sql: str, params: Sequence[Any] = ()) -> dict[str, Any] | None:
        """The first row of one read-only statement as a dict, or None."""
        row = self._run(lambda conn: conn.exec_driver_sql(sql, tuple(params)).mappings().first(), write=False)
        return dict(row) if row is not None else None

    def close(self) -> None:
        """Release the engine's connections (the file stays)."""
        with self._lock:
            for engine in [*self._retired, self.engine]:
                if engine is not None:
                    engine.dispose()
            self._retired = []

    # -- notes ----------------------------------------------------------------------------------------

    def generation(self) -> int:
        """A counter that changes whenever notes or links change, in any process."""
        return int(self.rows("SELECT value FROM state WHERE name='notes_gen'")[0][0])

    @staticmethod
    def bump(conn: Connection) -> None:
        """Mark notes or links as changed (callers do it inside their write transaction)."""
        conn.exec_driver_sql("UPDATE state SET value = value + 1 WHERE name='notes_gen'")

    @staticmethod
    def upsert_note(conn: Connection, note: Note, created: float, updated: float) -> int:
        """Insert or replace the row of ``note`` (matched by path) and its links; returns the row id."""
        meta = note.meta
        # Hand-written notes reach the index too: their text is redacted like everything the vault writes.
        row = (
            note.path,
            note.title,
            note.title.casefold(),
            normalize_title(note.title),
            note.folder,
            redact(str(meta.get("type") or ""))[:200],
            redact(str(meta.get("description") or ""))[:1000],
            redact(note.body),
            note.content_hash,
            created,
            updated,
            note.size,
            note.mtime_ns,
        )
        existing = conn.exec_driver_sql("SELECT id FROM notes WHERE path = ?", (note.path,)).scalar()
        if existing is None:
            note_id = conn.exec_driver_sql(
                "INSERT INTO notes (path, title, key, norm, folder, type, description, body, content_hash, "
                "created, updated, size, mtime_ns) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                row,
            ).lastrowid
        else:
            note_id = int(existing)
            conn.exec_driver_sql(
                "UPDATE notes SET path=?, title=?, key=?, norm=?, folder=?, type=?, description=?, body=?, "
                "content_hash=?, created=?, updated=?, size=?, mtime_ns=? WHERE id=?",
                (*row, note_id),
            )
            conn.exec_driver_sql("DELETE FROM links WHERE src = ?", (note_id,))
        if note.links:
            conn.exec_driver_sql(
                "INSERT OR IGNORE INTO links (src, target) VALUES (?, ?)", [(note_id, t) for t in note.links]
            )
        return int(note_id)

    @staticmethod
    def delete_note(conn: Connection, path: str) -> None:
        """Remove the row (and its links) of the note at ``path``."""
        note_id = conn.exec_driver_sql("SELECT id FROM notes WHERE path = ?", (path,)).scalar()
        if note_id is not None:
            conn.exec_driver_sql("DELETE FROM links WHERE src = ?", (note_id,))
            conn.exec_driver_sql("DELETE FROM notes WHERE id = ?", (note_id,))

    @staticmethod
    def audit(conn: Connection, at: float, action: str, title: str, path: str, detail: str = "") -> None:
        """Append one line to the audit log (every write to a note goes through here)."""
        conn.exec_driver_sql(
            "INSERT INTO audit (at, action, title, path, detail) VALUES (?,?,?,?,?)",
            (at, action, title, path, detail),
        )

    def bm25(self, terms: Sequence[str], limit: int) -> list[tuple[int, float]]:
        """Best ``limit`` notes for any of ``terms`` as (id, BM25 score), higher is better.

        FTS5 scores every matching note before sorting, and a common word matches a large share of a big
        vault. So in a large vault, notes that contain only common words (in over 5% of notes) are left out
        with ``NOT``; the other notes keep their exact scores (common words still count for them). If that
        leaves fewer than ``limit`` notes, the plain query runs.
        """
        if not terms:
            return []
        full = fts_query(terms)
        rows = []
        common = self._common_terms(terms)
        if common and len(common) < len(terms):
            rare = fts_query([t for t in terms if t not in common])
            rows = self._bm25_rows(f"({full}) NOT (({fts_query(common)}) NOT ({rare}))", limit)
        if len(rows) < limit:
            rows = self._bm25_rows(full, limit)
        return [(int(r[0]), float(r[1])) for r in rows]

    def _bm25_rows(self, match: str, limit: int) -> list[Any]:
        return self.rows(
            "SELECT rowid, -bm25(notes_fts, 4.0, 2.0, 1.0) FROM notes_fts WHERE notes_fts MATCH ? "
            "ORDER BY bm25(notes_fts, 4.0, 2.0, 1.0) LIMIT ?",
            (match, limit),
        )

    def _common_terms(self, terms: Sequence[str]) -> list[str]:
        """Terms in more than 5% of notes, when the vault is big enough (5,000 notes) for it to matter."""
        generation = self.generation()
        if generation != self._df_generation:
            self._df_generation = generation
            self._df = {}
            self._note_count = int(self.rows("SELECT count(*) FROM notes")[0][0])
        if self._note_count < 5000:
            return []
        for term in terms:
            if term not in self._df:
                match = fts_query([term])
                self._df[term] = int(
                    self.rows("SELECT count(*) FROM notes_fts WHERE notes_fts MATCH ?", (match,))[0][0]
                )
        return [t for t in terms if self._df[t] > 0.05 * self._note_count]

    # -- embeddings cache -----------------------------------------------------------------------------

    def cached_vectors(self, model: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """The cached vectors of ``model`` among ``hashes``, by content hash (so a reload after a write reads
        only the vectors it does not hold yet)."""
        found: dict[str, np.ndarray] = {}
        for chunk in _chunks(hashes, 500):
            marks = ",".join("?" * len(chunk))
            rows = self.rows(
                f"SELECT content_hash, vector FROM embeddings WHERE model = ? AND content_hash IN ({marks})",
                (model, *chunk),
            )
            found.update((r[0], np.frombuffer(r[1], dtype=np.float32)) for r in rows)
        return found

    def store_vectors(self, model: str, vectors: dict[str, np.ndarray]) -> None:
        """Cache vectors by content hash (no generation bump: the notes did not change)."""
        if not vectors:
            return
        payload = [(h, model, np.asarray(v, dtype=np.float32).tobytes()) for h, v in vectors.items()]
        self.write(
            lambda c: c.exec_driver_sql(
                "INSERT OR REPLACE INTO embeddings (content_hash, model, vector) VALUES (?,?,?)", payload
            )
        )

    # -- learned state --------------------------------------------------------------------------------

    def accesses(self, keys: Iterable[str] | None = None) -> list[tuple[str, float]]:
        """(key, time) of recorded accesses, for ``keys`` or for every note."""
        if keys is None:
            return [(r[0], float(r[1])) for r in self.rows("SELECT key, at FROM access")]
        wanted = list(dict.fromkeys(keys))
        out: list[tuple[str, float]] = []
        for chunk in _chunks(wanted, 500):
            marks = ",".join("?" * len(chunk))
            out.extend(
                (r[0], float(r[1]))
                for r in self.rows(f"SELECT key, at FROM access WHERE key IN ({marks})", chunk)
            )
        return out

    @staticmethod
    def record_access(conn: Connection, key: str, at: float, kind: str) -> None:
        """One access to a note (read, used, echo): it warms the note."""
        conn.exec_driver_sql("INSERT OR IGNORE INTO access (key, at, kind) VALUES (?,?,?)", (key, at, kind))

    def q_values(self) -> dict[str, tuple[float, int]]:
        """Key -> (Q, exposures) for every note with learned state."""
        rows = self.rows("SELECT key, q, exposures FROM q_values")
        return {r[0]: (float(r[1]), int(r[2])) for r in rows}

    def cooccurrence(self) -> list[tuple[str, str, float]]:
        """(uid a, uid b, weight) pairs stored here (uids are ``source:key``)."""
        return [(r[0], r[1], float(r[2])) for r in self.rows("SELECT a, b, weight FROM cooccurrence")]

    def export_learning(self) -> dict[str, list[list[Any]]]:
        """Learned tables as plain lists (for JSON)."""

        def dump(conn: Connection) -> dict[str, list[list[Any]]]:
            return {
                "q_values": [
                    list(r)
                    for r in conn.exec_driver_sql("SELECT key, q, exposures, updates, updated FROM q_values")
                ],
                "access": [list(r) for r in conn.exec_driver_sql("SELECT key, at, kind FROM access")],
                "cooccurrence": [
                    list(r) for r in conn.exec_driver_sql("SELECT a, b, weight FROM cooccurrence")
                ],
            }

        return self.read(dump)

    def import_learning(self, data: dict[str, list[list[Any]]]) -> None:
        """Merge exported learned state: Q-values and co-occurrence replace, access events are added."""

        def load(conn: Connection) -> None:
            if data.get("q_values"):
                conn.exec_driver_sql(
                    "INSERT OR REPLACE INTO q_values (key, q, exposures, updates, updated) VALUES (?,?,?,?,?)",
                    [tuple(r) for r in data["q_values"]],
                )
            if data.get("access"):
                conn.exec_driver_sql(
                    "INSERT OR IGNORE INTO access (key, at, kind) VALUES (?,?,?)",
                    [tuple(r) for r in data["access"]],
                )
            if data.get("cooccurrence"):
                conn.exec_driver_sql(
                    "INSERT OR REPLACE INTO cooccurrence (a, b, weight) VALUES (?,?,?)",
                    [tuple(r) for r in data["cooccurrence"]],
                )
            self.audit(
                conn, time.time(), "import_learning", "", "", f"{len(data.get('q_values', []))} q-values"
            )

        self.write(load)


def _chunks(items: Sequence[str], size: int) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _transaction(engine: Engine, work: Callable[[Connection], T], retry_seconds: float, db_path: Path) -> T:
    """``work(conn)`` in one ``BEGIN IMMEDIATE`` transaction, retried with backoff while another writer holds it."""
    deadline = time.monotonic() + retry_seconds
    delay = 0.01
    while True:
        try:
            with engine.connect() as conn:
                conn.execution_options(sqlite_immediate=True)
                with conn.begin():
                    return work(conn)
        except OperationalError as exc:
            if not _is_busy(exc) or time.monotonic() > deadline:
                if _is_busy(exc):
                    raise VaultBusyError(
                        f"The vault index {db_path} stayed locked by another process for "
                        f"{retry_seconds:.0f} s; try again, or close the other kernel."
                    ) from exc
                raise
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 0.5)


def _has_sqlite_header(db_path: Path) -> bool:
    try:
        with open(db_path, "rb") as handle:
            return handle.read(_HEADER_BYTES).startswith(b"SQLite format 3\x00")
    except OSError:
        return False


def _build_fresh(db_path: Path, retry_seconds: float) -> None:
    """Build a migrated, empty index beside ``db_path`` and rename it into place (only
    :meth:`VaultIndex._attach` does, under the folder lock), so no reader ever sees a file without tables."""
    building = db_path.with_name(f"{db_path.name}.building-{os.getpid()}-{time.time_ns()}")
    engine = _make_engine(building, create=True)
    try:
        _transaction(engine, _migrate, retry_seconds, building)
    finally:
        engine.dispose()  # the last connection checkpoints the WAL into the file and removes it
    os.replace(building, db_path)


def _make_engine(db_path: Path, create: bool = False) -> Engine:
    # mode=rw: a connection opened after the file vanished fails ("unable to open") instead of creating an empty
    # file of its own beside another process's rebuild.
    uri = f"file:{urllib.parse.quote(str(db_path))}?mode={'rwc' if create else 'rw'}"
    engine = create_engine(
        "sqlite://",
        creator=lambda: sqlite3.connect(uri, uri=True, timeout=5.0, check_same_thread=False),
        poolclass=QueuePool,
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: sqlite3.Connection, record: Any) -> None:
        # Let SQLAlchemy's "begin" event issue BEGIN itself, so writers can ask for BEGIN IMMEDIATE.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA busy_timeout = 5000")
        # Switching modes needs the file to itself; it is already WAL unless this is someone else's file.
        if cursor.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
            cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        immediate = conn.get_execution_options().get("sqlite_immediate")
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


def _is_busy(exc: OperationalError) -> bool:
    text = str(exc.orig).lower()
    return "locked" in text or "busy" in text


def _is_corruption(exc: DatabaseError) -> bool:
    text = str(exc.orig).lower()
    return "not a database" in text or "malformed" in text or "corrupt" in text


def _is_foreign_schema(exc: DatabaseError) -> bool:
    # Another program's SQLite file at our path: its tables clash with our migrations or lack our columns.
    text = str(exc.orig).lower()
    return "already exists" in text or "no such table" in text or "no such column" in text


def _is_lost(exc: DatabaseError) -> bool:
    """Errors that mean the file under an open connection was deleted, replaced, truncated or damaged."""
    text = str(exc.orig).lower()
    return _is_corruption(exc) or any(
        words in text
        for words in (
            "no such table",
            "readonly database",
            "disk i/o",
            "unable to open",
            "vtable constructor",
        )
    )


_TABLES = (
    "notes",
    "notes_fts",
    "links",
    "state",
    "embeddings",
    "access",
    "q_values",
    "cooccurrence",
    "audit",
)


def _missing_tables(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        have = {r[0] for r in conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "state" in have and not conn.exec_driver_sql("SELECT count(*) FROM state").scalar():
            have.discard("state")
    return [t for t in _TABLES if t not in have]


def _migrate(conn: Connection) -> None:
    conn.exec_driver_sql(
        "CREATE TABLE IF NOT EXISTS _vault_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
    )
    applied = {r[0] for r in conn.exec_driver_sql("SELECT name FROM _vault_migrations")}
    for step in MIGRATIONS:
        if step.__name__ in applied:
            continue
        step(conn)
        conn.exec_driver_sql(
            "INSERT INTO _vault_migrations (name, applied_at) VALUES (?, ?)",
            (step.__name__, _dt.datetime.now(_dt.UTC).isoformat()),
        )


@migration
def m001_notes(conn: Connection) -> None:
    conn.exec_driver_sql(
        """CREATE TABLE notes (
            id INTEGER PRIMARY KEY,
            path TEXT NOT NULL UNIQUE,
            title TEXT NOT NULL,
            key TEXT NOT NULL,
            norm TEXT NOT NULL,
            folder TEXT NOT NULL,
            type TEXT NOT NULL DEFAULT '',
            description TEXT NOT NULL DEFAULT '',
            body TEXT NOT NULL,
            content_hash TEXT NOT NULL,
            created REAL NOT NULL,
            updated REAL NOT NULL,
            size INTEGER NOT NULL DEFAULT 0,
            mtime_ns INTEGER NOT NULL DEFAULT 0)"""
    )
    conn.exec_driver_sql("CREATE INDEX notes_key ON notes (key)")
    conn.exec_driver_sql("CREATE INDEX notes_norm ON notes (norm)")
    conn.exec_driver_sql("CREATE INDEX notes_hash ON notes (content_hash)")
    conn.exec_driver_sql(
        "CREATE TABLE links (src INTEGER NOT NULL REFERENCES notes (id) ON DELETE CASCADE, target TEXT NOT NULL, "
        "PRIMARY KEY (src, target))"
    )
    conn.exec_driver_sql("CREATE INDEX links_target ON links (target)")
    conn.exec_driver_sql("CREATE TABLE state (name TEXT PRIMARY KEY, value INTEGER NOT NULL)")
    conn.exec_driver_sql("INSERT INTO state (name, value) VALUES ('notes_gen', 0)")


@migration
def m002_fts(conn: Connection) -> None:
    conn.exec_driver_sql(
        "CREATE VIRTUAL TABLE notes_fts USING fts5(title, description, body, content='notes', content_rowid='id', "
        "tokenize='porter unicode61')"
    )
    conn.exec_driver_sql(
        "CREATE TRIGGER notes_ai AFTER INSERT ON notes BEGIN INSERT INTO notes_fts (rowid, title, description, body) "
        "VALUES (new.id, new.title, new.description, new.body); END"
    )
    conn.exec_driver_sql(
        "CREATE TRIGGER notes_ad AFTER DELETE ON notes BEGIN INSERT INTO notes_fts (notes_fts, rowid, title, "
        "description, body) VALUES ('delete', old.id, old.title, old.description, old.body); END"
    )
    conn.exec_driver_sql(
        "CREATE TRIGGER notes_au AFTER UPDATE ON notes BEGIN INSERT INTO notes_fts (notes_fts, rowid, title, "
        "description, body) VALUES ('delete', old.id, old.title, old.description, old.body); "
        "INSERT INTO notes_fts (rowid, title, description, body) VALUES (new.id, new.title, new.description, "
        "new.body); END"
    )


@migration
def m003_embeddings(conn: Connection) -> None:
    conn.exec_driver_sql(
        "CREATE TABLE embeddings (content_hash TEXT NOT NULL, model TEXT NOT NULL, vector BLOB NOT NULL, "
        "PRIMARY KEY (content_hash, model))"
    )


@migration
def m004_learning(conn: Connection) -> None:
    conn.exec_driver_sql(
        "CREATE TABLE access (key TEXT NOT NULL, at REAL NOT NULL, kind TEXT NOT NULL, PRIMARY KEY (key, at, kind))"
    )
    conn.exec_driver_sql(
        "CREATE TABLE q_values (key TEXT PRIMARY KEY, q REAL NOT NULL, exposures INTEGER NOT NULL DEFAULT 0, "
        "updates INTEGER NOT NULL DEFAULT 0, updated REAL NOT NULL DEFAULT 0)"
    )
    conn.exec_driver_sql(
        "CREATE TABLE cooccurrence (a TEXT NOT NULL, b TEXT NOT NULL, weight REAL NOT NULL, PRIMARY KEY (a, b))"
    )


@migration
def m005_audit_archive(conn: Connection) -> None:
    conn.exec_driver_sql(
        "CREATE TABLE audit (id INTEGER PRIMARY KEY, at REAL NOT NULL, action TEXT NOT NULL, title TEXT NOT NULL, "
        "path TEXT NOT NULL, detail TEXT NOT NULL DEFAULT '')"
    )
    conn.exec_driver_sql(
        "CREATE TABLE archive (id INTEGER PRIMARY KEY, title TEXT NOT NULL, key TEXT NOT NULL, path TEXT NOT NULL, "
        "archived_path TEXT NOT NULL, archived_at REAL NOT NULL, restored_at REAL)"
    )
    conn.exec_driver_sql("CREATE INDEX archive_key ON archive (key)")
