"""Checkpoint cost per agent turn on a repository of 1,500+ files, against the turn's own loop time without them.

Run: ``.venv/bin/python bench/bench_checkpoints.py [--files 2000] [--turns 20]``. A copy of this virtualenv's
site-packages source files (real packages) is made in a temporary folder, up to ``--files`` files. The agent runs
with the instant scripted client of ``tests/agent_scripted.py`` (no model time), one run of ``--turns`` turns,
each turn a Bash ``sed -i`` on one file and an Edit of another, with a Repl step every third turn. The same
session runs twice on two identical trees: checkpoints off (the loop's own time) and on. Printed:

1. the first checkpoint of a root, which stores the whole tree once (time and bytes);
2. the per-turn medians of loop time without and with checkpoints, the difference, their ratio, the bytes
   each turn's checkpoint stored, and what sealing costs of it (the MAC over the manifest, written twice a turn;
   a record's and a blob's are over a few hundred bytes);
3. the first checkpoint after a kernel restart (the manifest on disk: files are only stat'ed).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import sysconfig
import tempfile
import time
import timeit
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from IPython.core.interactiveshell import InteractiveShell  # noqa: E402

from aries_kernel.agent import Agent, AriesAgent  # noqa: E402
from aries_kernel.agent.checkpoints import _sealed  # noqa: E402
from aries_kernel.agent.events import Checkpointed, TurnFinished  # noqa: E402
from tests.agent_scripted import ScriptedClient, ScriptedRouter  # noqa: E402
from tests.loopback import Reply  # noqa: E402


class Context:
    """What the agent needs of the Aries context here: a root, a shell, no code graph to re-index."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.shell = InteractiveShell.instance()
        self.config = None
        self.codebase = self

    def reindex(self, paths: list[str]) -> None:  # the index is not what is measured
        pass

    def lazy(self, name: str, factory: Any) -> Any:
        raise RuntimeError(f"the benchmark builds no {name}")

    def built(self, name: str) -> Any:
        return None


def make_tree(root: Path, files: int) -> tuple[int, int]:
    """Copy source files of site-packages under ``root`` until it holds ``files``; returns (files, bytes)."""
    source = Path(sysconfig.get_paths()["purelib"])
    count = size = 0
    for path in sorted(source.rglob("*.py")):
        if count >= files:
            break
        if not path.is_file() or path.is_symlink():
            continue
        target = root / "lib" / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        count += 1
        size += target.stat().st_size
    for n in range(2):
        (root / f"edit{n}.py").write_text("VALUE = 0\n" + "# filler line\n" * 200)
    return count + 2, size


def script(turns: int) -> list[Reply]:
    replies = []
    for turn in range(turns):
        calls: list[tuple[str, dict[str, Any]]] = [
            ("Bash", {"command": f"sed -i 's/VALUE = [0-9]*/VALUE = {turn + 1}/' edit0.py"}),
            (
                "Edit",
                {
                    "file_path": "edit1.py",
                    "old_string": f"VALUE = {turn}",
                    "new_string": f"VALUE = {turn + 1}",
                },
            ),
        ]
        if turn % 3 == 2:
            calls.append(("Repl", {"code": f"bench_value = {turn}\nbench_list = list(range({turn}))"}))
        replies.append(Reply(tool_calls=calls))
    return replies


def run(root: Path, turns: int, enabled: bool) -> tuple[list[float], list[int], Agent]:
    """Per-turn seconds (from one TurnFinished to the next) and the bytes each checkpoint stored."""
    agent = Agent(
        Context(root),
        router=ScriptedRouter(ScriptedClient(*script(turns), Reply(text="done"))),
        settings=AriesAgent(permission_mode="bypassPermissions", max_turns=turns + 1),
    )
    agent.checkpoints.settings.enabled = enabled
    seconds, stored = [], []
    last = time.perf_counter()
    for event in agent.run("benchmark"):
        if isinstance(event, Checkpointed):
            stored.append(agent.checkpoints.records()[-1].bytes if agent.checkpoints.records() else 0)
        if isinstance(event, TurnFinished):
            now = time.perf_counter()
            seconds.append(now - last)
            last = now
    return seconds[:-1], stored, agent  # the last turn is the scripted "done" reply without tools


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--turns", type=int, default=20)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="aries-bench-checkpoints-") as scratch:
        off_root, on_root = Path(scratch) / "off", Path(scratch) / "on"
        files, size = make_tree(off_root, options.files)
        make_tree(on_root, options.files)
        print(f"Tree: {files:,} files, {size / 1e6:.1f} MB of source; {options.turns} turns")

        # 1. The first checkpoint of the root stores the tree once: timed on its own, before the session.
        probe = Agent(Context(on_root), router=ScriptedRouter(ScriptedClient()), settings=AriesAgent())
        started = time.perf_counter()
        probe.checkpoints._load()
        probe.checkpoints._sync()
        first = time.perf_counter() - started
        tree_bytes = probe.checkpoints.store_bytes()
        probe.changes.close()
        print(
            f"1. First checkpoint of the root (stores the tree): {first * 1000:.0f} ms, {tree_bytes / 1e6:.2f} MB"
        )

        off, _, off_agent = run(off_root, options.turns, enabled=False)
        on, stored, on_agent = run(on_root, options.turns, enabled=True)
        off_agent.changes.close()
        on_agent.changes.close()
        base, with_checkpoints = statistics.median(off), statistics.median(on)
        print("2. Per turn (median), loop time without model time:")
        print(f"   without checkpoints {base * 1000:8.2f} ms")
        print(f"   with checkpoints    {with_checkpoints * 1000:8.2f} ms")
        print(
            f"   checkpoint cost     {(with_checkpoints - base) * 1000:8.2f} ms per turn; "
            f"ratio with/without {with_checkpoints / base:.2f}x"
        )
        print(
            f"   bytes stored per turn: median {statistics.median(stored):,.0f}, max {max(stored):,} "
            f"({len(stored)} checkpoints)"
        )
        body = json.dumps(on_agent.checkpoints._manifest, separators=(",", ":")).encode()
        seal = timeit.timeit(lambda: _sealed("manifest", "manifest", len(body), body), number=200) / 200
        print(
            f"   of it, the MAC over the manifest ({len(body):,} bytes, twice a turn): {seal * 1000:.2f} ms each"
        )

        # 3. After a kernel restart: a new agent reads the manifest and stats the tree.
        again = Agent(Context(on_root), router=ScriptedRouter(ScriptedClient()), settings=AriesAgent())
        started = time.perf_counter()
        again.checkpoints._load()
        again.checkpoints._sync()
        warm = time.perf_counter() - started
        again.changes.close()
        print(f"3. First checkpoint after a restart (manifest on disk): {warm * 1000:.0f} ms")
        print(f"   store: {again.checkpoints.store_bytes() / 1e6:.2f} MB under .aries/checkpoints/")


if __name__ == "__main__":
    main()
