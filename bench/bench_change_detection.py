"""The agent's change detection per turn on a tree of 20,000+ files: the inotify watch against the full walk.

A copy of this virtualenv's site-packages (real packages, as a project's source tree: no pyvenv.cfg above it)
is made in a temporary folder, topped up with generated modules to ``--files``. Each turn a Bash-like
subprocess edits one file and creates another; the turn's look (``ChangeWatch.changed()``) is timed with the
watch and with ``watch=False`` (the walk every turn, what the agent did before), and both must report the same
paths. Prints medians and the ratio, measured in the same run.

    .venv/bin/python bench/bench_change_detection.py [--files 20000] [--turns 15]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from aries_kernel.codebase.changes import ChangeWatch  # noqa: E402


def make_tree(root: Path, files: int) -> int:
    """Copy site-packages under ``root`` and add generated modules until it holds ``files`` files."""
    shutil.copytree(sysconfig.get_paths()["purelib"], root / "lib", symlinks=True)
    for folder in ("gen/pkg0", "gen/pkg1"):  # the folders each turn edits in
        (root / folder).mkdir(parents=True)
        (root / folder / "mod0.py").write_text("VALUE = 0\n")
    count = sum(1 for path in root.rglob("*") if path.is_file())
    n = 1
    while count < files:
        folder = root / "gen" / f"pkg{n // 100}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"mod{n}.py").write_text(f"VALUE = {n}\n")
        n += 1
        count += 1
    return count


def turns(root: Path, changes: ChangeWatch, count: int) -> tuple[list[float], list[list[str]]]:
    """Seconds of each turn's look, and what it found, after a subprocess changed two files."""
    seconds, found = [], []
    changes.changed()  # the first look records the tree (and starts watching)
    for turn in range(count):
        subprocess.run(
            ["bash", "-c", f"echo 'X = {turn}' >> gen/pkg0/mod0.py; echo 'N = 1' > gen/pkg1/new{turn}.py"],
            cwd=root,
            check=True,
        )
        begin = time.perf_counter()
        found.append(changes.changed())
        seconds.append(time.perf_counter() - begin)
    return seconds, found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--turns", type=int, default=15)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "tree"
        total = make_tree(root, options.files)
        with ChangeWatch(root) as watched:
            begin = time.perf_counter()
            watched.changed()
            baseline = time.perf_counter() - begin
            watch_s, watch_found = turns(root, watched, options.turns)
            mode, recorded = watched.mode, len(watched)
        # The walk runs on the same tree after the watched turns (the new files stay; it sees its own).
        with ChangeWatch(root, watch=False) as walked:
            walk_s, walk_found = turns(root, walked, options.turns)
    assert all(len(paths) == 2 for paths in watch_found + walk_found), (watch_found, walk_found)
    watch_ms, walk_ms = statistics.median(watch_s) * 1000, statistics.median(walk_s) * 1000
    print(f"tree: {total:,} files ({recorded:,} recorded by the project walk); {options.turns} turns")
    print(f"first look (walk + watch {mode}):      {baseline * 1000:8.1f} ms")
    print(f"per turn, {mode} watch (median):     {watch_ms:8.2f} ms")
    print(f"per turn, full walk (median):          {walk_ms:8.2f} ms")
    print(
        f"ratio watch / walk:                    {watch_ms / walk_ms:8.4f}  ({walk_ms / watch_ms:,.0f}x faster)"
    )


if __name__ == "__main__":
    main()
