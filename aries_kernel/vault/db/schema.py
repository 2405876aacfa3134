"""The vault index's tables (SQLAlchemy Core) and the named, append-only migrations that build them.

One schema on both backends. The tables below describe the final shape, for queries; the migrations build it
step by step in plain DDL with a few per-backend type names (SQLite's ``INTEGER PRIMARY KEY`` is
PostgreSQL's ``BIGSERIAL PRIMARY KEY``, ``REAL`` is ``DOUBLE PRECISION``, ``BLOB`` is ``BYTEA``). Full-text
search is the one part that differs by design: SQLite gets an FTS5 table kept by triggers, PostgreSQL a
generated, weighted ``tsvector`` column (title A, description B, body C) with a GIN index. Every applied step is
recorded by name in ``_vault_migrations``; a step never changes once released.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable

from sqlalchemy import (
    BigInteger,
    Column,
    Double,
    LargeBinary,
    MetaData,
    String,
    Table,
    insert,
    select,
    text,
)
from sqlalchemy.engine import Connection

from aries_kernel.user import current_user

__all__ = [
    "MIGRATIONS",
    "access",
    "archive",
    "audit",
    "cooccurrence",
    "embeddings",
    "links",
    "migrate",
    "missing",
    "notes",
    "purged",
    "q_values",
    "spend",
    "state",
]

Migration = Callable[[Connection], None]
MIGRATIONS: list[Migration] = []
migration = MIGRATIONS.append

metadata = MetaData()
notes = Table(
    "notes", metadata,
    Column("id", BigInteger, primary_key=True), Column("path", String), Column("title", String),
    Column("key", String), Column("norm", String), Column("folder", String), Column("type", String),
    Column("description", String), Column("body", String), Column("content_hash", String),
    Column("created", Double), Column("updated", Double), Column("size", BigInteger), Column("mtime_ns", BigInteger),
    Column("author", String), Column("origin", String), Column("session_id", String), Column("turn", BigInteger),
    Column("kernel", String), Column("superseded_by", String),
)  # fmt: skip
links = Table(
    "links", metadata, Column("src", BigInteger, primary_key=True), Column("target", String, primary_key=True)
)
state = Table("state", metadata, Column("name", String, primary_key=True), Column("value", BigInteger))
embeddings = Table(
    "embeddings", metadata,
    Column("content_hash", String, primary_key=True), Column("model", String, primary_key=True),
    Column("vector", LargeBinary),
)  # fmt: skip
# Learned state is per user (``username``): one user's reading habits never rerank another user's memory.
access = Table(
    "access", metadata,
    Column("username", String, primary_key=True), Column("key", String, primary_key=True),
    Column("at", Double, primary_key=True), Column("kind", String, primary_key=True),
)  # fmt: skip
q_values = Table(
    "q_values", metadata,
    Column("username", String, primary_key=True), Column("key", String, primary_key=True), Column("q", Double),
    Column("exposures", BigInteger), Column("updates", BigInteger), Column("updated", Double),
)  # fmt: skip
cooccurrence = Table(
    "cooccurrence", metadata,
    Column("username", String, primary_key=True), Column("a", String, primary_key=True),
    Column("b", String, primary_key=True), Column("weight", Double),
)  # fmt: skip
audit = Table(
    "audit", metadata,
    Column("id", BigInteger, primary_key=True), Column("at", Double), Column("action", String),
    Column("title", String), Column("path", String), Column("detail", String), Column("actor", String),
    Column("key", String), Column("origin", String), Column("session_id", String), Column("turn", BigInteger),
    Column("kernel", String), Column("content_hash", String), Column("change", String),
)  # fmt: skip
archive = Table(
    "archive", metadata,
    Column("id", BigInteger, primary_key=True), Column("title", String), Column("key", String),
    Column("path", String), Column("archived_path", String), Column("archived_at", Double),
    Column("restored_at", Double), Column("archived_by", String), Column("restored_by", String),
    Column("text", String), Column("learned", String),
)  # fmt: skip
# A note with learned state that left the index (its file gone: another git branch checked out, or deleted by
# hand) and since when: its learned rows are kept for a grace period (VaultIndex.sweep_learned).
missing = Table("missing", metadata, Column("key", String, primary_key=True), Column("since", Double))
# A team vault's record that a note was purged (by the SHA-256 of its path, never its title), so another
# machine's mirror deletes its copy instead of indexing it again.
purged = Table("purged", metadata, Column("path_hash", String, primary_key=True), Column("at", Double))
# The team spend ledger: what each user spent on model calls per UTC day of the database's clock
# (models.budget.TeamLedger), added to by one atomic upsert per call.
spend = Table(
    "spend", metadata,
    Column("username", String, primary_key=True), Column("day", String, primary_key=True),
    Column("usd", Double), Column("tokens", BigInteger), Column("calls", BigInteger), Column("updated", Double),
)  # fmt: skip
_migrations = Table(
    "_vault_migrations", metadata, Column("name", String, primary_key=True), Column("applied_at", String)
)

_TYPES = {
    "sqlite": {"pk": "INTEGER PRIMARY KEY", "float": "REAL", "blob": "BLOB", "bigint": "INTEGER"},
    "postgresql": {
        "pk": "BIGSERIAL PRIMARY KEY",
        "float": "DOUBLE PRECISION",
        "blob": "BYTEA",
        "bigint": "BIGINT",
    },
}


def _ddl(conn: Connection, sql: str) -> None:
    conn.exec_driver_sql(sql.format(**_TYPES[conn.dialect.name]))


def migrate(conn: Connection) -> None:
    """Apply every step of :data:`MIGRATIONS` not yet recorded, in order, inside the caller's transaction."""
    _ddl(
        conn, "CREATE TABLE IF NOT EXISTS _vault_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
    )
    applied = set(conn.execute(select(_migrations.c.name)).scalars())
    for step in MIGRATIONS:
        if step.__name__ in applied:
            continue
        step(conn)
        conn.execute(
            insert(_migrations).values(name=step.__name__, applied_at=_dt.datetime.now(_dt.UTC).isoformat())
        )


@migration
def m001_notes(conn: Connection) -> None:
    _ddl(
        conn,
        """CREATE TABLE notes (
            id {pk},
            path TEXT NOT NULL UNIQUE,
            title TEXT NOT NULL,
            key TEXT NOT NULL,
            norm TEXT NOT NULL,
            folder TEXT NOT NULL,
            type TEXT NOT NULL DEFAULT '',
            description TEXT NOT NULL DEFAULT '',
            body TEXT NOT NULL,
            content_hash TEXT NOT NULL,
            created {float} NOT NULL,
            updated {float} NOT NULL,
            size {bigint} NOT NULL DEFAULT 0,
            mtime_ns {bigint} NOT NULL DEFAULT 0)""",
    )
    _ddl(conn, "CREATE INDEX notes_key ON notes (key)")
    _ddl(conn, "CREATE INDEX notes_norm ON notes (norm)")
    _ddl(conn, "CREATE INDEX notes_hash ON notes (content_hash)")
    _ddl(
        conn,
        "CREATE TABLE links (src {bigint} NOT NULL REFERENCES notes (id) ON DELETE CASCADE, target TEXT NOT NULL, "
        "PRIMARY KEY (src, target))",
    )
    _ddl(conn, "CREATE INDEX links_target ON links (target)")
    _ddl(conn, "CREATE TABLE state (name TEXT PRIMARY KEY, value {bigint} NOT NULL)")
    _ddl(conn, "INSERT INTO state (name, value) VALUES ('notes_gen', 0)")


@migration
def m002_fts(conn: Connection) -> None:
    if conn.dialect.name == "postgresql":
        # Weights A/B/C mirror FTS5's column weights 4/2/1 (ts_rank is given {0.1, 0.25, 0.5, 1.0}). Runs of
        # anything but letters and digits become spaces first, so words split where FTS5's unicode61 splits them
        # (PostgreSQL's parser would keep "os.replace" or "a/b.py" whole).
        words = "regexp_replace({}, '[^[:alnum:]]+', ' ', 'g')"
        conn.exec_driver_sql(
            "ALTER TABLE notes ADD COLUMN tsv tsvector GENERATED ALWAYS AS ("
            f"setweight(to_tsvector('english', {words.format('title')}), 'A') || "
            f"setweight(to_tsvector('english', {words.format('description')}), 'B') || "
            f"setweight(to_tsvector('english', {words.format('body')}), 'C')) STORED"
        )
        conn.exec_driver_sql("CREATE INDEX notes_tsv ON notes USING GIN (tsv)")
        return
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
    _ddl(
        conn,
        "CREATE TABLE embeddings (content_hash TEXT NOT NULL, model TEXT NOT NULL, vector {blob} NOT NULL, "
        "PRIMARY KEY (content_hash, model))",
    )


@migration
def m004_learning(conn: Connection) -> None:
    _ddl(
        conn,
        "CREATE TABLE access (key TEXT NOT NULL, at {float} NOT NULL, kind TEXT NOT NULL, "
        "PRIMARY KEY (key, at, kind))",
    )
    _ddl(
        conn,
        "CREATE TABLE q_values (key TEXT PRIMARY KEY, q {float} NOT NULL, exposures {bigint} NOT NULL DEFAULT 0, "
        "updates {bigint} NOT NULL DEFAULT 0, updated {float} NOT NULL DEFAULT 0)",
    )
    _ddl(
        conn,
        "CREATE TABLE cooccurrence (a TEXT NOT NULL, b TEXT NOT NULL, weight {float} NOT NULL, PRIMARY KEY (a, b))",
    )


@migration
def m005_audit_archive(conn: Connection) -> None:
    _ddl(
        conn,
        "CREATE TABLE audit (id {pk}, at {float} NOT NULL, action TEXT NOT NULL, title TEXT NOT NULL, "
        "path TEXT NOT NULL, detail TEXT NOT NULL DEFAULT '')",
    )
    _ddl(
        conn,
        "CREATE TABLE archive (id {pk}, title TEXT NOT NULL, key TEXT NOT NULL, path TEXT NOT NULL, "
        "archived_path TEXT NOT NULL, archived_at {float} NOT NULL, restored_at {float})",
    )
    _ddl(conn, "CREATE INDEX archive_key ON archive (key)")


@migration
def m006_team(conn: Connection) -> None:
    """Authors on notes, who did each audited action, the archived note's text (so any machine can restore
    it), and learned state keyed by user. Learned state from before belongs to the user who migrates."""
    for table, column in (
        ("notes", "author"),
        ("audit", "actor"),
        ("archive", "archived_by"),
        ("archive", "restored_by"),
        ("archive", "text"),
    ):
        _ddl(conn, f"ALTER TABLE {table} ADD COLUMN {column} TEXT NOT NULL DEFAULT ''")
    shapes = {
        "access": ("key TEXT NOT NULL, at {float} NOT NULL, kind TEXT NOT NULL", "key, at, kind"),
        "q_values": (
            "key TEXT NOT NULL, q {float} NOT NULL, exposures {bigint} NOT NULL DEFAULT 0, "
            "updates {bigint} NOT NULL DEFAULT 0, updated {float} NOT NULL DEFAULT 0",
            "key, q, exposures, updates, updated",
        ),
        "cooccurrence": ("a TEXT NOT NULL, b TEXT NOT NULL, weight {float} NOT NULL", "a, b, weight"),
    }
    keys = {"access": "key, at, kind", "q_values": "key", "cooccurrence": "a, b"}
    for table, (columns, names) in shapes.items():
        # SQLite cannot change a primary key in place: build the new table, copy, swap.
        _ddl(
            conn,
            f"CREATE TABLE {table}_v2 (username TEXT NOT NULL, {columns}, PRIMARY KEY (username, {keys[table]}))",
        )
        conn.execute(
            text(f"INSERT INTO {table}_v2 (username, {names}) SELECT :who, {names} FROM {table}"),
            {"who": current_user()},
        )
        conn.exec_driver_sql(f"DROP TABLE {table}")
        conn.exec_driver_sql(f"ALTER TABLE {table}_v2 RENAME TO {table}")


@migration
def m007_provenance(conn: Connection) -> None:
    """Where each note came from (origin, agent session and turn, kernel process) and which note supersedes it;
    the same provenance on each audited edit, with the note's key, its content hash after the edit and what
    changed. Notes from before count as the user's; audit lines from before have no recorded origin."""
    for table in ("notes", "audit"):
        origin = "user" if table == "notes" else ""
        _ddl(conn, f"ALTER TABLE {table} ADD COLUMN origin TEXT NOT NULL DEFAULT '{origin}'")
        _ddl(conn, f"ALTER TABLE {table} ADD COLUMN session_id TEXT NOT NULL DEFAULT ''")
        _ddl(conn, f"ALTER TABLE {table} ADD COLUMN turn {{bigint}}")
        _ddl(conn, f"ALTER TABLE {table} ADD COLUMN kernel TEXT NOT NULL DEFAULT ''")
    _ddl(conn, "ALTER TABLE notes ADD COLUMN superseded_by TEXT NOT NULL DEFAULT ''")
    for column in ("key", "content_hash", "change"):
        _ddl(conn, f"ALTER TABLE audit ADD COLUMN {column} TEXT NOT NULL DEFAULT ''")
    _ddl(conn, "CREATE INDEX audit_key ON audit (key)")
    _ddl(conn, "CREATE INDEX notes_kernel ON notes (kernel)")
    _ddl(conn, "CREATE TABLE purged (path_hash TEXT PRIMARY KEY, at {float} NOT NULL)")


@migration
def m008_bounded_learning(conn: Connection) -> None:
    """Learned state within the bounds the learning loop now keeps (:mod:`.learning`): no Q below the prior 0.5
    (the old damped reward sank the most-used notes under it), no co-occurrence weight above its cap 10 (it
    grew by one per session without end); and an index to find a note's pairs by their second note."""
    _ddl(conn, "UPDATE q_values SET q = 0.5 WHERE q < 0.5")
    _ddl(conn, "UPDATE cooccurrence SET weight = 10.0 WHERE weight > 10.0")
    _ddl(conn, "CREATE INDEX cooccurrence_b ON cooccurrence (username, b)")


@migration
def m009_missing_and_archived_learning(conn: Connection) -> None:
    """When each note with learned state went missing from the index (its learned rows outlive a branch switch
    for a grace period), and the learned state of an archived note whose title a new note took (``learned``,
    JSON; restored with the note)."""
    _ddl(conn, "CREATE TABLE missing (key TEXT PRIMARY KEY, since {float} NOT NULL)")
    _ddl(conn, "ALTER TABLE archive ADD COLUMN learned TEXT NOT NULL DEFAULT ''")


@migration
def m010_spend(conn: Connection) -> None:
    """The team spend ledger: USD, tokens and calls per user per UTC day (``YYYY-MM-DD`` of the database's
    clock), so a member's daily limits hold over every server and machine they use."""
    _ddl(
        conn,
        "CREATE TABLE spend (username TEXT NOT NULL, day TEXT NOT NULL, usd {float} NOT NULL DEFAULT 0, "
        "tokens {bigint} NOT NULL DEFAULT 0, calls {bigint} NOT NULL DEFAULT 0, updated {float} NOT NULL DEFAULT 0, "
        "PRIMARY KEY (username, day))",
    )
    _ddl(conn, "CREATE INDEX spend_day ON spend (day)")
