"""The community graph view on a generated repository of 2,000 files in 20 folders.

The Python side: one disc per community sized by PageRank, weighted edges between communities, no two discs
overlapping, no two labels overlapping, a community expanded into its files inside its disc, the static SVG.
The script side: ``widgets/static/graph.js`` runs in Debian's Chromium on a page that embeds it with a stand-in
for anywidget's model, draws the graph, names what the pointer is over, and asks to expand what is clicked.
"""

from __future__ import annotations

import json
import math
import posixpath
import random
from collections import defaultdict
from itertools import combinations
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from aries_kernel.widgets.graph_layout import (
    REST_LABEL,
    SPLIT_ABOVE,
    GraphLayout,
    Label,
    Mark,
    distinct_names,
    place_labels,
    short_label,
)
from aries_kernel.widgets.graph_svg import graph_svg

from aries_kernel.codebase import Codebase

SCRIPT = Path(__file__).resolve().parents[1] / "widgets" / "static" / "graph.js"
FOLDERS, PER_FOLDER = 20, 100


def generate_repository(root: Path) -> None:
    """``FOLDERS`` packages of ``PER_FOLDER`` modules: each imports earlier modules of its own package, and one in
    ten also a module of the next package, so every package is a community linked to its neighbours."""
    rng = random.Random(7)
    for p in range(FOLDERS):
        package = root / f"pkg{p:02d}"
        package.mkdir(parents=True)
        (package / "__init__.py").write_text("")
        for m in range(PER_FOLDER - 1):
            earlier = {rng.randrange(m) for _ in range(3)} if m else set()
            lines = [f"from pkg{p:02d}.m{q:03d} import f{q:03d}" for q in sorted(earlier)]
            if rng.random() < 0.1:
                q = rng.randrange(PER_FOLDER - 1)
                lines.append(f"from pkg{(p + 1) % FOLDERS:02d}.m{q:03d} import f{q:03d}")
            lines.append(f"def f{m:03d}():\n    return {m}\n")
            (package / f"m{m:03d}.py").write_text("\n".join(lines))


@pytest.fixture(scope="module")
def codebase(tmp_path_factory: pytest.TempPathFactory) -> Codebase:
    root = tmp_path_factory.mktemp("graph") / "repo"
    generate_repository(root)
    codebase = Codebase(root)
    codebase.wait_ready()
    return codebase


@pytest.fixture(scope="module")
def layout(codebase: Codebase) -> GraphLayout:
    return GraphLayout.from_codebase(codebase)


def boxes_overlap(labels: list[Label]) -> list[tuple[str, str]]:
    return [(a.key, b.key) for a, b in combinations(labels, 2) if a.overlaps(b)]


def test_one_disc_per_community_sized_by_pagerank(codebase: Codebase, layout: GraphLayout) -> None:
    members = codebase.communities()
    assert len(members) == FOLDERS * PER_FOLDER
    sizes = members.groupby("community").size()
    communities = {f"c{c}" for c, n in sizes.items() if n >= 2}
    assert len(communities) >= FOLDERS  # the generator's packages come out as communities
    groups = layout.group_frame()
    assert communities <= set(groups["key"]), "every community of two or more files has its own disc"
    assert groups["files"].sum() == len(members), "every file is in exactly one disc"
    assert sorted(layout.group_of) == sorted(members["file"])
    rank = dict(zip(members["file"], members["pagerank"], strict=True))
    for group in layout.groups:
        assert group.pagerank == pytest.approx(sum(rank[f] for f in group.files))
        if group.kind == "community":
            community = int(group.key[1:])
            assert set(group.files) == set(members.loc[members["community"] == community, "file"])
    by_rank = groups.sort_values("pagerank")
    assert by_rank["r"].is_monotonic_increasing, "a disc's radius grows with its PageRank"
    assert by_rank["r"].iloc[-1] > 1.2 * by_rank["r"].iloc[0]


def test_edges_between_communities_carry_the_summed_weight(codebase: Codebase, layout: GraphLayout) -> None:
    expected: dict[tuple[str, str], float] = defaultdict(float)
    for row in codebase.edges().itertuples():
        a, b = layout.group_of[row.source], layout.group_of[row.target]
        if a != b:
            expected[min(a, b), max(a, b)] += row.weight
    edges = layout.group_edges()
    got = {(r.source, r.target): r.weight for r in edges.itertuples()}
    assert got.keys() == expected.keys()
    assert all(got[k] == pytest.approx(expected[k]) for k in got)
    # The generated packages form a ring, pkg00 -> pkg01 -> ... -> pkg19 -> pkg00.
    assert len(edges) >= FOLDERS


def test_no_two_discs_overlap_and_all_fit_the_view(layout: GraphLayout) -> None:
    for a, b in combinations(layout.groups, 2):
        assert math.hypot(a.x - b.x, a.y - b.y) >= a.r + b.r, (a.key, b.key)
    for g in layout.groups:
        assert 0 <= g.x - g.r and g.x + g.r <= layout.width and 0 <= g.y - g.r and g.y + g.r <= layout.height


def test_labels_do_not_overlap_and_the_main_communities_are_named(layout: GraphLayout) -> None:
    labels = layout.labels()
    assert boxes_overlap(labels) == []
    placed = {label.key for label in labels}
    largest = sorted(layout.groups, key=lambda g: -g.pagerank)[:10]
    assert {g.key for g in largest} <= placed
    assert len(placed) >= 0.8 * len(layout.groups)
    assert all(0 <= b.x and b.x + b.width <= layout.width and 0 <= b.y <= layout.height for b in labels)
    # Drawn text is short and whole: a folder's last part and whole names, never a path cut mid-word.
    texts = {label.key: label.text for label in labels}
    assert texts[largest[0].key].startswith("pkg") and "/" not in texts[largest[0].key]


def opened_to_files(layout: GraphLayout, keys: list[str]) -> list[str]:
    """``keys`` and every part they open into, down to the files."""
    out = []
    for key in keys:
        out += [key, *opened_to_files(layout, [p.key for p in layout.parts_of(key)])]
    return out


def test_labels_of_expanded_files_do_not_overlap_either(layout: GraphLayout) -> None:
    opened = opened_to_files(layout, [g.key for g in layout.groups[:3]])
    labels = layout.labels(opened)
    assert boxes_overlap(labels) == []
    files = {label.key for label in labels if label.key in layout.group_of}
    assert files, "some files of the expanded communities are named"
    assert {label.owner for label in labels if label.key in files} <= set(opened)


def test_expand_gives_a_communitys_files_inside_its_disc(codebase: Codebase, layout: GraphLayout) -> None:
    members = codebase.communities()
    community = int(layout.groups[0].key[1:])
    files = layout.expand(community)
    assert set(files["file"]) == set(members.loc[members["community"] == community, "file"])
    disc = layout.group(layout.key_of(community))
    reach = ((files["x"] - disc.x) ** 2 + (files["y"] - disc.y) ** 2) ** 0.5 + files["r"]
    assert (reach <= disc.r + 1e-6).all(), "every file's dot lies inside its community's disc"
    spread = ((files["x"] - disc.x) ** 2 + (files["y"] - disc.y) ** 2) ** 0.5
    assert spread.max() > 0.3 * disc.r, "the files are spread over the disc, not piled in its centre"
    by_rank = files.sort_values("pagerank")
    assert by_rank["r"].is_monotonic_increasing, "a file's dot grows with its PageRank"
    view = layout.view(opened_to_files(layout, [disc.key]))
    assert {n["id"] for n in view["nodes"]} == set(files["file"])
    inner = [e for e in view["edges"] if e[0] in disc.files and e[1] in disc.files]
    outer = [e for e in view["edges"] if (e[0] in disc.files) != (e[1] in disc.files)]
    assert inner and outer, "the expanded files keep their edges, inside the community and out of it"
    assert all(disc.key not in e[:2] for e in view["edges"]), "an expanded community is drawn as its files"


def test_the_same_graph_is_laid_out_the_same_way(codebase: Codebase, layout: GraphLayout) -> None:
    again = GraphLayout.from_codebase(codebase)
    pd.testing.assert_frame_equal(again.group_frame(), layout.group_frame())


def test_many_small_communities_are_aggregated_by_folder() -> None:
    rows, edges = [], []
    for c in range(60):
        files = [f"area{c % 5}/part{c}/f{i}.py" for i in range(3)]
        rows += [(f, c, f"part{c}: x", 0.001 * (60 - c) + 0.0001 * i) for i, f in enumerate(files)]
        edges += [(files[0], files[1], "import", 1.0, False), (files[1], files[2], "import", 1.0, False)]
    members = pd.DataFrame(rows, columns=["file", "community", "label", "pagerank"])
    frame = pd.DataFrame(edges, columns=["source", "target", "kind", "weight", "type_only"])
    layout = GraphLayout(members, frame, max_groups=12)
    kinds = layout.group_frame()["kind"].value_counts()
    assert kinds["community"] == 12
    assert kinds["folder"] <= 3, "the rest are folded into a few folder discs"
    assert layout.group_frame()["files"].sum() == len(members)
    folders = [g for g in layout.groups if g.kind == "folder"]
    assert all(g.label.endswith("loose files") for g in folders)
    assert layout.expand(folders[0].key)["file"].tolist() == folders[0].files


def test_greedy_labels_skip_what_would_cover_a_more_important_one() -> None:
    marks = [
        Mark("big", "a long label for the big disc", 100, 100, 30, "big"),
        Mark("same-spot", "another long label here", 100, 100, 30, "same-spot"),
    ]
    labels = place_labels(marks)
    assert [label.key for label in labels] == ["big", "same-spot"]
    assert boxes_overlap(labels) == []  # the second moved above its disc
    crowded = [Mark(f"m{i}", "xx", 100, 100, 20, f"m{i}") for i in range(6)]
    assert len(place_labels(crowded)) == 4, "four spots around one point, then labels are skipped"


def test_short_labels_keep_whole_names() -> None:
    assert (
        short_label("aries_kernel/codebase + tests: file, name, types")
        == "codebase + tests: file, name, types"
    )
    assert short_label("src/a + src/b: user, app") == "a + b: user, app"
    assert short_label("lib/one: alpha, beta, gamma, delta", limit=20) == "one: alpha, beta"


def shop_layout() -> GraphLayout:
    """A 96-file community in three folders (each with its ``__init__.py``), a small one, and tests and fixtures
    that import them; as ``codebase.communities(roles="all")`` and ``codebase.edges()`` give them."""
    rows, edges = [], []
    for number, folder in enumerate(("billing", "web", "reports")):
        files = [f"shop/{folder}/__init__.py"] + [f"shop/{folder}/m{i:02d}.py" for i in range(31)]
        rows += [
            (f, "source", 0, "shop: order, price", 0.003 - 0.001 * number + 1e-6 * i)
            for i, f in enumerate(files)
        ]
        edges += [(a, b, "import", 1.0, False) for a, b in zip(files, files[1:], strict=False)]
        edges.append((files[0], "shop/billing/__init__.py", "import", 1.0, False))
    small = [f"cli/c{i}.py" for i in range(5)]
    rows += [(f, "source", 1, "cli: command", 0.001) for f in small]
    edges += [(a, b, "import", 1.0, False) for a, b in zip(small, small[1:], strict=False)]
    others = [(f"tests/test_{i}.py", "test", 2) for i in range(6)] + [
        (f"tests/fixtures/app/a{i}.py", "fixture", 3) for i in range(4)
    ]
    rows += [(f, role, c, "tests: order", 0.0005) for f, role, c in others]
    edges += [(f, "shop/billing/m00.py", "import", 1.0, False) for f, _, _ in others]
    members = pd.DataFrame(rows, columns=["file", "role", "community", "label", "pagerank"])
    return GraphLayout(
        members, pd.DataFrame(edges, columns=["source", "target", "kind", "weight", "type_only"])
    )


def test_tests_and_fixtures_are_one_group_apart_from_the_source() -> None:
    layout = shop_layout()
    groups = layout.group_frame()
    assert list(groups["key"]) == ["c0", "c1", "rest"], "the source communities, then the rest"
    rest = layout.group("rest")
    assert rest.label.startswith(REST_LABEL) and rest.kind == "rest"
    assert sorted(rest.files) == sorted(f for f in layout.group_of if f.startswith("tests/"))
    assert not any(f.startswith("tests/") for g in layout.groups if g.key != "rest" for f in g.files)
    assert ("c0", "rest") in {(r.source, r.target) for r in layout.group_edges().itertuples()}
    everything = GraphLayout(layout.members, layout.edges, roles="all")
    assert "rest" not in set(everything.group_frame()["key"]), "all roles shown: no group is folded"


def test_a_large_community_opens_into_its_folders_then_its_files() -> None:
    layout = shop_layout()
    shop = layout.group("c0")
    assert len(shop.files) > SPLIT_ABOVE
    view = layout.view(["c0"])
    parts = [g for g in view["groups"] if g["parent"] == "c0"]
    assert [p["short"] for p in parts] == ["billing/", "web/", "reports/"], "by PageRank, named by folder"
    assert all(p["kind"] == "part" and p["files"] == 32 for p in parts)
    assert view["nodes"] == [], "folders first, not 96 dots"
    for part in parts:  # inside the community's disc, apart from each other
        assert math.hypot(part["x"] - shop.x, part["y"] - shop.y) + part["r"] <= shop.r + 0.02  # rounded
    for a, b in combinations(parts, 2):
        assert math.hypot(a["x"] - b["x"], a["y"] - b["y"]) >= a["r"] + b["r"] - 0.02
    web = next(p["key"] for p in parts if p["short"] == "web/")
    # Edges end at what is drawn: the parts, and the other groups.
    ends = {end for edge in view["edges"] for end in edge[:2]}
    assert {p["key"] for p in parts} <= ends and "c0" not in ends
    opened = layout.view(["c0", web])
    dots = {n["id"]: n for n in opened["nodes"]}
    assert set(dots) == set(layout.group(web).files)
    assert dots["shop/web/__init__.py"]["short"] == "web/__init__.py", "a bare __init__.py says nothing"
    assert dots["shop/web/m03.py"]["short"] == "m03.py"
    labels = layout.labels(["c0", web])
    assert boxes_overlap(labels) == []
    assert {label.text for label in labels if label.key in dots} <= {n["short"] for n in dots.values()}


def flat_layout() -> GraphLayout:
    """A 93-file community whose files all sit in ``shop/``: three chains of 30 (orders, prices, users), each
    file named after its chain, and three files that import nothing of it."""
    rows, edges, names = [], [], {}
    for number, topic in enumerate(("order", "price", "user")):
        files = [f"shop/{topic}_{i:02d}.py" for i in range(30)]
        rows += [
            (f, "source", 0, "shop: order, price", 0.003 - 0.001 * number + 1e-6 * i)
            for i, f in enumerate(files)
        ]
        edges += [(a, b, "import", 1.0, False) for a, b in combinations(files, 2)]
        names.update({f: [f"load_{topic}", f"{topic}_total", "get_helper"] for f in files})
    edges.append(("shop/order_00.py", "shop/price_00.py", "import", 1.0, False))
    edges.append(("shop/price_00.py", "shop/user_00.py", "import", 1.0, False))
    rows += [(f"shop/stray_{i}.py", "source", 0, "shop: order, price", 0.0001) for i in range(3)]
    return GraphLayout(
        pd.DataFrame(rows, columns=["file", "role", "community", "label", "pagerank"]),
        pd.DataFrame(edges, columns=["source", "target", "kind", "weight", "type_only"]),
        names_of=lambda rel: names.get(rel, []),
    )


def test_a_large_community_in_one_folder_opens_into_its_sub_communities_then_its_files() -> None:
    layout = flat_layout()
    shop = layout.group("c0")
    assert len(shop.files) > SPLIT_ABOVE and {posixpath.dirname(f) for f in shop.files} == {"shop"}
    view = layout.view(["c0"])
    subs = [g for g in view["groups"] if g["parent"] == "c0"]
    assert view["nodes"] == [], "sub-communities first, not 93 dots"
    assert [s["kind"] for s in subs] == ["sub"] * 4
    # Labelled as communities are: the folder and the commonest words of the names, no stop words.
    assert [s["short"] for s in subs] == ["shop: order, load, total", "shop: price, load, total",
                                         "shop: user, load, total", "3 loose files"]  # fmt: skip
    assert [s["files"] for s in subs] == [30, 30, 30, 3]
    assert all("helper" not in s["label"] and s["label"].endswith(f"files of {shop.label}") for s in subs)
    for sub in subs:  # inside the community's disc, apart from each other
        assert math.hypot(sub["x"] - shop.x, sub["y"] - shop.y) + sub["r"] <= shop.r + 0.02
    for a, b in combinations(subs, 2):
        assert math.hypot(a["x"] - b["x"], a["y"] - b["y"]) >= a["r"] + b["r"] - 0.02
    prices = subs[1]["key"]
    assert {end for edge in view["edges"] for end in edge[:2]} == {s["key"] for s in subs[:3]}
    opened = layout.view(["c0", prices])
    assert {n["id"] for n in opened["nodes"]} == {f"shop/price_{i:02d}.py" for i in range(30)}
    assert {n["short"] for n in opened["nodes"]} == {f"price_{i:02d}.py" for i in range(30)}
    assert layout.parts_of(prices) == [], "30 files open into their files"


def test_a_real_community_in_one_folder_opens_into_sub_communities(layout: GraphLayout) -> None:
    # Each package of the generated repository is one community of 99 modules in one folder.
    big = layout.groups[0]
    assert len(big.files) > SPLIT_ABOVE and len({posixpath.dirname(f) for f in big.files}) == 1
    subs = layout.parts_of(big.key)
    assert len(subs) >= 2 and all(s.kind == "sub" for s in subs)
    assert sorted(f for s in subs for f in s.files) == sorted(big.files)
    assert all(s.short.startswith(posixpath.dirname(big.files[0]) + ": f") for s in subs if len(s.files) > 1)
    assert all(len(s.files) <= SPLIT_ABOVE for s in subs)


def test_names_carry_enough_of_the_path_to_tell_files_apart() -> None:
    names = distinct_names(
        [
            "shop/billing/__init__.py",
            "shop/web/__init__.py",
            "a/common.py",
            "b/common.py",
            "x/y/run.py",
            "z/run.py",
        ]
    )
    assert names == {
        "shop/billing/__init__.py": "billing/__init__.py",
        "shop/web/__init__.py": "web/__init__.py",
        "a/common.py": "a/common.py",
        "b/common.py": "b/common.py",
        "x/y/run.py": "y/run.py",
        "z/run.py": "z/run.py",
    }
    assert distinct_names(["pkg/only.py", "pkg/__init__.py"]) == {
        "pkg/only.py": "only.py",
        "pkg/__init__.py": "pkg/__init__.py",
    }


def test_static_svg_draws_every_disc_edge_and_label(layout: GraphLayout) -> None:
    svg = graph_svg(layout)
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert svg.count("<circle") == len(layout.groups)
    assert svg.count("<line") == len(layout.group_edges())
    assert svg.count("<text") == len(layout.labels())
    assert f"<title>{layout.groups[0].label}" in svg, "the full name is there on hover"
    subs = layout.parts_of(layout.groups[0].key)
    opened = graph_svg(layout, [layout.groups[0].key])
    assert opened.count("<circle") == len(layout.groups) + len(subs), (
        "99 files in one folder: sub-communities"
    )
    opened = graph_svg(layout, opened_to_files(layout, [layout.groups[0].key]))
    assert opened.count("<circle") == len(layout.groups) + len(subs) + len(layout.groups[0].files)


def test_the_widget_expands_collapses_and_keeps_a_static_image(codebase: Codebase) -> None:
    from aries_kernel.widgets import CommunityGraph

    graph = CommunityGraph(codebase)
    assert graph.expanded == [] and graph.nodes == [], "2,000 files start as communities only"
    assert len(graph.groups) == len(graph.graph_layout.groups)
    community = int(graph.graph_layout.groups[2].key[1:])
    files = graph.expand(community)
    assert graph.expanded == [f"c{community}"]
    subs = {g["key"] for g in graph.groups if g["parent"] == f"c{community}"}
    assert graph.nodes == [] and len(subs) >= 2, "99 files in one folder open into sub-communities"
    for key in sorted(subs):
        graph.expand(key)
    assert {n["id"] for n in graph.nodes} == set(files["file"])
    graph.collapse(community)
    assert graph.expanded == [] and graph.nodes == []
    data, _ = graph._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in data
    assert data["text/html"] == graph.svg() == graph.static().data
    assert (
        data["text/plain"].splitlines()[0]
        == f"Community graph: {FOLDERS * PER_FOLDER} files in {len(graph.groups)} groups"
    )
    graph.close()


# The script in a browser ------------------------------------------------------------------------------------

PAGE = """<!doctype html><html><body style="margin:0">
<div id="host" style="width:980px"></div>
<script type="text/plain" id="esm">{script}</script>
<script type="module">
// A stand-in for anywidget's model: traits in a dict, change listeners, and a record of what the view saved.
const state = {state};
const listeners = {{}};
window.saved = [];
const model = {{
  get: (name) => state[name],
  set: (name, value) => {{ state[name] = value; }},
  save_changes: () => window.saved.push(JSON.parse(JSON.stringify(state))),
  on: (event, fn) => (listeners[event] = listeners[event] || []).push(fn),
  off: () => {{}},
  send: () => {{}},
}};
// What the kernel does after an expand request: new traits, then change events.
window.kernelSets = (traits) => {{
  Object.assign(state, traits);
  for (const name of Object.keys(traits)) for (const fn of listeners[`change:${{name}}`] || []) fn();
}};
const source = document.getElementById("esm").textContent;
const module = await import(URL.createObjectURL(new Blob([source], {{ type: "text/javascript" }})));
module.default.render({{ model, el: document.getElementById("host") }});
window.ready = true;
</script></body></html>"""


def graph_page(layout: GraphLayout, expanded: list[str]) -> str:
    state = dict(layout.view(expanded), expanded=expanded, width=layout.width, height=layout.height)
    return PAGE.format(script=SCRIPT.read_text(encoding="utf-8"), state=json.dumps(state))


@pytest.fixture
def page(tmp_path: Path) -> Any:
    from playwright import sync_api

    from tests.browser_support import CHROMIUM, CHROMIUM_ARGS

    # Like the browser test, fail rather than skip: .ci/run installs chromium, and a skip would hide the script.
    assert CHROMIUM.exists(), f"{CHROMIUM} is not installed (apt-get install -y chromium)"
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1000, "height": 720})
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            yield page
            assert errors == [], errors
        finally:
            browser.close()


def to_screen(page: Any, x: float, y: float) -> tuple[float, float]:
    """Page coordinates of layout point (x, y) under the canvas's current zoom and pan."""
    view = json.loads(page.eval_on_selector("canvas", "c => c.dataset.view"))
    box = page.locator("canvas").bounding_box()
    return box["x"] + x * view["k"] + view["tx"], box["y"] + y * view["k"] + view["ty"]


def pixel(page: Any, x: float, y: float) -> list[int]:
    """The canvas's RGB at page point (x, y)."""
    return page.eval_on_selector(
        "canvas",
        """(c, [x, y]) => {
            const r = c.getBoundingClientRect(), d = window.devicePixelRatio || 1;
            return Array.from(c.getContext("2d").getImageData((x - r.left) * d, (y - r.top) * d, 1, 1).data.slice(0, 3));
        }""",
        [x, y],
    )


def hex_rgb(colour: str) -> list[int]:
    return [int(colour[i : i + 2], 16) for i in (1, 3, 5)]


def test_the_script_draws_names_on_hover_and_asks_to_expand_on_click(
    page: Any, layout: GraphLayout, tmp_path: Path
) -> None:
    html = tmp_path / "graph.html"
    html.write_text(graph_page(layout, []), encoding="utf-8")
    page.goto(html.as_uri())
    page.wait_for_function("window.ready === true")
    fitted = json.loads(page.eval_on_selector("canvas", "c => c.dataset.view"))

    # It draws: each disc's centre has its community's colour, and labels that do not overlap.
    for group in layout.groups[:5]:  # off-centre, where no label inside the disc is drawn
        inside = to_screen(page, group.x + group.r / 2, group.y + group.r / 2)
        assert pixel(page, *inside) == hex_rgb(group.colour), group.key
    drawn = json.loads(page.eval_on_selector("canvas", "c => c.dataset.labels"))
    boxes = [Label(d["id"], d["text"], d["x"], d["y"], d["w"], d["h"]) for d in drawn]
    assert len(boxes) >= 0.8 * len(layout.groups) and boxes_overlap(boxes) == []
    page.screenshot(path=str(tmp_path / "collapsed.png"))

    # Hovering a disc names it in full.
    target = layout.groups[1]
    page.mouse.move(*to_screen(page, target.x, target.y))
    tip = page.locator(".aries-graph-tip")
    assert tip.is_visible()
    assert target.label in tip.inner_text() and "click to expand" in tip.inner_text()

    # A click asks the kernel to expand it, through the synced `expanded` trait.
    page.mouse.click(*to_screen(page, target.x, target.y))
    saved = page.evaluate("window.saved")
    assert saved and saved[-1]["expanded"] == [target.key]

    # The kernel's answer (99 files in one folder: the community's sub-communities) is drawn, zoomed onto it.
    view = layout.view([target.key])
    page.evaluate("traits => window.kernelSets(traits)", {**view, "expanded": [target.key]})
    focused = json.loads(page.eval_on_selector("canvas", "c => c.dataset.view"))
    assert focused["k"] > 1.5 * fitted["k"]
    box = page.locator("canvas").bounding_box()
    centre = to_screen(page, target.x, target.y)
    assert centre == pytest.approx((box["x"] + box["width"] / 2, box["y"] + box["height"] / 2), abs=0.5)
    subs = layout.parts_of(target.key)
    assert len(subs) >= 2 and view["nodes"] == []
    sub = subs[0]
    page.mouse.move(*to_screen(page, sub.x, sub.y))
    assert sub.label in tip.inner_text() and "sub-community" in tip.inner_text()
    page.screenshot(path=str(tmp_path / "sub-communities.png"))

    # A click on a sub-community opens it into its files, named.
    page.mouse.click(*to_screen(page, sub.x, sub.y))
    assert page.evaluate("window.saved")[-1]["expanded"] == [target.key, sub.key]
    opened = [target.key, sub.key]
    view = layout.view(opened)
    page.evaluate("traits => window.kernelSets(traits)", {**view, "expanded": opened})
    files = pd.DataFrame(view["nodes"])
    assert set(files["id"]) == set(sub.files)
    named = {d["id"] for d in json.loads(page.eval_on_selector("canvas", "c => c.dataset.labels"))}
    assert len(named & set(sub.files)) >= len(sub.files) // 2, (
        "zoomed onto a sub-community, its files are named"
    )
    top = files.sort_values("pagerank").iloc[-1]
    page.mouse.move(*to_screen(page, top["x"], top["y"]))
    assert top["id"] in tip.inner_text()
    assert f"{len(sub.files)} shown" in page.inner_text(".aries-graph")
    page.screenshot(path=str(tmp_path / "expanded.png"))

    # Zoom by the wheel around the pointer, and pan by a drag.
    before = json.loads(page.eval_on_selector("canvas", "c => c.dataset.view"))
    page.mouse.wheel(0, -400)
    zoomed = json.loads(page.eval_on_selector("canvas", "c => c.dataset.view"))
    assert zoomed["k"] > 1.5 * before["k"]
    page.mouse.move(500, 400)
    page.mouse.down()
    page.mouse.move(400, 350, steps=5)
    page.mouse.up()
    panned = json.loads(page.eval_on_selector("canvas", "c => c.dataset.view"))
    assert panned["tx"] == pytest.approx(zoomed["tx"] - 100) and panned["ty"] == pytest.approx(
        zoomed["ty"] - 50
    )
    assert len(page.evaluate("window.saved")) == 2, "a drag is not a click"
    page.click("text=Fit")
    assert json.loads(page.eval_on_selector("canvas", "c => c.dataset.view")) == pytest.approx(fitted)

    # A click on the expanded community's disc (between its files) folds it back.
    rim = [
        (target.x + 0.95 * target.r * math.cos(a / 10), target.y + 0.95 * target.r * math.sin(a / 10))
        for a in range(63)
    ]
    empty = next((x, y) for x, y in rim if all(math.hypot(x - p.x, y - p.y) > p.r + 8 for p in subs))
    page.mouse.click(*to_screen(page, *empty))
    assert page.evaluate("window.saved")[-1]["expanded"] == []


def test_the_script_opens_folders_inside_a_community_and_closes_the_hover_box_on_click(
    page: Any, tmp_path: Path
) -> None:
    layout = shop_layout()
    html = tmp_path / "shop.html"
    html.write_text(graph_page(layout, []), encoding="utf-8")
    page.goto(html.as_uri())
    page.wait_for_function("window.ready === true")
    shop = layout.group("c0")
    tip = page.locator(".aries-graph-tip")
    page.mouse.move(*to_screen(page, shop.x, shop.y))
    assert tip.is_visible() and shop.label in tip.inner_text()
    page.mouse.click(*to_screen(page, shop.x, shop.y))
    assert not tip.is_visible(), "the hover box closes on a click"
    assert page.evaluate("window.saved")[-1]["expanded"] == ["c0"]

    # The kernel answers with the community's folders, drawn inside it; a click on one opens it, not the rest.
    page.evaluate("traits => window.kernelSets(traits)", {**layout.view(["c0"]), "expanded": ["c0"]})
    web = next(p for p in layout.parts_of("c0") if p.short == "web/")
    page.mouse.move(*to_screen(page, web.x, web.y))
    assert "web/" in tip.inner_text() and "folder" in tip.inner_text()
    summary = f"{len(layout.group_of)} files · {len(layout.groups)} groups · 0 shown"
    assert summary in page.inner_text(".aries-graph"), "a part's files are counted once, with its group's"
    page.screenshot(path=str(tmp_path / "folders.png"))
    page.mouse.click(*to_screen(page, web.x, web.y))
    assert not tip.is_visible()
    assert page.evaluate("window.saved")[-1]["expanded"] == ["c0", web.key]
    page.evaluate(
        "traits => window.kernelSets(traits)", {**layout.view(["c0", web.key]), "expanded": ["c0", web.key]}
    )
    named = {d["text"] for d in json.loads(page.eval_on_selector("canvas", "c => c.dataset.labels"))}
    assert "web/__init__.py" in named and "__init__.py" not in named, "zoomed in, files are told apart"
    page.screenshot(path=str(tmp_path / "files.png"))

    # A click on the community outside its folders folds it, and what was opened inside it.
    page.click("text=Fit")
    rim = [
        (shop.x + 0.97 * shop.r * math.cos(a / 10), shop.y + 0.97 * shop.r * math.sin(a / 10))
        for a in range(63)
    ]
    empty = next(
        (x, y) for x, y in rim if all(math.hypot(x - p.x, y - p.y) > p.r + 4 for p in layout.parts_of("c0"))
    )
    page.mouse.click(*to_screen(page, *empty))
    assert page.evaluate("window.saved")[-1]["expanded"] == []
