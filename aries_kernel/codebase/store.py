"""The on-disk index cache, ``.aries/index.db``: one row per file with its stat keys, content hash and record.

It is a cache and nothing more. An index of an older schema version is emptied (in a transaction, since other
kernels may have it open); a file that is not such an index (another schema, extra tables or triggers,
malformed rows, not a database at all) is renamed aside to ``index.db.broken-<time>`` for inspection and a
fresh index is built, with :attr:`IndexStore.notice` saying so. An ``index.db`` (or its journal) that is a
symlink, or a ``.aries`` that is one, is refused: aries-kernel never writes through a link a repository
brought. Records are stored with :mod:`marshal` (they are plain tuples and dicts), which loads a large
repository's index in a fraction of the time parsing it takes. marshal is not safe against crafted bytes and a
repository can commit its own ``index.db``, so each record is stored behind a MAC under the user's key
(:mod:`aries_kernel.codebase.index_key`) and is unmarshalled only when the MAC verifies; a row that does not
verify makes the file foreign (moved aside and rebuilt, as above). Records are read when first used
(:class:`Records`): a warm start reads only the stat keys and hashes, and the first row to tell a foreign index;
a later row that does not verify, or decodes to anything but a well-formed record, is not used, and its file is
parsed again.

The ``graph`` table holds the resolved file graph (:mod:`.snapshot`) and the scores computed over it
(:mod:`.ranking`) behind the same MAC, so a warm start loads them rather than recomputing millions of edges and
their PageRank; a row that does not verify is ignored (and recomputed by the caller), since the records alone
are enough to rebuild both.

The ``judgment`` table holds, per file and content hash, what the judgment operations compare without parsing
the file again: its definitions' shape ``profiles`` (from the same tree the index parsed) and the
``conventions`` found in it (when a ``find_convention`` first scanned it), each behind the same MAC, read only
when an operation asks (:meth:`IndexStore.judgment`). Records share their definitions' name, kind and
parent strings (:func:`compact`): marshal stores an interned string as such and interns it again on load. (A
file's used names are one space-separated string, which loads as one object rather than hundreds.)
"""

from __future__ import annotations

import logging
import marshal
import os
import sqlite3
import stat
import sys
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from itertools import chain
from operator import itemgetter
from pathlib import Path
from typing import Any
from urllib.parse import quote

from aries_kernel.codebase.index_key import TAG_BYTES, IndexKey, index_key
from aries_kernel.codebase.lazy_mapping import LazyValues

__all__ = [
    "SCHEMA_VERSION",
    "IndexStore",
    "Pending",
    "Records",
    "StoredFile",
    "ForeignIndex",
    "UnsafePath",
    "compact",
    "copy_index",
    "schema_of",
    "ensure_aries_dir",
    "JUDGMENT_KINDS",
]

SCHEMA_VERSION = (
    "13"  # bump when extraction, the symbol hashes, the stored scores or the record format change
)
log = logging.getLogger(__name__)

# The index and sessions stay out of version control; the project brain (memory/) travels with the repository.
_ARIES_GITIGNORE = "# Written by aries-kernel: keep the index and sessions local, share the project brain.\n*\n!.gitignore\n!memory/\n!memory/**\n"
_TABLES = {
    "meta": ["key", "value"],
    "files": ["path", "size", "mtime_ns", "hash", "record"],
    "graph": ["name", "tag", "blob"],
    "judgment": ["path", "kind", "hash", "blob"],
}
JUDGMENT_KINDS = frozenset({"profiles", "conventions"})
_SIDE_FILES = ("-journal", "-wal", "-shm")
_STATUSES = frozenset({"indexed", "partial", "skipped"})
_TEXT_KEYS = ("file", "language", "status", "reason", "hash")
_INT_KEYS = ("size", "loc")
_BLOBS = frozenset({"graph", "rankings", "definitions"})  # the rows of the graph table
_READ_BATCH = 500  # records read from the files table per query

StoredFile = tuple[int, int, str, "Pending | dict[str, Any]"]  # size, mtime_ns, hash, the record when read


class UnsafePath(OSError):
    """``.aries`` or the index is a symlink (or not a folder/file): refused rather than written through."""


class ForeignIndex(Exception):
    """An index that cannot be copied: not this schema, not a database, or a row whose MAC does not verify."""


class _Broken(Exception):
    """The index file is not an index of ours: renamed aside and rebuilt."""


def ensure_aries_dir(root: Path) -> Path:
    """Create ``root/.aries`` with its ``.gitignore`` (kept if the user already has one).

    Raises :class:`UnsafePath` when ``.aries`` (or its ``.gitignore``) is a symlink or not a folder.
    """
    folder = root / ".aries"
    try:
        os.mkdir(folder)
    except FileExistsError:
        pass
    mode = os.lstat(folder).st_mode
    if not stat.S_ISDIR(mode):
        kind = "a symlink" if stat.S_ISLNK(mode) else "not a folder"
        raise UnsafePath(
            f"{folder} is {kind}; aries-kernel does not write through it (remove it to continue)"
        )
    gitignore = folder / ".gitignore"
    try:
        fd = os.open(gitignore, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    except FileExistsError:
        if os.path.islink(gitignore):
            raise UnsafePath(f"{gitignore} is a symlink; aries-kernel does not write through it") from None
    else:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(_ARIES_GITIGNORE)
    return folder


class IndexStore:
    """Reads and writes ``index.db``; every method is safe to call from any thread.

    Writes that fail (a full disk, a file changed under us) are logged and dropped: the index in memory stays
    right, and the next start re-parses what was not stored.
    """

    def __init__(self, path: Path, key: IndexKey | None = None) -> None:
        self.path = path
        self._key = key or index_key()
        self._lock = threading.Lock()
        self.rebuilt_reason: str | None = None
        # What the user should hear about: an index renamed aside. Shown in ``skipped()``.
        self.notice: str | None = None
        self._refuse_links()
        self._conn = self._open()

    def _refuse_links(self) -> None:
        for suffix in ("", *_SIDE_FILES):
            candidate = Path(str(self.path) + suffix)
            if candidate.is_symlink():
                raise UnsafePath(
                    f"{candidate} is a symlink; not opened, so nothing is written through it (the index is "
                    "kept in memory; remove the link to persist it)"
                )

    def _open(self) -> sqlite3.Connection:
        # Several kernels may open one repository's index at once, so a stale index is emptied inside a
        # transaction, never deleted from under another connection; only a file that is not an index of ours
        # is moved aside.
        conn: sqlite3.Connection | None = None
        try:
            conn = self._connect()
            self._check_schema(conn)
            with conn:
                row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
                if row is None and conn.execute("SELECT 1 FROM files LIMIT 1").fetchone() is not None:
                    raise _Broken("a files table without aries-kernel's schema version")
                if row is None or row[0] != SCHEMA_VERSION:
                    if row is not None:
                        self.rebuilt_reason = f"schema version {row[0]} != {SCHEMA_VERSION}"
                        log.info("Emptying %s: %s", self.path, self.rebuilt_reason)
                    _empty(conn)
                    conn.execute(
                        "INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (SCHEMA_VERSION,)
                    )
                self._claim(conn)
            return conn
        except (sqlite3.Error, _Broken) as exc:
            if conn is not None:
                conn.close()
            return self._rebuild(str(exc) or type(exc).__name__)

    def _rebuild(self, why: str) -> sqlite3.Connection:
        """Move the bad file aside (never delete what may be someone's data) and start a fresh index."""
        self.rebuilt_reason = f"unreadable ({why})"
        aside = Path(f"{self.path}.broken-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
        for suffix in ("", *_SIDE_FILES):
            source = Path(str(self.path) + suffix)
            if source.exists() and not source.is_symlink():
                os.replace(source, str(aside) + suffix)
        self.notice = f"{self.path} was not a usable index ({why}); moved aside to {aside.name} and rebuilt from the files"
        log.warning("%s", self.notice)
        conn = self._connect()
        with conn:
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (SCHEMA_VERSION,))
            self._claim(conn)
        return conn

    def _claim(self, conn: sqlite3.Connection) -> None:
        """Record whether rows are written under a process-only key; empty rows whose such key is gone.

        Rows written under another process's key would otherwise fail their MACs and make every restart with a
        read-only home move the index aside. A forged marker only gets the rows emptied: none is unmarshalled.
        """
        row = conn.execute("SELECT value FROM meta WHERE key = 'key'").fetchone()
        if row is not None and row[0] != self._key.marker:
            self.rebuilt_reason = "written under a key that ended with its process"
            log.info("Emptying %s: %s", self.path, self.rebuilt_reason)
            _empty(conn)
        if self._key.marker is None:
            conn.execute("DELETE FROM meta WHERE key = 'key'")
        else:
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('key', ?)", (self._key.marker,))

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=30, check_same_thread=False)
        try:
            # Deleted rows are zeroed on disk, so text an older index held does not linger in free pages; and
            # no SQL a hostile schema declares (views, triggers) runs with our privileges.
            conn.execute("PRAGMA secure_delete = ON")
            conn.execute("PRAGMA trusted_schema = OFF")
            with conn:
                conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, size INTEGER, mtime_ns INTEGER, "
                    "hash TEXT, record BLOB)"
                )
                conn.execute("CREATE TABLE IF NOT EXISTS graph (name TEXT PRIMARY KEY, tag BLOB, blob BLOB)")
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS judgment (path TEXT, kind TEXT, hash TEXT, blob BLOB, "
                    "PRIMARY KEY (path, kind))"
                )
        except BaseException:
            conn.close()
            raise
        return conn

    @staticmethod
    def _check_schema(conn: sqlite3.Connection) -> None:
        """Only our tables (and their automatic indexes), with our columns."""
        for kind, name in conn.execute("SELECT type, name FROM sqlite_master"):
            if kind == "table" and name in _TABLES:
                continue
            if kind == "index" and name.startswith("sqlite_autoindex_"):
                continue
            raise _Broken(f"unexpected {kind} {name!r}")
        for table, columns in _TABLES.items():
            found = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
            if found != columns:
                raise _Broken(f"table {table} has columns {found}, expected {columns}")

    def load(self) -> dict[str, StoredFile]:
        """Every stored file's stat keys and hash, with a :class:`Pending` in place of its record (read by
        :meth:`records` when first used, as a warm start needs few of them). Only the first row is verified
        here: one that does not means the file is not an index we wrote (a repository's own, or another
        user's), so it is moved aside and an empty index is returned; any other row that does not verify is
        found when read, and its file parsed again."""
        try:
            with self._lock:
                rows = self._conn.execute("SELECT path, size, mtime_ns, hash FROM files").fetchall()
                first = self._conn.execute(
                    "SELECT path, size, mtime_ns, hash, record FROM files LIMIT 1"
                ).fetchone()
            if rows:
                paths, sizes, mtimes, digests = zip(*rows, strict=True)
                if not (_of(paths, str) and _of(sizes, int) and _of(mtimes, int) and _of(digests, str)):
                    bad = next(row for row in rows if tuple(map(type, row)) != (str, int, int, str))
                    raise _Broken(f"malformed row for {bad[0]!r}")
            out: dict[str, StoredFile] = {
                path: (size, mtime_ns, digest, Pending(size, mtime_ns, digest))
                for path, size, mtime_ns, digest in rows
            }
            if first is not None:
                out[first[0]] = (*first[1:4], self._decode_row(*first))
            return out
        except (sqlite3.Error, _Broken) as exc:
            with self._lock:
                self._conn.close()
                self._conn = self._rebuild(str(exc) or type(exc).__name__)
            return {}

    def _rows_of(self, select: str, params: list[Any], paths: list[str]) -> Iterator[tuple[Any, ...]]:
        """The rows of ``select`` (ending in WHERE or AND) whose path is one of ``paths``, read in batches with
        the lock released between them: a query reading one row while the index reads them all waits for a
        batch, not for the whole table."""
        for start in range(0, len(paths), _READ_BATCH):
            batch = paths[start : start + _READ_BATCH]
            with self._lock:
                rows = self._conn.execute(
                    f"{select} path IN ({', '.join('?' * len(batch))})", [*params, *batch]
                ).fetchall()
            yield from rows

    def records(self, wanted: dict[str, Pending]) -> dict[str, dict[str, Any]]:
        """The records of ``wanted`` whose rows still hold those stat keys and hash, verify and are well formed;
        the others are left out (the caller parses their files again)."""
        found: dict[str, dict[str, Any]] = {}
        try:
            for path, size, mtime_ns, digest, blob in self._rows_of(
                "SELECT path, size, mtime_ns, hash, record FROM files WHERE", [], list(wanted)
            ):
                known = wanted.get(path)
                if known is None or (known.size, known.mtime_ns, known.digest) != (
                    size,
                    mtime_ns,
                    digest,
                ):
                    continue
                try:
                    found[path] = self._decode_row(path, size, mtime_ns, digest, blob)
                except _Broken as exc:
                    log.warning("A stored record in %s is not used: %s", self.path, exc)
        except sqlite3.Error as exc:
            log.warning("Could not read records from %s (%s); parsing those files again", self.path, exc)
        return found

    def save(
        self,
        rows: Iterable[tuple[str, int, int, dict[str, Any]]],
        profiles: Sequence[tuple[str, str, Any]] = (),
    ) -> None:
        """Store ``(path, size, mtime_ns, record)`` rows, replacing older ones, and with them (one transaction,
        one commit) the files' ``profiles`` rows, as :meth:`save_judgment` stores them."""
        rows = list(rows)

        def data() -> Iterator[tuple[str, int, int, str, bytes]]:
            # One row's bytes at a time: a cold index's rows are 100+ MB marshalled, not needed all at once.
            for rel, size, mtime, record in rows:
                blob = marshal.dumps(record)
                yield (
                    rel,
                    size,
                    mtime,
                    record["hash"],
                    self._key.tag((rel, size, mtime, record["hash"]), blob) + blob,
                )

        self._write(
            *([("INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?)", data())] if rows else []),
            *([self._judgment_rows("profiles", profiles)] if profiles else []),
        )

    def save_blob(self, name: str, blob: bytes | list[memoryview]) -> bytes:
        """Store the ``graph`` snapshot or its ``rankings`` (bytes, or consecutive parts), replacing the one
        before; returns its MAC, which names this very blob (the rankings record the MAC of the graph they were
        computed on)."""
        if name not in _BLOBS:
            raise ValueError(f"no stored blob is called {name!r}")
        parts = [memoryview(blob)] if isinstance(blob, bytes) else blob
        size = sum(part.nbytes for part in parts)
        tag = self._key.tag((name, size, 0, SCHEMA_VERSION), *parts)
        try:
            with self._lock, self._conn:
                # Written part by part into a zeroblob: binding one large value would copy it whole again.
                row = self._conn.execute(
                    "INSERT OR REPLACE INTO graph VALUES (?, ?, zeroblob(?))", (name, tag, size)
                ).lastrowid
                assert row is not None  # an INSERT that returned sets it (None only before any insert)
                if size:
                    with self._conn.blobopen("graph", "blob", row) as out:
                        for part in parts:
                            out.write(part)
        except (sqlite3.Error, ValueError) as exc:
            log.warning("Could not store the %s in %s (%s); it is recomputed next time", name, self.path, exc)
        return tag

    def load_blob(self, name: str) -> tuple[bytes, bytes] | None:
        """``(MAC, blob)`` of a stored blob when there is one and its MAC verifies (else None: recompute it)."""
        try:
            with self._lock:
                row = self._conn.execute("SELECT tag, blob FROM graph WHERE name = ?", (name,)).fetchone()
        except sqlite3.Error as exc:
            log.warning("Could not read the stored %s in %s (%s); recomputing it", name, self.path, exc)
            return None
        if row is None:
            return None
        tag, blob = row
        if isinstance(tag, bytes) and isinstance(blob, bytes):
            if self._key.verifies((name, len(blob), 0, SCHEMA_VERSION), blob, tag):
                return tag, blob
        log.warning("The stored %s in %s does not verify; recomputing it", name, self.path)
        return None

    def save_judgment(self, kind: str, rows: Iterable[tuple[str, str, Any]]) -> None:
        """Store ``(path, content hash, value)`` rows of one of :data:`JUDGMENT_KINDS` (a marshallable value),
        replacing older ones."""
        self._write(self._judgment_rows(kind, rows))

    def _judgment_rows(self, kind: str, rows: Iterable[tuple[str, str, Any]]) -> tuple[str, Iterator[Any]]:
        if kind not in JUDGMENT_KINDS:
            raise ValueError(f"no judgment data is called {kind!r}")

        def data() -> Iterator[tuple[str, str, str, bytes]]:
            for rel, digest, value in rows:
                blob = marshal.dumps(value)
                yield rel, kind, digest, self._key.tag((f"{kind}:{rel}", 0, 0, digest), blob) + blob

        return "INSERT OR REPLACE INTO judgment VALUES (?, ?, ?, ?)", data()

    def judgment(self, kind: str, wanted: dict[str, str]) -> dict[str, Any]:
        """The stored values of ``kind`` for the files of ``wanted`` (path -> content hash) whose rows hold that
        hash and verify; the others are left out (the caller computes them)."""
        found: dict[str, Any] = {}
        try:
            for path, digest, blob in self._rows_of(
                "SELECT path, hash, blob FROM judgment WHERE kind = ? AND", [kind], list(wanted)
            ):
                if wanted.get(path) != digest or not isinstance(blob, bytes):
                    continue
                tag, body = blob[:TAG_BYTES], blob[TAG_BYTES:]
                if not self._key.verifies((f"{kind}:{path}", 0, 0, digest), body, tag):
                    log.warning("Stored %s of %r in %s do not verify; not used", kind, path, self.path)
                    continue
                try:
                    found[path] = marshal.loads(body)
                except (EOFError, ValueError, TypeError, MemoryError, RecursionError):
                    log.warning("Stored %s of %r in %s do not load; not used", kind, path, self.path)
        except sqlite3.Error as exc:
            log.warning("Could not read the stored %s from %s (%s); computing them", kind, self.path, exc)
        return found

    @property
    def empty(self) -> bool:
        """Whether no file is stored (a first, cold index)."""
        try:
            with self._lock:
                return self._conn.execute("SELECT 1 FROM files LIMIT 1").fetchone() is None
        except sqlite3.Error:
            return True

    def copy_to(self, target: IndexStore, only: Collection[str] | None = None) -> int:
        """:func:`copy_index` of this store into ``target``, through a connection of its own (queries on this
        store do not wait for the copy)."""
        return copy_index(self.path, self._key, target, only)

    def delete(self, paths: Iterable[str]) -> None:
        """Forget files that are gone."""
        gone = [(p,) for p in paths]
        if gone:
            self._write(
                ("DELETE FROM files WHERE path = ?", gone), ("DELETE FROM judgment WHERE path = ?", gone)
            )

    def _write(self, *writes: tuple[str, Iterable[tuple[Any, ...]]]) -> None:
        """Each ``(statement, rows)`` of ``writes``, in one transaction."""
        if not writes:
            return
        try:
            with self._lock, self._conn:
                for sql, rows in writes:
                    self._conn.executemany(sql, rows)
        except (sqlite3.Error, ValueError) as exc:
            log.warning("Could not update %s (%s); the index in memory is unaffected", self.path, exc)

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._conn.close()

    def _decode_row(self, path: Any, size: Any, mtime_ns: Any, digest: Any, blob: Any) -> dict[str, Any]:
        """The record of one row: unmarshalled only once its MAC verifies, then checked field by field (a
        record feeds the graph, so a malformed one must not)."""
        if not (
            isinstance(path, str)
            and type(size) is int
            and type(mtime_ns) is int
            and isinstance(digest, str)
            and isinstance(blob, bytes)
        ):
            raise _Broken(f"malformed row for {path!r}")
        tag, body = blob[:TAG_BYTES], blob[TAG_BYTES:]
        if not self._key.verifies((path, size, mtime_ns, digest), body, tag):
            raise _Broken(
                f"the record for {path!r} was not written by this user's aries-kernel (its MAC does not "
                "verify): a foreign index, not loaded"
            )
        try:
            record = marshal.loads(body)
        except (EOFError, ValueError, TypeError, MemoryError, RecursionError) as exc:
            raise _Broken(f"undecodable record for {path!r} ({exc})") from None
        if not (
            _well_formed(record, path, digest)
            and _symbols_ok(record["symbols"])
            and _imports_ok(record["imports"])
        ):
            raise _Broken(f"malformed record for {path!r}")
        return record


def copy_index(
    path: Path,
    key: IndexKey,
    target: IndexStore,
    only: Collection[str] | None = None,
    stat_of: Callable[[str], tuple[int, int] | None] | None = None,
) -> int:
    """Copy the rows of the index at ``path`` into ``target`` in one transaction, each row's MAC checked under
    ``key`` and the row tagged again under ``target``'s; nothing is unmarshalled and nothing is written to
    ``path`` (a team's shared copy is only read). With ``only``, just those files are copied, and the graph and
    its scores only if no file was left out. ``stat_of(path)`` gives the (size, mtime_ns) a file is known to
    have with the same content as its row (None: not known); a row whose size matches takes them, so the
    file is not read again to be recognised. Returns how many files were copied.

    Raises :class:`ForeignIndex`, and copies nothing, when the file is not an index of this schema or a row
    does not verify (a forged or damaged copy)."""
    try:
        source = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True, timeout=30)
    except sqlite3.Error as exc:
        raise ForeignIndex(f"not readable ({exc})") from None
    copied = [0]
    try:
        IndexStore._check_schema(source)
        version = source.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if version is None or version[0] != SCHEMA_VERSION:
            found = version[0] if version else "none"
            raise ForeignIndex(f"schema version {found}, this aries-kernel reads {SCHEMA_VERSION}")

        def checked(table: str, row: tuple[Any, ...], fields: tuple[str, int, int, str], blob: Any) -> memoryview:
            """The body of a row whose MAC verifies under ``key`` (a view: 300+ MB of rows are not copied)."""
            body = memoryview(blob)[TAG_BYTES:] if isinstance(blob, bytes) else None
            if body is None or not key.verifies(fields, body, blob[:TAG_BYTES]):
                raise ForeignIndex(f"the {table} row of {row[0]!r} does not verify under its key")
            return body

        left_out = [0]

        def files() -> Iterator[tuple[Any, ...]]:
            for row in source.execute("SELECT path, size, mtime_ns, hash, record FROM files"):
                path, size, mtime_ns, digest, blob = row
                if only is not None and path not in only:
                    left_out[0] += 1
                    continue
                if not (
                    isinstance(path, str)
                    and type(size) is int
                    and type(mtime_ns) is int
                    and isinstance(digest, str)
                ):
                    raise ForeignIndex(f"malformed files row {path!r}")
                body = checked("files", row, (path, size, mtime_ns, digest), blob)
                local = stat_of(path) if stat_of is not None else None
                if local is not None and local[0] == size:
                    size, mtime_ns = local
                copied[0] += 1
                yield (
                    path,
                    size,
                    mtime_ns,
                    digest,
                    target._key.tag((path, size, mtime_ns, digest), body) + body,
                )

        def judgments() -> Iterator[tuple[Any, ...]]:
            for row in source.execute("SELECT path, kind, hash, blob FROM judgment"):
                path, kind, digest, blob = row
                if only is not None and path not in only:
                    continue
                if not (isinstance(path, str) and kind in JUDGMENT_KINDS and isinstance(digest, str)):
                    raise ForeignIndex(f"malformed judgment row {path!r}")
                fields = (f"{kind}:{path}", 0, 0, digest)
                body = checked("judgment", row, fields, blob)
                yield path, kind, digest, target._key.tag(fields, body) + body

        def graph() -> Iterator[tuple[Any, ...]]:
            if left_out[0]:  # a graph of files not all copied is not this index's graph
                return
            for row in source.execute("SELECT name, tag, blob FROM graph"):
                name, tag, blob = row
                if name not in _BLOBS or not isinstance(tag, bytes) or not isinstance(blob, bytes):
                    raise ForeignIndex(f"malformed graph row {name!r}")
                if not key.verifies((name, len(blob), 0, SCHEMA_VERSION), blob, tag):
                    raise ForeignIndex(f"the stored {name} does not verify under its key")
                yield name, target._key.tag((name, len(blob), 0, SCHEMA_VERSION), blob), blob

        # The judgment rows first (their fields hold no stat keys: ``stat_of`` may wait for git meanwhile), then
        # the files, then the graph, copied only when all the files were.
        with target._lock, target._conn:
            target._conn.executemany("INSERT OR REPLACE INTO judgment VALUES (?, ?, ?, ?)", judgments())
            target._conn.executemany("INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?)", files())
            target._conn.executemany("INSERT OR REPLACE INTO graph VALUES (?, ?, ?)", graph())
    except (sqlite3.Error, _Broken) as exc:
        raise ForeignIndex(f"not an index ({exc})") from None
    finally:
        source.close()
    return copied[0]


def schema_of(path: Path) -> str | None:
    """The schema version of the index at ``path``, read without writing to it (None: not an index)."""
    try:
        conn = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True, timeout=30)
        try:
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        finally:
            conn.close()
    except sqlite3.Error:
        return None
    return str(row[0]) if row else None


def _empty(conn: sqlite3.Connection) -> None:
    for table in ("files", "graph", "judgment"):
        conn.execute(f"DELETE FROM {table}")


class Pending:
    """A stored record not read yet: the stat keys and hash its row was listed with."""

    __slots__ = ("digest", "mtime_ns", "size", "status")

    def __init__(self, size: int, mtime_ns: int, digest: str) -> None:
        self.size, self.mtime_ns, self.digest = size, mtime_ns, digest
        self.status: str | None = None  # known without reading it when the stored graph says


class Records(LazyValues[dict[str, Any]]):
    """Records by path, in insertion order. Stored ones stay :class:`Pending` until used: ``fetch`` reads
    (and verifies) the records of pending entries, or parses their files again; :meth:`items` and
    :meth:`values` read every pending one first, in one pass."""

    def __init__(
        self,
        records: dict[str, Any],
        fetch: Callable[[dict[str, Pending]], dict[str, dict[str, Any]]],
    ) -> None:
        self._data = records
        self._fetch = fetch

    def __getitem__(self, rel: str) -> dict[str, Any]:
        value = self._data[rel]
        if type(value) is Pending:
            value = self._resolve({rel: value})[rel]
        return value

    def items(self) -> Any:
        self.load_all()
        return self._data.items()

    def values(self) -> Any:
        self.load_all()
        return self._data.values()

    def scan(
        self, rels: Iterable[str] | None = None, batch: int = 2_000
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """Every record (or those of ``rels`` that are held) with its path, in order; pending ones are read
        ``batch`` at a time and not kept, so a pass over a warm start's records holds one batch of them, not all
        (a later query reads them again)."""
        paths = list(self._data if rels is None else rels)
        for first in range(0, len(paths), batch):
            part = paths[first : first + batch]
            data = self._data
            pending = self._pending(part)
            found = self._fetch(pending) if pending else {}
            for rel in part:
                record = found.get(rel) or data.get(rel)
                if record is not None and type(record) is not Pending:  # else removed meanwhile
                    yield rel, record

    def load_all(self) -> None:
        """Read every pending record (safe while other threads read: values are only ever replaced)."""
        self.load(list(self._data))

    def load(self, rels: Iterable[str]) -> None:
        """Read the pending records of ``rels`` in one pass (not one query per file)."""
        pending = self._pending(rels)
        if pending:
            self._resolve(pending)

    def _pending(self, rels: Iterable[str]) -> dict[str, Pending]:
        """Those of ``rels`` whose records are still pending, with their placeholders."""
        data = self._data
        return {rel: v for rel in rels if type(v := data.get(rel)) is Pending}

    def _resolve(self, pending: dict[str, Pending]) -> dict[str, dict[str, Any]]:
        found = self._fetch(pending)
        for rel, record in found.items():
            if self._data.get(rel) is pending[rel]:  # not replaced meanwhile by a newer record
                self._data[rel] = record
        return found

    def digest(self, rel: str) -> str:
        """The content hash of ``rel``'s record, without reading it."""
        value = self._data[rel]
        return value.digest if type(value) is Pending else value["hash"]

    def status(self, rel: str) -> str:
        """The status of ``rel``'s record, read only when not known otherwise."""
        value = self._data[rel]
        if type(value) is Pending and value.status is not None:
            return value.status
        return self[rel]["status"]

    def know_status(self, rel: str, status: str) -> None:
        """``rel``'s pending record has ``status`` (the stored graph holds it with the same hash)."""
        value = self._data[rel]
        if type(value) is Pending:
            value.status = status

    def sort(self) -> None:
        """Put the paths in order (after files were added)."""
        self._data = dict(sorted(self._data.items()))


def compact(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with its definitions' names, kinds and parents interned: one string per distinct one across
    every record in memory, and, as marshal keeps interned strings interned, across records loaded again."""
    intern = sys.intern
    record["symbols"] = tuple(
        (intern(s[0]), intern(s[1]), s[2], s[3], s[4], intern(s[5]), s[6], s[7]) for s in record["symbols"]
    )
    return record


def _well_formed(record: Any, path: str, digest: str) -> bool:
    if not isinstance(record, dict) or record.get("file") != path or record.get("hash") != digest:
        return False
    if not all(isinstance(record.get(key), str) for key in _TEXT_KEYS):
        return False
    if record["status"] not in _STATUSES or not all(type(record.get(key)) is int for key in _INT_KEYS):
        return False
    symbols, imports, uses = record.get("symbols"), record.get("imports"), record.get("uses")
    if "cells" in record and not _cells_ok(record["cells"]):
        return False
    # The definitions and imports inside are checked for all records at once, by load.
    return isinstance(symbols, tuple) and isinstance(imports, tuple) and isinstance(uses, str)


def _cells_ok(cells: Any) -> bool:
    # A notebook's code cells: (index, cell id, first line, last line).
    if not isinstance(cells, tuple):
        return False
    types = _field_types(cells, 4)
    allowed: tuple[set[type], ...] = ({int}, {str}, {int}, {int})
    return types is not None and all(found <= kinds for found, kinds in zip(types, allowed, strict=True))


def _of(values: Iterable[Any], *kinds: type) -> bool:
    """Every value's type is exactly one of ``kinds`` (so a bool is no int)."""
    return set(map(type, values)) <= set(kinds)


def _field_types(rows: tuple[Any, ...], width: int) -> list[set[type]] | None:
    """The types found in each field of tuples of ``width`` fields, or None when a row is no such tuple."""
    if not _of(rows, tuple) or (rows and set(map(len, rows)) != {width}):
        return None
    return [set(map(type, map(itemgetter(i), rows))) for i in range(width)]


def _symbols_ok(symbols: tuple[Any, ...]) -> bool:
    # (name, kind, line, end_line, signature, parent, shape_hash, exact_hash); hashes None while pending.
    types = _field_types(symbols, 8)
    text: set[type] = {str}
    number: set[type] = {int}
    pending: set[type] = {str, type(None)}
    return types is not None and all(
        found <= allowed
        for found, allowed in zip(
            types, (text, text, number, number, text, text, pending, pending), strict=True
        )
    )


def _imports_ok(imports: tuple[Any, ...]) -> bool:
    # (module, names, level, type_only, line)
    types = _field_types(imports, 5)
    allowed: tuple[set[type], ...] = ({str}, {tuple}, {int}, {bool}, {int})
    return (
        types is not None
        and all(found <= kinds for found, kinds in zip(types, allowed, strict=True))
        and _of(chain.from_iterable(map(itemgetter(1), imports)), str)
    )
