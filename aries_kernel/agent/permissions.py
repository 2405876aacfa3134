"""Permission modes: what the agent may do without asking, per effect.

The modes are named as in the coding agents users already know:

- ``default``: asks before file edits and commands;
- ``acceptEdits``: file edits inside the project root run, commands are asked;
- ``plan``: read-only; edits and commands are refused, with a message telling the model it is planning;
- ``bypassPermissions``: everything runs without asking (``auto_approve`` and ``%aries --yes`` mean this).

An effect is one of :data:`aries_kernel.agent.safety.EFFECTS`. ``read`` always runs. The ``Repl`` tool itself
runs in every mode: its effects (file writes, processes) are weighed one by one by the Repl guard
(:mod:`aries_kernel.agent.guard`) as ``edit`` and ``command``.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["MODES", "Decision", "decide", "effective_mode", "refusal"]

MODES = ("default", "acceptEdits", "plan", "bypassPermissions")
Decision = Literal["allow", "ask", "refuse"]

_TABLE: dict[str, dict[str, Decision]] = {
    "default": {"edit": "ask", "command": "ask"},
    "acceptEdits": {"edit": "allow", "command": "ask"},
    "plan": {"edit": "refuse", "command": "refuse"},
    "bypassPermissions": {"edit": "allow", "command": "allow"},
}


def decide(mode: str, effect: str) -> Decision:
    """Whether an action with ``effect`` runs, is asked for, or is refused in permission ``mode``."""
    if mode not in _TABLE:
        raise ValueError(f"Unknown permission mode {mode!r}; modes are {', '.join(MODES)}.")
    return _TABLE[mode].get(effect, "allow")


def effective_mode(permission_mode: str, auto_approve: bool) -> str:
    """The mode a run uses: ``auto_approve`` is an alias of ``bypassPermissions``."""
    return "bypassPermissions" if auto_approve else permission_mode


def refusal(mode: str, effect: str) -> str:
    """The reason given to the model when ``mode`` refuses ``effect`` without asking."""
    if mode == "plan":
        kind = "file edits" if effect == "edit" else "commands"
        return (
            f"permission mode plan: this run is read-only, so {kind} are refused. Read, search and "
            "compute to make a plan; the user switches modes (%aries --mode default ...) to carry it out"
        )
    return f"permission mode {mode}"
