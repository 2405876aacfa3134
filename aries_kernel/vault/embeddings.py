"""Text embedders behind one small interface: wordllama (default, offline), model2vec, a provider endpoint.

An embedder has a ``name`` (the cache key of its vectors in the index) and ``embed(texts)`` returning an
``(n, dim)`` float32 array of L2-normalised rows. Heavy models load on first ``embed`` so opening a vault
stays fast. :class:`HashEmbedder` is a dependency-free, deterministic embedder (feature hashing of words)
for tests and for machines without wordllama.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = [
    "Embedder",
    "EndpointEmbedder",
    "HashEmbedder",
    "Model2VecEmbedder",
    "WordLlamaEmbedder",
    "make_embedder",
    "normalize_rows",
]

_WORD = re.compile(r"\w+")


@runtime_checkable
class Embedder(Protocol):
    """What the vault needs from an embedding model."""

    name: str

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for ``texts``: shape ``(len(texts), dim)``, float32, each row of unit length (or zero)."""
        ...


def normalize_rows(vectors: Any) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), as float32."""
    array = np.asarray(vectors, dtype=np.float32)
    if array.ndim == 1:
        array = array[None, :]
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.asarray(array / norms, dtype=np.float32)


class WordLlamaEmbedder:
    """wordllama's 256-dimension model, loaded from the weights shipped in its wheel (never downloads)."""

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.name = f"wordllama-{dim}"
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                root = logging.getLogger()
                level, handlers = root.level, list(root.handlers)
                import wordllama
                from wordllama import WordLlama

                # wordllama calls logging.basicConfig(level=INFO) on import, which would make every HTTP
                # request of the kernel print to stderr; the user's logging setup is put back as it was.
                root.setLevel(level)
                root.handlers[:] = handlers

                self._model = WordLlama.load(
                    cache_dir=Path(wordllama.__file__).parent, disable_download=True, dim=self.dim
                )
            return self._model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed with wordllama (loads the model on first use, about half a second)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return normalize_rows(self._load().embed(list(texts)))


class Model2VecEmbedder:
    """A model2vec static model (``pip install model2vec``); ``model`` is a local path or a model name."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.name = f"model2vec-{Path(model).name}"
        self._model: Any = None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed with model2vec, loading it on first use."""
        if self._model is None:
            try:
                from model2vec import StaticModel
            except ImportError as exc:
                raise RuntimeError(
                    "The vault is configured for model2vec embeddings but model2vec is not installed; "
                    "run `pip install model2vec` or set AriesVault.embedder = 'wordllama'."
                ) from exc
            self._model = StaticModel.from_pretrained(self.model)
        return normalize_rows(self._model.encode(list(texts)))


class EndpointEmbedder:
    """A provider's embedding endpoint through the openai SDK (OpenAI or any OpenAI-compatible URL).

    ``client`` is an ``openai.OpenAI`` instance (so tests can hand one with a local transport); without it one
    is built from ``base_url`` and the usual environment variables.
    """

    def __init__(self, model: str, client: Any = None, base_url: str | None = None, batch: int = 256) -> None:
        self.model = model
        self.name = f"endpoint-{model}"
        self.batch = batch
        self._client = client
        self._base_url = base_url

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed in batches of ``batch`` texts per request."""
        if self._client is None:
            import openai

            self._client = openai.OpenAI(base_url=self._base_url)
        rows: list[list[float]] = []
        for start in range(0, len(texts), self.batch):
            chunk = list(texts[start : start + self.batch])
            response = self._client.embeddings.create(model=self.model, input=chunk)
            ordered = sorted(response.data, key=lambda item: item.index)
            rows.extend(item.embedding for item in ordered)
        if not rows:
            return np.zeros((0, 0), dtype=np.float32)
        return normalize_rows(rows)


class HashEmbedder:
    """Deterministic bag-of-words vectors by feature hashing: no model, no download, same everywhere."""

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.name = f"hash-{dim}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One row per text: each lowercase word adds ±1 to a bucket chosen by its BLAKE2 hash."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.casefold()):
                digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
                value = int.from_bytes(digest, "little")
                out[row, value % self.dim] += 1.0 if (value >> 63) & 1 else -1.0
        return normalize_rows(out)


_FACTORIES: dict[str, Callable[[str], Embedder]] = {
    "wordllama": lambda arg: WordLlamaEmbedder(int(arg) if arg else 256),
    "model2vec": lambda arg: Model2VecEmbedder(arg or "minishlab/potion-base-8M"),
    "endpoint": lambda arg: EndpointEmbedder(arg or "text-embedding-3-small"),
    "hash": lambda arg: HashEmbedder(int(arg) if arg else 256),
}


def make_embedder(spec: str) -> Embedder:
    """An embedder from a config string: ``wordllama``, ``model2vec:<m>``, ``endpoint:<m>`` or ``hash``."""
    kind, _, arg = spec.partition(":")
    if kind not in _FACTORIES:
        raise ValueError(
            f"Unknown embedder {spec!r}; use one of: {', '.join(_FACTORIES)} (e.g. 'model2vec:<name>')."
        )
    return _FACTORIES[kind](arg)
