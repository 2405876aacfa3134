"""Benchmarks of the agent loop: tool-schema tokens (lean against full) and the loop's own time per turn.

Run: ``.venv/bin/python bench/bench_agent.py``. Nothing here reaches a model: the sessions are scripted with
the instant client of ``tests/agent_scripted.py`` behind the same ``.stream()`` interface as the router's
clients, so the times are the loop's own (prompt assembly, token estimates, compaction checks, tool dispatch,
session writes, re-index scans), with model time excluded.

1. Schema tokens of one request: the lean sets (REPL and bare mode) against the full set, with the agent's
   estimate and the model layer's, and the ratio (target: lean at most 30% of full).
2. Schema tokens over a scripted 20-turn session: all turns lean; one excursion to a gated tool at turn 10;
   and an un-gated harness that sends every schema every turn (the reference).
3. Loop time per turn at 200 messages of history: a resumed session of about 200 messages, then scripted turns
   (one Repl call each); the reference measured in the same run is the same turns on an empty history. The
   change scan that follows Repl and Bash turns is also timed on this repository.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aries_kernel.agent import Agent, AriesAgent  # noqa: E402
from aries_kernel.agent.phases import LEAN, schema_tokens  # noqa: E402
from aries_kernel.agent.tools import TOOLS  # noqa: E402
from aries_kernel.models import tokens as model_tokens  # noqa: E402
from aries_kernel.models import types as mt  # noqa: E402
from tests.agent_scripted import ScriptedClient, ScriptedRouter  # noqa: E402
from tests.loopback import Reply  # noqa: E402


def model_layer_schema_tokens(names: list[str]) -> int:
    """The model layer's estimate of the same schemas (an empty request carrying only them)."""
    tools = [
        mt.ToolSchema(TOOLS[name].name, TOOLS[name].description, TOOLS[name].parameters) for name in names
    ]
    return model_tokens.estimate_tokens(mt.ModelRequest(messages=[], tools=tools))


def per_request() -> None:
    full = list(TOOLS)
    print("1. Tool-schema tokens of one request")
    print(f"   {'set':<12} {'tools':>5} {'agent est.':>11} {'model est.':>11} {'of full':>8}")
    full_tokens = schema_tokens(TOOLS[name] for name in full)
    for label, names in (
        ("lean (repl)", list(LEAN["repl"])),
        ("lean (bare)", list(LEAN["bare"])),
        ("full", full),
    ):
        tokens = schema_tokens(TOOLS[name] for name in names)
        print(
            f"   {label:<12} {len(names):>5} {tokens:>11,} {model_layer_schema_tokens(names):>11,} "
            f"{tokens / full_tokens:>7.1%}"
        )


def session_script(turns: int, gated_at: int | None) -> list[Reply]:
    replies = []
    for turn in range(1, turns):
        if turn == gated_at:
            replies.append(Reply(tool_calls=[("Grep", {"pattern": "def "})]))
        elif turn % 5 == 0:
            replies.append(
                Reply(tool_calls=[("Write", {"file_path": f"out/f{turn}.py", "content": f"X = {turn}\n"})])
            )
        else:
            replies.append(Reply(tool_calls=[("Repl", {"code": f"v{turn} = {turn} * 2\nv{turn}"})]))
    replies.append(Reply(text="Done."))
    return replies


def scripted_session(root: Path, turns: int, gated_at: int | None) -> list[int]:
    client = ScriptedClient(*session_script(turns, gated_at))
    agent = Agent(
        root=root, router=ScriptedRouter(client), settings=AriesAgent(auto_approve=True), shell=_shell()
    )
    list(agent.run("work through the plan", max_turns=turns))
    assert len(client.requests) == turns
    return [schema_tokens(TOOLS[tool.name] for tool in request.tools) for request in client.requests]


def over_a_session(root: Path, turns: int = 20) -> None:
    full = schema_tokens(TOOLS.values())
    baseline = full * turns
    print(f"\n2. Tool-schema tokens over a scripted {turns}-turn session")
    lean_only = sum(scripted_session(root / "a", turns, None))
    excursion = sum(scripted_session(root / "b", turns, 10))
    print(f"   un-gated (every schema every turn)  {baseline:>8,}")
    print(f"   lean throughout                     {lean_only:>8,}   {lean_only / baseline:.1%} of un-gated")
    print(f"   one gated call at turn 10           {excursion:>8,}   {excursion / baseline:.1%} of un-gated")
    verdict = "met" if lean_only <= 0.30 * baseline else "NOT met"
    print(f"   target lean <= 30% of full: {verdict}")


def _shell() -> object:
    from IPython.core.interactiveshell import InteractiveShell

    return InteractiveShell.instance()


def _seed(root: Path, history: int) -> int:
    """Write a saved session of at least ``history`` messages (prompt, tool call, result per run) under
    ``root``."""
    seed = ScriptedClient(
        *[Reply(text="ok " * 40, tool_calls=[("Repl", {"code": f"w = {i}"})]) for i in range(history)]
    )
    seeded = Agent(
        root=root, router=ScriptedRouter(seed), settings=AriesAgent(auto_approve=True), shell=_shell()
    )
    while seeded.session is None or len(seeded.session.messages) < history:
        list(seeded.run("step " * 30, max_turns=1))
    return len(seeded.session.messages)


def _turn_times(root: Path, turns: int, resume: bool) -> list[float]:
    client = ScriptedClient(*[Reply(tool_calls=[("Repl", {"code": "1 + 1"})]) for _ in range(turns)])
    agent = Agent(
        root=root, router=ScriptedRouter(client), settings=AriesAgent(auto_approve=True), shell=_shell()
    )
    if resume:
        agent.resume()
    times = []
    last = time.perf_counter()
    for event in agent.run("continue", max_turns=turns):
        if type(event).__name__ == "TurnFinished":
            now = time.perf_counter()
            times.append(now - last)
            last = now
    assert len(client.requests) == turns
    return times


def loop_time(root: Path, history: int = 200, turns: int = 30) -> None:
    print(f"\n3. Loop time per turn with {history} messages of history (model time excluded)")
    (root / "empty").mkdir()
    (root / "long").mkdir()
    seeded = _seed(root / "long", history)
    empty = _turn_times(root / "empty", turns, resume=False)
    long = _turn_times(root / "long", turns, resume=True)
    for label, times in ((f"{seeded} messages", long), ("empty history (reference)", empty)):
        median = statistics.median(times) * 1000
        p90 = sorted(times)[int(0.9 * len(times))] * 1000
        print(
            f"   {label:<26} median {median:6.2f} ms per turn, p90 {p90:6.2f} ms"
            f"  ({turns} turns, one Repl each)"
        )
    ratio = statistics.median(long) / statistics.median(empty)
    print(f"   {seeded} messages against an empty history: {ratio:.2f}x")


def scan_time(root: Path) -> None:
    """The change scan after a Repl or Bash turn, on a real repository (this one), against the empty root."""
    agent = Agent(root=root, router=ScriptedRouter(ScriptedClient()), shell=_shell())
    times = []
    for _ in range(5):
        begin = time.perf_counter()
        agent.changed_files()
        times.append(time.perf_counter() - begin)
    files = len(agent.changes)
    print(
        f"   change scan after a Repl/Bash turn on {root.name}/ ({files} files): "
        f"median {statistics.median(times) * 1000:.1f} ms"
    )


def main() -> None:
    per_request()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        for name in ("a", "b", "c"):
            (root / name).mkdir()  # one project root per session, so resume finds the right one
        over_a_session(root)
        loop_time(root / "c")
    scan_time(Path(__file__).resolve().parents[1])


if __name__ == "__main__":
    main()
