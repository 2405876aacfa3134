"""Where the team's shared indexes live and the key that vouches for them, fixed when the kernel starts.

The folder is ``$ARIES_TEAM_INDEX_DIR``, else ``c.AriesCodebase.team_index_dir``; the key ``$ARIES_TEAM_KEY_FILE``,
else ``c.AriesCodebase.team_key_file`` (32 random bytes). The agent's Repl steps run in the kernel's process and
can set ``os.environ`` or the shell's config: were these read when an index is made, a step could point this
kernel's next index (a reindex after ``.aries/index.db`` is gone) at a folder and a key of its own, and the
kernel would start from an index the step forged. So a kernel resolves them once, folder and key bytes, as its
context is made (:class:`~aries_kernel.context.AriesContext`: the spawner's environment and the Jupyter config
at start), and every codebase it builds uses that (``Codebase(team=...)``). A codebase built without one (a
script, ``aries-kernel mcp``) resolves them when it indexes.

Kept apart from :mod:`.team_index` so the kernel's start imports no more than this (no sqlite3, no git).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aries_kernel.codebase.config import AriesCodebase
from aries_kernel.codebase.index_key import IndexKey, read_key
from aries_kernel.paths import aries_setting

__all__ = ["TeamChoice", "TeamIndex", "team_index"]


@dataclass(frozen=True)
class TeamIndex:
    """Where the team's copies live and the key they are tagged under."""

    folder: Path
    key: IndexKey

    def copy_of(self, commit: str) -> Path:
        return self.folder / f"{commit}.index.db"


# The team index to use, or None and why not (None, None when no folder is set: off).
TeamChoice = tuple[TeamIndex | None, str | None]


def team_index(settings: AriesCodebase) -> TeamChoice:
    """The team's index folder and key as they are set now, or None and why not (None, None: off)."""
    folder = aries_setting("ARIES_TEAM_INDEX_DIR", settings.team_index_dir)
    if not folder:
        return None, None
    key_file = aries_setting("ARIES_TEAM_KEY_FILE", settings.team_key_file)
    if not key_file:
        return None, (
            f"the team index folder {folder} is set but no team key (ARIES_TEAM_KEY_FILE or "
            "c.AriesCodebase.team_key_file): not used"
        )
    try:
        key = IndexKey(read_key(Path(key_file).expanduser()), persistent=True)
    except (OSError, ValueError) as exc:
        return None, f"the team key {key_file} cannot be read ({exc}): the team index is not used"
    return TeamIndex(Path(folder).expanduser(), key), None
