"""Layout of the community graph, computed in Python for the widget and the static SVG alike.

Files are aggregated into groups: each community of two or more files of the shown roles (source by default,
as the rankings) is a group (the ``max_groups`` with the most PageRank), every other such file joins a group of
its folder, and the files of the other roles (tests, fixtures, examples) are folded into one "tests and
fixtures" group. A group is a disc whose radius grows with its PageRank; the discs are placed by igraph's
Fruchterman-Reingold layout of the group graph and then pushed apart until none overlap. A group expanded into
its files gets a local layout of its own subgraph inside its disc; one of more than :data:`SPLIT_ABOVE` files
opens into its folders first (``part`` groups, each expandable in turn), or, when its files share one folder, into
the communities of its own subgraph (``sub`` groups, labelled as communities are, each expandable in turn); a
file is named by as much of its path as tells it from the others shown with it (``billing/__init__.py``, not
``__init__.py``). Labels are placed greedily by descending PageRank and skipped where their box would cover a
placed one.

Coordinates are pixels of the view at its first zoom (``width`` x ``height``), so the label boxes estimated here
are the boxes drawn.
"""

from __future__ import annotations

import colorsys
import math
import posixpath
import random
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

__all__ = [
    "FONT_PX",
    "REST_LABEL",
    "SPLIT_ABOVE",
    "Group",
    "GraphLayout",
    "Label",
    "Mark",
    "colour",
    "distinct_names",
    "place_labels",
    "shade",
    "short_label",
]

# Tableau 20 without its two greys, which are kept for the folder groups of loose files.
PALETTE = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf",
    "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#dbdb8d", "#9edae5",
]  # fmt: skip
LOOSE_COLOUR = "#9a9a9a"
FONT_PX = 12
# Estimated text width per character, as a share of the font size: wide for sans-serif, so boxes err large.
CHAR_WIDTH = 0.6
_R_MIN, _R_MAX = 12.0, 64.0  # disc radii before the layout is fitted to the view
_PAD = 0.5  # gap kept between two discs, as a share of the mean radius: room for edges and labels
_MARGIN = 36.0  # room at the view's edges for the labels of the outer discs
_FILL = 0.45  # share of a disc's area its files' dots may cover, so they have room to separate
_SHORT_LABEL = 36  # characters drawn on the canvas; the full label is on hover
SPLIT_ABOVE = (
    60  # an expanded group of more files shows its folders first: hundreds of dots read as a hairball
)
REST_LABEL = "tests and fixtures"  # the one group of the files whose roles are not shown
# File names that say little alone: a file so named is always shown with its folder.
_GENERIC_NAMES = frozenset(
    {"__init__.py", "__main__.py", "index.js", "index.ts", "index.tsx", "index.d.ts", "mod.rs", "lib.rs",
     "main.rs", "main.go", "package-info.java", "conftest.py", "setup.py", "utils.py", "common.py", "types.ts"}
)  # fmt: skip


@dataclass
class Group:
    """One disc of the aggregated graph: a community, or a folder's loose files."""

    key: str
    label: str
    short: str
    # "community", "folder" (loose files), "rest" (the other roles), "part" (a folder of a group) or "sub" (a
    # community of a group's own subgraph, when its files share one folder)
    kind: str
    files: list[str]
    pagerank: float
    colour: str
    x: float = 0.0
    y: float = 0.0
    r: float = 0.0
    parent: str = ""  # the group a part belongs to
    folder: str = ""  # a part's folder: the prefix its files share


@dataclass(frozen=True)
class Label:
    """A placed label: its text and the box it covers (top-left corner, width, height)."""

    key: str
    text: str
    x: float
    y: float
    width: float
    height: float
    owner: str = ""  # the group the labelled disc belongs to

    def overlaps(self, other: Label) -> bool:
        """Whether the two boxes share any area."""
        return (
            self.x < other.x + other.width
            and other.x < self.x + self.width
            and self.y < other.y + other.height
            and other.y < self.y + self.height
        )


def shade(hex_colour: str, dark: float = 0.45) -> str:
    """``hex_colour`` mixed with black: label text keeps its group's hue but stays dark enough to read."""
    value = int(hex_colour[1:], 16)
    channels = [(value >> shift) & 255 for shift in (16, 8, 0)]
    return "#" + "".join(f"{round(c * (1 - dark)):02x}" for c in channels)


def colour(number: int) -> str:
    """The colour of the ``number``-th community: the palette, then hues a golden angle apart."""
    if number < len(PALETTE):
        return PALETTE[number]
    red, green, blue = colorsys.hls_to_rgb((number * 0.381966) % 1.0, 0.55, 0.55)
    return f"#{round(red * 255):02x}{round(green * 255):02x}{round(blue * 255):02x}"


def short_label(label: str, limit: int = _SHORT_LABEL) -> str:
    """A community label as drawn: the last part of each folder, then as many whole names as fit in ``limit``.

    ``aries_kernel/codebase + tests/fixtures/app: file, types`` becomes ``codebase + app: file, types``.
    """
    folders, _, names = label.partition(": ")
    parts = [posixpath.basename(p.rstrip("/")) or p for p in folders.split(" + ")]
    text = " + ".join(dict.fromkeys(parts))  # "src/a + src/b" draws as "src", not "src + src"
    if len(text) > limit:
        return text[: limit - 1] + "…"
    for number, name in enumerate(n for n in names.split(", ") if n):
        longer = f"{text}{': ' if number == 0 else ', '}{name}"
        if len(longer) > limit:
            break
        text = longer
    return text


def distinct_names(files: Iterable[str]) -> dict[str, str]:
    """Each file's shortest trailing part of its path that no other of ``files`` ends with, at least its name and
    its folder for names that say little alone (``__init__.py``, ``index.ts``).

    ``shop/billing/__init__.py`` and ``shop/web/__init__.py`` become ``billing/__init__.py`` and
    ``web/__init__.py``.
    """
    paths = {f: f.split("/") for f in files}
    depth = {f: 2 if parts[-1] in _GENERIC_NAMES else 1 for f, parts in paths.items()}
    while True:
        seen = Counter("/".join(parts[-depth[f] :]) for f, parts in paths.items())
        clash = [
            f
            for f, parts in paths.items()
            if seen["/".join(parts[-depth[f] :])] > 1 and depth[f] < len(parts)
        ]
        if not clash:
            return {f: "/".join(parts[-depth[f] :]) for f, parts in paths.items()}
        for f in clash:
            depth[f] += 1


def label_box(text: str, font_px: float = FONT_PX) -> tuple[float, float]:
    """Estimated (width, height) of ``text`` drawn at ``font_px``."""
    return len(text) * font_px * CHAR_WIDTH + 4, font_px + 4


def _box_hits_disc(box: Label, x: float, y: float, r: float) -> bool:
    nearest_x = min(max(x, box.x), box.x + box.width)
    nearest_y = min(max(y, box.y), box.y + box.height)
    return (nearest_x - x) ** 2 + (nearest_y - y) ** 2 < r * r


class Mark(NamedTuple):
    """Something to label: a disc (a group, or a file's dot) and the group that owns it."""

    key: str
    text: str
    x: float
    y: float
    r: float
    owner: str
    inside: bool = False  # the label may go in the middle of the disc when it fits there


def place_labels(
    marks: Iterable[Mark],
    discs: Iterable[tuple[str, float, float, float]] = (),
    bounds: tuple[float, float] | None = None,
    font_px: float = FONT_PX,
) -> list[Label]:
    """Greedy placement of labels for ``marks``, in the order given (most important first).

    A mark's label goes in the middle of its disc when ``inside`` is set and it fits. Otherwise, or when that
    spot is taken, it tries below, above, right and left of the disc and takes the first box that covers no
    placed label and none of the group ``discs`` ``(key, x, y, r)`` but its owner's, else the first that covers
    no placed label; a label with no such box, or none inside ``bounds`` (width, height), is skipped (its name
    stays on hover).
    """
    obstacles = list(discs)
    placed: list[Label] = []
    for mark in marks:
        x, y, r = mark.x, mark.y, mark.r
        width, height = label_box(mark.text, font_px)
        # The box fits in the disc when its corners do: half its width within the chord at half its height.
        fits = mark.inside and height < r and width / 2 <= math.sqrt(r * r - height * height / 4) - 2
        spots = [(x - width / 2, y - height / 2)] if fits else []
        spots += [
            (x - width / 2, y + r + 2),
            (x - width / 2, y - r - 2 - height),
            (x + r + 3, y - height / 2),
            (x - r - 3 - width, y - height / 2),
        ]
        free = []
        for left, top in spots:
            box = Label(mark.key, mark.text, left, top, width, height, mark.owner)
            inside_view = bounds is None or (
                left >= 0 and top >= 0 and left + width <= bounds[0] and top + height <= bounds[1]
            )
            if inside_view and not any(box.overlaps(other) for other in placed):
                free.append(box)
        clear = [b for b in free if not any(k != mark.owner and _box_hits_disc(b, *d) for k, *d in obstacles)]
        if clear or free:
            placed.append((clear or free)[0])
    return placed


def _seeded_layout(n: int, pairs: list[tuple[int, int]], weights: list[float]) -> np.ndarray:
    """Fruchterman-Reingold positions of an ``n``-vertex graph, the same for the same graph every time."""
    import igraph

    if n == 1:
        return np.zeros((1, 2))
    graph = igraph.Graph(n=n, edges=pairs)
    # igraph's layouts draw from its random generator; a fixed seed makes every drawing of a graph the same.
    igraph.set_random_number_generator(random.Random(0))
    try:
        coords = graph.layout_fruchterman_reingold(weights=weights or None, niter=1000, grid="nogrid").coords
    finally:
        igraph.set_random_number_generator(random)
    return np.asarray(coords, dtype=float)


def _overlaps(pos: np.ndarray, radii: np.ndarray, pad: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Matrix of how far each pair of discs is inside its wanted gap (0 when apart), and the pair vectors."""
    diff = pos[:, None, :] - pos[None, :, :]
    dist = np.hypot(diff[..., 0], diff[..., 1])
    over = np.maximum(radii[:, None] + radii[None, :] + pad - dist, 0.0)
    np.fill_diagonal(over, 0.0)
    return over, diff, dist


def _relax(
    pos: np.ndarray,
    radii: np.ndarray,
    pad: float,
    container: float | None = None,
    aspect: float = 1.0,
    steps: int = 300,
) -> np.ndarray:
    """Pull discs toward the centre and push overlapping ones apart, then settle with pushing alone.

    ``container`` keeps every disc inside a circle of that radius around the origin; ``aspect`` (width over
    height of the view) pulls less along x, so the discs spread to the view's shape. At most ``steps`` steps of
    each kind.
    """
    n = len(pos)
    pos = pos - pos.mean(axis=0)
    if n < 2:
        return pos
    # Coincident points have no direction to be pushed in: spread them by a deterministic nudge.
    angles = np.arange(n) * 2.399963  # the golden angle
    pos = pos + 1e-3 * np.stack([np.cos(angles), np.sin(angles)], axis=1)
    for step in range(steps * 2):
        gravity = 0.03 * (1 - step / steps) if step < steps else 0.0
        pos -= gravity * pos * np.array([1 / aspect, 1.0])
        over, diff, dist = _overlaps(pos, radii, pad)
        if gravity == 0.0 and not over.any():
            break
        unit = diff / np.where(dist > 0, dist, 1.0)[..., None]
        # The smaller disc moves more, so big communities keep their place.
        share = radii[None, :] ** 2 / (radii[:, None] ** 2 + radii[None, :] ** 2)
        pos += ((0.5 * over * share)[..., None] * unit).sum(axis=1)
        if container is not None:
            pos = _contain(pos, radii, container)
    return pos


def _contain(pos: np.ndarray, radii: np.ndarray, container: float) -> np.ndarray:
    """Move every disc that pokes out of the circle of radius ``container`` back inside it."""
    dist = np.hypot(pos[:, 0], pos[:, 1])
    room = np.maximum(container - radii, 0.0)
    scale = np.where(dist > room, room / np.where(dist > 0, dist, 1.0), 1.0)
    return pos * scale[:, None]


@dataclass
class GraphLayout:
    """Groups, their discs and the file graph between them; ``view()`` gives what the widget draws.

    ``roles`` are the roles whose files form the communities (``"source"``, ``"all"``, a role or a list, as
    ``codebase.communities``); files of other roles, when ``members`` has a ``role`` column, are one group.
    """

    members: pd.DataFrame
    edges: pd.DataFrame
    max_groups: int = 40
    width: int = 960
    height: int = 640
    roles: str | Iterable[str] = "source"
    names_of: Callable[[str], Iterable[str]] = field(default=lambda rel: ())  # a file's top-level names
    groups: list[Group] = field(init=False)
    group_of: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        self._pagerank = dict(zip(self.members["file"], self.members["pagerank"], strict=True))
        self._community = dict(zip(self.members["file"], self.members["community"].astype(int), strict=True))
        self._file_edges = self._undirected_edges()
        self.groups = self._make_groups()
        self.group_of = {f: g.key for g in self.groups for f in g.files}
        self._by_key = {g.key: g for g in self.groups}
        self._place_groups()
        self._files_cache: dict[str, pd.DataFrame] = {}
        self._parts: dict[str, list[Group]] = {}

    @classmethod
    def from_codebase(
        cls, codebase: Any, roles: str | Iterable[str] = "source", **options: Any
    ) -> GraphLayout:
        """The layout of ``codebase``'s ``communities()`` (of every file: those of other roles are folded into
        one group) and ``edges()``; sub-communities are labelled by the files' top-level names."""
        names: dict[str, list[str]] = {}

        def names_of(rel: str) -> list[str]:
            if not names:  # read once, on the first split into sub-communities
                table = codebase.symbol_table(hashes=False)
                top = table[table["parent"] == ""]
                names.update(top.groupby("file")["name"].agg(list))
                names.setdefault("", [])
            return names.get(rel, [])

        return cls(
            codebase.communities(roles="all"), codebase.edges(), roles=roles, names_of=names_of, **options
        )

    # building

    def _undirected_edges(self) -> dict[tuple[str, str], float]:
        known = self._pagerank
        out: dict[tuple[str, str], float] = {}
        for source, target, weight in zip(
            self.edges["source"], self.edges["target"], self.edges["weight"], strict=True
        ):
            if source != target and source in known and target in known:
                key = (source, target) if source < target else (target, source)
                out[key] = out.get(key, 0.0) + float(weight)
        return out

    def _make_groups(self) -> list[Group]:
        from aries_kernel.codebase.roles import select_roles

        frame = self.members.sort_values(["pagerank", "file"], ascending=[False, True])
        rest = frame.iloc[0:0]
        if "role" in frame.columns:
            shown = frame["role"].isin(select_roles(self.roles))
            frame, rest = frame[shown], frame[~shown]
        by_community = {int(c): part for c, part in frame.groupby("community", sort=False) if len(part) >= 2}
        ranked = sorted(by_community, key=lambda c: (-by_community[c]["pagerank"].sum(), c))
        kept = ranked[: self.max_groups]
        groups = []
        for number, community in enumerate(kept):
            part = by_community[community]
            label = str(part["label"].iloc[0])
            groups.append(
                Group(
                    key=f"c{community}",
                    label=label,
                    short=short_label(label),
                    kind="community",
                    files=list(part["file"]),
                    pagerank=float(part["pagerank"].sum()),
                    colour=colour(number),
                )
            )
        kept_set = set(kept)
        loose = frame[~frame["community"].astype(int).isin(kept_set)]
        # Loose files are the least of the picture: a few grey discs at most, however many folders hold them.
        room = max(min(self.max_groups - len(kept), self.max_groups // 4), 1)
        groups.extend(self._folder_groups(list(loose["file"]), room=room))
        if len(rest):
            counts = rest["role"].value_counts()
            kinds = ", ".join(
                f"{n} {role}" for role, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
            )
            groups.append(
                Group(
                    key="rest",
                    label=f"{REST_LABEL}: {len(rest)} files ({kinds})",
                    short=REST_LABEL,
                    kind="rest",
                    files=list(rest["file"]),
                    pagerank=float(rest["pagerank"].sum()),
                    colour=LOOSE_COLOUR,
                )
            )
        return groups

    def _folder_groups(self, files: list[str], room: int) -> list[Group]:
        """Files outside the kept communities, grouped by folder: two levels deep, fewer if that is too many."""
        for depth in (2, 1, 0):
            folders: dict[str, list[str]] = {}
            for rel in files:
                parts = posixpath.dirname(rel).split("/") if posixpath.dirname(rel) else []
                folder = (
                    "/".join(parts[:depth]) if parts and depth else ("(root)" if not parts else "(other)")
                )
                folders.setdefault(folder, []).append(rel)
            if len(folders) <= room or depth == 0:
                break
        groups = []
        for folder, members in sorted(folders.items()):
            noun = "file" if len(members) == 1 else "files"
            label = f"{folder}: {len(members)} loose {noun}"
            groups.append(
                Group(
                    key=f"f:{folder}",
                    label=label,
                    short=short_label(label),
                    kind="folder",
                    files=members,
                    pagerank=float(sum(self._pagerank[f] for f in members)),
                    colour=LOOSE_COLOUR,
                )
            )
        return groups

    def _place_groups(self) -> None:
        if not self.groups:
            return
        index = {g.key: i for i, g in enumerate(self.groups)}
        top = max(g.pagerank for g in self.groups) or 1.0
        radii = np.array([_R_MIN + (_R_MAX - _R_MIN) * math.sqrt(g.pagerank / top) for g in self.groups])
        weights: dict[tuple[int, int], float] = {}
        for (a, b), weight in self._file_edges.items():
            i, j = index[self.group_of[a]], index[self.group_of[b]]
            if i != j:
                key = (min(i, j), max(i, j))
                weights[key] = weights.get(key, 0.0) + weight
        pairs = sorted(weights)
        pos = _seeded_layout(len(self.groups), pairs, [math.log1p(weights[p]) for p in pairs])
        # Scale the layout so neighbouring discs start about their own size apart, then separate them.
        spread = np.median(np.hypot(*(pos - pos.mean(axis=0)).T)) if len(pos) > 1 else 1.0
        pos = pos * (3 * radii.mean() / max(spread, 1e-9)) * math.sqrt(len(pos)) / 2
        pad = _PAD * float(radii.mean())
        pos[:, 0] *= self.width / self.height
        pos = _relax(pos, radii, pad, aspect=self.width / self.height)
        # The relaxation stops after a bounded number of steps; spreading the centres out always ends overlaps.
        while _overlaps(pos, radii, pad)[0].any():
            pos *= 1.05
        # Fit discs (positions and radii together, so none overlap) into the view.
        low = (pos - radii[:, None]).min(axis=0)
        high = (pos + radii[:, None]).max(axis=0)
        scale = min(
            (self.width - 2 * _MARGIN) / (high[0] - low[0]), (self.height - 2 * _MARGIN) / (high[1] - low[1])
        )
        centre = (low + high) / 2
        for group, (x, y), r in zip(self.groups, pos, radii, strict=True):
            group.x = float((x - centre[0]) * scale + self.width / 2)
            group.y = float((y - centre[1]) * scale + self.height / 2)
            group.r = float(r * scale)

    # queries

    def key_of(self, community: int | str) -> str:
        """The group key of a community id (the group that holds it) or of a key given as is (a part's too,
        once its group has been opened)."""
        if isinstance(community, str):
            if community not in self._by_key:
                raise KeyError(f"No group {community!r}; the groups are {list(self._by_key)}.")
            return community
        holders = {self.group_of[f] for f, c in self._community.items() if c == int(community)}
        if not holders:
            raise KeyError(f"No community {community}.")
        return min(holders)

    def group(self, key: str) -> Group:
        """The group (or opened part) with ``key``."""
        return self._by_key[key]

    def group_frame(self) -> pd.DataFrame:
        """One row per group: key, label, kind, files, pagerank, x, y, r, colour."""
        return pd.DataFrame(
            [
                (g.key, g.label, g.kind, len(g.files), g.pagerank, g.x, g.y, g.r, g.colour)
                for g in self.groups
            ],
            columns=["key", "label", "kind", "files", "pagerank", "x", "y", "r", "colour"],
        )

    def group_edges(self) -> pd.DataFrame:
        """Edges between groups: source, target (group keys, in key order) and the summed weight of file edges."""
        return pd.DataFrame(self._view_edges(self.group_of), columns=["source", "target", "weight"])

    def parts_of(self, key: str) -> list[Group]:
        """What group ``key`` opens into before its files when it has more than :data:`SPLIT_ABOVE` of them: its
        folders, as ``part`` groups laid out inside its disc, or, when they share one folder, its sub-communities
        (``sub`` groups); else none."""
        if key not in self._parts:
            self._parts[key] = self._split(self._by_key[key])
            self._by_key.update((part.key, part) for part in self._parts[key])
        return self._parts[key]

    def files_of(self, key: str) -> pd.DataFrame:
        """The files of group ``key`` laid out inside its disc: file, community, pagerank, x, y, r."""
        if key not in self._files_cache:
            group = self._by_key[key]
            pos, radii = self._pack(group, [[f] for f in group.files])
            self._files_cache[key] = pd.DataFrame(
                {
                    "file": group.files,
                    "community": [self._community[f] for f in group.files],
                    "pagerank": [self._pagerank[f] for f in group.files],
                    "x": pos[:, 0] + group.x,
                    "y": pos[:, 1] + group.y,
                    "r": radii,
                }
            )
        return self._files_cache[key]

    def expand(self, community: int | str) -> pd.DataFrame:
        """The files of a community (an id, or a group key) with their positions inside its group's disc."""
        frame = self.files_of(self.key_of(community))
        if isinstance(community, str):
            return frame
        return frame[frame["community"] == int(community)].reset_index(drop=True)

    def _split(self, group: Group) -> list[Group]:
        """The folders of ``group``'s files below the folder they share, one level deeper until there are two."""
        if len(group.files) <= SPLIT_ABOVE:
            return []
        base = group.folder
        while True:
            folders: dict[str, list[str]] = {}
            for rel in group.files:
                inner = rel[len(base) + 1 :] if base else rel
                head = inner.split("/", 1)[0] if "/" in inner else ""
                folders.setdefault(f"{base}/{head}" if base and head else head or base, []).append(rel)
            if len(folders) > 1:
                break
            (only,) = folders
            if only == base:  # every file sits in the one folder: split by the edges among them instead
                return self._sub_communities(group)
            base = only
        ranked = sorted(folders.items(), key=lambda kv: (-sum(self._pagerank[f] for f in kv[1]), kv[0]))
        parts = []
        for folder, files in ranked:
            here = folder == base  # the files directly in the shared folder
            name = f"{posixpath.basename(folder) or folder or '(root)'} (files)" if here else folder + "/"
            relative = name if here or not base else folder[len(base) + 1 :] + "/"
            parts.append(
                Group(
                    key=f"{group.key}/{folder or '.'}{'/.' if here and folder else ''}",
                    label=f"{name}: {len(files)} files of {group.label}",
                    short=relative if len(relative) <= _SHORT_LABEL else "…" + relative[-_SHORT_LABEL + 1 :],
                    kind="part",
                    files=files,
                    pagerank=float(sum(self._pagerank[f] for f in files)),
                    colour=group.colour,
                    parent=group.key,
                    folder=folder,
                )
            )
        return self._place_parts(group, parts)

    def _sub_communities(self, group: Group) -> list[Group]:
        """The communities of ``group``'s own subgraph (as :func:`leiden_parts` finds them for
        ``codebase.communities()``), labelled as communities are; its files that link to none of the others are
        one part of loose files. None when that makes fewer than two parts."""
        from aries_kernel.codebase.ranking import community_label, leiden_parts

        found = leiden_parts(group.files, ((a, b, w) for (a, b), w in self._file_edges.items()))
        members = [part for part in found if len(part) > 1]
        loose = sorted(f for part in found if len(part) == 1 for f in part)
        if len(members) + bool(loose) < 2:
            return []
        seen: Counter[str] = Counter()
        parts = []
        for number, files in enumerate(members):
            label = community_label(files, (name for rel in files for name in self.names_of(rel)))
            seen[label] += 1
            if seen[label] > 1:  # as codebase.communities() numbers a repeated label
                label = f"{label} ({seen[label]})"
            parts.append(self._part(group, f"{group.key}/~{number}", label, files))
        if loose:
            parts.append(self._part(group, f"{group.key}/~loose", f"{len(loose)} loose files", loose))
        parts.sort(key=lambda p: (-p.pagerank, p.key))
        return self._place_parts(group, parts)

    def _part(self, group: Group, key: str, label: str, files: list[str]) -> Group:
        """A sub-community of ``group``: a ``sub`` group inside it."""
        return Group(
            key=key,
            label=f"{label} · {len(files)} files of {group.label}",
            short=short_label(label),
            kind="sub",
            files=files,
            pagerank=float(sum(self._pagerank[f] for f in files)),
            colour=group.colour,
            parent=group.key,
            folder=group.folder,
        )

    def _place_parts(self, group: Group, parts: list[Group]) -> list[Group]:
        """``parts`` laid out inside ``group``'s disc by the edges between them."""
        pos, radii = self._pack(group, [p.files for p in parts], fill=0.6, largest=0.45)
        for part, (x, y), r in zip(parts, pos, radii, strict=True):
            part.x, part.y, part.r = float(x + group.x), float(y + group.y), float(r)
        return parts

    def _pack(
        self, group: Group, items: list[list[str]], fill: float = _FILL, largest: float = 0.3
    ) -> tuple[np.ndarray, np.ndarray]:
        """Positions (relative to the disc's centre) and radii of ``items`` (each a list of files) laid out by
        their edges inside ``group``'s disc, covering ``fill`` of it, none wider than ``largest`` of it."""
        position = {f: i for i, files in enumerate(items) for f in files}
        summed: dict[tuple[int, int], float] = {}
        for (a, b), weight in self._file_edges.items():
            i, j = position.get(a), position.get(b)
            if i is not None and j is not None and i != j:
                key = (min(i, j), max(i, j))
                summed[key] = summed.get(key, 0.0) + weight
        pairs = sorted(summed)
        ranks = np.array([sum(self._pagerank[f] for f in files) for files in items])
        # Radii by PageRank, scaled so the discs cover a fixed share of the disc whatever their number.
        relative = 0.5 + np.sqrt(ranks / (ranks.max() or 1.0))
        radii = relative * group.r * math.sqrt(fill / float((relative**2).sum()))
        radii = np.minimum(radii, group.r * largest)
        pos = _seeded_layout(len(items), pairs, [math.log1p(summed[p]) for p in pairs])
        pos = pos - pos.mean(axis=0)
        extent = np.hypot(pos[:, 0], pos[:, 1]).max()
        pos = pos * (0.7 * group.r / extent if extent > 0 else 0.0)
        # Each step costs n^2: few steps for many files keeps a click quick (the dots may then touch).
        steps = 80 if len(items) <= 300 else 20
        pos = _relax(pos, radii, pad=radii.min() * 0.3, container=group.r, steps=steps)
        return _contain(pos, radii, group.r), radii

    def _drawn(self, expanded: Iterable[str]) -> tuple[list[Group], list[tuple[Group, Any]], dict[str, str]]:
        """What ``expanded`` shows: the groups and opened parts (each after the group it is in), the files
        drawn as dots with their group, and what each file's edges end at (its dot, or the disc holding it)."""
        wanted = set(expanded)
        groups: list[Group] = []
        dots: list[tuple[Group, Any]] = []
        end_of: dict[str, str] = {}

        def show(group: Group) -> None:
            groups.append(group)
            if group.key not in wanted:
                end_of.update(dict.fromkeys(group.files, group.key))
                return
            parts = self.parts_of(group.key)
            for part in parts:
                show(part)
            if not parts:
                for row in self.files_of(group.key).itertuples(index=False):
                    dots.append((group, row))
                    end_of[row.file] = row.file

        for group in self.groups:
            show(group)
        return groups, dots, end_of

    def _view_edges(self, end_of: dict[str, str]) -> list[tuple[str, str, float]]:
        """Edges between what is drawn, each file's end being ``end_of[file]`` (its dot or its disc)."""
        out: dict[tuple[str, str], float] = {}
        for (a, b), weight in self._file_edges.items():
            end_a, end_b = end_of[a], end_of[b]
            if end_a != end_b:
                key = (end_a, end_b) if end_a < end_b else (end_b, end_a)
                out[key] = out.get(key, 0.0) + weight
        return sorted(((a, b, w) for (a, b), w in out.items()), key=lambda e: (-e[2], e[0], e[1]))

    def _dot_names(self, dots: list[tuple[Group, Any]]) -> dict[str, str]:
        """The name drawn for each dot: as much of its path as tells it from the other dots of its group."""
        by_group: dict[str, list[str]] = {}
        for group, row in dots:
            by_group.setdefault(group.key, []).append(row.file)
        return {f: name for files in by_group.values() for f, name in distinct_names(files).items()}

    def view(self, expanded: Iterable[str] = ()) -> dict[str, list[Any]]:
        """What the widget draws: ``groups`` (opened parts included), the ``nodes`` (files) of expanded groups
        that open into files, and ``edges``."""
        wanted = list(expanded)
        groups, dots, end_of = self._drawn(wanted)
        names = self._dot_names(dots)
        shown = [
            {
                "key": g.key,
                "label": g.label,
                "short": g.short,
                "kind": g.kind,
                "files": len(g.files),
                "pagerank": g.pagerank,
                "colour": g.colour,
                "x": round(g.x, 2),
                "y": round(g.y, 2),
                "r": round(g.r, 2),
                "expanded": g.key in wanted,
                "parent": g.parent,
            }
            for g in groups
        ]
        nodes = [
            {
                "id": row.file,
                "group": g.key,
                "short": names[row.file],
                "pagerank": float(row.pagerank),
                "x": round(float(row.x), 2),
                "y": round(float(row.y), 2),
                "r": round(float(row.r), 3),
            }
            for g, row in dots
        ]
        edges = [[a, b, round(w, 4)] for a, b, w in self._view_edges(end_of)]
        return {"groups": shown, "nodes": nodes, "edges": edges}

    def labels(self, expanded: Iterable[str] = ()) -> list[Label]:
        """Labels placed for the first zoom: groups by PageRank, then the files of expanded groups."""
        wanted = list(expanded)
        groups, dots, _ = self._drawn(wanted)
        names = self._dot_names(dots)
        by_rank = sorted(groups, key=lambda g: (-g.pagerank, g.key))
        marks = [Mark(g.key, g.short, g.x, g.y, g.r, g.key, g.key not in wanted) for g in by_rank]
        files = [
            (row.pagerank, Mark(row.file, names[row.file], row.x, row.y, row.r, g.key)) for g, row in dots
        ]
        files.sort(key=lambda f: (-f[0], f[1].key))
        discs = [(g.key, g.x, g.y, g.r) for g in self.groups]
        return place_labels(marks + [m for _, m in files], discs, bounds=(self.width, self.height))
