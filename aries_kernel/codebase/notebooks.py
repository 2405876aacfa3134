"""Jupyter notebooks read as Python: each code cell's source in order, IPython syntax masked, with cell spans.

A notebook is indexed as the script its code cells make (outputs are never read). IPython's own syntax is not
Python: line magics (``%matplotlib inline``), shell lines (``!pip install x``, ``files = !ls``) and help
(``df?``) are turned into the calls IPython itself would run, one line for one line, by IPython's own
transformer, so line numbers stay those of the cell; a cell magic (``%%bash``) is another language and is left
out as blank lines, except the ones whose body is Python (``%%time``, ``%%capture``). Each code cell occupies
its own lines of the text, so a definition's line maps back to a cell (:meth:`NotebookSource.cell_at`).

The JSON is read with the bounds of :mod:`~aries_kernel.codebase.bounded` (the file itself may be up to
:data:`NOTEBOOK_MAX_BYTES`, as saved outputs make notebooks large; its code is held to the index's file size
limit); what is not a notebook raises :class:`ValueError` saying why.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import Any

from aries_kernel.codebase.bounded import MAX_BYTES, load_json

__all__ = [
    "NOTEBOOK_MAX_BYTES",
    "PYTHON_LANGUAGES",
    "CellSpan",
    "NotebookSource",
    "cell_label",
    "file_cap",
    "is_notebook",
    "notebook_source",
]

# The kernel languages whose notebooks are read as Python (a notebook of another has no code cells read).
PYTHON_LANGUAGES = frozenset({"python", "python3", "ipython", "ipython3"})
# A notebook file is read up to this size, or the index's file size limit if larger: its saved outputs (plots
# as base64) make it far larger than its code, which alone is held to that limit.
NOTEBOOK_MAX_BYTES = 32 << 20

# Cell magics whose body runs as Python in the user's namespace, so its definitions are the notebook's.
_PYTHON_CELL_MAGICS = frozenset({"time", "capture"})
# A line IPython would rewrite: a magic or shell escape at the start, an assigned one, or a trailing help mark.
_IPYTHON_SYNTAX = re.compile(r"^[ \t]*[%!]|^[^#\n'\"]*=[ \t]*[%!]|^[^#\n]*\?[ \t]*$", re.MULTILINE)


@dataclass(frozen=True)
class CellSpan:
    """Where one code cell sits in the notebook's Python text (1-based lines, inclusive)."""

    index: int  # the cell's position among all the notebook's cells, markdown included
    cell_id: str  # nbformat 4.5's cell id, "" in older notebooks
    first_line: int
    last_line: int


@dataclass(frozen=True)
class NotebookSource:
    """The Python text of a notebook's code cells and where each cell is in it."""

    text: str
    cells: tuple[CellSpan, ...]
    language: str  # the kernel's language (metadata.kernelspec / language_info), "python" when unsaid
    # The cells as typed, line for line with ``text`` (``%matplotlib inline`` where ``text`` has IPython's call;
    # a cell whose rewrite changed its number of lines is shown rewritten), to show people.
    typed: str = ""

    def cell_at(self, line: int) -> CellSpan | None:
        """The code cell holding 1-based ``line`` of :attr:`text`, or None."""
        position = bisect.bisect_right(self.cells, line, key=_first_line) - 1
        if position < 0 or line > self.cells[position].last_line:
            return None
        return self.cells[position]


def _first_line(cell: CellSpan) -> int:
    return cell.first_line


def cell_label(cell: CellSpan) -> str:
    """How a cell is named to people: its index, and its id when it has one (``3 (id a1b2)``)."""
    return f"{cell.index} (id {cell.cell_id})" if cell.cell_id else str(cell.index)


def is_notebook(rel: str) -> bool:
    """Whether the path names a Jupyter notebook (``.ipynb``)."""
    return rel[-6:].lower() == ".ipynb"


def file_cap(rel: str, max_bytes: int) -> int:
    """How many bytes of the file ``rel`` are read when other files are read up to ``max_bytes``."""
    return max(max_bytes, NOTEBOOK_MAX_BYTES) if is_notebook(rel) else max_bytes


def notebook_source(text: str, max_bytes: int = MAX_BYTES) -> NotebookSource:
    """Read notebook JSON ``text`` (at most ``max_bytes`` of it) into its Python source (none for a notebook
    whose language is not one of :data:`PYTHON_LANGUAGES`); :class:`ValueError` when it is not a notebook."""
    data = load_json(text, max_bytes)
    if (problem := notebook_problem(data)) is not None:
        raise ValueError(problem)
    language = _language(data)
    if language not in PYTHON_LANGUAGES:  # another language's cells are not Python to read
        return NotebookSource("", (), language)
    pieces: list[str] = []
    typed: list[str] = []
    spans: list[CellSpan] = []
    last = 0  # the last line of the text so far
    for index, cell in enumerate(data["cells"]):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell_text(cell.get("source", ""))
        if source is None:
            raise ValueError(f"cell {index}: its source is neither text nor a list of text")
        if not source:
            continue
        python = _python_of(source)
        python = python[:-1] if python.endswith("\n") else python  # the cell's lines, without a final newline
        count = python.count("\n") + 1
        cell_id = cell.get("id")
        spans.append(CellSpan(index, cell_id if isinstance(cell_id, str) else "", last + 1, last + count))
        pieces.append(python)
        as_typed = source[:-1] if source.endswith("\n") else source
        typed.append(as_typed if as_typed.count("\n") + 1 == count else python)
        last += count
    end = "\n" if pieces else ""
    return NotebookSource("\n".join(pieces) + end, tuple(spans), language, "\n".join(typed) + end)


def notebook_problem(data: Any) -> str | None:
    """Why parsed JSON ``data`` is not an nbformat 4 notebook, or None when it is one."""
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        return "not a Jupyter notebook (no list of cells)"
    if not isinstance(data.get("nbformat", 4), int) or data.get("nbformat", 4) < 4:
        return f"nbformat {data.get('nbformat')!r} is not read (only version 4 notebooks)"
    return None


def cell_text(source: Any) -> str | None:
    """A cell's source or a text output as one string (nbformat stores a string or a list of lines), or None
    when it is neither."""
    if isinstance(source, str):
        return source
    if isinstance(source, list):
        try:
            return "".join(source)
        except TypeError:  # a part that is not text
            return None
    return None


def _python_of(source: str) -> str:
    """The cell as Python with as many lines as it has: IPython syntax rewritten, other languages blanked."""
    first, _, body = source.partition("\n")
    if first.lstrip().startswith("%%"):
        magic = first.lstrip()[2:].split(maxsplit=1)
        if magic and magic[0] in _PYTHON_CELL_MAGICS:
            return "\n" + _python_of(body)
        lines = source.count("\n") + (not source.endswith("\n"))
        return "\n" * lines  # another language (bash, html, sql...): its lines stay, blank
    if not _IPYTHON_SYNTAX.search(source) or _plain_python(source):
        return source
    from IPython.core.inputtransformer2 import TransformerManager

    try:
        transformed: str = TransformerManager().transform_cell(source)
    except (SyntaxError, ValueError, IndexError):  # IPython could not tokenize it: the parser will say where
        return source
    # The transformer keeps one line for one line here (no cell magic); if it did not, keep the cell as typed.
    return transformed if transformed.count("\n") <= source.count("\n") + 1 else source


def _plain_python(source: str) -> bool:
    """Whether a cell parses as Python as it is: what looked like IPython syntax is in a string or a comment (a
    docstring line ending in ``?``), so IPython's transformer (which tokenizes the cell in Python) is not run."""
    from aries_kernel.codebase.languages import parse

    return not parse(source.encode("utf-8", "surrogatepass"), "python").root_node.has_error


def _language(data: dict[str, Any]) -> str:
    metadata = data.get("metadata")
    if not isinstance(metadata, dict):
        return "python"
    for key, field in (("kernelspec", "language"), ("language_info", "name")):
        part = metadata.get(key)
        if isinstance(part, dict) and isinstance(part.get(field), str):
            return str(part[field]).lower()
    return "python"
