"""The coding agent: a loop that emits typed events, its tools, phases, safety, compaction and sessions.

``agent_for(context)`` is the one agent of a kernel. Display lives elsewhere (``render`` for text, the widgets
for a panel); the loop only yields events. The parts that extend the loop (memory, MCP servers' tools, the
notebook's hidden-state check) are plug-in modules, each naming its hook factory ``AGENT_HOOK``; every agent
built by :func:`agent_for` gets their hooks. :func:`register_hook` adds one to the agent of one context: the
factories are kept on that context (``context.lazy``), so two kernels in one process never share them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aries_kernel.agent.loop import Agent, AgentHook
    from aries_kernel.agent.settings import AriesAgent

__all__ = ["Agent", "AgentHook", "AriesAgent", "HookFactory", "agent_for", "register_hook"]

HookFactory = Callable[["Agent"], "AgentHook | None"]
_LAZY = {"Agent": "loop", "AgentHook": "loop", "AriesAgent": "settings"}


def __getattr__(name: str) -> Any:
    # The loop pulls in the model layer; `import aries_kernel.agent` alone must stay light.
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"aries_kernel.agent.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'aries_kernel.agent' has no attribute {name!r}")


def register_hook(context: Any, factory: HookFactory) -> HookFactory:
    """Give the agent of ``context`` the hook ``factory(agent)`` returns (None: no hook for it), if the agent is
    built from now on; no other context's agent gets it."""
    factories = _registered(context)
    if factory not in factories:
        factories.append(factory)
    return factory


def _registered(context: Any) -> list[HookFactory]:
    return context.lazy("agent_hook_factories", lambda _: [])  # type: ignore[no-any-return]


# The plug-in modules, each defining AGENT_HOOK (memory: warm context, preflight, echo/fizzle, reflection; MCP
# servers' tools; the notebook's hidden-state check at a run's end). Code, not state: the same in every kernel.
_PLUGIN_MODULES = ("aries_kernel.agent.memory", "aries_kernel.agent.mcp_tools", "aries_kernel.notebook.watch")


def _plugin_hooks() -> list[HookFactory]:
    import importlib

    factories = []
    for name in _PLUGIN_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:  # a plug-in that is there but broken is a real error
                raise
            continue
        factories.append(module.AGENT_HOOK)
    return factories


def _build(context: Any) -> Agent:
    from aries_kernel.agent.loop import Agent

    agent = Agent(context)
    for factory in [*_plugin_hooks(), *_registered(context)]:
        hook = factory(agent)
        if hook is not None:
            agent.hooks.append(hook)
    return agent


def agent_for(context: Any) -> Agent:
    """The agent of ``context`` (an :class:`~aries_kernel.context.AriesContext`), built on first use."""
    return context.lazy("agent", _build)  # type: ignore[no-any-return]
