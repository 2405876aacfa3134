"""The model harness's own cost per call: ``router.client(slot).complete`` / ``.stream`` against a bare SDK
call to the same loopback server, in the same run, for both wire formats. Target: ratio at most 1.1. Then the
key broker's (aries_kernel/key_broker.py): the same bare SDK call sent through a broker holding the key, against
the bare call straight to the server, also with a server that takes ``--latency`` ms to answer as an API does,
and the broker's own CPU time per call (Linux /proc). Target: at most 1.02.

    .venv/bin/python bench/bench_models.py [--calls 300] [--latency 100]

Both sides use the same SDK, the same request and the same server; the harness adds request translation, retry
bookkeeping, event normalisation, cost and usage accounting. Blocks of calls alternate between the two sides
so machine noise hits both alike; the figure per side is the median of the per-block means, and the ratio the
median of the ratios of adjacent blocks (a pair shares the machine's load of the moment, which on a shared
machine moves the medians of either side by 10-20% from one run to the next).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import anthropic
import httpx2
import openai

from aries_kernel.key_broker import start_broker
from aries_kernel.models.provider import Endpoint, sdk_connection
from aries_kernel.models.router import ModelRouter, SlotClient
from aries_kernel.models.types import Message, ModelRequest, ToolSchema
from tests.loopback import Reply, ScriptedModelServer

QUESTION = "Which files import the router, and why?"
REPL = {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}
ANSWER = Reply(
    text="The agent loop and the rlm module import it to reach the model slots. " * 3,
    tool_calls=[("Repl", {"code": "codebase.show_dependents('aries_kernel/models/router.py')"})],
)


def bare_anthropic(client: anthropic.Anthropic, stream: bool) -> Callable[[], object]:
    params: dict[str, Any] = {
        "model": "claude-haiku-4-5",
        "max_tokens": 1024,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": QUESTION}],
        "tools": [{"name": "Repl", "description": "Run Python.", "input_schema": REPL}],
    }
    if not stream:
        return lambda: client.messages.create(**params).content

    def streamed() -> object:
        with client.messages.create(**params, stream=True) as events:
            return [event for event in events]

    return streamed


def bare_openai(client: openai.OpenAI, stream: bool) -> Callable[[], object]:
    params: dict[str, Any] = {
        "model": "gpt-4o",
        "max_completion_tokens": 1024,
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": QUESTION}],
        "tools": [
            {
                "type": "function",
                "function": {"name": "Repl", "description": "Run Python.", "parameters": REPL},
            }
        ],
    }
    if not stream:
        return lambda: client.chat.completions.create(**params, stream=False).choices

    def streamed() -> object:
        chunks = client.chat.completions.create(**params, stream=True, stream_options={"include_usage": True})
        with chunks:
            return [chunk for chunk in chunks]

    return streamed


def harness_call(client: SlotClient, request: ModelRequest, stream: bool) -> Callable[[], object]:
    if stream:
        return lambda: list(client.stream(request))
    return lambda: client.complete(request)


def per_call(fn: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def compare(
    harness: Callable[[], object], bare: Callable[[], object], calls: int, blocks: int = 30
) -> tuple[float, float, float]:
    """(harness, bare) seconds per call, the median of each side's block means, and the median ratio of the
    blocks run side by side."""
    for _ in range(20):  # warm both paths: imports, connection pools, caches
        harness()
        bare()
    ours: list[float] = []
    theirs: list[float] = []
    for block in range(blocks):
        # Alternate which side goes first, so neither always runs right after the other's allocations.
        pair = [(ours, harness), (theirs, bare)]
        for times, fn in pair if block % 2 == 0 else reversed(pair):
            times.append(per_call(fn, max(1, calls // blocks)))
    ratios = [mine / bare_time for mine, bare_time in zip(ours, theirs, strict=True)]
    return statistics.median(ours), statistics.median(theirs), statistics.median(ratios)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="calls per side and case")
    parser.add_argument(
        "--latency", type=float, default=100.0, help="ms the server waits before answering, in the last cases"
    )
    args = parser.parse_args()
    request = ModelRequest(
        [Message("user", QUESTION)],
        system="Be brief.",
        tools=[ToolSchema("Repl", "Run Python.", REPL)],
        max_tokens=1024,
    )
    with ScriptedModelServer() as server:
        server.responder = lambda body: ANSWER
        os.environ.update(
            ANTHROPIC_API_KEY="bench",
            OPENAI_API_KEY="bench",
            ANTHROPIC_BASE_URL=server.anthropic_url,
            OPENAI_BASE_URL=server.openai_url,
        )
        router = ModelRouter()
        router.set_slot("cheap", "gpt4o")
        sdk_anthropic = anthropic.Anthropic(api_key="bench", base_url=server.anthropic_url, max_retries=0)
        sdk_openai = openai.OpenAI(api_key="bench", base_url=server.openai_url, max_retries=0)
        print(f"{'case':<28}{'harness ms/call':>17}{'bare SDK ms/call':>18}{'ratio':>8}")
        worst = 0.0
        bare_calls = {
            "anthropic": lambda stream: bare_anthropic(sdk_anthropic, stream),
            "openai": lambda stream: bare_openai(sdk_openai, stream),
        }
        for wire, slot in (("anthropic", "primary"), ("openai", "cheap")):
            client = router.client(slot)
            for mode, stream in (("complete", False), ("stream", True)):
                bare = bare_calls[wire](stream)
                ours, theirs, ratio = compare(harness_call(client, request, stream), bare, args.calls)
                worst = max(worst, ratio)
                print(f"{wire + ' ' + mode:<28}{ours * 1e3:>17.3f}{theirs * 1e3:>18.3f}{ratio:>8.3f}")
        print(f"worst ratio {worst:.3f} (target <= 1.1): {'OK' if worst <= 1.1 else 'OVER TARGET'}")
        broker_cases(server, args.calls, args.latency / 1000)


def broker_cpu(pid: int) -> float:
    """CPU seconds the broker has used (user and system, from /proc: a figure the machine's load leaves alone)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def broker_cases(server: ScriptedModelServer, calls: int, latency: float) -> None:
    """The bare SDK call through the key broker against the same call straight to the server."""
    link, watch = start_broker(os.environ)  # holds the bench keys, bound to the loopback server's URLs
    clients: dict[str, tuple[Any, Any]] = {}
    for wire, sdk, url, auth in (
        ("anthropic", anthropic, server.anthropic_url, "x-api-key"),
        ("openai", openai, server.openai_url, "bearer"),
    ):
        route = link.route(f"{wire.upper()}_API_KEY", url)
        assert route is not None, f"the broker holds no key for {url}"
        endpoint = Endpoint(wire, "m", url, "", 30.0, route)
        connection = sdk_connection(endpoint, sdk.DefaultHttpxClient, httpx2.HTTPTransport, auth)
        via = sdk.Anthropic if wire == "anthropic" else sdk.OpenAI
        clients[wire] = (
            via(**connection, max_retries=0),
            via(api_key="bench", base_url=url, max_retries=0),
        )
    bare_calls = {"anthropic": bare_anthropic, "openai": bare_openai}
    header = (
        f"{'via broker ms/call':>19}{'bare SDK ms/call':>18}{'ratio':>8}{'added ms':>10}{'broker CPU ms':>15}"
    )
    print(f"\n{'case':<28}{header}")
    worst = {0.0: 0.0, latency: 0.0}
    for wait in (0.0, latency):
        slow = dataclasses.replace(ANSWER, delay=wait)

        def respond(body: dict[str, Any], reply: Reply = slow) -> Reply:
            return reply

        server.responder = respond
        rounds = calls if wait == 0 else max(20, calls // 10)
        for wire, (brokered, direct) in clients.items():
            for mode, stream in (("complete", False), ("stream", True)):
                bare = bare_calls[wire]
                cpu = broker_cpu(link.pid)
                ours, theirs, ratio = compare(bare(brokered, stream), bare(direct, stream), rounds)  # type: ignore[operator]
                cpu_per_call = (broker_cpu(link.pid) - cpu) / (20 + 30 * max(1, rounds // 30))  # see compare
                worst[wait] = max(worst[wait], ratio)
                case = f"{wire} {mode}" + (f" ({wait * 1e3:g} ms)" if wait else "")
                print(
                    f"{case:<28}{ours * 1e3:>19.3f}{theirs * 1e3:>18.3f}{ratio:>8.3f}{(ours - theirs) * 1e3:>10.3f}"
                    f"{cpu_per_call * 1e3:>15.3f}"
                )
    for wait, ratio in worst.items():
        server_kind = f"a server answering in {wait * 1e3:g} ms" if wait else "an instant loopback server"
        verdict = "OK" if ratio <= 1.02 else "OVER TARGET"
        print(f"broker: worst ratio {ratio:.3f} against {server_kind} (target <= 1.02): {verdict}")
    os.close(watch)  # the broker exits


if __name__ == "__main__":
    main()
