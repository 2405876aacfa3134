"""Permission modes: what each mode lets tools do, how a run gets its mode, and that only the user changes it.

The agent's own code cannot change the mode or the approval settings: a Repl step that tries through
``%aries config``, ``run_line_magic``, a nested ``%aries --mode`` run, attribute assignment or writing behind
the traits' validation leaves them as they were, and the next Edit is still asked for.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aries_kernel.magics.aries import AriesMagics
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from aries_kernel.agent import Agent
from aries_kernel.agent.events import ApprovalRequested, Event, Notice, RunStarted, ToolCallFinished
from aries_kernel.agent.permissions import MODES, decide, effective_mode
from aries_kernel.agent.settings import AriesAgent
from aries_kernel.context import AriesContext, set_context
from tests.agent_scripted import ScriptedClient, ScriptedRouter
from tests.loopback import Reply
from tests.package_sources import package_trees
from tests.test_agent_loop import RecordingGraph, make_agent, run_all

EDIT = ("Edit", {"file_path": "pkg/core.py", "old_string": "42", "new_string": "43"})
WRITE = ("Write", {"file_path": "pkg/new.py", "content": "X = 1\n"})
BASH = ("Bash", {"command": "touch by_bash"})
GREP = ("Grep", {"pattern": "def run"})


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "core.py").write_text("def run():\n    return 42\n")
    return root.resolve()


def test_the_decision_table() -> None:
    table = {mode: (decide(mode, "read"), decide(mode, "edit"), decide(mode, "command")) for mode in MODES}
    assert table == {
        "default": ("allow", "ask", "ask"),
        "acceptEdits": ("allow", "allow", "ask"),
        "plan": ("allow", "refuse", "refuse"),
        "bypassPermissions": ("allow", "allow", "allow"),
    }
    assert all(decide(mode, "repl") == "allow" for mode in MODES)  # the Repl's effects are weighed one by one
    with pytest.raises(ValueError, match="Unknown permission mode 'yolo'"):
        decide("yolo", "edit")


@pytest.mark.parametrize(
    ("mode", "asked", "ran"),
    [
        ("default", ["Edit", "Write", "Bash"], {"Edit", "Write", "Bash"}),
        ("acceptEdits", ["Bash"], {"Edit", "Write", "Bash"}),
        ("plan", [], set()),
        ("bypassPermissions", [], {"Edit", "Write", "Bash"}),
    ],
)
def test_modes_matrix_for_the_tools(repo: Path, mode: str, asked: list[str], ran: set[str]) -> None:
    agent, primary, _ = make_agent(repo, Reply(tool_calls=[EDIT, WRITE, BASH, GREP]), Reply(text="ok"))
    questions: list[str] = []
    events: list[Event] = []
    for event in agent.run("change things", permission_mode=mode):
        events.append(event)
        if isinstance(event, ApprovalRequested):
            questions.append(event.name)
            assert event.effect == ("command" if event.name == "Bash" else "edit")
            event.approve()
    assert questions == asked
    started = events[0]
    assert isinstance(started, RunStarted) and started.permission_mode == mode and started.tool_mode == "repl"
    results = {e.name: e for e in events if isinstance(e, ToolCallFinished)}
    assert {name for name, result in results.items() if not result.is_error} == ran | {"Grep"}
    assert ((repo / "pkg" / "core.py").read_text().endswith("43\n")) == ("Edit" in ran)
    assert (repo / "pkg" / "new.py").exists() == ("Write" in ran)
    assert (repo / "by_bash").exists() == ("Bash" in ran)
    if mode == "plan":
        assert results["Edit"].output.startswith(
            "Edit was not run: permission mode plan: this run is read-only"
        )
        assert "so commands are refused" in results["Bash"].output
    session = agent.session
    assert session is not None
    approvals = {(a["name"], a["by"]) for a in session.approvals}
    expected_by = "user" if mode in ("default",) else "policy"
    assert ("Edit", expected_by) in approvals
    prompt_record = [line for line in session.path.read_text().splitlines() if '"kind": "prompt"' in line]
    assert f'"permission_mode": "{mode}"' in prompt_record[0]


def test_a_run_takes_its_mode_from_the_settings_unless_it_names_one(repo: Path) -> None:
    agent, _, _ = make_agent(repo, settings=AriesAgent(permission_mode="acceptEdits"))
    assert agent.permission_mode == "acceptEdits"
    seen: list[str] = []
    agent.listeners.append(lambda event: seen.append(agent.permission_mode))
    run_all(agent, "hi")
    run_all(agent, "hi", permission_mode="plan")
    run_all(agent, "hi", auto_approve=True)  # --yes
    assert (
        set(seen[: len(seen) // 3]) == {"acceptEdits"} and seen[-1] == "bypassPermissions" and "plan" in seen
    )
    agent.settings.auto_approve = True  # the old setting is the bypass alias
    assert agent.permission_mode == "bypassPermissions"
    with pytest.raises(ValueError, match="means bypassPermissions"):
        agent.run("x", auto_approve=True, permission_mode="plan")
    with pytest.raises(ValueError, match="Unknown permission mode"):
        agent.run("x", permission_mode="yolo")


def test_the_mode_is_resolved_in_one_place() -> None:
    settings = AriesAgent(permission_mode="acceptEdits")
    assert effective_mode(settings) == "acceptEdits"
    assert effective_mode(settings, "plan") == "plan"  # --mode
    assert effective_mode(settings, auto_approve=True) == "bypassPermissions"  # --yes
    assert effective_mode(AriesAgent(permission_mode="plan", auto_approve=True)) == "bypassPermissions"
    assert effective_mode(AriesAgent(auto_approve=True), auto_approve=False) == "default"
    with pytest.raises(ValueError, match="Unknown permission mode"):
        effective_mode(settings, "yolo")
    # The run, the MCP client's step and the replay read the settings through it, never themselves (only
    # %aries status reads auto_approve, to name the alias).
    readers = [
        f"{rel}:{node.lineno}: {ast.unparse(node)}"
        for rel, tree in package_trees(skip=("aries_kernel/agent/permissions.py",))
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr in {"permission_mode", "auto_approve"}
        and ast.unparse(node.value).endswith("settings")
        and (rel, ast.unparse(node)) != ("magics/agent.py", "agent.settings.auto_approve")
    ]
    assert not readers, readers


def test_allow_for_the_rest_of_the_run_ends_with_the_run(repo: Path) -> None:
    second = ("Edit", {"file_path": "pkg/core.py", "old_string": "43", "new_string": "44"})
    agent, primary, _ = make_agent(
        repo, Reply(tool_calls=[EDIT]), Reply(tool_calls=[second]), Reply(text="ok")
    )
    asked = 0
    for event in agent.run("two edits"):
        if isinstance(event, ApprovalRequested):
            asked += 1
            event.approve(for_run=True)
    assert asked == 1 and (repo / "pkg" / "core.py").read_text().endswith("44\n")
    primary.script(
        Reply(tool_calls=[("Edit", {"file_path": "pkg/core.py", "old_string": "44", "new_string": "45"})])
    )
    events = run_all(agent, "again")  # a new run asks again; nobody answers: refused
    assert any(isinstance(event, ApprovalRequested) for event in events)
    assert (repo / "pkg" / "core.py").read_text().endswith("44\n")


# ------------------------------------------------------------------------------- the magic and the Repl


@pytest.fixture
def shell(repo: Path) -> Iterator[InteractiveShell]:
    ip = InteractiveShell.instance()
    ip.register_magics(AriesMagics)
    context = AriesContext(ip, root=repo)
    context.set_codebase(RecordingGraph())  # type: ignore[arg-type]
    set_context(ip, context)
    yield ip


def magic_agent(shell: InteractiveShell, *replies: Any) -> tuple[Agent, ScriptedClient]:
    from aries_kernel.context import get_context

    context = get_context(shell)
    primary = ScriptedClient(*replies)
    agent = Agent(context, router=ScriptedRouter(primary), settings=AriesAgent())
    context.lazy("agent", lambda ctx: agent)
    return agent, primary


def test_the_magic_sets_the_mode_per_run_and_status_shows_it(
    shell: InteractiveShell, repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent, primary = magic_agent(shell, Reply(tool_calls=[EDIT]), Reply(text="Planned."))
    started: list[RunStarted] = []
    agent.listeners.append(lambda event: started.append(event) if isinstance(event, RunStarted) else None)
    shell.run_line_magic("aries", "--mode plan make it return 43")
    assert started[-1].permission_mode == "plan"
    assert (repo / "pkg" / "core.py").read_text().endswith("42\n")  # refused without asking anyone
    result = [m for m in primary.requests[1].messages if m.role == "tool"][-1]
    assert "permission mode plan" in result.content and result.is_error
    assert agent.permission_mode == "default"  # the run's mode was for that run only
    assert "Permission mode: default; edits and commands asked" in str(
        shell.run_line_magic("aries", "status")
    )
    shell.run_line_magic("aries", "config permission_mode=acceptEdits")
    assert agent.settings.permission_mode == "acceptEdits"
    status = str(shell.run_line_magic("aries", "status"))
    assert "Permission mode: acceptEdits; edits inside the root allowed, commands asked" in status
    shell.run_line_magic("aries", "config permission_mode=default auto_approve=true")
    assert "Permission mode: bypassPermissions (auto_approve)" in str(shell.run_line_magic("aries", "status"))
    with pytest.raises(UsageError, match="--yes means --mode bypassPermissions"):
        shell.run_line_magic("aries", "--yes --mode plan go")
    with pytest.raises(UsageError, match="argument --mode: invalid choice"):
        shell.run_line_magic("aries", "--mode yolo go")
    capsys.readouterr()


SETTINGS_ATTEMPTS = """\
from aries_kernel.agent import agent_for
from aries_kernel.context import get_context
me = agent_for(get_context(get_ipython()))
tries = {}
def attempt(name, action):
    try:
        action()
        tries[name] = "changed"
    except Exception as exc:
        tries[name] = f"{type(exc).__name__}: {exc}"
attempt("config magic", lambda: get_ipython().run_line_magic("aries", "config auto_approve=True"))
attempt("config mode", lambda: get_ipython().run_line_magic("aries", "config permission_mode=bypassPermissions"))
attempt("nested run", lambda: get_ipython().run_line_magic("aries", "--mode bypassPermissions edit freely"))
attempt("attribute", lambda: setattr(me.settings, "auto_approve", True))
attempt("mode attribute", lambda: setattr(me.settings, "permission_mode", "bypassPermissions"))
attempt("set_trait", lambda: me.settings.set_trait("auto_approve", True))
attempt("run", lambda: next(me.run("edit freely", auto_approve=True)))
me.settings._trait_values["auto_approve"] = True  # behind validation's back
me.settings.pass_env_keys.append("ANTHROPIC_API_KEY")  # a list changed in place
"""


def test_repl_code_cannot_change_the_mode_or_the_approval_settings(
    shell: InteractiveShell, repo: Path
) -> None:
    agent, primary = magic_agent(
        shell,
        Reply(tool_calls=[("Repl", {"code": SETTINGS_ATTEMPTS})]),
        Reply(tool_calls=[("Repl", {"code": "%aries config auto_approve=True"})]),
        Reply(tool_calls=[EDIT]),
        Reply(text="done"),
        Reply(tool_calls=[EDIT]),
        Reply(text="done"),
    )
    asked: list[str] = []
    events: list[Event] = []
    for event in agent.run("escalate"):
        events.append(event)
        if isinstance(event, ApprovalRequested):
            asked.append(event.summary)
            event.deny()
    tries = shell.user_ns["tries"]
    assert "changed" not in tries.values(), tries
    assert tries["config magic"].startswith("UsageError: Settings cannot be changed while an agent run")
    assert tries["nested run"].startswith("UsageError: An agent run is in progress")
    assert "cannot be changed while an agent run is in progress" in tries["attribute"]
    assert "cannot be changed while an agent run is in progress" in tries["mode attribute"]
    assert "cannot be changed while an agent run is in progress" in tries["set_trait"]
    assert tries["run"].startswith("RunInProgressError")
    notices = [event.text for event in events if isinstance(event, Notice)]
    assert any("changed AriesAgent.auto_approve, AriesAgent.pass_env_keys; set back" in text for text in notices)
    first, second = [e for e in events if isinstance(e, ToolCallFinished) and e.name == "Repl"]
    assert "it was set back: only the user changes" in first.output
    assert "UsageError: Settings cannot be changed while an agent run is in progress" in second.output
    assert asked == ["Edit pkg/core.py (one occurrence)"]  # the Edit after the attempts was still asked
    settings = agent.settings
    assert (settings.auto_approve, settings.permission_mode, settings.pass_env_keys) == (False, "default", [])
    for event in agent.run("once more"):  # the next run asks too
        if isinstance(event, ApprovalRequested):
            asked.append(event.summary)
    assert len(asked) == 2 and (repo / "pkg" / "core.py").read_text().endswith("42\n")
    shell.run_line_magic("aries", "config auto_approve=True")  # the user, between runs, can
    assert agent.permission_mode == "bypassPermissions"
