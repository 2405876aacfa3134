"""Notebooks read as Python (aries_kernel.codebase.notebooks): IPython syntax masked, lines kept, cells mapped."""

from __future__ import annotations

import ast
import json
from typing import Any

import pytest

from aries_kernel.codebase.notebooks import notebook_source


def notebook(*cells: dict[str, Any], **metadata: Any) -> str:
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": metadata, "cells": list(cells)})


def code(cell_id: str, source: str | list[str]) -> dict[str, Any]:
    return {"cell_type": "code", "id": cell_id, "source": source, "outputs": [], "execution_count": None}


def test_code_cells_become_python_with_their_lines_and_ids() -> None:
    text = notebook(
        {"cell_type": "markdown", "id": "intro", "source": "# Sales\nimport nothing_from_markdown"},
        code("imports", ["%matplotlib inline\n", "import pandas as pd\n", "from pkg.metrics import score"]),
        code("shell", "%%bash\nls\necho hi"),
        code("load", "files = !ls\ndef load(path):\n    return pd.read_csv(path)\nload?"),
        code("timed", "%%time\nclass Model:\n    pass"),
        code("empty", ""),
        kernelspec={"language": "python", "name": "aries"},
    )
    source = notebook_source(text)
    ast.parse(source.text)  # all of it is Python now
    lines = source.text.splitlines()
    assert lines[1:3] == ["import pandas as pd", "from pkg.metrics import score"]
    assert "nothing_from_markdown" not in source.text and "echo" not in source.text
    assert [(c.index, c.cell_id, c.first_line, c.last_line) for c in source.cells] == [
        (1, "imports", 1, 3),
        (2, "shell", 4, 6),
        (3, "load", 7, 10),
        (4, "timed", 11, 13),
    ]
    assert lines[7] == "def load(path):"  # line 8: the cell's second line
    cell = source.cell_at(8)
    assert cell is not None and cell.cell_id == "load"
    assert source.cell_at(12) is not None and source.cell_at(12).cell_id == "timed"  # type: ignore[union-attr]
    assert source.cell_at(99) is None and source.language == "python"


def test_magics_inside_blocks_keep_the_block_valid() -> None:
    source = notebook_source(notebook(code("loop", "for i in range(3):\n    !echo {i}\n    total = i\n")))
    tree = ast.parse(source.text)
    assert isinstance(tree.body[0], ast.For) and len(tree.body[0].body) == 2


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("{not json", "Expecting property name"),
        ("[1, 2, 3]", "not a Jupyter notebook"),
        (json.dumps({"cells": "nope"}), "not a Jupyter notebook"),
        (json.dumps({"nbformat": 3, "cells": []}), "nbformat 3"),
        (json.dumps({"nbformat": 4, "cells": [{"cell_type": "code", "source": 7}]}), "cell 0: its source"),
        ("[" * 100_000 + "]" * 100_000, "nested"),
    ],
)
def test_what_is_not_a_notebook_says_why(text: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        notebook_source(text)


def test_the_cells_as_typed_line_for_line_with_the_python() -> None:
    source = notebook_source(
        notebook(code("a", "%matplotlib inline\nx = 1\n"), code("b", "%%bash\necho hi"), code("c", "df?"))
    )
    assert source.typed.splitlines() == ["%matplotlib inline", "x = 1", "%%bash", "echo hi", "df?"]
    assert len(source.text.splitlines()) == 5 and "get_ipython()" in source.text


def test_a_notebook_of_another_language_has_no_python() -> None:
    source = notebook_source(
        notebook(code("j", "x?\nfunction f(x)\n    x\nend\n"), kernelspec={"language": "Julia"})
    )
    assert (source.text, source.cells, source.language) == ("", (), "julia")
