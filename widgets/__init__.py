"""ipywidgets views of the Aries agent and the REPL body, shipped as ``aries_kernel.widgets``.

- :class:`AgentPanel`: the agent's event stream as a live panel (text, tool cards, diffs, context meter, memory).
- :class:`CommunityGraph`: the codebase's communities as a graph.
"""

from .graph import CommunityGraph, community_graph_svg
from .panel import AgentPanel, ContextMeter, MemoryStrip, edit_diff_html

__all__ = [
    "AgentPanel",
    "ContextMeter",
    "MemoryStrip",
    "CommunityGraph",
    "community_graph_svg",
    "edit_diff_html",
]
