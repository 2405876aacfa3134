"""One shell's Aries state: the project root, its settings, and the lazily built pillars.

The kernel (or ``%load_ext aries_kernel``) creates one :class:`AriesContext` per IPython shell. The codebase is
built at start in a background thread; the vault, the model router, ``rlm`` and the agent are built on first use,
so a kernel with no key and no vault still starts at once.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from traitlets import Unicode
from traitlets.config import Configurable

if TYPE_CHECKING:
    from aries_kernel.codebase import Codebase

__all__ = ["AriesContext", "AriesSettings", "get_context", "set_context"]

_CONTEXT_ATTR = "_aries_context"


class AriesSettings(Configurable):
    """Settings shared by every part of Aries (``c.AriesSettings.root = ...`` in a Jupyter config file)."""

    root = Unicode(
        "",
        help="The repository the codebase graph, project brain and sessions belong to. "
        "Empty means the kernel's working directory (or $ARIES_ROOT when set).",
    ).tag(config=True)


class AriesContext:
    """Holds the root, the traitlets config and the pillars (codebase, vault, models, rlm, agent) of one shell."""

    def __init__(self, shell: Any, root: str | os.PathLike[str] | None = None) -> None:
        self.shell = shell
        self.config = shell.config if shell is not None else None
        settings = AriesSettings(config=self.config)
        chosen = root or settings.root or os.environ.get("ARIES_ROOT") or os.getcwd()
        self.root = Path(chosen).expanduser().resolve()
        self._cache: dict[str, Any] = {}
        self._lock = threading.RLock()  # re-entrant: one pillar's factory may build another (rlm -> models)
        self.hooks: dict[str, Any] = {}  # IPython event callbacks registered for this context, by event name

    @property
    def codebase(self) -> Codebase:
        """The code graph of :attr:`root`; indexing starts in the background on first access."""
        return self.lazy("codebase", _start_codebase)

    def set_codebase(self, codebase: Codebase) -> None:
        """Replace the codebase (``%aries index PATH`` indexes another folder)."""
        with self._lock:
            self._cache["codebase"] = codebase

    def lazy(self, name: str, factory: Any) -> Any:
        """Build a pillar once with ``factory(self)`` and keep it (codebase, vault, models, rlm, agent).

        Thread-safe: the background indexing thread and the agent (or a cell) may ask for the same pillar at
        the same moment, and both must get the one object.
        """
        with self._lock:
            if name not in self._cache:
                self._cache[name] = factory(self)
            return self._cache[name]

    def built(self, name: str) -> Any | None:
        """The pillar ``name`` if it has been built already, else None (never builds it)."""
        return self._cache.get(name)

    def reset(self, name: str) -> None:
        """Forget a lazily built pillar so the next use builds it again (after a config change)."""
        self._cache.pop(name, None)


def _start_codebase(context: AriesContext) -> Codebase:
    from aries_kernel.codebase import Codebase

    codebase = Codebase(context.root, config=context.config)
    codebase.index_in_background()
    return codebase


def get_context(shell: Any) -> AriesContext:
    """The context of ``shell``, created with defaults if the extension has not made one yet."""
    context = getattr(shell, _CONTEXT_ATTR, None)
    if context is None:
        context = AriesContext(shell)
        set_context(shell, context)
    return context


def set_context(shell: Any, context: AriesContext) -> None:
    """Attach ``context`` to ``shell``."""
    setattr(shell, _CONTEXT_ATTR, context)
