"""``codebase``: a live tree-sitter graph of a repository, with ranking, search and judgment operations.

``Codebase(root)`` is cheap to build; ``index_in_background()`` indexes in a daemon thread (warm from
``<root>/.aries/index.db`` when it can) and every operation waits for it, with a progress bar.

The names below are imported on first use: the indexer's worker processes import submodules of this package
and must not pay for pandas, which the operations need.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aries_kernel.codebase.config import AriesCodebase
    from aries_kernel.codebase.core import Codebase, CodebaseError

__all__ = ["AriesCodebase", "Codebase", "CodebaseError"]


def __getattr__(name: str) -> Any:
    if name == "AriesCodebase":
        from aries_kernel.codebase.config import AriesCodebase

        return AriesCodebase
    if name in ("Codebase", "CodebaseError"):
        from aries_kernel.codebase import core

        return getattr(core, name)
    raise AttributeError(f"module 'aries_kernel.codebase' has no attribute {name!r}")
