"""A run stopped while the model is answering keeps the call's accounting: the provider bills a stopped stream
(the prompt it read, what it wrote), so its tokens and cost stay in the run's footer, the session, ``%aries cost``
and the spend ledger. The official SDKs stream from the loopback server; the kernel test clicks the panel's Stop."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell

from aries_kernel.agent import Agent
from aries_kernel.agent.events import RunFinished, TextDelta, Waiting
from aries_kernel.agent.settings import AriesAgent
from aries_kernel.models import ModelRouter
from aries_kernel.models.budget import read_spend
from tests.agent_scripted import FakeContext
from tests.kernel_harness import run_cell
from tests.loopback import Reply, ScriptedModelServer
from tests.models_support import fast_config
from tests.test_panel_kernel import (
    TICKING,
    Message,
    buttons,
    click,
    final_output,
    lab,
    lab_kernel,
    run_interacting,
    subshell,
    when_ticked,
)

__all__ = ["lab", "lab_kernel"]  # the panel tests' kernel fixtures, used here

ANSWER = "The plan, step by step: " + "read the module, change the function, run the tests; " * 12
PROMPT_TOKENS = 1669


def stalled(input_tokens: int = PROMPT_TOKENS) -> Reply:
    """An answer that streams a few pieces, then stalls long enough for a Stop."""
    return Reply(text=ANSWER, input_tokens=input_tokens, output_tokens=400, chunk=40, hold_after=8, hold=3.0)


def test_a_run_stopped_mid_answer_counts_the_call_on_both_wires(
    server: ScriptedModelServer, wire: str, wire_spec: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spend_file = tmp_path / "spend.json"
    monkeypatch.setenv("ARIES_SPEND_FILE", str(spend_file))
    router = ModelRouter(config=fast_config())
    router.set_slot("primary", wire_spec)
    (tmp_path / "repo").mkdir()
    context = FakeContext(
        tmp_path / "repo",
        shell=InteractiveShell.instance(),
        config=router.settings.config,
        pillars={"models": router},
        build=True,
    )
    agent = Agent(context, settings=AriesAgent(permission_mode="bypassPermissions"))
    server.script(stalled())
    streamed = ""
    events = []
    try:
        for event in agent.run("plan it"):
            events.append(event)
            if isinstance(event, TextDelta):
                streamed += event.text
            if isinstance(event, Waiting) and streamed:
                event.stopped = True  # what the panel's Stop does while the model is silent
    finally:
        router.close()
    finished = events[-1]
    assert isinstance(finished, RunFinished) and finished.reason == "interrupted", finished
    assert streamed and streamed != ANSWER, "stopped in the middle of the answer"
    usage = router.client("primary").usage
    assert usage.calls == 1 and usage.output_tokens > 0, "the text written so far is counted (estimated)"
    if wire == "anthropic":
        assert usage.input_tokens == PROMPT_TOKENS, "Anthropic's stream says the input at its start"
    else:
        # OpenAI's stream says its usage only at the end: the input is the slot's estimate of the request.
        assert usage.input_tokens == agent.last_request_tokens > 0
    assert usage.cost_usd > 0, "priced like a finished call"
    assert (finished.input_tokens, finished.output_tokens) == (usage.input_tokens, usage.output_tokens)
    assert finished.cost_usd == pytest.approx(usage.cost_usd)
    session = agent.session
    assert session is not None and session.usage["primary"].input_tokens == usage.input_tokens
    (day,) = read_spend(spend_file).days.values()
    assert day["tokens"] == usage.input_tokens + usage.output_tokens
    assert day["usd"] == pytest.approx(usage.cost_usd)


def test_stop_clicked_while_the_model_writes_keeps_the_cost_in_the_footer_cost_and_ledger(
    lab: Any, server: ScriptedModelServer
) -> None:
    before = spent_tokens()
    server.script(stalled())
    stopped: list[bool] = []
    side = subshell(lab)  # where JupyterLab sends widget messages

    def stop_while_writing(msg: Message, so_far: list[Message]) -> None:
        state = msg["content"].get("data", {}).get("state", {}) if msg["msg_type"] == "comm_msg" else {}
        if not stopped and "The plan, step by step" in str(state.get("value", "")):
            stopped.append(True)
            click(lab, buttons(so_far, "Stop")[0], side)

    messages = run_interacting(lab, "%aries plan it", stop_while_writing)
    assert stopped, "the panel showed the answer as it came"
    _, update = final_output(messages)
    page = update["data"]["text/html"]
    assert "interrupted · 1 turn(s) · 1,669 in" in page, page
    cost = run_cell(lab, "%aries cost")
    text = cost.stdout + (cost.result or "")
    assert "1669" in text.replace(",", ""), text
    assert spent_tokens() - before > PROMPT_TOKENS, "the ledger has the prompt and what was written"


def spent_tokens() -> int:
    """Today's tokens (and every other day's) in the suite's spend ledger, which the kernels inherit."""
    return sum(day["tokens"] for day in read_spend(Path(os.environ["ARIES_SPEND_FILE"])).days.values())


def test_stop_clicked_mid_step_keeps_the_answered_turn_in_cost_and_ledger(
    lab: Any, small_repo: Path, server: ScriptedModelServer
) -> None:
    before = spent_tokens()
    server.script(Reply(tool_calls=[("Repl", {"code": TICKING})], input_tokens=1234, output_tokens=56))
    side = subshell(lab)
    react = when_ticked(small_repo, lambda msg, so_far: click(lab, buttons(so_far, "Stop")[0], side))
    messages = run_interacting(lab, "%aries --yes tick, then sleep a minute", react)
    _, update = final_output(messages)
    assert "interrupted · 1 turn(s) · 1,234 in / 56 out" in update["data"]["text/html"]
    cost = run_cell(lab, "%aries cost")
    rows = [line.split() for line in (cost.stdout + (cost.result or "")).splitlines()]
    assert ["primary", "1", "1234", "56"] in [row[:4] for row in rows], rows
    assert spent_tokens() - before == 1234 + 56
