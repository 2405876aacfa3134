"""``%aries replay``'s engine against nbclient executing the same notebook, measured alternately in the same run.

    python bench/bench_replay.py [--rounds 5] [--cells 40] [--kernel aries]

A notebook of CELLS code cells (imports, arithmetic, prints, a pandas frame shown, a short loop) is written into a
temporary project. Each round runs it with nbclient (``NotebookClient(...).execute()``, the kernel shut down
immediately at the end, as replay does) and with replay (read through the root reader, every cell run in a fresh
kernel, the report built: :func:`aries_kernel.notebook.replay.run_cells` and ``replay_frame``), both starting a
fresh kernel of the same kernelspec in the notebook's folder. Prints the medians and the ratio (target: at most
1.1).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import nbformat  # noqa: E402
from nbclient import NotebookClient  # noqa: E402

from aries_kernel.notebook.nbfile import read_notebook  # noqa: E402
from aries_kernel.notebook.replay import replay_env, replay_frame, run_cells  # noqa: E402
from tests.kernel_harness import JUPYTER_DATA  # noqa: E402, F401  (registers the aries kernelspec)

_SOURCES = [
    "values = list(range(1000))\ntotal = sum(values)\nprint(total)",
    "import pandas as pd\nframe = pd.DataFrame({'a': values[:50], 'b': values[50:100]})\nframe.head()",
    "squares = [v * v for v in values]\nprint(len(squares), squares[-1])",
    "def mean(xs):\n    return sum(xs) / len(xs)\nmean(squares)",
    "text = ' '.join(str(v) for v in values[:200])\nlen(text)",
    "for step in range(3):\n    print('step', step)",
    "frame.describe()",
]


def write_notebook(folder: Path, cells: int) -> Path:
    """A notebook of ``cells`` code cells cycling through :data:`_SOURCES` (no saved outputs)."""
    book = nbformat.v4.new_notebook()
    book.cells = [nbformat.v4.new_code_cell(_SOURCES[n % len(_SOURCES)]) for n in range(cells)]
    path = folder / "bench.ipynb"
    path.write_text(json.dumps(book))
    return path


def with_nbclient(path: Path, kernel: str) -> float:
    """Seconds for nbclient to execute the notebook in a fresh kernel, start and shutdown included."""
    book = nbformat.read(path, as_version=4)
    started = time.perf_counter()
    NotebookClient(
        book,
        kernel_name=kernel,
        timeout=600,
        shutdown_kernel="immediate",
        resources={"metadata": {"path": str(path.parent)}},
    ).execute()
    elapsed = time.perf_counter() - started
    errors = [o for c in book.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, errors
    return elapsed


def with_replay(path: Path, root: Path, kernel: str) -> float:
    """Seconds for replay to read, run and report the notebook in a fresh kernel, start and shutdown included."""
    started = time.perf_counter()
    notebook = read_notebook(root, path)
    code = notebook.code_cells
    outcomes = run_cells(
        [(cell.source, "") for cell in code],
        kernel_name=kernel,
        cwd=path.parent,
        env=replay_env(notebook, root),
        cell_timeout=600,
        timeout=600,
    )
    frame = replay_frame(code, outcomes)
    elapsed = time.perf_counter() - started
    assert set(frame["status"]) == {"ran"}, frame
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cells", type=int, default=40)
    parser.add_argument("--kernel", default="aries")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="aries-bench-replay-")) / "project"
    (root / "notebooks").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'bench'\n")
    path = write_notebook(root / "notebooks", args.cells)
    # The same environment for both: the root given as replay gives it, the notebook named as jupyter_server does.
    os.environ.update(ARIES_ROOT=str(root), JPY_SESSION_NAME=str(path))
    with_nbclient(path, args.kernel)  # warm the file cache for both
    with_replay(path, root, args.kernel)
    times: dict[str, list[float]] = {"nbclient": [], "replay": []}
    for _ in range(args.rounds):
        times["replay"].append(with_replay(path, root, args.kernel))
        times["nbclient"].append(with_nbclient(path, args.kernel))
    print(f"{'engine':<10}{'median s':>10}{'min s':>8}{'max s':>8}")
    for name, values in times.items():
        print(f"{name:<10}{statistics.median(values):>10.3f}{min(values):>8.3f}{max(values):>8.3f}")
    ratio = statistics.median(times["replay"]) / statistics.median(times["nbclient"])
    print(
        f"ratio replay / nbclient: {ratio:.2f}  (target <= 1.1, {args.rounds} rounds, {args.cells} cells, "
        f"kernel {args.kernel})"
    )


if __name__ == "__main__":
    main()
