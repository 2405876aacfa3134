"""The wheel's package list (pyproject.toml's explicit ``packages``, needed because magics/ and widgets/ install
inside the namespace) names every package of the source tree: a new subpackage left out installs nowhere, and an
editable install, which maps whole folders, would not notice."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_every_package_of_the_tree_is_in_the_wheel() -> None:
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {name: REPO / folder for name, folder in setuptools["package-dir"].items()}
    declared = set(setuptools["packages"])
    found = set()
    for name, folder in folders.items():
        for init in folder.rglob("__init__.py"):
            relative = init.parent.relative_to(folder).parts
            found.add(".".join((*name.split("."), *relative)) if relative else name)
    assert found - declared == set(), "packages missing from pyproject.toml's [tool.setuptools] packages"
