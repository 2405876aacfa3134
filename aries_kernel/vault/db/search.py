"""Full-text search: BM25 on both backends behind :func:`bm25_scores`, and the query terms both search.

SQLite scores with FTS5's weighted ``bm25()`` (title 4, description 2, body 1). PostgreSQL has no BM25, so the
same score is built from a weighted ``tsvector`` with a GIN index: each term's IDF, computed as FTS5 computes
it, times ``ts_rank`` of that term, with FTS5's column weights (``ts_rank`` is given {0.1, 0.25, 0.5, 1.0} for
{D, C, B, A}: body C, description B, title A) and its length normalization. :class:`Bm25Search` is the part of
the index that keeps the document frequencies and leaves common terms out in a large vault.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import func, select, text
from sqlalchemy.engine import Connection

from aries_kernel.vault.db.schema import notes
from aries_kernel.words import STOP_WORDS

__all__ = ["COMMON_TERMS_MIN_NOTES", "Bm25Search", "bm25_scores", "fts_query", "note_count", "query_terms"]

T = TypeVar("T")

# From this many notes on, BM25 leaves out the notes that match only terms in more than 5% of notes (they cannot
# reach the top results, and matching them all is what makes a big vault's query slow); below it, every match.
COMMON_TERMS_MIN_NOTES = 5000
# ts_rank's weights are given for {D, C, B, A}: body C, description B, title A, as FTS5's bm25(4, 2, 1).
_TS_WEIGHTS = "'{0.1, 0.25, 0.5, 1.0}'::float4[]"


def query_terms(text: str) -> list[str]:
    """The distinct lowercase words of ``text`` without stop words (all words if only stop words)."""
    words = re.findall(r"\w+", text.casefold())
    return list(dict.fromkeys([w for w in words if w not in STOP_WORDS] or words))


def fts_query(terms: Sequence[str]) -> str:
    """An FTS5 MATCH expression: each term quoted, OR-ed; "" for no terms."""
    return " OR ".join(f'"{t}"' for t in terms)


class Bm25Search:
    """BM25 over the index's notes, with the document frequencies of query terms cached per generation."""

    _df: dict[str, int]
    _df_generation: int
    _note_count: int

    if TYPE_CHECKING:

        @property
        def shared(self) -> bool: ...

        def read(self, work: Callable[[Connection], T]) -> T: ...

        def generation(self) -> int: ...

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
            rows = self.read(lambda conn: bm25_scores(conn, terms, limit, idf, within=rare))
        if len(rows) < limit:
            rows = self.read(lambda conn: bm25_scores(conn, terms, limit, idf))
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
        self._drop_stale_counts()
        wanted = [t for t in dict.fromkeys(terms) if t not in self._df]
        if wanted:
            self._df.update(zip(wanted, self.read(lambda conn: document_counts(conn, wanted)), strict=True))

    def _common_terms(self, terms: Sequence[str]) -> list[str]:
        """Terms in more than 5% of notes, when the vault is big enough (:data:`COMMON_TERMS_MIN_NOTES`) for it
        to matter."""
        self._drop_stale_counts()
        if self._note_count < COMMON_TERMS_MIN_NOTES:
            return []
        self._refresh_df(terms)
        return [t for t in terms if self._df[t] > 0.05 * self._note_count]

    def _drop_stale_counts(self) -> None:
        """Forget the note count and document frequencies when the notes changed since they were read."""
        generation = self.generation()
        if generation != self._df_generation:
            self._df_generation = generation
            self._df = {}
            self._note_count = self.read(note_count)

    @staticmethod
    def similar(conn: Connection, terms: Sequence[str], limit: int) -> list[int]:
        """Ids of the ``limit`` notes that best match any of ``terms`` (inside a write: the near-duplicate check)."""
        return [int(r[0]) for r in bm25_scores(conn, terms, limit, {})]


def bm25_scores(
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
        params[f"t{i}"], params[f"w{i}"] = words(term), idf.get(term, 1.0)
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


def document_counts(conn: Connection, terms: Sequence[str]) -> list[int]:
    """How many notes match each of ``terms``, in one statement."""
    if conn.dialect.name == "postgresql":
        parts = [
            f"(SELECT count(*) FROM notes WHERE tsv @@ plainto_tsquery('english', :t{i}))"
            for i in range(len(terms))
        ]
        terms = [words(t) for t in terms]
    else:
        parts = [f"(SELECT count(*) FROM notes_fts WHERE notes_fts MATCH :t{i})" for i in range(len(terms))]
        terms = [fts_query([t]) for t in terms]
    row = conn.execute(text("SELECT " + ", ".join(parts)), {f"t{i}": t for i, t in enumerate(terms)}).one()
    return [int(v) for v in row]


def words(term: str) -> str:
    """``term`` split where FTS5's unicode61 tokenizer splits (the indexed text is split the same way)."""
    return re.sub(r"[\W_]+", " ", term).strip()


def note_count(conn: Connection) -> int:
    """How many notes the index holds."""
    return int(conn.execute(select(func.count()).select_from(notes)).scalar_one())
