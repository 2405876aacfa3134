"""Code-action mode (issue 13): the model writes fenced Python blocks, each runs as a Repl step in the kernel,
the outputs go back as text, a plain reply ends the run; approvals, sessions and events as with tool calls; chosen
by the setting, per run, or by itself when the server's chat template takes no tools."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aries_kernel.agent import Agent
from aries_kernel.agent.code_actions import INSTRUCTIONS, python_blocks
from aries_kernel.agent.events import (
    ApprovalRequested,
    Notice,
    RunFinished,
    ToolCallFinished,
    ToolCallStarted,
)
from aries_kernel.agent.settings import AriesAgent
from aries_kernel.models import ModelRouter
from tests.agent_scripted import FakeContext, ScriptedClient, ScriptedRouter
from tests.loopback import Reply, ScriptedModelServer

TWO_BLOCKS = "Let me compute it.\n```python\nanswer = 6 * 7\nprint(answer)\n```\nand check:\n```python\nanswer + 1\n```"


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "repo"
    folder.mkdir()
    monkeypatch.chdir(folder)  # the kernel runs in the project, so relative paths land inside it
    return folder


def scripted(root: Path, *replies: Any, **settings: Any) -> tuple[Agent, ScriptedClient]:
    primary = ScriptedClient(*replies)
    agent = Agent(
        FakeContext(root),
        router=ScriptedRouter(primary, ScriptedClient(slot="cheap")),
        settings=AriesAgent(**settings),
    )
    return agent, primary


def test_python_blocks_are_found_and_other_languages_are_text() -> None:
    text = "```bash\nls\n```\nthen\n```python\nx = 1\n```\n```\nprint(x)\n```\n```json\n{}\n```\n```py\ncut"
    assert python_blocks(text) == ["x = 1", "print(x)", "cut"]
    assert python_blocks("No code here, just `inline` code.") == []


def test_blocks_run_in_the_kernel_their_outputs_return_and_a_plain_reply_ends_the_run(root: Path) -> None:
    agent, primary = scripted(root, Reply(text=TWO_BLOCKS), Reply(text="The answer is 42."), actions="code")
    events = list(agent.run("what is six times seven?"))
    first, second = primary.requests
    assert first.tools == [] and INSTRUCTIONS in first.system  # no schemas: the prompt says how to act
    started = [e for e in events if isinstance(e, ToolCallStarted)]
    assert [(e.name, e.arguments["code"]) for e in started] == [
        ("Repl", "answer = 6 * 7\nprint(answer)"),
        ("Repl", "answer + 1"),
    ]
    outputs = [e.output for e in events if isinstance(e, ToolCallFinished)]
    assert "42" in outputs[0] and "43" in outputs[1]
    assert agent.shell.user_ns["answer"] == 42  # it ran in the kernel's namespace
    assert [m.role for m in second.messages] == ["user", "assistant", "user"]  # no tool messages on the wire
    assert second.messages[1].content == TWO_BLOCKS and not second.messages[1].tool_calls
    assert re.fullmatch(
        r"\[block 1 output\]\n.*42.*\n\n\[block 2 output\]\n.*43.*", second.messages[2].content, re.S
    )
    finished = events[-1]
    assert isinstance(finished, RunFinished) and (finished.reason, finished.turns) == ("done", 2)
    session = agent.session
    assert session is not None and [call["name"] for call in session.tool_calls] == ["Repl", "Repl"]
    assert session.messages[-1].content == "The answer is 42."


def test_an_effect_inside_a_block_is_asked_for(root: Path) -> None:
    code = "```python\nwith open('made.txt', 'w') as out:\n    out.write('x')\n```"
    asked: list[ApprovalRequested] = []

    def deny(request: ApprovalRequested) -> None:
        asked.append(request)
        request.deny("not now")

    agent, primary = scripted(root, Reply(text=code), Reply(text="I could not write it."), actions="code")
    events = list(agent.run("make a file", approver=deny))
    assert [(r.name, r.effect, r.summary) for r in asked] == [("Repl", "edit", "create made.txt")]
    assert not (root / "made.txt").exists()
    result = next(e for e in events if isinstance(e, ToolCallFinished))
    assert "[Refused by the Repl guard: " in result.output
    assert "Refused by the Repl guard" in primary.requests[1].messages[-1].content  # the model is told
    agent, _ = scripted(root, Reply(text=code), Reply(text="Written."), actions="code")
    list(agent.run("make a file", approver=lambda request: request.approve()))
    assert (root / "made.txt").read_text() == "x"


def test_an_interrupt_in_a_block_leaves_a_well_formed_history(root: Path) -> None:
    reply = Reply(text="```python\nraise KeyboardInterrupt\n```\n```python\nnever = 1\n```")
    agent, _ = scripted(root, reply, actions="code")
    finished = list(agent.run("go"))[-1]
    assert isinstance(finished, RunFinished) and finished.reason == "interrupted"
    session = agent.session
    assert session is not None
    assert [m.role for m in session.messages] == ["user", "assistant", "user"]
    assert re.fullmatch(
        r"\[block 1 failed\]\nInterrupted after \d+\.\d s: the code ran partly; its effects so far are kept\."
        r"\n\n\[block 2 failed\]\nNot run: interrupted by the user\.",
        session.messages[-1].content,
    )
    assert "never" not in agent.shell.user_ns


def test_the_mode_is_chosen_per_run_and_tools_stay_the_default(root: Path) -> None:
    agent, primary = scripted(root, Reply(text="```python\n1\n```"), Reply(text="```python\n2\n```"))
    list(agent.run("tools by default"))
    assert primary.requests[0].tools and INSTRUCTIONS not in primary.requests[0].system
    assert len(primary.requests) == 1  # a plain reply, though it holds a block, ends a tool-calling run
    list(agent.run("now in code", actions="code"))
    assert primary.requests[-1].tools == []
    with pytest.raises(ValueError, match="Unknown actions"):
        agent.run("x", actions="telepathy")


def test_a_server_without_tool_support_gets_code_actions_by_itself(
    server: ScriptedModelServer, make_router: Callable[..., ModelRouter], root: Path
) -> None:
    server.props = {"default_generation_settings": {"n_ctx": 8192}, "chat_template": "{{ messages }}"}
    router = make_router()
    router.set_slot("primary", "local", base_url=server.openai_url)
    agent = Agent(FakeContext(root), router=router, settings=AriesAgent())
    server.script(Reply(text="```python\nfound = sum(range(5))\nfound\n```"), Reply(text="The sum is 10."))
    events = list(agent.run("sum 0..4"))
    notice = next(e for e in events if isinstance(e, Notice) and "takes no tool calls" in e.text)
    assert "code-action mode" in notice.text
    first, second = server.requests
    assert "tools" not in first.body and INSTRUCTIONS in first.body["messages"][0]["content"]
    assert [m["role"] for m in second.body["messages"]] == ["system", "user", "assistant", "user"]
    assert "10" in second.body["messages"][-1]["content"]
    assert agent.shell.user_ns["found"] == 10
    assert isinstance(events[-1], RunFinished) and events[-1].reason == "done"
