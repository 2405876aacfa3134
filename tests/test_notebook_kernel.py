"""The notebook as the agent's context, in a real Aries kernel against the loopback model server: which notebook
and cell, the section each prompt carries, ``%aries fix`` and its offered cell, the Notebook tool, and
``c.AriesAgent.notebook_context``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

from tests.kernel_harness import run_cell, start_kernel, stop_kernel
from tests.loopback import Reply, ScriptedModelServer

pytestmark = pytest.mark.kernel

SECRET = "sk-ant-api03-" + "Z" * 40
BUILD = (
    "import pandas as pd\n"
    "sales = pd.DataFrame({'region': ['north', 'south'], 'revenue_q1': [1.5, 2.5], 'revenue_q2': [3.0, 4.0]})\n"
    "print('built', len(sales), 'rows')"
)
FAIL = "total = sales['revenue_q3'].sum()"
HOSTILE = (
    "import time\n"
    "class Slow:\n"
    "    def __repr__(self):\n"
    "        time.sleep(60)\n"
    "        return 'slow'\n"
    "slow = Slow()"
)


@pytest.fixture
def notebook_kernel(small_repo: Path, server: ScriptedModelServer) -> Iterator[Any]:
    notebook = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("# Quarterly sales", id="cell-title"),
            nbformat.v4.new_code_cell(BUILD, id="cell-build"),
            nbformat.v4.new_code_cell(FAIL, id="cell-fail"),
            nbformat.v4.new_code_cell("sales.plot(x='region')", id="cell-plot"),
        ]
    )
    nbformat.write(notebook, small_repo / "analysis.ipynb")
    env = server.kernel_env(JPY_SESSION_NAME=str(small_repo / "analysis.ipynb"))
    km, kc = start_kernel(small_repo, env=env)
    try:
        yield kc
    finally:
        stop_kernel(km, kc)


def request_text(body: dict[str, Any]) -> str:
    return json.dumps(body, ensure_ascii=False)


def text_of(body: dict[str, Any]) -> str:
    return "\n".join(user_texts(body))


def user_texts(body: dict[str, Any]) -> list[str]:
    texts = []
    for message in body["messages"]:
        if message["role"] == "user":
            content = message["content"]
            blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
            texts.extend(block["text"] for block in blocks if block.get("type") == "text")
    return texts


def test_fix_sends_the_failing_cell_traceback_and_columns_not_the_secret_and_offers_the_new_cell(
    notebook_kernel: Any, server: ScriptedModelServer
) -> None:
    kc = notebook_kernel
    assert run_cell(kc, BUILD, cell_id="cell-build").stdout == "built 2 rows\n"
    assert run_cell(kc, f"api_key = {SECRET!r}\nconfig = {{'anthropic': {SECRET!r}}}").error is None
    assert run_cell(kc, HOSTILE).error is None
    failed = run_cell(kc, FAIL, cell_id="cell-fail")
    assert failed.error is not None and failed.error[:2] == ("KeyError", "'revenue_q3'")

    assert "%aries fix" in (run_cell(kc, "%aries help").result or "")
    status = run_cell(kc, "%aries status", cell_id="cell-status")
    assert "Notebook: analysis.ipynb" in (status.result or ""), status
    assert "Running cell: id cell-status" in (status.result or "")
    assert "the last error: KeyError: 'revenue_q3'" in (status.result or "")

    fixed = "total = sales['revenue_q2'].sum()"
    server.script(
        Reply(tool_calls=[("Notebook", {"variable": "sales"})]),
        Reply(tool_calls=[("CellEdit", {"cell": "In[4]", "new_source": fixed})]),
        Reply(text="There is no revenue_q3 column; the cell below sums revenue_q2."),
    )
    cell = run_cell(kc, "%aries fix", timeout=180, stdin_reply="y", cell_id="cell-fix")
    assert cell.error is None, cell.error

    first = server.requests[0].body
    text = request_text(first)
    assert FAIL in text  # the failing cell
    assert "Traceback (most recent call last)" in text and "KeyError: 'revenue_q3'" in text
    assert "Cell In[4], line 1" in text  # the cell's frame, named as IPython names it
    assert "'revenue_q1' float64 [1.5, 2.5]" in text and "'revenue_q2' float64" in text  # the columns
    assert "Notebook: analysis.ipynb" in text and "cell id cell-fail" in text
    assert "output: built 2 rows" in text  # what a cell printed
    assert "# Quarterly sales" in text and "sales.plot(x='region')" in text  # the file's other cells
    assert "__main__.Slow object (repr not called)" in text
    assert SECRET not in text and "Z" * 40 not in text  # neither the variable nor the cell that set it
    assert "api_key: str (value withheld" in text and "config: dict (value withheld" in text
    assert "CellEdit" in text  # named as the way to offer the fix

    tool_result = request_text(server.requests[1].body)
    assert "sales: pandas.DataFrame 2 rows × 3 columns" in tool_result
    assert any("CellEdit In[4]: this code in a new cell below" in prompt for prompt in cell.prompts)
    (offered,) = [item for item in cell.payload if item.get("source") == "set_next_input"]
    assert offered["text"] == fixed and offered["replace"] is False
    assert "in a new cell below the %aries cell" in request_text(server.requests[2].body)


def test_the_section_follows_the_setting_and_repeats_unchanged_for_the_cached_prefix(
    notebook_kernel: Any, server: ScriptedModelServer
) -> None:
    kc = notebook_kernel
    run_cell(kc, BUILD, cell_id="cell-build")
    server.script(Reply(text="one"), Reply(text="two"))
    run_cell(kc, "%aries first", cell_id="cell-ask-1")
    run_cell(kc, "%aries second", cell_id="cell-ask-2")  # another cell, nothing else changed
    first, second = (request.body for request in server.requests[:2])
    assert user_texts(first)[0].endswith("</notebook_context>\n\nfirst")
    assert "'revenue_q1' float64 [1.5, 2.5]" in user_texts(first)[
        0
    ] and "Running cell id: cell-ask-1" in text_of(first)
    assert (
        user_texts(second)[0] == user_texts(first)[0]
    )  # the earlier prompt as it was sent: the prefix holds
    assert user_texts(second)[-1] == (
        "<notebook_context>\nUnchanged since the previous prompt.\n</notebook_context>\n\nsecond"
    )

    assert run_cell(kc, "%aries config notebook_context=names").error is None
    server.script(Reply(tool_calls=[("Notebook", {"variable": "sales"})]), Reply(text="names"))
    run_cell(kc, "%aries what is sales")
    named = user_texts(server.requests[2].body)[-1]
    assert (
        "sales (pandas.DataFrame)" in named
        and "Cells run in this kernel: In[1] (cell id cell-build)" in named
    )
    assert "revenue_q1" not in named and "built 2 rows" not in named
    assert "sales: pandas.DataFrame" in request_text(server.requests[3].body)
    assert "revenue_q1" not in json.dumps(server.requests[3].body["messages"][-1])

    assert run_cell(kc, "%aries config notebook_context=off").error is None
    server.script(Reply(text="off"))
    run_cell(kc, "%aries hello")
    assert user_texts(server.requests[4].body)[-1] == "hello"
    run_cell(kc, FAIL)
    refused = run_cell(kc, "%aries fix")
    assert refused.status == "error" and "c.AriesAgent.notebook_context is 'off'" in refused.stderr
    assert len(server.requests) == 5  # nothing was sent
