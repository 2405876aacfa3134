"""A run's Repl steps as notebook cells: through the JupyterLab extension, or IPython's ``set_next_input``.

When a ``%aries`` run ends, the Repl steps that succeeded become code cells below the ``%aries`` cell, each
tagged in its metadata (``aries``: session, turn, step), as ``c.AriesAgent.steps_as_cells`` says: ``always``
inserts them at once, ``ask`` leaves a steps output in the run's record (the extension renders it as an "Insert
steps as cells" button; the output holds the steps, so the button works after a reload), ``never`` does
neither. Without the extension the steps go into one new cell through ``set_next_input`` (``%aries cells``,
or at once with ``always``); a console (no notebook) prints them with ``ask`` and has them at its next prompt
with ``always``. A button of the record cannot stand in for the extension there: a click is a comm message, and
a frontend reads ``set_next_input`` only from the reply to an execution.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aries_kernel.notebook.frontend import PROTOCOL, STEPS_MIME, BridgeError, bridge_of
from aries_kernel.notebook.session import notebook_path

__all__ = ["RunSteps", "after_run", "inserted_cells", "run_steps", "write_steps"]

# How a Repl step's output says its code raised (aries_kernel.agent.repl formats the error last, so it survives
# the tool layer's cut in the middle); the tool call itself is not an error for the model.
_RAISED = "Traceback (most recent call last):\n"


@dataclass(frozen=True)
class RunSteps:
    """The Repl steps of one run that succeeded: (turn, step, code) each, step numbered in the session; and the
    run's answer (its last text), if it gave one."""

    session: str
    steps: tuple[tuple[int, int, str], ...]
    answer: str | None = None

    def cells(self, with_answer: bool = False) -> list[dict[str, Any]]:
        """One code cell per step, tagged with the session, turn and step; then the answer as a markdown cell."""
        cells = [
            {
                "cell_type": "code",
                "source": code,
                "metadata": {"aries": {"session": self.session, "turn": turn, "step": step}},
            }
            for turn, step, code in self.steps
        ]
        if with_answer and self.answer:
            turn = self.steps[-1][0] if self.steps else 0
            tag = {"session": self.session, "turn": turn, "answer": True}
            cells.append({"cell_type": "markdown", "source": self.answer, "metadata": {"aries": tag}})
        return cells

    def code(self) -> str:
        """Every step in one cell's code, each under a comment naming it."""
        return "\n\n".join(
            f"# aries step {step} (turn {turn})\n{code.rstrip()}" for turn, step, code in self.steps
        )

    def data(self) -> dict[str, Any]:
        """The steps output's JSON (the extension's ``parseSteps`` reads it)."""
        steps = [{"turn": turn, "step": step, "code": code} for turn, step, code in self.steps]
        return {"protocol": PROTOCOL, "session": self.session, "steps": steps, "answer": self.answer}


def run_steps(session: Any, first_call: int, first_message: int = 0) -> RunSteps:
    """The Repl steps that succeeded among ``session``'s tool calls from index ``first_call`` on, and the last
    text the model gave among its messages from index ``first_message`` on."""
    steps = []
    number = 0
    for index, call in enumerate(session.tool_calls):
        if call.get("name") != "Repl":
            continue
        number += 1
        code = str((call.get("arguments") or {}).get("code", ""))
        failed = call.get("is_error") or _RAISED in str(call.get("output", ""))
        if index >= first_call and not failed and code.strip():
            steps.append((int(call.get("turn") or 0), number, code))
    said = [
        m.content for m in session.messages[first_message:] if m.role == "assistant" and m.content.strip()
    ]
    return RunSteps(session.id, tuple(steps), said[-1].strip() if said else None)


def write_steps(shell: Any, context: Any, steps: RunSteps) -> str:
    """Insert ``steps`` as cells below the running cell through the extension, else put them into the next
    cell (``set_next_input``); says which was done."""
    bridge = bridge_of(context)
    reason = ""
    if bridge is not None and bridge.available():
        try:
            bridge.insert_cells(steps.cells())
            return f"{len(steps.steps)} step(s) inserted as cells below this one."
        except BridgeError as exc:
            reason = f" ({exc})"
    shell.set_next_input(steps.code(), replace=False)
    return f"{len(steps.steps)} step(s) put into the next cell{reason}."


def after_run(shell: Any, context: Any, session: Any, first: tuple[int, int], mode: str) -> None:
    """At a run's end: offer, write or leave its steps as ``mode`` (``steps_as_cells``) says; ``first`` is the
    number of tool calls and of messages the session had before the run."""
    if session is None or mode == "never":
        return
    steps = run_steps(session, *first)
    context.lazy("run_steps", lambda _: [])[:] = [steps]  # what `%aries cells` writes
    if not steps.steps:
        return
    from IPython.display import display

    if mode == "always":
        print(write_steps(shell, context, steps))
        return
    count = len(steps.steps)
    if notebook_path(shell) is None:  # a console or a Gateway client: no notebook to hold them, so show them
        text = f"{count} Repl step(s) from this run (%aries cells puts them at the next prompt):\n\n{steps.code()}"
    else:  # what a notebook without the extension shows, and the saved record read without a kernel
        text = f"{count} Repl step(s) from this run: %aries cells puts them into the notebook as cells."
    display({STEPS_MIME: steps.data(), "text/plain": text}, raw=True)


def inserted_cells(context: Any, session: Any, from_turn: int) -> list[dict[str, str]]:
    """The cells of the live notebook (through the extension) that ``session``'s Repl steps of turn
    ``from_turn`` on became and that still hold the step's code (``id``, ``source``); none without the
    extension."""
    from aries_kernel.notebook.frontend import bridge_of

    bridge = bridge_of(context)
    live = bridge.live_notebook() if bridge is not None and session is not None else None
    if live is None:
        return []
    code = dict(enumerate(session.repl_steps(), 1))  # the step numbers of run_steps
    found = []
    for cell in live["cells"]:
        tag = cell.get("aries")
        if not isinstance(tag, dict) or tag.get("session") != session.id:
            continue
        turn, step = tag.get("turn"), tag.get("step")
        if (
            isinstance(turn, int)
            and isinstance(step, int)
            and turn >= from_turn
            and code.get(step) == cell["source"]
        ):
            found.append({"id": cell["id"], "source": cell["source"]})
    return found
