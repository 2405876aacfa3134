"""Scores over the file graph: PageRank and HITS (rustworkx, weighted) and Leiden communities (igraph).

All three are computed on demand and cached by :class:`Rankings` against the graph's version, so an edit costs
nothing until a score is asked for again. Scores of a graph that has not changed since it was stored are handed
to ``on_computed`` (which stores them) and come back as ``known`` on the next start: :func:`stored_form` and
:func:`from_stored` are that form, aligned to the graph's file order.

Notebooks are left out of the graph the scores are computed over, so adding them changes no other file's
score: nothing imports a notebook (its PageRank would be the floor every file gets), and its imports say what
an analysis uses, not what the product is built on. Their PageRank and HITS scores are 0.0; each joins the
community of the files it uses most.

Communities are found among the source files first and then among the rest (tests, fixtures, examples,
generated files), each apart, so the product's module boundaries are not blurred by the tests that reach across
them, a fixture project is never a community of the product, and source communities have the lowest ids.
"""

from __future__ import annotations

import posixpath
import random
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from operator import itemgetter
from typing import Any

from aries_kernel.codebase.graph import FileGraph
from aries_kernel.codebase.notebooks import is_notebook
from aries_kernel.words import STOP_WORDS

__all__ = ["Rankings", "community_label", "from_stored", "leiden_parts", "stored_form"]

# Beside the English function words: words that identifiers and test names are made of but that name nothing,
# and generic code words.
_LABEL_STOPWORDS = STOP_WORDS | frozenset(
    """
    get gets set sets init main index util utils test tests helper helpers common base impl max min self cls
    none true false str int bool dict list tuple obj tmp foo bar baz new one two per less may must make made
    read still twice use used uses using
    """.split()
)


# A community is labelled by the deepest folder that holds this share of its files.
_FOLDER_SHARE = 0.6


# An edge's weight: the float in its payload (kind, weight, type_only). A C callable, as rustworkx calls it once
# per edge (2.5 million on a 20,000-file tree), where a Python function took as long as the rest of PageRank.
_weight = itemgetter(1)


class Rankings:
    """PageRank, HITS and communities of a :class:`FileGraph`, recomputed only after the graph changed."""

    def __init__(
        self,
        graph: FileGraph,
        names_of: Callable[[list[str]], Iterable[str]],
        known: dict[str, Any] | None = None,
        on_computed: Callable[[str, Any], None] | None = None,
        roles_of: Callable[[], Mapping[str, str]] | None = None,
    ) -> None:
        """``names_of(files)``: the names those files define at top level (a community's label is made of
        them); ``known``: scores of ``graph`` as it is now; ``on_computed(key, value)`` hears of each score
        computed while the graph is still as it was given; ``roles_of()``: file -> role (:mod:`.roles`), which
        splits the communities (without it every file counts as source)."""
        self._graph = graph
        self._names_of = names_of
        self._roles_of = roles_of
        self._version = graph.version
        self._cache: dict[str, tuple[int, Any]] = {k: (graph.version, v) for k, v in (known or {}).items()}
        self._on_computed = on_computed
        self._lock = threading.Lock()

    def _cached(self, key: str, compute: Callable[[], Any]) -> Any:
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None and hit[0] == self._graph.version:
                return hit[1]
            value = compute()
            self._cache[key] = (self._graph.version, value)
            if self._on_computed is not None and self._graph.version == self._version:
                self._on_computed(key, value)
            return value

    def pagerank(self) -> dict[str, float]:
        """File -> PageRank over the weighted graph (parallel edges of both kinds add up)."""
        return self._cached("pagerank", self._pagerank)

    def hits(self) -> tuple[dict[str, float], dict[str, float]]:
        """(hub, authority) score per file."""
        return self._cached("hits", self._hits)

    def communities(self) -> dict[str, tuple[int, str]]:
        """File -> (community id, label); ids are numbered by community size, largest first, those of source
        files before the others."""
        return self._cached("communities", self._communities)

    def _ranked(self) -> tuple[Any, list[str]]:
        """The graph the scores are computed over, and the notebooks left out of it (scored apart)."""
        g = self._graph.graph
        notebooks = [rel for rel in self._graph.node_of if is_notebook(rel)]
        if not notebooks:
            return g, []
        left_out = set(notebooks)
        return g.subgraph([n for rel, n in self._graph.node_of.items() if rel not in left_out]), notebooks

    def _pagerank(self) -> dict[str, float]:
        import rustworkx

        g, notebooks = self._ranked()
        scores = rustworkx.pagerank(g, weight_fn=_weight, max_iter=200, tol=1e-8) if g.num_nodes() else {}
        return {**{g[node]: score for node, score in scores.items()}, **dict.fromkeys(notebooks, 0.0)}

    def _hits(self) -> tuple[dict[str, float], dict[str, float]]:
        g, notebooks = self._ranked()
        hubs, authorities = self._hits_of(g)
        return {**hubs, **dict.fromkeys(notebooks, 0.0)}, {**authorities, **dict.fromkeys(notebooks, 0.0)}

    def _hits_of(self, g: Any) -> tuple[dict[str, float], dict[str, float]]:
        import rustworkx

        if g.num_edges() == 0:
            return {g[n]: 0.0 for n in g.node_indices()}, {g[n]: 0.0 for n in g.node_indices()}
        try:
            hubs, authorities = rustworkx.hits(g, weight_fn=_weight, max_iter=500, tol=1e-8)
        except rustworkx.FailedToConverge:
            try:
                hubs, authorities = rustworkx.hits(g, weight_fn=_weight, max_iter=2000, tol=1e-5)
            except rustworkx.FailedToConverge:
                return _hits_iterated(g)
        return {g[n]: s for n, s in hubs.items()}, {g[n]: s for n, s in authorities.items()}

    def _communities(self) -> dict[str, tuple[int, str]]:
        g, notebooks = self._ranked()
        roles = self._roles_of() if self._roles_of is not None else {}
        source: list[int] = []
        rest: list[int] = []
        for node in g.node_indices():
            (source if roles.get(g[node], "source") == "source" else rest).append(node)
        labels: Counter[str] = Counter()
        out = self._communities_of(g.subgraph(source) if rest else g, labels)
        if rest:
            out.update(
                self._communities_of(g.subgraph(rest), labels, first=len({v[0] for v in out.values()}))
            )
        # A notebook joins the community it imports and names most (by edge weight); one that uses no file
        # of the repository is a community of its own, after the others.
        known = self._graph.graph
        community = {value[0]: value for value in out.values()}
        extra = max(community, default=-1)
        for rel in sorted(notebooks):
            weights: dict[int, float] = {}
            for _, target, data in known.out_edges(self._graph.node_of[rel]):
                member = out.get(known[target])
                if member is not None:
                    weights[member[0]] = weights.get(member[0], 0.0) + data[1]
            if weights:
                best = min(weights, key=lambda number: (-weights[number], number))
                out[rel] = community[best]
            else:
                extra += 1
                out[rel] = (extra, rel)
        return out

    def _communities_of(self, g: Any, labels: Counter[str], first: int = 0) -> dict[str, tuple[int, str]]:
        """The communities of ``g``, numbered from ``first``; ``labels`` counts the labels given so far, so a
        repeated one gets a number."""
        parts = leiden_parts(
            [g[n] for n in g.node_indices()],
            ((g[source], g[target], data[1]) for source, target, data in g.weighted_edge_list()),
        )
        out: dict[str, tuple[int, str]] = {}
        for number, part in enumerate(parts, start=first):
            label = community_label(part, self._names_of(part))
            labels[label] += 1
            if labels[label] > 1:
                label = f"{label} ({labels[label]})"
            for rel in part:
                out[rel] = (number, label)
        return out


def leiden_parts(files: Iterable[str], edges: Iterable[tuple[str, str, float]]) -> list[list[str]]:
    """The communities of the graph of ``files`` with the weighted ``edges`` (either way round; ends that are not
    among ``files`` are ignored): Leiden's modularity communities, each split into its connected parts, largest
    first. The same graph gives the same communities every time."""
    import igraph

    files = sorted(set(files))
    if not files:
        return []
    position = {rel: i for i, rel in enumerate(files)}
    undirected: dict[tuple[int, int], float] = {}
    for source, target, weight in edges:
        a, b = position.get(source), position.get(target)
        if a is not None and b is not None and a != b:
            key = (a, b) if a < b else (b, a)
            undirected[key] = undirected.get(key, 0.0) + weight
    pairs = sorted(undirected)
    ig = igraph.Graph(n=len(files), edges=pairs)
    weights = [undirected[p] for p in pairs]
    # Leiden is randomized; a fixed seed makes the same graph give the same communities every time.
    igraph.set_random_number_generator(random.Random(0))
    try:
        membership = ig.community_leiden(
            objective_function="modularity", weights=weights or None, n_iterations=-1
        ).membership
    finally:
        igraph.set_random_number_generator(random)
    groups: dict[int, list[int]] = {}
    for vertex, community in enumerate(membership):
        groups.setdefault(community, []).append(vertex)
    # A community must be connected: split any that is not into its connected parts.
    parts: list[list[str]] = []
    for members in groups.values():
        sub = ig.subgraph(members)
        for component in sub.connected_components():
            parts.append(sorted(files[members[i]] for i in component))
    parts.sort(key=lambda p: (-len(p), p[0]))
    return parts


def stored_form(key: str, value: Any, files: tuple[str, ...]) -> Any:
    """A score as stored: plain tuples aligned to ``files`` (the graph's node order)."""
    if key == "pagerank":
        return tuple(value[f] for f in files)
    if key == "hits":
        return tuple(tuple(scores[f] for f in files) for scores in value)
    if key == "roles":  # file -> role: a table of the queries, stored alongside (see Codebase._table)
        return tuple(value[f] for f in files)
    return (tuple(value[f][0] for f in files), tuple(value[f][1] for f in files))


def from_stored(stored: Any, files: tuple[str, ...]) -> dict[str, Any]:
    """The scores a stored dict holds (key -> :func:`stored_form`); ValueError when it is not such a dict."""
    if not isinstance(stored, dict) or not set(stored) <= {
        "pagerank",
        "hits",
        "communities",
        "roles",
        "counts",
    }:
        raise ValueError("not stored scores")

    def column(values: Any, kind: type) -> tuple[Any, ...]:
        if not (isinstance(values, tuple) and len(values) == len(files) and set(map(type, values)) <= {kind}):
            raise ValueError("a malformed stored score")
        return values

    out: dict[str, Any] = {}
    if "pagerank" in stored:
        out["pagerank"] = dict(zip(files, column(stored["pagerank"], float), strict=True))
    if "hits" in stored:
        hits = stored["hits"]
        if not (isinstance(hits, tuple) and len(hits) == 2):
            raise ValueError("malformed stored HITS scores")
        out["hits"] = tuple(dict(zip(files, column(s, float), strict=True)) for s in hits)
    if "roles" in stored:
        out["roles"] = dict(zip(files, column(stored["roles"], str), strict=True))
    # file -> (community, label), and file -> (symbols, loc): a table of the queries, as roles (Codebase._counts)
    for key, kinds in (("communities", (int, str)), ("counts", (int, int))):
        if key in stored:
            pair = stored[key]
            if not (isinstance(pair, tuple) and len(pair) == 2):
                raise ValueError(f"malformed stored {key}")
            columns = (column(values, kind) for values, kind in zip(pair, kinds, strict=True))
            out[key] = dict(zip(files, zip(*columns, strict=True), strict=True))
    return out


def _hits_iterated(g: Any, rounds: int = 2000) -> tuple[dict[str, float], dict[str, float]]:
    """HITS by a fixed number of power iterations, for graphs where it converges too slowly to meet a tolerance
    (two leading eigenvalues nearly equal): the scores reached, rather than no scores at all."""
    import numpy as np

    nodes = list(g.node_indices())
    position = np.zeros(max(nodes) + 1, np.int64)
    position[nodes] = np.arange(len(nodes))
    ends = position[np.asarray(g.edge_list(), dtype=np.int64).reshape(-1, 2)]
    source, target = ends[:, 0], ends[:, 1]
    weights = np.fromiter(map(_weight, g.edges()), np.float64, len(ends))
    hubs = np.full(len(nodes), 1.0 / len(nodes))
    authorities = hubs
    for _ in range(rounds):
        # float64, as `/=` needs: a weighted bincount is float64 already (asarray copies nothing), except one of
        # no edges, which numpy makes int64 (and numpy's stubs type every bincount as intp).
        authorities = np.asarray(
            np.bincount(target, weights=weights * hubs[source], minlength=len(nodes)), np.float64
        )
        authorities /= authorities.sum() or 1.0
        hubs = np.asarray(
            np.bincount(source, weights=weights * authorities[target], minlength=len(nodes)), np.float64
        )
        hubs /= hubs.sum() or 1.0
    names = [g[n] for n in nodes]
    return dict(zip(names, hubs.tolist(), strict=True)), dict(zip(names, authorities.tolist(), strict=True))


def community_label(files: list[str], names: Iterable[str]) -> str:
    """``<folder>: <top name tokens>``, e.g. ``core/reshape: merge, concat``; a lone file is its path.

    The folder is the deepest one that holds most (:data:`_FOLDER_SHARE`) of the members, or, when none does,
    their two most common folders. The tokens are the commonest words of the members' top-level names that are
    neither stop words nor words of the folder.
    """
    from aries_kernel.codebase.shapes import split_identifier

    if len(files) == 1:
        return files[0]
    folders = [posixpath.dirname(f) for f in files]
    under: Counter[str] = Counter()
    for folder in folders:
        parts = folder.split("/") if folder else []
        under.update("/".join(parts[:depth]) for depth in range(1, len(parts) + 1))
    held = [f for f, n in under.items() if n >= _FOLDER_SHARE * len(files)]
    if held:
        folder = max(held, key=lambda f: (f.count("/"), under[f], f))
    else:
        counts = Counter(f or "(root)" for f in folders)
        folder = " + ".join(f for f, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:2])
    folder_tokens = set(split_identifier(folder))
    tokens: Counter[str] = Counter()
    for name in names:
        if name.startswith("__") and name.endswith("__"):
            continue
        for token in set(split_identifier(name)):
            if len(token) > 2 and token not in _LABEL_STOPWORDS and token not in folder_tokens:
                tokens[token] += 1
    top = [token for token, _ in sorted(tokens.items(), key=lambda kv: (-kv[1], kv[0]))[:3]]
    return f"{folder}: {', '.join(top)}" if top else folder
