"""Shared pytest fixtures: a running Aries kernel on a small repository."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kernel_harness import start_kernel, stop_kernel

# The loopback model server and the router fixtures (server, wire, router, fast_config) for every test module.
pytest_plugins = ["tests.models_support", "tests.pg_support"]

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(autouse=True, scope="session")
def _private_index_key(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The index MAC key lives in a scratch folder (kernels inherit it): the suite never writes ~/.aries."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ARIES_INDEX_KEY", str(tmp_path_factory.mktemp("aries-home") / "index.key"))
        yield


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
