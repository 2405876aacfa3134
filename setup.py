"""The wheel build step: a wheel carries aries-kernel's JupyterLab extension, built here from ``labextension/``.

Everything else about the package is in pyproject.toml. Building a wheel (``pip wheel .``, ``python -m build``,
``pip install .``) runs ``npm ci`` (when ``labextension/node_modules`` is missing), ``tsc`` and JupyterLab's builder
(``jupyter-builder build``), then ships the bundle as a federated labextension under
``share/jupyter/labextensions/aries-kernel/``, so ``pip install`` enables it with no node on the user's machine.
It needs node and npm, and says so when they are missing. An editable install (``pip install -e .``) builds no
wheel of this kind and skips the extension: build it by hand to work on it (README, "The JupyterLab extension").
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.bdist_wheel import bdist_wheel

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "labextension"
BUILT = SOURCE / "dist"  # the package.json's jupyterlab.outputDir
TARGET = "share/jupyter/labextensions/aries-kernel"


def build_labextension() -> None:
    """Build the extension's bundle into labextension/dist, or exit saying what is missing."""
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        sys.exit(
            "Building the aries-kernel wheel builds its JupyterLab extension (labextension/), which needs node "
            "(>= 20) and npm on PATH; none was found. Install node, or use `pip install -e .` (an editable "
            "install skips the extension)."
        )
    if not (SOURCE / "node_modules").is_dir():
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=SOURCE, check=True)
    shutil.rmtree(BUILT, ignore_errors=True)  # no stale chunk of an earlier build goes into the wheel
    subprocess.run([npm, "exec", "--", "tsc"], cwd=SOURCE, check=True)
    subprocess.run([sys.executable, "-m", "jupyter_builder.main", "build", "."], cwd=SOURCE, check=True)


def labextension_files() -> list[tuple[str, list[str]]]:
    """The data_files entries of the built bundle and its install.json."""
    top = [str(BUILT / "package.json"), str(SOURCE / "install.json")]
    entries = [(TARGET, [str(Path(path).relative_to(HERE)) for path in top])]
    for folder in sorted({path.parent for path in BUILT.rglob("*") if path.is_file()} - {BUILT}):
        files = sorted(str(path.relative_to(HERE)) for path in folder.iterdir() if path.is_file())
        entries.append((f"{TARGET}/{folder.relative_to(BUILT).as_posix()}", files))
    return entries


class WheelWithLabextension(bdist_wheel):
    """bdist_wheel that builds the JupyterLab extension first and adds its files to the wheel's data."""

    def run(self) -> None:
        build_labextension()
        self.distribution.data_files = [*(self.distribution.data_files or []), *labextension_files()]
        super().run()


setup(cmdclass={"bdist_wheel": WheelWithLabextension})
