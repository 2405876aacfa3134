"""The vault: persistent, learning memory of markdown notes (SPEC section 4).

``open_vault(root, config)`` returns the :class:`Vault` that the kernel puts in the namespace as ``vault``. The
names below load their module on first use: the kernel names :class:`VaultUnavailable` at start without loading
SQLAlchemy, pandas or an embedding model. Every SQL statement of the vault is built in :mod:`.db`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from aries_kernel.vault.errors import VaultBusyError, VaultUnavailable

if TYPE_CHECKING:
    from aries_kernel.vault.db import VaultIndex
    from aries_kernel.vault.embeddings import Embedder, HashEmbedder, WordLlamaEmbedder, make_embedder
    from aries_kernel.vault.learning import Session
    from aries_kernel.vault.notes import NoteError
    from aries_kernel.vault.store import AddResult
    from aries_kernel.vault.vault import AriesVault, NoteText, Vault, open_vault

__all__ = [
    "AddResult",
    "AriesVault",
    "Embedder",
    "HashEmbedder",
    "NoteError",
    "NoteText",
    "Session",
    "Vault",
    "VaultBusyError",
    "VaultIndex",
    "VaultUnavailable",
    "WordLlamaEmbedder",
    "make_embedder",
    "open_vault",
]

# The module of each name loaded on first use.
_HOMES = {
    "AddResult": "store",
    "AriesVault": "vault",
    "Embedder": "embeddings",
    "HashEmbedder": "embeddings",
    "NoteError": "notes",
    "NoteText": "vault",
    "Session": "learning",
    "Vault": "vault",
    "VaultIndex": "db",
    "WordLlamaEmbedder": "embeddings",
    "make_embedder": "embeddings",
    "open_vault": "vault",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # the next use finds it without this hook
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
