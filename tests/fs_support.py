"""File-system helpers shared by the confinement tests."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["snapshot"]


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` with its bytes (symlinks by their target), to prove nothing changed."""
    found = {}
    for path in sorted(folder.rglob("*")):
        if path.is_symlink():
            found[str(path)] = os.readlink(path).encode()
        elif path.is_file():
            found[str(path)] = path.read_bytes()
    return found
