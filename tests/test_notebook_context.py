"""The notebook section's bounds and the notebook file's bad input, built from a recorded shell in process (the
kernel side is in tests/test_notebook_kernel.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from aries_kernel.models.tokens import estimate_text_tokens
from aries_kernel.notebook.context import CONTEXT_TOKENS, notebook_answer, section
from aries_kernel.notebook.executed import CellLog


class Info:
    def __init__(self, source: str, cell_id: str | None = None) -> None:
        self.raw_cell, self.cell_id, self.store_history = source, cell_id, True


class Result:
    def __init__(self, count: int, error: BaseException | None = None) -> None:
        self.execution_count, self.result = count, None
        self.error_in_exec, self.error_before_exec = error, None


class Shell:
    def __init__(self, namespace: dict[str, Any], session: str = "") -> None:
        self.user_ns = {"__session__": session, **namespace}
        self.user_ns_hidden: dict[str, Any] = {}
        self.execution_count = 1


class Context:
    def __init__(self, shell: Shell, root: Path) -> None:
        self.shell, self.root, self.log = shell, root, CellLog(shell)

    def built(self, name: str) -> Any:
        return self.log if name == "cells" else None

    def run(self, source: str, error: BaseException | None = None, cell_id: str | None = None) -> None:
        self.shell.execution_count += 1
        self.log.pre_run_cell(Info(source, cell_id))
        self.log.post_run_cell(Result(self.shell.execution_count - 1, error))


def test_the_section_stays_within_its_budget_whatever_the_namespace_and_cells(tmp_path: Path) -> None:
    wide = pd.DataFrame(np.zeros((2, 10_000)))
    namespace = {f"v{index}": "x" * 10_000 for index in range(300)} | {"wide": wide}
    context = Context(Shell(namespace), tmp_path)
    context.run("x = 1\n" * 200_000)  # a cell of 1.2 MB
    try:
        {}["missing" * 10_000]
    except KeyError as exc:
        context.run("wide['missing']", exc)
    text = section(context.shell, context)
    assert estimate_text_tokens(text) <= CONTEXT_TOKENS
    assert "Last error, in In[2]: KeyError: 'missingmissing" in text  # its message cut to 2,000 characters
    assert "wide: pandas.DataFrame 2 rows × 10,000 columns" in text
    assert "Variables (301;" in text and "more" in text  # the rest by name, then counted
    assert len(context.log.runs[0].source) == 100_000  # the record keeps a cell's first 100,000 characters


def test_a_notebook_outside_the_root_or_not_json_is_named_with_why_it_was_not_read(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    outside = tmp_path / "elsewhere.ipynb"
    outside.write_text("{}")
    context = Context(Shell({"a": 1}, session=str(outside)), root)
    text = section(context.shell, context)
    assert f"Notebook: {outside} (Notebook {outside} is not read:" in text

    broken = root / "broken.ipynb"
    broken.write_text('{"cells": [' * 100_000)
    context = Context(Shell({"a": 1}, session=str(broken)), root)
    assert "Notebook: broken.ipynb (Notebook" in section(context.shell, context)
    assert "nests brackets 200000 deep, over the limit of 64" in section(context.shell, context)

    fifo = root / "fifo.ipynb"
    os.mkfifo(fifo)
    context = Context(Shell({"a": 1}, session=str(fifo)), root)
    assert "Notebook: fifo.ipynb (Notebook" in section(context.shell, context)  # refused, not waited on


def test_the_setting_off_and_names_keep_values_out(tmp_path: Path) -> None:
    context = Context(Shell({"sales": pd.DataFrame({"revenue_q1": [1.5]})}), tmp_path)
    context.run("print(sales)", cell_id="c1")
    assert section(context.shell, context, "off") == ""
    named = section(context.shell, context, "names")
    assert "sales (pandas.DataFrame)" in named and "revenue_q1" not in named and "print" not in named
    assert notebook_answer(context.shell, context, "off", variable="sales").startswith(
        "c.AriesAgent.notebook_context is 'off'"
    )
    assert notebook_answer(context.shell, context, "names", variable="sales") == "sales: pandas.DataFrame"
    assert "'revenue_q1' float64 [1.5]" in notebook_answer(context.shell, context, "full", variable="sales")
    assert notebook_answer(context.shell, context, "full", variable="sale").endswith("Close: sales.")
