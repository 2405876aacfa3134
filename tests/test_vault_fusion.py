"""Fusion of the vault's signals: link context by hand, on a vault whose thread holds the answer next to the
match, and the LoCoMo bench's exact chance floor against an enumeration of every order."""

from __future__ import annotations

import importlib.util
import itertools
from pathlib import Path

import pytest

from aries_kernel.vault import HashEmbedder, open_vault, ranking

pytestmark = pytest.mark.usefixtures("backend")

BENCH = Path(__file__).resolve().parents[1] / "bench" / "bench_locomo.py"


def _bench():  # type: ignore[no-untyped-def]
    """bench/bench_locomo.py as a module (bench/ is not a package)."""
    spec = importlib.util.spec_from_file_location("bench_locomo", BENCH)
    assert spec and spec.loader
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_link_context_matches_hand_computation() -> None:
    # 0 - 1 - 2 is a thread; 3 is a hub linked with 0, 1 and 2; 4 is linked with nothing
    neighbours = [[1, 3], [0, 2, 3], [1, 3], [0, 1, 2], []]
    scored = ranking.link_context({0: 0.5, 1: 0.2, 4: 0.1}, neighbours, weight=0.3)
    assert scored[0] == pytest.approx(0.5 + 0.3 * 0.2)
    assert scored[1] == pytest.approx(0.2 + 0.3 * 0.5)
    assert scored[2] == pytest.approx(0.3 * 0.2)  # not scored itself: it joins through its link
    assert scored[3] == pytest.approx(0.3 * 0.5)  # the best link only: three matches count as one
    assert scored[4] == pytest.approx(0.1)
    assert ranking.link_context({}, neighbours) == {}


def test_rrf_small_k_keeps_the_strong_signals_first_ranks_apart() -> None:
    # bm25 puts 1 first; the weak signal and both priors prefer 2. At k = 60 they overturn bm25; at k = 1 not.
    others = [2, *range(3, 11), 1]  # 2 first, 1 last of ten
    rankings = {"bm25": list(range(1, 11)), "semantic": others, "pagerank": others, "warmth": others}
    weights = {"bm25": 1.0, "semantic": 0.3, "pagerank": 0.05, "warmth": 0.05}
    at_60 = ranking.rrf(rankings, weights, k=60)
    assert at_60[2] > at_60[1]
    fused = ranking.rrf(rankings, weights)
    assert ranking.RRF_K == 1
    assert fused[1] == pytest.approx(1 / 2 + (0.3 + 0.05 + 0.05) / 11)
    assert fused[1] > fused[2]


def _thread_vault(tmp_path: Path):  # type: ignore[no-untyped-def]
    vault = open_vault(None, path=tmp_path / "vault", embedder=HashEmbedder(), clock=lambda: 1.9e9)
    vault.add_many(
        [
            ("Question at breakfast", "Which flour does Dana bake her sourdough with?", "turn"),
            ("Rye from the mill", "Rye, always rye, from the mill by the river.\n\n(after [[Question at breakfast]])", "turn"),
            ("School play", "The school play is on Friday evening.", "turn"),
            ("Prices", "Prices went up again this month.", "turn"),
            ("Garden", "The garden needs water every day.", "turn"),
            ("Hiking", "Sam went hiking on Sunday with a sister.", "turn"),
        ],
        folder="notes",
    )  # fmt: skip
    return vault


def test_the_reply_linked_with_the_best_match_joins_the_results(tmp_path: Path) -> None:
    vault = _thread_vault(tmp_path)
    query = "which flour does Dana bake sourdough with"
    plain = vault.query_ranked(query, limit=10, rerank=False)
    fused = vault.query_ranked(query, limit=10)
    assert plain.iloc[0]["title"] == fused.iloc[0]["title"] == "Question at breakfast"
    plain_titles = list(plain["title"])
    # the reply shares no word with the question: plain fusion ranks it among the unrelated notes
    assert plain_titles.index("Rye from the mill") > 1
    titles = list(fused["title"])
    assert titles.index("Rye from the mill") == 1
    top, reply = fused.iloc[0], fused.iloc[1]
    own = plain.set_index("title")["score"].get("Rye from the mill", 0.0)
    assert reply["score"] == pytest.approx(own + ranking.CONTEXT * plain.iloc[0]["score"])
    assert top["score"] == pytest.approx(plain.iloc[0]["score"] + ranking.CONTEXT * own)


def test_bench_chance_floor_is_exact() -> None:
    bench = _bench()
    for pool, good, k in [(6, 1, 3), (6, 2, 3), (7, 3, 2), (4, 2, 10)]:
        recall = reciprocal = 0.0
        orders = list(itertools.permutations(range(pool)))
        for order in orders:
            first = next((r for r, item in enumerate(order[:k], start=1) if item < good), None)
            if first is not None:
                recall += 1
                reciprocal += 1 / first
        expected = bench.chance(pool, good, k)
        assert expected[0] == pytest.approx(recall / len(orders))
        assert expected[1] == pytest.approx(reciprocal / len(orders))
    assert bench.chance(50, 0) == (0.0, 0.0)


def test_bench_reads_a_turn_ranking_as_sessions_at_their_best_turn() -> None:
    bench = _bench()
    of = {"D1-1": "D1", "D1-2": "D1", "D2-1": "D2", "D3-4": "D3"}
    assert bench.sessions(["D1-2", "D1-1", "D3-4", "D1-1", "D2-1"], of) == ["D1", "D3", "D2"]
    tally = bench.Tally()
    tally.add(bench.sessions(["D1-2", "D1-1", "D3-4"], of), {"D3"}, ["D1", "D2", "D3"])
    assert (tally.r10, tally.rr) == (1, 0.5)  # D3 is the second session, though its turn came third


def test_bench_verdict_says_when_five_points_are_out_of_reach() -> None:
    bench = _bench()

    def rows(r10: dict[str, int], rr: dict[str, float]):  # type: ignore[no-untyped-def]
        out = {}
        for row in bench.ROWS:
            tally = bench.Tally()
            tally.r10, tally.rr = r10.get(row, 0), rr.get(row, 0.0)
            out[row] = tally
        return out

    assert bench.verdict(rows({"bm25": 70, "fused": 76}, {"bm25": 46, "fused": 48}), 100).startswith("met")
    assert bench.verdict(rows({"bm25": 70, "fused": 74}, {"bm25": 46, "fused": 48}), 100).startswith(
        "NOT met"
    )
    out_of_reach = bench.verdict(rows({"bm25": 96, "fused": 96}, {"bm25": 78, "fused": 79}), 100)
    assert "no ranking reaches" in out_of_reach and ": held:" in out_of_reach
    below = bench.verdict(rows({"bm25": 96, "fused": 95}, {"bm25": 78, "fused": 79}), 100)
    assert "NOT held" in below
