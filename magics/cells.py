"""``%aries cells``: the last run's Repl steps written into the notebook; and the "Cell writing" status section."""

from __future__ import annotations

from typing import Any

from aries_kernel.notebook.frontend import bridge_of
from aries_kernel.notebook.steps import write_steps

from .aries import HelpText, status_section, subcommand


@subcommand(
    "cells", "the last run's Repl steps as cells below (with the JupyterLab extension) or in the next cell"
)
def cells_command(magics: Any, args: str, cell: str | None) -> HelpText:
    kept = magics.context.built("run_steps") or []
    if not kept or not kept[0].steps:
        return HelpText("The last agent run has no Repl step that succeeded.")
    return HelpText(write_steps(magics.shell, magics.context, kept[0]))


@status_section("Cell writing")
def cell_writing_status(context: Any) -> str:
    """Which way the agent's steps become cells: the JupyterLab extension, or the set_next_input fallback."""
    bridge = bridge_of(context)
    if bridge is None:
        return "Fallback: not in a kernel, so a run's steps are printed by %aries history --print"
    return bridge.status()
