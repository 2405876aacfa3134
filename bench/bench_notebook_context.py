"""Building the notebook section of a request: time and tokens, against ``repr`` of each variable.

    python bench/bench_notebook_context.py [--runs 50] [--rows 1000000]

The namespace holds 200 variables: 20 DataFrames of ``--rows`` rows (their columns share one set of arrays, so
the machine's memory is not the test), numpy arrays, lists, dicts, strings, numbers, functions, classes and
modules; 30 cells are recorded as run, the last of them failed. :func:`aries_kernel.notebook.context.section` is
timed ``--runs`` times (p50 and p95; target p95 <= 50 ms) and its tokens counted with the package's estimator.
The reference, measured in the same run on the same namespace, is what a naive listing costs: ``repr`` of each
variable, cut to 200 characters a line (as ``%whos`` cuts its values), timed the same way. Then 5 hostile
variables join (a ``__repr__`` that sleeps a minute, one that returns 100 MB, a property that raises, a
``__getattr__`` that recurses, an unconsumed generator), read by the latest cell so that they are described
first, and one section is built (target <= 0.3 s; the reference is not run on them: it would take a minute).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aries_kernel.models.tokens import estimate_text_tokens
from aries_kernel.notebook.context import section
from aries_kernel.notebook.executed import CellLog


class _Info:
    def __init__(self, source: str) -> None:
        self.raw_cell, self.cell_id, self.store_history = source, None, True


class _Result:
    def __init__(self, count: int, error: BaseException | None) -> None:
        self.execution_count, self.result = count, None
        self.error_in_exec, self.error_before_exec = error, None


class _Shell:
    """What the section reads of an IPython shell: the namespace, the hidden names, the execution count."""

    def __init__(self, namespace: dict[str, Any]) -> None:
        self.user_ns = namespace
        self.user_ns_hidden: dict[str, Any] = {}
        self.execution_count = 1


class _Context:
    def __init__(self, shell: _Shell, log: CellLog) -> None:
        self.shell, self.root, self._log = shell, Path.cwd(), log

    def built(self, name: str) -> Any:
        return self._log if name == "cells" else None


def namespace(rows: int) -> dict[str, Any]:
    """200 variables, 20 of them DataFrames of ``rows`` rows."""
    rng = np.random.default_rng(0)
    columns = {
        "price": rng.random(rows),
        "units": rng.integers(0, 100, rows),
        "region": pd.Categorical(rng.choice(["north", "south", "east", "west"], rows)),
    }
    found: dict[str, Any] = {}
    for index in range(20):
        found[f"frame_{index}"] = pd.DataFrame({f"{name}_{index}": data for name, data in columns.items()})
    for index in range(180):
        kind = index % 9
        value: Any
        if kind == 0:
            value = rng.random((100, 10))
        elif kind == 1:
            value = list(range(1000))
        elif kind == 2:
            value = {f"key{n}": n for n in range(200)}
        elif kind == 3:
            value = "text " * 200
        elif kind == 4:
            value = index * 1.5
        elif kind == 5:

            def value(x: int, y: int = 2) -> int:
                """Add two numbers."""
                return x + y

        elif kind == 6:
            value = type(f"Model{index}", (), {"__doc__": "A model class."})
        elif kind == 7:
            value = np
        else:
            value = pd.Series(rng.random(1000), name=f"series_{index}")
        found[f"var_{index}"] = value
    return found


class _SlowRepr:
    def __repr__(self) -> str:
        time.sleep(60)
        return "slow"


class _HugeRepr:
    def __repr__(self) -> str:
        return "x" * 100_000_000


class _RaisingProperty:
    @property
    def value(self) -> int:
        raise RuntimeError("a property that raises")


class _RecursiveGetattr:
    def __getattr__(self, name: str) -> Any:
        return getattr(self, name + "_")


def hostile() -> dict[str, Any]:
    """The 5 hostile variables."""
    return {
        "slow": _SlowRepr(),
        "huge": _HugeRepr(),
        "raising": _RaisingProperty(),
        "recursive": _RecursiveGetattr(),
        "stream": (n for n in range(10)),
    }


def cell_log(shell: _Shell) -> CellLog:
    """30 cells recorded as run, the last one failed with a KeyError."""
    log = CellLog(shell)
    for count in range(1, 31):
        shell.execution_count = count + 1
        source = f"frame_{count % 20}['price_{count % 20}'].describe()\nprint('cell {count}')"
        log.pre_run_cell(_Info(source))
        error = None
        if count == 30:
            try:
                _ = shell.user_ns["frame_0"]["revenue_q3"]
            except KeyError as exc:
                error = exc
        log.post_run_cell(_Result(count, error))
    return log


def reference(space: dict[str, Any]) -> str:
    """A naive listing: name, type and ``repr`` cut to 200 characters, one line a variable."""
    return "\n".join(f"{name} {type(value).__name__} {repr(value)[:200]}" for name, value in space.items())


def timed(func: Any, runs: int) -> tuple[list[float], Any]:
    seconds, result = [], None
    for _ in range(runs):
        start = time.perf_counter()
        result = func()
        seconds.append(time.perf_counter() - start)
    return seconds, result


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1] if len(values) >= 2 else values[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    space = namespace(args.rows)
    shell = _Shell(space)
    context = _Context(shell, cell_log(shell))

    ours, text = timed(lambda: section(shell, context), args.runs)
    naive, listing = timed(lambda: reference(space), args.runs)
    tokens, naive_tokens = estimate_text_tokens(text), estimate_text_tokens(listing)
    print(f"namespace: {len(space)} variables, 20 DataFrames of {args.rows:,} rows; {args.runs} runs each")
    print(
        f"section:   p50 {statistics.median(ours) * 1000:7.2f} ms  p95 {p95(ours) * 1000:7.2f} ms  {tokens:,} tokens"
    )
    print(
        f"reference: p50 {statistics.median(naive) * 1000:7.2f} ms  p95 {p95(naive) * 1000:7.2f} ms  "
        f"{naive_tokens:,} tokens (repr of each variable, 200 chars a line)"
    )
    print(
        f"ratio section/reference: p95 time {p95(ours) / p95(naive):.2f}x, tokens {tokens / naive_tokens:.2f}x; "
        f"target p95 <= 50 ms: {'met' if p95(ours) <= 0.05 else 'MISSED'}"
    )

    space.update(hostile())
    log = context.built("cells")
    # read by the latest cell, so they are described first
    log.pre_run_cell(_Info("slow, huge, raising, recursive, stream"))
    log.post_run_cell(_Result(31, None))
    start = time.perf_counter()
    hostile_text = section(shell, context)
    total = time.perf_counter() - start
    print(
        f"with 5 hostile variables: {total * 1000:.1f} ms, {estimate_text_tokens(hostile_text):,} tokens; "
        f"target <= 0.3 s: {'met' if total <= 0.3 else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
