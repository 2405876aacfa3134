"""The agent's tools on their own: files, confinement, Bash, Repl in an IPython shell, notebooks, the web."""

from __future__ import annotations

import http.server
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pandas as pd
import pytest
from IPython.core.interactiveshell import InteractiveShell

from aries_kernel.agent import tools
from aries_kernel.agent.permissions import MODES, decide
from aries_kernel.agent.phases import LEAN, PhaseState, schema_tokens
from aries_kernel.agent.repl import format_value, truncate
from aries_kernel.agent.safety import confine
from aries_kernel.agent.settings import AriesAgent
from aries_kernel.agent.tools import TOOLS, Tool, ToolEnv, html_to_text, run_tool
from aries_kernel.rootfs import OutsideRootError
from aries_kernel.settings_owner import SettingsOwner
from aries_kernel.user import current_user


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "core.py").write_text("def run():\n    return 42\n\n\ndef other():\n    return 42\n")
    (root / "README.md").write_text("hello\n")
    return root


@pytest.fixture
def env(repo: Path) -> ToolEnv:
    return ToolEnv(repo, AriesAgent(), shell=InteractiveShell.instance())


def call(env: ToolEnv, tool: str, /, **arguments: object) -> tuple[str, bool]:
    return run_tool(TOOLS[tool], env, dict(arguments))


def test_there_are_at_least_18_tools_with_object_schemas() -> None:
    assert len(TOOLS) >= 18
    for tool in TOOLS.values():
        assert tool.parameters["type"] == "object"
        assert set(tool.parameters["required"]) <= set(tool.parameters["properties"])
    assert TOOLS["Edit"].parameters["required"] == ["file_path", "old_string", "new_string"]
    assert TOOLS["Edit"].parameters["properties"]["replace_all"]["type"] == "boolean"
    assert TOOLS["TodoWrite"].parameters["properties"]["todos"]["items"]["required"] == ["content", "status"]


def test_edit_replaces_exactly_one_match_or_says_why_not(env: ToolEnv, repo: Path) -> None:
    output, is_error = call(
        env, "Edit", file_path="pkg/core.py", old_string="return 42", new_string="return 7"
    )
    assert is_error and "matches 2 times" in output
    output, is_error = call(
        env,
        "Edit",
        file_path="pkg/core.py",
        old_string="def run():\n    return 42",
        new_string="def run():\n    return 7",
    )
    assert not is_error and "1 replacement" in output and "+    return 7" in output
    assert (repo / "pkg" / "core.py").read_text().count("return 7") == 1
    output, is_error = call(env, "Edit", file_path="pkg/core.py", old_string="nope", new_string="x")
    assert is_error and "not found" in output
    output, is_error = call(
        env, "Edit", file_path="pkg/core.py", old_string="return", new_string="yield", replace_all=True
    )
    assert not is_error and "2 replacement" in output
    assert (repo / "pkg" / "core.py").resolve() in env.changed


def test_write_and_read_round_trip_with_line_numbers(env: ToolEnv, repo: Path) -> None:
    output, is_error = call(env, "Write", file_path="new/dir/a.txt", content="one\ntwo\nthree\n")
    assert not is_error and "Created new/dir/a.txt" in output
    output, is_error = call(env, "Read", file_path="new/dir/a.txt", offset=2, limit=1)
    assert not is_error and "     2\ttwo" in output and "1 more lines" in output
    output, is_error = call(env, "Read", file_path="missing.txt")
    assert is_error and "does not exist" in output


def test_writes_outside_the_root_are_refused(env: ToolEnv, repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("secret = 1\n")
    output, is_error = call(env, "Write", file_path="../outside.txt", content="x")
    assert is_error and "outside the project root" in output
    output, is_error = call(env, "Edit", file_path=str(outside), old_string="secret", new_string="x")
    assert is_error and "outside the project root" in output
    (repo / "link").symlink_to(tmp_path)
    output, is_error = call(env, "Edit", file_path="link/outside.txt", old_string="secret", new_string="x")
    assert is_error and "through a symlink" in output
    assert outside.read_text() == "secret = 1\n"
    with pytest.raises(OutsideRootError):
        confine(repo, "pkg/../../outside.txt")
    assert confine(repo, "pkg/../README.md") == (repo / "README.md").resolve()


def test_grep_and_glob_skip_ignored_folders(env: ToolEnv, repo: Path) -> None:
    (repo / ".venv").mkdir()
    (repo / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")  # a virtualenv by evidence, not by name
    (repo / ".venv" / "x.py").write_text("def run(): pass\n")
    (repo / ".gitignore").write_text("ignored.py\n")
    (repo / "ignored.py").write_text("def run(): pass\n")
    output, is_error = call(env, "Grep", pattern=r"def run", glob="*.py")
    assert not is_error and output == "pkg/core.py:1: def run():"
    output, _ = call(env, "Grep", pattern="HELLO", case_insensitive=True)
    assert output == "README.md:1: hello"
    output, _ = call(env, "Glob", pattern="**/*.py")
    assert ".venv" not in output and "pkg/core.py" in output


def test_bash_runs_in_the_root_and_is_killed_at_its_timeout(env: ToolEnv, repo: Path) -> None:
    output, is_error = call(env, "Bash", command="pwd; echo hi >&2; exit 3")
    assert (
        not is_error and output.startswith("exit code 3") and str(repo.resolve()) in output and "hi" in output
    )
    marker = repo / "survivor"
    started = time.monotonic()
    output, is_error = call(
        env, "Bash", command=f"echo started; (sleep 3; touch {marker}) & sleep 30", timeout=1
    )
    assert time.monotonic() - started < 10
    assert is_error and "timed out after 1 s" in output and "started" in output
    time.sleep(3.5)
    assert not marker.exists(), "the background child outlived the timeout: the process group was not killed"


def test_every_tool_declares_its_effect_and_one_without_is_refused_at_registration() -> None:
    with pytest.raises(
        ValueError, match=r"Tool 'Sneaky' declares no effect; give one of 'read', 'edit', 'command', 'repl'"
    ):

        @tools.tool("Sneaky", "Writes a file behind the permission mode's back.", file_path="File path.")
        def sneaky(env: ToolEnv, file_path: str) -> str:
            return file_path

    assert "Sneaky" not in TOOLS  # it never ran as a read
    with pytest.raises(ValueError, match="Tool 'Typo' declares the effect 'write', which is not one of"):
        Tool("Typo", "", {"type": "object", "properties": {}, "required": []}, str, effect="write")
    for mode in MODES:  # nor does an unknown effect fall through to allowed
        with pytest.raises(ValueError, match="Unknown effect 'write'; effects are read, edit, command, repl"):
            decide(mode, "write")
    declared = {
        "Read": "read",
        "Grep": "read",
        "VaultSearch": "read",
        "Edit": "edit",
        "Write": "edit",
        "NotebookEdit": "edit",
        "ProjectSave": "edit",
        "Bash": "command",
        "WebFetch": "command",
        "Repl": "repl",
    }
    assert {name: TOOLS[name].effect for name in declared} == declared


def test_a_raising_tool_becomes_an_error_result(env: ToolEnv) -> None:
    output, is_error = call(env, "Repl", code="1/0")
    assert not is_error and "ZeroDivisionError" in output  # code errors are output of a run that worked
    output, is_error = call(env, "Read", file_path="pkg/core.py", offset="x")
    assert is_error and output == "Read: offset must be an integer, not str ('x')."
    output, is_error = call(env, "Read", file_path="pkg/core.py", offset="2", limit=1.0)
    assert not is_error and output.startswith("     2\t")  # numbers sent as strings or floats are fine

    def boom(env: ToolEnv) -> str:
        raise RuntimeError("a bug")

    broken = Tool("Boom", "", {"type": "object", "properties": {}, "required": []}, boom, effect="read")
    assert run_tool(broken, env, {}) == ("Boom failed: RuntimeError: a bug", True)
    output, is_error = call(env, "Edit", file_path="pkg/core.py")
    assert is_error and "missing old_string, new_string" in output


def test_repl_shares_the_namespace_and_shows_dataframes_compactly(env: ToolEnv) -> None:
    shell = env.shell
    shell.user_ns["shared"] = 20
    output, _ = call(
        env,
        "Repl",
        code="import pandas as pd\nx = shared + 1\nprint('x is', x)\n"
        "pd.DataFrame({'file': [f'f{i}.py' for i in range(100)], 'score': range(100)})",
    )
    assert "x is 21" in output and "[100 rows x 2 columns]" in output and "..." in output
    assert shell.user_ns["x"] == 21
    output, _ = call(env, "Repl", code="%time y = 3\nimport sys; print('oops', file=sys.stderr)")
    assert shell.user_ns["y"] == 3 and "[stderr]\noops" in output
    output, _ = call(env, "Repl", code="print('a' * 50000)")
    assert "characters" in output and "cut of 50,000" in output and len(output) < 13_000


def test_truncate_and_format_value() -> None:
    assert truncate("short", 10) == "short"
    cut = truncate("x" * 1000, 100)
    assert "900 characters" in cut and cut.startswith("x" * 66)
    frame = pd.DataFrame({"a": [1, 2]})
    assert format_value(frame).endswith("[2 rows x 1 columns]")


def test_notebook_edit_inserts_replaces_and_deletes(env: ToolEnv, repo: Path) -> None:
    path = repo / "nb.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")]), path)
    output, is_error = call(
        env,
        "NotebookEdit",
        notebook_path="nb.ipynb",
        cell_index=1,
        new_source="# hi",
        edit_mode="insert",
        cell_type="markdown",
    )
    assert not is_error and "now has 2 cells" in output
    call(env, "NotebookEdit", notebook_path="nb.ipynb", cell_index=0, new_source="2")
    call(env, "NotebookEdit", notebook_path="nb.ipynb", cell_index=5, new_source="2")
    cells = nbformat.read(path, as_version=4).cells
    assert [(c.cell_type, c.source) for c in cells] == [("code", "2"), ("markdown", "# hi")]
    output, is_error = call(env, "NotebookEdit", notebook_path="nb.ipynb", cell_index=9, edit_mode="delete")
    assert is_error and "out of range" in output


def test_todo_write_keeps_the_list(env: ToolEnv) -> None:
    output, is_error = call(
        env,
        "TodoWrite",
        todos=[{"content": "read", "status": "completed"}, {"content": "fix", "status": "in_progress"}],
    )
    assert not is_error and output == "[x] read\n[~] fix"
    assert env.todos[1] == {"content": "fix", "status": "in_progress"}
    _, is_error = call(env, "TodoWrite", todos=[{"content": "x", "status": "done"}])
    assert is_error


@pytest.fixture
def web_server() -> Iterator[str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            if self.path == "/missing":
                self.send_error(404)
                return
            body = b"<html><script>var x=1;</script><h1>Title</h1><p>Body text</p></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_web_fetch_returns_page_text_from_a_loopback_server(env: ToolEnv, web_server: str) -> None:
    os.environ.setdefault("NO_PROXY", "127.0.0.1")
    output, is_error = call(env, "WebFetch", url=f"{web_server}/page")
    assert is_error and "Refused: 127.0.0.1 resolves to 127.0.0.1" in output  # loopback, refused by default
    env.settings.web_allow_private = True
    output, is_error = call(env, "WebFetch", url=f"{web_server}/page")
    assert not is_error and "Title" in output and "Body text" in output and "var x" not in output
    output, is_error = call(env, "WebFetch", url=f"{web_server}/missing")
    assert is_error and "404" in output
    _, is_error = call(env, "WebFetch", url="file:///etc/passwd")
    assert is_error
    assert html_to_text("<p>a</p><style>x</style><p>b</p>") == "a\nb"


def test_lean_phase_is_small_and_widening_adds_everything() -> None:
    phase = PhaseState("repl")
    assert [tool.name for tool in phase.tools()] == list(LEAN["repl"])
    assert "Read" in phase.gated_names() and "Repl" not in phase.gated_names()
    assert phase.admit("VaultSearch") is False and "VaultSearch" in [t.name for t in phase.tools()]
    assert phase.admit("Grep") is True and len(phase.tools()) == len(TOOLS)
    bare = PhaseState("bare")
    assert {"Read", "Grep", "Glob"} <= {tool.name for tool in bare.tools()} and "Repl" in bare.gated_names()
    assert schema_tokens(PhaseState("repl").tools()) <= 0.45 * schema_tokens(TOOLS.values())


class OneContext:
    """An Aries context reduced to what the graph and memory tools reach: root, config, lazy pillars,
    codebase."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.config = None
        self.settings_owner = SettingsOwner()
        self._cache: dict[str, object] = {}

    @property
    def codebase(self) -> object:
        from aries_kernel.codebase import Codebase

        return self.lazy("codebase", lambda ctx: Codebase(ctx.root))

    def lazy(self, name: str, factory: object) -> object:
        if name not in self._cache:
            self._cache[name] = factory(self)  # type: ignore[operator]
        return self._cache[name]


def test_memory_tools_use_the_real_vault(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARIES_VAULT", str(tmp_path / "vault"))
    env = ToolEnv(repo, AriesAgent(), context=OneContext(repo))
    title = "The cache is slow because keys are rehashed"
    output, is_error = call(env, "VaultAdd", title=title, content="Seen in pkg/core.py")
    assert not is_error and "created" in output
    output, is_error = call(
        env, "ProjectSave", title="Tests never reach the internet", content="loopback only"
    )
    assert not is_error and "project" in output
    assert (repo / ".aries" / "memory" / "inbox" / "Tests never reach the internet.md").exists()
    output, _ = call(env, "VaultSearch", query="why is the cache slow")
    assert output.splitlines()[1].split()[1:4] == title.split()[:3]  # the cache note ranks first
    output, _ = call(env, "VaultRead", title=title)
    assert output == f"# {title}\n\n_by {current_user()}_\n\nSeen in pkg/core.py"  # the model sees who
    assert title in call(env, "VaultWarmth")[0] and title in call(env, "VaultExplore", query="cache")[0]
    output, is_error = call(env, "VaultRead", title="no such note")
    assert is_error and "No note titled" in output


def test_graph_tools_use_the_real_code_graph(repo: Path) -> None:
    (repo / "pkg" / "__init__.py").write_text("from .core import run\n")
    (repo / "main.py").write_text("from pkg.core import run\nprint(run())\n")
    env = ToolEnv(repo, AriesAgent(), context=OneContext(repo))
    output, is_error = call(env, "FindSymbol", name="run")
    assert not is_error and "pkg/core.py" in output and "function" in output
    output, is_error = call(env, "ShowDependents", file_path="pkg/core.py")
    assert not is_error and "main.py" in output
    output, _ = call(env, "FindSymbol", name="nothing_like_this")
    assert output == "No definition of 'nothing_like_this' in the code graph."
    output, _ = call(env, "ShowDependencies", file_path="main.py")
    assert "pkg/core.py" in output
    output, _ = call(env, "CodeSearch", query="run")
    assert "pkg/core.py" in output
