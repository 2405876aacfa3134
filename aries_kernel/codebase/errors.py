"""The codebase's one error type, in a module of its own so that :mod:`.core` and the mixins it is built from
(:mod:`.queries`) both import it and neither imports the other."""

from __future__ import annotations

__all__ = ["CodebaseError"]


class CodebaseError(RuntimeError):
    """The index could not be built or a request names something the index does not hold."""
