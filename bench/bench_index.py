"""Benchmark of the codebase index: installed pandas, and a large mixed tree (20,000+ files).

Each measurement runs in its own subprocess (so peak RSS is that step's alone: the largest of the process and its
worker processes, from ``resource.getrusage``), and every ratio is against a reference measured in the same run:
  1. plain tree-sitter: read and parse every file the index parses, on one core and on all cores;
  2. cold index (no .aries/index.db): parse + extract (with the definitions' hashes and shape profiles) +
     graph, against both plain parses;
  3. warm start from .aries/index.db (target <= 5% of cold), and the first query after it (top_files);
  4. the judgment operations (detect_duplication, find_similar_patterns in shape mode, find_convention):
     cold index + the first call, with one worker and with one per core (target <= 2.0x the 1-core parse on
     two cores), and warm start + the first call (target <= 0.3x), each against a 1-core parse taken just
     before it; find_convention("error handling") reads what the index's workers found in each file (a
     first call for another topic scans the files it reads and stores that), so its warm line is given for
     a first and a second call;
  5. peak RSS of the cold index (target <= 800 MB at 20,000+ files), of each judgment step, and the size of
     index.db;
  6. reindex of one edited file after the warm start (target < 50 ms), median of several edits.

The mixed tree is built in a temporary folder from this interpreter's site-packages, its standard library and
npm's own packages (when installed) unless ``--big DIR`` names one; folders are renamed so that no name on the
walker's skip list hides them.

Usage: python bench/bench_index.py [--big DIR] [--skip-pandas] [--skip-big] [--repeats N]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

MIN_BIG_FILES = 20_000
_NPM = Path("/usr/lib/node_modules/npm")
# The first calls timed: a Python function (pandas' and the mixed tree's main language), by operation name.
_FUNCTION = """def merge_options(self, other, strict=False):
    if other is None:
        return self
    result = self.copy()
    for key, value in other.items():
        if strict and key not in result:
            raise KeyError(key)
        result[key] = value
    return result
"""
JUDGMENT = {
    "detect_duplication": lambda codebase: codebase.detect_duplication(_FUNCTION, threshold=0.5),
    "find_similar_patterns": lambda codebase: codebase.find_similar_patterns(_FUNCTION, mode="shape"),
    "find_convention": lambda codebase: codebase.find_convention("error handling"),
}


def _peak_mb() -> float:
    """Peak RSS in MB of this process and of its largest finished child (the index's worker processes)."""
    me = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(me, children) / 1024


def _cpu() -> float:
    """CPU seconds (user + system) of this process and its finished children. The index keeps one idle worker
    alive for the next reindex; it is ended first, so that its work counts."""
    from aries_kernel.codebase import parse_workers

    parse_workers._close_idle()
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def _sources(root: Path) -> list[Any]:
    from aries_kernel.codebase.config import AriesCodebase
    from aries_kernel.codebase.files import walk

    limit = AriesCodebase().max_file_size
    return [s for s in walk(root).sources if s.size <= limit]


def _parse_batch(root: str, items: list[tuple[str, str]]) -> int:
    from aries_kernel.codebase.languages import get_parser

    for rel, language in items:
        get_parser(language).parse((Path(root) / rel).read_bytes())
    return len(items)


def child_parse(root: Path, workers: int) -> dict[str, Any]:
    """Plain tree-sitter over exactly the files the index parses, in ``workers`` processes."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    items = [(s.rel, s.language) for s in _sources(root)]
    cpu = _cpu()
    started = time.perf_counter()
    if workers == 1:
        _parse_batch(str(root), items)
    else:
        batches = [items[i : i + 64] for i in range(0, len(items), 64)]
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            assert sum(pool.map(_parse_batch, [str(root)] * len(batches), batches)) == len(items)
    return {"seconds": time.perf_counter() - started, "cpu": _cpu() - cpu, "files": len(items)}


def child_cold(root: Path) -> dict[str, Any]:
    """A cold index from construction to ready, then the first query."""
    from aries_kernel.codebase import Codebase

    cpu = _cpu()
    started = time.perf_counter()
    codebase = Codebase(root)
    codebase.wait_ready()
    seconds = time.perf_counter() - started
    cpu = _cpu() - cpu
    peak = _peak_mb()
    started = time.perf_counter()
    codebase.top_files()
    first_query = time.perf_counter() - started
    assert codebase.last_run["mode"] == "cold", codebase.last_run
    return {
        "seconds": seconds,
        "cpu": cpu,
        "peak_mb": peak,
        "first_query": first_query,
        "parsed": codebase.last_run["parsed"],
        "files": len(codebase._graph.node_of),
        "edges": codebase._graph.graph.num_edges(),
    }


def child_warm(root: Path, repeats: int) -> dict[str, Any]:
    """A warm start, the first query after it, then reindex of an edited median-size file."""
    from aries_kernel.codebase import Codebase

    started = time.perf_counter()
    codebase = Codebase(root)
    codebase.wait_ready()
    seconds = time.perf_counter() - started
    assert codebase.last_run["parsed"] == 0, codebase.last_run
    graph = codebase.last_run["graph"]  # "built" only if the package's code changed since the cold index
    started = time.perf_counter()
    codebase.top_files()
    first_query = time.perf_counter() - started
    peak = _peak_mb()
    files = sorted(
        (rel for rel in codebase._graph.node_of if rel.endswith(".py")),
        key=lambda f: (root / f).stat().st_size,
    )
    rel = files[len(files) // 2]
    target = root / rel
    original = target.read_text()
    timings = []
    for i in range(repeats):
        target.write_text(original + f"\n\ndef _bench_edit_{i}():\n    return {i}\n")
        started = time.perf_counter()
        changes = codebase.reindex([rel])
        timings.append((time.perf_counter() - started) * 1000)
        assert list(changes["change"]) == ["modified"], changes
    target.write_text(original)
    codebase.reindex([rel])
    return {
        "seconds": seconds,
        "first_query": first_query,
        "peak_mb": peak,
        "reindex_ms": timings,
        "reindex_file": rel,
        "reindex_bytes": len(original.encode()),
        "graph": graph,
        "edges": codebase._graph.graph.num_edges(),
    }


def child_judgment(root: Path, operation: str, workers: int) -> dict[str, Any]:
    """Index (cold when there is no index.db, with ``workers`` workers; else a warm start) and the first call of
    one judgment operation: the time from construction to its answer, the peak RSS, and how many files the
    index and the operation parsed."""
    from traitlets.config import Config

    from aries_kernel.codebase import Codebase, indexer, judgment

    parsed = {"index": 0, "here": 0}
    parse_files, tree = indexer.parse_files, judgment.JudgmentMixin._tree

    def counting(*args: Any, **kwargs: Any) -> Any:
        parsed["index"] += len(args[1])
        return parse_files(*args, **kwargs)

    def parse_here(self: Any, text: str, language: str) -> Any:
        parsed["here"] += 1
        return tree(self, text, language)

    indexer.parse_files = counting
    judgment.JudgmentMixin._tree = parse_here  # type: ignore[method-assign]
    cpu = _cpu()
    started = time.perf_counter()
    codebase = Codebase(root, config=Config({"AriesCodebase": {"workers": workers}}))
    codebase.wait_ready()
    ready = time.perf_counter() - started
    answer = JUDGMENT[operation](codebase)
    seconds = time.perf_counter() - started
    return {
        "seconds": seconds,
        "cpu": _cpu() - cpu,
        "ready": ready,
        "mode": codebase.last_run["mode"],
        "rows": len(answer),
        "peak_mb": _peak_mb(),
        "parsed_by_index": parsed["index"],
        "parsed_here": parsed["here"],
    }


def run_child(*args: str) -> dict[str, Any]:
    """Run one measurement in a fresh interpreter; its result is the JSON on its last output line."""
    done = subprocess.run(
        [sys.executable, __file__, "--child", *args], check=True, capture_output=True, text=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def build_big(dest: Path) -> Path:
    """site-packages + the standard library + npm's packages, under names no skip rule matches."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.so", "*.so.*")
    shutil.copytree(sysconfig.get_paths()["purelib"], dest / "pkgs", ignore=ignore, symlinks=True)
    shutil.copytree(sysconfig.get_paths()["stdlib"], dest / "stdlib", ignore=ignore, symlinks=True)
    if _NPM.is_dir():
        shutil.copytree(_NPM, dest / "npm", ignore=ignore, symlinks=True)
        if (dest / "npm/node_modules").is_dir():
            os.rename(dest / "npm/node_modules", dest / "npm/deps")
    return dest


def measure(name: str, root: Path, repeats: int) -> list[tuple[str, str, str]]:
    """The rows of one tree's table."""
    cores = os.cpu_count() or 1
    one = min((run_child("parse", str(root), "1") for _ in range(2)), key=lambda r: r["seconds"])
    every = run_child("parse", str(root), str(cores))
    files = one["files"]
    judged: list[tuple[str, str, str]] = []

    def judgment_row(label: str, operation: str, workers: int, cold: bool) -> tuple[str, str, str]:
        # Each against a 1-core parse taken just before it, so that a machine busy with other work for part of
        # the run does not skew the ratio.
        if cold:
            shutil.rmtree(root / ".aries", ignore_errors=True)
        reference = run_child("parse", str(root), "1")
        parse = reference["seconds"]
        found = run_child("judgment", str(root), operation, str(workers))
        assert found["mode"] == ("cold" if cold else "warm"), found
        parsed = f"{found['parsed_by_index']:,} parsed by the index, {found['parsed_here']:,} by the call"
        ready = f" (index ready at {found['ready'] / parse:.2f}x)" if cold else ""
        # CPU time, which other work on the machine barely changes: the whole process tree's, against the parse's.
        cpu = f"CPU {found['cpu']:.1f} s = {found['cpu'] / reference['cpu']:.2f}x the parse's"
        return (
            f"  {label}",
            f"{found['seconds']:.2f} s",
            f"{found['seconds'] / parse:.2f}x the 1-core parse of {parse:.2f} s{ready}; {cpu}; "
            f"{found['peak_mb']:,.0f} MB peak; {parsed}",
        )

    for operation in JUDGMENT:
        for workers in sorted({1, cores}):
            label = f"cold + first {operation}, {workers} worker{'s' if workers > 1 else ''}"
            judged.append(judgment_row(label, operation, workers, cold=True))
    shutil.rmtree(root / ".aries", ignore_errors=True)
    cold = run_child("cold", str(root))
    db_mb = (root / ".aries/index.db").stat().st_size / 1e6
    for operation in JUDGMENT:
        judged.append(judgment_row(f"warm start + first {operation}", operation, cores, cold=False))
    label = "warm start + find_convention, after a call before"
    judged.append(judgment_row(label, "find_convention", cores, cold=False))
    db_judged_mb = (root / ".aries/index.db").stat().st_size / 1e6
    warm = run_child("warm", str(root), str(repeats))
    assert warm["edges"] == cold["edges"], (warm["edges"], cold["edges"])
    if name.startswith("mixed") and files < MIN_BIG_FILES:
        print(f"note: the mixed tree has {files:,} files, fewer than {MIN_BIG_FILES:,}; pass --big")
    reindex = statistics.median(warm["reindex_ms"])
    return [
        (f"{name}: files indexed", f"{files:,}", f"{cold['edges']:,} edges"),
        (
            "plain tree-sitter parse, 1 core",
            f"{one['seconds']:.2f} s",
            f"{files / one['seconds']:,.0f} files/s",
        ),
        (
            f"plain tree-sitter parse, {cores} cores",
            f"{every['seconds']:.2f} s",
            f"{files / every['seconds']:,.0f} files/s",
        ),
        (
            f"cold index, {cores} cores ({cold['parsed']:,} parsed)",
            f"{cold['seconds']:.2f} s",
            f"{cold['seconds'] / one['seconds']:.2f}x the 1-core parse, "
            f"{cold['seconds'] / every['seconds']:.2f}x the {cores}-core parse; "
            f"CPU {cold['cpu']:.1f} s = {cold['cpu'] / one['cpu']:.2f}x the parse's",
        ),
        (
            "warm start from .aries/index.db",
            f"{warm['seconds']:.2f} s",
            f"{warm['seconds'] / cold['seconds']:.1%} of cold (target <= 5%); 0 parsed, graph {warm['graph']}",
        ),
        (
            "  first query after it (top_files)",
            f"{warm['first_query']:.2f} s",
            f"cold's first query: {cold['first_query']:.2f} s",
        ),
        ("judgment operations (first call)", "", "target: warm <= 0.3x, cold <= 2.0x on two cores"),
        *judged,
        (
            "peak RSS, cold index (largest process)",
            f"{cold['peak_mb']:,.0f} MB",
            f"warm start + query {warm['peak_mb']:,.0f} MB",
        ),
        (".aries/index.db", f"{db_mb:,.1f} MB", f"{db_judged_mb:,.1f} MB after the judgment calls"),
        (
            "reindex 1 edited file after warm start",
            f"{reindex:.1f} ms",
            f"{warm['reindex_file']} ({warm['reindex_bytes']:,} bytes); median of "
            f"{', '.join(f'{t:.0f}' for t in warm['reindex_ms'])} (target < 50 ms)",
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--big", type=Path, default=None, help="the large tree (default: built, see above)")
    parser.add_argument("--skip-pandas", action="store_true", help="measure only the large tree")
    parser.add_argument("--skip-big", action="store_true", help="measure only pandas")
    parser.add_argument("--repeats", type=int, default=7, help="edits timed for the reindex median")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        step, root, *rest = options.child
        if step == "parse":
            result = child_parse(Path(root), int(rest[0]))
        elif step == "cold":
            result = child_cold(Path(root))
        elif step == "judgment":
            result = child_judgment(Path(root), rest[0], int(rest[1]))
        else:
            result = child_warm(Path(root), int(rest[0]))
        print(json.dumps(result))
        return
    rows: list[tuple[str, str, str]] = []
    with tempfile.TemporaryDirectory(prefix="aries-bench-") as tmp:
        if not options.skip_pandas:
            import pandas

            root = Path(tmp) / "pandas"
            shutil.copytree(pandas.__path__[0], root, ignore=shutil.ignore_patterns("__pycache__"))
            rows += measure("installed pandas", root, options.repeats)
        if not options.skip_big:
            if options.big is None:
                big = build_big(Path(tmp) / "mixed")
            else:
                big = Path(tmp) / options.big.name
                shutil.copytree(options.big, big, symlinks=True, ignore=shutil.ignore_patterns(".aries"))
            rows += measure(f"mixed tree ({big.name})", big, options.repeats)
    width = max(len(r[0]) for r in rows)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"\nCodebase index benchmark ({os.cpu_count()} cores, Python {sys.version.split()[0]}, load {load})"
    )
    for label, value, note in rows:
        if not label.startswith(" ") and ":" in label:
            print("-" * (width + 70))
        print(f"{label:<{width}}  {value:>10}  {note}")


if __name__ == "__main__":
    main()
