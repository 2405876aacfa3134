"""The ``vault`` of the REPL body: the global vault and the project brain, searched and learned as one.

:func:`open_vault` builds a :class:`Vault` from settings (``AriesVault`` in the Jupyter config,
``$ARIES_VAULT`` for the global folder). Every query returns a DataFrame with one column per signal, so a
user can see why a note ranked; every row says which vault (``global`` or ``project``) it came from.
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import rustworkx as rx
from traitlets import Bool, Dict, Int, Unicode
from traitlets.config import Configurable

from aries_kernel.paths import aries_path, aries_setting
from aries_kernel.vault import learning, provenance, ranking
from aries_kernel.vault.db import query_terms
from aries_kernel.vault.embeddings import Embedder, make_embedder
from aries_kernel.vault.notes import NoteError, parse_note, sanitize_title
from aries_kernel.vault.provenance import Provenance
from aries_kernel.vault.store import AddResult, NoteStore

__all__ = ["AriesVault", "NoteText", "Vault", "open_vault"]

SIGNALS = ("semantic", "bm25", "pagerank", "warmth")
RANKED_COLUMNS = [
    "title", "source", "score", "semantic", "bm25", "pagerank", "warmth", "q_value", "cooccurrence",
    "author", "folder", "type", "path", "snippet",
]  # fmt: skip
# Chosen with ranking.RRF_K and ranking.CONTEXT on LoCoMo conversations 26, 30 and 41 only (bench/bench_locomo.py
# --tuning): wordllama's semantic signal is weaker than BM25 on conversational text, and the query-independent
# priors only break near-ties.
DEFAULT_WEIGHTS = {"semantic": 0.3, "bm25": 1.0, "pagerank": 0.05, "warmth": 0.05}
_WORD = re.compile(r"\w+")
_EMBED_CHARS = 4000
_COOC_SEEDS = 5
_COOC_WEIGHT = 0.5
_PURGED = "a purged note"  # superseded_by of a note whose successor was purged: it stays out of retrieval
_UNLINKED = "supersede link to a purged note removed"
_WARMTH_COLUMNS = [
    "title", "source", "score", "activation", "warmth", "q_value", "author", "folder", "path", "snippet",
]  # fmt: skip
_HISTORY_COLUMNS = ("at", "source", "action", "actor", "origin", "session", "turn", "kernel", "detail")


class AriesVault(Configurable):
    """Vault settings (``c.AriesVault.path = ...``); ``$ARIES_VAULT`` overrides ``path``, ``$ARIES_VAULT_URL``
    overrides ``url`` and ``$ARIES_VAULT_SCHEMA`` overrides ``schema``."""

    path = Unicode("~/.aries/vault", help="Folder of the global vault (markdown notes).").tag(config=True)
    url = Unicode(
        "",
        help="Database of the global vault's index: empty for SQLite in <path>/.aries/index.db, or a PostgreSQL "
        "URL (postgresql://user@host:5432/db) or libpq key=value string (host=db dbname=aries) for a team vault. "
        "Best give no password here: libpq reads PGPASSWORD or ~/.pgpass; one given is shown as ***.",
    ).tag(config=True)
    schema = Unicode(
        "aries_vault", help="PostgreSQL schema of the team vault (one database, many vaults)."
    ).tag(config=True)
    embedder = Unicode(
        "wordllama", help="Embedding model: wordllama, model2vec:<model>, endpoint:<model> or hash."
    ).tag(config=True)
    project_brain = Bool(True, help="Also search and write <root>/.aries/memory/, the project brain.").tag(
        config=True
    )
    weights = Dict(
        DEFAULT_WEIGHTS,
        help="Weight of each signal in the Reciprocal Rank Fusion.",
    ).tag(config=True)
    pool = Int(50, help="Candidates taken from each of BM25 and semantic search before fusion.").tag(
        config=True
    )


class NoteText(str):
    """A note's markdown (a ``str``: its title, who wrote and last edited it, its body) that also knows its title
    (``name``), source, path, ``author`` and ``editor`` (who made the latest audited edit)."""

    name: str
    source: str
    path: str
    author: str
    editor: str

    def _repr_markdown_(self) -> str:
        return f"**{self.name}** ({self.source}: `{self.path}`)\n\n{self}"


@dataclass
class _Corpus:
    """Every note of every store in arrays, with embeddings and the link graph; rebuilt when notes change."""

    generation: tuple[int, ...]
    store: np.ndarray
    ids: np.ndarray
    titles: list[str]
    keys: list[str]
    folders: list[str]
    types: list[str]
    paths: list[str]
    authors: list[str]  # who wrote each note first (its front matter's author, else who indexed it)
    created: np.ndarray
    superseded: np.ndarray  # True for a note another supersedes: kept and readable, left out of retrieval
    position: dict[tuple[int, int], int]
    by_uid: dict[str, int]
    vectors: np.ndarray
    graph: rx.PyDiGraph
    neighbours: list[list[int]]
    pagerank: np.ndarray

    def __len__(self) -> int:
        return len(self.titles)


def open_vault(
    root: str | os.PathLike[str] | None = None,
    config: Any = None,
    *,
    path: str | os.PathLike[str] | None = None,
    embedder: Embedder | None = None,
    clock: Callable[[], float] = time.time,
) -> Vault:
    """The global vault (``path``, else ``$ARIES_VAULT``, else ``AriesVault.path``) and the project brain
    ``<root>/.aries/memory`` when ``root`` is given. A repository whose ``.aries`` or ``.aries/memory`` is a
    symlink is refused (``UnsafePath``): the brain would be read and written wherever the link points."""
    settings = AriesVault(config=config)
    folder = Path(path).expanduser() if path else aries_path("ARIES_VAULT", settings.path, "vault")
    url = aries_setting("ARIES_VAULT_URL", settings.url) or None
    schema_name = aries_setting("ARIES_VAULT_SCHEMA", settings.schema)
    stores = [
        NoteStore("global", folder, folder / ".aries" / "index.db", clock, url=url, schema_name=schema_name)
    ]
    if root is not None and settings.project_brain:
        # ensure_aries_dir's .gitignore keeps vault.db out of git while the brain travels with the repository.
        from aries_kernel.codebase.store import UnsafePath, ensure_aries_dir

        project = Path(root).expanduser().resolve()
        project.mkdir(parents=True, exist_ok=True)
        aries_dir = ensure_aries_dir(project)
        if (aries_dir / "memory").is_symlink():
            raise UnsafePath(
                f"{aries_dir / 'memory'} is a symlink; aries-kernel does not read or write the project brain "
                "through it (replace it with a folder to continue)"
            )
        stores.append(NoteStore("project", aries_dir / "memory", aries_dir / "vault.db", clock))
    return Vault(
        stores,
        embedder or make_embedder(settings.embedder),
        weights=dict(settings.weights),
        pool=settings.pool,
        clock=clock,
        project_name=Path(root).name if root is not None else None,
    )


class Vault:
    """Persistent memory: ranked, important, warm and explored queries, capture, archive, and learning."""

    def __init__(
        self,
        stores: Sequence[NoteStore],
        embedder: Embedder,
        weights: dict[str, float] | None = None,
        pool: int = 50,
        clock: Callable[[], float] = time.time,
        project_name: str | None = None,
    ) -> None:
        self.stores = list(stores)
        self.embedder = embedder
        self.weights = dict(weights or DEFAULT_WEIGHTS)
        self.pool = pool
        self.clock = clock
        self.project_name = project_name
        self._corpus_cache: _Corpus | None = None
        # What the last corpus read, kept so a reload after a write reads only what changed: each store's note
        # and link rows by its generation, and the embeddings by content hash.
        self._store_rows: dict[int, tuple[int, list[Any], list[Any]]] = {}
        self._vector_memo: dict[str, dict[str, np.ndarray]] = {}  # embedder name -> content hash -> vector
        self._lock = threading.RLock()
        # Sub-question decomposition for explore(); the kernel sets it to the cheap model when one is configured.
        self.decompose: Callable[[str], list[str]] | None = None
        self._session: learning.Session | None = None
        self.sync()

    # -- bookkeeping ----------------------------------------------------------------------------------

    @property
    def skipped(self) -> pd.DataFrame:
        """The vault's report of bad files (its ``codebase.skipped()``): one row per file the last sync did not
        index (``status`` ``skipped``: broken, bombed or over-deep front matter, binary, too large, not UTF-8, a
        symlink, FIFO or device file) or indexed with a part ignored (``status`` ``indexed``: a ``created`` that
        is not a date). Columns: source, path, status, reason; the reason names the file and what to fix."""
        rows = [(s.source, s.path, s.status, s.reason) for store in self.stores for s in store.skipped]
        return pd.DataFrame(rows, columns=["source", "path", "status", "reason"])

    def _store(self, where: str | None) -> NoteStore:
        name = where or "global"
        for store in self.stores:
            if store.source == name:
                return store
        raise ValueError(f"No {name!r} vault here; choose one of {', '.join(s.source for s in self.stores)}.")

    def sync(self) -> None:
        """Pick up notes edited, added or deleted by hand since the vault was opened, and drop the learned
        state of notes that are gone (see :meth:`VaultIndex.sweep_learned`)."""
        for store in self.stores:
            store.sync()
        self._sweep_learned()

    def _sweep_learned(self) -> None:
        now = self.clock()
        live = {f"{store.source}:": store.index.live_keys(now) for store in self.stores}
        for store in self.stores:
            prefix = f"{store.source}:"
            others = {p: keys for p, keys in live.items() if p != prefix}
            sweep = partial(store.index.sweep_learned, prefix=prefix, others=others, now=now)
            # Counted first: opening a vault takes no write lock unless there is something to drop.
            if store.index.read(partial(sweep, dry_run=True)):
                store.index.write(sweep)

    def rebuild(self) -> None:
        """Rebuild every index from the markdown files (learned state is kept)."""
        with self._lock:
            for store in self.stores:
                store.rebuild()
            self._corpus_cache = None
            self._store_rows.clear()

    def _corpus(self) -> _Corpus:
        generation = tuple(store.index.generation() for store in self.stores)
        with self._lock:
            if self._corpus_cache is None or self._corpus_cache.generation != generation:
                self._corpus_cache = self._load_corpus(generation)
            return self._corpus_cache

    def _load_corpus(self, generation: tuple[int, ...]) -> _Corpus:
        store_col: list[int] = []
        ids: list[int] = []
        titles: list[str] = []
        keys: list[str] = []
        folders: list[str] = []
        types: list[str] = []
        paths: list[str] = []
        authors: list[str] = []
        created: list[float] = []
        superseded: list[bool] = []
        hashes: list[str] = []
        raw_links: list[tuple[int, int, str]] = []
        for s in range(len(self.stores)):
            rows, links = self._rows_of(s, generation[s])
            for r in rows:
                store_col.append(s)
                ids.append(int(r[0]))
                titles.append(r[1])
                keys.append(r[2])
                folders.append(r[3])
                types.append(r[4])
                paths.append(r[5])
                created.append(float(r[6]))
                hashes.append(r[7])
                superseded.append(bool(r[8]))
                authors.append(r[9] or "")
            raw_links.extend((s, int(src), target) for src, target in links)
        position = {(s, i): n for n, (s, i) in enumerate(zip(store_col, ids, strict=False))}
        by_uid: dict[str, int] = {}
        by_key: dict[tuple[int, str], int] = {}
        for n, (s, key) in enumerate(zip(store_col, keys, strict=False)):
            by_uid.setdefault(f"{self.stores[s].source}:{key}", n)
            by_key.setdefault((s, key), n)
        any_store = {key: n for n, key in reversed(list(enumerate(keys)))}
        graph = rx.PyDiGraph()
        graph.add_nodes_from(range(len(titles)))
        neighbours: list[set[int]] = [set() for _ in titles]
        edges = []
        for s, src, target in raw_links:
            a = position.get((s, src))
            b = by_key.get((s, target), any_store.get(target))
            if a is None or b is None or a == b:
                continue
            edges.append((a, b, 1.0))
            neighbours[a].add(b)
            neighbours[b].add(a)
        graph.add_edges_from(edges)
        vectors = self._vectors(store_col, ids, titles, hashes)
        return _Corpus(
            generation=generation,
            store=np.asarray(store_col, dtype=np.int32),
            ids=np.asarray(ids, dtype=np.int64),
            titles=titles,
            keys=keys,
            folders=folders,
            types=types,
            paths=paths,
            authors=authors,
            created=np.asarray(created, dtype=float),
            superseded=np.asarray(superseded, dtype=bool),
            position=position,
            by_uid=by_uid,
            vectors=vectors,
            graph=graph,
            neighbours=[sorted(n) for n in neighbours],
            pagerank=ranking.pagerank(graph) if titles else np.zeros(0),
        )

    def _rows_of(self, s: int, generation: int) -> tuple[list[Any], list[Any]]:
        """The note and link rows of store ``s`` at ``generation``: read again only when that store changed."""
        kept = self._store_rows.get(s)
        if kept is not None and kept[0] == generation:
            return kept[1], kept[2]
        rows, edges = self.stores[s].index.corpus_rows()
        self._store_rows[s] = (generation, rows, edges)
        return rows, edges

    def _vectors(
        self, store_col: list[int], ids: list[int], titles: list[str], hashes: list[str]
    ) -> np.ndarray:
        name = self.embedder.name
        # Vectors are keyed by content: those held from the last load stay right; only new content is read.
        memo = self._vector_memo.get(name, {})
        cached = {h: memo[h] for h in hashes if h in memo}
        unknown = sorted(set(hashes) - cached.keys())
        for store in self.stores:
            if not unknown:
                break
            cached.update(store.index.cached_vectors(name, unknown))
            unknown = [h for h in unknown if h not in cached]
        missing: dict[int, list[int]] = {}
        for n, h in enumerate(hashes):
            if h not in cached:
                missing.setdefault(store_col[n], []).append(n)
        for s, rows in missing.items():
            store = self.stores[s]
            bodies = store.index.bodies([ids[n] for n in rows])
            texts = [f"{titles[n]}\n{bodies.get(ids[n], '')[:_EMBED_CHARS]}" for n in rows]
            fresh = self.embedder.embed(texts)
            new = {hashes[n]: fresh[k] for k, n in enumerate(rows)}
            store.index.store_vectors(name, new)
            cached.update(new)
        self._vector_memo = {name: {h: cached[h] for h in hashes}}
        if not hashes:
            return np.zeros((0, 1), dtype=np.float32)
        return np.vstack([cached[h] for h in hashes]).astype(np.float32, copy=False)

    def _uid(self, corpus: _Corpus, n: int) -> str:
        return f"{self.stores[int(corpus.store[n])].source}:{corpus.keys[n]}"

    def _locate(self, title: str, where: str | None = None) -> tuple[NoteStore, dict[str, Any]]:
        stores = [self._store(where)] if where else sorted(self.stores, key=lambda s: s.source != "project")
        for store in stores:
            row = store.find(title)
            if row is not None:
                return store, row
        raise KeyError(
            f"No note titled {title!r} in the vault; vault.query_ranked({title!r}) lists close matches."
        )

    # -- queries --------------------------------------------------------------------------------------

    def query_ranked(
        self,
        query: str,
        limit: int = 10,
        signals: Sequence[str] | None = None,
        rerank: bool = True,
        record: bool = True,
        superseded: bool = False,
    ) -> pd.DataFrame:
        """Notes for ``query`` by weighted RRF (k=1) of semantic, BM25, PageRank and warmth, then link context
        (a note linked with a strong match shares its score), Q-value reranking and co-occurrence personalized
        PageRank. ``signals`` fuses only those named (e.g. ``["bm25"]`` to see one signal alone);
        ``rerank=False`` skips the stages after fusion (link context and the learned ones); ``record=False``
        keeps the rows out of the session's exposures (for a query whose rows nobody is shown);
        ``superseded=True`` also ranks notes another note supersedes (:meth:`supersede`), left out otherwise."""
        _check_query(query)
        chosen = list(signals) if signals is not None else list(SIGNALS)
        unknown = [s for s in chosen if s not in SIGNALS]
        if unknown or not chosen:
            raise ValueError(f"Unknown signals {unknown or chosen}; choose from {', '.join(SIGNALS)}.")
        corpus = self._corpus()
        if len(corpus) == 0:
            return pd.DataFrame(columns=RANKED_COLUMNS)
        sims, top, bm25 = self._candidates(corpus, query, superseded)
        candidates = list(dict.fromkeys([*bm25, *top]))
        table = self._signal_table(corpus, candidates, sims, bm25)
        rankings = {
            name: ranking.rank_order(candidates, [table[name][n] for n in candidates]) for name in chosen
        }
        fused = ranking.rrf(rankings, self.weights)
        scores = {n: fused.get(n, 0.0) for n in candidates}
        if rerank:
            scores = ranking.link_context(scores, corpus.neighbours)
            linked = [n for n in scores if n not in table["semantic"]]
            if linked:
                for name, values in self._signal_table(corpus, linked, sims, bm25).items():
                    table[name].update(values)
            scores = self._learned_rerank(corpus, scores, table, sims, bm25)
            if not superseded:  # link context and co-occurrence may bring in a superseded note
                scores = {n: v for n, v in scores.items() if not corpus.superseded[n]}
        order = sorted(scores, key=lambda n: (-scores[n], n))[:limit]
        frame = self._frame(corpus, order, scores, table, query)
        if record:
            self._record(query, corpus, order)
        return frame

    def _candidates(
        self, corpus: _Corpus, query: str, superseded: bool = False
    ) -> tuple[np.ndarray, list[int], dict[int, float]]:
        """Cosine similarity to every note, the ``pool`` most similar, and the ``pool`` best BM25 matches;
        superseded notes only with ``superseded=True``."""
        qvec = self.embedder.embed([query])[0]
        sims = corpus.vectors @ qvec
        hidden = np.zeros(len(sims), dtype=bool) if superseded else corpus.superseded
        pick = np.where(hidden, -np.inf, sims)
        take = min(self.pool, len(sims))
        top = np.argpartition(-pick, take - 1)[:take] if take < len(sims) else np.arange(len(sims))
        bm25: dict[int, float] = {}
        terms = query_terms(query)
        for s, store in enumerate(self.stores):
            for note_id, score in store.index.bm25(terms, self.pool):
                n = corpus.position.get((s, note_id))
                if n is not None and not hidden[n]:
                    bm25[n] = score
        return sims, [int(n) for n in top if not hidden[n]], bm25

    def _signal_table(
        self, corpus: _Corpus, candidates: Sequence[int], sims: np.ndarray, bm25: dict[int, float]
    ) -> dict[str, dict[int, float]]:
        warm = self._warmth(corpus, candidates)
        return {
            "semantic": {n: float(sims[n]) for n in candidates},
            "bm25": {n: bm25.get(n, math.nan) for n in candidates},
            "pagerank": {n: float(corpus.pagerank[n]) for n in candidates},
            "warmth": {n: warm[n] for n in candidates},
        }

    def _learned_rerank(
        self,
        corpus: _Corpus,
        scores: dict[int, float],
        table: dict[str, dict[int, float]],
        sims: np.ndarray,
        bm25: dict[int, float],
    ) -> dict[int, float]:
        q = self._q_values(corpus)
        reranked = {n: ranking.q_rerank(s, q.get(n, learning.Q_START)) for n, s in scores.items()}
        graph, node_of = self._cooccurrence_graph(corpus)
        if graph.num_edges() == 0 or not reranked:
            return reranked
        seeds = sorted(reranked, key=lambda n: -reranked[n])[:_COOC_SEEDS]
        restart = {node_of[n]: reranked[n] for n in seeds if n in node_of}
        ppr = ranking.personalized_pagerank(graph, restart)
        total = sum(restart.values())
        corpus_of = {node: n for n, node in node_of.items()}
        # What a note receives through co-occurrence edges: its PageRank minus its own restart share.
        received = {
            corpus_of[node]: max(0.0, value - (1 - ranking.DAMPING) * restart.get(node, 0.0) / total)
            for node, value in ppr.items()
        }
        top = max(reranked.values())
        extra = [n for n, v in received.items() if n not in reranked and v > 0]
        if extra:
            for name, values in self._signal_table(corpus, extra, sims, bm25).items():
                table[name].update(values)
        table["cooccurrence"] = received
        for n, value in received.items():
            reranked[n] = reranked.get(n, 0.0) + _COOC_WEIGHT * value * top
        return reranked

    def _q_values(self, corpus: _Corpus) -> dict[int, float]:
        out: dict[int, float] = {}
        for store in self.stores:
            for key, (q, _) in store.index.q_values().items():
                n = corpus.by_uid.get(f"{store.source}:{key}")
                if n is not None:
                    out[n] = q
        return out

    def _cooccurrence_graph(self, corpus: _Corpus) -> tuple[rx.PyDiGraph, dict[int, int]]:
        """Notes used together as an undirected weighted graph of only those notes, and corpus -> node id."""
        graph = rx.PyDiGraph()
        node_of: dict[int, int] = {}
        for store in self.stores:
            for a, b, weight in store.index.cooccurrence():
                na, nb = corpus.by_uid.get(a), corpus.by_uid.get(b)
                if na is None or nb is None:
                    continue
                for n in (na, nb):
                    if n not in node_of:
                        node_of[n] = graph.add_node(n)
                graph.add_edge(node_of[na], node_of[nb], weight)
                graph.add_edge(node_of[nb], node_of[na], weight)
        return graph, node_of

    def _warmth(self, corpus: _Corpus, nodes: Iterable[int]) -> dict[int, float]:
        wanted = set(nodes)
        around = set(wanted)
        for n in wanted:
            around.update(corpus.neighbours[n])
        return self._warmth_parts(corpus, around)[1]

    def _warmth_parts(self, corpus: _Corpus, nodes: set[int]) -> tuple[dict[int, float], dict[int, float]]:
        now = self.clock()
        ages: dict[int, list[float]] = {n: [(now - corpus.created[n]) / 3600.0] for n in nodes}
        by_store: dict[int, dict[str, int]] = {}
        for n in nodes:
            by_store.setdefault(int(corpus.store[n]), {})[corpus.keys[n]] = n
        everything = len(nodes) == len(corpus)
        for s, keys in by_store.items():
            index = self.stores[s].index
            for key, at in index.accesses(None if everything else keys):
                hit = keys.get(key)
                if hit is not None:
                    ages[hit].append((now - at) / 3600.0)
        activation = {
            n: ranking.base_level_activation(a, ranking.decay_for(corpus.folders[n])) for n, a in ages.items()
        }
        links = {n: corpus.neighbours[n] for n in nodes}
        return activation, ranking.spread_activation(activation, links)

    def _record(self, query: str, corpus: _Corpus, order: Sequence[int]) -> None:
        if self._session is not None:
            self._session.record_retrieval(query, [self._uid(corpus, n) for n in order])

    def _frame(
        self,
        corpus: _Corpus,
        order: Sequence[int],
        scores: dict[int, float],
        table: dict[str, dict[int, float]],
        query: str | None,
    ) -> pd.DataFrame:
        q = self._q_values(corpus)
        bodies = self._bodies(corpus, order)
        terms = query_terms(query or "")
        rows = []
        for n in order:
            rows.append(
                {
                    "title": corpus.titles[n],
                    "source": self.stores[int(corpus.store[n])].source,
                    "score": scores[n],
                    "semantic": table.get("semantic", {}).get(n, math.nan),
                    "bm25": table.get("bm25", {}).get(n, math.nan),
                    "pagerank": float(corpus.pagerank[n]),
                    "warmth": table.get("warmth", {}).get(n, math.nan),
                    "q_value": q.get(n, learning.Q_START),
                    "cooccurrence": table.get("cooccurrence", {}).get(n, 0.0),
                    "author": corpus.authors[n],
                    "folder": corpus.folders[n],
                    "type": corpus.types[n],
                    "path": corpus.paths[n],
                    "snippet": _snippet(bodies.get(n, ""), terms),
                }
            )
        return pd.DataFrame(rows, columns=RANKED_COLUMNS)

    def _bodies(self, corpus: _Corpus, order: Sequence[int]) -> dict[int, str]:
        out: dict[int, str] = {}
        for s, store in enumerate(self.stores):
            wanted = [int(corpus.ids[n]) for n in order if corpus.store[n] == s]
            if not wanted:
                continue
            for note_id, body in store.index.bodies(wanted).items():
                n = corpus.position.get((s, int(note_id)))
                if n is not None:
                    out[n] = body
        return out

    def query_important(self, limit: int = 10) -> pd.DataFrame:
        """Notes by PageRank authority over the wiki-link graph, with in- and out-degree."""
        corpus = self._corpus()
        ranked = [int(n) for n in np.argsort(-corpus.pagerank, kind="stable") if not corpus.superseded[n]]
        order = ranked[:limit]
        frame = self._frame(corpus, order, {n: float(corpus.pagerank[n]) for n in order}, {}, None)
        frame.insert(3, "in_degree", [corpus.graph.in_degree(n) for n in order])
        frame.insert(4, "out_degree", [corpus.graph.out_degree(n) for n in order])
        return frame.drop(columns=["semantic", "bm25", "warmth", "cooccurrence"])

    def query_warmth(self, query: str | None = None, limit: int = 10) -> pd.DataFrame:
        """The warmth field: notes by ACT-R activation plus spreading activation, among ``query``'s matches
        when given (else over the whole vault); ``activation`` is the base level before spreading."""
        corpus = self._corpus()
        if len(corpus) == 0:
            return pd.DataFrame(columns=_WARMTH_COLUMNS)
        if query is not None:
            _check_query(query)
            _, top, bm25 = self._candidates(corpus, query)
            nodes = set(bm25) | set(top)
        else:
            nodes = set(range(len(corpus)))
        nodes = {n for n in nodes if not corpus.superseded[n]}
        around = set(nodes)
        for n in nodes:
            around.update(corpus.neighbours[n])
        activation, warmth = self._warmth_parts(corpus, around)
        order = sorted(nodes, key=lambda n: (-warmth[n], n))[:limit]
        frame = self._frame(corpus, order, {n: warmth[n] for n in order}, {"warmth": warmth}, query)
        frame.insert(3, "activation", [activation[n] for n in order])
        if query is not None:
            self._record(query, corpus, order)
        return frame[_WARMTH_COLUMNS]

    def explore(
        self,
        query: str,
        limit: int = 15,
        depth: int = 2,
        decompose: Callable[[str], list[str]] | None = None,
    ) -> pd.DataFrame:
        """Personalized PageRank over wiki-links from the best seeds of ``query`` (and, when ``decompose`` is
        given, of its sub-questions, recursively to ``depth`` levels); results stay within ``depth`` link hops
        of a seed. ``decompose`` defaults to :attr:`decompose`; deterministic without one."""
        _check_query(query)
        decompose = decompose or self.decompose
        corpus = self._corpus()
        columns = ["title", "source", "score", "seed", "hops", "via", "author", "path", "snippet"]
        if len(corpus) == 0:
            return pd.DataFrame(columns=columns)
        seeds: dict[int, float] = {}
        via: dict[int, str] = {}
        self._explore_seeds(corpus, query, depth, decompose, seeds, via, set())
        undirected = rx.PyDiGraph()
        undirected.add_nodes_from(range(len(corpus)))
        undirected.add_edges_from([(a, b, 1.0) for a, nbrs in enumerate(corpus.neighbours) for b in nbrs])
        ppr = ranking.personalized_pagerank(undirected, seeds) or dict(seeds)
        hops = _hops(corpus.neighbours, seeds, depth)
        shown = (n for n in ppr if n in hops and not corpus.superseded[n])
        order = sorted(shown, key=lambda n: (-ppr[n], n))[:limit]
        frame = self._frame(corpus, order, {n: ppr[n] for n in order}, {}, query)
        frame["seed"] = [n in seeds for n in order]
        frame["hops"] = [hops[n] for n in order]
        frame["via"] = [via.get(n, "") for n in order]
        self._record(query, corpus, order)
        return frame[columns]

    def _explore_seeds(
        self,
        corpus: _Corpus,
        question: str,
        levels: int,
        decompose: Callable[[str], list[str]] | None,
        seeds: dict[int, float],
        via: dict[int, str],
        asked: set[str],
    ) -> None:
        asked.add(question.strip().casefold())
        sims, top, bm25 = self._candidates(corpus, question)
        candidates = list(dict.fromkeys([*bm25, *top]))
        table = self._signal_table(corpus, candidates, sims, bm25)
        fused = ranking.rrf(
            {name: ranking.rank_order(candidates, [table[name][n] for n in candidates]) for name in SIGNALS},
            self.weights,
        )
        for rank, n in enumerate(sorted(fused, key=lambda n: (-fused[n], n))[:5], start=1):
            if 1.0 / rank > seeds.get(n, 0.0):
                seeds[n] = 1.0 / rank
                via[n] = question
        if decompose is None or levels <= 1:
            return
        for sub in list(decompose(question))[:4]:
            if isinstance(sub, str) and sub.strip() and sub.strip().casefold() not in asked:
                self._explore_seeds(corpus, sub, levels - 1, decompose, seeds, via, asked)

    # -- writes ---------------------------------------------------------------------------------------

    def add(
        self,
        title: str,
        content: str,
        type: str = "insight",
        *,
        project: bool = False,
        where: str | None = None,
        folder: str = "inbox",
        provenance: Provenance | None = None,
    ) -> AddResult:
        """Capture a note (the title is a prose claim) into ``inbox/`` of the global vault, or of the project
        brain with ``project=True`` / ``where="project"``. A near-duplicate title or content updates the
        existing note instead of writing a twin. ``provenance`` says who writes (default: the user, or the
        agent inside its Repl code); :meth:`history` shows it."""
        store = self._store("project" if project else where)
        return store.add(
            title, content, type, folder=folder, project=self.project_name, provenance=provenance
        )

    def add_many(
        self,
        items: Sequence[tuple[str, str, str]],
        *,
        where: str | None = None,
        folder: str = "inbox",
        created: Sequence[float] | None = None,
        near_duplicates: bool = True,
        provenance: Provenance | None = None,
    ) -> list[AddResult]:
        """Bulk capture of ``(title, content, type)`` in one transaction (imports, benchmarks); see
        :meth:`NoteStore.add_many` for ``near_duplicates`` and ``provenance``."""
        return self._store(where).add_many(
            items,
            folder=folder,
            project=self.project_name,
            created=created,
            near_duplicates=near_duplicates,
            provenance=provenance,
        )

    def read(self, title: str, where: str | None = None) -> NoteText:
        """The markdown of the note titled ``title`` (project brain first), with who wrote it and, when someone
        else did, who last edited it (in a team vault, any member); reading warms the note."""
        store, row = self._locate(title, where)
        author = row["author"] or ""
        editor = store.index.last_editor(row["key"]) or author
        byline = f"by {author}" + (f", last edited by {editor}" if editor != author else "")
        text = NoteText(f"# {row['title']}\n\n_{byline}_\n\n{row['body']}")
        text.name, text.source, text.path = row["title"], store.source, row["path"]
        text.author, text.editor = author, editor
        store.index.write(lambda c: store.index.record_access(c, row["key"], self.clock(), "read"))
        store.index.learning_changed()
        return text

    def forget(
        self, title: str, where: str | None = None, *, purge: bool = False, dry_run: bool = False
    ) -> Any:
        """Soft-delete: move the note to the vault's ``.archive/`` folder (returns its archived path);
        :meth:`restore` brings it back.

        ``purge=True`` removes the note (live or already archived) for good instead: its file and archived
        copies, index rows and links, every user's Q-values, accesses and co-occurrence rows on both sides,
        the embeddings of each of its versions and the audit lines about it. It returns a DataFrame (source,
        what, item, rows) of what went; with ``dry_run=True`` of what would go, changing nothing. Wiki-links
        to it in other notes stay (they are those notes' text); a note it superseded stays superseded."""
        if not purge:
            if dry_run:
                raise ValueError("dry_run=True lists what a purge removes: give purge=True with it.")
            store, row = self._locate(title, where)
            return store.forget(row["title"])
        return self._purge(title, where, dry_run)

    def _purge(self, title: str, where: str | None, dry_run: bool) -> pd.DataFrame:
        columns = ["source", "what", "item", "rows"]
        rows: list[tuple[str, str, str, int]] = []
        key = sanitize_title(title).casefold()
        for store in [self._store(where)] if where else self.stores:
            successor = store.find(title)
            successor_title = (successor or {}).get("superseded_by", "")
            found = store.purge(title, dry_run=dry_run)
            if not found:
                continue
            rows += [(store.source, what, item, count) for what, item, count in found]
            # A pair with a project note lives in the project brain's index: both sides go, wherever kept.
            uid = f"{store.source}:{key}"
            for other in self.stores:
                if other is not store:
                    count = other.drop_cooccurrence(uid, dry_run=dry_run)
                    if count:
                        rows.append((other.source, "cooccurrence", other.source, count))
            rows += self._unlink_supersession(key, successor_title, dry_run)
        if not rows:
            raise KeyError(f"No note or archived note titled {title!r} in the vault.")
        return pd.DataFrame(rows, columns=columns)

    def _unlink_supersession(
        self, key: str, successor: str, dry_run: bool
    ) -> list[tuple[str, str, str, int]]:
        """Take a purged note's title out of the supersede fields of the notes linked with it: one it
        superseded stays superseded (by "a purged note"), its ``successor`` no longer lists it."""
        out: list[tuple[str, str, str, int]] = []
        for store in self.stores:
            linked = store.index.superseding()
            changes: dict[str, dict[str, Any]] = {
                title: {"superseded_by": _PURGED} for title, by in linked if by.casefold() == key
            }
            if successor and store.find(successor) is not None:
                listed = _supersedes(store, successor)
                if any(t.casefold() == key for t in listed):
                    rest = [t for t in listed if t.casefold() != key]
                    changes.setdefault(successor, {})["supersedes"] = rest or None
            for title, change in changes.items():
                out.append((store.source, "front matter", title, 1))
                if not dry_run:
                    store.update_front_matter(title, change, "update", _UNLINKED)
        return out

    def supersede(self, old: str, new: str, where: str | None = None) -> str:
        """Mark the note ``old`` as replaced by the note ``new``: ``old`` stays (readable with :meth:`read`, in
        :meth:`history`) but leaves retrieval (``query_ranked(..., superseded=True)`` still finds it); the two
        are linked both ways in front matter (``superseded_by`` on the old, ``supersedes`` on the new), and
        the audit log records both sides."""
        old_store, old_row = self._locate(old, where)
        new_store, new_row = self._locate(new, where)
        if old_store is new_store and old_row["key"] == new_row["key"]:
            raise ValueError(f"A note cannot supersede itself ({old!r}).")
        if new_row["key"] in {t.casefold() for t in self._superseded_chain(old_row["title"])}:
            raise ValueError(f"{new!r} is already superseded by {old!r}; supersede the other way round.")
        old_title, new_title = old_row["title"], new_row["title"]
        old_store.update_front_matter(
            old_title, {"superseded_by": new_title}, "supersede", f"superseded by [[{new_title}]]"
        )
        listed = _supersedes(new_store, new_title)
        if old_title not in listed:
            new_store.update_front_matter(
                new_title, {"supersedes": [*listed, old_title]}, "supersede", f"supersedes [[{old_title}]]"
            )
        return f"[[{old_title}]] is superseded by [[{new_title}]] (kept, left out of retrieval)."

    def _superseded_chain(self, title: str) -> list[str]:
        """The notes that ``title`` superseded, directly or through others (to refuse a cycle)."""
        seen: list[str] = []
        todo = [title]
        while todo:
            current = todo.pop()
            for store in self.stores:
                for t in _supersedes(store, current):
                    if t not in seen:
                        seen.append(t)
                        todo.append(t)
        return seen

    def history(self, title: str, where: str | None = None) -> pd.DataFrame:
        """Every audited edit of the note titled ``title`` (live, archived or superseded), oldest first: when,
        source, action, actor (who), origin, session and turn of the agent when it was the agent, kernel,
        detail and change (the lines removed ``-`` and added ``+``)."""
        columns = [*_HISTORY_COLUMNS, "change"]
        key = sanitize_title(title).casefold()
        frames = []
        for store in [self._store(where)] if where else self.stores:
            rows = store.index.history(key)
            frame = pd.DataFrame([(r[0], store.source, *r[1:]) for r in rows], columns=columns)
            frames.append(frame)
        result = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)
        if len(result) == 0 and not any(store.find(title) for store in self.stores):
            raise KeyError(f"No note titled {title!r} and no edit of one in the vault.")
        result["turn"] = result["turn"].astype("Int64")
        result = result.sort_values("at", kind="stable").reset_index(drop=True)
        result["at"] = pd.to_datetime(result["at"], unit="s", utc=True)
        return result

    def agent_notes(self, kernel: str | None = provenance.KERNEL) -> pd.DataFrame:
        """What the agent itself wrote (VaultAdd and ProjectSave, Repl code, reflection, compaction's extract)
        in the kernel process ``kernel`` (default: this one; None: any), one row per note still in the vault:
        title, source, wrote (``created`` or ``edited``: an edit of a note it did not create), origin, session,
        turn, at (the last such write) and path."""
        columns = ["title", "source", "wrote", "origin", "session", "turn", "at", "path"]
        out = []
        for store in self.stores:
            writes = store.index.agent_writes(sorted(provenance.AGENT_ORIGINS), kernel)
            by_key: dict[str, list[Any]] = {}
            for w in writes:
                by_key.setdefault(w[0], []).append(w)
            if not by_key:
                continue
            live = store.index.live_notes(sorted(by_key))
            for key, ws in by_key.items():
                if key not in live:
                    continue  # forgotten or purged since
                last = ws[-1]
                wrote = "created" if any(w[1] == "add" for w in ws) else "edited"
                out.append(
                    (live[key][1], store.source, wrote, last[2], last[3], last[4], last[5], live[key][2])
                )
        frame = pd.DataFrame(out, columns=columns).sort_values("at", kind="stable").reset_index(drop=True)
        frame["turn"] = frame["turn"].astype("Int64")
        frame["at"] = pd.to_datetime(frame["at"], unit="s", utc=True)
        return frame

    def restore(self, title: str, where: str | None = None) -> AddResult:
        """Bring back a note removed with :meth:`forget`."""
        errors = []
        for store in [self._store(where)] if where else self.stores:
            try:
                return store.restore(title)
            except KeyError as exc:
                errors.append(str(exc))
        raise KeyError(" ".join(errors))

    def audit(self, limit: int = 20) -> pd.DataFrame:
        """The most recent writes, newest first: time, source, action, title, path, detail and actor (who)."""
        frames = []
        columns = ["at", "action", "title", "path", "detail", "actor"]
        for store in self.stores:
            rows = store.index.recent_audit(limit)
            frame = pd.DataFrame(rows, columns=columns)
            frame.insert(1, "source", store.source)
            frames.append(frame)
        result = pd.concat(frames, ignore_index=True).sort_values("at", ascending=False).head(limit)
        result["at"] = pd.to_datetime(result["at"], unit="s", utc=True)
        return result.reset_index(drop=True)

    # -- learning -------------------------------------------------------------------------------------

    @property
    def session(self) -> learning.Session | None:
        """The session in progress (what was retrieved and used), or None."""
        return self._session

    def begin_session(self) -> learning.Session:
        """Start recording retrievals and uses; a session already running is returned as is."""
        if self._session is None:
            self._session = learning.Session(started=self.clock())
        return self._session

    def mark_used(self, title: str, where: str | None = None) -> None:
        """Record that the note titled ``title`` was used in this session (rewarded at its end)."""
        store, row = self._locate(title, where)
        self.begin_session().mark_used(f"{store.source}:{row['key']}")

    def boost(self, title: str, where: str | None = None) -> None:
        """An echo: the note was referenced, so warm it now and reward it at the session's end."""
        store, row = self._locate(title, where)
        store.index.write(lambda c: store.index.record_access(c, row["key"], self.clock(), "echo"))
        store.index.learning_changed()
        self.begin_session().mark_used(f"{store.source}:{row['key']}")

    def end_session(self) -> pd.DataFrame:
        """Credit Q-values once for everything the session exposed or used, update co-occurrence, and end it.

        Returns one row per credited note (title, source, used, reward, q_before, q_after, exposures)."""
        columns = ["title", "source", "used", "reward", "q_before", "q_after", "exposures"]
        session, self._session = self._session, None
        if session is None or session.ended:
            return pd.DataFrame(columns=columns)
        session.ended = True
        learned: dict[str, tuple[float, int]] = {}
        for store in self.stores:
            for key, value in store.index.q_values().items():
                learned[f"{store.source}:{key}"] = value
        # A note forgotten while the session ran is not credited: no learned row may name a missing note.
        corpus = self._corpus()
        present = corpus.by_uid
        used = {uid for uid in session.used if uid in present}
        shown = replace(
            session, retrieved={u: k for u, k in session.retrieved.items() if u in present}, used=used
        )
        credits = learning.credit(shown, learned)
        pairs = learning.cooccurrence_pairs(used)
        now = self.clock()
        for store in self.stores:
            prefix = f"{store.source}:"
            mine = [c for c in credits if c.uid.startswith(prefix)]
            # A pair lives in the project brain when either note does, else in the global vault.
            home = [p for p in pairs if self._pair_home(p) == store.source]
            if mine or used:  # a store without credits may still hold pairs of the notes used
                q_rows = [(c.uid.removeprefix(prefix), c.q_after, c.exposures, now) for c in mine]
                store.index.write(
                    partial(_store_credit, store.index, q_rows=q_rows, pairs=home, used=used, now=now)
                )
        for store in self.stores:
            store.index.save_learning()  # the export a rebuilt index restores its learned state from
        rows = []
        for c in credits:  # every credited note is in the corpus: its title is there, no read per note
            title, source = corpus.titles[present[c.uid]], c.uid.partition(":")[0]
            rows.append((title, source, c.used, c.reward, c.q_before, c.q_after, c.exposures))
        return pd.DataFrame(rows, columns=columns)

    def _pair_home(self, pair: tuple[str, str]) -> str:
        has_project = any(uid.startswith("project:") for uid in pair) and any(
            s.source == "project" for s in self.stores
        )
        return "project" if has_project else "global"

    def export_learning(self, path: str | os.PathLike[str]) -> Path:
        """Write Q-values, access history and co-occurrence of every store to a JSON file."""
        target = Path(path).expanduser()
        data = {
            "format": "aries-vault-learning",
            "version": 1,
            "exported_at": self.clock(),
            "stores": {store.source: store.index.export_learning() for store in self.stores},
        }
        target.write_text(json.dumps(data), encoding="utf-8")
        return target

    def import_learning(self, path: str | os.PathLike[str]) -> None:
        """Merge a file written by :meth:`export_learning` (after a rebuild, or onto another machine)."""
        source = Path(path).expanduser()
        try:
            data = json.loads(source.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"{source}: not a readable vault learning export ({exc}).") from exc
        if not isinstance(data, dict) or data.get("format") != "aries-vault-learning":
            raise ValueError(f"{source}: not a vault learning export (no 'format': 'aries-vault-learning').")
        for store in self.stores:
            if store.source in data.get("stores", {}):
                store.index.import_learning(data["stores"][store.source])
                store.index.save_learning()

    # -- display --------------------------------------------------------------------------------------

    def note_counts(self) -> dict[str, int]:
        """Notes per store, by source ("global", "project")."""
        return {store.source: store.index.note_count() for store in self.stores}

    def titles(self) -> list[str]:
        """The title of every note in every store."""
        return [title for store in self.stores for title in store.index.titles()]

    def authors(self) -> dict[str, str]:
        """Title -> author of every note (who wrote it first; the audit log says who changed it since)."""
        return {title: author for store in self.stores for title, author in store.index.authors()}

    def summary(self) -> list[dict[str, Any]]:
        """Per store: source, folder, notes, links, archived, last write (UTC)."""
        out = []
        for store in self.stores:
            counts = store.index.summary_counts()
            last = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(counts[3])) if counts[3] else "never"
            out.append(
                {
                    "source": store.source,
                    "folder": str(store.root),
                    "notes": counts[0],
                    "links": counts[1],
                    "archived": counts[2],
                    "last_write": last,
                }
            )
        return out

    @property
    def problems(self) -> list[str]:
        """What the user should know about each store: a rebuild of its damaged or missing index, and whether
        the learned state came back from the automatic export or was lost, and an unusable export kept aside."""
        reports = [(s.source, s.index.rebuild_report) for s in self.stores]
        reports += [(s.source, s.index.learning_problem) for s in self.stores]
        return [f"{source}: {report}" for source, report in reports if report]

    def __repr__(self) -> str:
        parts = [
            f"{s['source']}: {s['notes']} notes, {s['links']} links, last write {s['last_write']} ({s['folder']})"
            for s in self.summary()
        ]
        return "Vault(" + "; ".join(parts + self.problems) + ")"

    def _repr_markdown_(self) -> str:
        lines = [
            "**Vault**",
            "",
            "| source | notes | links | archived | last write | folder |",
            "|---|---|---|---|---|---|",
        ]
        for s in self.summary():
            lines.append(
                f"| {s['source']} | {s['notes']} | {s['links']} | {s['archived']} | {s['last_write']} | `{s['folder']}` |"
            )
        lines.extend(f"\n**Warning**: {problem}" for problem in self.problems)
        return "\n".join(lines)


def _store_credit(
    index: Any,
    conn: Any,
    q_rows: list[tuple[str, float, int, float]],
    pairs: list[tuple[str, str]],
    used: set[str],
    now: float,
) -> None:
    """Write one store's share of a session's credit: Q-values and co-occurrence, then an audit line."""
    index.store_credit(conn, q_rows, pairs, used)
    index.audit(conn, now, "session", "", "", f"{len(q_rows)} credited, {len(pairs)} pairs")


def _supersedes(store: NoteStore, title: str) -> list[str]:
    """The titles the note ``title`` of ``store`` lists in its ``supersedes`` front matter."""
    row = store.find(title)
    if row is None:
        return []
    try:
        listed = parse_note(store.root, store.root / row["path"]).meta.get("supersedes") or []
    except (NoteError, OSError):
        return []
    return [str(t) for t in (listed if isinstance(listed, list) else [listed])]


def _check_query(query: Any) -> None:
    if not isinstance(query, str) or not query.strip():
        raise ValueError(
            "The vault needs a non-empty query, e.g. vault.query_ranked('how we handle retries')."
        )
    if not _WORD.search(query):
        raise ValueError(f"The query {query!r} has no words to search for; ask with words.")


def _snippet(body: str, terms: Sequence[str], width: int = 160) -> str:
    flat = " ".join(body.split())
    lower = flat.casefold()
    at = min((p for p in (lower.find(t) for t in terms) if p >= 0), default=-1)
    start = max(0, at - width // 4) if at > 0 else 0
    piece = flat[start : start + width]
    return ("..." if start else "") + piece + ("..." if start + width < len(flat) else "")


def _hops(neighbours: list[list[int]], seeds: Iterable[int], depth: int) -> dict[int, int]:
    distance = {n: 0 for n in seeds}
    frontier = list(distance)
    for level in range(1, depth + 1):
        nxt = []
        for node in frontier:
            for other in neighbours[node]:
                if other not in distance:
                    distance[other] = level
                    nxt.append(other)
        frontier = nxt
    return distance
