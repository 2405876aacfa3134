"""A team's second member: kernel-side start to first answer from a teammate's index of the same commit,
against a cold index of their own (target: at most 10%).

Each start runs in a fresh interpreter with its own user key (``ARIES_INDEX_KEY``), in its own clone of one git
repository (a folder of the same name elsewhere, so files have new mtimes as on another machine):
  1. member A's cold index, which then writes the team's copy (``ARIES_TEAM_INDEX_DIR`` / ``ARIES_TEAM_KEY_FILE``);
  2. member B's start from that copy, one file of B's changed (it is read, hashed and parsed; git vouches for
     the rest, which are not read);
  3. the reference: member B's cold index of the same clone, with no team folder.
"First answer" is ready plus the first ``top_files()``.

Usage: python bench/bench_team_index.py [--big] [--repeats N]
  (default: installed pandas; ``--big``: the 20,000+ file mixed tree of bench_index.py)
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_index import build_big  # noqa: E402


def child_start(root: Path) -> dict[str, Any]:
    """Construction to the first answer; then (outside the clock) the team copy's writing, if any."""
    from aries_kernel.codebase import Codebase

    started = time.perf_counter()
    codebase = Codebase(root)
    codebase.wait_ready()
    codebase.top_files()
    seconds = time.perf_counter() - started
    thread = codebase._thread
    published = time.perf_counter()
    if thread is not None:
        thread.join()
    return {
        "seconds": seconds,
        "publish": time.perf_counter() - published,
        "parsed": codebase.last_run["parsed"],
        "reused": codebase.last_run["reused"],
        "note": codebase.team_note,
    }


def start(root: Path, env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, "--child", str(root)],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def git(*args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.com", *args],
        check=True,
        capture_output=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--big", action="store_true", help="the mixed tree of bench_index.py, not pandas")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        print(json.dumps(child_start(options.child)))
        return
    with tempfile.TemporaryDirectory(prefix="aries-bench-team-") as tmp_name:
        tmp = Path(tmp_name)
        origin = tmp / "origin"
        if options.big:
            build_big(origin)
        else:
            import pandas

            shutil.copytree(pandas.__path__[0], origin, ignore=shutil.ignore_patterns("__pycache__"))
        git("-C", str(origin), "init", "-q")
        git("-C", str(origin), "add", "-A")
        git("-C", str(origin), "commit", "-q", "-m", "the commit the team works on")
        key = tmp / "team.key"
        key.write_bytes(secrets.token_bytes(32))
        rows: list[tuple[float, float, dict[str, Any]]] = []
        for round_ in range(options.repeats):
            team = {"ARIES_TEAM_INDEX_DIR": str(tmp / f"shared{round_}"), "ARIES_TEAM_KEY_FILE": str(key)}
            clones = {}
            for who in ("a", "b"):
                clones[who] = tmp / f"{who}{round_}" / "repo"
                git("clone", "-q", str(origin), str(clones[who]))
            edited = next(p for p in sorted(clones["b"].rglob("*.py")) if p.stat().st_size > 2000)
            edited.write_text(edited.read_text() + "\n\ndef added_by_b():\n    return 1\n")
            first = start(clones["a"], {**team, "ARIES_INDEX_KEY": str(tmp / f"a{round_}.key")})
            second = start(clones["b"], {**team, "ARIES_INDEX_KEY": str(tmp / f"b{round_}.key")})
            shutil.rmtree(clones["b"] / ".aries")
            alone = start(clones["b"], {"ARIES_INDEX_KEY": str(tmp / f"b-alone{round_}.key")})
            assert "started from the team index" in second["note"], second
            rows.append((second["seconds"], alone["seconds"], {"a": first, "b": second}))
        team_s = statistics.median(r[0] for r in rows)
        alone_s = statistics.median(r[1] for r in rows)
        ratio = statistics.median(r[0] / r[1] for r in rows)
        last = rows[-1][2]
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        name = "mixed tree" if options.big else "installed pandas"
        print(f"\nTeam index, {name}: {options.repeats} rounds ({os.cpu_count()} cores, load {load})")
        print(
            f"  member A cold index (publishes after):   {statistics.median(r[2]['a']['seconds'] for r in rows):7.2f} s"
            f"  + {statistics.median(r[2]['a']['publish'] for r in rows):.2f} s writing the team copy off the clock"
        )
        print(
            f"  member B from the team copy:            {team_s:7.2f} s  ({last['b']['parsed']:,} parsed, "
            f"{last['b']['reused']:,} reused)"
        )
        print(f"  member B cold index of their own:       {alone_s:7.2f} s")
        print(f"  ratio (median of rounds), target <= 0.10: {ratio:.3f}")


if __name__ == "__main__":
    main()
