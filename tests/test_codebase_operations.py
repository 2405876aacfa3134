"""Every structural operation on a fixture: documented columns, sorting, and answers that can be checked."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pandas as pd
import pytest
import rustworkx
from IPython.core.interactiveshell import InteractiveShell

from aries_kernel.codebase import Codebase
from aries_kernel.codebase.progress import Progress
from aries_kernel.codebase.ranking import _hits_iterated, _weight

FIXTURES = Path(__file__).parent / "fixtures" / "codebase"


@pytest.fixture(scope="module")
def codebase(tmp_path_factory: pytest.TempPathFactory) -> Codebase:
    root = tmp_path_factory.mktemp("ops") / "repo"
    shutil.copytree(FIXTURES / "pyproj", root)
    shutil.copytree(FIXTURES / "jsmix", root / "web")
    codebase = Codebase(root)
    codebase.index_in_background()
    codebase.wait_ready()
    return codebase


def columns(frame: pd.DataFrame) -> list[str]:
    assert isinstance(frame, pd.DataFrame)
    return list(frame.columns)


def test_search(codebase: Codebase) -> None:
    found = codebase.search("Engine")
    assert columns(found) == ["file", "role", "line", "kind", "name", "snippet", "score"]
    assert found.iloc[0][["file", "kind", "name"]].tolist() == ["app/core.py", "class", "Engine"]
    assert found["score"].is_monotonic_decreasing
    assert "content" in set(found["kind"])
    assert len(codebase.search("Engine", limit=2)) == 2


def test_top_files_and_hits(codebase: Codebase) -> None:
    top = codebase.top_files(5)
    assert columns(top) == ["file", "role", "pagerank", "in_degree", "out_degree", "symbols", "loc"]
    assert len(top) == 5 and top["pagerank"].is_monotonic_decreasing
    hits = codebase.hits(50)
    assert columns(hits) == ["file", "role", "hub", "authority", "hits_role", "score"]
    assert set(hits["hits_role"]) <= {"hub", "authority", "both"}
    assert hits["score"].is_monotonic_decreasing
    # main.py and cli.py only import: hubs; helpers/text.py is imported by many and imports little: an authority.
    roles = dict(zip(hits["file"], hits["hits_role"], strict=False))
    assert roles["main.py"] == roles["app/cli.py"] == "hub" and roles["app/helpers/text.py"] == "authority"


def test_fixed_round_hits() -> None:
    """The HITS fallback for graphs where rustworkx does not converge: rustworkx's own scores where it does, and
    zeros for a graph without edges (numpy counts no values into an int64 array, which dividing in place
    refused)."""
    g = rustworkx.PyDiGraph()
    g.add_nodes_from(["a.py", "b.py", "c.py", "d.py"])
    g.add_edges_from(
        [(0, 1, ("import", 1.0, False)), (0, 2, ("import", 2.0, False)), (3, 1, ("import", 1.0, False))]
    )
    hubs, authorities = _hits_iterated(g)
    want_hubs, want_authorities = rustworkx.hits(g, weight_fn=_weight, tol=1e-12)
    assert hubs == pytest.approx({g[n]: s for n, s in want_hubs.items()}, abs=1e-6)
    assert authorities == pytest.approx({g[n]: s for n, s in want_authorities.items()}, abs=1e-6)
    assert max(authorities, key=authorities.__getitem__) == "c.py"

    edgeless = rustworkx.PyDiGraph()
    edgeless.add_nodes_from(["a.py", "b.py"])
    assert _hits_iterated(edgeless) == ({"a.py": 0.0, "b.py": 0.0}, {"a.py": 0.0, "b.py": 0.0})


def test_communities_are_connected_and_labelled(codebase: Codebase) -> None:
    frame = codebase.communities(roles="all")
    assert columns(frame) == ["file", "role", "community", "label", "size", "pagerank"]
    assert set(frame["file"]) == set(codebase.list_files()["file"])
    edges = codebase.edges()
    # the Python package and the JS tree share no edge, so no community mixes them
    for _, group in frame.groupby("community"):
        assert group["file"].str.startswith("web/").nunique() == 1
        assert group["label"].nunique() == 1 and group["label"].iloc[0]
        members = set(group["file"])
        if len(members) > 1:  # connected: every member touches another member
            inner = edges[edges["source"].isin(members) & edges["target"].isin(members)]
            assert members == set(inner["source"]) | set(inner["target"])
    assert frame["community"].is_monotonic_increasing


def test_find_symbol(codebase: Codebase) -> None:
    found = codebase.find_symbol("fmt")
    assert columns(found) == [
        "name", "kind", "file", "line", "end_line", "signature", "parent", "cell", "cell_id", "score"
    ]  # fmt: skip
    assert found["cell"].isna().all() and set(found["cell_id"]) == {""}  # no notebook here
    assert set(found["file"]) == {"app/helpers/text.py", "web/plugins/format.mjs"}
    method = codebase.find_symbol("Engine.greet")
    assert method[["kind", "file", "line", "signature"]].values.tolist() == [
        ["method", "app/core.py", 11, "def greet(self, user: User) -> str"]
    ]
    assert codebase.find_symbol("ENGINE")["name"].tolist() == ["Engine"]


def test_dependents_and_dependencies(codebase: Codebase) -> None:
    dependents = codebase.show_dependents("app/models.py", depth=2)
    assert columns(dependents) == ["file", "distance", "kinds", "weight", "via"]
    first = dependents[dependents["distance"] == 1]
    assert {"app/core.py", "app/helpers/text.py"} <= set(first["file"])
    assert "import" in first.set_index("file").loc["app/core.py", "kinds"]
    assert (dependents["distance"] == 2).any()
    deps = codebase.show_dependencies("web/index.js")
    assert set(deps["file"]) >= {"web/lib/server.js", "web/lib/log.js", "web/plugins/loader.mjs"}
    # a unique suffix or an absolute path names the same file
    assert codebase.show_dependencies(codebase.root / "web" / "index.js").equals(deps)


def test_edges(codebase: Codebase) -> None:
    edges = codebase.edges()
    assert columns(edges) == ["source", "target", "kind", "weight", "type_only"]
    assert set(edges["kind"]) == {"import", "reference"}
    assert edges["weight"].is_monotonic_decreasing
    assert set(codebase.edges("import")["kind"]) == {"import"}


def test_get_context_merges_nearby_ranges(codebase: Codebase) -> None:
    text = codebase.get_context("app/core.py", [4, 6], window=1)
    assert isinstance(text, str)
    assert text.splitlines() == [
        "app/core.py",
        " 3 | from app.models import User",
        " 4 | from .helpers import fmt",
        " 5 | ",
        " 6 | ",
        " 7 | class Engine:",
    ]
    two = codebase.get_context("app/core.py", [1, 12], window=0)
    assert two.splitlines() == ["app/core.py", " 1 | import os", "...", "12 |         return fmt(user.name)"]
    with pytest.raises(ValueError, match="outside"):
        codebase.get_context("app/core.py", 99)


def test_cluster_by_file(codebase: Codebase) -> None:
    clusters = codebase.cluster_by_file(codebase.search("fmt"))
    assert columns(clusters) == ["file", "matches", "lines", "names", "score", "snippet"]
    assert clusters["score"].is_monotonic_decreasing
    assert clusters["matches"].sum() == len(codebase.search("fmt"))


def test_listings_and_stats(codebase: Codebase) -> None:
    files = codebase.list_files()
    assert columns(files) == ["file", "role", "language", "loc", "symbols", "status"]
    assert (
        dict(zip(files["file"], files["language"], strict=False))["web/components/Widget.jsx"] == "javascript"
    )
    stats = dict(zip(codebase.stats()["metric"], codebase.stats()["value"], strict=False))
    assert stats["files"] == len(files) == stats["files (python)"] + stats["files (javascript)"]
    assert stats["edges (import)"] == len(codebase.edges("import"))
    assert stats["skipped"] == 0
    assert columns(codebase.skipped()) == ["file", "status", "reason"]
    table = codebase.symbol_table()
    assert (
        columns(table)
        == "name kind file line end_line signature language shape_hash exact_hash parent".split()
    )
    functions = table[table["kind"].isin(["function", "class", "method"])]
    assert (functions["shape_hash"].str.len() > 0).all() and (functions["exact_hash"].str.len() > 0).all()
    assert codebase.language_of("web/esm/app.mjs") == "javascript"
    assert codebase.parse(b"def f(): pass\n", "python").root_node.type == "module"
    assert codebase.source("main.py").startswith("from app import Engine")


def test_status_and_reprs(codebase: Codebase) -> None:
    assert codebase.status().startswith("ready: ")
    assert "codebase" in codebase._repr_markdown_()
    assert repr(codebase).startswith("<Codebase ")


def test_progress_text_and_notebook_modes(monkeypatch: pytest.MonkeyPatch) -> None:
    stream = io.StringIO()
    progress = Progress("indexing demo", stream=stream, rich=False)
    progress.update(340, 1200, force=True)
    progress.close("ready: 1200 files")
    assert stream.getvalue().splitlines() == ["indexing demo: 340/1,200 files (28%)", "ready: 1200 files"]
    shell = InteractiveShell.instance()
    monkeypatch.setattr(shell.display_formatter, "active_types", ["text/plain", "text/html"])
    shown: list[object] = []
    monkeypatch.setattr(shell.display_pub, "publish", lambda data, **kw: shown.append((data, kw)))
    progress = Progress("indexing demo", rich=True)
    progress.update(1, 4, force=True)
    progress.update(3, 4, force=True)
    assert len(shown) == 2
    first, second = shown
    assert "<progress" in first[0]["text/html"] and "1/4" in first[0]["text/plain"]
    assert second[1].get("update") is True and "3/4" in second[0]["text/plain"]


def test_typescript_symbols(tmp_path: Path) -> None:
    root = tmp_path / "ts"
    shutil.copytree(FIXTURES / "tsproj", root)
    table = Codebase(root).symbol_table()
    kinds = {(r.name, r.file): (r.kind, r.parent, r.line) for r in table.itertuples()}
    assert kinds[("Props", "src/types.ts")] == ("interface", "", 1)
    assert kinds[("settings", "src/config/index.ts")] == ("variable", "", 5)
    assert kinds[("shout", "src/lib/util.ts")] == ("function", "", 1)  # an arrow function in a const
    assert kinds[("render", "src/components/Input.tsx")] == ("method", "Input", 4)
    assert kinds[("App", "src/app.tsx")] == ("function", "", 4)  # export default function
    assert kinds[("Input", "src/components/Input.tsx")][0] == "class"
    # a const declared inside a function body is local, not a symbol of the file
    assert ("util", "src/lib/helpers.ts") not in kinds
    signatures = dict(zip(table["name"], table["signature"], strict=False))
    assert signatures["helper"] == "function helper(value: string): string"
    assert signatures["shout"] == "export const shout = (value: string): string => value.toUpperCase();"
    assert signatures["Props"] == "interface Props"


def test_communities_list_source_first_and_apart_from_tests_and_fixtures(tmp_path: Path) -> None:
    # A product package, its tests (which import it and are named in sentences) and a fixture project.
    root = tmp_path / "repo"
    files = {
        "vault/__init__.py": "",
        "vault/store.py": "def store_note(note):\n    return note\n\ndef load_note(name):\n    return name\n",
        "vault/search.py": "from vault.store import load_note\n\ndef search_notes(q):\n    return load_note(q)\n",
        "vault/rank.py": "from vault.search import search_notes\n\ndef rank_notes(q):\n    return search_notes(q)\n",
        "tests/test_vault.py": (
            "from vault.store import store_note\nfrom vault.search import search_notes\n"
            "from vault.rank import rank_notes\n\n"
            "def test_notes_are_read_back():\n    assert store_note(1)\n\n"
            "def test_all_notes_are_found():\n    assert search_notes(1) and rank_notes(1)\n"
        ),
        "tests/test_more.py": "from tests.test_vault import test_notes_are_read_back\n",
    }
    for i in range(4):  # a project of its own under the tests' fixtures
        nxt = (i + 1) % 4
        files[f"tests/fixtures/shop/m{i}.py"] = (
            f"from m{nxt} import order_{nxt}\n\ndef order_{i}():\n    pass\n"
        )
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    codebase = Codebase(root)
    codebase.wait_ready()

    default = codebase.communities()
    assert set(default["role"]) == {"source"}, "the default lists the source files, as the rankings do"
    assert set(default["file"]) == {f for f in files if f.startswith("vault/")}
    everything = codebase.communities(roles="all")
    assert set(everything["file"]) == set(files)
    assert everything["community"].is_monotonic_increasing
    source = everything[everything["role"] == "source"]
    assert everything["role"].iloc[: len(source)].eq("source").all(), "source communities come first"
    # No community mixes the source with tests or fixtures, and the fixture project is one of the others.
    for _, group in everything.groupby("community"):
        assert group["role"].eq("source").all() or not group["role"].eq("source").any(), group
    fixtures = everything[everything["role"] == "fixture"]
    assert fixtures["community"].nunique() == 1 and fixtures["community"].min() > source["community"].max()
    # Labels come from folders and identifiers, without filler words.
    for label in everything["label"]:
        words = set(label.replace(",", " ").replace(":", " ").split())
        assert not words & {"are", "all", "read", "test"}, label
    assert default["label"].iloc[0].startswith("vault: ")
