"""Notebooks in the code graph: a repository's ``.ipynb`` files indexed as the Python of their code cells.

Imports resolve as a script's in the notebook's folder and are checked edge by edge; definitions are found with
their cell; notebooks have a role of their own, so the default rankings do not change when they are added; a
notebook that cannot be read is a ``skipped()`` row with its reason and the rest of the index completes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from traitlets.config import Config

from aries_kernel.codebase import Codebase
from aries_kernel.codebase.core import CodebaseError
from tests.fs_support import write


def notebook(*cells: dict[str, Any], language: str = "python") -> str:
    metadata = {"kernelspec": {"name": language, "language": language, "display_name": language}}
    return json.dumps(
        {"nbformat": 4, "nbformat_minor": 5, "metadata": metadata, "cells": list(cells)}, indent=1
    )


def code(cell_id: str, source: str, outputs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "cell_type": "code",
        "id": cell_id,
        "metadata": {},
        "execution_count": 1,
        "source": source.splitlines(keepends=True),
        "outputs": outputs or [],
    }


def markdown(cell_id: str, source: str) -> dict[str, Any]:
    return {"cell_type": "markdown", "id": cell_id, "metadata": {}, "source": source}


# What a cell printed: outputs are never parsed, so this import is no edge.
_OUTPUT = {
    "output_type": "stream",
    "name": "stdout",
    "text": ["import pkg.plot\n", "def from_output(): pass\n"],
}

PLAIN = {
    "pkg/__init__.py": "",
    "pkg/metrics.py": "def score(values):\n    return sum(values) / len(values)\n",
    "pkg/io.py": "def load(path):\n    return open(path).read()\n",
    "pkg/plot.py": "def draw(values):\n    return values\n",
    "pkg/report.py": "from pkg.metrics import score\nfrom pkg.io import load\n\n\ndef build(path):\n"
    "    return score(load(path))\n",
    "app.py": "from pkg.report import build\nfrom pkg import plot\n\nbuild('x')\n",
    "analysis/helpers.py": "def smooth(values):\n    return values\n",
}
NOTEBOOKS = {
    "analysis/sales.ipynb": notebook(
        markdown("intro", "# Sales\nimport pkg.plot  # prose, not code"),
        code("imports", "%matplotlib inline\nfrom pkg.metrics import score\nimport pkg.io as io\n"),
        code("shell", "!pip install nothing\nimport helpers\nfiles = !ls\n", [_OUTPUT]),
        code("bash", "%%bash\nimport not_python\necho hi\n"),
        code(
            "summary",
            "def summarize(frame):\n    return score(helpers.smooth(frame))\n\n\nclass Report:\n"
            "    def total(self):\n        return 1\n",
        ),
        code("help", "summarize?\n"),
    ),
    "explore.ipynb": notebook(code("only", "from pkg import metrics\nmetrics.score([1])\n")),
}


def _index(root: Path, persist: bool = False) -> Codebase:
    codebase = Codebase(root, config=Config({"AriesCodebase": {"workers": 1, "persist": persist}}))
    codebase.wait_ready()
    return codebase


def _imports(codebase: Codebase) -> set[tuple[str, str]]:
    edges = codebase.edges("import")
    return set(zip(edges["source"], edges["target"], strict=True))


def _skipped(codebase: Codebase) -> dict[str, str]:
    table = codebase.skipped()
    return dict(zip(table["file"], table["reason"], strict=True))


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("notebooks") / "repo"
    for rel, text in {**PLAIN, **NOTEBOOKS}.items():
        write(root, rel, text)
    write(root, "analysis/.ipynb_checkpoints/sales-checkpoint.ipynb", NOTEBOOKS["analysis/sales.ipynb"])
    return root


@pytest.fixture(scope="module")
def codebase(repo: Path) -> Codebase:
    return _index(repo)


def test_notebook_imports_resolve_edge_by_edge(codebase: Codebase) -> None:
    assert _imports(codebase) == {
        ("analysis/sales.ipynb", "pkg/metrics.py"),  # from pkg.metrics import score
        ("analysis/sales.ipynb", "pkg/io.py"),  # import pkg.io as io
        ("analysis/sales.ipynb", "analysis/helpers.py"),  # import helpers: the notebook's own folder
        ("explore.ipynb", "pkg/metrics.py"),  # from pkg import metrics: the submodule
        ("pkg/report.py", "pkg/metrics.py"),
        ("pkg/report.py", "pkg/io.py"),
        ("app.py", "pkg/report.py"),
        ("app.py", "pkg/plot.py"),
    }  # no pkg/plot.py from the markdown or the output, nothing from the %%bash cell
    assert set(codebase.show_dependents("pkg/metrics.py")["file"]) == {
        "analysis/sales.ipynb",
        "explore.ipynb",
        "pkg/report.py",
    }
    assert set(codebase.show_dependents("analysis/helpers.py")["file"]) == {"analysis/sales.ipynb"}
    dependencies = codebase.show_dependencies("analysis/sales.ipynb")
    assert set(dependencies["file"]) == {"pkg/metrics.py", "pkg/io.py", "analysis/helpers.py"}
    edges = codebase.edges()
    # Nothing can import a notebook: no edge points at one, whatever names it defines.
    assert not any(target.endswith(".ipynb") for target in edges["target"])


def test_definitions_in_cells_are_found_with_their_cell(codebase: Codebase) -> None:
    found = codebase.find_symbol("summarize")
    assert found[["file", "line", "cell", "cell_id", "kind"]].values.tolist() == [
        ["analysis/sales.ipynb", 10, 4, "summary", "function"]
    ]
    method = codebase.find_symbol("Report.total").iloc[0]
    assert (method["cell"], method["cell_id"], method["kind"]) == (4, "summary", "method")
    assert codebase.find_symbol("from_output").empty  # outputs are never parsed
    plain = codebase.find_symbol("smooth").iloc[0]
    assert plain["file"] == "analysis/helpers.py" and plain["cell_id"] == "" and plain["cell"] is pd_na()
    hits = codebase.search("summarize", roles="notebook")
    best = hits.iloc[0]
    assert (best["file"], best["kind"], best["name"], best["line"]) == (
        "analysis/sales.ipynb",
        "function",
        "summarize",
        10,
    )
    assert codebase.search("summarize").empty  # roles="source" by default
    named = codebase.search("sales", roles="notebook").iloc[0]
    assert (named["file"], named["kind"], named["name"]) == ("analysis/sales.ipynb", "notebook", "sales")


def pd_na() -> Any:
    import pandas as pd

    return pd.NA


def test_notebooks_have_their_role_and_leave_the_default_rankings_alone(
    codebase: Codebase, tmp_path: Path
) -> None:
    files = codebase.list_files()
    roles = dict(zip(files["file"], files["role"], strict=True))
    assert {rel for rel, role in roles.items() if role == "notebook"} == set(NOTEBOOKS)
    assert set(files[files["file"].isin(NOTEBOOKS)]["status"]) == {"indexed"}
    # Jupyter's own copies are not the notebook: one row for the folder, nothing indexed in it.
    assert _skipped(codebase) == {
        "analysis/.ipynb_checkpoints": "folder skipped: notebook checkpoints (.ipynb_checkpoints)"
    }
    for rel, text in PLAIN.items():
        write(tmp_path / "plain", rel, text)
    plain = _index(tmp_path / "plain")
    assert codebase.top_files()["file"].tolist() == plain.top_files()["file"].tolist()
    assert codebase.hits()["file"].tolist() == plain.hits()["file"].tolist()
    assert set(codebase.top_files(roles="notebook")["file"]) == set(NOTEBOOKS)
    assert codebase.search("score")["file"].tolist() == plain.search("score")["file"].tolist()
    assert codebase.communities().equals(plain.communities()), "the default lists source files only"
    columns = ["file", "community", "label", "pagerank"]  # size counts the notebooks that join
    communities = codebase.communities(roles="all")
    assert communities[~communities["file"].isin(NOTEBOOKS)][columns].values.tolist() == (
        plain.communities(roles="all")[columns].values.tolist()
    )
    community = dict(zip(communities["file"], communities["community"], strict=True))
    for rel in NOTEBOOKS:  # each joins the community of a file it imports
        assert community[rel] in {community[t] for t in codebase.show_dependencies(rel)["file"]}


def test_get_context_shows_cells_not_json(codebase: Codebase) -> None:
    whole = codebase.get_context("analysis/sales.ipynb")
    assert '"cell_type"' not in whole and "outputs" not in whole and "Sales" not in whole
    assert "# cell 1 (id imports)" in whole and "# cell 4 (id summary)" in whole
    assert "1 | %matplotlib inline" in whole and "6 | files = !ls" in whole and "get_ipython" not in whole
    assert " 9 | echo hi" in whole  # the %%bash cell as typed too, though its body is not indexed
    around = codebase.get_context("analysis/sales.ipynb", lines=11, window=1)
    assert around.splitlines() == [
        "analysis/sales.ipynb",
        "   # cell 4 (id summary)",
        "10 | def summarize(frame):",
        "11 |     return score(helpers.smooth(frame))",
        "12 | ",
    ]


def test_judgment_operations_read_the_notebook_python(codebase: Codebase) -> None:
    copy = "def summarize(frame):\n    return score(helpers.smooth(frame))\n"
    found = codebase.detect_duplication(copy)
    assert ("analysis/sales.ipynb", "summarize", "exact") in set(
        zip(found["file"], found["name"], found["kind"], strict=True)
    )
    similar = codebase.find_similar_patterns(copy, mode="shape")
    assert "analysis/sales.ipynb" in set(similar["file"])


BAD = {
    "bad/not_json.ipynb": "{ this is not json",
    "bad/deep.ipynb": "[" * 100_000 + "]" * 100_000,
    "bad/julia.ipynb": notebook(code("j", "function f(x)\n    x\nend\n"), language="julia"),
    "bad/huge_cell.ipynb": notebook(code("big", "x = 1\n" * 200_000)),  # 1.2 MB of code in one cell
    "bad/v3.ipynb": json.dumps({"nbformat": 3, "worksheets": [], "cells": []}),
    "bad/syntax.ipynb": notebook(
        code("ok", "def fine():\n    pass\n"), code("oops", "x = 1\ndef broken(:\n")
    ),
}


def test_bad_notebooks_are_skipped_with_their_reason(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    for rel, text in {**PLAIN, **NOTEBOOKS, **BAD}.items():
        write(root, rel, text)
    sparse = write(root, "bad/sparse.ipynb", "")
    os.truncate(sparse, 200 << 20)  # 200 MB that take no disk
    os.mkfifo(root / "bad/pipe.ipynb")
    write(tmp_path / "outside", "secret.ipynb", NOTEBOOKS["explore.ipynb"])
    os.symlink(tmp_path / "outside/secret.ipynb", root / "bad/link.ipynb")
    codebase = _index(root)
    skipped = _skipped(codebase)
    assert skipped["bad/not_json.ipynb"].startswith("not a readable notebook: Expecting property name")
    assert (
        skipped["bad/deep.ipynb"]
        == "not a readable notebook: brackets nested 100000 deep, over the limit of 64"
    )
    assert (
        skipped["bad/julia.ipynb"] == "a julia notebook (its kernelspec); only Python notebooks are indexed"
    )
    assert skipped["bad/huge_cell.ipynb"] == (
        "too large: its code cells hold 1,200,000 bytes, over the limit of 1,048,576"
    )
    assert skipped["bad/v3.ipynb"].startswith("not a readable notebook: nbformat 3 is not read")
    assert skipped["bad/sparse.ipynb"] == "too large: 209,715,200 bytes, over the limit of 33,554,432"
    assert skipped["bad/pipe.ipynb"] == "not a regular file (FIFO); not read"
    assert skipped["bad/link.ipynb"].startswith("symlink to outside the repository")
    assert skipped["bad/syntax.ipynb"] == (
        "syntax error in cell 1 (id oops) at line 2, column 12: indexed what parsed"
    )
    # The index completed: the good notebooks and the partial one are there, with their edges.
    assert codebase.find_symbol("fine")["cell_id"].tolist() == ["ok"]
    assert ("analysis/sales.ipynb", "pkg/metrics.py") in _imports(codebase)
    assert set(codebase.list_files(roles="notebook")["file"]) == {*NOTEBOOKS, "bad/syntax.ipynb"}


def test_a_warm_start_keeps_notebook_records_and_a_reindex_reads_an_edit(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    for rel, text in {**PLAIN, **NOTEBOOKS}.items():
        write(root, rel, text)
    cold = _index(root, persist=True)
    before = cold.find_symbol("summarize")
    warm = _index(root, persist=True)
    assert warm.last_run["reused"] == len(PLAIN) + len(NOTEBOOKS)
    assert warm.find_symbol("summarize").equals(before)
    assert _imports(warm) == _imports(cold)
    assert "# cell 4 (id summary)" in warm.get_context("analysis/sales.ipynb", lines=10)
    edited = notebook(
        code("imports", "from pkg.plot import draw\n"),
        markdown("note", "now plotting"),
        code("summary", "def summarize(frame):\n    return draw(frame)\n"),
    )
    write(root, "analysis/sales.ipynb", edited)
    with pytest.raises(
        CodebaseError, match="the notebook changed since it was indexed. Run codebase.reindex"
    ):
        warm.get_context(
            "analysis/sales.ipynb", lines=2
        )  # never converted in the kernel unless indexed as is
    changes = warm.reindex()
    assert changes[["file", "change"]].values.tolist() == [["analysis/sales.ipynb", "modified"]]
    assert warm.find_symbol("summarize")[["line", "cell", "cell_id"]].values.tolist() == [[2, 2, "summary"]]
    assert warm.find_symbol("Report").empty
    assert set(warm.show_dependencies("analysis/sales.ipynb")["file"]) == {"pkg/plot.py"}
    assert "analysis/sales.ipynb" not in set(warm.show_dependents("pkg/metrics.py")["file"])
    again = _index(root, persist=True)  # the edit's record was stored, cells included
    assert again.find_symbol("summarize")[["line", "cell", "cell_id"]].values.tolist() == [[2, 2, "summary"]]
