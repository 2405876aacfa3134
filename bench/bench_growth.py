"""How the codebase index's costs grow with the tree: ~25,000, ~50,000 and ~100,000 source files.

Each tree is composed of real code: the mixed tree of ``bench_index.build_big`` (site-packages, the standard
library, npm's packages) is built once as the base, and a tree of N files takes the base's packages in order,
copy after copy (``copy1/``, ``copy2/``, ...), until it holds about N files the index parses. Every copy gets
fresh mtimes. The trees are nested prefixes of one sequence, so a larger tree holds the smaller one's packages.

For each tree, every step runs in a fresh process (``bench_index.run_child``; peak RSS is that step's alone) and
every ratio is against the raw one-thread tree-sitter parse of the same files, measured in the same run:
  - cold index with two workers (the default: one per core), and its peak RSS;
  - warm start from .aries/index.db + the first top_files;
  - warm start + the first detect_duplication (which stores the definitions' table), and again (which loads it);
  - cold index + the first detect_duplication, with one worker per core and with one worker (its "index ready"
    time is the one-worker cold index).
Then, for each step, how its seconds and peak RSS grow per doubling of the tree (50k/25k, 100k/50k).

The trees are built under --work (default: a temporary folder, removed after) or --keep DIR (kept, and reused
by the next run; each size's results are saved there too, so ``--only-size`` can measure one size and the
table still shows the others measured before, and a run stopped part way keeps the steps it finished).
The stored graph is keyed by the package's code, so on a work tree others edit meanwhile, run it from a copy of
one commit (``git archive HEAD | tar -x -C DIR``, then ``cd DIR`` and ``PYTHONPATH=DIR python bench/...``); a warm
start that had to rebuild the graph stops the run.

Usage: python bench/bench_growth.py [--sizes 25000,50000,100000] [--keep DIR | --work DIR] [--only-size N]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench_index import _sources, build_big, run_child

# The judgment operation timed (bench_index.JUDGMENT's key).
_OPERATION = "detect_duplication"
# A unit may overshoot the target by this fraction; a larger one is left for a later, smaller unit.
_SLACK = 0.01


def _units(base: Path) -> list[tuple[str, int]]:
    """The base tree's packages (its paths two levels down: pkgs/numpy, stdlib/asyncio, stdlib/os.py) with the
    number of files the index parses in each, in path order."""
    counts = Counter("/".join(Path(s.rel).parts[:2]) for s in _sources(base))
    return sorted(counts.items())


def compose(base: Path, dest: Path, target: int) -> int:
    """Copy the base's units, copy after copy, into ``dest`` until it holds about ``target`` parsed files;
    returns how many it holds."""
    units = _units(base)
    total = 0
    copy = 0
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.so", "*.so.*", ".aries")
    while total < target * (1 - _SLACK):
        copy += 1
        added = 0
        for unit, count in units:
            if total + count > target * (1 + _SLACK):
                continue
            source, to = base / unit, dest / f"copy{copy}" / unit
            to.parent.mkdir(parents=True, exist_ok=True)
            # shutil.copy, not copy2: the copies get fresh mtimes, as a checkout would.
            if source.is_dir() and not source.is_symlink():
                shutil.copytree(source, to, ignore=ignore, symlinks=True, copy_function=shutil.copy)
            else:
                shutil.copy(source, to, follow_symlinks=False)
            total += count
            added += count
            if total >= target * (1 - _SLACK):
                break
        if not added:
            break
    return total


def measure(root: Path, saved: Path | None) -> dict[str, Any]:
    """Every step on one tree, each in its own process; the raw parse first, as the reference. With ``saved``,
    the results so far are written there after each step, so a run stopped part way still shows its steps."""
    result: dict[str, Any] = {"load": [os.getloadavg()]}
    started = time.perf_counter()

    def step(name: str, *args: str) -> dict[str, Any]:
        result[name] = run_child(*args)
        result["files"] = result["parse"]["files"]
        result["minutes"] = (time.perf_counter() - started) / 60
        result["load"][1:] = [os.getloadavg()]
        if saved is not None:
            saved.write_text(json.dumps(result))
        return result[name]

    shutil.rmtree(root / ".aries", ignore_errors=True)
    step("parse", "parse", str(root), "1")
    step("cold", "cold", str(root))
    warm = step("warm", "warm", str(root), "0")  # no reindex edits: only the warm start and its first query
    # The stored graph is keyed by the package's code: "built" means the code changed since the cold index.
    assert warm["graph"] == "loaded", warm
    assert step("warm_judged", "judgment", str(root), _OPERATION, "0")["mode"] == "warm"
    # The first judgment call after a warm start stored the definitions' table: the next warm start loads it.
    assert step("warm_judged_stored", "judgment", str(root), _OPERATION, "0")["mode"] == "warm"
    for name, workers in (("cold_judged", "0"), ("cold_judged_1", "1")):  # "0": one worker per core
        shutil.rmtree(root / ".aries", ignore_errors=True)
        assert step(name, "judgment", str(root), _OPERATION, workers)["mode"] == "cold"
    return result


def _steps(result: dict[str, Any]) -> list[tuple[str, float, float | None, float | None, str]]:
    """(label, seconds, CPU seconds or None, peak MB or None, note) of each step of one tree."""
    cores = os.cpu_count() or 1
    nan = {"seconds": math.nan, "cpu": None, "peak_mb": None, "ready": math.nan, "first_query": math.nan}
    # A step a stopped run did not reach shows as nan.
    parse, cold, warm, warm_judged, stored, judged, judged_1 = (
        result.get(name, nan)
        for name in (
            "parse",
            "cold",
            "warm",
            "warm_judged",
            "warm_judged_stored",
            "cold_judged",
            "cold_judged_1",
        )
    )
    ready = "index ready at {:.2f} s".format
    return [
        ("raw parse, 1 thread (reference)", parse["seconds"], parse["cpu"], None, ""),
        (f"cold index, {cores} workers", cold["seconds"], cold["cpu"], cold["peak_mb"], ""),
        ("cold index, 1 worker", judged_1["ready"], None, None, "the last row's index ready"),
        ("warm start + first top_files", warm["seconds"] + warm["first_query"], None, warm["peak_mb"], ""),
        (
            f"warm start + first {_OPERATION}",
            warm_judged["seconds"],
            warm_judged["cpu"],
            warm_judged["peak_mb"],
            ready(warm_judged["ready"]),
        ),
        (
            f"warm + first {_OPERATION}, table stored",
            stored["seconds"],
            stored["cpu"],
            stored["peak_mb"],
            ready(stored["ready"]),
        ),
        (
            f"cold + first {_OPERATION}, {cores} workers",
            judged["seconds"],
            judged["cpu"],
            judged["peak_mb"],
            ready(judged["ready"]),
        ),
        (
            f"cold + first {_OPERATION}, 1 worker",
            judged_1["seconds"],
            judged_1["cpu"],
            judged_1["peak_mb"],
            ready(judged_1["ready"]),
        ),
    ]


def table(results: dict[int, dict[str, Any]]) -> list[str]:
    """The printed table: each tree's steps against its raw parse, then each step's growth per doubling."""
    lines = []
    width = 44
    for size in sorted(results):
        result = results[size]
        steps = _steps(result)
        parse, parse_cpu = steps[0][1], steps[0][2]
        before, after = (", ".join(f"{x:.1f}" for x in load) for load in result["load"])
        lines.append("-" * 110)
        lines.append(
            f"~{size:,} target: {result['files']:,} files parsed, cold {result.get('cold', {}).get('edges', 0):,} edges; "
            f"load {before} -> {after}; {result['minutes']:.1f} min"
        )
        for label, seconds, cpu, peak, note in steps:
            ratio = "" if label.startswith("raw") else f"{seconds / parse:6.2f}x the parse"
            cpu_note = f"CPU {cpu:7.1f} s = {cpu / parse_cpu:5.2f}x" if cpu is not None and parse_cpu else ""
            peak_note = f"{peak:7,.0f} MB peak" if peak is not None else ""
            peak_note = f"{peak_note:<16}" if note else peak_note
            lines.append(
                f"  {label:<{width}} {seconds:8.2f} s  {ratio:>16}  {cpu_note:<24} {peak_note}{note}".rstrip()
            )
    sizes = sorted(results)
    if len(sizes) > 1:
        pairs = list(zip(sizes, sizes[1:], strict=False))
        lines.append("-" * 110)
        lines.append(
            "growth, the larger tree / the smaller: seconds, CPU seconds (less swayed by other work on the "
            "machine), peak MB; file ratio "
            + ", ".join(f"{results[b]['files'] / results[a]['files']:.2f}" for a, b in pairs)
        )
        header = "".join(f"{f'{b / 1000:g}k/{a / 1000:g}k':>28}" for a, b in pairs)
        lines.append(f"  {'':<{width}}{header}")
        rows = {size: _steps(results[size]) for size in sizes}
        for i, (label, *_) in enumerate(rows[sizes[0]]):
            cells = ""
            for a, b in pairs:
                (_, seconds_a, cpu_a, peak_a, _), (_, seconds_b, cpu_b, peak_b, _) = rows[a][i], rows[b][i]
                cell = [f"{seconds_b / seconds_a:.2f} s"]
                cell.append(f"{cpu_b / cpu_a:.2f} CPU" if cpu_a and cpu_b else "")
                cell.append(f"{peak_b / peak_a:.2f} MB" if peak_a and peak_b else "")
                cells += f"{', '.join(c for c in cell if c):>28}"
            lines.append(f"  {label:<{width}}{cells}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="25000,50000,100000", help="target file counts, comma-separated")
    parser.add_argument(
        "--keep", type=Path, default=None, help="build (or reuse) the trees here and keep them"
    )
    parser.add_argument("--work", type=Path, default=None, help="build the trees here and remove them after")
    parser.add_argument("--only-size", type=int, default=None, help="measure only this size (of --sizes)")
    options = parser.parse_args()
    sizes = sorted(int(s) for s in options.sizes.split(","))
    measured = [options.only_size] if options.only_size else sizes
    with tempfile.TemporaryDirectory(prefix="aries-growth-", dir=options.work) as tmp:
        work = options.keep if options.keep else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        base = work / "base"
        if not (base / "done").exists():
            shutil.rmtree(base, ignore_errors=True)
            build_big(base / "tree")
            (base / "done").touch()
        results: dict[int, dict[str, Any]] = {}
        for size in measured:
            tree = work / f"tree-{size}"
            if not (work / f"tree-{size}.done").exists():
                shutil.rmtree(tree, ignore_errors=True)
                started = time.perf_counter()
                files = compose(base / "tree", tree, size)
                (work / f"tree-{size}.done").touch()
                print(f"built {tree}: {files:,} files in {time.perf_counter() - started:.0f} s", flush=True)
            results[size] = measure(tree, work / f"results-{size}.json" if options.keep else None)
            print("\n".join(table({size: results[size]})), flush=True)
        if options.keep:  # the other sizes' results from earlier runs in the same folder
            for size in sizes:
                saved = work / f"results-{size}.json"
                if size not in results and saved.exists():
                    results[size] = json.loads(saved.read_text())
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"\nCodebase index growth ({os.cpu_count()} cores, Python {sys.version.split()[0]}, load now {load}; "
        f"each ratio against the raw 1-thread parse of the same tree)"
    )
    print("\n".join(table(results)))


if __name__ == "__main__":
    main()
