"""Vault ranking: formulas against hand-computed values, and the fixture vault's queries per signal and fused."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from aries_kernel.vault import learning, open_vault, ranking
from aries_kernel.vault.learning import Session

# Every test here runs on SQLite and on PostgreSQL (tests/pg_support.py).
pytestmark = pytest.mark.usefixtures("backend")

FIXTURE = Path(__file__).parent / "fixtures" / "vault"
NOW = 1_796_083_200.0  # 2026-12-01 00:00 UTC, after every note of the fixture was created


def test_rrf_matches_hand_computation() -> None:
    fused = ranking.rrf({"a": [1, 2, 3], "b": [3, 1]}, {"a": 1.0, "b": 0.5}, k=60)
    assert fused[1] == pytest.approx(1 / 61 + 0.5 / 62)
    assert fused[2] == pytest.approx(1 / 62)
    assert fused[3] == pytest.approx(1 / 63 + 0.5 / 61)
    assert ranking.rrf({"a": [7]}, {"a": 0.0}) == {}


def test_rank_order_drops_nan_and_keeps_ties_stable() -> None:
    assert ranking.rank_order([10, 11, 12, 13], [0.5, math.nan, 0.9, 0.5]) == [12, 10, 13]


def test_actr_base_level_activation_matches_hand_computation() -> None:
    # ln(1^-0.5 + 4^-0.5) = ln(1.5)
    assert ranking.base_level_activation([1.0, 4.0], 0.5) == pytest.approx(math.log(1.5))
    # ops/ decays twice as fast: d = 1.0, ln(1 + 1/4)
    assert ranking.decay_for("ops") == pytest.approx(1.0)
    assert ranking.base_level_activation([1.0, 4.0], ranking.decay_for("ops")) == pytest.approx(
        math.log(1.25)
    )
    assert ranking.decay_for("self") == pytest.approx(0.25)
    assert ranking.base_level_activation([], 0.5) == float("-inf")
    # an access "now" counts as one minute old
    assert ranking.base_level_activation([0.0], 0.5) == pytest.approx(math.log(60**0.5))


def test_spreading_activation_matches_hand_computation() -> None:
    activation = {0: math.log(1.5), 1: math.log(2.0)}
    neighbours = {0: [1], 1: [0, 2], 2: [1]}
    warmth = ranking.spread_activation(activation, neighbours, spread=0.5)
    assert warmth[0] == pytest.approx(math.log(1.5 + 0.5 * 2.0 / 2))  # fan of note 1 is 2
    assert warmth[1] == pytest.approx(math.log(2.0 + 0.5 * 1.5 / 1))  # note 2 has no activation
    assert ranking.spread_activation({5: math.log(3.0)}, {}) == {5: pytest.approx(math.log(3.0))}


def test_q_update_and_cooccurrence_weight_match_hand_computation() -> None:
    assert learning.q_update(0.5, 1.0) == pytest.approx(0.55)
    assert learning.q_update(0.5, 0.0) == pytest.approx(0.45)
    assert learning.q_update(0.55, learning.Q_START) == pytest.approx(0.545)  # a fizzle: back toward the prior
    assert learning.cooccurrence_weight(0.0, True) == pytest.approx(1.0)
    assert learning.cooccurrence_weight(1.0, True) == pytest.approx(1.9)
    assert learning.cooccurrence_weight(1.9, False) == pytest.approx(1.71)
    assert learning.COOC_CAP == pytest.approx(10.0)
    assert ranking.q_rerank(0.02, 0.5) == pytest.approx(0.02)
    assert ranking.q_rerank(0.02, 0.7) == pytest.approx(0.02 * 1.1)


def test_session_credit_is_once_per_note_however_many_queries() -> None:
    session = Session(started=0.0)
    session.record_retrieval("q1", ["global:a", "global:b"])
    session.record_retrieval("q2", ["global:a"])
    session.mark_used("global:a")
    credits = {c.uid: c for c in learning.credit(session, {"global:b": (0.6, 3)})}
    assert credits["global:a"].q_after == pytest.approx(0.55)
    assert credits["global:a"].exposures == 1
    assert credits["global:b"].reward == 0.0
    assert credits["global:b"].q_after == pytest.approx(0.59)  # exposed but not used: back toward the prior
    assert credits["global:b"].exposures == 4
    assert learning.cooccurrence_pairs(["global:b", "global:a", "global:b"]) == [("global:a", "global:b")]


def _fixture_vault(tmp_path: Path):  # type: ignore[no-untyped-def]
    shutil.copytree(FIXTURE / "brain", tmp_path / "vault")
    return open_vault(None, path=tmp_path / "vault", clock=lambda: NOW)


def _quality(vault, queries, signals):  # type: ignore[no-untyped-def]
    reciprocal, recall = 0.0, 0.0
    for item in queries:
        titles = list(vault.query_ranked(item["query"], limit=10, signals=signals)["title"])
        ranks = [titles.index(t) + 1 for t in item["relevant"] if t in titles]
        reciprocal += 1 / min(ranks) if ranks else 0.0
        recall += len(ranks) / len(item["relevant"])
    return reciprocal / len(queries), recall / len(queries)


def test_fixture_vault_each_signal_and_fused(tmp_path: Path) -> None:
    """Uses the real default embedder (wordllama, offline) on a 32-note vault with known relevant notes."""
    vault = _fixture_vault(tmp_path)
    assert vault.skipped.empty
    queries = json.loads((FIXTURE / "queries.json").read_text())
    scores = {name: _quality(vault, queries, [name]) for name in ("semantic", "bm25", "pagerank", "warmth")}
    fused_mrr, fused_recall = _quality(vault, queries, None)
    best_mrr = max(mrr for mrr, _ in scores.values())
    best_recall = max(recall for _, recall in scores.values())
    assert fused_mrr >= best_mrr
    assert fused_recall >= best_recall
    # the query-dependent signals carry the ranking; the priors alone are far weaker
    assert scores["bm25"][0] > 0.8 and scores["semantic"][0] > 0.8
    assert scores["pagerank"][0] < 0.5 and scores["warmth"][0] < 0.5


def test_fixture_signal_columns_explain_the_rank(tmp_path: Path) -> None:
    vault = _fixture_vault(tmp_path)
    frame = vault.query_ranked("PRAGMA busy_timeout", limit=5)
    assert list(frame.columns[:9]) == [
        "title", "source", "score", "semantic", "bm25", "pagerank", "warmth", "q_value", "cooccurrence",
    ]  # fmt: skip
    assert frame.iloc[0]["title"] == "busy_timeout turns lock errors into waits"
    assert (frame["source"] == "global").all()
    assert frame["score"].is_monotonic_decreasing
    assert frame.iloc[0]["bm25"] > 0 and "busy_timeout" in frame.iloc[0]["snippet"]


def test_query_important_ranks_by_link_authority(tmp_path: Path) -> None:
    vault = _fixture_vault(tmp_path)
    top = vault.query_important(limit=3)
    assert list(top.columns[:5]) == ["title", "source", "score", "in_degree", "out_degree"]
    assert top.iloc[0]["in_degree"] >= 3
    assert top["score"].is_monotonic_decreasing


def test_warmth_per_folder_decay_on_fixture(tmp_path: Path) -> None:
    vault = _fixture_vault(tmp_path)
    field = vault.query_warmth(limit=40).set_index("title")
    # the same creation day: an ops/ note decays faster (d = 1.0) than a notes/ note (d = 0.5)
    ops = field.loc["Daily status 2026-11-29"]
    hours = (NOW - 1_795_910_400.0) / 3600  # 2026-11-29 00:00 UTC
    assert ops["activation"] == pytest.approx(math.log(hours**-1.0))
    # spreading: a linked note is warmer than its own activation
    linked = field.loc["busy_timeout turns lock errors into waits"]
    assert linked["warmth"] > linked["activation"]


def test_explore_is_deterministic_and_uses_decomposition(tmp_path: Path) -> None:
    vault = _fixture_vault(tmp_path)
    first = vault.explore("database is locked", limit=8)
    again = vault.explore("database is locked", limit=8)
    assert list(first["title"]) == list(again["title"])
    assert first["seed"].any() and (first["hops"] <= 2).all()
    asked: list[str] = []

    def decompose(question: str) -> list[str]:
        asked.append(question)
        return ["how to bake sourdough bread"] if question == "database is locked" else []

    deeper = vault.explore("database is locked", limit=15, decompose=decompose)
    assert asked[0] == "database is locked"
    assert "how to bake sourdough bread" in set(deeper["via"])
    assert "Sourdough needs a mature starter" in set(deeper["title"])
