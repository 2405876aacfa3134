"""The learning loop checked against each finding of the ported system's (Ori Mnemos) own audit, on synthetic
vaults with a known answer: long scripted runs of seeded random sessions.

1. Exposure lowered the notes it returned: here a note used again and again rises and stays up.
2. Co-occurrence weights grew without bound: here none passes ``COOC_CAP``, and a pair used apart fades.
3. Learned rows pointed at deleted notes: here a sync leaves none, across stores too.
4. Co-occurrence dominated the combined PageRank: here it never enters the link PageRank, and adds at most
   ``COOC_WEIGHT * DAMPING`` of the best score.
5. A dampening step before RRF changed nothing: here the learned weighting comes after fusion and reorders.
6. Half the notes were never shown: here learning does not narrow what is shown, and a note shown but never
   used ranks exactly where a never-shown one of the same relevance does.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from aries_kernel.vault import HashEmbedder, learning, open_vault, ranking
from aries_kernel.vault.db import VaultIndex, schema
from aries_kernel.vault.db.learned import MISSING_GRACE_SECONDS
from aries_kernel.vault.db.schema import access, cooccurrence, q_values
from aries_kernel.vault.vault import _COOC_WEIGHT, Vault
from tests.vault_support import T0, Clock

# Every test here runs on SQLite and on PostgreSQL (tests/pg_support.py).
pytestmark = pytest.mark.usefixtures("backend")


def make(tmp_path: Path, root: bool = False) -> Vault:
    return open_vault(
        tmp_path / "repo" if root else None, path=tmp_path / "vault", embedder=HashEmbedder(), clock=Clock()
    )


def word(rng: random.Random, syllables: int = 3) -> str:
    return "".join(rng.choice("bcdfghjklmnprstvz") + rng.choice("aeiou") for _ in range(syllables))


def build(vault: Vault, rng: random.Random, topics: int, per_topic: int) -> tuple[list[list[str]], list[str]]:
    """Notes on ``topics`` made-up topics (three words each); returns the topic words and every title."""
    words = [[word(rng) for _ in range(3)] for _ in range(topics)]
    items = []
    for t in range(topics):
        for i in range(per_topic):
            body = " ".join(rng.sample(words[t], 2)) + " " + " ".join(word(rng) for _ in range(10))
            items.append((f"{words[t][0]} note {t}-{i} {word(rng, 4)}", body, "insight"))
    vault.add_many(items, near_duplicates=False)
    return words, [title for title, _, _ in items]


def session(vault: Vault, queries: list[str], use: float, rng: random.Random, limit: int = 10) -> set[str]:
    """One session: each query shown, each row used with probability ``use``; returns the titles shown."""
    vault.clock.now += 3600  # type: ignore[attr-defined]
    vault.begin_session()
    shown: set[str] = set()
    for query in queries:
        titles = list(vault.query_ranked(query, limit=limit)["title"])
        shown.update(titles)
        for title in titles:
            if rng.random() < use:
                vault.mark_used(title)
    vault.end_session()
    return shown


def scripted_run(vault: Vault, words: list[list[str]], sessions: int, seed: int, limit: int = 10) -> set[str]:
    """``sessions`` sessions of two random topic queries each, a third of the shown rows used."""
    rng = random.Random(seed)
    shown: set[str] = set()
    for _ in range(sessions):
        topic = words[rng.randrange(len(words))]
        queries = [" ".join(rng.sample(topic, 2)) for _ in range(2)]
        shown |= session(vault, queries, 1 / 3, rng, limit)
    return shown


def rank_of(vault: Vault, query: str, title: str, rerank: bool = True) -> int:
    titles = list(vault.query_ranked(query, limit=50, rerank=rerank, record=False)["title"])
    return titles.index(title) + 1


def learned_keys(vault: Vault, source: str = "global") -> dict[str, set[str]]:
    """Per learned table, the note keys (co-occurrence: uids) it names, over every user."""
    index = vault._store(source).index
    return {
        "q_values": {r[0] for r in index.rows(q_values.select().with_only_columns(q_values.c.key))},
        "access": {r[0] for r in index.rows(access.select().with_only_columns(access.c.key))},
        "cooccurrence": {
            uid
            for r in index.rows(cooccurrence.select().with_only_columns(cooccurrence.c.a, cooccurrence.c.b))
            for uid in r
        },
    }


def test_1_a_note_used_again_and_again_rises_and_never_sinks(tmp_path: Path) -> None:
    vault = make(tmp_path)
    words, _ = build(vault, random.Random(1), topics=1, per_topic=15)
    query = " ".join(words[0][:2])
    start = list(vault.query_ranked(query, limit=10, record=False)["title"])
    favourite = start[7]  # eighth: shown, with room to rise
    ranks, qs = [8], []
    for n in range(1, 31):
        vault.clock.now += 3600  # type: ignore[attr-defined]
        vault.begin_session()
        assert favourite in set(vault.query_ranked(query, limit=10)["title"])
        vault.mark_used(favourite)
        credits = vault.end_session().set_index("title")
        qs.append(credits.loc[favourite, "q_after"])
        # Q after n uses is 1 - 0.5 * 0.9^n: every use a step toward 1, whatever the exposure count.
        assert qs[-1] == pytest.approx(1 - 0.5 * 0.9**n)
        ranks.append(rank_of(vault, query, favourite))
    assert all(a < b for a, b in zip(qs, qs[1:], strict=False))
    assert all(later <= earlier for earlier, later in zip(ranks, ranks[1:], strict=False)), ranks
    assert ranks[-1] < ranks[0]
    # The rest were shown thirty times and never used: Q never leaves the prior.
    others = {k: q for k, (q, _) in vault.stores[0].index.q_values().items() if k != favourite.casefold()}
    assert others and set(others.values()) == {learning.Q_START}


def test_2_cooccurrence_weights_stay_below_their_bound_in_a_long_run(tmp_path: Path) -> None:
    vault = make(tmp_path)
    rng = random.Random(2)
    words, titles = build(vault, rng, topics=6, per_topic=8)
    pair = sorted(f"global:{t.casefold()}" for t in titles[:2])  # used together in every session
    lone, left = titles[2], titles[3]  # used together once, then ``lone`` alone
    vault.begin_session()
    vault.mark_used(lone)
    vault.mark_used(left)
    vault.end_session()
    sessions = 120
    for n in range(1, sessions + 1):
        topic = words[rng.randrange(len(words))]
        vault.clock.now += 3600  # type: ignore[attr-defined]
        vault.begin_session()
        for title in vault.query_ranked(" ".join(rng.sample(topic, 2)), limit=10)["title"]:
            if title not in (lone, left) and rng.random() < 0.5:
                vault.mark_used(title)
        vault.mark_used(titles[0])
        vault.mark_used(titles[1])
        vault.mark_used(lone)
        vault.end_session()
        weights = {(a, b): w for a, b, w in vault.stores[0].index.cooccurrence()}
        assert max(weights.values()) <= learning.COOC_CAP
        # Used together n times in a row: 1 + 0.9 + ... + 0.9^(n-1).
        assert weights[tuple(pair)] == pytest.approx(learning.COOC_CAP * (1 - learning.COOC_KEEP**n))
        stale = tuple(sorted(f"global:{t.casefold()}" for t in (lone, left)))
        # One co-use, then n sessions using one of them alone: 0.9^n, dropped once below the floor (n = 22).
        assert (stale in weights) == (learning.COOC_KEEP**n >= learning.COOC_FLOOR)
    assert len(weights) > 20  # the random use made many pairs, and none of them passed the bound


def test_3_no_learned_row_names_a_deleted_note(backend: str, tmp_path: Path) -> None:
    vault = make(tmp_path, root=True)
    words, titles = build(vault, random.Random(3), topics=4, per_topic=6)
    for title in titles[:3]:
        vault.read(title)  # an access row
    scripted_run(vault, words, sessions=40, seed=3)
    read = {t.casefold() for t in titles[:3]}
    credited = sorted(learned_keys(vault)["q_values"] - read)
    deleted, forgotten = [titles[0].casefold(), *credited[:2]], credited[2:4]
    index = vault.stores[0].index
    by_key = {t.casefold(): t for t in titles}
    # A note forgotten while a session runs is not credited at its end.
    vault.begin_session()
    vault.query_ranked(" ".join(words[0][:2]))
    vault.mark_used(by_key[forgotten[0]])
    q_before = index.q_values()[forgotten[0]]
    for key in forgotten:
        vault.forget(by_key[key])
    vault.end_session()
    assert index.q_values()[forgotten[0]] == q_before
    # A project note used with a global one: the pair lives in the project brain.
    vault.add("Harbor tides follow the moon", "Tides rise twice a day.", project=True)
    vault.begin_session()
    vault.mark_used("Harbor tides follow the moon")
    vault.mark_used(by_key[deleted[0]])
    vault.end_session()
    assert f"global:{deleted[0]}" in learned_keys(vault, "project")["cooccurrence"]
    # Rows of notes no longer in the vault, as an old export brings them (the audited vault had 37% of these).
    index.import_learning(
        {"q_values": [["long gone", 0.9, 5, 3, T0]], "cooccurrence": [["global:long gone", "global:x", 12.0]]}
    )
    for key in deleted:
        rel = f"inbox/{by_key[key]}.md"
        if (
            backend == "postgresql"
        ):  # the team vault's database is the truth: a file deleted by hand comes back
            index.write(lambda c, rel=rel: VaultIndex.delete_note(c, rel))  # as a version before purge did
        (tmp_path / "vault" / rel).unlink()  # deleted by hand
    vault.sync()
    # A missing note keeps its learned state for a grace period (another git branch may be checked out).
    vault.clock.now += MISSING_GRACE_SECONDS + 1  # type: ignore[attr-defined]
    vault.sync()
    live = {f"global:{k}" for k in index.live_keys()} | {
        f"project:{k}" for k in vault._store("project").index.live_keys()
    }
    for source in ("global", "project"):
        for table, named in learned_keys(vault, source).items():
            uids = named if table == "cooccurrence" else {f"{source}:{k}" for k in named}
            assert uids <= live, (source, table, uids - live)
    assert not (set(deleted) | {"long gone"}) & (
        learned_keys(vault)["q_values"] | learned_keys(vault)["access"]
    )
    # A forgotten note keeps its learned state while archived, unused by ranking, and gets it back on restore.
    assert set(forgotten) <= learned_keys(vault)["q_values"]
    vault.restore(by_key[forgotten[0]])
    assert index.q_values()[forgotten[0]] == q_before


def test_4_cooccurrence_cannot_dominate_the_score(tmp_path: Path) -> None:
    vault = make(tmp_path)
    vault.pool = 5  # few candidates per query, so co-occurrence has notes to bring in
    words, titles = build(vault, random.Random(4), topics=5, per_topic=10)
    probes = [" ".join(topic[:2]) for topic in words]
    for title in titles[3:6]:
        vault.add(f"Index of {title}", f"See [[{title}]] and [[{titles[0]}]].")
    link_pagerank = vault.query_important(limit=100).set_index("title")["pagerank"]
    rng = random.Random(4)
    for _ in range(80):  # heavy co-use: every session uses the same three notes besides its random ones
        topic = words[rng.randrange(len(words))]
        vault.clock.now += 3600  # type: ignore[attr-defined]
        vault.begin_session()
        for title in [*vault.query_ranked(" ".join(rng.sample(topic, 2)), limit=10)["title"], *titles[:3]]:
            if title in titles[:3] or rng.random() < 0.5:
                vault.mark_used(title)
        vault.end_session()
    bound = _COOC_WEIGHT * ranking.DAMPING
    pulled = 0
    for query in probes:
        fused = vault.query_ranked(query, limit=200, rerank=False, record=False).set_index("title")
        final = vault.query_ranked(query, limit=200, record=False).set_index("title")
        before = {
            t: ranking.q_rerank(fused["score"].get(t, 0.0), final.loc[t, "q_value"]) for t in final.index
        }
        top = max(before.values())
        extra = {t: final.loc[t, "score"] - before[t] for t in final.index}
        assert max(extra.values()) <= bound * top + 1e-12
        assert final.index[0] in fused.index  # so a note brought in by co-occurrence alone never comes first
        pulled += sum(t not in fused.index for t in final.index)
    assert pulled > 0  # co-occurrence did bring in notes the query alone did not find
    # Co-occurrence stays out of the link PageRank (the audited system summed both graphs into one), which
    # learning leaves exactly as it was.
    after = vault.query_important(limit=100).set_index("title")["pagerank"]
    assert link_pagerank.nunique() > 1 and after.sort_index().equals(link_pagerank.sort_index())


def test_5_the_learned_weighting_comes_after_fusion_and_reorders(tmp_path: Path) -> None:
    # The audited system damped scores before RRF, which keeps only their order: nothing changed.
    scores = [0.9, 0.7, 0.4]
    damped = [s * f for s, f in zip(scores, [0.2, 1.0, 1.0], strict=True)]
    assert ranking.rank_order([1, 2, 3], damped) != ranking.rank_order([1, 2, 3], scores)  # only a reorder
    assert ranking.rank_order([1, 2, 3], [s * 0.5 for s in scores]) == ranking.rank_order([1, 2, 3], scores)
    vault = make(tmp_path)
    words, _ = build(vault, random.Random(5), topics=1, per_topic=15)
    query = " ".join(words[0][:2])
    fused = vault.query_ranked(query, limit=10, rerank=False, record=False)
    titles, score = list(fused["title"]), list(fused["score"])
    # The closest neighbours in fused score below the top: Q (a factor of at most 1.25) can swap them.
    below = min(range(2, 10), key=lambda i: score[i - 1] / score[i])
    assert score[below - 1] / score[below] < 1.2
    lower, upper = titles[below], titles[below - 1]
    for _ in range(30):
        vault.clock.now += 3600  # type: ignore[attr-defined]
        vault.begin_session()
        vault.mark_used(lower)
        vault.end_session()
        order = list(vault.query_ranked(query, limit=10, record=False)["title"])
        if order.index(lower) < order.index(upper):
            break
    assert order.index(lower) < order.index(upper)  # the weighting after fusion reordered them
    assert list(vault.query_ranked(query, limit=10, rerank=False, record=False)["title"]) == titles


def test_6_exposure_without_use_never_ranks_a_note_below_a_never_shown_one(tmp_path: Path) -> None:
    vault = make(tmp_path)
    words, titles = build(vault, random.Random(6), topics=4, per_topic=12)
    shown = scripted_run(vault, words, sessions=60, seed=6, limit=5)
    learned = vault.stores[0].index.q_values()
    used = {k for k, (q, _) in learned.items() if q > learning.Q_START}
    assert min(q for q, _ in learned.values()) >= learning.Q_START
    shown_unused = {t for t in shown if t.casefold() not in used}
    never_shown = set(titles) - shown
    assert shown_unused and never_shown
    for topic in words:
        query = " ".join(topic)
        fused = list(vault.query_ranked(query, limit=100, rerank=False, record=False)["title"])
        final = vault.query_ranked(query, limit=100, record=False).set_index("title")
        # A note never used has Q at the prior and no co-occurrence: its score is its fused score, so the
        # notes shown-but-unused and never-shown keep exactly the order relevance gave them.
        unused = [t for t in fused if t.casefold() not in used]
        assert [t for t in final.index if t.casefold() not in used] == unused
        assert all(final.loc[t, "q_value"] == learning.Q_START for t in unused)


def test_6_no_note_becomes_unreachable_however_much_others_are_used(tmp_path: Path) -> None:
    vault = make(tmp_path)
    rng = random.Random(11)
    words = [[word(rng) for _ in range(3)] for _ in range(4)]
    items, about = [], {}
    for t, topic in enumerate(words):
        for i in range(12):
            own = word(rng, 4)  # a word of this note alone, for a query specifically about it
            title = f"{topic[0]} note {t}-{i} {own}"
            about[title] = f"{topic[0]} {own}"
            body = " ".join(rng.sample(topic, 2)) + f" {own} " + " ".join(word(rng) for _ in range(10))
            items.append((title, body, "insight"))
    vault.add_many(items, near_duplicates=False)
    favourites = {t: [title for title, _, _ in items[t * 12 : t * 12 + 4]] for t in range(len(words))}
    for _ in range(100):  # the same four notes of a topic used, together, in every session on it
        t = rng.randrange(len(words))
        vault.clock.now += 3600  # type: ignore[attr-defined]
        vault.begin_session()
        vault.query_ranked(" ".join(rng.sample(words[t], 2)), limit=5)
        for title in favourites[t]:
            vault.mark_used(title)
        vault.end_session()
    for title, query in about.items():
        assert rank_of(vault, query, title, rerank=False) == 1
        # Only used notes can pass it (test 6 above), so it stays within the first 1 + 4, shown in a top 5.
        assert rank_of(vault, query, title) <= 1 + 4


def test_an_index_from_before_m008_is_brought_within_the_bounds(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    everything = schema.MIGRATIONS
    # Without m008 (today's code needs the later steps' tables to run at all).
    monkeypatch.setattr(
        schema, "MIGRATIONS", [m for m in everything if m.__name__ != "m008_bounded_learning"]
    )
    old = make(tmp_path)
    old.add("Kelp forests shelter otters", "Otters wrap themselves in kelp to sleep.")
    old.add("Sea urchins graze kelp", "Urchin barrens form where otters are gone.")
    index = old.stores[0].index
    pair = ("global:kelp forests shelter otters", "global:sea urchins graze kelp")
    # What the old loop left: a much-used note's Q sunk under the prior, a weight at the audited vault's scale.
    index.write(lambda c: index.store_credit(c, [("kelp forests shelter otters", 0.21, 90, T0)], [pair]))
    index.write(lambda c: c.execute(cooccurrence.update().values(weight=4000.0)))
    index.close()
    monkeypatch.setattr(schema, "MIGRATIONS", everything)
    upgraded = make(tmp_path).stores[0].index
    assert upgraded.q_values() == {"kelp forests shelter otters": (learning.Q_START, 90)}
    assert upgraded.cooccurrence() == [(*pair, learning.COOC_CAP)]
