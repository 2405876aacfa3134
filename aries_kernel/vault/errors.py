"""The vault's errors that reach its users, in a module that imports nothing, so the kernel can name them at
start without loading the vault (SQLAlchemy, pandas).

* :class:`VaultUnavailable`: the vault cannot be used at all: its folder cannot be read or written
  (:func:`aries_kernel.pillars.shared_vault`), or its database server refused the login or did not answer for
  longer than the retry budget (:class:`aries_kernel.vault.db.VaultIndex`). The message names what and the
  setting that changes it.
* :class:`VaultBusyError`: another process kept the SQLite index locked for longer than the retry budget.
"""

from __future__ import annotations

__all__ = ["VaultBusyError", "VaultUnavailable"]


class VaultUnavailable(RuntimeError):
    """The vault cannot be used: its folder or its database server; the message names it and the setting that
    moves it."""


class VaultBusyError(RuntimeError):
    """Another process kept the vault database locked for longer than the retry budget."""
