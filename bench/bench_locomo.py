"""LoCoMo retrieval benchmark for the vault: Recall@5, Recall@10 and MRR per signal and fused.

Each of the ten LoCoMo conversations (``../shared/data/locomo10/``, see its README) goes into a fresh vault,
one note per turn: title ``D3-7 Caroline`` (the ``dia_id`` with its speaker), body the turn's text (and the
caption of a shared photo), ``created`` the session's date, and a wiki-link to the previous turn of the same
session, so the link graph is the conversation's thread. Notes are written through ``Vault.add_many``, the bulk
path. For every question with evidence the vault is asked for the top 10; a question counts as recalled at k
when any of its evidence turns is in the top k, and MRR is the mean of 1 / rank of the first evidence turn.

Signals alone are each a ranking of the same candidate pool (the best BM25 and semantic matches): ``graph``
orders it by PageRank over the links and ``warmth`` by ACT-R activation, so they show what those priors do on
their own. ``fused`` is ``query_ranked`` as users get it.

The default fusion weights were chosen on conversations 26, 30 and 41; ``--skip-conversations 3`` reports the
seven held out.

    python bench/bench_locomo.py [--data DIR] [--embedder wordllama|hash] [--skip-conversations N]
                                 [--limit-conversations N]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from aries_kernel.vault import make_embedder, open_vault

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo10"
CONFIGS = {
    "bm25": (["bm25"], False),
    "semantic": (["semantic"], False),
    "graph": (["pagerank"], False),
    "warmth": (["warmth"], False),
    "fused": (None, True),
}


def session_time(text: str) -> float:
    """Epoch seconds of LoCoMo's '1:56 pm on 8 May, 2023'."""
    moment = dt.datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y")
    return moment.replace(tzinfo=dt.UTC).timestamp()


def load_conversation(path: Path) -> tuple[list[tuple[str, str, str]], list[float], list[str], list[dict]]:
    """(title, body, type) items, their creation times, their dia_ids, and the questions with evidence."""
    data = json.loads(path.read_text())
    conv = data.get("conversation", data)
    items, created, dia_ids = [], [], []
    k = 1
    while f"session_{k}_date_time" in conv:
        turns = conv.get(f"session_{k}") or []
        start = session_time(conv[f"session_{k}_date_time"])
        previous = None
        for offset, turn in enumerate(turns):
            title = turn["dia_id"].replace(":", "-")
            body = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                body += f" [shares {turn['blip_caption']}]"
            if previous:
                body += f"\n\n(after [[{previous}]])"
            items.append((title, body, "turn"))
            created.append(start + 60 * offset)
            dia_ids.append(turn["dia_id"])
            previous = title
        k += 1
    questions = [q for q in data["qa"] if q.get("evidence")]
    return items, created, dia_ids, questions


def evaluate(
    data_dir: Path, embedder_spec: str, skip: int = 0, limit_conversations: int | None = None
) -> dict[str, dict[str, float]]:
    """Run every configuration over every conversation; returns metric -> value per configuration."""
    hits = {name: {"r5": 0, "r10": 0, "rr": 0.0} for name in CONFIGS}
    latencies: list[float] = []
    asked = 0
    notes = 0
    build = 0.0
    embedder = make_embedder(embedder_spec)
    files = sorted(data_dir.glob("*.json"))[skip:][:limit_conversations]
    for path in files:
        items, created, dia_ids, questions = load_conversation(path)
        with tempfile.TemporaryDirectory(prefix="locomo-vault-") as tmp:
            started = time.perf_counter()
            after_last = max(created) + 86400  # "now" is the day after the last session
            vault = open_vault(
                None,
                path=Path(tmp) / "vault",
                embedder=embedder,
                clock=lambda at=after_last: at,
            )
            results = vault.add_many(items, folder="notes", created=created)
            vault.query_ranked("warm up the index", limit=1)
            build += time.perf_counter() - started
            notes += len(items)
            title_of = {dia: r.title for dia, r in zip(dia_ids, results, strict=False)}
            for question in questions:
                wanted = {title_of[e] for e in question["evidence"] if e in title_of}
                if not wanted:
                    continue
                asked += 1
                for name, (signals, rerank) in CONFIGS.items():
                    t0 = time.perf_counter()
                    titles = list(vault.query_ranked(question["question"], 10, signals, rerank)["title"])
                    if name == "fused":
                        latencies.append(time.perf_counter() - t0)
                    ranks = [titles.index(t) + 1 for t in wanted if t in titles]
                    first = min(ranks) if ranks else None
                    if first is not None:
                        hits[name]["r10"] += 1
                        hits[name]["r5"] += first <= 5
                        hits[name]["rr"] += 1.0 / first
        print(f"  {path.name}: {len(items)} turns, {len(questions)} questions", file=sys.stderr)
    table = {
        name: {"Recall@5": h["r5"] / asked, "Recall@10": h["r10"] / asked, "MRR": h["rr"] / asked}
        for name, h in hits.items()
    }
    print(
        f"{len(files)} conversations, {notes} turns as notes (bulk add + index {build:.1f} s), {asked} questions; "
        f"embedder {embedder.name}; fused query p50 {statistics.median(latencies) * 1e3:.1f} ms"
    )
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--embedder", default="wordllama")
    parser.add_argument("--skip-conversations", type=int, default=0)
    parser.add_argument("--limit-conversations", type=int, default=None)
    args = parser.parse_args()
    table = evaluate(args.data, args.embedder, args.skip_conversations, args.limit_conversations)
    print(f"\n{'signal':<10} {'Recall@5':>9} {'Recall@10':>10} {'MRR':>7}")
    for name, row in table.items():
        print(f"{name:<10} {row['Recall@5']:>9.3f} {row['Recall@10']:>10.3f} {row['MRR']:>7.3f}")


if __name__ == "__main__":
    main()
