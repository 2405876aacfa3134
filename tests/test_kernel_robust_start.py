"""A kernel whose home, log folder, index key and vault cannot be written, or whose repository is read-only,
still starts and answers; the features that need the folders say what is wrong and which setting moves them.

Tests run as root in CI, where ``chmod`` stops no write. So the unwritable home is a path below a regular file
(every create fails with ENOTDIR, for root too), and the read-only repository is a read-only bind mount in a
private mount namespace (``unshare``), which stops root as well.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kernel_harness import JUPYTER_DATA, run_cell, start_kernel, stop_kernel

READ_ONLY_KERNEL = "aries-read-only-test"


def output(cell: object) -> str:
    """Everything a cell showed, as one string (result, streams and the error)."""
    result = getattr(cell, "result", None) or ""
    error = getattr(cell, "error", None)
    return "\n".join([result, cell.stdout, cell.stderr, " ".join(error[:2]) if error else ""])  # type: ignore[attr-defined]


@pytest.fixture
def blocked(tmp_path: Path) -> Path:
    """A regular file: nothing can be created below it."""
    path = tmp_path / "file"
    path.write_text("not a folder\n")
    return path


def test_kernel_starts_with_an_uncreatable_home_and_says_what_is_off(small_repo: Path, blocked: Path) -> None:
    home = blocked / "home"
    # Empty values fall back to the defaults under HOME, as if the variables were not set.
    env = {
        "HOME": str(home),
        "ARIES_LOG_DIR": "",
        "ARIES_VAULT": "",
        "ARIES_INDEX_KEY": "",
        "ARIES_SPEND_FILE": "",
    }
    km, kc = start_kernel(small_repo, env=env)
    try:
        stats = run_cell(kc, "codebase.stats()")
        assert stats.error is None, stats.error
        assert "files" in (stats.result or "") and "symbols" in (stats.result or "")
        top = run_cell(kc, "codebase.top_files(3)['file'].tolist()")
        assert top.error is None and ".py" in (top.result or "")

        query = run_cell(kc, "vault.query_ranked('anything')")
        assert query.error is not None and query.error[0] == "VaultUnavailable"
        assert str(home / ".aries" / "vault") in query.error[1] and "ARIES_VAULT" in query.error[1]

        status = run_cell(kc, "%aries status")
        text = output(status)
        assert status.error is None, status.error
        assert "Start-up" in text
        assert str(home / ".aries" / "logs") in text and "ARIES_LOG_DIR" in text
        assert str(home / ".aries" / "index.key") in text and "ARIES_INDEX_KEY" in text
        assert "Codebase" in text  # the other sections are still there

        spend = run_cell(
            kc,
            "from aries_kernel.context import get_context\n"
            "models = get_context(get_ipython()).lazy('models', lambda c: __import__('aries_kernel.models', "
            "fromlist=['ModelRouter']).ModelRouter(config=c.config))\n"
            "models.settings.daily_budget_usd = 1.0\n"
            "models.limits.check('primary')",
        )
        assert spend.error is None, spend.error
        cost = output(run_cell(kc, "%aries cost"))
        assert "Today: $0.0000 of $1.0000" in cost
        assert str(home / ".aries" / "spend.json") in cost and "ARIES_SPEND_FILE" in cost
        alive = run_cell(kc, "1 + 1")
        assert alive.result == "2"
    finally:
        stop_kernel(km, kc)


def _can_mount_read_only(tmp_path: Path) -> str | None:
    """None when a user+mount namespace with a read-only bind mount works here, else why not."""
    if shutil.which("unshare") is None:
        return "no unshare command"
    target = tmp_path / "probe"
    target.mkdir()
    script = (
        f'mount --bind "{target}" "{target}" && mount -o remount,bind,ro "{target}" && ! touch "{target}/x"'
    )
    done = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, check=False)
    return None if done.returncode == 0 else f"no read-only bind mount in a namespace: {done.stderr.strip()}"


@pytest.fixture
def read_only_kernel(tmp_path: Path) -> Iterator[str]:
    """A kernelspec that starts the Aries kernel with $ARIES_RO_PATHS mounted read-only (private namespace)."""
    reason = _can_mount_read_only(tmp_path)
    if reason is not None:
        pytest.skip(reason)
    script = (
        'for p in $ARIES_RO_PATHS; do mount --bind "$p" "$p" && mount -o remount,bind,ro "$p" || exit 97; done; '
        'exec "$0" -m aries_kernel -f "$1"'
    )
    folder = JUPYTER_DATA / "kernels" / READ_ONLY_KERNEL
    folder.mkdir(parents=True, exist_ok=True)
    spec = {
        "argv": ["unshare", "-rm", "sh", "-c", script, sys.executable, "{connection_file}"],
        "display_name": "Aries (read-only mounts, test)",
        "language": "python",
    }
    (folder / "kernel.json").write_text(json.dumps(spec))
    yield READ_ONLY_KERNEL
    shutil.rmtree(folder)


def test_kernel_starts_in_a_read_only_repository_with_a_read_only_home(
    small_repo: Path, tmp_path: Path, read_only_kernel: str
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    vault = tmp_path / "vault"  # writable: the global vault works, the project brain cannot
    env = {
        "HOME": str(home),
        "ARIES_RO_PATHS": f"{home} {small_repo}",
        "ARIES_LOG_DIR": "",
        "ARIES_INDEX_KEY": "",
        "ARIES_VAULT": str(vault),
    }
    km, kc = start_kernel(small_repo, env=env, kernel_name=read_only_kernel)
    try:
        probe = run_cell(kc, f"open({str(small_repo / 'probe.txt')!r}, 'w')")
        assert probe.error is not None and "Read-only file system" in probe.error[1]  # really read-only

        stats = run_cell(kc, "codebase.stats()")
        assert stats.error is None, stats.error
        assert "files" in (stats.result or "")
        assert not (small_repo / ".aries").exists()
        skipped = output(run_cell(kc, "print(codebase.skipped().to_dict('records'))"))
        assert ".aries/index.db" in skipped and "Read-only file system" in skipped  # the index is in memory

        added = run_cell(
            kc, "vault.add('Team note', 'kept in the global vault'); vault.query_ranked('Team note')"
        )
        assert added.error is None, added.error
        assert "Team note" in (added.result or "")
        text = output(run_cell(kc, "%aries status"))
        assert f"The project brain is off: {small_repo / '.aries'} cannot be written" in text
        assert str(home / ".aries" / "logs") in text and "ARIES_LOG_DIR" in text
        assert "ARIES_INDEX_KEY" in text
    finally:
        stop_kernel(km, kc)
