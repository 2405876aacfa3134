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
    team_index_dir = Unicode(
        "",
        help="A folder the team shares where each commit's index is kept, so a member's kernel at a commit "
        "another already indexed starts from that index and parses only the files it changed "
        "($ARIES_TEAM_INDEX_DIR first; needs team_key_file). Empty: off.",
    ).tag(config=True)
    team_key_file = Unicode(
        "",
        help="The team's 32-byte key file (readable by the team only), under which the shared indexes are "
        "tagged and checked ($ARIES_TEAM_KEY_FILE first). Make one with: head -c 32 /dev/urandom > team.key",
    ).tag(config=True)
