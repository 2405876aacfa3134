"""The index database of one vault: :class:`VaultIndex` owns its engine, its transactions and its recovery, and
is the one door to every named operation of :mod:`aries_kernel.vault.db` (see there for the two backends).
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from sqlalchemy import func, select, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DatabaseError, DBAPIError, OperationalError
from sqlalchemy.sql import Executable

from aries_kernel.retry import Backoff
from aries_kernel.user import current_user
from aries_kernel.vault.db import export as learning_export
from aries_kernel.vault.db import learned, records, schema, spend, vectors
from aries_kernel.vault.db.engine import (
    SCHEMA_NAME,
    first_line,
    is_away,
    is_busy,
    is_refused,
    server_engine,
    server_parameters,
)
from aries_kernel.vault.db.recovery import RECOVERY_ATTEMPTS, FileRecovery, is_lost
from aries_kernel.vault.db.search import Bm25Search, note_count
from aries_kernel.vault.errors import VaultBusyError, VaultUnavailable
from aries_kernel.vault.notes import Note
from aries_kernel.vault.provenance import Provenance
from aries_kernel.vault.provenance import current as current_provenance

__all__ = ["VaultIndex"]

T = TypeVar("T")
log = logging.getLogger(__name__)


class VaultIndex(FileRecovery, Bm25Search):
    """The index database of one vault (notes, links, embeddings, learned state, audit, archive).

    ``db_path`` is the SQLite file; with ``url`` (a PostgreSQL URL) the index lives in schema ``schema`` of
    that database instead and ``db_path`` is unused. ``user`` names whose learned state and writes these are
    (default :func:`aries_kernel.user.current_user`)."""

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
        self.user = user or current_user()
        if self.url and not SCHEMA_NAME.match(schema_name):
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
        """Connect to the server with libpq ``server`` parameters (:func:`.engine.server_engine`) and build this
        vault's schema there."""
        engine = server_engine(server, self.schema_name)
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

    # -- the learning export ----------------------------------------------------------------------------------

    def _restore_learning(self, why: str) -> None:
        """After building a fresh file: bring back the learned state from :attr:`learning_path` and say so, or
        say that it was lost when the fresh file replaced one (``why``) and there is no export to restore, or
        that the export was unusable (a FIFO, folder, symlink, oversized or malformed file: kept aside)."""
        assert self.learning_path is not None
        if not why and not os.path.lexists(self.learning_path):
            return  # a new vault: nothing was learned yet
        what = "learned state (Q-values, access history, co-occurrence)"
        try:
            export = learning_export.read_export(self.learning_path)
            if export is None:
                raise FileNotFoundError(self.learning_path)
            data = export["users"][self.user]
            self.import_learning(data)
        except FileNotFoundError:
            told = f"the {what} was lost: there was no export at {self.learning_path} to restore it from."
        except learning_export.BadExport as exc:
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

    def save_learning(self) -> Path | None:
        """Write this user's learned state to :attr:`learning_path` atomically (other users' entries kept);
        returns the path, or None on a server, whose database is the one copy (its backups are the server's).

        An unusable file in its place (see :func:`.export.read_export`) is kept aside, reported in
        :attr:`learning_problem` and logged; the new export is written without the other users' entries it
        may have held."""
        if self.learning_path is None:
            return None
        data = self.export_learning()
        self._unsaved = 0
        with self._folder_lock():  # two kernels on one vault: each keeps the other's users
            problem = learning_export.write_export(self.learning_path, self.user, data)
        if problem:
            self.learning_problem = problem
            log.warning("%s", problem)
        return self.learning_path

    def learning_changed(self, changes: int = 1) -> None:
        """Count ``changes`` to learned state; every :data:`.export.LEARNING_EXPORT_EVERY` of them, save the
        export."""
        self._unsaved += changes
        if self._unsaved >= learning_export.LEARNING_EXPORT_EVERY:
            self.save_learning()

    def log_recovery(self) -> None:
        """Write the last reopen or rebuild (if any) to the audit log of the file now in use."""
        if self.recovery:
            note, self.recovery = self.recovery, None
            self.write(lambda c: self.audit(c, time.time(), "recover", "", "", note))

    # -- transactions ---------------------------------------------------------------------------------------

    def _run(self, work: Callable[[Connection], T], write: bool, serialize: bool = True) -> T:
        for attempt in range(RECOVERY_ATTEMPTS):
            engine, identity = self._current_engine()
            try:
                result = self._transaction(engine, work, write, serialize)
            except DatabaseError as exc:
                if self.shared:
                    raise
                # Any database error while the file is no longer the one opened is the vanishing, not a bug.
                lost = is_lost(exc) or identity != self._identity or not self._is_current()
                if not lost or attempt == RECOVERY_ATTEMPTS - 1:
                    raise
                self._recover(identity, f"{self.db_path} failed under a running writer ({exc.orig})")
                continue
            if write and (identity != self._identity or not self._is_current()):
                # Committed into a file that was deleted or replaced meanwhile: re-index into the live one.
                self._recover(None, self._why_gone(), resync=True)
            return result
        raise AssertionError("unreachable")  # pragma: no cover

    def _transaction(
        self, engine: Engine, work: Callable[[Connection], T], write: bool, serialize: bool = True
    ) -> T:
        """``work(conn)`` in one transaction, retried with backoff while another writer holds SQLite's lock or
        while the PostgreSQL server is away. A write on SQLite is ``BEGIN IMMEDIATE``; on PostgreSQL it first
        takes this vault's advisory lock (unless ``serialize`` is False: a single atomic statement needs no
        lock), so writers are serialized the same way on both."""
        deadline = time.monotonic() + self.retry_seconds
        waits = Backoff(0.01, 0.5).delays()  # the one retry policy (aries_kernel.retry)
        while True:
            try:
                with engine.connect() as conn:
                    if not self.shared:
                        conn.execution_options(sqlite_immediate=write)
                    with conn.begin():
                        if write and serialize and self.shared:
                            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": self._lock_key})
                        result = work(conn)
                if self.status:
                    log.warning("The vault database %s answers again.", self.where)
                    self.status = ""
                return result
            except DBAPIError as exc:
                if self.shared and is_refused(exc):
                    raise VaultUnavailable(
                        f"The vault database {self.where} refused the connection ({first_line(exc)}). Check "
                        "the URL and credentials (PG* environment or ~/.pgpass); notes already written to the "
                        "folder are indexed at the next sync."
                    ) from exc
                busy = isinstance(exc, OperationalError) and not self.shared and is_busy(exc)
                away = self.shared and is_away(exc)
                if not (busy or away):
                    raise
                if time.monotonic() > deadline:
                    if busy:
                        raise VaultBusyError(
                            f"The vault index {self.where} stayed locked by another process for "
                            f"{self.retry_seconds:.0f} s; try again, or close the other kernel."
                        ) from exc
                    raise VaultUnavailable(
                        f"The vault database {self.where} did not answer for {self.retry_seconds:.0f} s "
                        f"({first_line(exc)}). Check that the server runs and the URL and credentials "
                        "(PG* environment or ~/.pgpass) are right; notes already written to the folder are "
                        "indexed at the next sync."
                    ) from exc
                if away and not self.status:
                    self.status = (
                        f"The vault database {self.where} is not reachable ({first_line(exc)}); waiting and "
                        f"retrying for up to {self.retry_seconds:.0f} s."
                    )
                    log.warning("%s", self.status)
            time.sleep(next(waits))

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
        """All rows of one read-only SQLAlchemy statement (for tests and benchmarks that look inside; the vault
        itself reads through the named operations below)."""
        return self._run(lambda conn: list(conn.execute(statement).all()), write=False)

    def close(self) -> None:
        """Release the engine's connections (the file stays)."""
        with self._lock:
            for engine in [*self._retired, self.engine]:
                if engine is not None:
                    engine.dispose()
            self._retired = []

    # -- notes, links, archive and audit (records) ------------------------------------------------------------
    # Operations taking ``conn`` run inside the caller's transaction (``write(work)``), beside its file writes;
    # the others open their own.

    bump = staticmethod(records.bump)
    delete_note = staticmethod(records.delete_note)
    clear_notes = staticmethod(records.clear_notes)
    is_indexed = staticmethod(records.is_indexed)
    note_mtime = staticmethod(records.note_mtime)
    twin = staticmethod(records.twin)
    notes_by_id = staticmethod(records.notes_by_id)
    list_archived = staticmethod(records.list_archived)
    archive_note = staticmethod(records.archive_note)
    purge_candidates = staticmethod(records.purge_candidates)
    hashes_elsewhere = staticmethod(records.hashes_elsewhere)
    purge_counts = staticmethod(records.purge_counts)
    purge_rows = staticmethod(records.purge_rows)

    def generation(self) -> int:
        """A counter that changes whenever notes or links change, in any process."""
        return self.read(records.generation)

    def upsert_note(self, conn: Connection, note: Note, created: float, updated: float) -> int:
        """Insert or replace the row of ``note`` (matched by path) and its links; returns the row id. The
        author is the note's ``author`` front matter, else this index's user."""
        return records.upsert_note(conn, self.user, note, created, updated)

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
        line = {
            "at": at,
            "action": action,
            "title": title,
            "path": path,
            "detail": detail,
            "actor": self.user,
            "key": title.casefold(),
            "content_hash": content_hash,
            "change": change,
            **records.provenance_columns(provenance or current_provenance()),
        }
        records.audit_line(conn, line)

    def mark_restored(self, conn: Connection, entry_id: int, at: float) -> None:
        """Record that the archive entry ``entry_id`` was restored at ``at`` by this index's user."""
        records.mark_restored(conn, entry_id, at, self.user)

    def find_note(self, key: str) -> dict[str, Any] | None:
        """The row of the note whose key (casefolded title) is ``key``, or None (see :func:`.records.find_note`)."""
        return self.read(lambda conn: records.find_note(conn, key))

    def last_editor(self, key: str) -> str | None:
        """Who last edited the note ``key`` (see :func:`.records.last_editor`), or None when no edit is audited."""
        return self.read(lambda conn: records.last_editor(conn, key))

    def note_count(self) -> int:
        """How many notes the index holds."""
        return self.read(note_count)

    def titles(self) -> list[str]:
        """The title of every note."""
        return self.read(records.titles)

    def authors(self) -> list[tuple[str, str]]:
        """(title, author) of every note."""
        return self.read(records.authors)

    def summary_counts(self) -> tuple[int, int, int, float | None]:
        """Notes, links, archived notes, and the time of the last write (see :func:`.records.summary_counts`)."""
        return self.read(records.summary_counts)

    def corpus_rows(self) -> tuple[list[Any], list[Any]]:
        """Every note's corpus columns and every link, from one snapshot (see :func:`.records.corpus_rows`)."""
        return self.read(records.corpus_rows)

    def bodies(self, ids: Sequence[int]) -> dict[int, str]:
        """Id -> body of the notes ``ids``."""
        return self.read(lambda conn: records.bodies(conn, ids))

    def superseding(self) -> list[tuple[str, str]]:
        """(title, superseded_by) of every note another supersedes."""
        return self.read(records.superseding)

    def history(self, key: str) -> list[Any]:
        """Every audited edit of the note ``key``, oldest first (see :func:`.records.history`)."""
        return self.read(lambda conn: records.history(conn, key))

    def agent_writes(self, origins: Sequence[str], kernel: str | None) -> list[Any]:
        """Adds and updates made from ``origins`` in ``kernel`` (see :func:`.records.agent_writes`)."""
        return self.read(lambda conn: records.agent_writes(conn, origins, kernel))

    def live_notes(self, keys: Sequence[str]) -> dict[str, Any]:
        """Key -> (key, title, path) of the indexed notes among ``keys``."""
        return self.read(lambda conn: records.live_notes(conn, keys))

    def recent_audit(self, limit: int) -> list[Any]:
        """The ``limit`` latest audit lines, newest first (see :func:`.records.recent_audit`)."""
        return self.read(lambda conn: records.recent_audit(conn, limit))

    def file_stamps(self) -> dict[str, tuple[int, int]]:
        """Path -> (mtime_ns, size) of every indexed note file."""
        return self.read(records.file_stamps)

    def mirror_rows(self) -> dict[str, Any]:
        """Path -> row of every note, as a team vault's mirror writes it (see :func:`.records.mirror_rows`)."""
        return self.read(records.mirror_rows)

    def forgotten_paths(self) -> dict[str, float]:
        """Path -> when a note last left it for the archive, of entries not restored."""
        return self.read(records.forgotten_paths)

    def tombstones(self) -> dict[str, float]:
        """Path hash -> when the note there was purged."""
        return self.read(records.tombstones)

    def archived_paths(self) -> set[str]:
        """The archived path of every archive entry."""
        return self.read(records.archived_paths)

    def archived_entry(self, key: str) -> dict[str, Any] | None:
        """The latest archive entry of the note ``key`` not restored since, or None."""
        return self.read(lambda conn: records.archived_entry(conn, key))

    # -- the team spend ledger (this index's user) --------------------------------------------------------------

    def add_spend(self, usd: float, tokens: int, calls: int = 1) -> tuple[str, float, int]:
        """Add one call's spend to this user's row of the database's UTC day, atomically (no writer lock);
        returns (day, usd, tokens) of the day so far (see :mod:`.spend`)."""
        work = lambda conn: spend.add_spend(conn, self.user, usd, tokens, calls, time.time())  # noqa: E731
        return self._run(work, write=True, serialize=False)

    def spend_today(self) -> tuple[str, float, int]:
        """(day, usd, tokens) this user spent on the database's UTC day so far."""
        return self.read(lambda conn: spend.spend_today(conn, self.user))

    # -- embeddings cache -----------------------------------------------------------------------------------

    def cached_vectors(self, model: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """The cached vectors of ``model`` among ``hashes``, by content hash (so a reload after a write reads
        only the vectors it does not hold yet)."""
        return self.read(lambda conn: vectors.cached_vectors(conn, model, hashes))

    def store_vectors(self, model: str, found: dict[str, np.ndarray]) -> None:
        """Cache vectors by content hash (no generation bump: the notes did not change)."""
        if found:
            self.write(lambda conn: vectors.store_vectors(conn, model, found))

    # -- learned state (this index's user only, unless said) ------------------------------------------------

    set_aside_learning = staticmethod(learned.set_aside_learning)
    take_back_learning = staticmethod(learned.take_back_learning)
    sweep_learned = staticmethod(learned.sweep_learned)

    def accesses(self, keys: Iterable[str] | None = None) -> list[tuple[str, float]]:
        """(key, time) of this user's recorded accesses, for ``keys`` or for every note."""
        return self.read(lambda conn: learned.accesses(conn, self.user, keys))

    def record_access(self, conn: Connection, key: str, at: float, kind: str) -> None:
        """One access to a note by this user (read, used, echo): it warms the note for this user."""
        learned.record_access(conn, self.user, key, at, kind)

    def q_values(self) -> dict[str, tuple[float, int]]:
        """Key -> (Q, exposures) for every note with learned state of this user."""
        return self.read(lambda conn: learned.q_values_of(conn, self.user))

    def cooccurrence(self) -> list[tuple[str, str, float]]:
        """(uid a, uid b, weight) pairs of this user stored here (uids are ``source:key``)."""
        return self.read(lambda conn: learned.cooccurrence_pairs(conn, self.user))

    def store_credit(
        self,
        conn: Connection,
        q_rows: Sequence[tuple[str, float, int, float]],
        pairs: Sequence[tuple[str, str]],
        used: Collection[str] = (),
    ) -> None:
        """Write a session's credit for this user (see :func:`.learned.store_credit`)."""
        learned.store_credit(conn, self.user, q_rows, pairs, used)

    def drop_cooccurrence(self, uid: str, dry_run: bool = False) -> int:
        """Remove (or, with ``dry_run``, count) every user's co-occurrence rows naming ``uid`` on either side."""
        work = lambda conn: learned.drop_cooccurrence(conn, uid, dry_run)  # noqa: E731
        return self.read(work) if dry_run else self.write(work)

    def live_keys(self, now: float | None = None) -> set[str]:
        """Keys of the notes whose learned state is kept at ``now`` (see :func:`.learned.live_keys`)."""
        return self.read(lambda conn: learned.live_keys(conn, now))

    def export_learning(self) -> dict[str, list[list[Any]]]:
        """This user's learned tables as plain lists (for JSON)."""
        return self.read(lambda conn: learned.export_learning(conn, self.user))

    def import_learning(self, data: dict[str, list[list[Any]]]) -> None:
        """Merge exported learned state into this user's: Q-values and co-occurrence replace, accesses add."""

        def load(conn: Connection) -> dict[str, str]:
            unlisted = learned.import_learning(conn, self.user, data)
            self.audit(
                conn, time.time(), "import_learning", "", "", f"{len(data.get('q_values', []))} q-values"
            )
            return unlisted

        unlisted = self.write(load)
        # Kept for the archive entries that are listed again only afterwards (NoteStore.list_archived_files).
        self.archived_learning.update(unlisted)
