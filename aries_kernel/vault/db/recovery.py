"""The SQLite file under a running kernel: moved aside when it is not a usable index, reopened or rebuilt when
it vanishes (see :mod:`aries_kernel.vault.db`), under an ``flock`` of its folder.

:class:`FileRecovery` is the part of :class:`~aries_kernel.vault.db.index.VaultIndex` that watches the file; the
functions below say what a SQLite error or a file on disk means.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from sqlalchemy import func, inspect, select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DatabaseError

from aries_kernel.vault.db import schema
from aries_kernel.vault.db.engine import sqlite_engine

__all__ = ["RECOVERY_ATTEMPTS", "FileRecovery", "is_lost"]

T = TypeVar("T")
_SIDE_FILES = ("-wal", "-shm", "-journal")
_HEADER_BYTES = 100  # a SQLite file starts with a 100-byte header
RECOVERY_ATTEMPTS = 5


class FileRecovery:
    """The SQLite file of an index: its identity, and reattaching when it is gone, replaced or damaged."""

    db_path: Path
    engine: Engine | None
    recreated: bool
    corrupt_copy: Path | None
    recovery: str | None
    recoveries: int
    rebuilt_unsynced: bool
    on_recreate: Callable[[], None] | None
    _lock: threading.RLock
    _recovering: threading.local
    _identity: tuple[int, int]
    _size_floor: int
    _retired: list[Engine]

    if TYPE_CHECKING:

        @property
        def shared(self) -> bool: ...

        def _transaction(self, engine: Engine, work: Callable[[Connection], T], write: bool) -> T: ...

        def _restore_learning(self, why: str) -> None: ...

        def log_recovery(self) -> None: ...

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
        if self.shared:
            return True  # a server database does not vanish from under a path
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
                self._start_fresh()
            try:
                engine = self._open_engine()
            except DatabaseError as exc:
                if self._on_disk() is None:
                    # Deleted between the look above and the open (a user's rm takes no lock; mode=rw then
                    # fails with "unable to open database file"): build a new one, as for a missing file.
                    fresh = True
                    self._start_fresh()
                    engine = self._open_engine()
                elif not (_is_corruption(exc) or _is_foreign_schema(exc)):
                    raise
                else:
                    self.corrupt_copy = self._move_aside("corrupt")
                    why = why or (
                        f"{self.db_path} could not be used ({exc.orig}); kept as {self.corrupt_copy.name}, "
                        "a new index was built from the notes"
                    )
                    fresh = True
                    self._build_fresh()
                    engine = self._open_engine()
            # None: deleted again since it was opened (a user's rm takes no lock); the next use then finds the
            # file gone and attaches again, before it reads or writes.
            info = self._on_disk()
        old, self.engine = self.engine, engine
        self._identity, self._size_floor = (
            ((info.st_dev, info.st_ino), info.st_size) if info else ((-1, -1), 0)
        )
        self.recreated = self.recreated or fresh
        if old is not None:
            self._retire(old)
        if lost is not None or why:
            self.recoveries += 1
            self.recovery = why
        if fresh:
            self.rebuilt_unsynced = True
            self._restore_learning(why)

    def _move_aside(self, label: str) -> Path:
        aside = self.db_path.with_name(f"{self.db_path.name}.{label}-{time.time_ns()}")
        for suffix in ("", *_SIDE_FILES):
            part = Path(str(self.db_path) + suffix)
            if os.path.lexists(part):
                part.replace(Path(str(aside) + suffix))
        return aside

    def _open_engine(self) -> Engine:
        engine = sqlite_engine(self.db_path)
        try:
            # Reading the schema proves the file is a database before we try to migrate it.
            self._transaction(engine, lambda conn: inspect(conn).get_table_names(), write=False)
            self._transaction(engine, schema.migrate, write=True)
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

    def _start_fresh(self) -> None:
        """Build a new index in place of a missing one; -wal/-shm left by a vanished file would be replayed into
        the new one ("malformed"), so they go first."""
        for suffix in _SIDE_FILES:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(str(self.db_path) + suffix)
        self._build_fresh()

    def _build_fresh(self) -> None:
        """Build a migrated, empty index beside :attr:`db_path` and rename it into place (only :meth:`_attach`
        does, under the folder lock), so no reader ever sees a file without tables."""
        building = self.db_path.with_name(f"{self.db_path.name}.building-{os.getpid()}-{time.time_ns()}")
        engine = sqlite_engine(building, create=True)
        try:
            self._transaction(engine, schema.migrate, write=True)
        finally:
            engine.dispose()  # the last connection checkpoints the WAL into the file and removes it
        os.replace(building, self.db_path)


def _has_sqlite_header(db_path: Path) -> bool:
    try:
        with open(db_path, "rb") as handle:
            return handle.read(_HEADER_BYTES).startswith(b"SQLite format 3\x00")
    except OSError:
        return False


def _is_corruption(exc: DatabaseError) -> bool:
    text = str(exc.orig).lower()
    return "not a database" in text or "malformed" in text or "corrupt" in text


def _is_foreign_schema(exc: DatabaseError) -> bool:
    # Another program's SQLite file at our path: its tables clash with our migrations or lack our columns.
    text = str(exc.orig).lower()
    return "already exists" in text or "no such table" in text or "no such column" in text


def is_lost(exc: DatabaseError) -> bool:
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
        have = set(inspect(conn).get_table_names())
        if "state" in have and not conn.execute(select(func.count()).select_from(schema.state)).scalar():
            have.discard("state")
    return [t for t in _TABLES if t not in have]
