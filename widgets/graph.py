"""A graph view of the codebase's communities: one circle per community, sized by its files, joined by edges.

Drawn as SVG (no JavaScript library needed, so it renders in JupyterLab, Notebook 7 and exported notebooks);
the layout is rustworkx's spring layout over the community graph.
"""

from __future__ import annotations

import html
import math
from typing import Any

import ipywidgets as w
import rustworkx as rx

__all__ = ["community_graph_svg", "CommunityGraph"]

_PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f"]


def community_graph_svg(codebase: Any, size: int = 520, max_communities: int = 30) -> str:
    """SVG of the community graph of ``codebase`` (its ``communities()`` and ``edges()`` frames)."""
    members = codebase.communities()
    edges = codebase.edges()
    counts = members.groupby(["community", "label"]).size().sort_values(ascending=False).head(max_communities)
    community_of = dict(zip(members["file"], members["community"], strict=True))
    graph = rx.PyGraph()
    index = {}
    for (community, label), files in counts.items():
        index[community] = graph.add_node((community, label, int(files)))
    weights: dict[tuple[int, int], float] = {}
    for source, target, weight in zip(edges["source"], edges["target"], edges["weight"], strict=True):
        a, b = community_of.get(source), community_of.get(target)
        if a in index and b in index and a != b:
            key = (min(index[a], index[b]), max(index[a], index[b]))
            weights[key] = weights.get(key, 0.0) + float(weight)
    for (a, b), weight in weights.items():
        graph.add_edge(a, b, weight)
    if graph.num_nodes() == 0:
        return "<svg xmlns='http://www.w3.org/2000/svg' width='200' height='30'><text y='20'>no communities</text></svg>"
    layout = rx.spring_layout(graph, seed=7) if graph.num_nodes() > 1 else {0: (0.0, 0.0)}
    xs = [p[0] for p in layout.values()]
    ys = [p[1] for p in layout.values()]
    span = max(max(xs) - min(xs), max(ys) - min(ys), 1e-9)
    margin = 60

    def place(node: int) -> tuple[float, float]:
        x, y = layout[node]
        return (
            margin + (x - min(xs)) / span * (size - 2 * margin),
            margin + (y - min(ys)) / span * (size - 2 * margin),
        )

    top = max(weights.values(), default=1.0)
    parts = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{size}' height='{size}' font-family='sans-serif'>"
    ]
    for (a, b), weight in weights.items():
        (x1, y1), (x2, y2) = place(a), place(b)
        parts.append(
            f"<line x1='{x1:.0f}' y1='{y1:.0f}' x2='{x2:.0f}' y2='{y2:.0f}' stroke='#999' "
            f"stroke-opacity='0.6' stroke-width='{1 + 4 * weight / top:.1f}'/>"
        )
    for node in graph.node_indices():
        community, label, files = graph[node]
        x, y = place(node)
        radius = 6 + 4 * math.sqrt(files)
        colour = _PALETTE[community % len(_PALETTE)]
        parts.append(
            f"<circle cx='{x:.0f}' cy='{y:.0f}' r='{radius:.0f}' fill='{colour}' fill-opacity='0.8'>"
            f"<title>{html.escape(str(label))}: {files} files</title></circle>"
        )
        parts.append(
            f"<text x='{x:.0f}' y='{y + radius + 11:.0f}' font-size='10' text-anchor='middle'>"
            f"{html.escape(str(label)[:28])}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


class CommunityGraph(w.VBox):
    """A widget showing :func:`community_graph_svg`, with a button to redraw after re-indexing."""

    def __init__(self, codebase: Any) -> None:
        self.codebase = codebase
        self.view = w.HTML(community_graph_svg(codebase))
        redraw = w.Button(description="Redraw", icon="refresh")
        redraw.on_click(lambda _: self.refresh())
        super().__init__([redraw, self.view])

    def refresh(self) -> None:
        """Draw the current graph again."""
        self.view.value = community_graph_svg(self.codebase)
