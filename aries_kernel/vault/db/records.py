"""The note, link, archive and audit rows: every statement :class:`NoteStore` and :class:`Vault` need, by name.

Each function takes the connection of the caller's transaction (``VaultIndex.read``/``write``), so a write
that puts a file in place and its row in the index stays one transaction; the functions that record who did
something take the user (``VaultIndex.user``). Rows come back as SQLAlchemy rows (read by attribute or index)
or plain dicts, never as statements.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, delete, func, or_, select, update
from sqlalchemy.engine import Connection

from aries_kernel.redact import redact
from aries_kernel.vault.db.engine import upsert
from aries_kernel.vault.db.schema import (
    access,
    archive,
    audit,
    cooccurrence,
    embeddings,
    links,
    missing,
    notes,
    purged,
    q_values,
    state,
)
from aries_kernel.vault.notes import Note, content_hash, normalize_title
from aries_kernel.vault.provenance import Provenance

__all__ = [
    "PurgeCandidates",
    "PurgeScope",
    "agent_writes",
    "archive_note",
    "archived_entry",
    "archived_paths",
    "audit_line",
    "authors",
    "bodies",
    "bump",
    "chunks",
    "clear_notes",
    "corpus_rows",
    "delete_note",
    "file_stamps",
    "find_note",
    "forgotten_paths",
    "generation",
    "hashes_elsewhere",
    "history",
    "is_indexed",
    "last_editor",
    "list_archived",
    "live_notes",
    "mark_restored",
    "mirror_rows",
    "note_mtime",
    "path_hash",
    "provenance_columns",
    "notes_by_id",
    "purge_candidates",
    "purge_counts",
    "purge_rows",
    "recent_audit",
    "summary_counts",
    "superseding",
    "titles",
    "tombstones",
    "twin",
    "upsert_note",
]

# The columns of a note that a lookup by title returns (NoteStore.find).
_FOUND = (
    "id", "title", "key", "path", "folder", "type", "description", "body", "created", "updated", "superseded_by",
    "author",
)  # fmt: skip
# What a team vault's mirror needs to write a note's file from its row.
_MIRRORED = (
    "path", "title", "type", "description", "body", "created", "content_hash", "mtime_ns", "author", "origin",
    "session_id", "turn", "kernel", "superseded_by",
)  # fmt: skip
# What the corpus holds of every note (Vault._load_corpus), in this order.
_CORPUS = (
    "id", "title", "key", "folder", "type", "path", "created", "content_hash", "superseded_by", "author",
)  # fmt: skip
# The audited actions that write a note's text or front matter: who did the latest is its last editor.
_EDITS = ("add", "update", "supersede", "restore")
_CANDIDATE = ("id", "title", "path", "body", "created")  # a near-duplicate candidate


def chunks(items: Sequence[Any], size: int) -> Iterable[Sequence[Any]]:
    """``items`` in slices of at most ``size`` (an ``IN`` list stays under the backends' parameter limits)."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


# -- notes and links ------------------------------------------------------------------------------------------


def generation(conn: Connection) -> int:
    """A counter that changes whenever notes or links change, in any process."""
    return int(conn.execute(select(state.c.value).where(state.c.name == "notes_gen")).scalar_one())


def bump(conn: Connection) -> None:
    """Mark notes or links as changed (callers do it inside their write transaction)."""
    conn.execute(update(state).where(state.c.name == "notes_gen").values(value=state.c.value + 1))


def upsert_note(conn: Connection, user: str, note: Note, created: float, updated: float) -> int:
    """Insert or replace the row of ``note`` (matched by path) and its links; returns the row id. The author is
    the note's ``author`` front matter, else ``user``."""
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
        "author": str(meta.get("author") or user)[:200],
        **provenance_columns(Provenance.from_front_matter(meta)),
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
            upsert(conn, links).on_conflict_do_nothing(),
            [{"src": note_id, "target": t} for t in note.links],
        )
    return note_id


def delete_note(conn: Connection, path: str) -> None:
    """Remove the row (and its links) of the note at ``path``."""
    note_id = conn.execute(select(notes.c.id).where(notes.c.path == path)).scalar()
    if note_id is not None:
        conn.execute(delete(links).where(links.c.src == note_id))
        conn.execute(delete(notes).where(notes.c.id == note_id))


def clear_notes(conn: Connection) -> None:
    """Remove every note row and link (a rebuild indexes the files again; learned state and audit stay)."""
    conn.execute(delete(links))
    conn.execute(delete(notes))


def is_indexed(conn: Connection, path: str) -> bool:
    """Whether the index has a row for the note file at ``path``."""
    return conn.execute(select(notes.c.id).where(notes.c.path == path)).first() is not None


def note_mtime(conn: Connection, path: str) -> int | None:
    """The ``mtime_ns`` of the indexed copy of the note at ``path``, or None when it has no row."""
    value = conn.execute(select(notes.c.mtime_ns).where(notes.c.path == path)).scalar()
    return None if value is None else int(value)


def file_stamps(conn: Connection) -> dict[str, tuple[int, int]]:
    """Path -> (mtime_ns, size) of every indexed note file (a sync reads only the files that changed)."""
    n = notes.c
    return {r[0]: (int(r[1]), int(r[2])) for r in conn.execute(select(n.path, n.mtime_ns, n.size))}


def mirror_rows(conn: Connection) -> dict[str, Any]:
    """Path -> row of every note, with what a team vault's mirror needs to write its file."""
    columns = [notes.c[name] for name in _MIRRORED]
    return {r.path: r for r in conn.execute(select(*columns))}


def find_note(conn: Connection, key: str) -> dict[str, Any] | None:
    """The row of the note whose key (casefolded title) is ``key`` (the first by path), or None."""
    columns = [notes.c[name] for name in _FOUND]
    n = notes.c
    row = conn.execute(select(*columns).where(n.key == key).order_by(n.path).limit(1)).mappings().first()
    return dict(row) if row is not None else None


def twin(conn: Connection, title: str, body: str) -> dict[str, Any] | None:
    """A note with the title (casefolded or normalized) or the content of the note ``title`` with ``body`` about
    to be written (id, title, path, body, created), or None."""
    n = notes.c
    columns = [notes.c[name] for name in _CANDIDATE]
    same = (
        (n.key == title.casefold())
        | (n.norm == normalize_title(title))
        | (n.content_hash == content_hash(f"{title}\n{body}"))
    )
    found = conn.execute(select(*columns).where(same).limit(1)).mappings().first()
    return dict(found) if found else None


def notes_by_id(conn: Connection, ids: Sequence[int]) -> dict[int, dict[str, Any]]:
    """Id -> id, title, path, body and created of the notes ``ids`` (near-duplicate candidates)."""
    columns = [notes.c[name] for name in _CANDIDATE]
    rows = conn.execute(select(*columns).where(notes.c.id.in_(list(ids)))).mappings()
    return {row["id"]: dict(row) for row in rows}


def corpus_rows(conn: Connection) -> tuple[list[Any], list[Any]]:
    """Every note (id, title, key, folder, type, path, created, content_hash, superseded_by, author; by id) and
    every link (src, target)."""
    columns = [notes.c[name] for name in _CORPUS]
    rows = list(conn.execute(select(*columns).order_by(notes.c.id)).all())
    edges = list(conn.execute(select(links.c.src, links.c.target)).all())
    return rows, edges


def bodies(conn: Connection, ids: Sequence[int]) -> dict[int, str]:
    """Id -> body of the notes ``ids``."""
    out: dict[int, str] = {}
    for chunk in chunks(list(ids), 500):
        out.update(
            (r[0], r[1])
            for r in conn.execute(select(notes.c.id, notes.c.body).where(notes.c.id.in_(list(chunk))))
        )
    return out


def live_notes(conn: Connection, keys: Sequence[str]) -> dict[str, Any]:
    """Key -> (key, title, path) of the indexed notes among ``keys``."""
    n = notes.c
    return {r[0]: r for r in conn.execute(select(n.key, n.title, n.path).where(n.key.in_(sorted(keys))))}


def titles(conn: Connection) -> list[str]:
    """The title of every note."""
    return list(conn.execute(select(notes.c.title)).scalars())


def authors(conn: Connection) -> list[tuple[str, str]]:
    """(title, author) of every note."""
    return [(r[0], r[1]) for r in conn.execute(select(notes.c.title, notes.c.author))]


def superseding(conn: Connection) -> list[tuple[str, str]]:
    """(title, superseded_by) of every note another supersedes."""
    n = notes.c
    return [(r[0], r[1]) for r in conn.execute(select(n.title, n.superseded_by).where(n.superseded_by != ""))]


def summary_counts(conn: Connection) -> tuple[int, int, int, float | None]:
    """Notes, links, archived notes not restored, and the time of the last write that was not a sync or a
    session's credit (None: never)."""
    row = conn.execute(
        select(
            select(func.count()).select_from(notes).scalar_subquery(),
            select(func.count()).select_from(links).scalar_subquery(),
            select(func.count())
            .select_from(archive)
            .where(archive.c.restored_at.is_(None))
            .scalar_subquery(),
            select(func.max(audit.c.at)).where(audit.c.action.not_in(["sync", "session"])).scalar_subquery(),
        )
    ).one()
    return int(row[0]), int(row[1]), int(row[2]), row[3]


# -- audit ----------------------------------------------------------------------------------------------------


def audit_line(conn: Connection, line: dict[str, Any]) -> None:
    """Append ``line`` (the values of its columns) to the audit log (``VaultIndex.audit`` says what goes in)."""
    conn.execute(audit.insert().values(**line))


def history(conn: Connection, key: str) -> list[Any]:
    """Every audited edit of the note ``key`` (or, before keys were recorded, of its title), oldest first: at,
    action, actor, origin, session_id, turn, kernel, detail, change."""
    a = audit.c
    return list(
        conn.execute(
            select(a.at, a.action, a.actor, a.origin, a.session_id, a.turn, a.kernel, a.detail, a.change)
            .where((a.key == key) | ((a.key == "") & (func.lower(a.title) == key)))
            .order_by(a.id)
        ).all()
    )


def last_editor(conn: Connection, key: str) -> str | None:
    """Who made the latest audited edit (add, update, supersede, restore) of the note ``key``, or None."""
    a = audit.c
    found = conn.execute(
        select(a.actor).where(a.key == key, a.action.in_(_EDITS)).order_by(a.id.desc()).limit(1)
    ).scalar()
    return None if found is None else str(found)


def agent_writes(conn: Connection, origins: Sequence[str], kernel: str | None) -> list[Any]:
    """(key, action, origin, session_id, turn, at) of every add or update made from ``origins`` (in the kernel
    process ``kernel``; None: any), oldest first."""
    a = audit.c
    where: list[ColumnElement[bool]] = [a.origin.in_(list(origins)), a.action.in_(["add", "update"])]
    if kernel is not None:
        where.append(a.kernel == kernel)
    return list(
        conn.execute(
            select(a.key, a.action, a.origin, a.session_id, a.turn, a.at).where(*where).order_by(a.id)
        )
    )


def recent_audit(conn: Connection, limit: int) -> list[Any]:
    """The ``limit`` latest audit lines, newest first: at, action, title, path, detail, actor."""
    a = audit.c
    return list(
        conn.execute(
            select(a.at, a.action, a.title, a.path, a.detail, a.actor).order_by(a.id.desc()).limit(limit)
        )
    )


# -- archive --------------------------------------------------------------------------------------------------


def archived_paths(conn: Connection) -> set[str]:
    """The archived path of every archive entry."""
    return set(conn.execute(select(archive.c.archived_path)).scalars())


def list_archived(conn: Connection, entries: Sequence[dict[str, Any]]) -> None:
    """Add archive entries (title, key, path, archived_path, archived_at, archived_by, text, learned)."""
    conn.execute(archive.insert(), list(entries))


def archive_note(
    conn: Connection,
    *,
    title: str,
    key: str,
    path: str,
    archived_path: str,
    archived_at: float,
    archived_by: str,
    text: str,
) -> None:
    """Record that the note at ``path`` was archived to ``archived_path``, with its text (any machine of a team
    vault can restore it from the row)."""
    conn.execute(
        archive.insert().values(
            title=title,
            key=key,
            path=path,
            archived_path=archived_path,
            archived_at=archived_at,
            archived_by=archived_by,
            text=text,
        )
    )


def archived_entry(conn: Connection, key: str) -> dict[str, Any] | None:
    """The latest archive entry of the note ``key`` not restored since (id, title, path, archived_path, text)."""
    a = archive.c
    row = (
        conn.execute(
            select(a.id, a.title, a.path, a.archived_path, a.text)
            .where(a.key == key, a.restored_at.is_(None))
            .order_by(a.archived_at.desc())
            .limit(1)
        )
        .mappings()
        .first()
    )
    return dict(row) if row is not None else None


def mark_restored(conn: Connection, entry_id: int, at: float, user: str) -> None:
    """Record that the archive entry ``entry_id`` was restored at ``at`` by ``user``."""
    conn.execute(update(archive).where(archive.c.id == entry_id).values(restored_at=at, restored_by=user))


def forgotten_paths(conn: Connection) -> dict[str, float]:
    """Path -> when a note last left it for the archive, of the paths with an entry not restored."""
    a = archive.c
    rows = conn.execute(
        select(a.path, func.max(a.archived_at)).where(a.restored_at.is_(None)).group_by(a.path)
    )
    return {r[0]: float(r[1]) for r in rows}


def tombstones(conn: Connection) -> dict[str, float]:
    """Path hash -> when the note there was purged (a team vault's record for the other machines' mirrors)."""
    return {r[0]: float(r[1]) for r in conn.execute(select(purged.c.path_hash, purged.c.at))}


# -- purge ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PurgeCandidates:
    """What the index holds of a note about to be purged: its rows (id, title, path, content_hash), its archive
    entries (id, title, path, archived_path, text), the content hashes its audit lines name, and whether it is
    recorded as missing (its file gone, its learned state kept)."""

    notes: list[Any]
    archived: list[Any]
    audit_hashes: set[str]
    missing: bool


@dataclass(frozen=True)
class PurgeScope:
    """Everything a purge removes from the index: rows of the note ``key`` (uid ``uid``) and its ``note_ids``,
    audit lines naming its ``paths`` or ``titles``, and the embeddings of its ``hashes``."""

    key: str
    uid: str
    note_ids: list[int]
    paths: list[str]
    titles: list[str]
    hashes: list[str]


def purge_candidates(conn: Connection, key: str) -> PurgeCandidates:
    """The rows of the note ``key`` a purge starts from."""
    n, a, au = notes.c, archive.c, audit.c
    rows = list(conn.execute(select(n.id, n.title, n.path, n.content_hash).where(n.key == key)).all())
    kept = list(
        conn.execute(select(a.id, a.title, a.path, a.archived_path, a.text).where(a.key == key)).all()
    )
    hashes = set(conn.execute(select(au.content_hash).where(au.key == key, au.content_hash != "")).scalars())
    listed = conn.execute(select(missing.c.key).where(missing.c.key == key)).first() is not None
    return PurgeCandidates(rows, kept, hashes, listed)


def hashes_elsewhere(conn: Connection, key: str, hashes: Iterable[str]) -> set[str]:
    """Which of ``hashes`` are the content of a note other than ``key`` (their embeddings stay)."""
    return set(conn.execute(select(notes.c.content_hash).where(notes.c.key != key)).scalars()) & set(hashes)


def _purge_tables(scope: PurgeScope) -> list[tuple[str, Any, Any]]:
    """(what, table, where) of every row a purge of ``scope`` removes."""
    n, a, au, e, c = notes.c, archive.c, audit.c, embeddings.c, cooccurrence.c
    key = scope.key
    mentions = [au.key == key, au.path.in_(scope.paths)]
    mentions += [au.title == t for t in scope.titles] + [
        au.detail.contains(f"[[{t}]]", autoescape=True) for t in scope.titles
    ]
    return [
        ("notes row", notes, n.key == key),
        ("links", links, links.c.src.in_(scope.note_ids)),
        ("archive row", archive, a.key == key),
        ("q_values", q_values, q_values.c.key == key),
        ("access", access, access.c.key == key),
        ("missing", missing, missing.c.key == key),
        ("cooccurrence", cooccurrence, (c.a == scope.uid) | (c.b == scope.uid)),
        ("embeddings", embeddings, e.content_hash.in_(scope.hashes)),
        ("audit", audit, or_(*mentions)),
    ]


def purge_counts(conn: Connection, scope: PurgeScope) -> list[tuple[str, int]]:
    """(what, rows) of each kind of row a purge of ``scope`` removes, leaving out the kinds with none."""
    found = []
    for what, table, where in _purge_tables(scope):
        count = int(conn.execute(select(func.count()).select_from(table).where(where)).scalar_one())
        if count:
            found.append((what, count))
    return found


def purge_rows(conn: Connection, scope: PurgeScope, at: float) -> None:
    """Remove every row of ``scope`` for good. SQLite zeroes the deleted rows in the file and merges FTS5's
    segments, which keep a deleted note's terms; a server records a tombstone per path (by its SHA-256, never
    its title) so the other machines' mirrors delete their copies instead of indexing them again."""
    sqlite = conn.dialect.name == "sqlite"
    if sqlite:
        # Deleted rows are zeroed in the file, not left in its free pages.
        conn.exec_driver_sql("PRAGMA secure_delete = ON")
    for _, table, where in _purge_tables(scope):
        conn.execute(delete(table).where(where))
    if sqlite:
        # FTS5 keeps a deleted note's terms in its older segments until they are merged.
        conn.exec_driver_sql("INSERT INTO notes_fts (notes_fts) VALUES ('optimize')")
    elif scope.paths:
        stmt = upsert(conn, purged)
        conn.execute(
            stmt.on_conflict_do_update(index_elements=["path_hash"], set_={"at": stmt.excluded.at}),
            [{"path_hash": path_hash(rel), "at": at} for rel in scope.paths],
        )


def path_hash(rel: str) -> str:
    """The SHA-256 of a note's path, as a tombstone names it."""
    return hashlib.sha256(rel.encode("utf-8")).hexdigest()


def provenance_columns(provenance: Provenance) -> dict[str, Any]:
    """The origin, session_id, turn and kernel columns of a note or audit row."""
    return {
        "origin": provenance.origin,
        "session_id": provenance.session,
        "turn": provenance.turn,
        "kernel": provenance.kernel,
    }
