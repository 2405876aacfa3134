"""The embeddings cache: each note's vector per embedding model, keyed by the note's content hash (so a note
edited back to an earlier text, or the same text in two vaults, is embedded once)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sqlalchemy import select
from sqlalchemy.engine import Connection

from aries_kernel.vault.db.engine import upsert
from aries_kernel.vault.db.records import chunks
from aries_kernel.vault.db.schema import embeddings

__all__ = ["cached_vectors", "store_vectors"]


def cached_vectors(conn: Connection, model: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
    """The cached vectors of ``model`` among ``hashes``, by content hash."""
    e = embeddings.c
    found: dict[str, np.ndarray] = {}
    for chunk in chunks(list(hashes), 500):
        rows = conn.execute(
            select(e.content_hash, e.vector).where(e.model == model, e.content_hash.in_(list(chunk)))
        )
        found.update((r[0], np.frombuffer(r[1], dtype=np.float32)) for r in rows)
    return found


def store_vectors(conn: Connection, model: str, vectors: dict[str, np.ndarray]) -> None:
    """Cache ``vectors`` of ``model`` by content hash, replacing what was there."""
    if not vectors:
        return
    payload = [
        {"content_hash": h, "model": model, "vector": np.asarray(v, dtype=np.float32).tobytes()}
        for h, v in vectors.items()
    ]
    stmt = upsert(conn, embeddings)
    conn.execute(
        stmt.on_conflict_do_update(
            index_elements=["content_hash", "model"], set_={"vector": stmt.excluded.vector}
        ),
        payload,
    )
