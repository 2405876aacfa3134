"""Kernel start to first execute_reply: Aries against plain ipykernel, measured alternately in the same run.

    python bench/bench_kernel_start.py [--rounds 7] [--root DIR]

Each round starts a kernel (``aries``, then ``python3``) in ROOT (default: this repository, so Aries also starts
indexing it in the background), sends ``1 + 1`` as soon as kernel_info answers, and records the time from the
start request to the execute_reply. Prints the medians and the ratio (target: at most 1.2), and the load.

Kernels run with bytecode caches, as an installed package has them (:func:`kernel_env`): where
``PYTHONDONTWRITEBYTECODE`` is set, a checkout's modules would otherwise be compiled from source by every kernel.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.kernel_harness import run_cell, start_kernel, stop_kernel  # noqa: E402

# One cache folder for every benchmark run (written by the first kernel that imports a module, read after).
PYCACHE = Path(tempfile.gettempdir()) / "aries-bench-pycache"


def kernel_env(**more: str) -> dict[str, str]:
    """What a benchmarked process's environment adds to this one's: bytecode caches on, under :data:`PYCACHE`
    (an empty ``PYTHONDONTWRITEBYTECODE`` counts as unset), and ``more``."""
    return {"PYTHONDONTWRITEBYTECODE": "", "PYTHONPYCACHEPREFIX": str(PYCACHE), **more}


def load() -> str:
    """The machine's load averages (1, 5, 15 min), for the line that says under what the figures were taken."""
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def time_to_answer(
    kernel_name: str, root: Path, code: str = "1 + 1", env: dict[str, str] | None = None
) -> tuple[float, str]:
    """Seconds from asking for a kernel to holding the reply of its first execution of ``code``, and its result."""
    started = time.perf_counter()
    km, kc = start_kernel(root, env=env if env is not None else kernel_env(), kernel_name=kernel_name)
    try:
        result = run_cell(kc, code, timeout=600)
        elapsed = time.perf_counter() - started
        assert result.error is None and result.result is not None, (kernel_name, code, result.error)
        return elapsed, result.result
    finally:
        stop_kernel(km, kc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    args = parser.parse_args()
    times: dict[str, list[float]] = {"python3": [], "aries": []}
    time_to_answer("python3", args.root)  # warm the file and bytecode caches for both
    time_to_answer("aries", args.root)
    print(f"load before: {load()}")
    for _ in range(args.rounds):
        for name in ("aries", "python3"):
            seconds, result = time_to_answer(name, args.root)
            assert result == "2", result
            times[name].append(seconds)
    plain, aries = (statistics.median(times[n]) for n in ("python3", "aries"))
    print(f"{'kernel':<10}{'median s':>10}{'min s':>8}{'max s':>8}")
    for name, values in times.items():
        print(f"{name:<10}{statistics.median(values):>10.3f}{min(values):>8.3f}{max(values):>8.3f}")
    print(
        f"ratio aries / plain ipykernel: {aries / plain:.2f}  (target <= 1.2, {args.rounds} rounds, root {args.root})"
    )
    print(f"load after: {load()}")


if __name__ == "__main__":
    main()
