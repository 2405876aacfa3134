"""``%aries replay [PATH]`` and ``%aries hidden [PATH]``: replay the notebook in a fresh kernel, or check it for
hidden state without running anything (:mod:`aries_kernel.notebook.replay`, :mod:`aries_kernel.notebook.hidden`).

Replay is code execution: the permission mode decides as it does for the agent's commands (default and
acceptEdits ask first, on stdin with the agent's ``[y/N/a(ll this run)]`` prompt; bypassPermissions runs; plan
refuses), ``--yes`` answers for this replay, and only a cell of the user's starts one (never the agent's Repl or
an MCP client's step). The static check only reads, and runs for anyone.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from aries_kernel.agent.events import ApprovalRequested
from aries_kernel.agent.permissions import decide, effective_mode
from aries_kernel.agent.render import ask_on_stdin, decision_text
from aries_kernel.notebook.hidden import fresh_names, hidden_frame, hidden_state
from aries_kernel.notebook.nbfile import Notebook, NotebookError, read_notebook
from aries_kernel.notebook.replay import (
    AriesReplay,
    ReplayError,
    kernel_name_of,
    replay_env,
    replay_frame,
    run_cells,
)
from aries_kernel.notebook.session import notebook_path

from .aries import _MODULE_OF, HelpText, subcommand

__all__ = ["hidden_command", "replay_command", "skip_reason"]

_ARIES_LINE = re.compile(r"^\s*%(%?)aries\b[ \t]*(\S*)", re.MULTILINE)
# Words after %aries that are commands, not prompts for the agent (replay and hidden are left out: a replay does
# not replay itself).
_COMMAND_WORDS = (set(_MODULE_OF) | {"help", "-h", "--help", "status"}) - {"", "replay", "hidden"}


@magic_arguments()
@argument("path", nargs="?", default=None, help="The notebook (default: the one this kernel serves).")
@argument("--static", action="store_true", help="Only the static hidden-state check: nothing runs.")
@argument("--yes", action="store_true", help="Run without asking (default and acceptEdits modes ask first).")
@argument(
    "--cell-timeout", type=float, default=None, help="Seconds per cell (default c.AriesReplay.cell_timeout)."
)
@argument("--timeout", type=float, default=None, help="Seconds in all (default c.AriesReplay.timeout).")
def _replay_options(line: str) -> None:
    """%aries replay [PATH] [--static] [--yes] [--cell-timeout S] [--timeout S]"""


@magic_arguments()
@argument("path", nargs="?", default=None, help="The notebook (default: the one this kernel serves).")
def _hidden_options(line: str) -> None:
    """%aries hidden [PATH]"""


def _notebook(magics: Any, path: str | None) -> Notebook:
    """The notebook named, or the one this kernel serves, read through the root reader."""
    target = Path(path) if path else notebook_path(magics.shell)
    if target is None:
        raise UsageError(
            "This kernel serves no notebook (a console, or a frontend that names none): give its path, "
            "%aries replay PATH.ipynb."
        )
    try:
        return read_notebook(magics.context.root, target)
    except NotebookError as exc:
        raise UsageError(str(exc)) from None


def skip_reason(source: str) -> str:
    """Why replay leaves a cell out ("" when it runs it): a cell that talks to the agent, or replays."""
    for cell_magic, word in _ARIES_LINE.findall(source):
        if cell_magic or word in ("replay", "hidden"):
            return "not run: it talks to the agent or replays (replay never calls the model)"
        if word and word not in _COMMAND_WORDS:
            return "not run: an agent prompt (replay never calls the model)"
    return ""


@subcommand(
    "hidden", "static hidden-state check: names cells use that no earlier cell defines (nothing runs)"
)
def hidden_command(magics: Any, args: str, cell: str | None) -> Any:
    """One row per cell and name; ``live`` says the running kernel has it (the notebook works here, not fresh)."""
    options = parse_argstring(_hidden_options, args)
    return _static(magics, _notebook(magics, options.path))


def _static(magics: Any, notebook: Notebook) -> Any:
    shell = magics.shell
    code = notebook.code_cells
    findings, notes = hidden_state(code, shell.user_ns, fresh_names(shell), shell.transform_cell)
    live = [f for f in findings if f.live]
    if findings:
        print(
            f"{notebook.rel}: {len(findings)} name(s) used before any earlier cell defines them; {len(live)} of "
            "them only this kernel has (hidden state: the notebook fails in a fresh kernel). Nothing was run."
        )
    else:
        print(f"{notebook.rel}: every name a code cell uses is defined by an earlier cell. Nothing was run.")
    for note in notes:
        print(f"  {note}")
    return hidden_frame(findings)


@subcommand(
    "replay",
    "run the notebook's code cells in a fresh kernel, bounded: per cell ran/failed/timeout, output differs, "
    "names no earlier cell defines (--static: check only)",
)
def replay_command(magics: Any, args: str, cell: str | None) -> Any:
    """Replay the notebook (asked first unless the permission mode allows commands) and report each code cell."""
    options = parse_argstring(_replay_options, args)
    notebook = _notebook(magics, options.path)
    if options.static:
        return _static(magics, notebook)
    context, shell = magics.context, magics.shell
    reason = context.settings_owner.refusal_reason()
    if reason is not None:
        raise UsageError(
            f"Replay runs the notebook's code, and is not started {reason}: only a cell of yours starts one. "
            "%aries replay --static checks without running anything."
        )
    settings = AriesReplay(config=shell.config)
    cell_timeout = settings.cell_timeout if options.cell_timeout is None else options.cell_timeout
    timeout = settings.timeout if options.timeout is None else options.timeout
    if cell_timeout <= 0 or timeout <= 0:
        raise UsageError("--cell-timeout and --timeout must be more than 0 seconds.")
    kernel_name = settings.kernel_name or kernel_name_of(shell)
    code = notebook.code_cells
    folder = notebook.path.parent
    summary = (
        f"replaying {notebook.rel}: its {len(code)} code cell(s) run in a fresh {kernel_name} kernel in {folder} "
        f"(each up to {cell_timeout:g} s, all up to {timeout:g} s)"
    )
    if not _allowed(context, options.yes, summary):
        return HelpText("Replay not run: nothing was executed.")
    plan = [(c.source, skip_reason(c.source)) for c in code]
    try:
        outcomes = run_cells(
            plan,
            kernel_name=kernel_name,
            cwd=folder,
            env=replay_env(notebook, context.root),
            cell_timeout=cell_timeout,
            timeout=timeout,
        )
    except ReplayError as exc:
        raise UsageError(str(exc)) from None
    except KeyboardInterrupt:
        print("Replay interrupted: its kernel was shut down.")
        raise
    frame = replay_frame(code, outcomes, shell)
    counts = frame["status"].value_counts()
    done = ", ".join(f"{counts[s]} {s}" for s in ("ran", "failed", "timeout", "skipped") if s in counts)
    differs = int((frame["output_differs"] == True).sum())  # noqa: E712  (None is neither)
    print(
        f"Replayed {notebook.rel} in a fresh {kernel_name} kernel: {done or 'no code cells'}; "
        f"{differs} output(s) differ from the saved ones. The kernel is shut down; the file was not changed."
    )
    return frame


def _allowed(context: Any, yes: bool, summary: str) -> bool:
    """Whether the replay may run: the permission mode's answer for a command, asked on stdin when it asks."""
    settings = context.agent_settings
    mode = effective_mode(settings)
    decision = decide(mode, "command")
    if decision == "refuse":
        raise UsageError(
            f"Replay runs the notebook's code, a command: permission mode {mode} refuses commands "
            "(%aries config permission_mode=default asks first). %aries replay --static checks without running "
            "anything."
        )
    if decision == "allow" or yes:
        return True
    event = ApprovalRequested("replay", "replay", summary, {}, effect="command")
    ask_on_stdin(event)
    if event.decision is None:
        print("This frontend cannot ask (no stdin): %aries replay --yes runs it without asking.")
    else:
        print(f"  -> {decision_text(event)}")
    return bool(event.decision)
