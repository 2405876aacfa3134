"""Retrieval signals and their fusion: semantic, BM25, PageRank, ACT-R warmth, RRF, Q and co-occurrence.

Pure functions over numpy arrays and rustworkx graphs, so each formula can be checked by hand:

* weighted Reciprocal Rank Fusion: ``score(n) = sum_s w_s / (k + rank_s(n))``, ranks from 1, k = 1 (a small
  k keeps a strong signal's first ranks apart; at the usual 60 a weak signal or a prior reorders them);
* link context: ``context(n) = fused(n) + CONTEXT * max_{m ~ n} fused(m)`` over wiki-links in either direction,
  so a note linked with a strong match (the reply next to the question it answers) joins the results;
* ACT-R base-level activation: ``B = ln(sum_j t_j^-d)`` with ``t_j`` the hours since each access (the note's
  creation counts as one), ``d = 0.5 * FOLDER_DECAY[folder]`` so ``ops/`` fades fast and ``self/`` slowly;
* spreading activation: ``warmth_i = ln(e^B_i + SPREAD * sum_{j ~ i} e^B_j / fan_j)`` over wiki-links in
  either direction, ``fan_j`` the number of notes linked with ``j``; without links warmth equals ``B``;
* Q-value reranking: ``score * (1 + Q_WEIGHT * (Q - 0.5))``, so an unlearned note (Q = 0.5) keeps its score;
* co-occurrence: personalized PageRank from the top results over the graph of notes used together.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import rustworkx as rx

__all__ = [
    "BASE_DECAY",
    "CONTEXT",
    "FOLDER_DECAY",
    "MIN_AGE_HOURS",
    "Q_WEIGHT",
    "RRF_K",
    "SPREAD",
    "base_level_activation",
    "decay_for",
    "link_context",
    "pagerank",
    "personalized_pagerank",
    "q_rerank",
    "rank_order",
    "rrf",
    "spread_activation",
]

RRF_K = 1
CONTEXT = 0.3
BASE_DECAY = 0.5
FOLDER_DECAY = {"self": 0.5, "notes": 1.0, "inbox": 1.0, "ops": 2.0}
MIN_AGE_HOURS = 1.0 / 60.0  # an access "now" counts as one minute old, so t^-d stays finite
SPREAD = 0.5
Q_WEIGHT = 0.5
DAMPING = 0.85


def rrf(
    rankings: Mapping[str, Sequence[int]], weights: Mapping[str, float], k: int = RRF_K
) -> dict[int, float]:
    """Weighted Reciprocal Rank Fusion of ranked id lists (best first); an id missing from a list gets 0."""
    fused: dict[int, float] = {}
    for signal, ranked in rankings.items():
        weight = weights.get(signal, 1.0)
        if weight == 0:
            continue
        for position, item in enumerate(ranked, start=1):
            fused[item] = fused.get(item, 0.0) + weight / (k + position)
    return fused


def link_context(
    scores: Mapping[int, float], neighbours: Sequence[Sequence[int]], weight: float = CONTEXT
) -> dict[int, float]:
    """Each scored note and each note linked with one: its own score plus ``weight`` times its best-scored
    linked note's. The best link, not the sum, so a hub linked with many matches gains no more than one."""
    around = set(scores)
    for node in scores:
        around.update(neighbours[node])
    context: dict[int, float] = {}
    for node in around:
        best = max((scores.get(m, 0.0) for m in neighbours[node]), default=0.0)
        context[node] = scores.get(node, 0.0) + weight * best
    return context


def rank_order(ids: Sequence[int], scores: Sequence[float]) -> list[int]:
    """``ids`` sorted by score, best first, leaving out NaN scores; ties keep the given order."""
    pairs = [(s, i, n) for n, (i, s) in enumerate(zip(ids, scores, strict=False)) if not math.isnan(s)]
    pairs.sort(key=lambda p: (-p[0], p[2]))
    return [i for _, i, _ in pairs]


def decay_for(folder: str) -> float:
    """The ACT-R decay ``d`` of a note in ``folder`` (0.5 scaled per folder)."""
    return BASE_DECAY * FOLDER_DECAY.get(folder, 1.0)


def base_level_activation(ages_hours: Iterable[float], decay: float) -> float:
    """ACT-R base-level activation ``ln(sum t^-d)`` over access ages in hours; -inf without accesses."""
    ages = np.maximum(np.asarray(list(ages_hours), dtype=float), MIN_AGE_HOURS)
    if ages.size == 0:
        return float("-inf")
    return float(np.log(np.sum(ages ** (-decay))))


def spread_activation(
    activation: Mapping[int, float], neighbours: Mapping[int, Sequence[int]], spread: float = SPREAD
) -> dict[int, float]:
    """Warmth of each note in ``activation``: its own heat plus a share of its linked notes' heat (log scale).

    ``neighbours[j]`` lists the notes linked with ``j`` (either direction); a neighbour missing from
    ``activation`` contributes nothing.
    """
    warmth: dict[int, float] = {}
    for node, own in activation.items():
        heat = math.exp(own) if own > float("-inf") else 0.0
        for other in neighbours.get(node, ()):
            other_activation = activation.get(other, float("-inf"))
            if other_activation > float("-inf"):
                heat += spread * math.exp(other_activation) / max(len(neighbours.get(other, ())), 1)
        warmth[node] = math.log(heat) if heat > 0 else float("-inf")
    return warmth


def q_rerank(score: float, q: float, weight: float = Q_WEIGHT) -> float:
    """A fused score scaled by the note's learned utility (Q = 0.5 leaves it unchanged)."""
    return score * (1.0 + weight * (q - 0.5))


def pagerank(graph: rx.PyDiGraph, alpha: float = DAMPING) -> np.ndarray:
    """PageRank of every node of ``graph`` (indexed by node id), edge payloads as weights."""
    n = graph.num_nodes()
    if n == 0:
        return np.zeros(0)
    result = rx.pagerank(graph, alpha=alpha, weight_fn=lambda w: float(w), tol=1e-8)
    values = np.zeros(max(graph.node_indices()) + 1)
    for node, value in result.items():
        values[node] = value
    return values


def personalized_pagerank(
    graph: rx.PyDiGraph, seeds: Mapping[int, float], alpha: float = DAMPING
) -> dict[int, float]:
    """PageRank that restarts at ``seeds`` (node id -> weight); empty if no seed is in the graph."""
    present = {node: w for node, w in seeds.items() if graph.has_node(node) and w > 0}
    if not present or graph.num_edges() == 0:
        return {}
    total = sum(present.values())
    personalization = {node: w / total for node, w in present.items()}
    result = rx.pagerank(
        graph, alpha=alpha, personalization=personalization, weight_fn=lambda w: float(w), tol=1e-8
    )
    return {int(node): float(value) for node, value in result.items()}
