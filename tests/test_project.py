"""The project's promises about itself: the README's commands, the package layout, the public names."""

from __future__ import annotations

import importlib
import importlib.metadata
from pathlib import Path

import aries_kernel

ROOT = Path(__file__).resolve().parents[1]


def test_ci_runs_the_readme_test_command() -> None:
    """.ci/run installs as the README's second quick-start command does, then runs its pytest command."""
    readme = (ROOT / "README.md").read_text()
    install, _, test = readme.split("# 2. install with the test extras and run the tests\n", 1)[1].split(
        "\n", 1
    )[0].partition(" && .venv/bin/python -m pytest")
    ci = (ROOT / ".ci" / "run").read_text()
    assert install in ci, "the README's install command is not what .ci/run runs"
    assert f".venv/bin/python -m pytest{test}" in ci, "the README's test command is not what .ci/run runs"


def test_magics_and_widgets_install_inside_the_package_namespace() -> None:
    assert importlib.import_module("aries_kernel.magics").__name__ == "aries_kernel.magics"
    assert importlib.import_module("aries_kernel.widgets").__name__ == "aries_kernel.widgets"
    top_level = importlib.metadata.distribution("aries-kernel").read_text("top_level.txt") or ""
    assert top_level.split() == ["aries_kernel"], "only aries_kernel is installed at the top level"


def test_exported_names() -> None:
    assert aries_kernel.__all__ == ["__version__", "load_ipython_extension", "unload_ipython_extension"]
    for name in aries_kernel.__all__:
        assert hasattr(aries_kernel, name)


def test_core_never_imports_magics_or_widgets() -> None:
    """Dependencies point one way: only the extension registers the magics; nothing in the core uses widgets."""
    offenders = []
    for path in (ROOT / "aries_kernel").rglob("*.py"):
        text = path.read_text()
        if (
            "aries_kernel.widgets" in text
            or "from aries_kernel.magics" in text
            or "import aries_kernel.magics" in text
        ):
            if path.name != "extension.py":
                offenders.append(str(path.relative_to(ROOT)))
    assert not offenders
