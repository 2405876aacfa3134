"""Learned state: accesses, Q-values and co-occurrence, per user; the sweep of notes that are gone, and the
learned rows an archived note keeps while a new note has its title.

Every function takes the connection of the caller's transaction (:meth:`VaultIndex.read`/``write``); those
about one user's state take the user (:attr:`VaultIndex.user`), so in a team vault one user's habits never
rerank another's memory.
"""

from __future__ import annotations

import json
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import and_, bindparam, delete, func, literal, not_, or_, select, union, update
from sqlalchemy.engine import Connection

from aries_kernel.vault import learning
from aries_kernel.vault.db import records
from aries_kernel.vault.db.engine import upsert
from aries_kernel.vault.db.schema import access, archive, cooccurrence, missing, notes, q_values

__all__ = [
    "MISSING_GRACE_SECONDS",
    "accesses",
    "cooccurrence_pairs",
    "drop_cooccurrence",
    "export_learning",
    "import_learning",
    "live_keys",
    "q_values_of",
    "record_access",
    "set_aside_learning",
    "store_credit",
    "sweep_learned",
    "take_back_learning",
]

# How long a note missing from the index keeps its learned state. A note leaves the index when its file leaves
# the folder, and in a project brain that is most often a checkout of another git branch; a branch can stay
# checked out for weeks (a long feature, a release), and the learned state would never come back. A note missing
# for longer than this was deleted, not switched away.
MISSING_GRACE_SECONDS = 30 * 86400


def accesses(conn: Connection, user: str, keys: Iterable[str] | None = None) -> list[tuple[str, float]]:
    """(key, time) of ``user``'s recorded accesses, for ``keys`` or for every note."""
    base = select(access.c.key, access.c.at).where(access.c.username == user)
    if keys is None:
        return [(r[0], float(r[1])) for r in conn.execute(base)]
    wanted = list(dict.fromkeys(keys))
    out: list[tuple[str, float]] = []
    for chunk in records.chunks(wanted, 500):
        out.extend((r[0], float(r[1])) for r in conn.execute(base.where(access.c.key.in_(list(chunk)))))
    return out


def record_access(conn: Connection, user: str, key: str, at: float, kind: str) -> None:
    """One access to a note by ``user`` (read, used, echo): it warms the note for that user."""
    conn.execute(
        upsert(conn, access).on_conflict_do_nothing(),
        {"username": user, "key": key, "at": at, "kind": kind},
    )


def q_values_of(conn: Connection, user: str) -> dict[str, tuple[float, int]]:
    """Key -> (Q, exposures) for every note with learned state of ``user``."""
    rows = conn.execute(
        select(q_values.c.key, q_values.c.q, q_values.c.exposures).where(q_values.c.username == user)
    )
    return {r[0]: (float(r[1]), int(r[2])) for r in rows}


def cooccurrence_pairs(conn: Connection, user: str) -> list[tuple[str, str, float]]:
    """(uid a, uid b, weight) pairs of ``user`` stored here (uids are ``source:key``)."""
    c = cooccurrence.c
    return [
        (r[0], r[1], float(r[2])) for r in conn.execute(select(c.a, c.b, c.weight).where(c.username == user))
    ]


def store_credit(
    conn: Connection,
    user: str,
    q_rows: Sequence[tuple[str, float, int, float]],
    pairs: Sequence[tuple[str, str]],
    used: Collection[str] = (),
) -> None:
    """Write a session's credit for ``user``: Q-values ``(key, q, exposures, at)``, and the co-occurrence
    of the notes ``used`` (uids): every pair stored here that touches one of them is weighted again by
    :func:`.learning.cooccurrence_weight` (``pairs``, the pairs used together, gain one) and dropped below
    :data:`.learning.COOC_FLOOR`."""
    if q_rows:
        stmt = upsert(conn, q_values)
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
                {"username": user, "key": k, "q": q, "exposures": e, "updates": 1, "updated": at}
                for k, q, e, at in q_rows
            ],
        )
    touched = sorted(set(used) | {uid for pair in pairs for uid in pair})
    if not touched:
        return
    c = cooccurrence.c
    weights: dict[tuple[str, str], float] = {}
    for chunk in records.chunks(touched, 250):
        rows = conn.execute(
            select(c.a, c.b, c.weight).where(
                c.username == user, or_(c.a.in_(list(chunk)), c.b.in_(list(chunk)))
            )
        )
        weights.update(((r[0], r[1]), float(r[2])) for r in rows)
    together = set(pairs)
    for pair in together:
        weights.setdefault(pair, 0.0)
    after = {p: learning.cooccurrence_weight(w, p in together) for p, w in weights.items()}
    kept = [
        {"username": user, "a": a, "b": b, "weight": w}
        for (a, b), w in after.items()
        if w >= learning.COOC_FLOOR
    ]
    faded = [{"user_": user, "a_": a, "b_": b} for (a, b), w in after.items() if w < learning.COOC_FLOOR]
    if kept:
        stmt = upsert(conn, cooccurrence)
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
    store, the keys of its notes that are not gone (:func:`live_keys`; a co-occurrence row of the project
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


def set_aside_learning(conn: Connection, key: str, uid: str) -> int:
    """Before a *new* note takes ``key``: if no indexed note holds it and an archive entry does (an archived
    or forgotten note of that title), move every user's learned rows of ``key`` (Q-values, accesses, and
    the co-occurrence pairs stored here naming ``uid``) into that entry's ``learned``, so the new note starts
    from the prior and the archived one has its state back when restored (:func:`take_back_learning`).
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
            list(r) for r in conn.execute(select(ac.username, ac.key, ac.at, ac.kind).where(ac.key == key))
        ],
        "cooccurrence": [list(r) for r in conn.execute(select(c.username, c.a, c.b, c.weight).where(pair))],
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


def take_back_learning(conn: Connection, entry_id: int) -> int:
    """Put the learned rows :func:`set_aside_learning` kept in the archive entry ``entry_id`` back (a restore);
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
            conn.execute(upsert(conn, table).on_conflict_do_nothing(), rows)
            count += len(rows)
    conn.execute(update(archive).where(a.id == entry_id).values(learned=""))
    return count


def live_keys(conn: Connection, now: float | None = None) -> set[str]:
    """Keys of the notes whose learned state is kept at ``now`` (default: the time): indexed, archived, or
    with learned rows and not missing for :data:`MISSING_GRACE_SECONDS` (see :func:`sweep_learned`)."""
    cutoff = (time.time() if now is None else now) - MISSING_GRACE_SECONDS
    a, m = archive.c, missing.c
    indexed = {r[0] for r in conn.execute(select(notes.c.key))}
    archived = {r[0] for r in conn.execute(select(a.key).where(a.restored_at.is_(None)))}
    learned = {r[0] for r in conn.execute(union(select(q_values.c.key), select(access.c.key)))}
    expired = {r[0] for r in conn.execute(select(m.key).where(m.since <= cutoff))}
    return indexed | archived | (learned - expired)


def export_learning(conn: Connection, user: str) -> dict[str, list[list[Any]]]:
    """``user``'s learned tables as plain lists (for JSON), and the learned state set aside for archived notes."""
    q, a, c, ar = q_values.c, access.c, cooccurrence.c, archive.c
    return {
        "q_values": [
            list(r)
            for r in conn.execute(
                select(q.key, q.q, q.exposures, q.updates, q.updated).where(q.username == user)
            )
        ],
        "access": [list(r) for r in conn.execute(select(a.key, a.at, a.kind).where(a.username == user))],
        "cooccurrence": [list(r) for r in conn.execute(select(c.a, c.b, c.weight).where(c.username == user))],
        # what a new note under an archived title set aside for the archived one (every user's)
        "archived": [
            list(r)
            for r in conn.execute(
                select(ar.archived_path, ar.learned).where(ar.learned != "", ar.restored_at.is_(None))
            )
        ],
    }


def import_learning(conn: Connection, user: str, data: dict[str, list[list[Any]]]) -> dict[str, str]:
    """Merge exported learned state into ``user``'s: Q-values and co-occurrence replace, accesses add. Returns
    the learned state of archived notes whose archive entry is not listed (archived path -> JSON): it comes back
    with the archive folder's listing (:meth:`NoteStore.list_archived_files`)."""
    unlisted: dict[str, str] = {}
    if data.get("q_values"):
        stmt = upsert(conn, q_values)
        conn.execute(
            stmt.on_conflict_do_update(
                index_elements=["username", "key"],
                set_={n: stmt.excluded[n] for n in ("q", "exposures", "updates", "updated")},
            ),
            [  # an export from before the learning loop was bounded (m008) may hold Q below the prior
                {
                    "username": user,
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
            upsert(conn, access).on_conflict_do_nothing(),
            [dict(zip(("key", "at", "kind"), r, strict=True), username=user) for r in data["access"]],
        )
    if data.get("cooccurrence"):
        stmt = upsert(conn, cooccurrence)
        conn.execute(
            stmt.on_conflict_do_update(
                index_elements=["username", "a", "b"], set_={"weight": stmt.excluded.weight}
            ),
            [  # ... and co-occurrence weights above the cap
                {"username": user, "a": a, "b": b, "weight": min(float(w), learning.COOC_CAP)}
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
            unlisted[str(archived_path)] = str(learned)
    return unlisted


def drop_cooccurrence(conn: Connection, uid: str, dry_run: bool = False) -> int:
    """Remove (or, with ``dry_run``, count) every user's co-occurrence rows naming ``uid`` on either side."""
    c = cooccurrence.c
    where = (c.a == uid) | (c.b == uid)
    count = int(conn.execute(select(func.count()).select_from(cooccurrence).where(where)).scalar_one())
    if count and not dry_run:
        conn.execute(delete(cooccurrence).where(where))
    return count
