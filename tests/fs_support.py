"""File-system helpers shared by the tests: write a file into a tree, snapshot a folder."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["snapshot", "write"]


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` with its bytes (symlinks by their target), to prove nothing changed."""
    found = {}
    for path in sorted(folder.rglob("*")):
        if path.is_symlink():
            found[str(path)] = os.readlink(path).encode()
        elif path.is_file():
            found[str(path)] = path.read_bytes()
    return found


def write(root: Path, rel: str, data: str | bytes) -> Path:
    """Write ``data`` to ``root / rel`` (UTF-8 for text), creating its folders."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8")
    return path
