"""A kernel's first answer about the codebase, warm and cold, as ratios to references taken in the same round.

    python bench/bench_kernel_answer.py [--rounds 3] [--root DIR] [--warm-only]

On a copy of installed pandas (or of ROOT), each round measures, from the kernel start request to the reply:

- plain: a python3 kernel answering ``1`` (the reference for the warm row, and the kernel start taken off the
  cold row);
- warm: an Aries kernel answering ``codebase.stats()`` where ``.aries/index.db`` is up to date
  (target <= 1.3x plain);
- cold: an Aries kernel answering ``codebase.stats()`` with no ``.aries``; its time less plain's, against a raw
  one-thread tree-sitter parse of the same files (bench_index's ``parse`` step, run just before it)
  (target <= 1.3x). ``--warm-only`` leaves this row and the parse out;
- memory (``--memory``, once after the rounds): the peak RSS of a warm Aries kernel after ``codebase.stats()``
  and the first queries (top_files, search, find_symbol, detect_duplication, find_similar_patterns,
  find_convention), as the kernel process reads it from /proc, against a plain python3 kernel's after ``1``
  (target <= 600 MB on a 25k-file tree, such as bench_growth's).

Ratios are taken per round and their medians printed, with the load before and after. Kernels run with bytecode
caches (bench_kernel_start.kernel_env) and their own index key, vault and log folder.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_index import _FUNCTION, run_child  # noqa: E402
from bench_kernel_start import kernel_env, load, time_to_answer  # noqa: E402

from tests.kernel_harness import run_cell, start_kernel, stop_kernel  # noqa: E402

STATS = "codebase.stats()"
# The first queries of the memory row, and the kernel's peak RSS in MB as the cell's result.
QUERIES = f"""
_snippet = {_FUNCTION!r}
_answers = [
    codebase.top_files(),
    codebase.search("parse"),
    codebase.find_symbol("read_csv"),
    codebase.detect_duplication(_snippet, threshold=0.5),
    codebase.find_similar_patterns(_snippet, mode="shape"),
    codebase.find_convention("error handling"),
]
del _answers
"""
PEAK = "int(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')).split()[1]) // 1024"


def mode_of(stats: str) -> str:
    """The ``index mode`` row of a printed ``codebase.stats()`` frame."""
    for line in stats.splitlines():
        if "index mode" in line:
            return line.split()[-1]
    raise AssertionError(f"no index mode in {stats!r}")


def peak_rss(kernel_name: str, root: Path, env: dict[str, str], cells: list[str]) -> int:
    """The peak RSS in MB of a ``kernel_name`` kernel after running ``cells`` one after another."""
    km, kc = start_kernel(root, env=env, kernel_name=kernel_name)
    try:
        for code in [*cells, PEAK]:
            result = run_cell(kc, code, timeout=1200)
            assert result.error is None, (kernel_name, code, result.error)
        assert result.result is not None
        return int(result.result)
    finally:
        stop_kernel(km, kc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--root", type=Path, default=None, help="the tree (default: installed pandas)")
    parser.add_argument("--warm-only", action="store_true", help="only the plain and warm rows")
    parser.add_argument("--memory", action="store_true", help="also the warm kernel's peak RSS after queries")
    args = parser.parse_args()
    if args.root is None:
        import pandas

        args.root = Path(pandas.__path__[0])
    with tempfile.TemporaryDirectory(prefix="aries-bench-answer-") as tmp:
        root = Path(tmp) / args.root.name
        shutil.copytree(args.root, root, ignore=shutil.ignore_patterns("__pycache__", ".aries"))
        env = kernel_env(ARIES_ROOT=str(root), ARIES_INDEX_KEY=str(Path(tmp) / "index.key"))
        warm_index, cold_index = root / ".aries", Path(tmp) / "cold.aries"
        # Warm the file and bytecode caches, and leave an index for the warm rows.
        time_to_answer("python3", root, "1", env)
        assert mode_of(time_to_answer("aries", root, STATS, env)[1]) == "cold"
        print(f"{root.name}: load before {load()}")
        rows: dict[str, list[float]] = {name: [] for name in ("parse", "plain", "warm", "cold")}
        for _ in range(args.rounds):
            plain, _ = time_to_answer("python3", root, "1", env)
            warm, stats = time_to_answer("aries", root, STATS, env)
            assert mode_of(stats) == "warm", stats
            rows["plain"].append(plain)
            rows["warm"].append(warm)
            if args.warm_only:
                print(f"  round: plain kernel 1 {plain:.2f} s, warm stats {warm:.2f} s (load {load()})")
                continue
            parse = run_child("parse", str(root), "1")["seconds"]
            warm_index.rename(cold_index)
            cold, stats = time_to_answer("aries", root, STATS, env)
            assert mode_of(stats) == "cold", stats
            shutil.rmtree(warm_index)
            cold_index.rename(warm_index)
            rows["parse"].append(parse)
            rows["cold"].append(cold)
            print(
                f"  round: parse {parse:.2f} s, plain kernel 1 {plain:.2f} s, warm stats {warm:.2f} s, "
                f"cold stats {cold:.2f} s (load {load()})"
            )
        if args.memory:
            plain_peak = peak_rss("python3", root, env, ["1"])
            aries_peak = peak_rss("aries", root, env, [STATS, QUERIES])
    warm_ratio = statistics.median(w / p for w, p in zip(rows["warm"], rows["plain"], strict=True))
    median = {name: statistics.median(values) for name, values in rows.items() if values}
    print(f"Kernel start to first answer, {root.name}, median of {args.rounds} rounds (load after {load()})")
    if not args.warm_only:
        print(f"  raw one-thread parse                      {median['parse']:6.2f} s")
    print(f"  plain python3 kernel, `1`                 {median['plain']:6.2f} s")
    print(
        f"  aries warm, codebase.stats()              {median['warm']:6.2f} s = {warm_ratio:.2f}x plain "
        "(target <= 1.3)"
    )
    if not args.warm_only:
        cold_ratio = statistics.median(
            (c - p) / r for c, p, r in zip(rows["cold"], rows["plain"], rows["parse"], strict=True)
        )
        print(
            f"  aries cold, codebase.stats(), less plain  {median['cold'] - median['plain']:6.2f} s = "
            f"{cold_ratio:.2f}x the parse (target <= 1.3)"
        )
    if args.memory:
        print(f"  peak RSS, plain python3 kernel after `1`  {plain_peak:6d} MB")
        print(
            f"  peak RSS, aries warm after stats() and the first queries {aries_peak:6d} MB = "
            f"{aries_peak / plain_peak:.1f}x plain (target <= 600 MB on 25k files)"
        )


if __name__ == "__main__":
    main()
