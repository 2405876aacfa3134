"""The notebook as the agent's context: the bounded section each run's request carries, the ``Notebook`` tool's
answers, ``%aries fix``'s prompt and the cell code it offers.

The section (:func:`section`) says which notebook the kernel serves and which cell is running, then, within
:data:`CONTEXT_TOKENS` (the package's one token estimate), the last error (type, message, failing cell, the end
of its traceback), the user's variables (described by :mod:`.describe`, newest first; past the budget by name and
type), the cells run in this kernel with their text output (newest kept first) and the notebook file's other
cells, markdown included, when the file can be read through the root reader (:func:`.nbfile.read_notebook`:
inside the root, a regular file, bounded in size and JSON nesting; else the header says why not). The whole
section goes through :func:`aries_kernel.redact.redact`.

``c.AriesAgent.notebook_context`` decides how much: "full" (the default), "names" (variable names and types, the
cells' labels and the error's type: no values, sources or outputs), "off" (nothing).
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from aries_kernel.models.tokens import estimate_text_tokens
from aries_kernel.notebook.describe import BRIEF, FULL, describe_variable, type_name, user_variables
from aries_kernel.notebook.executed import CellLog, CellRun, cell_log, names_read
from aries_kernel.notebook.nbfile import Cell, NotebookError, read_notebook
from aries_kernel.notebook.session import notebook_path
from aries_kernel.redact import redact

__all__ = [
    "CONTEXT_TOKENS",
    "UNCHANGED",
    "cell_log",
    "fix_prompt",
    "notebook_answer",
    "offer_cell",
    "repeated",
    "section",
    "status",
]

CONTEXT_TOKENS = 1500  # the section's budget
_CHARS_PER_TOKEN = 4  # to turn the token budget into the parts' character budgets
_TOOL_CHARS = 8000  # one cell's source or output in a Notebook tool answer
_USE_CELLS = 20  # the latest cells whose names put their variables first
_USE_SOURCE_CHARS = 20_000  # of each such cell's source, parsed for the names it reads
_RUNNING = "Running cell id: "
UNCHANGED = "<notebook_context>\nUnchanged since the previous prompt.\n</notebook_context>"
_OFF = "c.AriesAgent.notebook_context is 'off': the notebook and the kernel's state are kept out of requests."


def repeated(previous: str, text: str) -> bool:
    """Whether section ``text`` says nothing ``previous`` did not: equal but for the running cell's id (each
    ``%aries`` cell has its own)."""

    def state(section_text: str) -> list[str]:
        return [line for line in section_text.splitlines() if not line.startswith(_RUNNING)]

    return bool(previous) and state(previous) == state(text)


def _notebook(shell: Any, context: Any) -> tuple[Path | None, list[Cell], str]:
    """The notebook file the kernel serves, its cells read through the root reader, and why they were not; with
    aries-kernel's JupyterLab extension, the live notebook's cells instead (unsaved edits included)."""
    from aries_kernel.notebook.frontend import live_cells

    path = notebook_path(shell)
    if (live := live_cells(context)) is not None:
        return path, live, ""
    root = getattr(context, "root", None)
    if path is None or root is None:
        return path, [], ""
    try:
        return path, list(read_notebook(root, path).cells), ""
    except NotebookError as exc:
        return path, [], str(exc)


def _shown_path(path: Path, context: Any) -> str:
    try:
        return path.resolve().relative_to(Path(context.root).resolve()).as_posix()
    except (AttributeError, ValueError):
        return str(path)


def status(shell: Any, context: Any) -> str:
    """Which notebook this kernel serves and which cell is running (the "Notebook" part of ``%aries status``)."""
    path = notebook_path(shell)
    log = cell_log(context)
    lines = [
        f"Notebook: {_shown_path(path, context)}" if path else "Notebook: none (the frontend named no .ipynb)"
    ]
    cell_id = log.current_id if log is not None else None
    lines.append(
        f"Running cell: id {cell_id}" if cell_id else "Running cell: no cell id (the frontend sends none)"
    )
    if log is not None:
        error = f"; the last error: {log.last_error.headline()[:120]}" if log.last_error else ""
        lines.append(f"Cells recorded: {len(log.runs)}{error}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------ the section


def section(shell: Any, context: Any, mode: str = "full", tokens: int = CONTEXT_TOKENS) -> str:
    """The notebook section of a run's request, within about ``tokens`` ("" when ``mode`` is "off")."""
    if mode == "off" or shell is None or getattr(shell, "user_ns", None) is None:
        return ""
    values = mode == "full"
    budget = tokens * _CHARS_PER_TOKEN
    log = cell_log(context)
    path, file_cells, problem = _notebook(shell, context) if values else (notebook_path(shell), [], "")
    head = []
    if path is not None:
        counted = f" ({len(file_cells)} cells)" if file_cells else f" ({problem})" if problem else ""
        head.append(f"Notebook: {_shown_path(path, context)}{counted}")
    current_id = log.current_id if log is not None else None
    if current_id:
        head.append(f"{_RUNNING}{current_id}")
    parts = ["\n".join(head)] if head else []
    left = budget - sum(map(len, parts))
    error = _error_part(log, values, min(left // 4, 1600))
    left -= len(error)
    variables = _variables_part(shell, log, values, int(left * 0.55))
    left -= len(variables)
    cells = _cells_part(log, values, int(left * 0.75) if file_cells else left)
    left -= len(cells)
    others = _file_part(file_cells, log, left) if values else ""
    parts.extend(part for part in (error, variables, cells, others) if part)
    if not parts:
        return ""
    text = redact(
        "<notebook_context>\nThe notebook and kernel state as the prompt was given (the Notebook tool shows a "
        "cell, a variable or the traceback in full).\n" + "\n\n".join(parts) + "\n</notebook_context>"
    )
    if estimate_text_tokens(text) > tokens:  # the parts' budgets are estimates: the whole is held to it
        text = text[: tokens * _CHARS_PER_TOKEN - 40] + "\n[... cut]\n</notebook_context>"
    return text


def _error_part(log: CellLog | None, values: bool, chars: int) -> str:
    error = log.last_error if log is not None else None
    if error is None:
        return ""
    where = f"In[{error.count}]" if error.count is not None else "a cell"
    if not values:
        return f"Last error: {error.type} in {where}"
    first = (
        f"Last error, in {where}{f' (cell id {error.cell_id})' if error.cell_id else ''}: {error.headline()}"
    )
    traceback = error.traceback()
    room = chars - len(first) - 1
    shown = traceback if len(traceback) <= room else "[...]\n" + traceback[-max(room - 6, 0) :]
    return f"{first}\n{shown}"


def _variables_part(shell: Any, log: CellLog | None, values: bool, chars: int) -> str:
    variables = _by_use(user_variables(shell), log, shell)
    if not variables:
        return ""
    lines = [f"Variables ({len(variables)}; those the latest cells read first, then the newest):"]
    used = len(lines[0])
    brief: list[str] = []
    for index, (name, value) in enumerate(variables):
        if values and not brief:
            line = "- " + describe_variable(name, value, BRIEF)
            if used + len(line) + 1 <= chars * 0.8:
                lines.append(line)
                used += len(line) + 1
                continue
        item = f"{name} ({type_name(value)})"
        if used + len(item) + 2 > chars - 40:
            brief.append(f"and {len(variables) - index} more")
            break
        brief.append(item)
        used += len(item) + 2
    if brief:
        lines.append(("Also: " if values else "") + ", ".join(brief))
    return "\n".join(lines)


def _by_use(variables: list[tuple[str, Any]], log: CellLog | None, shell: Any) -> list[tuple[str, Any]]:
    """``variables`` with the names the latest :data:`_USE_CELLS` cells read first, the latest cell's first."""
    order: dict[str, int] = {}
    runs = list(log.runs)[-_USE_CELLS:] if log is not None else []
    for rank, run in enumerate(reversed(runs)):
        for name in names_read(run.source[:_USE_SOURCE_CHARS], shell):
            order.setdefault(name, rank)
    last = len(runs)
    return sorted(variables, key=lambda pair: order.get(pair[0], last))  # stable: the newest first otherwise


def _cells_part(log: CellLog | None, values: bool, chars: int) -> str:
    runs = [run for run in (log.runs if log is not None else ()) if not run.running]
    if not runs:
        return ""
    if not values:
        return "Cells run in this kernel: " + ", ".join(run.label() for run in runs[-40:])
    blocks: list[str] = []
    used = 0
    for run in reversed(runs):
        block = _cell_block(run, source_chars=600, output_chars=300)
        if used + len(block) > chars:
            break
        blocks.append(block)
        used += len(block) + 1
    skipped = len(runs) - len(blocks)
    title = f"Cells run in this kernel ({len(runs)}{f'; the {skipped} oldest left out' if skipped else ''}):"
    return "\n".join([title, *reversed(blocks)])


def _cell_block(run: CellRun, source_chars: int, output_chars: int) -> str:
    lines = [f"{run.label()}:", _indent(_clip(run.source, source_chars))]
    if run.output.strip():
        lines.append("  output: " + _clip(run.output.strip(), output_chars).replace("\n", "\n  "))
    if run.result:
        lines.append(f"  result: {run.result}")
    if run.error:
        lines.append(f"  error: {run.error[:300]}")
    return "\n".join(lines)


def _file_part(cells: list[Cell], log: CellLog | None, chars: int) -> str:
    ran = {run.cell_id for run in log.runs} if log is not None else set()
    others = [cell for cell in cells if cell.id not in ran and cell.source.strip()]
    if not others or chars < 80:
        return ""
    lines = ["Other cells of the notebook file (not run in this kernel):"]
    used = len(lines[0])
    for cell in others:
        first = _clip(cell.source.strip(), 160).replace("\n", " | ")
        line = f"[{cell.index}] {cell.kind}: {first}"
        if used + len(line) + 1 > chars - 30:
            lines.append(f"... and {len(others) - len(lines) + 1} more")
            break
        lines.append(line)
        used += len(line) + 1
    return "\n".join(lines)


def _clip(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[:chars] + f" [... {len(text) - chars:,} more chars]"


def _indent(text: str) -> str:
    return "  " + text.replace("\n", "\n  ")


# ------------------------------------------------------------------------------------------ the Notebook tool


def notebook_answer(
    shell: Any, context: Any, mode: str, cell: str = "", variable: str = "", traceback: bool = False
) -> str:
    """The Notebook tool's answer: a cell with its output, a variable in full, the whole traceback, or (nothing
    asked) every variable's name and type and every cell's label."""
    if mode == "off":
        return _OFF
    values = mode == "full"
    log = cell_log(context)
    answers = []
    if cell:
        answers.append(_cell_answer(shell, context, log, cell, values))
    if variable:
        answers.append(_variable_answer(shell, variable, values))
    if traceback:
        error = log.last_error if log is not None else None
        if error is None:
            answers.append("No cell has raised an error in this kernel.")
        elif not values:
            answers.append(
                f"{error.type} in In[{error.count}] (notebook_context 'names': no messages or code)."
            )
        else:
            answers.append(f"{error.traceback()}\n\nThe failing cell:\n{_clip(error.source, _TOOL_CHARS)}")
    if not answers:
        names = [f"{name} ({type_name(value)})" for name, value in user_variables(shell)]
        runs = [run.label() for run in log.runs] if log is not None else []
        answers.append(
            f"Variables: {', '.join(names) or 'none'}\nCells run: {', '.join(runs) or 'none'}\n"
            "Ask for one: cell='In[3]' (or a cell id), variable='name', traceback=true."
        )
    return redact("\n\n".join(answers))


def _cell_answer(shell: Any, context: Any, log: CellLog | None, cell: str, values: bool) -> str:
    run = log.find(cell) if log is not None else None
    if run is not None:
        if not values:
            return f"{run.label()}{' raised ' + run.error.split(':')[0] if run.error else ''} (no code or output: notebook_context 'names')."
        return _cell_block(run, _TOOL_CHARS, _TOOL_CHARS)
    if values:
        _, cells, problem = _notebook(shell, context)
        found = next((item for item in cells if item.id == cell.strip()), None)
        if found is not None:
            return f"Cell {found.index} of the notebook file ({found.kind}, not run in this kernel):\n{_clip(found.source, _TOOL_CHARS)}"
    known = ", ".join(run.label() for run in log.runs) if log is not None else ""
    return f"No cell {cell!r} has run in this kernel; cells run: {known or 'none'}."


def _variable_answer(shell: Any, name: str, values: bool) -> str:
    namespace = dict(user_variables(shell))
    if name not in namespace:
        close = difflib.get_close_matches(name, list(namespace), n=5)
        hint = f" Close: {', '.join(close)}." if close else ""
        return f"No user variable {name!r}.{hint}"
    return describe_variable(name, namespace[name], FULL, values=values)


# -------------------------------------------------------------------------------------------------- %aries fix


def fix_prompt(shell: Any, context: Any, mode: str, request: str = "") -> str:
    """The prompt ``%aries fix`` runs: the failing cell, its traceback and the variables it reads, and how to
    offer the fix. Raises :class:`LookupError` when no cell has failed, :class:`PermissionError` when the
    setting is "off"."""
    if mode == "off":
        raise PermissionError(
            "%aries fix sends the failing cell and its traceback, and c.AriesAgent.notebook_context is 'off'; "
            "set it to 'names' or 'full' (%aries config notebook_context=full)."
        )
    log = cell_log(context)
    error = log.last_error if log is not None else None
    if error is None:
        raise LookupError(
            "No cell has raised an error in this kernel: there is nothing for %aries fix to fix."
        )
    where = f"In[{error.count}]" if error.count is not None else "the failing cell"
    ident = f" (cell id {error.cell_id})" if error.cell_id else ""
    namespace = dict(user_variables(shell))
    used = [name for name in names_read(error.source, shell) if name in namespace]
    described = [
        "- "
        + describe_variable(name, namespace[name], FULL if len(used) <= 3 else BRIEF, values=mode == "full")
        for name in used[:20]
    ]
    parts = [
        f"Fix the error that {where}{ident} raised." + (f" {request.strip()}" if request.strip() else ""),
        f"The failing cell, {where}:\n```python\n{_clip(error.source, _TOOL_CHARS)}\n```",
        f"Its traceback:\n{error.traceback()}",
        ("The variables it reads:\n" + "\n".join(described)) if described else "It reads no user variables.",
        f"Find the cause (the Repl and the Notebook tool reach the live variables), then offer the corrected code "
        f"of the whole cell with CellEdit(cell='{where}', new_source=...): the user approves it and it goes into a "
        "new cell below for them to run. Do not edit the notebook file itself.",
    ]
    return redact("\n\n".join(parts))


def offer_cell(shell: Any, context: Any, new_source: str, cell: str = "") -> str:
    """Put ``new_source`` into a new cell below the running one (``set_next_input``), as the new code of
    ``cell`` (default: the last failing cell); returns what was offered, with the diff."""
    if shell is None or not hasattr(shell, "set_next_input"):
        raise RuntimeError("No notebook frontend is attached to this agent: a cell cannot be offered.")
    log = cell_log(context)
    run = log.find(cell) if log is not None and cell else None
    error = log.last_error if log is not None else None
    old = run.source if run is not None else (error.source if error is not None and not cell else "")
    label = run.label() if run is not None else (cell or (f"In[{error.count}]" if error else "a new cell"))
    shell.set_next_input(new_source, replace=False)
    diff = "\n".join(
        difflib.unified_diff(old.splitlines(), new_source.splitlines(), label, "new cell", n=2, lineterm="")
    )
    said = f"The new code of {label} is in a new cell below the %aries cell, for the user to run."
    return f"{said}\n{_clip(diff, 3000)}" if diff else said
