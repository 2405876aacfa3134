"""The agent loop in process, against a scripted model client (the end-to-end tests use the real router)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aries_kernel.agent import Agent, AgentHook
from aries_kernel.agent.compaction import PRUNED_MARKER, SUMMARY_HEADER
from aries_kernel.agent.events import (
    ApprovalRequested,
    Compaction,
    Event,
    MemoryRetrieved,
    Notice,
    PhaseWidened,
    Reindexed,
    RunFinished,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from aries_kernel.agent.phases import LEAN
from aries_kernel.agent.settings import AriesAgent
from aries_kernel.agent.tools import TOOLS
from aries_kernel.models import types as mt
from tests.agent_scripted import FakeContext, ScriptedClient, ScriptedRouter
from tests.loopback import Reply


class RecordingGraph:
    """Stands in for the code graph: records what the loop asked to re-index."""

    def __init__(self) -> None:
        self.reindexed: list[list[str]] = []

    def reindex(self, paths: list[str]) -> None:
        self.reindexed.append(list(paths))

    def top_files(self, limit: int) -> Any:
        raise RuntimeError("no graph in this test")


def recording_context(root: Path, shell: Any = None, build: bool = False) -> FakeContext:
    """A fake kernel context with a recording code graph."""
    return FakeContext(root, shell=shell, codebase=RecordingGraph(), build=build)


@pytest.fixture
def sigint_as_in_a_kernel() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt during the test as in a kernel, whatever this process inherited: a shell
    starts a background job (.ci/run's pytest) with SIGINT ignored, and Python then leaves it ignored."""
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, inherited)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "core.py").write_text("def run():\n    return 42\n")
    return root


def make_agent(
    repo: Path, *replies: Any, settings: AriesAgent | None = None, **client: Any
) -> tuple[Agent, ScriptedClient, ScriptedClient]:
    primary = ScriptedClient(*replies, **client)
    cheap = ScriptedClient(slot="cheap")
    agent = Agent(
        recording_context(repo), router=ScriptedRouter(primary, cheap), settings=settings or AriesAgent()
    )
    return agent, primary, cheap


def run_all(agent: Agent, prompt: str, **options: Any) -> list[Event]:
    return list(agent.run(prompt, **options))


def names(request: mt.ModelRequest) -> list[str]:
    return [tool.name for tool in request.tools]


def test_lean_first_then_a_gated_call_widens_runs_and_the_next_request_is_full(repo: Path) -> None:
    agent, primary, _ = make_agent(
        repo,
        Reply(tool_calls=[("Grep", {"pattern": "def run"})]),
        Reply(text="Found it."),
    )
    events = run_all(agent, "where is run defined?")
    first, second = primary.requests
    assert names(first) == list(LEAN["repl"])
    assert "- Grep(pattern, path?, glob?, case_insensitive?)" in first.system
    widened = [event for event in events if isinstance(event, PhaseWidened)]
    assert [event.tool for event in widened] == ["Grep"]
    finished = next(event for event in events if isinstance(event, ToolCallFinished))
    assert not finished.is_error and finished.output == "pkg/core.py:1: def run():"
    assert names(second) == list(TOOLS)
    assert "Grep(" not in second.system  # nothing gated left to list
    assert isinstance(events[-1], RunFinished) and events[-1].reason == "done" and events[-1].turns == 2
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Found it."
    # the next prompt starts lean again
    primary.script(Reply(text="ok"))
    run_all(agent, "again")
    assert names(primary.requests[-1]) == list(LEAN["repl"])


def test_the_phase_falls_back_to_lean_after_turns_without_gated_calls(repo: Path) -> None:
    repl = ("Repl", {"code": "1"})
    agent, primary, _ = make_agent(
        repo,
        Reply(tool_calls=[("Glob", {"pattern": "*"})]),
        Reply(tool_calls=[repl]),
        Reply(tool_calls=[repl]),
        Reply(tool_calls=[repl]),
        Reply(text="done"),
    )
    run_all(agent, "go")
    full, lean = len(TOOLS), len(LEAN["repl"])
    assert [len(request.tools) for request in primary.requests] == [lean, full, full, lean, lean]


def test_memory_tools_run_without_widening(repo: Path) -> None:
    agent, primary, _ = make_agent(
        repo, Reply(tool_calls=[("VaultSearch", {"query": "cache"})]), Reply(text="x")
    )
    events = run_all(agent, "what do we know?")
    assert not [event for event in events if isinstance(event, PhaseWidened)]
    assert names(primary.requests[1]) == [*LEAN["repl"], "VaultSearch"]


def test_a_failing_tool_is_reported_to_the_model_and_the_loop_goes_on(repo: Path) -> None:
    agent, primary, _ = make_agent(
        repo,
        Reply(
            tool_calls=[("Read", {"file_path": "pkg/core.py", "offset": "not a number"}), ("NoSuchTool", {})]
        ),
        Reply(tool_calls=[("Repl", {"code": "raise ValueError('boom')"})]),
        Reply(text="Recovered."),
    )
    events = run_all(agent, "go")
    results = [m for m in primary.requests[1].messages if m.role == "tool"]
    assert results[0].is_error and "offset must be an integer" in results[0].content
    assert results[1].is_error and "no tool named 'NoSuchTool'" in results[1].content
    repl_result = [m for m in primary.requests[2].messages if m.role == "tool"][-1]
    assert "ValueError: boom" in repl_result.content
    assert events[-1].reason == "done" and len(primary.requests) == 3


def test_edits_need_approval_and_the_answer_is_recorded(repo: Path) -> None:
    edit = ("Edit", {"file_path": "pkg/core.py", "old_string": "42", "new_string": "43"})
    agent, primary, _ = make_agent(
        repo, Reply(tool_calls=[edit]), Reply(text="no"), Reply(tool_calls=[edit]), Reply(text="yes")
    )
    events = run_all(agent, "change it")  # nobody answers: refused, the model is told how to allow
    refused = [m for m in primary.requests[1].messages if m.role == "tool"][-1]
    assert refused.is_error and "--yes" in refused.content
    assert (repo / "pkg" / "core.py").read_text() == "def run():\n    return 42\n"
    assert any(isinstance(event, ApprovalRequested) for event in events)

    for event in agent.run("change it, please"):
        if isinstance(event, ApprovalRequested):
            assert event.summary == "Edit pkg/core.py (one occurrence)"
            event.approve()
    assert (repo / "pkg" / "core.py").read_text() == "def run():\n    return 43\n"
    session = agent.session
    assert session is not None
    assert [(a["approved"], a["by"]) for a in session.approvals] == [(False, "nobody"), (True, "user")]

    # "allow for this run": asked once, the later calls of the run go through
    first = ("Edit", {"file_path": "pkg/core.py", "old_string": "return 43", "new_string": "return 53"})
    second = ("Edit", {"file_path": "pkg/core.py", "old_string": "return 53", "new_string": "return 54"})
    primary.script(Reply(tool_calls=[first]), Reply(tool_calls=[second]), Reply(text="ok"))
    asked = 0
    for event in agent.run("bump it twice"):
        if isinstance(event, ApprovalRequested):
            asked += 1
            event.approve(for_run=True)
    assert asked == 1 and (repo / "pkg" / "core.py").read_text() == "def run():\n    return 54\n"
    assert [a["by"] for a in session.approvals][-2:] == ["user", "policy"]


def test_changed_files_are_reindexed_before_the_next_turn(repo: Path) -> None:
    agent, primary, _ = make_agent(
        repo,
        Reply(tool_calls=[("Write", {"file_path": "pkg/new.py", "content": "X = 1\n"})]),
        Reply(tool_calls=[("Bash", {"command": "echo 'Y = 2' >> pkg/core.py"})]),
        Reply(text="done"),
    )
    graph = agent.context.codebase
    events = run_all(agent, "go", auto_approve=True)
    assert graph.reindexed == [["pkg/new.py"], ["pkg/core.py"]]
    assert [e.paths for e in events if isinstance(e, Reindexed)] == [["pkg/new.py"], ["pkg/core.py"]]
    (repo / "pkg" / "cell_made.py").write_text("Z = 3\n")  # a change made by a cell between prompts
    primary.script(Reply(text="ok"))
    run_all(agent, "next")
    assert graph.reindexed[-1] == ["pkg/cell_made.py"]


def test_compaction_prunes_then_summarizes_and_keeps_the_system_prompt(repo: Path) -> None:
    big = "print('x' * 6000)"
    settings = AriesAgent(protected_tool_tokens=300, tool_output_chars=6000)
    agent, primary, cheap = make_agent(
        repo,
        *[Reply(text="thinking " * 500, tool_calls=[("Repl", {"code": big})]) for _ in range(5)],
        Reply(text="done"),
        settings=settings,
        context_window=8000,
    )
    cheap.script(Reply(text="## Goal\n- print things\n## Work done\n- printed x four times"))
    summarized_away: list[int] = []

    class Extract(AgentHook):
        def before_summarize(self, agent: Agent, older: list[mt.Message]) -> Iterator[Event]:
            summarized_away.append(len(older))
            return iter(())

    agent.hooks.append(Extract())
    events = run_all(agent, "print a lot")
    compactions = [event for event in events if isinstance(event, Compaction)]
    summarized = next(event for event in compactions if event.stage == "summarize")
    same_turn = [event.stage for event in compactions if event.turn == summarized.turn]
    assert same_turn == ["prune", "summarize"]  # pruning was tried first and was not enough
    assert summarized_away and summarized_away[0] == summarized.messages_affected
    limit = 0.7 * 8000
    assert summarized.tokens_after <= limit < summarized.tokens_before
    request_after = primary.requests[summarized.turn - 1]
    assert primary.estimate_tokens(request_after) <= limit
    assert request_after.system.startswith("You are Aries")
    assert request_after.messages[0].content.startswith(SUMMARY_HEADER)
    assert "printed x four times" in request_after.messages[0].content
    assert cheap.requests and "Summarize this session history" in cheap.requests[0].messages[0].content
    assert agent.session is not None and agent.session.usage["cheap"].calls == len(cheap.requests)
    assert any(m.content.startswith(PRUNED_MARKER) for r in primary.requests for m in r.messages)
    # every tool result in every request still follows its call
    for request in primary.requests:
        called = {c.id for m in request.messages for c in m.tool_calls}
        assert all(m.tool_call_id in called for m in request.messages if m.role == "tool")


def test_sessions_are_persisted_and_resume_continues(repo: Path) -> None:
    agent, _, _ = make_agent(
        repo, Reply(tool_calls=[("Repl", {"code": "a = 6 * 7\na"})]), Reply(text="It is 42.")
    )
    run_all(agent, "compute")
    session = agent.session
    assert session is not None and session.path.parent == repo / ".aries" / "sessions"
    kinds = [json.loads(line)["kind"] for line in session.path.read_text().splitlines()]
    assert kinds[:3] == ["meta", "prompt", "message"] and "tool" in kinds and "usage" in kinds
    assert session.repl_steps() == ["a = 6 * 7\na"]

    fresh, primary, _ = make_agent(repo, Reply(text="Still 42."))
    resumed = fresh.resume()
    assert resumed.id == session.id and len(resumed.messages) == 4 and resumed.usage["primary"].calls == 2
    run_all(fresh, "and now?")
    request = primary.requests[0]
    assert [m.role for m in request.messages] == ["user", "assistant", "tool", "assistant", "user"]
    assert request.messages[2].content == "42"
    with pytest.raises(FileNotFoundError, match="No saved session matching 'zzz'"):
        fresh.resume("zzz")


def interrupted_stream(request: mt.ModelRequest) -> Iterator[mt.StreamEvent]:
    yield mt.StreamText("I was saying")
    raise KeyboardInterrupt


def test_an_interrupt_mid_stream_stops_and_keeps_what_was_said(repo: Path) -> None:
    agent, primary, _ = make_agent(repo)
    primary.stream = interrupted_stream  # type: ignore[method-assign]
    events = run_all(agent, "talk")
    assert isinstance(events[-1], RunFinished) and events[-1].reason == "interrupted"
    session = agent.session
    assert session is not None
    assert session.messages[-1].role == "assistant" and session.messages[-1].content.startswith(
        "I was saying"
    )
    on_disk = [json.loads(line) for line in session.path.read_text().splitlines()]
    assert on_disk[-2]["kind"] == "message" and on_disk[-2]["message"]["content"] == "I was saying"
    assert on_disk[-1] | {"time": 0} == {
        "kind": "stop",
        "after": 2,
        "why": "interrupted by the user",
        "time": 0,
    }


def test_closing_the_run_between_tool_calls_answers_the_pending_ones(repo: Path) -> None:
    agent, _, _ = make_agent(repo, Reply(tool_calls=[("Repl", {"code": "1"}), ("Repl", {"code": "2"})]))
    run = agent.run("two steps")
    for event in run:
        if isinstance(event, ToolCallFinished):
            run.close()  # what the magic does when the interrupt lands while it is rendering
            break
    session = agent.session
    assert session is not None
    assert [m.role for m in session.messages] == ["user", "assistant", "tool", "tool"]
    assert session.messages[-1].content == "Not run: interrupted by the user."
    closed = agent.ending
    assert closed is not None and closed.reason == "interrupted" and closed.turns == 1, (
        "its accounting is kept"
    )


def test_an_interrupt_in_a_listener_still_leaves_the_runs_accounting(repo: Path) -> None:
    """A Stop's SIGINT can land while a listener runs, outside the loop's own interrupt handling; the run is
    closed at once (not when the collector gets to it), so the magic finds its turns and tokens."""
    agent, _, _ = make_agent(repo, Reply(tool_calls=[("Repl", {"code": "1"})], input_tokens=120))

    def interrupt_at_the_tool(event: Event) -> None:
        if isinstance(event, ToolCallStarted):
            raise KeyboardInterrupt

    agent.listeners.append(interrupt_at_the_tool)
    run = agent.run("one step")
    try:
        for _ in run:
            pass
        pytest.fail("the interrupt did not come through")
    except KeyboardInterrupt:  # as the magic does, while the interrupt's traceback still holds the frames
        run.close()
        closed = agent.ending
    assert closed is not None and (closed.reason, closed.turns) == ("interrupted", 1)
    assert (closed.input_tokens, closed.output_tokens) == (120, 7), "the turn that was answered is counted"
    assert not agent.running


def test_a_stop_landing_as_the_run_ends_its_own_interrupt_still_leaves_the_accounting(repo: Path) -> None:
    """A Stop sends SIGINT (the loop catches it in the tool and ends the run) and sets the panel's flag, on which
    the magic closes the run at the next event: that can be the loop's closing Notice, after its interrupt
    handling, where no RunFinished can follow. The run's ending is known by then."""
    agent, _, _ = make_agent(
        repo, Reply(tool_calls=[("Repl", {"code": "raise KeyboardInterrupt"})], input_tokens=90)
    )
    run = agent.run("one step")
    for event in run:
        if isinstance(event, Notice):
            run.close()
            break
    ending = agent.ending
    assert ending is not None and (ending.reason, ending.turns, ending.input_tokens) == ("interrupted", 1, 90)


def test_max_turns_stops_the_run(repo: Path) -> None:
    agent, primary, _ = make_agent(repo, *[Reply(tool_calls=[("Repl", {"code": "1"})]) for _ in range(5)])
    events = run_all(agent, "loop", max_turns=2)
    assert events[-1].reason == "max_turns" and len(primary.requests) == 2


def test_hooks_add_system_sections_and_events(repo: Path) -> None:
    class Memory(AgentHook):
        def system_sections(self, agent: Agent) -> list[str]:
            return ["WARM CONTEXT"]

        def before_turn(self, agent: Agent, turn: int) -> Iterator[Event]:
            agent.turn_context.append("NOTE OFFERED")
            yield MemoryRetrieved(["a note"], turn=turn)

    agent, primary, _ = make_agent(repo, Reply(text="hi"))
    agent.hooks.append(Memory())
    seen: list[Event] = []
    agent.listeners.append(seen.append)
    events = run_all(agent, "hello")
    system = primary.requests[0].system
    assert system.startswith("WARM CONTEXT") and system.endswith("NOTE OFFERED")
    assert any(isinstance(event, MemoryRetrieved) for event in events) and seen == events
    assert agent.turn_context == []


def test_a_hook_factory_registered_on_a_context_joins_that_contexts_agent_only(repo: Path) -> None:
    from aries_kernel import agent as agent_package
    from aries_kernel.agent.memory import MemoryHook

    class Marker(AgentHook):
        def status(self, agent: Agent) -> str | None:
            return "Marker: on"

    context = recording_context(repo, build=True)
    agent_package.register_hook(context, lambda agent: Marker())
    built = agent_package.agent_for(context)
    assert Marker in [type(hook) for hook in built.hooks]
    from aries_kernel.magics.agent import agent_status

    assert "Marker: on" in agent_status(built.context).splitlines()
    other = agent_package.agent_for(recording_context(repo, build=True))  # a second kernel, same repository
    assert Marker not in [type(hook) for hook in other.hooks]
    assert MemoryHook in [type(hook) for hook in other.hooks]  # the plug-ins' hooks join every agent


def test_a_model_error_ends_the_run_with_its_message_and_a_well_formed_transcript(repo: Path) -> None:
    from aries_kernel.models.errors import AuthenticationError

    agent, _, _ = make_agent(repo, AuthenticationError("The key was rejected (401); set ANTHROPIC_API_KEY."))
    events = run_all(agent, "hello")
    assert events[-1].reason == "error" and "key was rejected" in events[-1].detail
    session = agent.session
    assert session is not None
    # No assistant text the model did not write: the failure is noted for the user's transcript only.
    assert [m.role for m in session.messages] == ["user"]
    assert session.stops == [(1, "the model call failed")]


def test_an_interrupt_inside_a_tool_stops_the_run_and_answers_the_calls_left(repo: Path) -> None:
    agent, primary, _ = make_agent(
        repo,
        Reply(tool_calls=[("Repl", {"code": "raise KeyboardInterrupt"}), ("Repl", {"code": "never = 1"})]),
    )
    events = run_all(agent, "run two cells")
    assert events[-1].reason == "interrupted" and len(primary.requests) == 1
    session = agent.session
    assert session is not None
    results = [m.content for m in session.messages if m.role == "tool"]
    assert re.fullmatch(
        r"Interrupted after \d+\.\d s: the code ran partly; its effects so far are kept\.", results[0]
    )
    assert results[1] == "Not run: interrupted by the user."
    assert "never" not in agent.shell.user_ns


PLANTED = "sk-ant-api03-" + "T" * 40  # printed by the step before it stops


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        (
            "Repl",
            {"code": f"for i in range(5): print(f'tick {{i}}')\nprint({PLANTED!r})\nraise KeyboardInterrupt"},
        ),
        # The command interrupts this process as a kernel interrupt would, while the tool waits for it.
        ("Bash", {"command": f"seq -f 'tick %g' 0 4; echo {PLANTED}; kill -INT {os.getpid()}; sleep 30"}),
    ],
)
@pytest.mark.usefixtures("sigint_as_in_a_kernel")
def test_an_interrupted_step_keeps_what_it_printed_for_its_card_and_the_model(
    repo: Path, name: str, arguments: dict[str, Any]
) -> None:
    _interrupted_step(repo, name, arguments)


def _interrupted_step(repo: Path, name: str, arguments: dict[str, Any]) -> None:
    agent, primary, _ = make_agent(repo, Reply(tool_calls=[(name, arguments)]))
    events = run_all(agent, "tick five times, then wait", auto_approve=True)
    assert isinstance(events[-1], RunFinished) and events[-1].reason == "interrupted"
    (finished,) = [e for e in events if isinstance(e, ToolCallFinished)]
    assert finished.interrupted and finished.is_error and finished.name == name
    ticks = "\n".join(f"tick {i}" for i in range(5))
    assert ticks in finished.output and "so far are kept" in finished.output, finished.output
    assert PLANTED not in finished.output and "[REDACTED" in finished.output
    session = agent.session
    assert session is not None
    (result,) = [m for m in session.messages if m.role == "tool"]
    assert result.content == finished.output, "the model is sent what the card shows"
    assert len(primary.requests) == 1


@pytest.mark.usefixtures("sigint_as_in_a_kernel")
@pytest.mark.parametrize("landing", ["as the command starts", "as its output's reader starts"])
def test_an_interrupt_before_the_wait_kills_the_command_and_keeps_its_output(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, landing: str
) -> None:
    # A kernel interrupt that lands after the command started but before the tool waits for it (a loaded machine,
    # a command that signals the kernel at once) left the command running and its output unread (CI runs:
    # "Interrupted after 0.0 s" with no ticks, and "subprocess ... is still running" in a later test). The SIGINT
    # is sent here once the command has ticked, from inside the call that starts the command or its reader.
    from aries_kernel.agent import tools

    marker = tmp_path / "ticked"
    started: list[subprocess.Popen[bytes]] = []

    def interrupt_once_ticked() -> None:
        deadline = time.monotonic() + 30
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        signal.raise_signal(signal.SIGINT)
        time.sleep(0.05)  # the handler runs at the next Python line: here, inside the call

    class InterruptedPopen(subprocess.Popen):  # type: ignore[type-arg]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            started.append(self)
            interrupt_once_ticked()

    if landing == "as the command starts":
        monkeypatch.setattr(tools.subprocess, "Popen", InterruptedPopen)
    else:
        output_init = tools._Output.__init__

        def interrupted_output(self: Any, process: subprocess.Popen[bytes]) -> None:
            started.append(process)
            interrupt_once_ticked()
            output_init(self, process)

        monkeypatch.setattr(tools._Output, "__init__", interrupted_output)
    command = f"seq -f 'tick %g' 0 4; touch {marker}; sleep 30"
    agent, _, _ = make_agent(repo, Reply(tool_calls=[("Bash", {"command": command})]))
    events = run_all(agent, "tick five times, then wait", auto_approve=True)
    assert isinstance(events[-1], RunFinished) and events[-1].reason == "interrupted"
    (finished,) = [e for e in events if isinstance(e, ToolCallFinished)]
    assert finished.interrupted and "tick 4" in finished.output, finished.output
    (process,) = started
    assert process.returncode is not None, "the command was left running"


def test_a_torn_last_line_is_skipped_and_a_corrupt_middle_line_is_named(repo: Path) -> None:
    from aries_kernel.agent.session import AgentSession

    session = AgentSession.create(repo)
    session.add_prompt("hi")
    session.add_message(mt.Message("user", "hi"))
    with session.path.open("a") as handle:
        handle.write('{"kind": "message", "message": {"role": "assis')  # a kill mid-write
    assert [m.content for m in AgentSession.load(session.path).messages] == ["hi"]
    lines = session.path.read_text().splitlines()
    session.path.write_text("\n".join([lines[0], "not json", *lines[1:]]) + "\n")
    with pytest.raises(ValueError, match=r":2 is not valid JSON"):
        AgentSession.load(session.path)


class IndexingGraph:
    """A code graph still being built, until the test says it is ready."""

    def __init__(self) -> None:
        self.ready = False
        self.started = 0

    def index_in_background(self) -> None:
        self.started += 1

    def status(self) -> str:
        return "indexing 120/27,330 files\nroot: found .git"

    def top_files(self, limit: int) -> Any:
        import pandas as pd

        return pd.DataFrame({"file": ["pkg/core.py"]})

    def communities(self) -> Any:
        import pandas as pd

        return pd.DataFrame({"file": ["pkg/core.py"], "label": ["pkg"]})


def test_the_first_request_does_not_wait_for_the_index_and_the_map_joins_once_ready(repo: Path) -> None:
    agent, primary, _ = make_agent(repo, Reply(tool_calls=[("Repl", {"code": "1"})]), Reply(text="ok"))
    graph = IndexingGraph()
    agent.context.codebase = graph
    run_all(agent, "first")
    first, second = primary.requests
    for request in (first, second):
        assert "The code graph is being built: indexing 120/27,330 files." in request.system
        assert "Most central files" not in request.system
    assert graph.started  # asked to index (a no-op when it already is), never waited on
    graph.ready = True
    primary.script(Reply(text="ok"))
    run_all(agent, "second")
    assert "Most central files (PageRank): pkg/core.py" in primary.requests[-1].system
    assert "- pkg: pkg/core.py" in primary.requests[-1].system
    assert "being built" not in primary.requests[-1].system
