"""ipywidgets views of the Aries agent and the REPL body, shipped as ``aries_kernel.widgets``.

- :class:`AgentPanel`: the agent's event stream as a live panel (text, tool cards, diffs, approvals, Stop,
  context meter, memory), left behind as a static :class:`TranscriptRecord` when the run ends.
- :class:`CommunityGraph`: the codebase's communities as an interactive graph (zoom, pan, click to expand).
"""

from .graph import CommunityGraph, community_graph_svg
from .graph_layout import GraphLayout
from .panel import AgentPanel, ContextMeter, MemoryStrip, TranscriptRecord, edit_diff_html

__all__ = [
    "AgentPanel",
    "ContextMeter",
    "MemoryStrip",
    "TranscriptRecord",
    "CommunityGraph",
    "community_graph_svg",
    "GraphLayout",
    "edit_diff_html",
]
