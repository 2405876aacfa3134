"""The package type-checks with mypy and passes ruff's lint rules (both configured in pyproject.toml).

Both tools are pinned in the test extra, so a new release's stricter rules arrive with a version bump here,
not as a surprise in CI.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ["aries_kernel", "magics", "widgets"]


def _run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *map(str, args)], cwd=ROOT, capture_output=True, text=True)


def test_mypy_finds_no_type_error(tmp_path: Path) -> None:
    result = _run("mypy", "--cache-dir", tmp_path / "mypy-cache", *PACKAGES)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_finds_no_lint_error() -> None:
    result = _run("ruff", "check", "--no-cache", *PACKAGES, "tests", "bench")
    assert result.returncode == 0, result.stdout + result.stderr
