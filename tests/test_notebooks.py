"""The example notebooks run top to bottom on the Aries kernel (the model one against the loopback server).

Each runs as JupyterLab runs it: the kernel starts in the notebook's own folder, ``notebooks/`` of a copy of this
repository, and finds the repository's root by walking up to its ``pyproject.toml``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.kernel_harness import JUPYTER_DATA  # noqa: F401  (importing it registers the test kernelspec)
from tests.loopback import Reply, ScriptedModelServer

REPO = Path(__file__).resolve().parents[1]


def execute(name: str, project: Path, env: dict[str, str]) -> nbformat.NotebookNode:
    """Run ``project/notebooks/<name>`` with the kernel's working directory in ``project/notebooks``."""
    folder = project / "notebooks"
    book = nbformat.read(folder / name, as_version=4)
    saved = dict(os.environ)
    os.environ.pop("ARIES_ROOT", None)  # the root must be found, not given
    os.environ.update(env)  # the kernel inherits the environment of the process that starts it
    try:
        NotebookClient(
            book, kernel_name="aries", timeout=300, resources={"metadata": {"path": str(folder)}}
        ).execute()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return book


def outputs_text(book: nbformat.NotebookNode) -> str:
    parts = []
    for cell in book.cells:
        for output in cell.get("outputs", []):
            # Streamed text arrives in many small outputs; joined as they came, it reads as printed.
            parts.append(output.get("text", "") or str(output.get("data", {}).get("text/plain", "")) + "\n")
    return "".join(parts)


@pytest.fixture
def project_copy(tmp_path: Path) -> Path:
    """This repository's package, magics, notebooks and pyproject.toml (the root marker), copied so the notebooks
    index real code without touching ours."""
    target = tmp_path / "project"
    for part in ("aries_kernel", "magics", "widgets", "notebooks"):
        shutil.copytree(REPO / part, target / part, ignore=shutil.ignore_patterns("__pycache__", ".aries"))
    shutil.copy2(REPO / "pyproject.toml", target / "pyproject.toml")
    return target


@pytest.mark.parametrize(
    "name", ["01-quick-start.ipynb", "02-codebase-tour.ipynb", "03-memory-walkthrough.ipynb"]
)
def test_notebook_runs_without_a_model_key(name: str, project_copy: Path, tmp_path: Path) -> None:
    env = {"ARIES_VAULT": str(tmp_path / "vault"), "ARIES_LOG_DIR": str(tmp_path / "logs")}
    book = execute(name, project_copy, env)
    errors = [o for c in book.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, errors
    if name.startswith("01"):
        root_line = f"root: found pyproject.toml in {project_copy}, 1 level up from the working directory"
        assert root_line in outputs_text(book)
        assert "aries_kernel/kernel.py" in outputs_text(book)  # the search found the real code
    assert all(
        c.get("outputs")
        or c.cell_type == "markdown"
        or c.source.startswith(("memory.add", "import", "session"))
        for c in book.cells
    )


def test_agent_notebook_runs_with_a_model(project_copy: Path, tmp_path: Path) -> None:
    with ScriptedModelServer() as server:
        server.script(
            Reply(tool_calls=[("Repl", {"code": "codebase.top_files(3)"})]),
            Reply(text="The kernel, the context and the extension are the most central files."),
        )
        env = {
            "ARIES_VAULT": str(tmp_path / "vault"),
            "ARIES_LOG_DIR": str(tmp_path / "logs"),
            "ANTHROPIC_BASE_URL": server.anthropic_url,
            "ANTHROPIC_API_KEY": "test-key",
        }
        book = execute("04-agent-with-a-model.ipynb", project_copy, env)
    text = outputs_text(book)
    assert "most central files" in text
    assert "codebase.top_files(3)" in text
