"""MCP servers as tools of ``%aries``: a scripted session whose model calls the tools of a small stdio MCP
server (tests/mcp_fixture_server.py): listed while lean, widened, approved, run, redacted and truncated; the
server killed mid-session is reported and the run goes on; a server that cannot start is reported; the
permission modes weigh the tools as they weigh Bash; nothing is left running after close."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aries_kernel.agent.events import ApprovalRequested, Event, Notice, PhaseWidened, ToolCallFinished
from aries_kernel.agent.loop import Agent
from aries_kernel.agent.mcp_tools import McpHook, McpServers, tool_name
from aries_kernel.agent.settings import AriesAgent
from aries_kernel.models import types as mt
from aries_kernel.settings_owner import SettingsOwner
from tests.agent_scripted import ScriptedClient, ScriptedRouter
from tests.loopback import Reply
from tests.test_mcp_server import http_server

FIXTURE = f"{sys.executable} -m tests.mcp_fixture_server"
ADD = tool_name("fixture", "add")
PID = tool_name("fixture", "pid")
LEAKY = tool_name("fixture", "leaky")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    return root.resolve()


@pytest.fixture
def hook() -> Iterator[McpHook]:
    servers = McpHook(McpServers(timeout=60))
    try:
        yield servers
    finally:
        servers.close()
        assert not [t for t in threading.enumerate() if t.name == "aries-mcp-loop"]


def _agent(repo: Path, hook: McpHook, *replies: Any, **settings: Any) -> tuple[Agent, ScriptedClient]:
    primary = ScriptedClient(*replies)
    config = AriesAgent(mcp_servers={"fixture": {"command": FIXTURE, "cwd": os.getcwd()}}, **settings)
    agent = Agent(root=repo, router=ScriptedRouter(primary), settings=config, hooks=[hook])
    return agent, primary


def _run(agent: Agent, prompt: str, approve: bool = True) -> list[Event]:
    events = []
    for event in agent.run(prompt):
        if isinstance(event, ApprovalRequested):
            event.approve() if approve else event.deny("not now")
        events.append(event)
    return events


def _finished(events: list[Event]) -> list[ToolCallFinished]:
    return [event for event in events if isinstance(event, ToolCallFinished)]


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie waiting for the SDK's child watcher counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    # Reaped before the open (no file), or between the open and the read (ESRCH).
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def _last_tool_output(request: mt.ModelRequest) -> str:
    return next(m.content for m in reversed(request.messages) if m.role == "tool")


def test_a_session_widens_to_mcp_tools_asks_runs_and_survives_the_server_dying(
    repo: Path, hook: McpHook
) -> None:
    killed: list[int] = []

    def kill_then_call(request: mt.ModelRequest) -> Reply:
        pid = int(_last_tool_output(request))
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)
        while _alive(pid):
            time.sleep(0.01)
        return Reply(tool_calls=[(ADD, {"a": 1, "b": 1})])

    agent, primary = _agent(
        repo,
        hook,
        Reply(tool_calls=[(ADD, {"a": "2", "b": 40})]),  # a number written as a string, as models send them
        Reply(tool_calls=[(LEAKY, {}), (PID, {})]),
        kill_then_call,
        Reply(text="The fixture server is gone; done without it."),
    )
    events = _run(agent, "add numbers with the MCP server")
    first, second, third, fourth = primary.requests

    # Lean: the MCP tools are named with their arguments, their schemas are not sent.
    assert ADD not in [tool.name for tool in first.tools]
    assert f"- {ADD}(a, b)" in first.system and f"- {PID}()" in first.system
    # The call widened the phase and was asked for like Bash, then ran in the server.
    assert [event.tool for event in events if isinstance(event, PhaseWidened)] == [ADD]
    asked = [event for event in events if isinstance(event, ApprovalRequested)]
    assert [event.name for event in asked][:1] == [ADD] and asked[0].effect == "command"
    add, leaky, pid, after_death = _finished(events)
    assert (add.output, add.is_error) == ("2 + 40 = 42", False)
    assert {ADD, PID, LEAKY} <= {tool.name for tool in second.tools}  # widened: schemas sent

    # Output is redacted and truncated like every tool's.
    assert "sk-ant-" not in leaky.output and "[REDACTED:anthropic]" in leaky.output
    assert "characters" in leaky.output and len(leaky.output) < 13_000
    assert int(pid.output) == killed[0]

    # The killed server: the call fails with a clear message, the user hears of it, the run goes on.
    assert after_death.is_error and "MCP server 'fixture' is gone" in after_death.output
    notices = [event.text for event in events if isinstance(event, Notice)]
    assert any("MCP server 'fixture' is not available" in text for text in notices)
    assert ADD not in [tool.name for tool in fourth.tools] and ADD not in fourth.system
    assert events[-1].reason == "done"


def test_modes_weigh_mcp_tools_like_bash(repo: Path, hook: McpHook) -> None:
    plan, _ = _agent(repo, hook, Reply(tool_calls=[(ADD, {"a": 1, "b": 2})]), permission_mode="plan")
    (refused,) = _finished(_run(plan, "add"))
    assert refused.is_error and "permission mode plan" in refused.output

    denied, _ = _agent(repo, hook, Reply(tool_calls=[(ADD, {"a": 1, "b": 2})]))
    (not_run,) = _finished(_run(denied, "add", approve=False))
    assert not_run.is_error and "did not allow" in not_run.output

    bypass, _ = _agent(
        repo, hook, Reply(tool_calls=[(ADD, {"a": 1, "b": 2})]), permission_mode="bypassPermissions"
    )
    events = _run(bypass, "add")
    assert not [event for event in events if isinstance(event, ApprovalRequested)]
    assert _finished(events)[0].output == "1 + 2 = 3"


def test_a_server_that_cannot_start_is_reported_and_the_agent_goes_on(repo: Path, hook: McpHook) -> None:
    primary = ScriptedClient(Reply(text="Working without it."))
    settings = AriesAgent(mcp_servers={"missing": "/nonexistent/mcp-server --stdio"})
    agent = Agent(root=repo, router=ScriptedRouter(primary), settings=settings, hooks=[hook])
    events = _run(agent, "hello")
    notices = [event.text for event in events if isinstance(event, Notice)]
    assert any("MCP server 'missing' is not available" in text and "No such file" in text for text in notices)
    assert events[-1].reason == "done"
    assert "mcp__" not in primary.requests[0].system
    assert sum("MCP server 'missing'" in text for text in notices) == 1  # said once, not every turn


def test_mcp_servers_cannot_be_changed_during_a_run() -> None:
    owner = SettingsOwner()
    settings = owner.adopt(AriesAgent())
    with owner.untrusted("the agent"):
        with pytest.raises(Exception, match="cannot be changed while an agent run"):
            settings.mcp_servers = {"evil": "rm -rf /"}
        settings.mcp_servers["sneaky"] = "touch owned"  # mutated in place behind the lock: set back after
    assert settings.mcp_servers == {}


def test_a_url_server_with_headers_serves_the_agent(small_repo: Path, tmp_path: Path, hook: McpHook) -> None:
    with http_server(small_repo, tmp_path / "vault", "tok-123") as url:
        hook.servers.start({"aries": {"url": url, "headers": {"Authorization": "Bearer tok-123"}}})
        assert hook.servers.problems() == []
        tools = hook.servers.tools()
        assert (
            tool_name("aries", "find_symbol") in tools
            and tools[tool_name("aries", "top_files")].effect == "command"
        )
        text = hook.servers.call("aries", "find_symbol", {"name": "Engine"})
        assert "app/core.py" in text
        hook.servers.close()  # before the server goes away, so nothing is left waiting on it


def test_without_the_mcp_extra_a_server_is_reported_with_the_extra_to_install(
    repo: Path, hook: McpHook, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)  # as if the extra were not installed
    primary = ScriptedClient(Reply(text="Working without it."))
    settings = AriesAgent(mcp_servers={"tools": "some-mcp-server --stdio"})
    agent = Agent(root=repo, router=ScriptedRouter(primary), settings=settings, hooks=[hook])
    events = _run(agent, "hello")
    notices = [event.text for event in events if isinstance(event, Notice)]
    assert any(
        "MCP server 'tools' is not available" in text and "pip install 'aries-kernel[mcp]'" in text
        for text in notices
    ), notices
    assert events[-1].reason == "done"
