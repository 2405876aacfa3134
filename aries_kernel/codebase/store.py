"""The on-disk index cache, ``.aries/index.db``: one row per file with its stat keys, content hash and record.

It is a cache and nothing more: a database with another schema version, or one that is not readable, is
deleted and rebuilt from the files. Records are stored with :mod:`marshal` (they are plain tuples and dicts),
which loads a large repository's index in a fraction of the time parsing it takes.
"""

from __future__ import annotations

import logging
import marshal
import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["SCHEMA_VERSION", "IndexStore", "StoredFile", "ensure_aries_dir"]

SCHEMA_VERSION = "4"  # bump when extraction or the symbol hashes change: old rows would be stale
log = logging.getLogger(__name__)

# The index and sessions stay out of version control; the project brain (memory/) travels with the repository.
_ARIES_GITIGNORE = "# Written by aries-kernel: keep the index and sessions local, share the project brain.\n*\n!.gitignore\n!memory/\n!memory/**\n"

StoredFile = tuple[int, int, str, dict[str, Any]]  # size, mtime_ns, hash, record


def ensure_aries_dir(root: Path) -> Path:
    """Create ``root/.aries`` with its ``.gitignore`` (kept if the user already has one)."""
    folder = root / ".aries"
    folder.mkdir(parents=True, exist_ok=True)
    gitignore = folder / ".gitignore"
    if not gitignore.exists():
        gitignore.write_text(_ARIES_GITIGNORE, encoding="utf-8")
    return folder


class IndexStore:
    """Reads and writes ``index.db``; every method is safe to call from any thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self.rebuilt_reason: str | None = None
        self._conn = self._open()

    def _open(self) -> sqlite3.Connection:
        # Several kernels may open one repository's index at once, so a stale index is emptied inside a
        # transaction, never deleted from under another connection; only an unreadable file is replaced.
        try:
            conn = self._connect()
            with conn:
                row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
                if row is None or row[0] != SCHEMA_VERSION:
                    if row is not None:
                        self.rebuilt_reason = f"schema version {row[0]} != {SCHEMA_VERSION}"
                        log.info("Emptying %s: %s", self.path, self.rebuilt_reason)
                    conn.execute("DELETE FROM files")
                    conn.execute(
                        "INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (SCHEMA_VERSION,)
                    )
            return conn
        except sqlite3.DatabaseError as exc:
            self.rebuilt_reason = f"unreadable ({exc})"
        log.info("Rebuilding %s: %s", self.path, self.rebuilt_reason)
        for suffix in ("", "-journal", "-wal", "-shm"):
            Path(str(self.path) + suffix).unlink(missing_ok=True)
        conn = self._connect()
        with conn:
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (SCHEMA_VERSION,))
        return conn

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=30, check_same_thread=False)
        with conn:
            conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, size INTEGER, mtime_ns INTEGER, "
                "hash TEXT, record BLOB)"
            )
        return conn

    def load(self) -> dict[str, StoredFile]:
        """Every stored file; rows that do not decode are dropped (they will be re-parsed)."""
        with self._lock:
            rows = self._conn.execute("SELECT path, size, mtime_ns, hash, record FROM files").fetchall()
        out: dict[str, StoredFile] = {}
        for path, size, mtime_ns, digest, blob in rows:
            try:
                out[path] = (size, mtime_ns, digest, marshal.loads(blob))
            except (EOFError, ValueError, TypeError):
                continue
        return out

    def save(self, rows: Iterable[tuple[str, int, int, dict[str, Any]]]) -> None:
        """Store ``(path, size, mtime_ns, record)`` rows, replacing older ones."""
        data = [
            (rel, size, mtime, record["hash"], marshal.dumps(record)) for rel, size, mtime, record in rows
        ]
        with self._lock, self._conn:
            self._conn.executemany("INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?)", data)

    def delete(self, paths: Iterable[str]) -> None:
        """Forget files that are gone."""
        with self._lock, self._conn:
            self._conn.executemany("DELETE FROM files WHERE path = ?", [(p,) for p in paths])

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._conn.close()
