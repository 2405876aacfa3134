"""Vault speed on SQLite and PostgreSQL: ``add`` throughput, ``query_ranked`` p50/p95 at 10,000 and 100,000 notes
beside brute force.

Notes are built from LoCoMo turns (``../shared/data/locomo10/``): each note joins three random turns, so the
text is real English with real repetition; queries are LoCoMo questions. Measured in one run:

* ``add``: notes per second through ``vault.add`` one at a time (each its own transaction, file and
  near-duplicate check), and through ``vault.add_many`` in batches of 2,000, the documented bulk path used to
  build the large vaults (exact-duplicate check kept, BM25 near-duplicate search off);
* the first query after a build (loads the corpus, embeds every note once, caches vectors in the index);
* ``query_ranked(q, 10)`` latency over 200 questions, p50 and p95;
* a brute-force baseline over the same notes and questions, computing the same signals over every note: BM25
  by scanning every note's term counts in Python, cosine against every vector in numpy, PageRank (the vault's
  own, over the same link graph) and warmth (ACT-R base-level activation of every note's age, numpy), the
  weighted RRF of all four over all notes with the vault's weights, full sort. Its inputs (term counts,
  vectors, PageRank) are precomputed in memory and not timed, which favours the baseline.

Each backend runs the whole sequence: ``sqlite`` (a file per vault) and ``postgresql`` (``--url``, else
``$ARIES_VAULT_URL``, else a temporary server started for the run from Debian's PostgreSQL and stopped after).

    python bench/bench_vault.py [--backends sqlite postgresql] [--sizes 10000 100000] [--queries 200]
                                [--baseline-queries 50] [--url postgresql://user@host/db]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

from aries_kernel.vault import open_vault, ranking
from aries_kernel.vault.db.schema import notes as notes_table
from aries_kernel.vault.vault import DEFAULT_WEIGHTS

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo10"
WORD = re.compile(r"\w+")


def corpus(data_dir: Path) -> tuple[list[str], list[str]]:
    """LoCoMo turn texts and questions."""
    turns, questions = [], []
    for path in sorted(data_dir.glob("*.json")):
        data = json.loads(path.read_text())
        k = 1
        while f"session_{k}_date_time" in data:
            turns.extend(f"{t['speaker']}: {t['text']}" for t in data.get(f"session_{k}") or [])
            k += 1
        questions.extend(q["question"] for q in data["qa"])
    return turns, questions


def make_notes(turns: list[str], start: int, count: int, rng: random.Random) -> list[tuple[str, str, str]]:
    """``count`` notes numbered from ``start``; one in five links to an earlier note."""
    notes = []
    for i in range(start, start + count):
        body = " ".join(rng.sample(turns, 3))
        if i and rng.random() < 0.2:
            body += f" See [[Note {rng.randrange(i)}]]."
        notes.append((f"Note {i}", body, "insight"))
    return notes


def percentiles(samples: list[float]) -> tuple[float, float]:
    """p50 and p95 in milliseconds."""
    ordered = sorted(samples)
    return statistics.median(ordered) * 1e3, ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] * 1e3


class BruteForce:
    """Ranking without an index: scan every note for BM25, every vector for cosine, fuse, sort everything."""

    def __init__(
        self,
        vault,
        texts: list[str],
        vectors: np.ndarray,
        pagerank: np.ndarray,
        created: np.ndarray,
        decay: np.ndarray,
    ) -> None:  # type: ignore[no-untyped-def]  # noqa: E501
        self.vault = vault
        self.pagerank = pagerank
        self.created = created
        self.decay = decay
        self.counts = [Counter(WORD.findall(t.casefold())) for t in texts]
        self.lengths = np.array([sum(c.values()) for c in self.counts], dtype=float)
        self.df: Counter[str] = Counter()
        for c in self.counts:
            self.df.update(c.keys())
        self.vectors = vectors

    def query(self, question: str, limit: int = 10) -> list[int]:
        terms = set(WORD.findall(question.casefold()))
        n, avg = len(self.counts), float(self.lengths.mean())
        bm25 = np.zeros(n)
        for d, counts in enumerate(self.counts):
            score = 0.0
            for term in terms:
                tf = counts.get(term)
                if tf:
                    idf = math.log(1 + (n - self.df[term] + 0.5) / (self.df[term] + 0.5))
                    score += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * self.lengths[d] / avg))
            bm25[d] = score
        sims = self.vectors @ self.vault.embedder.embed([question])[0]
        # warmth: base-level activation ln(age_hours ** -d) of every note (no accesses in the benchmark)
        hours = np.maximum((time.time() - self.created) / 3600.0, 1 / 60)
        warmth = -self.decay * np.log(hours)
        fused = np.zeros(n)
        w = DEFAULT_WEIGHTS
        signals = (
            (bm25, w["bm25"]),
            (sims, w["semantic"]),
            (self.pagerank, w["pagerank"]),
            (warmth, w["warmth"]),
        )
        for scores, weight in signals:
            ranks = np.empty(n)
            ranks[np.argsort(-scores, kind="stable")] = np.arange(1, n + 1)
            fused += weight / (ranking.RRF_K + ranks)
        return list(np.argsort(-fused, kind="stable")[:limit])


def measure(vault, questions: list[str], baseline_queries: int) -> dict[str, float]:  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    vault.query_ranked("warm up", limit=10)
    first = time.perf_counter() - started
    times = []
    for q in questions:
        t0 = time.perf_counter()
        vault.query_ranked(q, limit=10)
        times.append(time.perf_counter() - t0)
    p50, p95 = percentiles(times)
    corpus_ = vault._corpus()
    store = vault.stores[0]
    n = notes_table.c
    texts = {
        int(r[0]): f"{r[1]} {r[2]}"
        for r in store.index.rows(notes_table.select().with_only_columns(n.id, n.title, n.body))
    }
    decay = np.array([ranking.decay_for(f) for f in corpus_.folders])
    brute = BruteForce(
        vault, [texts[int(i)] for i in corpus_.ids], corpus_.vectors, corpus_.pagerank, corpus_.created, decay
    )
    btimes = []
    for q in questions[:baseline_queries]:
        t0 = time.perf_counter()
        brute.query(q)
        btimes.append(time.perf_counter() - t0)
    b50, b95 = percentiles(btimes)
    return {"first": first, "p50": p50, "p95": p95, "b50": b50, "b95": b95}


@contextlib.contextmanager
def database(backend: str, url: str | None):  # type: ignore[no-untyped-def]
    """``$ARIES_VAULT_URL`` set for ``postgresql`` (a temporary server when no URL is given), unset for SQLite."""
    if backend == "sqlite":
        os.environ.pop("ARIES_VAULT_URL", None)
        yield "SQLite file"
        return
    if url:
        os.environ["ARIES_VAULT_URL"] = url
        yield "PostgreSQL"
        return
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.pg_support import temporary_server

    with temporary_server() as server:
        os.environ["ARIES_VAULT_URL"] = server.url
        yield f"PostgreSQL {server.bin.parent.name} (temporary server)"


def run(backend: str, args: argparse.Namespace, turns: list[str], questions: list[str]) -> None:
    rng = random.Random(7)
    with database(backend, args.url) as label, tempfile.TemporaryDirectory(prefix="bench-vault-") as tmp:
        print(f"\n== {backend}: {label}")
        os.environ["ARIES_VAULT_SCHEMA"] = "bench_single"
        single = open_vault(None, path=Path(tmp) / "single")
        notes = make_notes(turns, 0, args.single_adds, rng)
        t0 = time.perf_counter()
        for title, body, kind in notes:
            single.add(title, body, kind)
        single_rate = len(notes) / (time.perf_counter() - t0)
        single.stores[0].index.close()
        print(f"add, one at a time (own transaction, file, near-duplicate check): {single_rate:,.0f} notes/s")

        os.environ["ARIES_VAULT_SCHEMA"] = "bench_big"
        vault = open_vault(None, path=Path(tmp) / "big")
        built, build_seconds = 0, 0.0
        rows = []
        for size in sorted(args.sizes):
            t0 = time.perf_counter()
            while built < size:
                batch = make_notes(turns, built, min(2000, size - built), rng)
                vault.add_many(batch, folder="notes", near_duplicates=False)
                built += len(batch)
            build_seconds += time.perf_counter() - t0
            print(
                f"add_many to {size:,} notes: {built / build_seconds:,.0f} notes/s (bulk path, batches of 2,000)"
            )
            result = measure(vault, questions, args.baseline_queries)
            rows.append((size, result))
            print(f"  first query after build (load corpus, embed new notes): {result['first']:.1f} s")
        vault.stores[0].index.close()
        if backend == "postgresql":  # leave the database as it was
            for schema_name in ("bench_single", "bench_big"):
                with vault.stores[0].index.engine.begin() as conn:  # type: ignore[union-attr]
                    conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {schema_name} CASCADE")
            vault.stores[0].index.close()

    print(
        f"\n{'notes':>8} {'query p50':>10} {'query p95':>10} {'brute p50':>10} {'brute p95':>10} {'speed-up p50':>13}"
    )
    for size, r in rows:
        print(
            f"{size:>8,} {r['p50']:>8.1f}ms {r['p95']:>8.1f}ms {r['b50']:>8.1f}ms {r['b95']:>8.1f}ms "
            f"{r['b50'] / r['p50']:>12.1f}x"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument(
        "--backends", nargs="+", default=["sqlite", "postgresql"], choices=["sqlite", "postgresql"]
    )
    parser.add_argument(
        "--url", default=os.environ.get("ARIES_VAULT_URL"), help="PostgreSQL URL (no password)"
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--baseline-queries", type=int, default=50)
    parser.add_argument("--single-adds", type=int, default=1000)
    args = parser.parse_args()
    turns, all_questions = corpus(args.data)
    questions = random.Random(7).sample(all_questions, args.queries)
    for backend in args.backends:
        run(backend, args, turns, questions)


if __name__ == "__main__":
    main()
