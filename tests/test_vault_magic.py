"""``%aries vault`` and the Vault status section in a real IPython shell; the embedder interface."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import numpy as np
import openai
import pandas as pd
import pytest
from aries_kernel.magics.aries import AriesMagics
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from aries_kernel.context import AriesContext, get_context, set_context
from aries_kernel.vault import Embedder, HashEmbedder, WordLlamaEmbedder, make_embedder
from aries_kernel.vault.embeddings import EndpointEmbedder

# Every test here runs on SQLite and on PostgreSQL (tests/pg_support.py).
pytestmark = pytest.mark.usefixtures("backend")


@pytest.fixture
def shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("ARIES_VAULT", str(tmp_path / "vault"))
    ip = InteractiveShell.instance()
    ip.config.AriesVault.embedder = "hash"
    ip.register_magics(AriesMagics)
    set_context(ip, AriesContext(ip, root=tmp_path / "repo"))
    yield ip


def test_vault_magic_shows_ranked_frame(shell: InteractiveShell) -> None:
    from aries_kernel.magics.vault import get_vault

    vault = get_vault(get_context(shell))
    vault.add("Retries use exponential backoff", "Retry 429 and 5xx with jitter.")
    vault.add("Cats purr when content", "Felines purr when relaxed.", project=True)
    frame = shell.run_line_magic("aries", "vault -n 5 retry with jitter")
    assert isinstance(frame, pd.DataFrame)
    assert frame.iloc[0]["title"] == "Retries use exponential backoff"
    assert {"semantic", "bm25", "pagerank", "warmth", "q_value", "source"} <= set(frame.columns)
    assert list(shell.run_line_magic("aries", "vault --important")["title"])
    assert "activation" in shell.run_line_magic("aries", "vault --warmth").columns
    assert "hops" in shell.run_line_magic("aries", "vault --explore retry").columns
    assert shell.run_line_magic("aries", "vault") is vault
    status = str(shell.run_line_magic("aries", "status"))
    assert "Vault" in status and "global   1 notes" in status and "project  1 notes" in status
    with pytest.raises(UsageError, match="no words"):
        shell.run_line_magic("aries", "vault ???")


def test_embedder_interface_implementations() -> None:
    hashed = HashEmbedder(64)
    vectors = hashed.embed(["the cat sat", "the cat sat", ""])
    assert vectors.shape == (3, 64) and vectors.dtype == np.float32
    assert np.allclose(vectors[0], vectors[1]) and np.allclose(np.linalg.norm(vectors[0]), 1.0)
    assert not vectors[2].any()
    assert isinstance(hashed, Embedder) and isinstance(make_embedder("wordllama"), WordLlamaEmbedder)
    with pytest.raises(ValueError, match="Unknown embedder"):
        make_embedder("magic")
    real = make_embedder("wordllama").embed(
        ["retry with backoff", "retry with exponential backoff", "cats purr"]
    )
    assert real.shape == (3, 256)
    assert real[0] @ real[1] > real[0] @ real[2]


def test_endpoint_embedder_speaks_the_openai_wire_format() -> None:
    seen: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append(body)
        data = [
            {"object": "embedding", "index": i, "embedding": [float(len(t)), 1.0, 0.0]}
            for i, t in enumerate(body["input"])
        ]
        return httpx.Response(200, json={"object": "list", "data": list(reversed(data)), "model": body["model"],
                                         "usage": {"prompt_tokens": 1, "total_tokens": 1}})  # fmt: skip

    client = openai.OpenAI(api_key="test", base_url="http://embeddings.test/v1",
                           http_client=httpx.Client(transport=httpx.MockTransport(handler)))  # fmt: skip
    embedder = EndpointEmbedder("text-embedding-3-small", client=client, batch=2)
    vectors = embedder.embed(["a", "bbb", "cc"])
    assert [len(b["input"]) for b in seen] == [2, 1] and seen[0]["model"] == "text-embedding-3-small"
    expected = np.array([[1, 1, 0], [3, 1, 0], [2, 1, 0]], dtype=np.float32)
    assert np.allclose(vectors, expected / np.linalg.norm(expected, axis=1, keepdims=True))


@pytest.mark.kernel
def test_vault_in_a_real_kernel(aries_kernel) -> None:  # type: ignore[no-untyped-def]
    """The kernel's ``vault`` name and ``%aries vault`` work end to end (private ARIES_VAULT from the harness)."""
    from tests.kernel_harness import run_cell

    _, kc = aries_kernel
    added = run_cell(
        kc, 'print(vault.add("Kernel interrupts stop the agent", "SIGINT stops the loop within a second."))'
    )
    assert added.error is None, added.error
    assert "created [[Kernel interrupts stop the agent]]" in added.stdout
    shown = run_cell(kc, "%aries vault interrupt the loop")
    assert shown.error is None, shown.error
    assert "Kernel interrupts stop the agent" in (shown.result or "")
    columns = run_cell(kc, "print(list(_.columns))")  # `_` is the DataFrame the magic returned
    assert "'bm25'" in columns.stdout and "'warmth'" in columns.stdout and "'source'" in columns.stdout
    summary = run_cell(kc, "vault")
    assert "global: 1 notes" in (summary.result or "")
