"""The optional parts of aries-kernel and the one check that names the extra a missing one comes with.

``aries-kernel console`` needs jupyter-console (the ``console`` extra); ``aries-kernel mcp`` and the MCP servers
of ``c.AriesAgent.mcp_servers`` need the MCP SDK (the ``mcp`` extra). The kernel itself needs neither.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["EXTRAS", "MissingExtraError", "require"]

# extra -> the module it provides, as imported
EXTRAS = {"console": "jupyter_console", "mcp": "mcp"}


class MissingExtraError(ImportError):
    """An optional part is not installed; the message says which extra brings it."""


def require(extra: str, needed_for: str) -> ModuleType:
    """The module of ``extra``, imported; else :class:`MissingExtraError` saying what needs it and how to get it."""
    module = EXTRAS[extra]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] != module:
            raise  # the extra is there but broken: its own error says more
        raise MissingExtraError(
            f"{needed_for} needs aries-kernel's {extra!r} extra, which is not installed: "
            f"pip install 'aries-kernel[{extra}]'"
        ) from None
