"""The vault's index database: one :class:`VaultIndex` owns its SQLAlchemy engine and its schema.

Two backends, one code path of SQLAlchemy Core queries (tables and migrations in :mod:`.schema`):

* **SQLite** (the default, one file per vault folder): WAL mode with a busy timeout, FTS5 for BM25. Every write
  runs inside ``BEGIN IMMEDIATE`` (so two processes never deadlock upgrading a read lock) and is retried with
  backoff while another writer holds the database, so "database is locked" does not reach the user.
* **PostgreSQL** (``AriesVault.url`` or ``$ARIES_VAULT_URL``, the team vault): one schema per vault, a weighted
  ``tsvector`` with a GIN index for full-text search, scored as BM25's equivalent (each term's IDF, computed
  like FTS5's, times ``ts_rank`` of that term, with FTS5's column weights 4/2/1). Writers take a transaction
  advisory lock, which serializes them exactly like ``BEGIN IMMEDIATE``. While the server is away (restarted,
  unreachable) every read and write waits and retries with backoff for ``retry_seconds``, logging once what is
  wrong, then raises :class:`VaultUnavailableError`; a server that refuses the login or the database raises it
  at once. Credentials come only from the URL the user gave, the ``PG*`` environment or ``~/.pgpass`` (libpq
  reads both); aries-kernel never writes them anywhere. libpq itself parses the URL (or key=value string,
  :func:`server_parameters`); its parameters, password included, go only to the engine's connect arguments,
  and :attr:`VaultIndex.url`, every message, log line and error show it with its passwords as ``***``
  (:func:`aries_kernel.redact.mask_url`).

The schema is built by named, append-only migrations recorded in ``_vault_migrations``. A SQLite file that is
not a database, is damaged, has another schema or is a symlink is moved aside (kept for inspection, named in
:attr:`VaultIndex.recovery`) and rebuilt; notes come back from the markdown files, learned state from the export
that :meth:`VaultIndex.save_learning` keeps beside the file, and :attr:`VaultIndex.rebuild_report` (also logged as
a warning) says what was restored, or that it was lost.

The SQLite file can also vanish under a running kernel: deleted, replaced or truncated by someone else. Before
every transaction the index compares the file's ``st_dev``/``st_ino`` (and that it did not shrink) with the one
it opened, and after every write it checks again; SQLite errors that mean the file is gone ("malformed", "no
such table", "not a database", "readonly") are caught too. Then it reopens the file, or builds a fresh one when
none is left (removing the orphaned ``-wal``/``-shm`` that would make a new file look "malformed"), under an
``flock`` of the folder so two processes never rebuild at once, and calls :attr:`VaultIndex.on_recreate` so its
owner re-indexes the markdown notes: an add whose transaction went to the vanished file is indexed again.

Learned state (``access``, ``q_values``, ``cooccurrence``) is kept per user (:attr:`VaultIndex.user`), so in a
team vault one user's habits never rerank another's memory; notes record their ``author`` and the audit log its
``actor``. A note whose file left the folder keeps it for :data:`MISSING_GRACE_SECONDS` (another git branch may
be checked out; :meth:`VaultIndex.sweep_learned`); a new note under an archived note's title starts from the
prior while the archive entry keeps the old state (:meth:`VaultIndex.set_aside_learning`). The learning export
is read only as a regular file of at most :data:`LEARNING_EXPORT_MAX_BYTES`; anything else is kept aside.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import math
import os
import random
import re
import sqlite3
import stat
import threading
import time
import urllib.parse
import weakref
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from sqlalchemy import (
    and_,
    bindparam,
    create_engine,
    delete,
    event,
    func,
    inspect,
    literal,
    not_,
    or_,
    select,
    text,
    union,
    update,
)
from sqlalchemy.dialects import postgresql as _pg
from sqlalchemy.dialects import sqlite as _sqlite
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DatabaseError, DBAPIError, OperationalError
from sqlalchemy.pool import QueuePool
from sqlalchemy.sql import Executable

from aries_kernel import rootfs
from aries_kernel.redact import mask_url, redact
from aries_kernel.vault import learning, schema
from aries_kernel.vault.notes import Note, normalize_title
from aries_kernel.vault.provenance import Provenance
from aries_kernel.vault.provenance import current as current_provenance
from aries_kernel.vault.schema import (
    MIGRATIONS,
    access,
    archive,
    audit,
    cooccurrence,
    embeddings,
    links,
    missing,
    notes,
    q_values,
)

__all__ = [
    "MIGRATIONS",
    "VaultBusyError",
    "VaultIndex",
    "VaultUnavailableError",
    "fts_query",
    "query_terms",
    "server_parameters",
]

T = TypeVar("T")
log = logging.getLogger(__name__)

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


class VaultUnavailableError(RuntimeError):
    """The vault's database server did not answer for longer than the retry budget."""


class _IndexLost(Exception):
    """The database file this process opened is no longer the one at its path (internal signal)."""


class _BadExport(Exception):
    """The learning export is there but is not one this vault can use; the message says why (internal)."""


_SIDE_FILES = ("-wal", "-shm", "-journal")
# Changes to learned state between two automatic exports (each session's end exports too).
LEARNING_EXPORT_EVERY = 50
# How long a note missing from the index keeps its learned state. A note leaves the index when its file leaves
# the folder, and in a project brain that is most often a checkout of another git branch; a branch can stay
# checked out for weeks (a long feature, a release), and the learned state would never come back. A note missing
# for longer than this was deleted, not switched away.
MISSING_GRACE_SECONDS = 30 * 86400
_HEADER_BYTES = 100  # a SQLite file starts with a 100-byte header
# From this many notes on, BM25 leaves out the notes that match only terms in more than 5% of notes (they cannot
# reach the top results, and matching them all is what makes a big vault's query slow); below it, every match.
COMMON_TERMS_MIN_NOTES = 5000
# The most of a learning export that is read (and parsed: JSON takes several times its size in memory). An export
# holds one row per Q-value, access and co-occurrence pair (about 60 bytes each): a vault of 10,000 notes used
# daily for years exports a few MiB, so a file over this is not an export this vault wrote.
LEARNING_EXPORT_MAX_BYTES = 64 * 1024 * 1024
# An export is opened without following a symlink and without waiting for a writer (a FIFO in its place).
_EXPORT_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_RECOVERY_ATTEMPTS = 5


def query_terms(text: str) -> list[str]:
    """The distinct lowercase words of ``text`` without stop words (all words if only stop words)."""
    words = re.findall(r"\w+", text.casefold())
    return list(dict.fromkeys([w for w in words if w not in _STOPWORDS] or words))


def fts_query(terms: Sequence[str]) -> str:
    """An FTS5 MATCH expression: each term quoted, OR-ed; "" for no terms."""
    return " OR ".join(f'"{t}"' for t in terms)


def server_parameters(url: str) -> tuple[str, dict[str, str]]:
    """The vault server ``url`` fit for messages (passwords as ``***``, key values redacted) and its libpq
    connection parameters, password included, as libpq itself parses it: a URL (``postgresql://``,
    ``postgres://``, ``postgresql+psycopg://``, the password in the userinfo or ``?password=``) or a key=value
    string (``host=db dbname=aries password='a b'``). Raises ValueError naming the setting when it is neither."""
    shown = redact(mask_url(url))
    setting = "ARIES_VAULT_URL (or c.AriesVault.url)"
    given = _PSYCOPG_SCHEME.sub("postgresql://", url.strip())
    if "://" in given and not given.startswith(("postgresql://", "postgres://")):
        raise ValueError(
            f"The vault URL {shown} is not a PostgreSQL one: {setting} takes postgresql://user@host:5432/db or "
            "a libpq key=value string (host=db dbname=aries)."
        )
    try:
        from psycopg import Error as PsycopgError
        from psycopg.conninfo import conninfo_to_dict
    except ImportError as exc:
        raise ImportError(
            f"The team vault ({setting}) needs psycopg 3: pip install 'aries-kernel[postgres]'."
        ) from exc
    try:
        parameters = conninfo_to_dict(given)
    except PsycopgError as exc:
        # libpq quotes the text it stumbled on, which can be part of a password: neither it nor the value is shown.
        reason = re.sub(r'"[^"]*"', '"..."', str(exc).strip().splitlines()[0] if str(exc).strip() else "")
        raise ValueError(
            f"{setting} is not a URL or key=value string libpq can read ({reason}); a value with spaces or "
            "quotes is written in single quotes (password='a b'), in a URL percent-encoded."
        ) from None
    return shown, {name: str(value) for name, value in parameters.items()}


_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
# SQLAlchemy's name for the psycopg driver, which libpq's own URL parser does not know.
_PSYCOPG_SCHEME = re.compile(r"^\s*postgres(?:ql)?\+psycopg://")
# ts_rank's weights are given for {D, C, B, A}: body C, description B, title A, as FTS5's bm25(4, 2, 1).
_TS_WEIGHTS = "'{0.1, 0.25, 0.5, 1.0}'::float4[]"
# Server gone or going: restarted, shut down, refused, or the connection cut under a transaction.
_AWAY = (
    "connection refused",
    "could not connect",
    "server closed the connection",
    "terminating connection",
    "the database system is",
    "connection is closed",
    "consuming input failed",
    "connection timeout",
    "timeout expired",
    "no connection to the server",
    "connection to server",
    "cannot connect now",
)
# The server answered and said no (the login or the database), which waiting does not change.
_REFUSED = ("password authentication failed", "no password supplied", "pg_hba.conf rejects", "does not exist")


class VaultIndex:
    """The index database of one vault (notes, links, embeddings, learned state, audit, archive).

    ``db_path`` is the SQLite file; with ``url`` (a PostgreSQL URL) the index lives in schema ``schema`` of
    that database instead and ``db_path`` is unused. ``user`` names whose learned state and writes these are
    (default :func:`.schema.current_user`)."""

    def __init__(
        self,
        db_path: Path | None = None,
        retry_seconds: float = 60.0,
        *,
        url: str | None = None,
        schema_name: str = "aries_vault",
        user: str | None = None,
    ) -> None:
        self.db_path = Path(db_path) if db_path is not None else Path()
        self.retry_seconds = retry_seconds
        # The server as messages show it (passwords masked); the password itself goes only to the engine.
        self.url: str | None = None
        server: dict[str, str] = {}
        if url:
            self.url, server = server_parameters(url)
        self.backend = "postgresql" if self.url else "sqlite"
        self.schema_name = schema_name
        self.user = user or schema.current_user()
        if self.url and not _SCHEMA_NAME.match(schema_name):
            raise ValueError(
                f"The vault schema name {schema_name!r} must be lowercase letters, digits and _ (at most 63)."
            )
        self.where = f"{self.url} (schema {schema_name})" if self.url else str(self.db_path)
        self._lock_key = int.from_bytes(
            hashlib.blake2b(schema_name.encode(), digest_size=8).digest(), "big"
        ) - (1 << 63)
        self.recreated = False
        self.corrupt_copy: Path | None = None
        # What the last reopen or rebuild was, and why (None while the file opened first is in use).
        self.recovery: str | None = None
        self.recoveries = 0
        # What the last rebuild of a damaged or missing file restored of the learned state, or that it was lost;
        # kept for the life of the index so the vault's status can show it.
        self.rebuild_report: str | None = None
        # What was wrong with the learning export when it was last merged into (kept aside; see save_learning).
        self.learning_problem: str | None = None
        # The automatic export of this user's learned state, beside the SQLite file (a server has none).
        self.learning_path = (
            None if self.url else self.db_path.with_name(f"{self.db_path.stem}.learning.json")
        )
        self._unsaved = 0
        # Learned state set aside for archived notes (archive.learned by archived_path), read back from the export
        # after a rebuild: the archive entries it belongs to are listed again only afterwards
        # (NoteStore.list_archived_files), which takes it from here.
        self.archived_learning: dict[str, str] = {}
        # True from building a fresh file until the files are indexed into it: those files are the notes the old
        # file held, not new notes (a note under an archived title must not set its restored state aside).
        self.rebuilt_unsynced = False
        # Called after a reopen or rebuild, so the owner can re-index its files (NoteStore.sync).
        self.on_recreate: Callable[[], None] | None = None
        # What is wrong with the server right now ("" while it answers), for whoever shows status.
        self.status = ""
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
        if self.url:
            self._attach_server(server)
        else:
            self._attach(lost=None, why="")

    @property
    def shared(self) -> bool:
        """Whether the database, not the folder, is the source of truth (a PostgreSQL team vault)."""
        return self.backend == "postgresql"

    def _attach_server(self, server: Mapping[str, str]) -> None:
        """Connect to the server with libpq ``server`` parameters, which only the engine's connect arguments
        keep: its URL names the driver alone, so nothing SQLAlchemy renders or raises can hold the password."""
        connect = {"connect_timeout": "5", **server}
        # search_path confines every unqualified table name to this vault's schema.
        connect["options"] = f"{server.get('options', '')} -c search_path={self.schema_name}".strip()
        engine = create_engine(
            "postgresql+psycopg://", pool_pre_ping=True, pool_size=2, max_overflow=4, connect_args=connect
        )
        self.engine = engine
        # A vault dropped without close() still closes its server connections (no open sockets left behind).
        weakref.finalize(self, engine.dispose)

        def build(conn: Connection) -> None:
            conn.exec_driver_sql(f"CREATE SCHEMA IF NOT EXISTS {self.schema_name}")
            schema.migrate(conn)
            # A fresh schema with the tables: the state row must be there, as on SQLite.
            if conn.execute(select(func.count()).select_from(schema.state)).scalar() == 0:
                raise DatabaseError("schema check", None, RuntimeError(f"{self.where}: state row missing"))

        try:
            self._transaction(engine, build, write=True)
        except BaseException:
            engine.dispose()
            raise

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
        engine = _make_engine(self.db_path)
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

    def _restore_learning(self, why: str) -> None:
        """After building a fresh file: bring back the learned state from :attr:`learning_path` and say so, or
        say that it was lost when the fresh file replaced one (``why``) and there is no export to restore, or
        that the export was unusable (a FIFO, folder, symlink, oversized or malformed file: kept aside)."""
        assert self.learning_path is not None
        if not why and not os.path.lexists(self.learning_path):
            return  # a new vault: nothing was learned yet
        what = "learned state (Q-values, access history, co-occurrence)"
        try:
            export = self._read_export()
            if export is None:
                raise FileNotFoundError(self.learning_path)
            data = export["users"][self.user]
            self.import_learning(data)
        except FileNotFoundError:
            told = f"the {what} was lost: there was no export at {self.learning_path} to restore it from."
        except _BadExport as exc:
            told = f"the {what} was lost: {exc}"
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            told = (
                f"the {what} was lost: its export {self.learning_path} has none of {self.user}'s or could not "
                f"be read ({type(exc).__name__}: {exc})."
            )
        else:
            at = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(float(export.get("exported_at", 0))))
            told = (
                f"the {what} was restored from {self.learning_path} as of {at} "
                f"({len(data.get('q_values', []))} Q-values, {len(data.get('access', []))} accesses, "
                f"{len(data.get('cooccurrence', []))} co-occurrence pairs); what was learned after that is lost."
            )
        why = why or f"The vault index {self.db_path} was missing and was built again from the notes"
        self.rebuild_report = f"{why.rstrip('.')}; {told}"
        self.recovery = self.rebuild_report  # and into the audit log of the new file
        log.warning("%s", self.rebuild_report)

    def _read_export(self) -> dict[str, Any] | None:
        """The learning export at :attr:`learning_path`, or None when there is none.

        Read like the index file is checked: never through a symlink, never waiting on a FIFO, only a regular
        file of at most :data:`LEARNING_EXPORT_MAX_BYTES`, and only a JSON object with a ``users`` object. Any
        other thing there is renamed aside (``<name>.bad-<ns>``, kept for inspection) and :class:`_BadExport`
        raised, naming the file, the reason and where it was kept, so nothing blocks and the next save writes a
        good export in its place."""
        path = self.learning_path
        assert path is not None
        try:
            fd = os.open(path, _EXPORT_FLAGS)
        except FileNotFoundError:
            return None
        except OSError as exc:  # ELOOP: a symlink; ENXIO: a socket; EACCES: no permission
            try:
                mode = os.lstat(path).st_mode
            except FileNotFoundError:
                return None
            reason = (
                f"could not be opened ({exc.strerror or exc})"
                if stat.S_ISREG(mode)
                else f"is a {rootfs.kind(mode)}, not a regular file"
            )
            raise self._export_aside(reason) from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise self._export_aside(f"is a {rootfs.kind(info.st_mode)}, not a regular file")
            if info.st_size > LEARNING_EXPORT_MAX_BYTES:
                raise self._export_aside(
                    f"is {info.st_size:,} bytes, over the {LEARNING_EXPORT_MAX_BYTES:,}-byte limit of an export"
                )
            raw = rootfs.read_open(fd, LEARNING_EXPORT_MAX_BYTES)  # it may have grown since the fstat
        finally:
            os.close(fd)
        if len(raw) > LEARNING_EXPORT_MAX_BYTES:
            raise self._export_aside(f"grew over the {LEARNING_EXPORT_MAX_BYTES:,}-byte limit while read")
        try:
            export = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, RecursionError, ValueError) as exc:
            raise self._export_aside(f"is not valid JSON ({type(exc).__name__}: {exc})") from None
        if not isinstance(export, dict) or not isinstance(export.get("users"), dict):
            raise self._export_aside("is not a learning export (no 'users' object)")
        return export

    def _export_aside(self, reason: str) -> _BadExport:
        """Rename the unusable export aside (a symlink itself, never its target) and say so."""
        path = self.learning_path
        assert path is not None
        aside = path.with_name(f"{path.name}.bad-{time.time_ns()}")
        try:
            os.rename(path, aside)
        except FileNotFoundError:
            return _BadExport(f"its export {path} {reason}; it was gone when it was to be kept aside.")
        except OSError as exc:
            return _BadExport(
                f"its export {path} {reason}; it could not be kept aside ({exc.strerror or exc})."
            )
        return _BadExport(f"its export {path} {reason}; it was kept aside as {aside.name}.")

    def save_learning(self) -> Path | None:
        """Write this user's learned state to :attr:`learning_path` atomically (other users' entries kept);
        returns the path, or None on a server, whose database is the one copy (its backups are the server's).

        An unusable file in its place (see :meth:`_read_export`) is kept aside, reported in
        :attr:`learning_problem` and logged; the new export is written without the other users' entries it
        may have held. The write goes to a new temporary file (``O_EXCL | O_NOFOLLOW``) and ``os.replace``
        puts it in place, replacing whatever name is there (a symlink is replaced, never written through)."""
        if self.learning_path is None:
            return None
        data = self.export_learning()
        self._unsaved = 0
        path = self.learning_path
        with self._folder_lock():  # two kernels on one vault: each keeps the other's users
            try:
                export = self._read_export() or {}
            except _BadExport as exc:
                self.learning_problem = f"The learning export could not be merged: {exc}"
                log.warning("%s", self.learning_problem)
                export = {}
            users = dict(export.get("users") or {})
            users[self.user] = data
            export = {"format": "aries-vault-learning", "version": 1, "exported_at": time.time()}
            export["users"] = users
            temp = path.with_name(f".{path.name}.{os.getpid()}-{time.time_ns()}.tmp")
            try:
                fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
                with open(fd, "w", encoding="utf-8") as handle:
                    json.dump(export, handle)
                    handle.flush()
                    os.fsync(handle.fileno())
                os.replace(temp, path)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temp)
        return path

    def learning_changed(self, changes: int = 1) -> None:
        """Count ``changes`` to learned state; every :data:`LEARNING_EXPORT_EVERY` of them, save the export."""
        self._unsaved += changes
        if self._unsaved >= LEARNING_EXPORT_EVERY:
            self.save_learning()

    def log_recovery(self) -> None:
        """Write the last reopen or rebuild (if any) to the audit log of the file now in use."""
        if self.recovery:
            note, self.recovery = self.recovery, None
            self.write(lambda c: self.audit(c, time.time(), "recover", "", "", note))

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
        engine = _make_engine(building, create=True)
        try:
            self._transaction(engine, schema.migrate, write=True)
        finally:
            engine.dispose()  # the last connection checkpoints the WAL into the file and removes it
        os.replace(building, self.db_path)

    def _run(self, work: Callable[[Connection], T], write: bool) -> T:
        for attempt in range(_RECOVERY_ATTEMPTS):
            engine, identity = self._current_engine()
            try:
                result = self._transaction(engine, work, write)
            except DatabaseError as exc:
                if self.shared:
                    raise
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

    def _transaction(self, engine: Engine, work: Callable[[Connection], T], write: bool) -> T:
        """``work(conn)`` in one transaction, retried with backoff while another writer holds SQLite's lock or
        while the PostgreSQL server is away. A write on SQLite is ``BEGIN IMMEDIATE``; on PostgreSQL it first
        takes this vault's advisory lock, so writers are serialized the same way on both."""
        deadline = time.monotonic() + self.retry_seconds
        delay = 0.01
        while True:
            try:
                with engine.connect() as conn:
                    if not self.shared:
                        conn.execution_options(sqlite_immediate=write)
                    with conn.begin():
                        if write and self.shared:
                            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": self._lock_key})
                        result = work(conn)
                if self.status:
                    log.warning("The vault database %s answers again.", self.where)
                    self.status = ""
                return result
            except DBAPIError as exc:
                if self.shared and _is_refused(exc):
                    raise VaultUnavailableError(
                        f"The vault database {self.where} refused the connection ({_first_line(exc)}). Check "
                        "the URL and credentials (PG* environment or ~/.pgpass); notes already written to the "
                        "folder are indexed at the next sync."
                    ) from exc
                busy = isinstance(exc, OperationalError) and not self.shared and _is_busy(exc)
                away = self.shared and _is_away(exc)
                if not (busy or away):
                    raise
                if time.monotonic() > deadline:
                    if busy:
                        raise VaultBusyError(
                            f"The vault index {self.where} stayed locked by another process for "
                            f"{self.retry_seconds:.0f} s; try again, or close the other kernel."
                        ) from exc
                    raise VaultUnavailableError(
                        f"The vault database {self.where} did not answer for {self.retry_seconds:.0f} s "
                        f"({_first_line(exc)}). Check that the server runs and the URL and credentials "
                        "(PG* environment or ~/.pgpass) are right; notes already written to the folder are "
                        "indexed at the next sync."
                    ) from exc
                if away and not self.status:
                    self.status = (
                        f"The vault database {self.where} is not reachable ({_first_line(exc)}); waiting and "
                        f"retrying for up to {self.retry_seconds:.0f} s."
                    )
                    log.warning("%s", self.status)
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 0.5)

    # -- transactions ---------------------------------------------------------------------------------

    def write(self, work: Callable[[Connection], T]) -> T:
        """Run ``work(conn)`` in one serialized write transaction, retrying while locked or unreachable.

        If the SQLite file turns out to be gone or damaged, the index is reopened (see the module docstring) and
        ``work`` runs again on the live file."""
        return self._run(work, write=True)

    def read(self, work: Callable[[Connection], T]) -> T:
        """Run ``work(conn)`` on one consistent snapshot (a deferred read transaction)."""
        return self._run(work, write=False)

    def rows(self, statement: Executable) -> list[Any]:
        """All rows of one read-only SQLAlchemy statement."""
        return self._run(lambda conn: list(conn.execute(statement).all()), write=False)

    def first(self, statement: Executable) -> dict[str, Any] | None:
        """The first row of one read-only SQLAlchemy statement as a dict, or None."""
        row = self._run(lambda conn: conn.execute(statement).mappings().first(), write=False)
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
        return int(self.rows(select(schema.state.c.value).where(schema.state.c.name == "notes_gen"))[0][0])

    @staticmethod
    def bump(conn: Connection) -> None:
        """Mark notes or links as changed (callers do it inside their write transaction)."""
        state = schema.state
        conn.execute(update(state).where(state.c.name == "notes_gen").values(value=state.c.value + 1))

    def upsert_note(self, conn: Connection, note: Note, created: float, updated: float) -> int:
        """Insert or replace the row of ``note`` (matched by path) and its links; returns the row id. The
        author is the note's ``author`` front matter, else this index's user."""
        meta = note.meta
        # Hand-written notes reach the index too: their text is redacted like everything the vault writes.
        row = {
            "path": note.path,
            "title": note.title,
            "key": note.title.casefold(),
            "norm": normalize_title(note.title),
            "folder": note.folder,
            "type": redact(str(meta.get("type") or ""))[:200],
            "description": redact(str(meta.get("description") or ""))[:1000],
            "body": redact(note.body),
            "content_hash": note.content_hash,
            "created": created,
            "updated": updated,
            "size": note.size,
            "mtime_ns": note.mtime_ns,
            "author": str(meta.get("author") or self.user)[:200],
            **_provenance_columns(Provenance.from_front_matter(meta)),
            "superseded_by": str(meta.get("superseded_by") or "")[:400],
        }
        existing = conn.execute(select(notes.c.id).where(notes.c.path == note.path)).scalar()
        if existing is None:
            note_id = int(conn.execute(notes.insert().values(**row).returning(notes.c.id)).scalar_one())
        else:
            note_id = int(existing)
            conn.execute(update(notes).where(notes.c.id == note_id).values(**row))
            conn.execute(delete(links).where(links.c.src == note_id))
        if note.links:
            conn.execute(
                _insert(conn, links).on_conflict_do_nothing(),
                [{"src": note_id, "target": t} for t in note.links],
            )
        return note_id

    @staticmethod
    def delete_note(conn: Connection, path: str) -> None:
        """Remove the row (and its links) of the note at ``path``."""
        note_id = conn.execute(select(notes.c.id).where(notes.c.path == path)).scalar()
        if note_id is not None:
            conn.execute(delete(links).where(links.c.src == note_id))
            conn.execute(delete(notes).where(notes.c.id == note_id))

    def audit(
        self,
        conn: Connection,
        at: float,
        action: str,
        title: str,
        path: str,
        detail: str = "",
        *,
        provenance: Provenance | None = None,
        content_hash: str = "",
        change: str = "",
    ) -> None:
        """Append one line to the audit log, naming this index's user (every write to a note goes through) and
        the write's provenance (default: :func:`.provenance.current`); an edit also gives the note's content
        hash after it and what it changed."""
        conn.execute(
            audit.insert().values(
                at=at,
                action=action,
                title=title,
                path=path,
                detail=detail,
                actor=self.user,
                key=title.casefold(),
                content_hash=content_hash,
                change=change,
                **_provenance_columns(provenance or current_provenance()),
            )
        )

    def bm25(self, terms: Sequence[str], limit: int) -> list[tuple[int, float]]:
        """Best ``limit`` notes for any of ``terms`` as (id, BM25 score), higher is better.

        FTS5 scores every matching note before sorting, and a common word matches a large share of a big
        vault. So in a large vault, notes that contain only common words (in over 5% of notes) are left out;
        the other notes keep their exact scores (common words still count for them). If that leaves fewer than
        ``limit`` notes, the plain query runs. PostgreSQL scores the same way with its own full-text search
        (see the module docstring): per-term IDF as FTS5 computes it, times ``ts_rank`` of the term.
        """
        if not terms:
            return []
        idf = self._idf(terms) if self.shared else {}
        rows: list[Any] = []
        common = self._common_terms(terms)
        if common and len(common) < len(terms):
            rare = [t for t in terms if t not in common]
            rows = self.read(lambda conn: _search(conn, terms, limit, idf, within=rare))
        if len(rows) < limit:
            rows = self.read(lambda conn: _search(conn, terms, limit, idf))
        return [(int(r[0]), float(r[1])) for r in rows]

    def _idf(self, terms: Sequence[str]) -> dict[str, float]:
        """FTS5's IDF of each term, ``ln((N - df + 0.5) / (df + 0.5))`` floored at 1e-6, from the df cache."""
        self._refresh_df(terms)
        out = {}
        for t in terms:
            df = self._df[t]
            # The count and the document frequencies are read in two snapshots: never fewer notes than matches.
            n = max(self._note_count, df)
            out[t] = max(1e-6, math.log((n - df + 0.5) / (df + 0.5)))
        return out

    def _refresh_df(self, terms: Sequence[str]) -> None:
        generation = self.generation()
        if generation != self._df_generation:
            self._df_generation = generation
            self._df = {}
            self._note_count = int(self.rows(select(func.count()).select_from(notes))[0][0])
        wanted = [t for t in dict.fromkeys(terms) if t not in self._df]
        if wanted:
            self._df.update(zip(wanted, self.read(lambda conn: _document_counts(conn, wanted)), strict=True))

    def _common_terms(self, terms: Sequence[str]) -> list[str]:
        """Terms in more than 5% of notes, when the vault is big enough (:data:`COMMON_TERMS_MIN_NOTES`) for it
        to matter."""
        generation = self.generation()
        if generation != self._df_generation:
            self._df_generation = generation
            self._df = {}
            self._note_count = int(self.rows(select(func.count()).select_from(notes))[0][0])
        if self._note_count < COMMON_TERMS_MIN_NOTES:
            return []
        self._refresh_df(terms)
        return [t for t in terms if self._df[t] > 0.05 * self._note_count]

    @staticmethod
    def similar(conn: Connection, terms: Sequence[str], limit: int) -> list[int]:
        """Ids of the ``limit`` notes that best match any of ``terms`` (inside a write: the near-duplicate check)."""
        return [int(r[0]) for r in _search(conn, terms, limit, {})]

    # -- embeddings cache -----------------------------------------------------------------------------

    def cached_vectors(self, model: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """The cached vectors of ``model`` among ``hashes``, by content hash (so a reload after a write reads
        only the vectors it does not hold yet)."""
        found: dict[str, np.ndarray] = {}
        for chunk in _chunks(hashes, 500):
            rows = self.rows(
                select(embeddings.c.content_hash, embeddings.c.vector).where(
                    embeddings.c.model == model, embeddings.c.content_hash.in_(list(chunk))
                )
            )
            found.update((r[0], np.frombuffer(r[1], dtype=np.float32)) for r in rows)
        return found

    def store_vectors(self, model: str, vectors: dict[str, np.ndarray]) -> None:
        """Cache vectors by content hash (no generation bump: the notes did not change)."""
        if not vectors:
            return
        payload = [
            {"content_hash": h, "model": model, "vector": np.asarray(v, dtype=np.float32).tobytes()}
            for h, v in vectors.items()
        ]

        def store(conn: Connection) -> None:
            stmt = _insert(conn, embeddings)
            conn.execute(
                stmt.on_conflict_do_update(
                    index_elements=["content_hash", "model"], set_={"vector": stmt.excluded.vector}
                ),
                payload,
            )

        self.write(store)

    # -- learned state (this index's user only) -------------------------------------------------------

    def accesses(self, keys: Iterable[str] | None = None) -> list[tuple[str, float]]:
        """(key, time) of this user's recorded accesses, for ``keys`` or for every note."""
        base = select(access.c.key, access.c.at).where(access.c.username == self.user)
        if keys is None:
            return [(r[0], float(r[1])) for r in self.rows(base)]
        wanted = list(dict.fromkeys(keys))
        out: list[tuple[str, float]] = []
        for chunk in _chunks(wanted, 500):
            out.extend((r[0], float(r[1])) for r in self.rows(base.where(access.c.key.in_(list(chunk)))))
        return out

    def record_access(self, conn: Connection, key: str, at: float, kind: str) -> None:
        """One access to a note by this user (read, used, echo): it warms the note for this user."""
        conn.execute(
            _insert(conn, access).on_conflict_do_nothing(),
            {"username": self.user, "key": key, "at": at, "kind": kind},
        )

    def q_values(self) -> dict[str, tuple[float, int]]:
        """Key -> (Q, exposures) for every note with learned state of this user."""
        rows = self.rows(
            select(q_values.c.key, q_values.c.q, q_values.c.exposures).where(q_values.c.username == self.user)
        )
        return {r[0]: (float(r[1]), int(r[2])) for r in rows}

    def cooccurrence(self) -> list[tuple[str, str, float]]:
        """(uid a, uid b, weight) pairs of this user stored here (uids are ``source:key``)."""
        c = cooccurrence.c
        return [
            (r[0], r[1], float(r[2]))
            for r in self.rows(select(c.a, c.b, c.weight).where(c.username == self.user))
        ]

    def store_credit(
        self,
        conn: Connection,
        q_rows: Sequence[tuple[str, float, int, float]],
        pairs: Sequence[tuple[str, str]],
        used: Collection[str] = (),
    ) -> None:
        """Write a session's credit for this user: Q-values ``(key, q, exposures, at)``, and the co-occurrence
        of the notes ``used`` (uids): every pair stored here that touches one of them is weighted again by
        :func:`.learning.cooccurrence_weight` (``pairs``, the pairs used together, gain one) and dropped below
        :data:`.learning.COOC_FLOOR`."""
        if q_rows:
            stmt = _insert(conn, q_values)
            conn.execute(
                stmt.on_conflict_do_update(
                    index_elements=["username", "key"],
                    set_={
                        "q": stmt.excluded.q,
                        "exposures": stmt.excluded.exposures,
                        "updates": q_values.c.updates + 1,
                        "updated": stmt.excluded.updated,
                    },
                ),
                [
                    {"username": self.user, "key": k, "q": q, "exposures": e, "updates": 1, "updated": at}
                    for k, q, e, at in q_rows
                ],
            )
        touched = sorted(set(used) | {uid for pair in pairs for uid in pair})
        if not touched:
            return
        c = cooccurrence.c
        weights: dict[tuple[str, str], float] = {}
        for chunk in _chunks(touched, 250):
            rows = conn.execute(
                select(c.a, c.b, c.weight).where(
                    c.username == self.user, or_(c.a.in_(list(chunk)), c.b.in_(list(chunk)))
                )
            )
            weights.update(((r[0], r[1]), float(r[2])) for r in rows)
        together = set(pairs)
        for pair in together:
            weights.setdefault(pair, 0.0)
        after = {p: learning.cooccurrence_weight(w, p in together) for p, w in weights.items()}
        kept = [
            {"username": self.user, "a": a, "b": b, "weight": w}
            for (a, b), w in after.items()
            if w >= learning.COOC_FLOOR
        ]
        faded = [
            {"user_": self.user, "a_": a, "b_": b} for (a, b), w in after.items() if w < learning.COOC_FLOOR
        ]
        if kept:
            stmt = _insert(conn, cooccurrence)
            conn.execute(
                stmt.on_conflict_do_update(
                    index_elements=["username", "a", "b"], set_={"weight": stmt.excluded.weight}
                ),
                kept,
            )
        if faded:
            conn.execute(
                delete(cooccurrence).where(
                    c.username == bindparam("user_"), c.a == bindparam("a_"), c.b == bindparam("b_")
                ),
                faded,
            )

    def sweep_learned(
        self,
        conn: Connection,
        prefix: str,
        others: Mapping[str, Collection[str]],
        now: float,
        dry_run: bool = False,
    ) -> int:
        """Delete every user's learned rows of notes that are gone (only count them with ``dry_run``), and keep
        the record of missing notes; returns the number of rows deleted, recorded or cleared.

        A note is *missing* when it has learned rows but is neither indexed nor archived (a forgotten note keeps
        its learned state so :meth:`NoteStore.restore` brings it back): its file left the folder, often only
        because another git branch is checked out. The first sweep that finds it so records the time (table
        ``missing``); a sweep that finds it back (indexed or archived again) clears the record, its learned
        state untouched. It is *gone* once missing for :data:`MISSING_GRACE_SECONDS` (by ``now``); then its
        rows go. A purge (:meth:`NoteStore.purge`) removes everything at once, without waiting.

        This index's own notes are uids starting with ``prefix``; ``others`` gives, per uid prefix of another
        store, the keys of its notes that are not gone (:meth:`live_keys`; a co-occurrence row of the project
        brain may name a global note)."""
        n, a, c, m = notes.c, archive.c, cooccurrence.c, missing.c
        cutoff = now - MISSING_GRACE_SECONDS

        def absent(key: Any) -> Any:
            indexed = select(n.key).where(n.key == key).exists()
            archived = select(a.key).where(a.key == key, a.restored_at.is_(None)).exists()
            return not_(or_(indexed, archived))

        def gone(key: Any) -> Any:
            return and_(absent(key), select(m.key).where(m.key == key, m.since <= cutoff).exists())

        def own(uid: Any) -> Any:
            return func.substr(uid, 1, len(prefix)) == prefix

        def key_of(uid: Any) -> Any:
            return func.substr(uid, len(prefix) + 1)

        learned = union(
            select(q_values.c.key.label("key")),
            select(access.c.key.label("key")),
            select(key_of(c.a).label("key")).where(own(c.a)),
            select(key_of(c.b).label("key")).where(own(c.b)),
        ).subquery()
        newly_missing = select(learned.c.key).where(
            absent(learned.c.key), not_(select(m.key).where(m.key == learned.c.key).exists())
        )
        dead_pair = or_(and_(own(c.a), gone(key_of(c.a))), and_(own(c.b), gone(key_of(c.b))))
        stale = [
            (missing, not_(absent(m.key))),  # back: the record goes, the learned state stays
            (q_values, gone(q_values.c.key)),
            (access, gone(access.c.key)),
            (cooccurrence, dead_pair),
            (missing, m.since <= cutoff),  # its rows just went
        ]
        found = 0
        for table, where in stale:
            if dry_run:
                found += conn.execute(select(func.count()).select_from(table).where(where)).scalar() or 0
            else:
                found += conn.execute(delete(table).where(where)).rowcount
        if dry_run:
            found += conn.execute(select(func.count()).select_from(newly_missing.subquery())).scalar() or 0
        else:
            found += conn.execute(
                missing.insert().from_select(["key", "since"], newly_missing.add_columns(literal(now)))
            ).rowcount
        elsewhere = []
        for user, first, second in conn.execute(
            select(c.username, c.a, c.b).where(or_(not_(own(c.a)), not_(own(c.b))))
        ):
            for uid in (first, second):
                other, sep, key = uid.partition(":")
                live = others.get(f"{other}{sep}")
                if live is not None and key not in live:
                    elsewhere.append({"user_": user, "a_": first, "b_": second})
                    break
        if elsewhere and not dry_run:
            conn.execute(
                delete(cooccurrence).where(
                    c.username == bindparam("user_"), c.a == bindparam("a_"), c.b == bindparam("b_")
                ),
                elsewhere,
            )
        return found + len(elsewhere)

    @staticmethod
    def set_aside_learning(conn: Connection, key: str, uid: str) -> int:
        """Before a *new* note takes ``key``: if no indexed note holds it and an archive entry does (an archived
        or forgotten note of that title), move every user's learned rows of ``key`` (Q-values, accesses, and
        the co-occurrence pairs stored here naming ``uid``) into that entry's ``learned``, so the new note starts
        from the prior and the archived one has its state back when restored (:meth:`take_back_learning`).
        Returns the number of rows moved.

        Only creation calls this (``NoteStore.add`` writing a new file, a sync finding a new file). A note that
        comes back with no archive entry (its file was only missing: another git branch) is the same note and
        keeps its state; so does one brought back by ``restore``."""
        a, q, ac, c = archive.c, q_values.c, access.c, cooccurrence.c
        if conn.execute(select(notes.c.id).where(notes.c.key == key).limit(1)).first() is not None:
            return 0
        entry = conn.execute(
            select(a.id, a.learned)
            .where(a.key == key, a.restored_at.is_(None))
            .order_by(a.archived_at.desc(), a.id.desc())
            .limit(1)
        ).first()
        if entry is None:
            return 0
        pair = or_(c.a == uid, c.b == uid)
        moved = {
            "q_values": [
                list(r)
                for r in conn.execute(
                    select(q.username, q.key, q.q, q.exposures, q.updates, q.updated).where(q.key == key)
                )
            ],
            "access": [
                list(r)
                for r in conn.execute(select(ac.username, ac.key, ac.at, ac.kind).where(ac.key == key))
            ],
            "cooccurrence": [
                list(r) for r in conn.execute(select(c.username, c.a, c.b, c.weight).where(pair))
            ],
        }
        count = sum(len(rows) for rows in moved.values())
        if not count:
            return 0
        kept = json.loads(entry.learned) if entry.learned else {}
        for table, rows in moved.items():
            kept[table] = kept.get(table, []) + rows
        conn.execute(update(archive).where(a.id == entry.id).values(learned=json.dumps(kept)))
        conn.execute(delete(q_values).where(q.key == key))
        conn.execute(delete(access).where(ac.key == key))
        conn.execute(delete(cooccurrence).where(pair))
        return count

    @staticmethod
    def take_back_learning(conn: Connection, entry_id: int) -> int:
        """Put the learned rows :meth:`set_aside_learning` kept in the archive entry ``entry_id`` back (a restore);
        rows the live tables already have win. Returns the number of rows put back."""
        a = archive.c
        kept = conn.execute(select(a.learned).where(a.id == entry_id)).scalar()
        if not kept:
            return 0
        data = json.loads(kept)
        shapes = {
            "q_values": (q_values, ("username", "key", "q", "exposures", "updates", "updated")),
            "access": (access, ("username", "key", "at", "kind")),
            "cooccurrence": (cooccurrence, ("username", "a", "b", "weight")),
        }
        count = 0
        for name, (table, columns) in shapes.items():
            rows = [dict(zip(columns, r, strict=True)) for r in data.get(name, [])]
            if rows:
                conn.execute(_insert(conn, table).on_conflict_do_nothing(), rows)
                count += len(rows)
        conn.execute(update(archive).where(a.id == entry_id).values(learned=""))
        return count

    def live_keys(self, now: float | None = None) -> set[str]:
        """Keys of the notes whose learned state is kept at ``now`` (default: the time): indexed, archived, or
        with learned rows and not missing for :data:`MISSING_GRACE_SECONDS` (see :meth:`sweep_learned`)."""
        cutoff = (time.time() if now is None else now) - MISSING_GRACE_SECONDS
        a, m = archive.c, missing.c
        indexed = {r[0] for r in self.rows(select(notes.c.key))}
        archived = {r[0] for r in self.rows(select(a.key).where(a.restored_at.is_(None)))}
        learned = {r[0] for r in self.rows(union(select(q_values.c.key), select(access.c.key)))}
        expired = {r[0] for r in self.rows(select(m.key).where(m.since <= cutoff))}
        return indexed | archived | (learned - expired)

    def export_learning(self) -> dict[str, list[list[Any]]]:
        """This user's learned tables as plain lists (for JSON)."""

        def dump(conn: Connection) -> dict[str, list[list[Any]]]:
            q, a, c, ar = q_values.c, access.c, cooccurrence.c, archive.c
            mine = self.user
            return {
                "q_values": [
                    list(r)
                    for r in conn.execute(
                        select(q.key, q.q, q.exposures, q.updates, q.updated).where(q.username == mine)
                    )
                ],
                "access": [
                    list(r) for r in conn.execute(select(a.key, a.at, a.kind).where(a.username == mine))
                ],
                "cooccurrence": [
                    list(r) for r in conn.execute(select(c.a, c.b, c.weight).where(c.username == mine))
                ],
                # what a new note under an archived title set aside for the archived one (every user's)
                "archived": [
                    list(r)
                    for r in conn.execute(
                        select(ar.archived_path, ar.learned).where(ar.learned != "", ar.restored_at.is_(None))
                    )
                ],
            }

        return self.read(dump)

    def import_learning(self, data: dict[str, list[list[Any]]]) -> None:
        """Merge exported learned state into this user's: Q-values and co-occurrence replace, accesses add."""

        def load(conn: Connection) -> None:
            mine = self.user
            if data.get("q_values"):
                stmt = _insert(conn, q_values)
                conn.execute(
                    stmt.on_conflict_do_update(
                        index_elements=["username", "key"],
                        set_={n: stmt.excluded[n] for n in ("q", "exposures", "updates", "updated")},
                    ),
                    [  # an export from before the learning loop was bounded (m008) may hold Q below the prior
                        {
                            "username": mine,
                            "key": key,
                            "q": max(float(q), learning.Q_START),
                            "exposures": exposures,
                            "updates": updates,
                            "updated": updated,
                        }
                        for key, q, exposures, updates, updated in data["q_values"]
                    ],
                )
            if data.get("access"):
                conn.execute(
                    _insert(conn, access).on_conflict_do_nothing(),
                    [dict(zip(("key", "at", "kind"), r, strict=True), username=mine) for r in data["access"]],
                )
            if data.get("cooccurrence"):
                stmt = _insert(conn, cooccurrence)
                conn.execute(
                    stmt.on_conflict_do_update(
                        index_elements=["username", "a", "b"], set_={"weight": stmt.excluded.weight}
                    ),
                    [  # ... and co-occurrence weights above the cap
                        {"username": mine, "a": a, "b": b, "weight": min(float(w), learning.COOC_CAP)}
                        for a, b, w in data["cooccurrence"]
                    ],
                )
            for archived_path, learned in data.get("archived") or []:
                listed = conn.execute(
                    update(archive)
                    .where(archive.c.archived_path == archived_path, archive.c.learned == "")
                    .values(learned=learned)
                ).rowcount
                if not listed:  # its entry comes back with the archive folder's listing
                    self.archived_learning[str(archived_path)] = str(learned)
            self.audit(
                conn, time.time(), "import_learning", "", "", f"{len(data.get('q_values', []))} q-values"
            )

        self.write(load)


def _provenance_columns(provenance: Provenance) -> dict[str, Any]:
    """The origin, session_id, turn and kernel columns of a note or audit row."""
    return {
        "origin": provenance.origin,
        "session_id": provenance.session,
        "turn": provenance.turn,
        "kernel": provenance.kernel,
    }


def _insert(conn: Connection, table: Any) -> Any:
    """The backend's INSERT with ``ON CONFLICT`` (SQLite and PostgreSQL spell it the same way)."""
    return (_pg.insert if conn.dialect.name == "postgresql" else _sqlite.insert)(table)


def _search(
    conn: Connection,
    terms: Sequence[str],
    limit: int,
    idf: dict[str, float],
    within: Sequence[str] | None = None,
) -> list[Any]:
    """(id, score) of the best ``limit`` notes matching any of ``within`` (default: ``terms``), scored over all
    ``terms``: FTS5's weighted BM25 on SQLite; on PostgreSQL the sum over terms of IDF times ``ts_rank`` with the
    same column weights and length normalization (``idf`` empty: every term weighs 1)."""
    if conn.dialect.name != "postgresql":
        match = fts_query(terms)
        if within is not None:
            common = [t for t in terms if t not in within]
            match = f"({match}) NOT (({fts_query(common)}) NOT ({fts_query(within)}))"
        return list(
            conn.execute(
                text(
                    "SELECT rowid, -bm25(notes_fts, 4.0, 2.0, 1.0) FROM notes_fts WHERE notes_fts MATCH :m "
                    "ORDER BY bm25(notes_fts, 4.0, 2.0, 1.0) LIMIT :n"
                ),
                {"m": match, "n": limit},
            )
        )
    params: dict[str, Any] = {"n": limit}
    queries, parts, filters = [], [], []
    for i, term in enumerate(terms):
        params[f"t{i}"], params[f"w{i}"] = _words(term), idf.get(term, 1.0)
        queries.append(f"plainto_tsquery('english', :t{i}) AS q{i}")
        parts.append(f":w{i} * ts_rank({_TS_WEIGHTS}, n.tsv, q.q{i}, 1)")
        if within is None or term in within:
            filters.append(f"q.q{i}")
    if not idf:
        # Unweighted terms (the near-duplicate check, inside a write): one ts_rank of the whole query per note
        # instead of one per term, as that check ranks every note sharing a word while writers wait.
        parts = [f"ts_rank({_TS_WEIGHTS}, n.tsv, {' || '.join(filters)}, 1)"]
    # Each tsquery is built once, in a materialized one-row CTE. Written inline (or in a subquery, which the
    # planner pulls up), plainto_tsquery(:t) is folded to a constant only in a custom plan; once psycopg has
    # prepared the statement PostgreSQL may pick a generic plan that parses every term again for every matching
    # note, and sends a NOTICE per note for a term that is an English stop word: that was most of the time of an
    # add in a large vault.
    sql = (
        f"WITH q AS MATERIALIZED (SELECT {', '.join(queries)}) "
        f"SELECT n.id, {' + '.join(parts)} AS score FROM notes n, q "
        f"WHERE n.tsv @@ ({' || '.join(filters)}) ORDER BY score DESC, n.id LIMIT :n"
    )
    return list(conn.execute(text(sql), params))


def _document_counts(conn: Connection, terms: Sequence[str]) -> list[int]:
    """How many notes match each of ``terms``, in one statement."""
    if conn.dialect.name == "postgresql":
        parts = [
            f"(SELECT count(*) FROM notes WHERE tsv @@ plainto_tsquery('english', :t{i}))"
            for i in range(len(terms))
        ]
        terms = [_words(t) for t in terms]
    else:
        parts = [f"(SELECT count(*) FROM notes_fts WHERE notes_fts MATCH :t{i})" for i in range(len(terms))]
        terms = [fts_query([t]) for t in terms]
    row = conn.execute(text("SELECT " + ", ".join(parts)), {f"t{i}": t for i, t in enumerate(terms)}).one()
    return [int(v) for v in row]


def _words(term: str) -> str:
    """``term`` split where FTS5's unicode61 tokenizer splits (the indexed text is split the same way)."""
    return re.sub(r"[\W_]+", " ", term).strip()


def _first_line(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None) or exc
    lines = str(orig).strip().splitlines()
    return redact(lines[0]) if lines else type(orig).__name__


def _chunks(items: Sequence[str], size: int) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _has_sqlite_header(db_path: Path) -> bool:
    try:
        with open(db_path, "rb") as handle:
            return handle.read(_HEADER_BYTES).startswith(b"SQLite format 3\x00")
    except OSError:
        return False


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
        have = set(inspect(conn).get_table_names())
        if "state" in have and not conn.execute(select(func.count()).select_from(schema.state)).scalar():
            have.discard("state")
    return [t for t in _TABLES if t not in have]


def _is_refused(exc: DBAPIError) -> bool:
    """Whether ``exc`` is the PostgreSQL server refusing the connection: wrong credentials, no such database."""
    text_ = str(exc.orig).lower()
    return "connection to server" in text_ and any(words in text_ for words in _REFUSED)


def _is_away(exc: DBAPIError) -> bool:
    """Whether ``exc`` means the PostgreSQL server is gone or going (not a bug in the statement)."""
    text_ = str(exc.orig).lower()
    return bool(exc.connection_invalidated) or any(words in text_ for words in _AWAY)
