"""``codebase``: a live tree-sitter graph of a repository, with ranking, search and judgment operations.

``Codebase(root)`` is cheap to build; ``index_in_background()`` indexes in a daemon thread (warm from
``<root>/.aries/index.db`` when it can) and every operation waits for it, with a progress bar.
"""

from aries_kernel.codebase.config import AriesCodebase
from aries_kernel.codebase.core import Codebase, CodebaseError

__all__ = ["AriesCodebase", "Codebase", "CodebaseError"]
