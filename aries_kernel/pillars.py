"""The vault and the model router of an :class:`AriesContext`, each built one way and cached once.

Every path that needs the vault (the ``vault`` name, ``%aries vault`` and ``%aries status``, the agent's memory
and tools, the MCP server) calls :func:`shared_vault`. With a factory per path under the one cache key, the first
path used won and whatever the others set was missing for the life of the kernel (``vault.decompose`` was set by
only one of them). Both imports are deferred: the kernel's start imports this module, and neither the vault
(SQLAlchemy) nor the router (the provider SDKs) is needed before first use.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from aries_kernel.context import AriesContext
from aries_kernel.paths import aries_path
from aries_kernel.vault.errors import VaultUnavailable

if TYPE_CHECKING:
    from aries_kernel.models import ModelRouter
    from aries_kernel.vault import Vault

__all__ = ["BODY_NAMES", "VaultUnavailable", "shared_models", "shared_vault"]

# The names under which the extension puts the pillars in the user's namespace (the REPL body); the notebook's
# description of the user's variables leaves them out.
BODY_NAMES = ("codebase", "vault", "rlm_call", "rlm_batch", "rlm_stats")

log = logging.getLogger(__name__)

_SUB_QUESTIONS = (
    "Split this question into at most 4 shorter sub-questions that together answer it, one per line, "
    "nothing else:\n\n{question}"
)


def shared_vault(context: AriesContext) -> Vault:
    """The vault of ``context``, opened on first use with its settings (``ARIES_VAULT``, ``ARIES_VAULT_URL``,
    ``ARIES_VAULT_SCHEMA``, ``c.AriesVault``) and ``explore``'s sub-question decomposer on the cheap slot.

    Raises :class:`VaultUnavailable` when no vault folder can be used; nothing is cached then, so the next use
    tries again (a folder made writable later is picked up)."""

    def build(ctx: AriesContext) -> Vault:
        vault = _open_or_explain(ctx)
        vault.decompose = lambda question: _sub_questions(ctx, question)
        return vault

    vault: Vault = context.lazy("vault", build)
    return vault


def shared_models(context: AriesContext) -> ModelRouter:
    """The model router of ``context`` (slots, keys, spend), built on first use."""
    from aries_kernel.models import ModelRouter

    def build(ctx: AriesContext) -> ModelRouter:
        router = ModelRouter(config=ctx.config)
        ctx.settings_owner.adopt(router.settings)  # endpoints, prices and limits: the user's, from the start
        return router

    router: ModelRouter = context.lazy("models", build)
    return router


def _open_or_explain(context: AriesContext) -> Vault:
    """The vault with the project brain; without it when only ``<root>/.aries`` cannot be written (a read-only
    checkout), else :class:`VaultUnavailable` naming the folder and the setting that moves it."""
    from sqlalchemy.exc import SQLAlchemyError

    from aries_kernel.vault import open_vault
    from aries_kernel.vault.vault import AriesVault

    failures = (OSError, SQLAlchemyError)
    try:
        return open_vault(context.root, config=context.config)
    except failures as exc:
        first = exc
    folder = aries_path("ARIES_VAULT", AriesVault(config=context.config).path, "vault")
    try:
        vault = open_vault(None, config=context.config)
    except failures as exc:
        raise VaultUnavailable(
            f"The vault cannot be opened: its folder {folder} cannot be used ({exc}). Set ARIES_VAULT (or "
            "c.AriesVault.path) to a writable folder in the kernel's environment; the rest of Aries works "
            "without it."
        ) from exc
    context.problems["vault"] = (
        f"The project brain is off: {context.root / '.aries'} cannot be written ({first}); notes go to the "
        f"global vault at {folder} only (c.AriesVault.project_brain = False silences this)."
    )
    log.warning("%s", context.problems["vault"])
    return vault


def _sub_questions(context: AriesContext, question: str) -> list[str]:
    """``vault.explore``'s decomposition through the cheap slot, when that slot has a key to call with.

    A local server (no key) is not assumed to be running, and a failed call costs only the decomposition:
    exploring then stays deterministic.
    """
    from aries_kernel.models import ModelError
    from aries_kernel.models.types import Message, ModelRequest

    client = shared_models(context).client("cheap")
    if client.key_status() != "set":
        return []
    request = ModelRequest([Message("user", _SUB_QUESTIONS.format(question=question))], max_tokens=300)
    try:
        reply = client.complete(request).message.content
    except ModelError:
        return []
    return [line.strip(" -*0123456789.").strip() for line in reply.splitlines() if line.strip()][:4]
