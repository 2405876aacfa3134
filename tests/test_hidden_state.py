"""The static hidden-state check (aries_kernel.notebook.hidden) cell by cell, and its Notice at a run's end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from aries_kernel.agent import Agent, AriesAgent
from aries_kernel.agent.events import Notice
from aries_kernel.notebook.hidden import MAX_CELL_CHARS, analyse_cells, fresh_names, missing_names
from aries_kernel.notebook.watch import HiddenStateHook
from tests.agent_scripted import FakeContext, ScriptedClient, ScriptedRouter
from tests.loopback import Reply


def needs(*cells: str) -> list[list[str]]:
    """Per cell, the names it needs that no earlier cell defines."""
    analysed = analyse_cells(cells, fresh_names())
    return [[name for name, _ in names] for names in missing_names(analysed)]


def test_bindings_of_every_kind_satisfy_later_cells() -> None:
    assert needs(
        "import os.path\nimport numpy as np\nfrom math import pi as PI",
        "a = b = 1\nc, *d = [1, 2]\ne: int = 3\nf += 1",
        "for i, (j, k) in enumerate([]):\n    pass\nwith open('x') as (g, h):\n    pass",
        "def func(): pass\nclass Klass: pass\nif (w := 5):\n    pass",
        "try:\n    pass\nexcept Exception as err:\n    pass\nmatch a:\n    case [m, *rest]:\n        pass",
        "print(os, np, PI, a, b, c, d, e, i, j, k, g, h, func, Klass, w, m, rest)",
    ) == [[], ["f"], [], [], [], []]


def test_order_inside_a_cell_matters_and_del_unbinds() -> None:
    assert needs("print(x)\nx = 1", "y = 1\ndel y\nprint(y)", "z = 1\nz += 1\nprint(z)") == [["x"], ["y"], []]


def test_an_except_name_is_gone_after_its_handler() -> None:
    assert needs("try:\n    pass\nexcept Exception as e:\n    print(e)\nprint(e)") == [["e"]]


def test_comprehension_variables_do_not_leak_but_the_walrus_does() -> None:
    assert needs(
        "[v for v in range(3) if v]\n{k: q for k, q in {}.items()}",
        "print(v, k)",
        "[(total := total0 + n) for n in range(3)]\nprint(total)",
    ) == [[], ["v", "k"], ["total0"]]


def test_function_bodies_count_where_the_function_is_used() -> None:
    assert needs(
        "def report():\n    return helper() + rate",  # nothing needed yet: report is not called
        "def helper():\n    return 1",
        "report()",  # used now: helper is defined, rate is not
        "def uses_later():\n    return later_name\nprint(uses_later)",  # passing it on counts as a use
        "def recursive(n):\n    return recursive(n - 1) if n else local_ok\nrecursive",
    ) == [[], [], ["rate"], ["later_name"], ["local_ok"]]


def test_parameters_locals_and_closures_are_not_needed() -> None:
    assert needs(
        "def outer(a, *args, key=None, **kw):\n    inner_value = a\n    def inner():\n        return inner_value, kw\n"
        "    return [item for item in args], inner\nouter(1)"
    ) == [[]]


def test_global_assignments_bind_when_the_function_is_called() -> None:
    assert needs(
        "def setup():\n    global config\n    config = {}\n",
        "print(config)",
        "setup()\nprint(config)",
    ) == [[], ["config"], []]


def test_classes_run_their_body_now_and_their_methods_when_used() -> None:
    assert needs(
        "class Model(Base):\n    size = default_size\n    scaled = size * 2\n    def fit(self):\n        return data",
        "Model()",
    ) == [["Base", "default_size"], ["data"]]


def test_lambdas_kept_in_a_name_are_functions_others_run_where_they_stand() -> None:
    assert needs("scale = lambda v: v * factor", "sorted([], key=lambda r: r + offset)", "scale(2)") == [
        [],
        ["offset"],
        ["factor"],
    ]


def test_magics_and_shell_lines_are_transformed_and_cell_magics_skipped() -> None:
    analysed = analyse_cells(
        [
            "%matplotlib inline\nfiles = !ls\n%time result = compute()",
            "%%bash\necho $undefined",
            "print(files, result)",
        ],
        fresh_names(),
    )
    assert [c.needs for c in analysed] == [["compute"], [], []]
    assert analysed[1].note == "a %%bash cell (not Python)"
    timed = analyse_cells(
        ["%%time\nmodel = fit(data)", "%%capture --no-stderr log\nprint(model)", "log, model"], fresh_names()
    )
    assert [c.needs for c in timed] == [["fit", "data"], [], []]


def test_a_star_import_hides_what_it_may_define_and_says_so() -> None:
    analysed = analyse_cells(["from pylab import *", "plot(x_values)", "x_values = 1"], fresh_names())
    assert analysed[0].star == ["pylab"]
    # plot may come from the star import; x_values is defined by a later cell, which no import changes.
    assert missing_names(analysed) == [[], [("x_values", 2)], []]


def test_builtins_and_ipython_names_are_never_needed() -> None:
    assert needs("print(len(In), Out, _, _3, _i2, display, get_ipython(), __name__, exit)") == [[]]


def test_cells_too_large_or_not_python_are_noted_not_read() -> None:
    analysed = analyse_cells(
        ["x = 1\n" * (MAX_CELL_CHARS // 6 + 1), "def broken(:", "(" * 10_000], fresh_names()
    )
    assert analysed[0].note.endswith(f"over the {MAX_CELL_CHARS:,} the check reads")
    assert analysed[1].note.startswith("not valid Python (SyntaxError")
    assert analysed[2].note  # too deeply nested: a note, not a crash
    assert all(not cell.needs for cell in analysed)


def write_notebook(path: Path, *sources: str) -> Path:
    cells = [
        {
            "cell_type": "code",
            "id": f"c{n}",
            "metadata": {},
            "source": s,
            "outputs": [],
            "execution_count": None,
        }
        for n, s in enumerate(sources)
    ]
    path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells}))
    return path


@pytest.fixture
def shell(tmp_path: Path) -> Any:
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    saved = dict(shell.user_ns)
    yield shell
    shell.user_ns.clear()
    shell.user_ns.update(saved)


def test_the_run_ends_with_a_notice_once_per_new_finding(tmp_path: Path, shell: Any) -> None:
    notebook = write_notebook(tmp_path / "sales.ipynb", "import math", "total = sum(raw)")
    shell.user_ns.update(__session__=str(notebook), raw=[1, 2])
    agent = Agent(
        FakeContext(tmp_path, shell=shell),
        router=ScriptedRouter(
            ScriptedClient(Reply(text="done"), Reply(text="again")), ScriptedClient(slot="cheap")
        ),
        settings=AriesAgent(),
        hooks=[HiddenStateHook()],
    )
    first = [e.text for e in agent.run("hello") if isinstance(e, Notice)]
    assert first == [
        "Hidden state in sales.ipynb: cell 1 uses raw, which no cell defines. Only this kernel has them, so a "
        "fresh kernel fails there; %aries hidden lists them, %aries replay runs the notebook fresh."
    ]
    assert not [e for e in agent.run("again") if isinstance(e, Notice)]  # the same finding is said once


def test_a_notebook_that_cannot_be_read_adds_nothing(tmp_path: Path, shell: Any) -> None:
    (tmp_path / "broken.ipynb").write_text("{not json")
    shell.user_ns.update(__session__=str(tmp_path / "broken.ipynb"), raw=[1, 2])
    agent = Agent(
        FakeContext(tmp_path, shell=shell),
        router=ScriptedRouter(ScriptedClient(Reply(text="done")), ScriptedClient(slot="cheap")),
        settings=AriesAgent(),
        hooks=[HiddenStateHook()],
    )
    assert [e.reason for e in agent.run("hello") if type(e).__name__ == "RunFinished"] == ["done"]
    assert not [e for e in agent.run("hello") if isinstance(e, Notice)]
