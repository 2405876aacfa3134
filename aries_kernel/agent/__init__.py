"""The coding agent: a loop that emits typed events, its tools, phases, safety, compaction and sessions.

``agent_for(context)`` is the one agent of a kernel. Display lives elsewhere (``render`` for text, the widgets for
a panel); the loop only yields events.
"""

from __future__ import annotations

from typing import Any

from aries_kernel.agent.loop import Agent, AgentHook
from aries_kernel.agent.settings import AriesAgent

__all__ = ["Agent", "AgentHook", "AriesAgent", "agent_for"]


def agent_for(context: Any) -> Agent:
    """The agent of ``context`` (an :class:`~aries_kernel.context.AriesContext`), built on first use."""
    return context.lazy("agent", lambda ctx: Agent(ctx))  # type: ignore[no-any-return]
