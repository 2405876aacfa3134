"""After each agent run, the static hidden-state check of the notebook the kernel serves.

At the end of a run (the model's last reply, with no tool calls) the notebook's code cells are checked against
the live namespace (:func:`aries_kernel.notebook.hidden.hidden_state`, nothing executed); a short Notice names
the cells that use a name only this kernel has (a deleted cell's, or one run out of order), once for each new set
of findings. A kernel that serves no notebook, a notebook that cannot be read and any failure of the check add
nothing: the run is never the worse for it (``%aries hidden`` says what is wrong).
"""

from __future__ import annotations

from collections.abc import Iterable

from aries_kernel.agent import HookFactory
from aries_kernel.agent.events import Event, Notice
from aries_kernel.agent.loop import Agent, AgentHook
from aries_kernel.notebook.hidden import fresh_names, hidden_state
from aries_kernel.notebook.nbfile import read_notebook
from aries_kernel.notebook.session import notebook_path

__all__ = ["AGENT_HOOK", "HiddenStateHook"]

_SHOWN = 3  # findings named in the Notice; %aries hidden lists them all


class HiddenStateHook(AgentHook):
    """Adds a Notice at a run's end when a notebook cell depends on state only the live namespace holds."""

    def __init__(self) -> None:
        self._said: frozenset[tuple[int, str]] = frozenset()

    @classmethod
    def for_agent(cls, agent: Agent) -> HiddenStateHook:
        """The hook factory :func:`aries_kernel.agent.agent_for` calls for each agent (``AGENT_HOOK``)."""
        return cls()

    def after_turn(self, agent: Agent, turn: int, tools_used: int) -> Iterable[Event]:
        """At the run's last turn, the check; a Notice only when it found something new."""
        if tools_used:
            return ()
        try:
            text = self.check(agent)
        except Exception:  # the check never fails the run; %aries hidden shows the error
            return ()
        return [Notice(text, turn=turn)] if text else ()

    def check(self, agent: Agent) -> str:
        """The Notice's text for the notebook of ``agent``'s shell, or "" (nothing found, or nothing new)."""
        shell = agent.shell
        path = notebook_path(shell) if shell is not None else None
        if shell is None or path is None:
            return ""
        notebook = read_notebook(agent.root, path)
        findings, _ = hidden_state(
            notebook.code_cells, shell.user_ns, fresh_names(shell), getattr(shell, "transform_cell", None)
        )
        live = [finding for finding in findings if finding.live]
        said, self._said = self._said, frozenset((finding.cell, finding.name) for finding in live)
        if not live or self._said == said:
            return ""
        shown = "; ".join(
            f"cell {f.cell} uses {f.name}, "
            + ("which no cell defines" if f.defined_by == "no cell" else f"defined by {f.defined_by}")
            for f in live[:_SHOWN]
        )
        more = f" (and {len(live) - _SHOWN} more)" if len(live) > _SHOWN else ""
        return (
            f"Hidden state in {notebook.rel}: {shown}{more}. Only this kernel has them, so a fresh kernel fails "
            "there; %aries hidden lists them, %aries replay runs the notebook fresh."
        )


AGENT_HOOK: HookFactory = HiddenStateHook.for_agent  # every agent built by agent_for() runs the check
