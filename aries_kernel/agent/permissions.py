"""Permission modes: what the agent may do without asking, per effect.

The modes are named as in the coding agents users already know:

- ``default``: asks before file edits and commands;
- ``acceptEdits``: file edits inside the project root run, commands are asked;
- ``plan``: read-only; edits and commands are refused, with a message telling the model it is planning;
- ``bypassPermissions``: everything runs without asking (``auto_approve`` and ``%aries --yes`` mean this).

An effect is one of :data:`aries_kernel.agent.safety.EFFECTS`, declared by each tool. ``read`` always runs. The
``Repl`` tool itself runs in every mode: its effects (file writes, processes) are weighed one by one by the Repl
guard (:mod:`aries_kernel.agent.guard`) as ``edit`` and ``command``. An effect the table does not know is an
error, never an allowed action.
"""

from __future__ import annotations

from typing import Any, Literal

from aries_kernel.agent.safety import EFFECTS

__all__ = ["MODES", "Decision", "decide", "effective_mode", "refusal"]

MODES = ("default", "acceptEdits", "plan", "bypassPermissions")
Decision = Literal["allow", "ask", "refuse"]

_TABLE: dict[str, dict[str, Decision]] = {
    "default": {"read": "allow", "repl": "allow", "edit": "ask", "command": "ask"},
    "acceptEdits": {"read": "allow", "repl": "allow", "edit": "allow", "command": "ask"},
    "plan": {"read": "allow", "repl": "allow", "edit": "refuse", "command": "refuse"},
    "bypassPermissions": {"read": "allow", "repl": "allow", "edit": "allow", "command": "allow"},
}


def decide(mode: str, effect: str) -> Decision:
    """Whether an action with ``effect`` runs, is asked for, or is refused in permission ``mode``."""
    if mode not in _TABLE:
        raise ValueError(f"Unknown permission mode {mode!r}; modes are {', '.join(MODES)}.")
    if effect not in _TABLE[mode]:
        raise ValueError(f"Unknown effect {effect!r}; effects are {', '.join(EFFECTS)}.")
    return _TABLE[mode][effect]


def effective_mode(settings: Any, mode: str | None = None, auto_approve: bool | None = None) -> str:
    """The permission mode a run or step uses, the one place it is resolved: ``mode`` when given (``%aries
    --mode``, the MCP server's ``--mode``), else ``bypassPermissions`` when ``auto_approve`` (``--yes``; None
    reads ``settings.auto_approve``, its alias), else ``settings.permission_mode`` (``settings`` is an
    :class:`~aries_kernel.agent.settings.AriesAgent`).

    Raises ValueError for an unknown mode, or for ``auto_approve`` with a mode other than bypassPermissions.
    """
    if mode is not None and mode not in MODES:
        raise ValueError(f"Unknown permission mode {mode!r}; modes are {', '.join(MODES)}.")
    if auto_approve and mode not in (None, "bypassPermissions"):
        raise ValueError("auto_approve (--yes) means bypassPermissions; give it or a permission mode.")
    if mode is not None:
        return mode
    allow = settings.auto_approve if auto_approve is None else auto_approve
    return "bypassPermissions" if allow else str(settings.permission_mode)


def refusal(mode: str, effect: str) -> str:
    """The reason given to the model when ``mode`` refuses ``effect`` without asking."""
    if mode == "plan":
        kind = "file edits" if effect == "edit" else "commands"
        return (
            f"permission mode plan: this run is read-only, so {kind} are refused. Read, search and "
            "compute to make a plan; the user switches modes (%aries --mode default ...) to carry it out"
        )
    return f"permission mode {mode}"
