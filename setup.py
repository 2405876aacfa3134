"""The wheel build step: a wheel carries aries-kernel's JupyterLab extension, built here from ``labextension/``.

Everything else about the package is in pyproject.toml. Building a wheel (``pip wheel .``, ``python -m build``,
``pip install .``) runs ``npm ci`` (when ``labextension/node_modules`` is missing), ``tsc`` and JupyterLab's builder
(``jupyter-builder build``), then ships the bundle as a federated labextension under
``share/jupyter/labextensions/aries-kernel/``, so ``pip install`` enables it with no node on the user's machine.
It needs node and npm, and says so when they are missing. An editable install (``pip install -e .``) builds no
wheel of this kind and skips the extension: build it by hand to work on it (README, "The JupyterLab extension").
"""

from __future__ import annotations

import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.bdist_wheel import bdist_wheel

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "labextension"
sys.path.insert(0, str(SOURCE))
from make_labextension import BUILT, NoNodeError, build  # noqa: E402  (the extension's own build step)

TARGET = "share/jupyter/labextensions/aries-kernel"


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
        try:
            build()
        except NoNodeError as exc:
            sys.exit(str(exc))
        self.distribution.data_files = [*(self.distribution.data_files or []), *labextension_files()]
        super().run()


setup(cmdclass={"bdist_wheel": WheelWithLabextension})
