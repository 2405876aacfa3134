"""The coding agent: a loop that emits typed events, its tools, phases, safety, compaction and sessions.

``agent_for(context)`` is the one agent of a kernel. Display lives elsewhere (``render`` for text, the widgets
for a panel); the loop only yields events. Parts that extend the loop (memory) register a hook factory with
:func:`register_hook`; every agent built by :func:`agent_for` gets their hooks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aries_kernel.agent.loop import Agent, AgentHook
    from aries_kernel.agent.settings import AriesAgent

__all__ = ["Agent", "AgentHook", "AriesAgent", "agent_for", "register_hook"]

HookFactory = Callable[["Agent"], "AgentHook | None"]
_HOOK_FACTORIES: list[HookFactory] = []
_LAZY = {"Agent": "loop", "AgentHook": "loop", "AriesAgent": "settings"}


def __getattr__(name: str) -> Any:
    # The loop pulls in the model layer; `import aries_kernel.agent` alone must stay light.
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"aries_kernel.agent.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'aries_kernel.agent' has no attribute {name!r}")


def register_hook(factory: HookFactory) -> HookFactory:
    """Give every agent built from now on the hook ``factory(agent)`` returns (None: no hook for it)."""
    if factory not in _HOOK_FACTORIES:
        _HOOK_FACTORIES.append(factory)
    return factory


# Modules that register hooks when imported (memory: warm context, preflight, echo/fizzle, reflection; MCP
# servers' tools; the notebook's hidden-state check at a run's end).
_PLUGIN_MODULES = ("aries_kernel.agent.memory", "aries_kernel.agent.mcp_tools", "aries_kernel.notebook.watch")


def _load_plugins() -> None:
    import importlib

    for module in _PLUGIN_MODULES:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:  # a plug-in that is there but broken is a real error
                raise


def _build(context: Any) -> Agent:
    from aries_kernel.agent.loop import Agent

    _load_plugins()
    agent = Agent(context)
    for factory in _HOOK_FACTORIES:
        hook = factory(agent)
        if hook is not None:
            agent.hooks.append(hook)
    return agent


def agent_for(context: Any) -> Agent:
    """The agent of ``context`` (an :class:`~aries_kernel.context.AriesContext`), built on first use."""
    return context.lazy("agent", _build)  # type: ignore[no-any-return]
