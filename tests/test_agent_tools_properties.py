"""Property tests of every file and search tool's arguments (issue 10): random strings, numbers, None and odd
types for each argument, run through ``run_tool`` on a scratch root beside an outside folder.

For every call: no exception escapes, nothing outside the root is read into the output or written, every error
is one the tool explains (never ``<Tool> failed: <Exception>``), and a wrong argument is named in the message.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aries_kernel.agent import tools
from aries_kernel.agent.patterns import PatternError, compile_file_filter, compile_regex
from aries_kernel.agent.settings import AriesAgent
from aries_kernel.agent.tools import TOOLS, ToolEnv, run_tool
from tests.fs_support import snapshot

SECRET = "outside secret 91c2"
FILE_TOOLS = [
    "Read",
    "Write",
    "Edit",
    "NotebookEdit",
    "Grep",
    "Glob",
    "ShowDependents",
    "TodoWrite",
    "WebFetch",
]

PARTS = st.sampled_from(
    [
        "..",
        ".",
        "",
        "pkg",
        "core.py",
        "link_dir",
        "link_file.txt",
        "secret.txt",
        "nb.ipynb",
        "new",
        "~",
        "a b",
    ]
    + ["\\", "x\0y", "é", "\udcff", "\ud800", "*", "**", "[", "[!a]", "?", "{root}", "{outside}"]
)
PATHS = st.one_of(
    st.lists(PARTS, max_size=6).map("/".join),
    st.lists(PARTS, max_size=5).map(lambda parts: "{root}/" + "/".join(parts)),
    st.lists(PARTS, max_size=5).map(lambda parts: "/" + "/".join(parts)),
    st.just("{outside}/secret.txt"),
    st.text(max_size=40),
)
WRONG = st.one_of(
    st.none(),
    st.integers(),
    st.floats(),
    st.booleans(),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
PATTERNS = st.one_of(
    st.text(alphabet="a.*+?()[]{}|^$\\/!-", max_size=30),
    st.sampled_from(["(a+)+$", "[" * 2000, "*" * 50 + "b", "**/*", "../*", "{outside}/*", "(?P<x>a)(?P=x)"]),
    st.text(max_size=30),
)
TODOS = st.lists(
    st.one_of(
        st.fixed_dictionaries(
            {"content": st.text(max_size=10), "status": st.sampled_from(["pending", "done", "completed"])}
        ),
        WRONG,
    ),
    max_size=3,
)


def strategy(tool: str, name: str, kind: str) -> st.SearchStrategy[Any]:
    """Values for one argument: mostly of its type (with hostile contents), sometimes of another type."""
    if kind == "string":
        if name in ("pattern", "glob"):
            right: st.SearchStrategy[Any] = PATTERNS
        elif name == "url":
            right = st.text(max_size=20).filter(lambda text: not text.startswith(("http:", "https:")))
        elif name in ("edit_mode", "cell_type"):
            right = st.sampled_from(["replace", "insert", "delete", "code", "markdown", "", "other"])
        else:
            right = PATHS
    elif kind == "integer":
        right = st.one_of(st.integers(-5, 10), st.integers(), st.sampled_from(["3", " 7 ", "x", "1e3"]))
    elif kind == "boolean":
        right = st.one_of(st.booleans(), st.sampled_from(["true", "false", "yes"]))
    elif kind == "array":
        right = TODOS
    else:
        right = st.text(max_size=20)
    return st.one_of(right, right, right, WRONG)


def arguments(tool: str) -> st.SearchStrategy[dict[str, Any]]:
    schema = TOOLS[tool].parameters
    given_args = {
        name: strategy(tool, name, spec.get("type", "string")) for name, spec in schema["properties"].items()
    }
    required = {name: given_args[name] for name in schema["required"]}
    optional = {name: value for name, value in given_args.items() if name not in required}
    optional["bogus_argument"] = st.integers()
    return st.fixed_dictionaries(required, optional=optional)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> tuple[ToolEnv, Path, Path]:
    base = tmp_path_factory.mktemp("properties")
    root, outside = base / "root", base / "outside"
    (root / "pkg").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET + "\n")
    (root / "pkg" / "core.py").write_text("def run():\n    return 42\n")
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")]), root / "nb.ipynb")
    (root / "link_dir").symlink_to(outside)
    (root / "link_file.txt").symlink_to(outside / "secret.txt")
    return ToolEnv(root, AriesAgent(search_timeout=0.5)), root, outside


def fill(value: Any, root: Path, outside: Path) -> Any:
    if isinstance(value, str):
        return value.replace("{root}", str(root)).replace("{outside}", str(outside))
    return value


@pytest.mark.parametrize("tool", FILE_TOOLS)
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_arguments_are_answered_and_stay_inside_the_root(
    scratch: tuple[ToolEnv, Path, Path], tool: str, data: st.DataObject
) -> None:
    env, root, outside = scratch
    raw = data.draw(arguments(tool))
    call = {name: fill(value, root, outside) for name, value in raw.items()}
    before = snapshot(outside)
    siblings = sorted(path.name for path in root.parent.iterdir())

    output, is_error = run_tool(TOOLS[tool], env, call)

    assert isinstance(output, str) and isinstance(is_error, bool)
    assert snapshot(outside) == before, f"{tool} changed the outside folder with {call!r}"
    assert sorted(path.name for path in root.parent.iterdir()) == siblings
    assert SECRET not in output, f"{tool} read outside the root with {call!r}"
    if not is_error:
        return
    assert output.startswith(f"{tool}:"), output  # every error is explained, none is an escaped exception
    if "bogus_argument" in call:
        assert "unknown bogus_argument" in output
        return
    properties = TOOLS[tool].parameters["properties"]
    missing = [name for name in TOOLS[tool].parameters["required"] if call.get(name) is None]
    if missing:
        assert f"missing {', '.join(missing)}" in output
        return
    wrong = [
        name
        for name, value in call.items()
        if value is not None and tools._conform(properties[name].get("type", "string"), value) is tools._WRONG
    ]
    for name in wrong:
        assert f"{name} must be" in output, output


@settings(max_examples=1000, deadline=None)
@given(
    pattern=st.text(alphabet="ab \n.*+?()[]^$|\\bBswWd", min_size=1, max_size=12),
    text=st.text(alphabet="ab \t\r\n\x0b\x85\u2028-_", max_size=40),
    ignore_case=st.booleans(),
)
def test_the_whole_file_filter_never_hides_a_matching_line(
    pattern: str, text: str, ignore_case: bool
) -> None:
    try:
        line_regex = compile_regex(pattern, ignore_case)
    except PatternError:
        return
    whole = compile_file_filter(pattern, ignore_case)
    lines = text.splitlines()
    if whole is not None and any(line_regex.search(line) for line in lines):
        assert whole.search("\n".join(lines)), (pattern, lines)
