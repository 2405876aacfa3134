"""One shell's Aries state: the project root, its settings, and the lazily built pillars.

The kernel (or ``%load_ext aries_kernel``) creates one :class:`AriesContext` per IPython shell. The codebase is
built at start in a background thread; the vault, the model router, ``rlm`` and the agent are built on first use,
so a kernel with no key and no vault still starts at once.

The root is, in order: the one given to the context, ``$ARIES_ROOT``, ``c.AriesSettings.root`` (the settings
rule of :mod:`aries_kernel.paths`), or else the one :func:`discover_root` finds from the working directory
(JupyterLab starts a kernel in the notebook's folder, which is rarely the repository's root). :attr:`AriesContext.root_reason` says which, and why.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from traitlets import Unicode
from traitlets.config import Configurable

from aries_kernel.codebase.config import AriesCodebase
from aries_kernel.codebase.team_settings import team_index
from aries_kernel.paths import aries_setting
from aries_kernel.settings_owner import SettingsOwner

if TYPE_CHECKING:
    from aries_kernel.agent.settings import AriesAgent
    from aries_kernel.codebase import Codebase

__all__ = ["AriesContext", "AriesSettings", "FoundRoot", "discover_root", "get_context", "set_context"]

_CONTEXT_ATTR = "_aries_context"
# What marks a project root when no .git is found. Not a bare .aries/: the kernel makes one (its index) wherever
# it runs, so a kernel started once in /tmp would capture every folder below it. A project brain
# (.aries/memory/) is kept on purpose and travels with the project.
_PROJECT_MARKERS = ("pyproject.toml", "package.json", ".aries/memory")


class AriesSettings(Configurable):
    """Settings shared by every part of Aries (``c.AriesSettings.root = ...`` in a Jupyter config file)."""

    root = Unicode(
        "",
        help="The repository the codebase graph, project brain and sessions belong to ($ARIES_ROOT overrides "
        "it). Empty means the repository found from the kernel's working directory: the nearest "
        "folder with a .git, else the nearest with pyproject.toml, package.json or .aries/memory, else the working "
        "directory itself.",
    ).tag(config=True)


@dataclass(frozen=True)
class FoundRoot:
    """A project root and why it was chosen (shown by ``%aries status`` and ``codebase.status()``)."""

    path: Path
    reason: str


def discover_root(start: str | os.PathLike[str], home: str | os.PathLike[str] | None = None) -> FoundRoot:
    """The repository root that holds ``start``: the nearest folder at or above it with a ``.git`` (a folder, or
    a file as in a worktree or submodule), else the nearest with ``pyproject.toml``, ``package.json`` or an
    existing project brain (``.aries/memory/``), else ``start`` itself.

    The walk stops below ``home`` (default: the user's home) when ``start`` is inside it: a home folder holds
    the global ``~/.aries`` vault and often a dotfiles ``.git``, and indexing all of it is never what was meant.
    Outside home it goes up to the filesystem root, as git does.
    """
    start_path = Path(start).expanduser().resolve()
    ceiling = Path(home).expanduser().resolve() if home is not None else _home()
    folders = [start_path, *start_path.parents]
    if ceiling is not None and ceiling in folders:
        folders = folders[: folders.index(ceiling)]
    for markers in ((".git",), _PROJECT_MARKERS):
        for level, folder in enumerate(folders):
            found = next((m for m in markers if (folder / m).exists()), None)
            if found is not None:
                return FoundRoot(folder, f"found {found} in {folder}, {_levels(level)} {start_path}")
    return FoundRoot(
        start_path,
        f"no .git, pyproject.toml, package.json or .aries/memory in {start_path} or above it"
        f"{f' (below {ceiling})' if ceiling is not None and ceiling in start_path.parents else ''}; "
        "using the working directory",
    )


def _home() -> Path | None:
    try:
        return Path.home().resolve()
    except (RuntimeError, KeyError):  # no HOME and no passwd entry (some containers)
        return None


def _levels(level: int) -> str:
    if level == 0:
        return "the working directory"
    return f"{level} level{'s' if level > 1 else ''} up from the working directory"


class AriesContext:
    """Holds the root, the traitlets config and the pillars (codebase, vault, models, rlm, agent) of one shell."""

    def __init__(self, shell: Any, root: str | os.PathLike[str] | None = None) -> None:
        self.shell = shell
        self.config = shell.config if shell is not None else None
        if self.config is not None:  # ~/.jupyter/jupyter_config.py and the like, which the kernel does not read
            from aries_kernel.config_files import merge_config_files

            merge_config_files(self.config)
        # The permission, key, endpoint and spend settings as they stand now are the user's; from here on only
        # the user changes them (aries_kernel.settings_owner).
        self.settings_owner = SettingsOwner(self.config)
        # The team index's folder and key as the kernel starts: a Repl step's os.environ cannot redirect them.
        self.team_index = team_index(AriesCodebase(config=self.config))
        settings = AriesSettings(config=self.config)
        # The settings rule (aries_kernel.paths), in branches to say which source set the root.
        variable = aries_setting("ARIES_ROOT")
        if root:
            found = FoundRoot(Path(root), "given explicitly")
        elif variable:
            found = FoundRoot(Path(variable), "set by $ARIES_ROOT")
        elif settings.root:
            found = FoundRoot(Path(settings.root), "set by c.AriesSettings.root")
        else:
            found = discover_root(os.getcwd())
        self.root = found.path.expanduser().resolve()
        self.root_reason = found.reason
        self._cache: dict[str, Any] = {}
        self._lock = threading.RLock()  # re-entrant: one pillar's factory may build another (rlm -> models)
        self.hooks: list[tuple[str, Any]] = []  # IPython event callbacks registered for this context: (event, hook)
        # What could not be set up (an unwritable folder), by feature, each saying why and which setting moves
        # it; shown by ``%aries status``. The kernel starts regardless.
        self.problems: dict[str, str] = {}

    @property
    def codebase(self) -> Codebase:
        """The code graph of :attr:`root`; indexing starts in the background on first access."""
        return self.lazy("codebase", _start_codebase)

    @property
    def agent_settings(self) -> AriesAgent:
        """The agent's settings (``c.AriesAgent``), owned by :attr:`settings_owner`; one object for the agent
        and for MCP clients' steps, built on first use."""

        def build(context: AriesContext) -> AriesAgent:
            from aries_kernel.agent.settings import AriesAgent

            settings = AriesAgent(config=context.config)
            context.settings_owner.adopt(settings)
            return settings

        return self.lazy("agent_settings", build)  # type: ignore[no-any-return]

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

    codebase = Codebase(
        context.root, config=context.config, root_reason=context.root_reason, team=context.team_index
    )
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
