"""Memory in the agent loop, in process: the real loop, a real vault, a real router on the loopback server.

A scripted session over several turns: the warm context and the preflight notes reach the request, the
response that names a note's title terms echoes it (its warmth rises) while the other offered note fizzles,
reflection fires at its threshold through the cheap slot, ending the session moves Q-values once, and
compaction saves durable notes first and names them in its summary.
"""

from __future__ import annotations

import gc
import json
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aries_kernel.agent import Agent
from aries_kernel.agent.events import (
    Event,
    MemoryEchoed,
    MemoryFizzled,
    MemoryRetrieved,
    Notice,
    ReflectionWritten,
    RunFinished,
)
from aries_kernel.agent.memory import PREFLIGHT_OPEN, WARM_OPEN, MemoryFeedback, MemoryHook
from aries_kernel.agent.settings import AriesAgent
from aries_kernel.models.router import ModelRouter
from aries_kernel.vault import Vault
from tests.loopback import Reply, ScriptedModelServer
from tests.test_memory_feedback import (  # noqa: F401  (fixtures)
    RETRY,
    WAL,
    reflection,
    repo,
    settings,
    vault,
    vault_dir,
    warmth,
)

# Every test here runs on SQLite and on PostgreSQL (tests/pg_support.py).
pytestmark = pytest.mark.usefixtures("backend")


def make_agent(
    repo: Path, vault: Vault, router: ModelRouter, **memory: Any  # noqa: F811
) -> tuple[Agent, MemoryFeedback]:
    """An agent on the real router (from ``make_router``, which closes its connections) with the memory hook."""
    agent = Agent(root=repo, router=router, settings=AriesAgent())
    hook = MemoryHook.for_agent(agent, lambda: vault, settings(**memory))
    agent.hooks.append(hook)
    return agent, hook.feedback


def system_of(body: dict[str, Any]) -> str:
    system = body.get("system", "")
    return system if isinstance(system, str) else "".join(block.get("text", "") for block in system)


def test_a_scripted_session_retrieves_echoes_fizzles_and_credits_once(
    repo: Path,  # noqa: F811
    vault: Vault,  # noqa: F811
    server: ScriptedModelServer,  # noqa: F811
    make_router: Callable[..., ModelRouter],
) -> None:
    agent, feedback = make_agent(repo, vault, make_router(), preflight_min_similarity=0.0)
    before = {title: warmth(vault, title) for title in (WAL, RETRY)}
    server.script(
        Reply(tool_calls=[("TodoWrite", {"todos": [{"content": "check sqlite", "status": "in_progress"}]})]),
        Reply(text="Put the SQLite index in WAL mode: readers proceed while the one writer commits."),
        Reply(text="Nothing more to add."),
    )
    events: list[Event] = list(agent.run("sqlite writer locked; also 429 rate limits from providers"))
    assert isinstance(events[-1], RunFinished) and events[-1].reason == "done"
    first = server.requests[0].body
    assert WARM_OPEN in system_of(first) and PREFLIGHT_OPEN in system_of(first)
    assert f"[[{WAL}]]" in system_of(first) and f"[[{RETRY}]]" in system_of(first)
    retrieved = [e for e in events if isinstance(e, MemoryRetrieved)]
    assert retrieved and set(retrieved[0].titles) == {WAL, RETRY}
    echoed = [title for e in events if isinstance(e, MemoryEchoed) for title in e.titles]
    fizzled = [title for e in events if isinstance(e, MemoryFizzled) for title in e.titles]
    assert echoed == [WAL] and RETRY in fizzled
    assert warmth(vault, WAL) > before[WAL]
    assert warmth(vault, RETRY) == pytest.approx(before[RETRY])
    last_turn = next(line for line in feedback.status().splitlines() if line.startswith("Last turn"))
    assert f"echoed [[{WAL}]]; fizzled [[{RETRY}]]" in last_turn

    # a second prompt in the same session: the warm context is still first in the system prompt
    list(agent.run("thanks; and the 429s?"))
    assert system_of(server.requests[-1].body).startswith(WARM_OPEN)
    assert "echoed none" in feedback.status()  # "Nothing more to add." used no note

    q_before = vault.stores[0].index.q_values()
    assert WAL.casefold() not in q_before  # nothing is credited before the session ends
    ended = agent.reset()
    assert any(isinstance(e, Notice) and "credited once" in e.text for e in ended)
    learned = vault.stores[0].index.q_values()
    assert learned[WAL.casefold()][0] > 0.5 >= learned[RETRY.casefold()][0]  # no positive reward for a fizzle
    assert agent.reset() == []  # no session left: nothing is credited twice
    assert vault.stores[0].index.q_values() == learned


def test_reflection_fires_in_the_loop_through_the_cheap_slot(
    repo: Path,  # noqa: F811
    vault: Vault,  # noqa: F811
    server: ScriptedModelServer,  # noqa: F811
    make_router: Callable[..., ModelRouter],
) -> None:
    agent, feedback = make_agent(repo, vault, make_router(), reflection_threshold=4)
    title = "Planning with TodoWrite keeps long sessions on track"
    todo = ("TodoWrite", {"todos": [{"content": "plan", "status": "pending"}]})
    server.script(
        Reply(tool_calls=[todo]),  # 3 points
        Reply(tool_calls=[todo]),  # 6 points: over 4, so the cheap slot is asked next
        reflection(title, "A written plan survived two compactions and kept the agent from repeating steps."),
        Reply(text="Planned."),  # 7 points
    )
    events = list(agent.run("plan the work"))
    written = [e.title for e in events if isinstance(e, ReflectionWritten)]
    assert written == [title]
    cheap_request = server.requests[2].body
    assert "long-term memory" in system_of(cheap_request) and "TodoWrite" in json.dumps(cheap_request)
    assert feedback.importance == 1
    assert vault.stores[0].find(title) is not None
    assert agent.session is not None and agent.session.usage["cheap"].calls == 1


def test_the_agent_runs_with_memory_off_and_says_why(
    repo: Path,  # noqa: F811
    server: ScriptedModelServer,  # noqa: F811
    make_router: Callable[..., ModelRouter],
) -> None:
    router = make_router()
    agent = Agent(root=repo, router=router, settings=AriesAgent())

    def broken() -> Vault:
        raise OSError("vault folder is on an unmounted drive")

    hook = MemoryHook.for_agent(agent, broken, settings())
    agent.hooks.append(hook)
    feedback = hook.feedback
    server.script(Reply(text="Answered without memory."))
    events = list(agent.run("why is sqlite locked?"))
    assert isinstance(events[-1], RunFinished) and events[-1].reason == "done"
    notices = [e.text for e in events if isinstance(e, Notice)]
    expected = (
        "Memory is off: the vault failed to open (OSError: vault folder is on an unmounted drive). "
        "The agent goes on without it."
    )
    assert notices == [expected]
    assert WARM_OPEN not in system_of(server.requests[0].body)
    assert feedback.status().startswith("Memory: off, the vault failed to open")


def test_compaction_extracts_notes_first_and_the_warm_context_survives(
    repo: Path,  # noqa: F811
    vault: Vault,  # noqa: F811
    server: ScriptedModelServer,  # noqa: F811
    make_router: Callable[..., ModelRouter],
) -> None:
    agent, feedback = make_agent(repo, vault, make_router(), preflight_min_similarity=0.9)
    server.script(Reply(text="The loader reads pyproject first."), Reply(text="Timeouts use monotonic time."))
    list(agent.run("how does the loader read settings?"))
    list(agent.run("and the timeouts?"))
    items = [
        {"title": "The loader reads settings from pyproject before setup.cfg", "scope": "project",
         "content": "Seen in loader.py.", "type": "learning"},
        {"title": "Monotonic clocks are the right base for timeouts", "scope": "global",
         "content": "Wall clocks jump.", "type": "insight"},
        {"title": "We keep the public API in the package init only", "scope": "project",
         "content": "Decided with the user.", "type": "decision"},
    ]  # fmt: skip
    server.script(Reply(text=json.dumps(items)), Reply(text="## Goal\nUnderstand the loader"))
    events = agent.compact()
    extraction, summary = (request.body for request in server.requests[-2:])
    assert "durable" in system_of(extraction) and "how does the loader read settings?" in json.dumps(
        extraction
    )
    assert "Goal" in system_of(summary)  # the summary is asked for after the extraction
    assert any(isinstance(e, Notice) and "saved before compaction" in e.text for e in events)
    assert vault.stores[1].find(items[0]["title"]) is not None
    assert vault.stores[1].find(items[2]["title"]) is not None
    assert vault.stores[0].find(items[1]["title"]) is not None
    server.script(Reply(text="Still here."))
    list(agent.run("what next?"))
    after = server.requests[-1].body
    assert system_of(after).startswith(WARM_OPEN)
    history = json.dumps(after["messages"])
    assert "## Notes saved to memory" in history
    assert all(f"[[{item['title']}]]" in history for item in items)  # the summary names the notes saved
    assert [s.title for s in feedback.extracted] == [item["title"] for item in items]


def test_the_memory_hook_reports_into_the_agent_status(repo: Path, vault: Vault) -> None:  # noqa: F811
    agent = Agent(root=repo, settings=AriesAgent())
    hook = MemoryHook.for_agent(agent, lambda: vault, settings())
    assert hook.status(agent) == "Memory: on; the vault opens with the first prompt."
    hook.system_sections(agent)
    assert (hook.status(agent) or "").startswith("Memory: on\nWarm context: ~")


def test_an_agent_with_memory_is_collected_once_dropped(repo: Path, vault: Vault) -> None:  # noqa: F811
    # The hook credits a session still open at exit, but must not keep the agent (and its router) alive until
    # then; a kernel's own agent lives as long as the kernel (test_memory_kernel checks the credit at exit).
    agent = Agent(root=repo, settings=AriesAgent())
    agent.hooks.append(MemoryHook.for_agent(agent, lambda: vault, settings()))
    dropped = weakref.ref(agent)
    del agent
    gc.collect()
    assert dropped() is None
