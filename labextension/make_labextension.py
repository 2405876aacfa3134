"""Build aries-kernel's JupyterLab extension from this folder, and put the bundle into an environment.

``build()`` runs ``npm ci`` (when ``node_modules`` is missing), ``tsc`` and JupyterLab's builder
(``jupyter-builder build``) into ``dist/``; it needs node (>= 20) and npm, and says so when they are missing.
setup.py calls it when it builds a wheel, which carries the bundle; the browser tests call ``install()`` when no
installed copy is found (an editable install has none), so the README's test command works from a clean clone:

    python labextension/make_labextension.py [PREFIX]    # build, then install into PREFIX (default: sys.prefix)
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

SOURCE = Path(__file__).resolve().parent
BUILT = SOURCE / "dist"  # the package.json's jupyterlab.outputDir
NAME = "aries-kernel"


class NoNodeError(RuntimeError):
    """node or npm is not on PATH."""


def build() -> Path:
    """Build the extension's bundle into ``dist/`` and return that folder."""
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        raise NoNodeError(
            "Building aries-kernel's JupyterLab extension (labextension/) needs node (>= 20) and npm on PATH; "
            "none was found. Install node, or use `pip install -e .` (an editable install skips the extension)."
        )
    if not (SOURCE / "node_modules").is_dir():
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=SOURCE, check=True)
    shutil.rmtree(BUILT, ignore_errors=True)  # no stale chunk of an earlier build is shipped
    subprocess.run([npm, "exec", "--", "tsc"], cwd=SOURCE, check=True)
    subprocess.run([sys.executable, "-m", "jupyter_builder.main", "build", "."], cwd=SOURCE, check=True)
    return BUILT


def install(prefix: Path) -> Path:
    """Copy the built bundle and its install.json to ``prefix``'s labextensions folder, where JupyterLab finds it
    as it finds one a wheel installed; returns that folder."""
    target = prefix / "share" / "jupyter" / "labextensions" / NAME
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(BUILT, target)
    shutil.copy2(SOURCE / "install.json", target / "install.json")
    return target


if __name__ == "__main__":
    build()
    print(install(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(sys.prefix)))
