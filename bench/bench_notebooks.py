"""Benchmark: indexing 500 notebooks against the same code cells as 500 ``.py`` files (target <= 1.3x).

Both trees are built in a temporary folder from this interpreter's standard library: each of 500 modules is
split into code cells at its top-level definitions, with a markdown cell before every few; the notebook tree
holds ``nb_<n>.ipynb`` (nbformat 4.5, Python kernelspec), the reference tree ``nb_<n>.py`` with exactly the
cells' code. ``--outputs KB`` also gives every notebook a saved plot of that many KB (base64, as Jupyter saves
it) and a text output per cell: outputs are never parsed, but the JSON holding them is read.

Each cold index (no ``.aries/index.db``) runs in its own subprocess, so no parse worker is reused between runs;
the same worker count is used for both trees, 1 worker and then every core, and the median of ``--repeats``
runs is shown with the ratio.

Usage: python bench/bench_notebooks.py [--files 500] [--repeats 3] [--outputs 0]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

_TOP_LEVEL = re.compile(r"^(?:def |class |async def |@)")


def _modules(count: int) -> list[Path]:
    """``count`` standard-library modules of 2-40 KB, in a fixed order."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    found = [
        path
        for path in sorted(stdlib.rglob("*.py"))
        if "site-packages" not in path.parts
        and "test" not in path.parts
        and 2_000 <= path.stat().st_size <= 40_000
    ]
    if len(found) < count:
        raise SystemExit(f"only {len(found)} standard-library modules of 2-40 KB; ask for fewer --files")
    return found[:count]


def _cells(text: str) -> list[str]:
    """The module split before each top-level definition that follows a blank line (the cells join back to it)."""
    cells: list[list[str]] = [[]]
    lines = text.splitlines(keepends=True)
    for number, line in enumerate(lines):
        if _TOP_LEVEL.match(line) and number and not lines[number - 1].strip() and cells[-1]:
            cells.append([])
        cells[-1].append(line)
    return ["".join(cell) for cell in cells if cell]


def _notebook(cells: list[str], plot_kb: int) -> dict[str, Any]:
    out: list[dict[str, Any]] = []
    for number, source in enumerate(cells):
        if number % 3 == 0:
            out.append(
                {"cell_type": "markdown", "id": f"md{number}", "metadata": {}, "source": f"## Step {number}"}
            )
        outputs: list[dict[str, Any]] = []
        if plot_kb:
            outputs.append({"output_type": "stream", "name": "stdout", "text": [f"step {number} done\n"]})
        out.append(
            {
                "cell_type": "code",
                "id": f"c{number}",
                "metadata": {},
                "execution_count": number + 1,
                "source": source.splitlines(keepends=True),
                "outputs": outputs,
            }
        )
    if plot_kb and out:
        png = base64.b64encode(os.urandom(plot_kb * 768)).decode()
        out[-1]["outputs"].append(
            {
                "output_type": "display_data",
                "metadata": {},
                "data": {"image/png": png, "text/plain": ["<Figure>"]},
            }
        )
    metadata = {
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"},
    }
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": metadata, "cells": out}


def build(folder: Path, files: int, plot_kb: int) -> dict[str, Any]:
    """Write both trees under ``folder``; what they hold."""
    (folder / "py").mkdir(parents=True)
    (folder / "nb").mkdir(parents=True)
    cells = json_bytes = py_bytes = 0
    for number, module in enumerate(_modules(files)):
        parts = _cells(module.read_text(encoding="utf-8", errors="replace"))
        cells += len(parts)
        code = "".join(parts)
        (folder / "py" / f"nb_{number}.py").write_text(code, encoding="utf-8")
        text = json.dumps(_notebook(parts, plot_kb), indent=1)
        (folder / "nb" / f"nb_{number}.ipynb").write_text(text, encoding="utf-8")
        py_bytes += len(code.encode())
        json_bytes += len(text.encode())
    return {"cells": cells, "py_mb": py_bytes / 1e6, "json_mb": json_bytes / 1e6}


def child(root: str, workers: int) -> None:
    """One cold index of ``root`` with ``workers`` workers: print its seconds and what it indexed."""
    from traitlets.config import Config

    from aries_kernel.codebase import Codebase

    started = time.perf_counter()
    codebase = Codebase(root, config=Config({"AriesCodebase": {"workers": workers, "persist": False}}))
    codebase.wait_ready()
    seconds = time.perf_counter() - started
    files = codebase.list_files(roles="all")
    print(
        json.dumps(
            {
                "seconds": seconds,
                "files": len(files),
                "symbols": int(files["symbols"].sum()),
                "skipped": len(codebase.skipped()),
            }
        )
    )


def _cold(root: Path, workers: int) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(root), "--workers", str(workers)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--outputs", type=int, default=0, metavar="KB", help="a saved plot of KB per notebook"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.workers)
        return
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        info = build(folder, args.files, args.outputs)
        print(
            f"{args.files} notebooks ({info['cells']:,} code cells, {info['json_mb']:.1f} MB of JSON"
            f"{f', a {args.outputs} KB plot each' if args.outputs else ', no outputs'}) against the same code as "
            f"{args.files} .py files ({info['py_mb']:.1f} MB); cold index, median of {args.repeats}"
        )
        for workers in sorted({1, cores}):
            runs: dict[str, list[dict[str, Any]]] = {"py": [], "nb": []}
            for _ in range(args.repeats):
                for kind in ("py", "nb"):  # interleaved, so a busy moment costs both alike
                    runs[kind].append(_cold(folder / kind, workers))
            py, nb = (statistics.median(r["seconds"] for r in runs[kind]) for kind in ("py", "nb"))
            same = {(r["files"], r["symbols"], r["skipped"]) for kind in runs for r in runs[kind]}
            check = "same files and symbols" if len(same) == 1 else f"DIFFERENT results: {sorted(same)}"
            print(
                f"  {workers} worker{'s' if workers > 1 else ''}: .py {py:.2f} s, notebooks {nb:.2f} s, "
                f"ratio {nb / py:.2f}x (target <= 1.3x; {check})"
            )


if __name__ == "__main__":
    main()
