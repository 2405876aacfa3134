"""A team vault under load: 10 Aries kernels of 2 users (as a hub's spawner starts them: ``JUPYTERHUB_USER``,
the team vault's URL and schema in the environment) adding notes and querying at once on one PostgreSQL.

Each kernel runs one cell: ``--adds`` notes through ``vault.add`` (one transaction each), a ``query_ranked``
after every fifth add, each timed. Printed: adds per second over all kernels (first add to last), query p50 and
p95, and notes lost (added and acknowledged by a kernel, then missing from the vault; target 0), with each
note's author checked against the kernel's user. The reference is one kernel doing the same alone, in the same
run: the ratio says what sharing the database costs each writer.

    python bench/bench_team_vault.py [--kernels 10] [--adds 60] [--url postgresql://...]
  (default: a temporary PostgreSQL started from Debian's package for the run, as the test suite does)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.kernel_harness import run_cell, start_kernel, stop_kernel  # noqa: E402
from tests.pg_support import temporary_server  # noqa: E402

USERS = ("ada", "grace")
CELL = """
import json, time
_adds, _queries = [], []
for _i in range({adds}):
    _t = time.perf_counter()
    vault.add(f"{tag} note {{_i}}", f"Finding {{_i}} of {tag}: the cache key includes the schema version.")
    _adds.append(time.time())
    if _i % 5 == 4:
        _t = time.perf_counter()
        vault.query_ranked("cache key schema version", 5)
        _queries.append(time.perf_counter() - _t)
print(json.dumps({{"first": _adds[0], "last": _adds[-1], "queries": _queries}}))
"""

# Read back in another kernel: each note's author, None for a note that is not there.
READ_BACK = """
import json
_authors = []
for _i in range({adds}):
    try:
        _authors.append(vault.read(f"{tag} note {{_i}}").author)
    except Exception:
        _authors.append(None)
print(json.dumps(_authors))
"""


@contextlib.contextmanager
def database(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    with temporary_server() as server:
        yield server.url


def run_kernels(
    url: str, schema: str, count: int, adds: int, root: Path
) -> tuple[list[dict[str, Any]], float]:
    """Start ``count`` kernels (users alternating), then run the cell in all at once; their reports, and the
    wall time from the first cell sent to the last reply."""
    kernels = []
    for index in range(count):
        user = USERS[index % len(USERS)]
        env = {"ARIES_VAULT_URL": url, "ARIES_VAULT_SCHEMA": schema, "JUPYTERHUB_USER": user}
        kernels.append((user, f"k{index}-{user}", *start_kernel(root, env=env)))
    try:
        for _user, _tag, _km, kc in kernels:
            assert run_cell(kc, "vault.titles()[:0]", timeout=300).error is None  # the vault is open
        reports: list[dict[str, Any]] = [{} for _ in kernels]

        def work(slot: int) -> None:
            user, tag, _km, kc = kernels[slot]
            out = run_cell(kc, CELL.format(adds=adds, tag=tag), timeout=1800)
            assert out.error is None, out.error
            reports[slot] = {"user": user, "tag": tag, **json.loads(out.stdout.strip().splitlines()[-1])}

        started = time.perf_counter()
        threads = [threading.Thread(target=work, args=(slot,)) for slot in range(len(kernels))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - started
        check = kernels[0][3]
        for report in reports:
            out = run_cell(check, READ_BACK.format(tag=report["tag"], adds=adds), timeout=600)
            authors = json.loads(out.stdout.strip().splitlines()[-1]) if out.error is None else []
            report["found"] = sum(1 for a in authors if a is not None)
            report["authors"] = sorted({a for a in authors if a})
        return reports, wall
    finally:
        for _user, _tag, km, kc in kernels:
            stop_kernel(km, kc)


def summary(reports: list[dict[str, Any]], adds: int) -> tuple[float, float, float, int]:
    first = min(r["first"] for r in reports)
    last = max(r["last"] for r in reports)
    queries = sorted(q for r in reports for q in r["queries"])
    p95 = queries[min(len(queries) - 1, int(0.95 * len(queries)))]
    lost = sum(adds - r["found"] for r in reports)
    return len(reports) * adds / max(last - first, 1e-9), statistics.median(queries), p95, lost


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kernels", type=int, default=10)
    parser.add_argument("--adds", type=int, default=60)
    parser.add_argument("--url", default=None)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="aries-bench-team-vault-") as tmp, database(options.url) as url:
        root = Path(tmp) / "repo"
        root.mkdir()
        (root / "main.py").write_text("def main():\n    return 0\n")
        alone, _ = run_kernels(url, f"b_{uuid.uuid4().hex[:10]}", 1, options.adds, root)
        team, wall = run_kernels(url, f"b_{uuid.uuid4().hex[:10]}", options.kernels, options.adds, root)
    alone_rate, alone_p50, alone_p95, alone_lost = summary(alone, options.adds)
    rate, p50, p95, lost = summary(team, options.adds)
    wrong = [r["tag"] for r in team if r["authors"] != [r["user"]]]
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\nTeam vault on PostgreSQL ({os.cpu_count()} cores, load {load})")
    print(
        f"  1 kernel alone:        {alone_rate:7.1f} adds/s, query p50 {alone_p50 * 1000:6.1f} ms, "
        f"p95 {alone_p95 * 1000:6.1f} ms, lost {alone_lost}"
    )
    print(
        f"  {options.kernels} kernels of 2 users: {rate:7.1f} adds/s, query p50 {p50 * 1000:6.1f} ms, "
        f"p95 {p95 * 1000:6.1f} ms, lost {lost} (of {options.kernels * options.adds}), {wall:.1f} s in all"
    )
    print(
        f"  per kernel: {rate / options.kernels / alone_rate:.2f}x the lone kernel's add rate; "
        f"notes with another author than their kernel's user: {len(wrong)}"
    )


if __name__ == "__main__":
    main()
