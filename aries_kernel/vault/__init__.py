"""The vault: persistent, learning memory of markdown notes (SPEC section 4).

``open_vault(root, config)`` returns the :class:`Vault` that the kernel puts in the namespace as ``vault``.
"""

from __future__ import annotations

from aries_kernel.vault.embeddings import Embedder, HashEmbedder, WordLlamaEmbedder, make_embedder
from aries_kernel.vault.index import VaultBusyError, VaultIndex
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
    "WordLlamaEmbedder",
    "make_embedder",
    "open_vault",
]
