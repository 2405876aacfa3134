"""The codebase's community graph as an interactive widget (anywidget + a bundled canvas script).

:class:`CommunityGraph` syncs the layout of :class:`GraphLayout` to ``static/graph.js``, which draws it with
zoom, pan, hover names and non-overlapping labels. A click on a community writes the synced ``expanded`` trait;
the kernel answers with that community's files laid out inside its disc, drawn on the main thread
(:func:`.ui_events.on_main_thread`: the click's message may be handled on a subshell's thread, JEP 91). anywidget's front end ships inside its
pip package, so no JupyterLab extension has to be installed. The mime bundle also holds a static SVG
(``text/html``), which nbconvert and viewers without the widget state show instead.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import anywidget
import pandas as pd
import traitlets as t

from .graph_layout import GraphLayout
from .graph_svg import graph_svg
from .ui_events import main_loop, on_main_thread

__all__ = ["CommunityGraph", "community_graph_svg"]

_SCRIPT = Path(__file__).with_name("static") / "graph.js"


def community_graph_svg(codebase: Any, max_groups: int = 40, width: int = 960, height: int = 640) -> str:
    """Static SVG of ``codebase``'s community graph, every group collapsed."""
    return graph_svg(GraphLayout.from_codebase(codebase, max_groups=max_groups, width=width, height=height))


class CommunityGraph(anywidget.AnyWidget):
    """Communities of ``codebase`` as coloured discs sized by PageRank; click one to see its files.

    Repositories of at most ``expand_below`` files start with every group expanded. ``roles`` are the roles
    whose files form the communities (source by default, as the rankings); the others are one "tests and
    fixtures" group.
    """

    # The script's text rather than its path: anywidget would watch a path with a background thread.
    _esm = _SCRIPT.read_text(encoding="utf-8")

    groups: t.List[Any] = t.List().tag(sync=True)
    nodes: t.List[Any] = t.List().tag(sync=True)
    edges: t.List[Any] = t.List().tag(sync=True)
    expanded = t.List(t.Unicode()).tag(sync=True)
    width = t.Int(960).tag(sync=True)
    height = t.Int(640).tag(sync=True)

    def __init__(
        self,
        codebase: Any,
        *,
        max_groups: int = 40,
        width: int = 960,
        height: int = 640,
        expand_below: int = 40,
        roles: str | Iterable[str] = "source",
    ) -> None:
        from IPython import get_ipython

        # Where a redraw goes when the front end's click is handled off the main thread.
        self._main_loop = main_loop(getattr(get_ipython(), "kernel", None))
        super().__init__(width=width, height=height)
        self.codebase = codebase
        self.max_groups = max_groups
        self.roles = roles
        self.expand_below = expand_below
        self.refresh()

    def refresh(self) -> None:
        """Lay the graph out again from the codebase's current index (after a reindex), all groups collapsed."""
        self.graph_layout = GraphLayout.from_codebase(
            self.codebase, roles=self.roles, max_groups=self.max_groups, width=self.width, height=self.height
        )
        files = sum(len(g.files) for g in self.graph_layout.groups)
        expanded = [g.key for g in self.graph_layout.groups] if files <= self.expand_below else []
        if expanded != self.expanded:
            self.expanded = expanded  # drawn by the observer
        else:
            self._draw()

    def expand(self, community: int | str) -> pd.DataFrame:
        """Show a community's files (by community id or group key) and return them with their positions."""
        key = self.graph_layout.key_of(community)
        if key not in self.expanded:
            self.expanded = [*self.expanded, key]
        return self.graph_layout.expand(community)

    def collapse(self, community: int | str | None = None) -> None:
        """Draw a community (by id or group key) as one disc again; every community when none is given."""
        key = None if community is None else self.graph_layout.key_of(community)
        # A part's key starts with its group's: folding a group folds what was opened inside it.
        self.expanded = (
            [] if key is None else [k for k in self.expanded if k != key and not k.startswith(key + "/")]
        )

    def svg(self) -> str:
        """The graph as it is now, as a static SVG."""
        return graph_svg(self.graph_layout, self.expanded)

    def static(self) -> Any:
        """The graph as it is now as a static image (an IPython ``HTML`` object) that stays in a saved notebook."""
        from IPython.display import HTML

        return HTML(self.svg())

    def text(self) -> str:
        """One line per group, largest PageRank first: what a terminal shows."""
        frame = self.graph_layout.group_frame().sort_values("pagerank", ascending=False)
        total = frame["pagerank"].sum() or 1.0
        lines = [f"Community graph: {int(frame['files'].sum())} files in {len(frame)} groups"]
        lines += [
            f"  {r.files:5d} files  {100 * r.pagerank / total:5.1f}%  {r.label}" for r in frame.itertuples()
        ]
        return "\n".join(lines)

    @t.observe("expanded")
    def _on_expanded(self, change: dict[str, Any]) -> None:
        on_main_thread(self._main_loop, self._draw)

    def _draw(self) -> None:
        view = self.graph_layout.view(self.expanded)
        with self.hold_sync():
            self.groups = view["groups"]
            self.nodes = view["nodes"]
            self.edges = view["edges"]

    def _repr_mimebundle_(self, **kwargs: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        bundle = super()._repr_mimebundle_(**kwargs)
        assert bundle is not None  # None only for a widget without a view name; AnyWidget's is "AnyView"
        data, metadata = bundle
        data["text/plain"] = self.text()
        data["text/html"] = self.svg()
        return data, metadata
