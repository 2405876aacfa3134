"""Settings of the codebase index (``c.AriesCodebase.<name> = ...`` in a Jupyter/IPython config file)."""

from __future__ import annotations

from traitlets import Bool, Float, Int, List, Unicode
from traitlets.config import Configurable

__all__ = ["AriesCodebase"]


class AriesCodebase(Configurable):
    """How the repository is indexed."""

    max_file_size = Int(
        1 << 20, help="Files larger than this many bytes are skipped (and listed in codebase.skipped())."
    ).tag(config=True)
    parse_timeout = Float(
        10.0,
        min=0.0,
        help="Seconds one file may take to parse; a file that takes longer is skipped (listed in "
        "codebase.skipped() as 'parse took longer than N s').",
    ).tag(config=True)
    ignore = List(
        Unicode(),
        help="Extra gitignore-style patterns to leave out, on top of .gitignore and the built-in skips.",
    ).tag(config=True)
    workers = Int(
        0,
        help="Worker processes used to parse a large cold index; 0 means one per available core. Every parse "
        "runs in a worker process, so a file that crashes the parser costs that file alone.",
    ).tag(config=True)
    persist = Bool(
        True, help="Keep the index in <root>/.aries/index.db so the next start only re-parses changed files."
    ).tag(config=True)
