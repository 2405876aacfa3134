"""rlm_call / rlm_batch: concurrency, order, the per-execution budget, stats, slot choice, and the real
kernel.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from aries_kernel.models.errors import MissingKeyError, ProviderError
from aries_kernel.models.rlm import BUDGET_EXHAUSTED, Rlm
from aries_kernel.models.router import ModelRouter
from tests.kernel_harness import run_cell, start_kernel, stop_kernel
from tests.loopback import Reply, ScriptedModelServer, echo_responder

BUDGET = BUDGET_EXHAUSTED.format(limit=15)


@pytest.fixture
def rlm(server: ScriptedModelServer, make_router: Callable[..., ModelRouter], wire_spec: str) -> Rlm:
    models = make_router()
    models.set_slot("bulk", wire_spec)
    return Rlm(models)


def slow_echo(body: dict) -> Reply:
    reply = echo_responder(body)
    reply.delay = 0.3
    return reply


def test_batch_of_12_keeps_order_with_at_most_5_in_flight(rlm: Rlm, server: ScriptedModelServer) -> None:
    server.responder = slow_echo
    pairs = [(f"question {i}", f"context {i}") for i in range(12)]
    answers = rlm.batch(pairs)
    assert answers == [f"echo: <context>\ncontext {i}\n</context>\n\nquestion {i}" for i in range(12)]
    assert len(server.requests) == 12
    assert server.max_in_flight == 5


def test_sub_call_is_one_user_turn_without_tools(rlm: Rlm, server: ScriptedModelServer) -> None:
    assert rlm.call("What does f return?", "def f(): return 42").startswith("echo: <context>")
    body = server.requests[0].body
    assert len(body["messages"]) == 1 + (body["messages"][0]["role"] == "system")
    assert "tools" not in body


def test_16th_call_returns_budget_string_without_request(rlm: Rlm, server: ScriptedModelServer) -> None:
    rlm.start_execution()
    rlm.batch([(f"q{i}", "") for i in range(12)])
    for i in range(3):
        assert rlm.call(f"extra {i}") == f"echo: extra {i}"
    assert len(server.requests) == 15
    assert rlm.call("one too many") == BUDGET
    assert rlm.batch([("a", ""), ("b", "")]) == [BUDGET, BUDGET]
    assert len(server.requests) == 15
    stats = rlm.stats()
    assert (stats.calls, stats.refused) == (15, 3)
    assert "budget exhausted" in BUDGET


def test_budget_resets_on_the_next_execution(rlm: Rlm, server: ScriptedModelServer) -> None:
    rlm.start_execution()
    rlm.batch([(f"q{i}", "") for i in range(15)])
    assert rlm.call("sixteenth") == BUDGET
    rlm.start_execution()
    assert rlm.call("fresh") == "echo: fresh"
    assert len(server.requests) == 16


def test_stats_per_execution(rlm: Rlm, server: ScriptedModelServer) -> None:
    rlm.start_execution()
    server.script(
        Reply(text="a", input_tokens=100, output_tokens=10), Reply(text="b", input_tokens=50, output_tokens=5)
    )
    rlm.call("one")
    rlm.call("two")
    stats = rlm.stats()
    assert (stats.calls, stats.input_tokens, stats.output_tokens) == (2, 150, 15)
    assert stats.cost_usd == stats.table["cost_usd"].sum() and stats.seconds > 0  # one source of truth
    assert list(stats.table["question"]) == ["one", "two"]
    assert "2 calls" in repr(stats)
    rlm.start_execution()  # a later cell that makes no calls still sees the last execution's figures
    assert rlm.stats().calls == 2
    rlm.call("three")
    assert rlm.stats().calls == 1


def test_failed_call_in_a_batch_keeps_the_other_answers(rlm: Rlm, server: ScriptedModelServer) -> None:
    server.script(Reply(status=400, error="too long"))  # taken by whichever request arrives first
    questions = ["x", "y", "z"]
    answers = rlm.batch([(q, "") for q in questions])
    failed = [a for a in answers if a.startswith("[rlm error:")]
    assert len(failed) == 1 and "HTTP 400" in failed[0]
    assert all(a == f"echo: {q}" for q, a in zip(questions, answers, strict=True) if a not in failed)
    assert rlm.stats().errors == 1
    server.script(Reply(status=400, error="too long"))
    with pytest.raises(ProviderError, match="HTTP 400"):
        rlm.call("alone")


def test_bulk_slot_falls_back_to_cheap_then_primary(
    server: ScriptedModelServer, make_router: Callable[..., ModelRouter]
) -> None:
    models = make_router(bulk="", cheap="")
    models.set_slot("primary", "gpt4o")
    Rlm(models).call("who answers?")
    assert server.requests[-1].body["model"] == "gpt-4o"
    models.set_slot("cheap", "haiku")
    Rlm(models).call("who answers now?")
    assert server.requests[-1].body["model"] == "claude-haiku-4-5"


def test_slot_without_a_key_is_skipped(
    server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch, make_router: Callable[..., ModelRouter]
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    models = make_router()
    models.set_slot("bulk", "gpt4o")
    Rlm(models).call("q")
    assert server.requests[-1].body["model"] == "claude-haiku-4-5"  # the cheap slot's model


def test_no_key_anywhere_is_raised_once(
    server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch, make_router: Callable[..., ModelRouter]
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    rlm = Rlm(make_router())
    with pytest.raises(MissingKeyError, match="ANTHROPIC_API_KEY"):
        rlm.batch([("a", ""), ("b", "")])
    with pytest.raises(MissingKeyError, match="ANTHROPIC_API_KEY"):
        rlm.call("a")
    assert server.requests == []


def test_bad_pairs_are_refused_clearly(rlm: Rlm) -> None:
    with pytest.raises(TypeError, match="item 1"):
        rlm.batch([("q", "c"), ("only a question",)])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="must be strings"):
        rlm.call("q", 42)  # type: ignore[arg-type]


@pytest.mark.kernel
def test_rlm_in_a_running_aries_kernel(server: ScriptedModelServer, small_repo: Path) -> None:
    env = {
        "ANTHROPIC_BASE_URL": server.anthropic_url,
        "ANTHROPIC_API_KEY": "test-key",
        "OPENAI_BASE_URL": server.openai_url,
        "OPENAI_API_KEY": "test-key",
    }
    km, kc = start_kernel(small_repo, env=env)
    try:
        first = run_cell(kc, "rlm_call('What is 6*7?', 'x = 6 * 7')")
        assert first.error is None, first.error
        assert first.result == repr("echo: <context>\nx = 6 * 7\n</context>\n\nWhat is 6*7?")
        assert server.requests[-1].path == "/v1/messages"
        assert server.requests[-1].body["model"] == "claude-haiku-4-5"  # bulk falls back to cheap

        cell = "answers = rlm_batch([(f'q{i}', '') for i in range(15)])\nextra = rlm_call('sixteenth')\nextra"
        capped = run_cell(kc, cell)
        assert capped.error is None, capped.error
        assert "budget exhausted" in (capped.result or "")
        assert len(server.requests) == 16
        ordered = run_cell(kc, "answers == [f'echo: q{i}' for i in range(15)], rlm_stats().calls")
        assert ordered.result == "(True, 15)"  # no calls in this cell: the stats are the last execution's

        again = run_cell(kc, "rlm_call('next cell')")  # the budget was reset before this cell
        assert again.result == repr("echo: next cell")

        switched = run_cell(kc, "%aries model bulk gpt4o")  # the OpenAI wire format, chosen at run time
        assert switched.error is None, switched.error
        assert "gpt-4o" in (switched.result or "")
        openai = run_cell(kc, "rlm_call('via openai')")
        assert openai.result == repr("echo: via openai")
        assert server.requests[-1].path == "/v1/chat/completions"
    finally:
        stop_kernel(km, kc)
