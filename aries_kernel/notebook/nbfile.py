"""Reading a notebook file: bounded, through the root reader, into its cells (source, saved outputs, id).

A notebook is input anyone may have written: it is read with :func:`aries_kernel.rootfs.read_regular` (a FIFO,
a folder or a link out of the root is refused, and no more than :data:`MAX_NOTEBOOK_BYTES` is read), its JSON
nesting is measured before it is parsed (:func:`aries_kernel.codebase.bounded.nesting`), and anything that is
not an nbformat 4 notebook raises :class:`NotebookError` naming the file and the reason.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aries_kernel.codebase.bounded import MAX_NESTING, nesting
from aries_kernel.codebase.notebooks import cell_text, notebook_problem
from aries_kernel.rootfs import RootPathError, read_regular

__all__ = ["MAX_NOTEBOOK_BYTES", "Cell", "Notebook", "NotebookError", "read_notebook"]

# Notebooks hold their outputs (plots as base64): a few MB is common, more than this is refused unread.
MAX_NOTEBOOK_BYTES = 64 << 20


class NotebookError(ValueError):
    """A notebook that cannot be read or is not an nbformat 4 notebook; the message names it and says why."""


@dataclass(frozen=True)
class Cell:
    """One cell: its position in the file, id, type (code, markdown, raw), source and saved outputs."""

    index: int
    id: str
    kind: str
    source: str
    outputs: tuple[dict[str, Any], ...] = ()
    execution_count: int | None = None


@dataclass(frozen=True)
class Notebook:
    """The cells of a notebook file, and its path (absolute) and path relative to the root."""

    path: Path
    rel: str
    cells: tuple[Cell, ...]

    @property
    def code_cells(self) -> list[Cell]:
        """The code cells, in file order."""
        return [cell for cell in self.cells if cell.kind == "code"]


def read_notebook(root: str | os.PathLike[str], path: str | os.PathLike[str]) -> Notebook:
    """The notebook at ``path`` (absolute, or relative to the working directory), which must lie in ``root``.

    Raises :class:`NotebookError` for a file that is not read (missing, outside the root, not a regular file,
    over :data:`MAX_NOTEBOOK_BYTES`) or not an nbformat 4 notebook (not UTF-8, not JSON, nested too deeply).
    """
    absolute = Path(path).expanduser()
    absolute = absolute if absolute.is_absolute() else Path.cwd() / absolute
    shown = str(path)
    try:
        data, rel = read_regular(Path(root), str(absolute), MAX_NOTEBOOK_BYTES)
    except RootPathError as exc:
        raise NotebookError(f"Notebook {shown} is not read: {exc}") from None
    if len(data) > MAX_NOTEBOOK_BYTES:
        raise NotebookError(
            f"Notebook {shown} is over {MAX_NOTEBOOK_BYTES:,} bytes (MAX_NOTEBOOK_BYTES) and is not read; "
            "clearing its outputs (Edit > Clear Outputs of All Cells) makes it smaller."
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotebookError(
            f"Notebook {shown} is not UTF-8 text ({exc.reason} at byte {exc.start})."
        ) from None
    depth = nesting(text)
    if depth > MAX_NESTING:
        raise NotebookError(
            f"Notebook {shown} nests brackets {depth} deep, over the limit of {MAX_NESTING}; it is not parsed."
        )
    try:
        book = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NotebookError(
            f"Notebook {shown} is not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})."
        ) from None
    if (problem := notebook_problem(book)) is not None:
        raise NotebookError(f"Notebook {shown} is JSON but {problem}.")
    cells = []
    for index, raw in enumerate(book["cells"]):
        if not isinstance(raw, dict):
            raise NotebookError(f"Notebook {shown}: cell {index} is not a JSON object.")
        outputs = raw.get("outputs")
        count, kind = raw.get("execution_count"), raw.get("cell_type")
        cells.append(
            Cell(
                index=index,
                id=raw["id"] if isinstance(raw.get("id"), str) and raw["id"] else f"cell-{index}",
                kind=kind if isinstance(kind, str) else "unknown",
                source=cell_text(raw.get("source")) or "",
                outputs=tuple(o for o in outputs if isinstance(o, dict)) if isinstance(outputs, list) else (),
                execution_count=count if isinstance(count, int) else None,
            )
        )
    return Notebook(absolute, rel, tuple(cells))
