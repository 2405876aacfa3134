"""Tool-call latency through ``aries-kernel mcp`` (stdio, the mcp SDK's own client) against calling the same
``codebase`` method in process.

    python bench/bench_mcp.py [--repo DIR] [--calls 50]

The repository (default: a scratch copy of this package's own source) is indexed once by each side first;
then every operation is called ``--calls`` times both ways and the median latency of each is printed with the
ratio MCP / in process. The MCP figure includes JSON-RPC over the pipes, argument validation, the text table
and the structured rows.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mcp import Client, StdioServerParameters

from aries_kernel.codebase import Codebase

OPERATIONS: list[tuple[str, dict[str, Any], Callable[[Codebase], Any]]] = [
    ("top_files", {"limit": 10}, lambda cb: cb.top_files(10)),
    ("find_symbol", {"name": "Codebase"}, lambda cb: cb.find_symbol("Codebase")),
    ("search", {"query": "vault session", "limit": 10}, lambda cb: cb.search("vault session", limit=10)),
    ("dependents", {"file": "codebase/core.py"}, lambda cb: cb.show_dependents("codebase/core.py")),
]


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def in_process(repo: Path, calls: int) -> dict[str, float]:
    codebase = Codebase(repo)
    codebase.wait_ready()
    times: dict[str, float] = {}
    for name, _, call in OPERATIONS:
        call(codebase)  # warm the caches the MCP side warms with its first call too
        samples = []
        for _ in range(calls):
            started = time.perf_counter()
            call(codebase)
            samples.append(time.perf_counter() - started)
        times[name] = median_ms(samples)
    return times


def through_mcp(repo: Path, vault: Path, calls: int) -> dict[str, float]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "aries_kernel", "mcp", "--root", str(repo)],
        env={"ARIES_VAULT": str(vault)},
    )

    async def go() -> dict[str, float]:
        times: dict[str, float] = {}
        async with Client(params, read_timeout_seconds=600) as client:
            for name, arguments, _ in OPERATIONS:
                first = await client.call_tool(name, arguments)  # waits for the index the first time
                if first.is_error:
                    raise SystemExit(f"{name} failed: {first.content[0].text}")
                samples = []
                for _ in range(calls):
                    started = time.perf_counter()
                    await client.call_tool(name, arguments)
                    samples.append(time.perf_counter() - started)
                times[name] = median_ms(samples)
        return times

    return anyio.run(go)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, help="repository to serve (default: a copy of aries_kernel/)")
    parser.add_argument("--calls", type=int, default=50, help="calls per operation and side")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="aries-bench-mcp-") as scratch:
        repo = args.repo
        if repo is None:
            repo = Path(scratch) / "repo"
            source = Path(__file__).resolve().parents[1] / "aries_kernel"
            shutil.copytree(source, repo, ignore=shutil.ignore_patterns("__pycache__"))
        files = sum(1 for _ in repo.rglob("*.py"))
        local = in_process(repo, args.calls)
        remote = through_mcp(repo, Path(scratch) / "vault", args.calls)
    print(
        f"repository: {args.repo or 'copy of aries_kernel/'} ({files} Python files), {args.calls} calls each"
    )
    print(f"{'operation':<14}{'in process ms':>15}{'MCP stdio ms':>15}{'ratio':>9}")
    for name, _, _ in OPERATIONS:
        print(f"{name:<14}{local[name]:>15.3f}{remote[name]:>15.3f}{remote[name] / local[name]:>8.1f}x")
    total_local, total_remote = sum(local.values()), sum(remote.values())
    print(f"{'all':<14}{total_local:>15.3f}{total_remote:>15.3f}{total_remote / total_local:>8.1f}x")


if __name__ == "__main__":
    main()
