"""``%aries cells``: the last run's Repl steps written into the notebook, or the cells of rewound turns taken out;
and the "Cell writing" status section."""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError

from aries_kernel.agent import agent_for
from aries_kernel.notebook.frontend import BridgeError, bridge_of
from aries_kernel.notebook.steps import inserted_cells, write_steps

from .aries import HelpText, split_args, status_section, subcommand


@subcommand(
    "cells",
    "the last run's Repl steps as cells below (with the JupyterLab extension) or in the next cell; "
    "--remove N takes out the cells of turns N on",
)
def cells_command(magics: Any, args: str, cell: str | None) -> HelpText:
    words = split_args(args)
    if words[:1] == ["--remove"]:
        if len(words) != 2 or not words[1].isdigit() or int(words[1]) < 1:
            raise UsageError("Usage: %aries cells --remove TURN (turns are numbered from 1)")
        return HelpText(remove_text(magics.context, int(words[1])))
    if words:
        raise UsageError("Usage: %aries cells [--remove TURN]")
    kept = magics.context.built("run_steps") or []
    if not kept or not kept[0].steps:
        return HelpText("The last agent run has no Repl step that succeeded.")
    return HelpText(write_steps(magics.shell, magics.context, kept[0]))


def remove_text(context: Any, turn: int) -> str:
    """Ask the notebook to remove the cells the agent's steps of turn ``turn`` on became; says what was asked."""
    cells = inserted_cells(context, agent_for(context).session, turn)
    bridge = bridge_of(context)
    if not cells or bridge is None:
        return f"The live notebook holds no unedited cell of the agent's turns {turn} on."
    try:
        bridge.remove_cells(cells)
    except BridgeError as exc:
        return str(exc)
    return f"Asked the notebook to remove {len(cells)} cell(s) of turns {turn} on; one undo brings them back."


def offer_removal(context: Any, turn: int) -> str:
    """After a rewind to before ``turn``: the line offering to remove the cells those turns inserted, or ""."""
    cells = inserted_cells(context, agent_for(context).session, turn)
    if not cells:
        return ""
    return (
        f"The notebook holds {len(cells)} cell(s) the rewound turns inserted: %aries cells --remove {turn} "
        "takes them out (cells edited since stay)."
    )


@status_section("Cell writing")
def cell_writing_status(context: Any) -> str:
    """Which way the agent's steps become cells: the JupyterLab extension, or the set_next_input fallback."""
    bridge = bridge_of(context)
    if bridge is None:
        return "Fallback: not in a kernel, so a run's steps are printed by %aries history --print"
    return bridge.status()
