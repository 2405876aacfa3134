"""Settings of the codebase index (``c.AriesCodebase.<name> = ...`` in a Jupyter/IPython config file)."""

from __future__ import annotations

from traitlets import Bool, Int, List, Unicode
from traitlets.config import Configurable

__all__ = ["AriesCodebase"]


class AriesCodebase(Configurable):
    """How the repository is indexed."""

    max_file_size = Int(
        1 << 20, help="Files larger than this many bytes are skipped (and listed in codebase.skipped())."
    ).tag(config=True)
    ignore = List(
        Unicode(),
        help="Extra gitignore-style patterns to leave out, on top of .gitignore and the built-in skips.",
    ).tag(config=True)
    workers = Int(
        0,
        help="Processes used to parse a large cold index; 0 means one per available core, 1 parses in-thread.",
    ).tag(config=True)
    persist = Bool(
        True, help="Keep the index in <root>/.aries/index.db so the next start only re-parses changed files."
    ).tag(config=True)
