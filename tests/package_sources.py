"""The package's own Python files, for tests that read the source (AST checks): aries_kernel/, magics/, widgets/."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
FOLDERS = ("aries_kernel", "magics", "widgets")


def package_trees(*, skip: tuple[str, ...] = ()) -> Iterator[tuple[str, ast.Module]]:
    """(path relative to the checkout, parsed module) of every file of the package but those in ``skip``."""
    for folder in FOLDERS:
        for path in sorted((CHECKOUT / folder).rglob("*.py")):
            rel = path.relative_to(CHECKOUT).as_posix()
            if rel not in skip:
                yield rel, ast.parse(path.read_text(encoding="utf-8"))
