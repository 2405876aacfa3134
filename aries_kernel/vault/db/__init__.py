"""The vault's database: every SQL statement the vault runs is built in this package, and only here.

:class:`VaultIndex` (:mod:`.index`) owns one vault's engine, its transactions and its recovery, and is the one
door to the named operations of the modules below; :class:`~aries_kernel.vault.store.NoteStore` and
:class:`~aries_kernel.vault.vault.Vault` call those operations and never build a statement (a test reads their
source to keep it so).

* :mod:`.schema`: the tables (SQLAlchemy Core) and the named, append-only migrations that build them.
* :mod:`.engine`: the engines of the two backends, their ``INSERT ... ON CONFLICT``, and which errors mean
  "busy", "away" or "refused".
* :mod:`.recovery`: the SQLite file under a running kernel (moved aside, reopened, rebuilt).
* :mod:`.export`: the learning export beside the SQLite file, read back after a rebuild.
* :mod:`.search`: BM25 on both backends behind one function, and the query terms.
* :mod:`.records`: note, link, archive and audit rows, and the purge.
* :mod:`.vectors`: the embeddings cache.
* :mod:`.learned`: accesses, Q-values and co-occurrence per user, the sweep of notes that are gone.

Two backends, one code path of SQLAlchemy Core queries:

* **SQLite** (the default, one file per vault folder): WAL mode with a busy timeout, FTS5 for BM25. Every write
  runs inside ``BEGIN IMMEDIATE`` (so two processes never deadlock upgrading a read lock) and is retried with
  backoff while another writer holds the database, so "database is locked" does not reach the user.
* **PostgreSQL** (``AriesVault.url`` or ``$ARIES_VAULT_URL``, the team vault): one schema per vault, a weighted
  ``tsvector`` with a GIN index for full-text search, scored as BM25's equivalent (each term's IDF, computed
  like FTS5's, times ``ts_rank`` of that term, with FTS5's column weights 4/2/1). Writers take a transaction
  advisory lock, which serializes them exactly like ``BEGIN IMMEDIATE``. While the server is away (restarted,
  unreachable) every read and write waits and retries with backoff for ``retry_seconds``, logging once what is
  wrong, then raises :class:`~aries_kernel.vault.errors.VaultUnavailable`; a server that refuses the login or
  the database raises it at once. Credentials come only from the URL the user gave, the ``PG*`` environment or
  ``~/.pgpass`` (libpq reads both); aries-kernel never writes them anywhere. libpq itself parses the URL (or
  key=value string, :func:`.engine.server_parameters`); its parameters, password included, go only to the
  engine's connect arguments, and :attr:`VaultIndex.url`, every message, log line and error show it with its
  passwords as ``***`` (:func:`aries_kernel.redact.mask_url`).

**A third backend** needs changes in this package only. It provides, each where the two others branch on
``conn.dialect.name`` or :attr:`VaultIndex.backend`:

1. an engine and its connect arguments (:mod:`.engine`: beside :func:`.engine.sqlite_engine` and
   :func:`.engine.server_engine`, chosen in ``VaultIndex.__init__``), and whether it is shared
   (:attr:`VaultIndex.shared`: a server's database, not the folder, is the source of truth);
2. its DDL type names and its full-text index (:mod:`.schema`: ``_TYPES`` and migration ``m002_fts``);
3. BM25 over that index and its document counts (:func:`.search.bm25_scores`, :func:`.search.document_counts`);
4. ``INSERT ... ON CONFLICT`` (:func:`.engine.upsert`);
5. a write lock that serializes writers (``VaultIndex._transaction``: ``BEGIN IMMEDIATE`` or an advisory lock);
6. which of its errors mean busy, away or refused (:mod:`.engine`), and, for a file, lost (:mod:`.recovery`);
7. what a purge does beyond deleting rows (:func:`.records.purge_rows`: zeroing freed pages, or tombstones).

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
``actor``. A note whose file left the folder keeps it for :data:`.learned.MISSING_GRACE_SECONDS` (another git
branch may be checked out; :func:`.learned.sweep_learned`); a new note under an archived note's title starts
from the prior while the archive entry keeps the old state (:func:`.learned.set_aside_learning`). The learning
export is read only as a regular file of at most :data:`.export.LEARNING_EXPORT_MAX_BYTES`; anything else is
kept aside.
"""

from __future__ import annotations

from sqlalchemy.engine import Connection

from aries_kernel.vault.db.index import VaultIndex
from aries_kernel.vault.db.records import PurgeScope, path_hash
from aries_kernel.vault.db.search import query_terms

__all__ = ["Connection", "PurgeScope", "VaultIndex", "path_hash", "query_terms"]
