"""Kernel start to first execute_reply: Aries against plain ipykernel, measured alternately in the same run.

    python bench/bench_kernel_start.py [--rounds 7] [--root DIR]

Each round starts a kernel (``aries``, then ``python3``) in ROOT (default: this repository, so Aries also starts
indexing it in the background), sends ``1 + 1`` as soon as kernel_info answers, and records the time from the
start request to the execute_reply. Prints the medians and the ratio (target: at most 1.2).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.kernel_harness import run_cell, start_kernel, stop_kernel  # noqa: E402


def time_to_first_reply(kernel_name: str, root: Path) -> float:
    """Seconds from asking for a kernel to holding the reply of its first execution."""
    started = time.perf_counter()
    km, kc = start_kernel(root, kernel_name=kernel_name)
    try:
        result = run_cell(kc, "1 + 1")
        elapsed = time.perf_counter() - started
        assert result.result == "2", result
        return elapsed
    finally:
        stop_kernel(km, kc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    args = parser.parse_args()
    times: dict[str, list[float]] = {"python3": [], "aries": []}
    time_to_first_reply("python3", args.root)  # warm the file cache for both
    time_to_first_reply("aries", args.root)
    for _ in range(args.rounds):
        for name in ("aries", "python3"):
            times[name].append(time_to_first_reply(name, args.root))
    plain, aries = (statistics.median(times[n]) for n in ("python3", "aries"))
    print(f"{'kernel':<10}{'median s':>10}{'min s':>8}{'max s':>8}")
    for name, values in times.items():
        print(f"{name:<10}{statistics.median(values):>10.3f}{min(values):>8.3f}{max(values):>8.3f}")
    print(
        f"ratio aries / plain ipykernel: {aries / plain:.2f}  (target <= 1.2, {args.rounds} rounds, root {args.root})"
    )


if __name__ == "__main__":
    main()
