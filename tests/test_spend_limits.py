"""Spend limits: per session and per day, in USD and tokens, over every slot (rlm included), kept across
restarts; and rlm sub-calls inside an agent run count in its totals and have a budget per Repl step."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config

from aries_kernel.agent import Agent
from aries_kernel.agent.events import Notice, RunFinished, ToolCallFinished, TurnFinished
from aries_kernel.agent.settings import AriesAgent
from aries_kernel.models import BUDGET_EXHAUSTED, BudgetExceeded, ModelRouter, Rlm, SpendLimits
from aries_kernel.models.budget import read_spend
from aries_kernel.models.router import AriesModels
from aries_kernel.models.types import Message, ModelRequest
from tests.agent_scripted import FakeContext
from tests.loopback import Reply, ScriptedModelServer
from tests.models_support import fast_config

TOKENS_PER_CALL = 11 + 7  # the loopback server's default usage: 11 input and 7 output tokens
REQUEST = ModelRequest([Message("user", "hi")], max_tokens=50)


@pytest.fixture
def spend_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "state" / "spend.json"
    monkeypatch.setenv("ARIES_SPEND_FILE", str(path))
    return path


def test_session_token_limit_covers_every_slot_and_refuses_without_a_request(
    server: ScriptedModelServer, make_router: Callable[..., ModelRouter], spend_file: Path
) -> None:
    router = make_router(session_budget_tokens=3 * TOKENS_PER_CALL)
    router.set_slot("primary", "sonnet")
    router.client("primary").complete(REQUEST)
    router.client("cheap").complete(REQUEST)
    router.client("bulk").complete(REQUEST)
    with pytest.raises(BudgetExceeded) as raised:
        router.client("cheap").complete(REQUEST)
    assert len(server.requests) == 3
    message = str(raised.value)
    assert "session budget of 54 tokens is reached" in message
    assert "c.AriesModels.session_budget_tokens" in message and "cheap call was not sent" in message


def test_usd_limit_uses_the_configured_prices(
    server: ScriptedModelServer, make_router: Callable[..., ModelRouter], spend_file: Path
) -> None:
    # $1 per million input and output tokens: one call costs 18e-6 USD.
    router = make_router(prices={"haiku": [1.0, 1.0]}, session_budget_usd=30e-6)
    client = router.client("cheap")
    client.complete(REQUEST)
    client.complete(REQUEST)  # 18e-6 < 30e-6 before it: sent, and it crosses the limit
    with pytest.raises(BudgetExceeded, match=r"session budget of \$0.0000 is reached"):
        client.complete(REQUEST)
    assert len(server.requests) == 2
    assert router.limits.spend().session_usd == pytest.approx(36e-6)


def test_daily_spend_persists_across_restarts_and_is_shared(
    server: ScriptedModelServer, make_router: Callable[..., ModelRouter], spend_file: Path
) -> None:
    first = make_router(daily_budget_tokens=2 * TOKENS_PER_CALL)
    first.client("cheap").complete(REQUEST)
    days = read_spend(spend_file).days
    assert [entry["tokens"] for entry in days.values()] == [TOKENS_PER_CALL]
    restarted = make_router(daily_budget_tokens=2 * TOKENS_PER_CALL)  # a new kernel: session spend is 0
    assert restarted.limits.spend().session_tokens == 0
    assert restarted.limits.spend().today_tokens == TOKENS_PER_CALL
    restarted.client("primary").complete(REQUEST)
    with pytest.raises(BudgetExceeded, match="daily budget of 36 tokens"):
        first.client("cheap").complete(REQUEST)  # the first kernel sees the second's spend
    assert not list(spend_file.parent.glob(".spend.json.*"))  # no temporary file left behind


def test_a_new_day_starts_at_zero_and_old_days_are_kept_in_the_file(spend_file: Path) -> None:
    now = [1_700_000_000.0]
    limits = SpendLimits(AriesModels(config=Config()), clock=lambda: now[0])
    limits.settings.daily_budget_usd = 1.0
    limits.record(100, 1.5)
    with pytest.raises(BudgetExceeded):
        limits.check("primary")
    now[0] += 86_400
    limits.check("primary")  # a new local day
    limits.record(10, 0.25)
    assert limits.spend().today_usd == pytest.approx(0.25)
    assert limits.spend().session_usd == pytest.approx(1.75)
    assert len(read_spend(spend_file).days) == 2


def test_unwritable_spend_file_keeps_the_limit_in_memory_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a regular file, so nothing can be created below it")
    monkeypatch.setenv("ARIES_SPEND_FILE", str(blocker / "home" / ".aries" / "spend.json"))
    limits = SpendLimits(AriesModels(config=Config(AriesModels={"daily_budget_tokens": 50})))
    limits.record(30, 0.0)
    limits.check("primary")
    limits.record(30, 0.0)
    with pytest.raises(BudgetExceeded, match="daily budget of 50 tokens is reached"):
        limits.check("primary")
    assert limits.problem is not None
    assert str(blocker / "home" / ".aries" / "spend.json") in limits.problem
    assert "ARIES_SPEND_FILE" in limits.problem
    assert limits.spend().today_tokens == 60


def test_no_limit_set_means_no_file_read_before_a_call(spend_file: Path) -> None:
    limits = SpendLimits(AriesModels(config=Config()))
    limits.check("primary")
    assert not spend_file.exists()
    assert limits.spend().short() == ""
    assert limits.spend().lines()[0] == "Session: $0.0000 (no limit), 0 tokens (no limit)"


# ---------------------------------------------------------------------------------- inside an agent run


class Graph:
    """Stands in for the code graph (these runs re-index nothing of interest)."""

    def reindex(self, paths: list[str]) -> None:
        pass

    def top_files(self, limit: int) -> Any:
        raise RuntimeError("no graph in this test")


@pytest.fixture
def agent_run(
    server: ScriptedModelServer, tmp_path: Path, spend_file: Path
) -> Iterator[Callable[..., tuple[Agent, Rlm, list[Any]]]]:
    """Run a prompt with a real router (primary sonnet, rlm on cheap's haiku) against the loopback server;
    the Repl code's ``rlm_call`` is the context's rlm, as in the kernel."""
    routers: list[ModelRouter] = []
    shell = InteractiveShell.instance()

    def run(*replies: Reply, max_calls: int = 15, **limits: Any) -> tuple[Agent, Rlm, list[Any]]:
        config = fast_config(**limits)
        config.AriesRlm.max_calls = max_calls
        router = ModelRouter(config=config)
        routers.append(router)
        root = tmp_path / "repo"
        root.mkdir(exist_ok=True)
        context = FakeContext(
            root,
            shell=shell,
            config=router.settings.config,
            codebase=Graph(),
            pillars={"models": router},
            build=True,
        )
        rlm = context.lazy("rlm", lambda ctx: Rlm(router))
        shell.user_ns["rlm_call"] = rlm.call
        agent = Agent(context, settings=AriesAgent(permission_mode="bypassPermissions"))
        server.script(*replies)
        return agent, rlm, list(agent.run("go"))

    yield run
    shell.user_ns.pop("rlm_call", None)
    for router in routers:
        router.close()


def repl(code: str) -> Reply:
    return Reply(tool_calls=[("Repl", {"code": code})])


def test_rlm_calls_inside_a_run_count_in_the_session_and_the_run(
    agent_run: Callable[..., tuple[Agent, Rlm, list[Any]]], server: ScriptedModelServer
) -> None:
    agent, _, events = agent_run(
        repl("answers = [rlm_call(f'q{i}') for i in range(3)]\nanswers"),
        Reply(text="a0"),
        Reply(text="a1"),
        Reply(text="a2"),
        Reply(text="Done."),
    )
    finished = events[-1]
    assert isinstance(finished, RunFinished) and finished.reason == "done"
    result = next(e for e in events if isinstance(e, ToolCallFinished))
    assert "['a0', 'a1', 'a2']" in result.output
    session = agent.session
    assert session is not None
    assert session.usage["bulk"].calls == 3  # the rlm sub-calls, on the bulk slot (cheap's model)
    assert session.usage["primary"].calls == 2
    assert finished.input_tokens == 5 * 11 and finished.output_tokens == 5 * 7
    first_turn = next(e for e in events if isinstance(e, TurnFinished))
    assert first_turn.input_tokens == 4 * 11  # the turn's own call and the three sub-calls of its Repl step
    records = [json.loads(line) for line in session.path.read_text().splitlines()]
    assert [r["slot"] for r in records if r["kind"] == "usage"] == [
        "primary",
        "bulk",
        "bulk",
        "bulk",
        "primary",
    ]
    assert session.cost_usd == pytest.approx(finished.cost_usd)


def test_the_rlm_budget_applies_per_repl_step(
    agent_run: Callable[..., tuple[Agent, Rlm, list[Any]]], server: ScriptedModelServer
) -> None:
    _, rlm, events = agent_run(
        repl("print([rlm_call(f'first {i}') for i in range(3)])"),
        Reply(text="x"),
        Reply(text="y"),
        repl("print([rlm_call(f'second {i}') for i in range(2)])"),
        Reply(text="z"),
        Reply(text="w"),
        Reply(text="Done."),
        max_calls=2,
    )
    outputs = [e.output for e in events if isinstance(e, ToolCallFinished)]
    budget = BUDGET_EXHAUSTED.format(limit=2)
    assert outputs[0].startswith("['x', 'y', ") and budget in outputs[0]  # the third call of the step
    assert outputs[1].startswith("['z', 'w']")  # the next step has its own two calls
    assert rlm.stats().calls == 2 and rlm.stats().refused == 0
    assert isinstance(events[-1], RunFinished) and events[-1].reason == "done"
    assert len(server.requests) == 7


def test_the_spend_limit_stops_a_run_counting_its_rlm_calls(
    agent_run: Callable[..., tuple[Agent, Rlm, list[Any]]], server: ScriptedModelServer, spend_file: Path
) -> None:
    # Room for the first turn and two sub-calls: the third sub-call is refused inside the step, and the next
    # turn is not sent at all.
    agent, rlm, events = agent_run(
        repl(
            "print([rlm_call(f'q{i}') for i in range(2)])\ntry:\n    rlm_call('q2')\nexcept Exception as e:\n"
            "    print(type(e).__name__)"
        ),
        Reply(text="a0"),
        Reply(text="a1"),
        Reply(text="never sent"),
        session_budget_tokens=3 * TOKENS_PER_CALL,
    )
    finished = events[-1]
    assert isinstance(finished, RunFinished)
    assert finished.reason == "budget"
    assert "session budget of 54 tokens is reached" in finished.detail
    assert "primary call was not sent" in finished.detail
    assert any(isinstance(e, Notice) and "spend limit" in e.text for e in events)
    step = next(e for e in events if isinstance(e, ToolCallFinished))
    assert "['a0', 'a1']" in step.output and "BudgetExceeded" in step.output
    assert len(server.requests) == 3  # the first turn and two sub-calls; nothing after the limit
    assert finished.input_tokens == 3 * 11
    turn = next(e for e in events if isinstance(e, TurnFinished))
    assert turn.spend == "54 tokens of 54 tokens this session"
    assert rlm.stats().refused == 1
    session = agent.session
    assert session is not None
    assert [m.role for m in session.messages] == ["user", "assistant", "tool"]  # ready for the next prompt
    assert read_spend(spend_file).days  # the day's spend was written
