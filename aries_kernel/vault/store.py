"""One vault folder kept in step with its index: sync from files, add, forget (archive) and restore.

A :class:`NoteStore` is the global vault or the project brain. Writes go file first (atomic rename) and index
second, inside one ``BEGIN IMMEDIATE`` transaction, so a duplicate check and the write it guards cannot
interleave with another process, and a writer killed between the two leaves a file that the next sync indexes.
Text given to :meth:`NoteStore.add` passes through :func:`aries_kernel.redact.redact` before it is written, and
the index re-indexes the files whenever it had to be reopened or rebuilt (``VaultIndex.on_recreate``).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import difflib
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from aries_kernel.redact import redact
from aries_kernel.vault.db import Connection, PurgeScope, VaultIndex, path_hash, query_terms
from aries_kernel.vault.notes import (
    FOLDERS,
    MAX_NOTE_BYTES,
    Note,
    NoteError,
    atomic_write,
    content_hash,
    iter_note_files,
    move_file,
    not_a_file,
    note_exists,
    parse_note,
    parse_text,
    read_note_bytes,
    remove_file,
    render_note,
    sanitize_title,
    wiki_links,
)
from aries_kernel.vault.provenance import Provenance
from aries_kernel.vault.provenance import current as current_provenance

__all__ = ["AddResult", "NoteStore", "Skipped"]

ARCHIVE_DIR = ".archive"
_SYNC_ATTEMPTS = 5
NEAR_DUPLICATE_JACCARD = 0.85
_CHANGE_CHARS = 2000  # of an edit's diff kept in the audit log
_DIFF_CHARS = 200_000  # bodies longer than this together are not diffed (difflib is quadratic at worst)
_WORD = re.compile(r"\w+")
_ARCHIVED_COPY = re.compile(r" \(\d+\)$")  # "Title (1)": a second archived copy (see _free_name)


@dataclass(frozen=True)
class AddResult:
    """What :meth:`NoteStore.add` did: ``action`` is ``created``, ``updated`` or ``unchanged``."""

    title: str
    source: str
    path: str
    action: str
    duplicate_of: str | None = None

    def __str__(self) -> str:
        twin = f" (near-duplicate of {self.duplicate_of!r})" if self.duplicate_of else ""
        return f"{self.action} [[{self.title}]] at {self.path} in the {self.source} vault{twin}"


class _IndexSwapped(Exception):
    """The index file changed under a sync; it starts over."""


@dataclass(frozen=True)
class Skipped:
    """A file the sync did not index (``status`` ``skipped``), or indexed with a part ignored (``indexed``)."""

    source: str
    path: str
    reason: str
    status: str = "skipped"


class NoteStore:
    """The markdown folder ``root`` of one vault (``source`` is ``global`` or ``project``) and its index."""

    def __init__(
        self,
        source: str,
        root: Path,
        db_path: Path | None,
        clock: Callable[[], float],
        *,
        url: str | None = None,
        schema_name: str = "aries_vault",
    ) -> None:
        self.source = source
        self.root = Path(root).expanduser()
        self.clock = clock
        self.index = VaultIndex(db_path, url=url, schema_name=schema_name)
        self.skipped: list[Skipped] = []
        # Team vault: what this process last saw of each file, (mtime_ns, size, content hash), so a sync parses
        # only files that changed since.
        self._seen: dict[str, tuple[int, int, str]] = {}
        # The index was deleted, replaced or truncated under us: the markdown files bring the notes back, and the
        # archive folder the list of archived notes.
        self.index.on_recreate = self._reindex
        if self.index.recreated:
            self.list_archived_files()
            self.index.log_recovery()

    def _reindex(self) -> None:
        self.list_archived_files()
        self.sync()

    def list_archived_files(self) -> int:
        """List again, in the archive table, the archived notes of the archive folder it does not list (a
        rebuilt SQLite index starts with an empty table): they show as archived, :meth:`restore` finds them,
        and the sweep keeps their learned state (restored from the export) instead of dropping it. The file's
        time stands for when it was archived. Returns how many were listed; a team vault's database keeps its
        own table."""
        if self.index.shared:
            return 0
        known = self.index.archived_paths()
        rows = []
        for entry in self._archive_files():
            rel = entry["archived_path"]
            text = _read_text(self.root, rel) if rel not in known else None
            if text is None:
                continue
            rows.append(
                {
                    **entry,
                    "key": entry["title"].casefold(),
                    "archived_at": (self.root / rel).lstat().st_mtime,
                    "archived_by": self.index.user,
                    "text": text,
                    "learned": self.index.archived_learning.pop(rel, ""),
                }
            )
        if not rows:
            return 0

        def work(conn: Connection) -> None:
            self.index.list_archived(conn, rows)
            detail = f"{len(rows)} archived notes listed again from {ARCHIVE_DIR}/"
            self.index.audit(conn, self.clock(), "recover", "", "", detail)

        self.index.write(work)
        return len(rows)

    # -- files -> index -------------------------------------------------------------------------------

    def sync(self) -> tuple[int, int]:
        """Index new and changed files, drop rows of deleted ones; returns (changed, removed)."""
        for _ in range(_SYNC_ATTEMPTS):
            try:
                return self._sync_once()
            except _IndexSwapped:
                continue  # the index file was replaced between reading it and writing: diff again
        return self._sync_once()

    def _sync_once(self) -> tuple[int, int]:
        if self.index.shared:
            return self._sync_shared()
        file_in_use = self.index.identity
        indexed = self.index.file_stamps()
        changed: list[Note] = []
        broken: list[str] = []
        skipped: list[Skipped] = []
        present: set[str] = set()
        files, unlisted = iter_note_files(self.root) if self.root.is_dir() else ([], [])
        skipped.extend(Skipped(self.source, rel, reason) for rel, reason in unlisted)
        for path in files:
            rel = path.relative_to(self.root).as_posix()
            try:
                stat = path.lstat()
                kind = not_a_file(stat.st_mode)
                if kind:
                    raise NoteError(f"{rel}: {kind}.")
                if path.suffix != ".md":
                    skipped.append(Skipped(self.source, rel, "not a markdown (.md) note"))
                    continue
                if indexed.get(rel) == (stat.st_mtime_ns, stat.st_size):
                    present.add(rel)
                    continue
                note = parse_note(self.root, path)
                changed.append(note)
                present.add(rel)
                skipped.extend(Skipped(self.source, rel, p, "indexed") for p in note.problems)
            except NoteError as exc:
                skipped.append(Skipped(self.source, rel, str(exc)))
                if rel in indexed:
                    broken.append(rel)
            except (OSError, ValueError) as exc:
                # ValueError: a name the OS cannot take back (an embedded NUL from a hostile listing).
                why = getattr(exc, "strerror", None) or str(exc)
                skipped.append(Skipped(self.source, rel, f"{rel}: cannot read ({why})"))
                if rel in indexed:
                    broken.append(rel)
        removed = [p for p in indexed if p not in present and p not in broken]
        self.skipped = skipped
        if file_in_use != self.index.identity:
            raise _IndexSwapped
        if changed or removed or broken:
            self.index.write(lambda conn: self._apply_sync(conn, changed, removed, broken, file_in_use))
        self.index.rebuilt_unsynced = False
        return len(changed), len(removed) + len(broken)

    def _apply_sync(
        self,
        conn: Connection,
        changed: Sequence[Note],
        removed: Sequence[str],
        broken: Sequence[str],
        file_in_use: tuple[int, int],
    ) -> None:
        if file_in_use != self.index.identity:
            # The diff was taken against a file that has since been replaced: applying it would leave out
            # every note the old file already had.
            raise _IndexSwapped
        for note in changed:
            self._set_aside_if_new(conn, note)
            self.index.upsert_note(conn, note, note.created, note.mtime_ns / 1e9)
        for rel in broken:
            self.index.delete_note(conn, rel)
        gone = len(broken)
        for rel in removed:
            # Another process may have written this note after we listed the folder: keep it if it exists now.
            if not (self.root / rel).exists():
                self.index.delete_note(conn, rel)
                gone += 1
        self.index.bump(conn)
        self.index.audit(conn, self.clock(), "sync", "", "", f"{len(changed)} indexed, {gone} removed")

    def _sync_shared(self) -> tuple[int, int]:
        """Team vault: the database is the source of truth and the folder its mirror. A file that is new here,
        or edited here after the database's copy was written, is indexed; a note the folder lacks, or has an
        older copy of, is written from the database; a file whose note was forgotten elsewhere since it was
        written is moved to the archive. A file deleted by hand comes back: :meth:`forget` removes a note."""
        rows = self.index.mirror_rows()
        forgotten = self.index.forgotten_paths()
        tombstones = self.index.tombstones()
        changed: list[Note] = []
        export: list[Any] = []
        aside: list[str] = []
        gone: list[str] = []
        present: set[str] = set()
        files, unlisted = iter_note_files(self.root) if self.root.is_dir() else ([], [])
        skipped = [Skipped(self.source, rel, reason) for rel, reason in unlisted]
        for path in files:
            rel = path.relative_to(self.root).as_posix()
            try:
                info = path.lstat()
                kind = not_a_file(info.st_mode)
                if kind:
                    raise NoteError(f"{rel}: {kind}.")
                if path.suffix != ".md":
                    skipped.append(Skipped(self.source, rel, "not a markdown (.md) note"))
                    continue
                present.add(rel)
                row = rows.get(rel)
                if row is not None and self._seen.get(rel) == (
                    info.st_mtime_ns,
                    info.st_size,
                    row.content_hash,
                ):
                    continue
                note = parse_note(self.root, path)
                self._seen[rel] = (note.mtime_ns, note.size, note.content_hash)
                skipped.extend(Skipped(self.source, rel, p, "indexed") for p in note.problems)
                if row is not None and row.content_hash == note.content_hash:
                    continue
                if row is None and forgotten.get(rel, -math.inf) >= note.mtime_ns / 1e9:
                    aside.append(rel)
                elif row is None and tombstones.get(path_hash(rel), -math.inf) >= note.mtime_ns / 1e9:
                    gone.append(rel)  # purged elsewhere: this machine's copy goes too
                elif row is None or note.mtime_ns > row.mtime_ns:
                    changed.append(note)
                else:
                    export.append(row)
            except NoteError as exc:
                skipped.append(Skipped(self.source, rel, str(exc)))
            except (OSError, ValueError) as exc:
                why = getattr(exc, "strerror", None) or str(exc)
                skipped.append(Skipped(self.source, rel, f"{rel}: cannot read ({why})"))
        export.extend(row for rel, row in rows.items() if rel not in present)
        self.skipped = skipped
        if changed:
            self.index.write(lambda conn: self._apply_shared(conn, changed))
        for row in export:
            iso = _dt.datetime.fromtimestamp(row.created, _dt.UTC).isoformat(timespec="seconds")
            meta = {"description": row.description, "type": row.type, "created": iso, "author": row.author}
            meta.update(Provenance(row.origin, row.session_id, row.turn, row.kernel).front_matter())
            if row.superseded_by:
                meta["superseded_by"] = row.superseded_by
            info = atomic_write(self.root, row.path, render_note(meta, row.body))
            self._seen[row.path] = (info.st_mtime_ns, info.st_size, row.content_hash)
        for rel in aside:
            move_file(self.root, rel, _free_name(self.root, f"{ARCHIVE_DIR}/{rel}"))
        for rel in gone:
            remove_file(self.root, rel)
            self._seen.pop(rel, None)
        return len(changed) + len(export), len(aside) + len(gone)

    def _apply_shared(self, conn: Connection, changed: Sequence[Note]) -> None:
        indexed = 0
        for note in changed:
            # Another user may have written this note since we read it: the newer copy wins.
            current = self.index.note_mtime(conn, note.path)
            if current is None or note.mtime_ns > current:
                if current is None:
                    self._set_aside_if_new(conn, note)
                self.index.upsert_note(conn, note, note.created, note.mtime_ns / 1e9)
                indexed += 1
        if indexed:
            self.index.bump(conn)
            self.index.audit(conn, self.clock(), "sync", "", "", f"{indexed} indexed from {self.root}")

    def _set_aside_if_new(self, conn: Connection, note: Note) -> None:
        """A file not indexed yet under the title of an archived note is a new note: the archived one keeps its
        learned state (:meth:`VaultIndex.set_aside_learning`). Not while a rebuilt index is first filled: its
        files are the notes the damaged index held, whose learned state the export just brought back."""
        if self.index.rebuilt_unsynced:
            return
        if not self.index.is_indexed(conn, note.path):
            self._set_aside(conn, note.title)

    def _set_aside(self, conn: Connection, title: str) -> None:
        key = title.casefold()
        self.index.set_aside_learning(conn, key, f"{self.source}:{key}")

    def rebuild(self) -> None:
        """Forget every note row and index the files again; learned state and the audit log are kept."""

        def clear(conn: Connection) -> None:
            self.index.clear_notes(conn)
            self.index.bump(conn)
            self.index.audit(conn, self.clock(), "rebuild", "", "", "index cleared")

        self.index.write(clear)
        self.sync()

    # -- lookups --------------------------------------------------------------------------------------

    def find(self, title: str) -> dict[str, Any] | None:
        """The row of the note titled ``title`` (case-insensitive, sanitized like a file name), or None."""
        return self.index.find_note(sanitize_title(title).casefold())

    # -- writes ---------------------------------------------------------------------------------------

    def add(
        self,
        title: str,
        content: str,
        type: str = "insight",
        folder: str = "inbox",
        project: str | None = None,
        provenance: Provenance | None = None,
    ) -> AddResult:
        """Write a new note, or update the near-duplicate that already exists (same title or same content)."""
        return self.add_many([(title, content, type)], folder=folder, project=project, provenance=provenance)[
            0
        ]

    def add_many(
        self,
        items: Sequence[tuple[str, str, str]],
        folder: str = "inbox",
        project: str | None = None,
        created: Sequence[float] | None = None,
        near_duplicates: bool = True,
        provenance: Provenance | None = None,
    ) -> list[AddResult]:
        """Add many ``(title, content, type)`` notes in one transaction: the bulk path (benchmarks, imports).

        ``near_duplicates=False`` keeps the exact title/content duplicate check but skips the BM25 search for
        similar content, which dominates the cost of building a very large vault. ``provenance`` says who
        writes (default: :func:`.provenance.current`); a new note keeps it in its front matter, every edit in
        the audit log."""
        who = provenance or current_provenance()
        if folder not in FOLDERS:
            raise NoteError(f"Unknown folder {folder!r}; notes go to one of {', '.join(FOLDERS)}.")
        # Secrets never reach the file, its name or the index: redacted before anything is written.
        prepared = [
            (sanitize_title(_redact_title(t)), redact(_check_content(t, c)), ty) for t, c, ty in items
        ]
        # Whole seconds, so the ``created`` written to front matter gives the same warmth after a rebuild.
        moments = [
            float(int(m)) for m in (created if created is not None else [self.clock()] * len(prepared))
        ]

        def work(conn: Connection) -> list[AddResult]:
            results = [
                self._add_one(conn, title, body, kind, folder, project, moment, near_duplicates, who)
                for (title, body, kind), moment in zip(prepared, moments, strict=False)
            ]
            if any(r.action != "unchanged" for r in results):
                self.index.bump(conn)
            return results

        return self.index.write(work)

    def _add_one(
        self,
        conn: Connection,
        title: str,
        body: str,
        kind: str,
        folder: str,
        project: str | None,
        created: float,
        near_duplicates: bool,
        provenance: Provenance,
    ) -> AddResult:
        twin = self._duplicate(conn, title, body, near_duplicates)
        if twin is not None:
            if twin["body"].strip() == body:
                return AddResult(twin["title"], self.source, twin["path"], "unchanged", twin["title"])
            # The note keeps where it came from; this edit's provenance goes to the audit log.
            kept = self._meta_of(twin["path"]) or {"type": kind}
            self._write(
                conn,
                twin["title"],
                twin["path"],
                kept,
                body,
                twin["created"],
                "update",
                provenance,
                twin["body"],
            )
            return AddResult(twin["title"], self.source, twin["path"], "updated", twin["title"])
        rel = f"{folder}/{title}.md"
        if note_exists(self.root, rel):
            # A readable file the index does not know yet (written since the last sync, or by a writer that
            # died before committing) is this note: overwrite it. An unreadable one is the user's to fix.
            try:
                parse_note(self.root, self.root / rel)
            except (NoteError, OSError) as exc:
                raise NoteError(f"Cannot write {rel}: the file there is not a valid note ({exc}).") from exc
        iso = _dt.datetime.fromtimestamp(created, _dt.UTC).isoformat(timespec="seconds")
        meta: dict[str, Any] = {
            "description": _first_line(body),
            "type": kind,
            "created": iso,
            "author": self.index.user,
            **provenance.front_matter(),
        }
        if project:
            meta["project"] = project
        self._set_aside(conn, title)
        self._write(conn, title, rel, meta, body, created, "add", provenance)
        return AddResult(title, self.source, rel, "created")

    def _write(
        self,
        conn: Connection,
        title: str,
        rel: str,
        meta: dict[str, Any],
        body: str,
        created: float,
        action: str,
        provenance: Provenance,
        before: str = "",
        detail: str | None = None,
    ) -> None:
        stat = atomic_write(self.root, rel, render_note(meta, body))
        note = Note(
            title,
            rel,
            body,
            meta,
            wiki_links(body),
            content_hash(f"{title}\n{body}"),
            stat.st_size,
            stat.st_mtime_ns,
        )
        self.index.upsert_note(conn, note, created, self.clock())
        self.index.audit(
            conn,
            self.clock(),
            action,
            title,
            rel,
            f"{len(body)} chars" if detail is None else detail,
            provenance=provenance,
            content_hash=note.content_hash,
            change=describe_change(before, body),
        )

    def _meta_of(self, rel: str) -> dict[str, Any] | None:
        try:
            return parse_note(self.root, self.root / rel).meta
        except (NoteError, OSError):
            return None

    def _duplicate(self, conn: Connection, title: str, body: str, near: bool) -> dict[str, Any] | None:
        found = self.index.twin(conn, title, body)
        if found:
            return found
        words = set(_WORD.findall(body.casefold()))
        if not near or len(words) < 5:
            return None
        ids = self.index.similar(conn, query_terms(" ".join(sorted(words, key=len, reverse=True)[:24])), 3)
        by_id = self.index.notes_by_id(conn, ids)
        for row in (by_id[i] for i in ids if i in by_id):
            other = set(_WORD.findall(row["body"].casefold()))
            if other and len(words & other) / len(words | other) >= NEAR_DUPLICATE_JACCARD:
                return row
        return None

    def forget(self, title: str) -> str:
        """Move the note to the archive folder and out of the index; returns its archived path. The archive
        row keeps the note's text and who archived it, so another machine of a team vault can restore it."""
        row = self.find(title)
        if row is None:
            raise KeyError(f"No note titled {title!r} in the {self.source} vault.")

        def work(conn: Connection) -> str:
            rel = _free_name(self.root, f"{ARCHIVE_DIR}/{row['path']}")
            kept = _read_text(self.root, row["path"])
            if kept is not None:
                move_file(self.root, row["path"], rel)
            self.index.delete_note(conn, row["path"])
            self.index.archive_note(
                conn,
                title=row["title"],
                key=row["key"],
                path=row["path"],
                archived_path=rel,
                archived_at=self.clock(),
                archived_by=self.index.user,
                text=kept if kept is not None else render_note({"type": row["type"]}, row["body"]),
            )
            self.index.bump(conn)
            self.index.audit(conn, self.clock(), "forget", row["title"], row["path"], f"archived to {rel}")
            return rel

        return self.index.write(work)

    def restore(self, title: str) -> AddResult:
        """Bring the most recently archived note titled ``title`` back to where it was."""
        key = sanitize_title(title).casefold()
        row = self.index.archived_entry(key)
        if row is None:
            row = self._archived_on_disk(key)
        if row is None:
            raise KeyError(f"No archived note titled {title!r} in the {self.source} vault.")

        def work(conn: Connection) -> AddResult:
            if note_exists(self.root, row["path"]):
                raise NoteError(
                    f"Cannot restore {row['path']}: a note already exists there; rename or forget it first."
                )
            if note_exists(self.root, row["archived_path"]):
                move_file(self.root, row["archived_path"], row["path"])
            else:  # archived on another machine of a team vault: the archive row has the text
                atomic_write(self.root, row["path"], row["text"])
            note = parse_note(self.root, self.root / row["path"])
            self.index.upsert_note(conn, note, note.created, note.mtime_ns / 1e9)
            if row.get("id") is not None:
                self.index.mark_restored(conn, row["id"], self.clock())
                self.index.take_back_learning(conn, row["id"])
            self.index.bump(conn)
            self.index.audit(
                conn, self.clock(), "restore", note.title, note.path, f"from {row['archived_path']}"
            )
            return AddResult(note.title, self.source, note.path, "restored")

        return self.index.write(work)

    def update_front_matter(self, title: str, changes: dict[str, Any], action: str, detail: str) -> None:
        """Set (or, for a value of None, remove) front-matter keys of the note titled ``title``, keeping its body;
        audited as ``action`` with ``detail``."""
        row = self.find(title)
        if row is None:
            raise KeyError(f"No note titled {title!r} in the {self.source} vault.")
        try:
            note = parse_note(self.root, self.root / row["path"])
            meta, body = dict(note.meta), note.body
        except (NoteError, OSError):  # a team vault's note this machine has no copy of yet
            meta, body = {"description": row["description"], "type": row["type"]}, row["body"]
        for name, value in changes.items():
            if value is None:
                meta.pop(name, None)
            else:
                meta[name] = value
        who = current_provenance()

        def work(conn: Connection) -> None:
            self._write(
                conn, row["title"], row["path"], meta, body, row["created"], action, who, body, detail
            )
            self.index.bump(conn)  # a superseded note leaves retrieval: the corpus is read again

        self.index.write(work)

    def purge(self, title: str, dry_run: bool = False) -> list[tuple[str, str, int]]:
        """Remove every note titled ``title`` (live or archived) for good: its files, archived copies, index
        rows, links, learned state of every user, embeddings of each of its versions, and the audit lines
        about it (one ``purge`` line naming no note says it happened). Returns ``(what, item, rows)`` per thing
        removed, or that would be with ``dry_run`` (which changes nothing)."""
        key = sanitize_title(title).casefold()

        def work(conn: Connection) -> list[tuple[str, str, int]]:
            return self._purge(conn, key, apply=not dry_run)

        return self.index.read(work) if dry_run else self.index.write(work)

    def _purge(self, conn: Connection, key: str, apply: bool) -> list[tuple[str, str, int]]:
        found: list[tuple[str, str, int]] = []
        candidates = self.index.purge_candidates(conn, key)
        rows, kept = candidates.notes, candidates.archived
        on_disk = self._archived_on_disk(key, every=True)
        titles = {r.title for r in rows} | {r.title for r in kept} | {r["title"] for r in on_disk}
        # A note missing from the folder (another branch checked out) is purged too: its learned state is kept.
        if not titles and not candidates.missing:
            return []
        files = [r.path for r in rows if note_exists(self.root, r.path)]
        archived = sorted({r.archived_path for r in kept} | {r["archived_path"] for r in on_disk})
        archived = [rel for rel in archived if note_exists(self.root, rel)]
        hashes = {r.content_hash for r in rows} | candidates.audit_hashes
        for r in kept:
            with contextlib.suppress(NoteError):
                hashes.add(content_hash(f"{r.title}\n{parse_text(r.text, r.archived_path)[1].strip()}"))
        hashes -= self.index.hashes_elsewhere(conn, key, hashes)
        paths = {r.path for r in rows} | {r.path for r in kept} | set(archived)
        scope = PurgeScope(
            key=key,
            uid=f"{self.source}:{key}",
            note_ids=[r.id for r in rows],
            paths=sorted(paths),
            titles=sorted(titles),
            hashes=sorted(hashes),
        )
        found += [("file", rel, 1) for rel in files] + [("archived file", rel, 1) for rel in archived]
        found += [(what, self.source, count) for what, count in self.index.purge_counts(conn, scope)]
        if not apply:
            return found
        for rel in files + archived:
            remove_file(self.root, rel)
            self._seen.pop(rel, None)
        self.index.purge_rows(conn, scope, self.clock())
        self.index.bump(conn)
        removed = sum(count for _, _, count in found)
        self.index.audit(conn, self.clock(), "purge", "", "", f"a note purged: {removed} files and rows")
        return found

    def drop_cooccurrence(self, uid: str, dry_run: bool = False) -> int:
        """Remove (or, with ``dry_run``, count) every user's co-occurrence rows naming ``uid`` on either side."""
        return self.index.drop_cooccurrence(uid, dry_run=dry_run)

    def _archive_files(self) -> list[dict[str, Any]]:
        """The notes of the archive folder: title, path (where it was) and archived_path, each."""
        folder = self.root / ARCHIVE_DIR
        if not folder.is_dir():
            return []
        files, _ = iter_note_files(folder)
        found = []
        for path in files:
            if path.suffix != ".md":
                continue
            rel = path.relative_to(self.root).as_posix()
            title = _ARCHIVED_COPY.sub("", path.stem)  # "Title (1).md" is a second archived copy of "Title"
            found.append({"title": title, "path": rel.removeprefix(f"{ARCHIVE_DIR}/"), "archived_path": rel})
        return found

    def _archived_on_disk(self, key: str, every: bool = False) -> Any:
        # The archive table lives in the index; if the index was rebuilt, the archive folder still knows.
        found = [
            {"id": None, **entry, "text": ""}
            for entry in self._archive_files()
            if entry["title"].casefold() == key
        ]
        if every:
            return found
        exact = [f for f in found if PurePosixPath(f["archived_path"]).stem == f["title"]]
        if not exact:
            return None
        return max(exact, key=lambda f: (self.root / f["archived_path"]).lstat().st_mtime)  # the latest


def describe_change(before: str, after: str) -> str:
    """What an edit changed, as the removed (``-``) and added (``+``) lines of a unified diff without context,
    cut to :data:`_CHANGE_CHARS`; only the sizes for bodies too long to diff cheaply."""
    if len(before) + len(after) > _DIFF_CHARS:
        return f"{len(before):,} -> {len(after):,} chars (too long to diff)"
    lines = difflib.unified_diff(before.splitlines(), after.splitlines(), n=0, lineterm="")
    changed = [line for line in lines if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    text = "\n".join(changed)
    return text if len(text) <= _CHANGE_CHARS else text[: _CHANGE_CHARS - 3] + "..."


def _read_text(root: Path, rel: str) -> str | None:
    """The text of the note file ``root/rel``, or None when this machine has no readable copy."""
    try:
        return read_note_bytes(root, rel)[0].decode("utf-8")
    except (NoteError, OSError, UnicodeDecodeError):
        return None


def _check_content(title: str, content: str) -> str:
    if not isinstance(content, str):
        raise NoteError(f"The content of {title!r} must be text, not {type(content).__name__}.")
    size = len(content.encode("utf-8"))
    if size > MAX_NOTE_BYTES:
        raise NoteError(
            f"The note {title!r} is {size:,} bytes, over the {MAX_NOTE_BYTES:,}-byte limit; "
            "split it into smaller notes that each make one claim."
        )
    if "\x00" in content:
        raise NoteError(f"The content of {title!r} contains NUL bytes; a note must be text, not binary data.")
    return content.strip()


def _redact_title(title: str) -> str:
    return redact(title) if isinstance(title, str) else title


def _first_line(body: str) -> str:
    line = next((ln.strip() for ln in body.splitlines() if ln.strip()), "")
    return line[:157] + "..." if len(line) > 160 else line


def _free_name(root: Path, rel: str) -> str:
    """``rel``, or ``rel`` with " (n)" after its stem, whichever is the first name not taken in ``root``."""
    path, candidate, n = PurePosixPath(rel), rel, 1
    while note_exists(root, candidate):
        candidate = path.with_name(f"{path.stem} ({n}){path.suffix}").as_posix()
        n += 1
    return candidate
