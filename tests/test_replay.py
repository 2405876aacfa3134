"""``%aries replay`` and ``%aries hidden`` in real Aries kernels.

The fixture notebook's cell 2 uses ``raw``, which only a deleted cell defined: the test kernel has it because the
"user" ran that cell (the test runs its code in the kernel), and the notebook file is written without it. Other
cells fail, print something else than the saved output, or loop forever (bounded by a small per-cell timeout).
"""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.kernel_harness import CellResult, run_cell, start_kernel, stop_kernel


def code(cell_id: str, source: str, printed: str | None = None, count: int | None = 1) -> dict[str, Any]:
    outputs = [{"output_type": "stream", "name": "stdout", "text": printed}] if printed is not None else []
    return {
        "cell_type": "code",
        "id": cell_id,
        "metadata": {},
        "source": source,
        "outputs": outputs,
        "execution_count": count,
    }


def write_notebook(path: Path, cells: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells}))
    return path


FIXTURE_CELLS = [
    code("setup", "import math, os\nx = 2\nprint(x)", "2\n"),
    {"cell_type": "markdown", "id": "notes", "metadata": {}, "source": "# Sales"},
    code("uses-raw", "total = sum(raw) * x\nprint(total)", "12\n", count=3),
    code("differs", "print('now')", "before\n"),
    code("address", "print(object())", "<object object at 0x7f3a2b1c0d90>\n"),
    code("fails", "sales = {'revenue_q2': 1}\nsales['revenue_q3']"),
    code("loops", "while True:\n    pass", count=None),
    code(
        "after",
        "open('replay.pid', 'w').write(str(os.getpid()))\nprint('after', math.pi > 3)",
        "after True\n",
    ),
]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("replay") / "project"
    (root / "notebooks").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    write_notebook(root / "notebooks" / "sales.ipynb", FIXTURE_CELLS)
    return root


@pytest.fixture(scope="module")
def kernel(project: Path) -> Any:
    """The user's kernel, serving notebooks/sales.ipynb as jupyter_server starts it, with ``raw`` defined by a
    cell that has since been deleted from the file."""
    notebook = project / "notebooks" / "sales.ipynb"
    km, kc = start_kernel(project / "notebooks", env={"JPY_SESSION_NAME": str(notebook)})
    try:
        assert run_cell(kc, "raw = [1, 2, 3]").status == "ok"
        yield km, kc
    finally:
        stop_kernel(km, kc)


def records(kc: Any) -> list[dict[str, Any]]:
    """The last cell's result (a DataFrame) as records, index included."""
    result = run_cell(kc, "import json as _json; print(_json.dumps(_.reset_index().to_dict('records')))")
    assert result.status == "ok", result.error
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def still_answers(kc: Any) -> None:
    assert run_cell(kc, "print(6 * 7)").stdout == "42\n"


def set_mode(kc: Any, mode: str) -> None:
    assert run_cell(kc, f"%aries config permission_mode={mode}").status == "ok"


def error_of(result: CellResult) -> str:
    """A failed cell's message: IPython shows a UsageError on stderr (no error message on iopub)."""
    assert result.status == "error"
    return result.stderr.strip() if result.error is None else f"{result.error[0]}: {result.error[1]}"


def test_static_check_finds_the_name_only_the_deleted_cell_defined(kernel: Any) -> None:
    _, kc = kernel
    result = run_cell(kc, "%aries hidden")
    assert result.status == "ok", result.error
    assert "1 of them only this kernel has" in result.stdout
    assert "Nothing was run" in result.stdout
    assert records(kc) == [
        {"index": 0, "cell": 2, "id": "uses-raw", "name": "raw", "live": True, "defined_by": "no cell"}
    ]
    same = run_cell(kc, "%aries replay --static")
    assert same.status == "ok" and "1 of them only this kernel has" in same.stdout


def test_replay_asks_first_and_no_runs_nothing(kernel: Any, project: Path) -> None:
    _, kc = kernel
    set_mode(kc, "default")
    result = run_cell(kc, "%aries replay", stdin_reply="n")
    assert result.status == "ok", result.error
    assert len(result.prompts) == 1
    assert result.prompts[0].startswith("Allow replaying notebooks/sales.ipynb: its 7 code cell(s) run")
    assert result.prompts[0].endswith("? [y/N/a(ll this run)] ")
    assert "Replay not run" in (result.result or "")
    assert not (project / "notebooks" / "replay.pid").exists()


def test_replay_reports_each_cell_and_leaves_the_file_and_no_kernel(kernel: Any, project: Path) -> None:
    _, kc = kernel
    notebook = project / "notebooks" / "sales.ipynb"
    before = notebook.read_bytes()
    set_mode(kc, "acceptEdits")  # a replay is a command: acceptEdits still asks
    assert run_cell(kc, "get_ipython().config.AriesReplay.cell_timeout = 5.0").status == "ok"
    result = run_cell(kc, "%aries replay", stdin_reply="y")
    assert result.status == "ok", result.error
    assert len(result.prompts) == 1 and "each up to 5 s" in result.prompts[0]
    assert (
        "Replayed notebooks/sales.ipynb in a fresh aries kernel: 4 ran, 2 failed, 1 timeout" in result.stdout
    )
    rows = {row["id"]: row for row in records(kc)}
    assert list(rows) == ["setup", "uses-raw", "differs", "address", "fails", "loops", "after"]
    assert [rows[i]["cell"] for i in rows] == [0, 2, 3, 4, 5, 6, 7]
    assert {i: rows[i]["status"] for i in rows} == {
        "setup": "ran",
        "uses-raw": "failed",
        "differs": "ran",
        "address": "ran",
        "fails": "failed",
        "loops": "timeout",
        "after": "ran",
    }
    assert rows["uses-raw"]["error"] == "NameError: name 'raw' is not defined"
    assert rows["uses-raw"]["undefined_names"] == "raw"
    assert rows["fails"]["error"] == "KeyError: 'revenue_q3'"
    assert "c.AriesReplay.cell_timeout = 5 s" in rows["loops"]["error"]
    assert {i: rows[i]["output_differs"] for i in rows} == {
        "setup": False,
        "uses-raw": True,
        "differs": True,
        "address": False,  # the memory address is normalised
        "fails": True,  # the file saved no error
        "loops": None,  # never run in the file, and stopped now
        "after": False,
    }
    assert rows["differs"]["difference"] == "saved 'before', now 'now'"
    assert all(rows[i]["undefined_names"] == "" for i in rows if i != "uses-raw")
    assert notebook.read_bytes() == before
    pid_file = project / "notebooks" / "replay.pid"  # the replay kernel ran in the notebook's folder
    pid = int(pid_file.read_text())
    pid_file.unlink()
    assert not Path(f"/proc/{pid}").exists()  # shut down at the end
    still_answers(kc)


def test_plan_refuses_and_bypass_permissions_runs_unasked(kernel: Any, project: Path) -> None:
    _, kc = kernel
    small = write_notebook(project / "notebooks" / "small.ipynb", [code("one", "print(1 + 1)", "2\n")])
    set_mode(kc, "plan")
    refused = run_cell(kc, f"%aries replay {small}", stdin_reply="y")
    assert "permission mode plan refuses commands" in error_of(refused)
    assert refused.prompts == []
    set_mode(kc, "bypassPermissions")
    ran = run_cell(kc, "%aries replay ../notebooks/small.ipynb", stdin_reply="n")
    assert ran.status == "ok", ran.error
    assert ran.prompts == []
    assert [(r["id"], r["status"], r["output_differs"]) for r in records(kc)] == [("one", "ran", False)]
    set_mode(kc, "default")


def test_bad_notebooks_get_a_clear_message_and_the_kernel_stays(
    kernel: Any, project: Path, tmp_path: Path
) -> None:
    _, kc = kernel
    folder = project / "notebooks"
    (folder / "broken.ipynb").write_text("{not json")
    with open(folder / "huge.ipynb", "wb") as huge:  # 200 MB, sparse: nothing near that is read
        huge.truncate(200 << 20)
    os.mkfifo(folder / "pipe.ipynb")
    outside = write_notebook(tmp_path / "outside.ipynb", [code("x", "print(1)")])
    (folder / "link.ipynb").symlink_to(outside)
    (folder / "deep.ipynb").write_text("[" * 5000 + "]" * 5000)
    expected = {
        "broken.ipynb": "is not JSON (Expecting property name enclosed in double quotes",
        "huge.ipynb": "is over 67,108,864 bytes (MAX_NOTEBOOK_BYTES) and is not read",
        "pipe.ipynb": "is not a regular file (a FIFO)",
        "link.ipynb": "Only files inside the project root can be read or changed",
        "deep.ipynb": "nests brackets 5000 deep, over the limit of 64",
    }
    for name, message in expected.items():
        for command in ("replay --yes", "hidden"):
            text = error_of(run_cell(kc, f"%aries {command} {name}"))
            assert text.startswith("UsageError: Notebook"), text
            assert message in text, text
        still_answers(kc)
    write_notebook(folder / "big.ipynb", [code("big", "x = 1\n" * 180_000)])  # a cell of over 1 MB
    big = run_cell(kc, "%aries hidden big.ipynb")
    assert big.status == "ok", big.error
    assert "cell 0 is not checked: 1,080,000 characters, over the 200,000 the check reads" in big.stdout
    still_answers(kc)


def test_a_python3_kernel_replays_in_a_fresh_python3_kernel(project: Path) -> None:
    folder = project / "notebooks"
    notebook = write_notebook(
        folder / "plain.ipynb",
        [
            code("load", "%load_ext aries_kernel"),
            code(
                "which",
                "print(type(get_ipython().kernel).__name__, 'codebase' in dir())",
                "IPythonKernel True\n",
            ),
        ],
    )
    km, kc = start_kernel(folder, env={"JPY_SESSION_NAME": str(notebook)}, kernel_name="python3")
    try:
        assert run_cell(kc, "%load_ext aries_kernel").status == "ok"
        result = run_cell(kc, "%aries replay --yes")
        assert result.status == "ok", result.error
        assert "in a fresh python3 kernel: 2 ran; 0 output(s) differ" in result.stdout
        assert [(r["id"], r["status"], r["output_differs"]) for r in records(kc)] == [
            ("load", "ran", False),
            ("which", "ran", False),
        ]
    finally:
        stop_kernel(km, kc)


def test_the_agents_code_cannot_start_a_replay_but_may_check(kernel: Any, project: Path) -> None:
    _, kc = kernel
    as_agent = (
        "from aries_kernel.context import get_context\n"
        "with get_context(get_ipython()).settings_owner.untrusted('the agent'):\n"
        "    get_ipython().run_line_magic('aries', {!r})"
    )
    refused = run_cell(kc, as_agent.format("replay --yes"))
    assert "is not started while an agent run is in progress" in error_of(refused)
    assert not (project / "notebooks" / "replay.pid").exists()
    checked = run_cell(kc, as_agent.format("replay --static"))
    assert checked.status == "ok" and "1 of them only this kernel has" in checked.stdout


def test_without_a_notebook_replay_says_to_name_one(kernel: Any) -> None:
    _, kc = kernel
    hide = "import os; _saved = (os.environ.pop('JPY_SESSION_NAME'), __session__); del __session__"
    assert run_cell(kc, hide).status == "ok"
    try:
        text = error_of(run_cell(kc, "%aries replay"))
        assert "This kernel serves no notebook" in text and "%aries replay PATH.ipynb" in text
    finally:
        restore = "os.environ['JPY_SESSION_NAME'], __session__ = _saved"
        assert run_cell(kc, restore).status == "ok"


def test_an_interrupt_stops_the_replay_and_kills_its_kernel(kernel: Any, project: Path) -> None:
    km, kc = kernel
    folder = project / "notebooks"
    fifo = folder / "started.fifo"
    os.mkfifo(fifo)
    looping = write_notebook(
        folder / "looping.ipynb",
        [
            code("pid", "import os\nopen('looping.pid', 'w').write(str(os.getpid()))"),
            code("spin", f"open({str(fifo)!r}, 'w').write('spinning')\nwhile True:\n    pass"),
        ],
    )
    kernel_group = os.getpgid(km.provisioner.pid)

    def interrupt_once_spinning() -> None:  # what a frontend's interrupt does: SIGINT to the kernel's group
        with open(fifo) as started:  # returns once the replay kernel runs the looping cell
            assert started.read() == "spinning"
        os.killpg(kernel_group, signal.SIGINT)

    interrupter = threading.Thread(target=interrupt_once_spinning)
    interrupter.start()
    result = run_cell(kc, f"%aries replay {looping} --yes --cell-timeout 3600")
    interrupter.join()
    assert result.error is not None and result.error[0] == "KeyboardInterrupt"
    assert "Replay interrupted: its kernel was shut down." in result.stdout
    pid = int((folder / "looping.pid").read_text())
    assert not Path(f"/proc/{pid}").exists()
    still_answers(kc)


def test_a_cell_that_ignores_the_interrupt_is_killed_with_its_kernel(kernel: Any, project: Path) -> None:
    _, kc = kernel
    folder = project / "notebooks"
    stubborn = write_notebook(
        folder / "stubborn.ipynb",
        [
            code("pid", "import os, signal\nopen('stubborn.pid', 'w').write(str(os.getpid()))"),
            code("ignores", "signal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass"),
            code("never", "print('never')", "never\n"),
        ],
    )
    result = run_cell(kc, f"%aries replay {stubborn} --yes --cell-timeout 2")
    assert result.status == "ok", result.error
    rows = records(kc)
    assert [(r["id"], r["status"]) for r in rows] == [
        ("pid", "ran"),
        ("ignores", "timeout"),
        ("never", "skipped"),
    ]
    assert rows[1]["error"].endswith("and killed with its kernel when it did not stop within 5 s")
    assert rows[2]["error"] == "not run: the replay kernel was killed at an earlier cell that did not stop"
    assert rows[2]["output_differs"] is None
    assert not Path(f"/proc/{int((folder / 'stubborn.pid').read_text())}").exists()
    still_answers(kc)


def test_the_total_bound_stops_the_replay_and_skips_the_rest(kernel: Any, project: Path) -> None:
    _, kc = kernel
    folder = project / "notebooks"
    endless = write_notebook(
        folder / "endless.ipynb",
        [
            code("first", "print(1)", "1\n"),
            code("spin", "while True:\n    pass"),
            code("last", "print(2)", "2\n"),
        ],
    )
    result = run_cell(kc, f"%aries replay {endless} --yes --cell-timeout 3600 --timeout 15")
    assert result.status == "ok", result.error
    rows = records(kc)
    assert [(r["id"], r["status"]) for r in rows] == [
        ("first", "ran"),
        ("spin", "timeout"),
        ("last", "skipped"),
    ]
    assert "(c.AriesReplay.timeout = 15 s for the whole replay): interrupted" in rows[1]["error"]
    assert rows[2]["error"] == "not run: the replay's total time (c.AriesReplay.timeout) ran out"
