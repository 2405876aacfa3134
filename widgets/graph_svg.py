"""The community graph as a static SVG: what a saved notebook, nbconvert's HTML and plain viewers show.

It draws the same layout and labels as the interactive view at its first zoom; every disc and dot carries its
full name as an SVG ``<title>``, which browsers show on hover.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from html import escape

from .graph_layout import FONT_PX, GraphLayout, shade

__all__ = ["graph_svg"]


def graph_svg(layout: GraphLayout, expanded: Iterable[str] = ()) -> str:
    """SVG of ``layout`` with the groups in ``expanded`` drawn as their files."""
    view = layout.view(expanded)
    width, height = layout.width, layout.height
    if not view["groups"]:
        return (
            f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='40'>"
            "<text x='8' y='24' font-family='sans-serif'>no files in the graph</text></svg>"
        )
    at: dict[str, tuple[float, float, float]] = {g["key"]: (g["x"], g["y"], g["r"]) for g in view["groups"]}
    at.update({n["id"]: (n["x"], n["y"], n["r"]) for n in view["nodes"]})
    colour = {g["key"]: g["colour"] for g in view["groups"]}
    total = sum(g["pagerank"] for g in view["groups"]) or 1.0
    top = max((e[2] for e in view["edges"]), default=1.0)
    parts = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' viewBox='0 0 {width} {height}' "
        f"font-family='system-ui, sans-serif' font-size='{FONT_PX}' style='background:#fff'>"
    ]
    # Edges first: the discs cover their ends.
    for a, b, weight in view["edges"]:
        (x1, y1, ra), (x2, y2, rb) = at[a], at[b]
        d = math.hypot(x2 - x1, y2 - y1)
        if d <= ra + rb:
            continue
        ux, uy = (x2 - x1) / d, (y2 - y1) / d
        strength = math.sqrt(weight / top)
        parts.append(
            f"<line x1='{x1 + ux * ra:.1f}' y1='{y1 + uy * ra:.1f}' x2='{x2 - ux * rb:.1f}' y2='{y2 - uy * rb:.1f}' "
            f"stroke='#505050' stroke-opacity='{0.12 + 0.45 * strength:.2f}' stroke-width='{0.5 + 4 * strength:.1f}'/>"
        )
    for g in view["groups"]:
        dash = " stroke-dasharray='4 3'" if g["kind"] in ("folder", "rest") else ""
        fill_opacity = 0.1 if g["expanded"] else 1
        stroke = g["colour"] if g["expanded"] else "#00000059"
        title = f"{g['label']} · {g['files']} files · PageRank {100 * g['pagerank'] / total:.1f}% of all"
        parts.append(
            f"<circle cx='{g['x']:.1f}' cy='{g['y']:.1f}' r='{g['r']:.1f}' fill='{g['colour']}' "
            f"fill-opacity='{fill_opacity}' stroke='{stroke}'{dash}><title>{escape(title)}</title></circle>"
        )
    for n in view["nodes"]:
        parts.append(
            f"<circle cx='{n['x']:.1f}' cy='{n['y']:.1f}' r='{max(n['r'], 1.5):.1f}' fill='{colour[n['group']]}' "
            f"stroke='#fff' stroke-width='0.75'><title>{escape(n['id'])}</title></circle>"
        )
    for label in layout.labels(expanded):
        parts.append(
            f"<text x='{label.x + 2:.1f}' y='{label.y + 2 + FONT_PX * 0.85:.1f}' fill='{shade(colour[label.owner])}' "
            "stroke='#fff' "
            f"stroke-width='3' stroke-opacity='0.9' paint-order='stroke'>{escape(label.text)}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)
