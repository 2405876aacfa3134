"""Shared pytest fixtures: a running Aries kernel on a small repository."""

from __future__ import annotations

import atexit
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kernel_harness import start_kernel, stop_kernel
from tests.loopback import ScriptedModelServer

# The loopback model server and the router fixtures (server, wire, router, fast_config) for every test module.
pytest_plugins = ["tests.models_support", "tests.pg_support"]

FIXTURES = Path(__file__).parent / "fixtures"


CHECKOUT = Path(__file__).resolve().parents[1]

# The longest test files, longest first (from the suite's --durations on two cores). pytest-xdist's loadfile hands
# files to the workers in collection order, and alphabetical order put most of these (test_vault_*) last: one
# worker ran a long file alone at the end while the other had nothing left. Handed out first, they overlap.
LONGEST_FILES = (
    "test_static_checks.py",
    "test_vault_concurrency.py",
    "test_memory_kernel.py",
    "test_vault_backends.py",
    "test_browser_cells.py",
    "test_vault_learning_audit.py",
    "test_jupyterhub.py",
    "test_notebooks.py",
    "test_browser.py",
    "test_mcp_server.py",
    "test_vault_factory.py",
)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: two workers per core (at most 16). Most of a test's time is spent waiting for a kernel, a server
    or a browser: with one worker per core the suite used about 1.1 of 2 cores (user + system CPU 10.4 min over a
    9.8 min run); with two per core the same tests took 392 s instead of 586 s, for the same CPU."""
    return min(2 * len(os.sched_getaffinity(0)), 16)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the longest files first (a stable sort: the rest, and the tests within a file, keep their order)."""
    rank = {name: position for position, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.fixture(autouse=True, scope="session")
def _private_aries_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Everything Aries keeps under ``~/.aries`` goes to a scratch folder for the session (kernels inherit it):
    the suite never writes the user's index key, spend ledger, stack dumps or vault (a test's spend would count
    against the user's daily limit). Nor does it write this checkout's ``.aries``: the index MAC key is new each
    session, so an index left there by one session is foreign to the next, set aside, and the warning about it
    lands in whatever cell is running."""
    home = tmp_path_factory.mktemp("aries-home")
    had_aries = (CHECKOUT / ".aries").exists()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ARIES_INDEX_KEY", str(home / "index.key"))
        patch.setenv("ARIES_SPEND_FILE", str(home / "spend.json"))
        patch.setenv("ARIES_LOG_DIR", str(home / "logs"))
        patch.setenv("ARIES_VAULT", str(home / "vault"))
        yield
    assert had_aries or not (CHECKOUT / ".aries").exists(), f"a test wrote {CHECKOUT / '.aries'}"


@pytest.fixture(autouse=True)
def _no_shell_left_for_the_next_test() -> Iterator[None]:
    """A test that used IPython's shell singleton leaves none behind: the next test in the worker gets a new shell.
    A context an earlier test attached (without the magics) made a later ``%load_ext aries_kernel`` a no-op, so
    ``%aries`` was missing in one worker's order of files and not in another's."""
    yield
    from IPython.core.interactiveshell import InteractiveShell

    if InteractiveShell.initialized():
        shell = InteractiveShell.instance()
        InteractiveShell.clear_instance()
        # What IPython runs at exit, now (its history database closed, its saving thread stopped), and not again
        # at exit, where the shell's temporary-file lists it deletes would be missing.
        shell.atexit_operations()
        atexit.unregister(shell.atexit_operations)


@pytest.fixture
def small_repo(tmp_path: Path) -> Path:
    """A copy of the Python fixture package, so a test may edit it and write .aries/ beside it."""
    source = FIXTURES / "codebase" / "pyproj"
    target = tmp_path / "repo"
    if source.exists():
        shutil.copytree(source, target)
    else:  # the codebase fixtures are not there yet: a tiny repository of our own
        (target / "pkg").mkdir(parents=True)
        (target / "pkg" / "__init__.py").write_text("from .core import run\n")
        (target / "pkg" / "core.py").write_text("def run():\n    return 42\n")
        (target / "main.py").write_text("from pkg import run\nprint(run())\n")
    return target


@pytest.fixture
def aries_kernel(small_repo: Path) -> Iterator[tuple]:
    """A real Aries kernel started in ``small_repo``: yields (kernel manager, blocking client)."""
    km, kc = start_kernel(small_repo)
    try:
        yield km, kc
    finally:
        stop_kernel(km, kc)


@pytest.fixture
def kernel(small_repo: Path, server: ScriptedModelServer) -> Iterator[tuple]:
    """A real Aries kernel in ``small_repo`` whose models are the loopback server: (kernel manager, client)."""
    km, kc = start_kernel(small_repo, env=server.kernel_env())
    try:
        yield km, kc
    finally:
        stop_kernel(km, kc)
