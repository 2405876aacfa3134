"""After a write the vault re-reads only what changed: the written store's rows and the new note's vector, and its
answers equal those of a vault opened afresh."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from aries_kernel.vault import open_vault
from aries_kernel.vault.embeddings import HashEmbedder

# Every test here runs on SQLite and on PostgreSQL (tests/pg_support.py).
pytestmark = pytest.mark.usefixtures("backend")


class CountingEmbedder(HashEmbedder):
    """The hash embedder, counting the texts it embeds."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def embed(self, texts: Any) -> np.ndarray:
        self.texts += texts
        return super().embed(texts)


def test_a_write_rereads_only_the_written_store_and_the_new_vector(tmp_path: Path) -> None:
    embedder = CountingEmbedder()
    vault = open_vault(tmp_path / "repo", path=tmp_path / "global", embedder=embedder)
    for n in range(20):
        vault.add(f"global fact number {n} about parsing", f"body {n}")
    vault.add("the project parses with tree-sitter", "details", project=True)
    vault.query_ranked("parsing")
    embedder.texts.clear()
    reads: dict[str, int] = {"global": 0, "project": 0}
    for store in vault.stores:
        # The two reads that grow with the vault: every note's corpus row, and cached vectors.
        for name in ("corpus_rows", "cached_vectors"):
            read = getattr(store.index, name)

            def counted(*args: Any, read: Any = read, source: str = store.source) -> Any:
                reads[source] += 1
                return read(*args)

            setattr(store.index, name, counted)
    vault.add("the project keeps its index in .aries", "more details", project=True)
    answer = vault.query_ranked("project index")
    # No note already loaded is embedded again, and the global store's note and link rows are not re-read.
    assert not [text for text in embedder.texts if "fact number" in text or "tree-sitter" in text]
    assert any(text.startswith("the project keeps its index") for text in embedder.texts)
    assert reads == {"global": 1, "project": 2}  # global: one vector look-up for the new hash, no rows
    fresh = open_vault(tmp_path / "repo", path=tmp_path / "global", embedder=HashEmbedder())
    again = fresh.query_ranked("project index")
    assert answer["title"].tolist() == again["title"].tolist()
