"""``%aries rewind [N]`` and ``%aries checkpoints``: go back to the state before an agent turn (files, kernel
names and the conversation) and list the checkpoints that make it possible (:mod:`aries_kernel.agent.checkpoints`),
plus a "Checkpoints" line in ``%aries status``. Each says which stored checkpoints were set aside, and why."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd
from IPython.core.error import UsageError
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from aries_kernel.agent import agent_for
from aries_kernel.agent.loop import RunInProgressError

from .aries import HelpText, status_section, subcommand

__all__ = ["CheckpointTable", "checkpoints_command", "panel_rewinder", "rewind_command", "rewind_text"]


@magic_arguments()
@argument(
    "turn",
    nargs="?",
    type=int,
    default=None,
    help="The turn to go back before (default: the last checkpoint).",
)
@argument("--force", action="store_true", help="Overwrite files and names changed since the agent's turn.")
@argument("--keep", action="store_true", help="Keep your versions of what changed since; rewind the rest.")
def _rewind_options(line: str) -> None:
    """%aries rewind [N] [--force | --keep]"""


@subcommand(
    "rewind", "go back to before turn N (default: undo the last checkpoint): files, names, conversation"
)
def rewind_command(magics: Any, args: str, cell: str | None) -> HelpText:
    """Rewind files, names and the conversation as one step; a conflict stops it unless --force or --keep."""
    options = parse_argstring(_rewind_options, args)
    if options.force and options.keep:
        raise UsageError("Give --force (overwrite your changes) or --keep (keep them), not both.")
    if options.turn is not None and options.turn < 1:
        raise UsageError("Turns are numbered from 1.")
    return HelpText(rewind_text(magics.context, options.turn, force=options.force, keep=options.keep))


def rewind_text(context: Any, turn: int | None, *, force: bool = False, keep: bool = False) -> str:
    """Rewind the agent of ``context`` and say what happened (the panel's Rewind button calls this too)."""
    try:
        report = agent_for(context).rewind(turn, force=force, keep=keep)
    except (LookupError, RunInProgressError) as exc:
        raise UsageError(str(exc)) from exc
    from .cells import offer_removal  # the cells those turns inserted into the live notebook

    offer = offer_removal(context, turn) if report.done and turn is not None else ""
    return report.text() + (f"\n{offer}" if offer else "")


def panel_rewinder(context: Any) -> Callable[[int, bool, bool], str]:
    """The panel's Rewind buttons' action: :func:`rewind_text` for the agent of ``context``."""
    return lambda turn, force, keep: rewind_text(context, turn, force=force, keep=keep)


class CheckpointTable(pd.DataFrame):
    """The checkpoints, shown without pandas' row index beside the checkpoint number (their key) and with a
    rewind's missing turn left blank; a DataFrame still (``cps["checkpoint"]``)."""

    def _shown(self) -> pd.DataFrame:
        # pandas prints a nullable integer's missing value as <NA> whatever na_rep or a formatter says.
        turns = [str(turn) if not pd.isna(turn) else "" for turn in self["turn"]]
        return pd.DataFrame(self).assign(turn=turns)

    def __repr__(self) -> str:
        return str(self._shown().to_string(index=False))

    def _repr_html_(self) -> str:
        return str(self._shown().to_html(index=False))


@subcommand("checkpoints", "the agent's checkpoints: turn, time, prompt, files and names changed, size")
def checkpoints_command(magics: Any, args: str, cell: str | None) -> Any:
    """One row per checkpoint kept, oldest first; stored files set aside since the last listing are named
    above it."""
    if args.strip():
        raise UsageError("Usage: %aries checkpoints")
    checkpoints = agent_for(magics.context).checkpoints
    frame = CheckpointTable(checkpoints.frame())
    for notice in checkpoints.new_notices():
        print(notice)
    return frame


@status_section("Checkpoints")
def checkpoints_status(context: Any) -> str | None:
    """How many checkpoints are kept and their size (nothing before the agent is built)."""
    agent = context.built("agent")
    return agent.checkpoints.status() if agent is not None else None
