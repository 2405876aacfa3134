"""Run the agent's ``Repl`` code in the kernel's own user namespace and turn what it did into text for the
model.

The code goes through IPython's input transformers (so ``%magics`` and ``!shell`` lines work as in a cell),
runs in ``shell.user_ns`` (the agent and the human share variables), and the value of a final expression is
kept as IPython would show it. stdout, stderr, ``display()`` output and exceptions are captured; DataFrames
are printed compactly and long output is cut in the middle with a marker saying how much was cut. An interrupt
stops the step as it stops a cell, raised as :class:`StepInterrupted` with what the step printed before it.
"""

from __future__ import annotations

import ast
import itertools
import traceback
from dataclasses import dataclass
from typing import Any

from IPython.utils.capture import capture_output

from aries_kernel.agent.step_window import STEP
from aries_kernel.settings_owner import note_untrusted_code

__all__ = ["ReplResult", "StepInterrupted", "run_code", "format_value", "truncate"]

_steps = itertools.count(1)
_DATAFRAME_ROWS = 30
_DATAFRAME_COLUMNS = 20
_CELL_WIDTH = 60


@dataclass
class ReplResult:
    """What one piece of code did: captured streams, the last expression's value as text, and any error."""

    stdout: str
    stderr: str
    value: str | None
    error: str | None

    def as_text(self) -> str:
        """The model's view of the run (the tool layer cuts it to length)."""
        parts = []
        if self.stdout:
            parts.append(self.stdout.rstrip("\n"))
        if self.stderr:
            parts.append("[stderr]\n" + self.stderr.rstrip("\n"))
        if self.value is not None:
            parts.append(self.value)
        if self.error:
            parts.append(self.error.rstrip("\n"))
        return "\n".join(parts) if parts else "(no output)"


class StepInterrupted(KeyboardInterrupt):
    """A step (Repl code, a Bash command) stopped by an interrupt: it stops the run as any KeyboardInterrupt
    does, and ``output`` keeps what the step printed before it, for its card and the model."""

    def __init__(self, output: str) -> None:
        super().__init__(output)
        self.output = output


def truncate(text: str, limit: int) -> str:
    """``text`` if it fits in ``limit`` characters, else its head and tail around a marker of what was cut."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    cut = len(text) - head - tail
    lines_cut = text.count("\n", head, len(text) - tail)
    return (
        f"{text[:head]}\n[... {cut:,} characters ({lines_cut:,} lines) cut of {len(text):,} ...]\n"
        f"{text[len(text) - tail :]}"
    )


def format_value(value: Any) -> str:
    """A compact text form of a value: DataFrames and Series bounded in rows, columns and cell width."""
    import pandas as pd

    if isinstance(value, (pd.DataFrame, pd.Series)):
        wide = isinstance(value, pd.DataFrame) and value.shape[1] > _DATAFRAME_COLUMNS
        truncated = len(value) > _DATAFRAME_ROWS or wide
        options = {"max_rows": _DATAFRAME_ROWS, "show_dimensions": truncated}
        if isinstance(value, pd.DataFrame):
            text = str(value.to_string(max_cols=_DATAFRAME_COLUMNS, max_colwidth=_CELL_WIDTH, **options))
            if not truncated:
                text += f"\n[{value.shape[0]} rows x {value.shape[1]} columns]"
            return text
        return str(value.to_string(**options))
    if isinstance(value, str):
        return value
    from IPython.lib.pretty import pretty

    return str(pretty(value, max_seq_length=200))


def run_code(shell: Any, code: str, number: int = 0) -> ReplResult:
    """Run ``code`` in ``shell.user_ns`` as a cell would, capturing everything it prints, shows or raises.

    A ``KeyboardInterrupt`` is not captured: it stops the agent like it stops a cell, raised again as
    :class:`StepInterrupted` holding what the code printed and showed before it.
    """
    transformed = shell.transform_cell(code)
    # A name of its own (ipykernel names cached code by its text, so a user's cell of the same text would share
    # it), recorded as untrusted: a callback this code leaves behind is known by its frames' file name.
    filename = shell.compile.cache(transformed, number, raw_code=f"{code}\n# aries step {next(_steps)}")
    note_untrusted_code(filename)
    value_text: str | None = None
    error: str | None = None
    interrupted = False
    with capture_output(display=True) as captured:
        try:
            tree = ast.parse(transformed, filename=filename)
            last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
            with STEP.running():  # a Stop interrupts this code, never the capture or formatting around it
                exec(compile(tree, filename, "exec"), shell.user_ns)
                value = None
                if last is not None:
                    value = eval(compile(ast.Expression(last.value), filename, "eval"), shell.user_ns)
            if value is not None:
                shell.user_ns["_"] = value
                value_text = format_value(value)
        except KeyboardInterrupt:
            interrupted = True
        except BaseException as exc:  # the model sees what a human would see in the cell, SystemExit included
            error = _format_exception(exc, filename)
    displayed = [_display_text(output.data) for output in captured.outputs]
    stdout = captured.stdout + "".join(f"{text}\n" for text in displayed if text)
    result = ReplResult(stdout=stdout, stderr=captured.stderr, value=value_text, error=error)
    if interrupted:
        raise StepInterrupted(result.as_text() if stdout or captured.stderr else "")
    return result


def _display_text(data: dict[str, Any]) -> str:
    return str(data.get("text/plain", "")) if data else ""


def _format_exception(exc: BaseException, filename: str) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    # Drop this module's own frames: the model should see its code's stack, not the runner's.
    keep = [frame for frame in frames if frame.filename != __file__]
    lines = ["Traceback (most recent call last):\n", *traceback.format_list(keep)]
    lines.extend(traceback.format_exception_only(type(exc), exc))
    return "".join(lines)
