"""The cells executed in this kernel, and the last error: a bounded record kept by IPython's run-cell hooks.

Each top-level execution IPython announces (``pre_run_cell`` / ``post_run_cell``; silent ones are not) becomes a
:class:`CellRun`: its execution count, the frontend's cell id where it sent one (JupyterLab 4 and Notebook 7 send
``cellId`` in the request's metadata; ipykernel passes it to ``run_cell``), its source, its text output and its
error. ``%aries`` cells are not recorded: they are the agent's conversation, kept in its session.

Text output is what the cell wrote to ``sys.stdout`` and ``sys.stderr`` while it ran, caught by wrapping the
streams' ``write`` method on the stream objects themselves (so ``sys.stdout`` stays the same object and
``isinstance`` checks of ipykernel's stream still hold); the first and last :data:`OUTPUT_CHARS` / 2 characters
are kept. A cell's result (the value its last line shows) is described by :mod:`.describe`, never ``repr``-ed
again; rich displays (plots, HTML) are not recorded. The error keeps its type, a message read without running the
exception's own code (see :func:`error_message`) and the traceback's frames, the cells' named ``In[n]``.
"""

from __future__ import annotations

import ast
import os
import sys
import threading
import traceback
from collections import deque
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CellLog", "CellRun", "ErrorRecord", "OUTPUT_CHARS", "cell_log", "error_message", "names_read"]

OUTPUT_CHARS = 4000  # characters of a cell's printed output kept (head and tail)
MAX_CELLS = 500  # cells kept; older ones are forgotten
_SOURCE_CHARS = 100_000  # characters of a cell's source kept (a 1 MB cell is cut)
_MESSAGE_CHARS = 2000  # characters of an error message kept
_FRAMES_HEAD, _FRAMES_TAIL = 3, 8  # frames of a traceback kept: the first ones and the last ones
_IPYTHON_DIR = f"{os.sep}IPython{os.sep}"
_PLAIN_ARGS = (str, int, float, bool, type(None))


@dataclass
class ErrorRecord:
    """The last exception a cell raised."""

    type: str
    message: str
    frames: list[str]  # formatted, "  Cell In[5], line 2, in <module>\n    df['x']"
    count: int | None
    cell_id: str | None
    source: str
    left_out: int = 0  # frames not kept

    def headline(self) -> str:
        """``KeyError: 'revenue_q3'``."""
        return f"{self.type}: {self.message}" if self.message else self.type

    def traceback(self) -> str:
        """The traceback as text, most recent call last."""
        frames = list(self.frames)
        if self.left_out:
            frames.insert(_FRAMES_HEAD, f"  ... {self.left_out} frames left out ...")
        return "Traceback (most recent call last):\n" + "\n".join(frames) + "\n" + self.headline()


@dataclass
class CellRun:
    """One executed cell."""

    count: int | None
    cell_id: str | None
    source: str
    output: str = ""
    result: str = ""  # the description of the value its last line showed
    error: str = ""  # the headline of its error
    running: bool = True

    def label(self) -> str:
        """``In[5]`` (and the cell id where known)."""
        where = f"In[{self.count}]" if self.count is not None else "In[?]"
        return f"{where} (cell id {self.cell_id})" if self.cell_id else where


@dataclass
class _Capture:
    """The text a cell wrote: the head as it comes, then a tail that keeps only its last characters."""

    limit: int
    head: list[str] = field(default_factory=list)
    head_chars: int = 0
    tail: str = ""
    dropped: int = 0

    def add(self, text: str) -> None:
        half = self.limit // 2
        if self.head_chars < half:
            piece = text[: half - self.head_chars]
            self.head.append(piece)
            self.head_chars += len(piece)
            text = text[len(piece) :]
        if text:
            joined = self.tail + text[-half:]
            self.dropped += max(len(self.tail) + len(text) - half, 0)
            self.tail = joined[-half:]

    def text(self) -> str:
        middle = f"\n[... {self.dropped:,} characters left out ...]\n" if self.dropped else ""
        return "".join(self.head) + middle + self.tail


class CellLog:
    """The record of one shell's executed cells; :meth:`pre_run_cell` and :meth:`post_run_cell` are its hooks."""

    def __init__(self, shell: Any, max_cells: int = MAX_CELLS, output_chars: int = OUTPUT_CHARS) -> None:
        self.shell = shell
        self.runs: deque[CellRun] = deque(maxlen=max_cells)
        self.last_error: ErrorRecord | None = None
        self.current: CellRun | None = None
        self.current_id: str | None = None  # the frontend's id of the cell running (an %aries cell's too)
        self._output_chars = output_chars
        self._capture: _Capture | None = None
        self._wrapped: list[Any] = []
        self._lock = threading.Lock()  # a thread may print while the cell runs

    # ---------------------------------------------------------------------------------------------- hooks

    def pre_run_cell(self, info: Any = None) -> None:
        """Start recording the cell IPython is about to run."""
        source = str(getattr(info, "raw_cell", "") or "")
        cell_id = getattr(info, "cell_id", None)
        self.current = None
        self.current_id = str(cell_id)[:100] if cell_id else None
        if source.lstrip().startswith(("%aries", "%%aries")):
            return
        # IPython has counted the cell by now (post_run_cell's result says its count for sure).
        count = getattr(self.shell, "execution_count", None)
        stored = getattr(info, "store_history", True)
        run = CellRun(
            count - 1 if stored and isinstance(count, int) else None, self.current_id, source[:_SOURCE_CHARS]
        )
        self.current = run
        self.runs.append(run)
        self._start_capture()

    def post_run_cell(self, result: Any = None) -> None:
        """Finish the cell's record: its output, result and error."""
        run, self.current = self.current, None
        capture = self._stop_capture()
        if run is None:
            return
        run.running = False
        counted = getattr(result, "execution_count", None)
        if run.count is not None and isinstance(counted, int):
            run.count = counted
        run.output = capture.text() if capture is not None else ""
        value = getattr(result, "result", None)
        if value is not None:
            from aries_kernel.notebook.describe import describe  # not at kernel start

            run.result = describe(value)
        exc = getattr(result, "error_in_exec", None) or getattr(result, "error_before_exec", None)
        if isinstance(exc, BaseException):
            try:
                self.last_error = self._error(exc, run)
            except Exception as failure:  # a traceback that cannot be read: the error is still recorded
                problem = f"(its traceback could not be read: {type(failure).__name__})"
                self.last_error = ErrorRecord(
                    type(exc).__qualname__, "", [problem], run.count, run.cell_id, run.source
                )
            run.error = self.last_error.headline()

    # -------------------------------------------------------------------------------------------- queries

    def find(self, cell: str) -> CellRun | None:
        """The latest run of ``cell``: ``5``, ``In[5]`` or a cell id."""
        text = cell.strip()
        if text.startswith("In[") and text.endswith("]"):
            text = text[3:-1]
        for run in reversed(self.runs):
            if (text.isdigit() and run.count == int(text)) or run.cell_id == text:
                return run
        return None

    # ---------------------------------------------------------------------------------------------- inner

    def _error(self, exc: BaseException, run: CellRun) -> ErrorRecord:
        frames = _cell_frames(exc, self.shell)
        kept, left_out = frames, 0
        if len(frames) > _FRAMES_HEAD + _FRAMES_TAIL:
            kept = frames[:_FRAMES_HEAD] + frames[-_FRAMES_TAIL:]
            left_out = len(frames) - len(kept)
        return ErrorRecord(
            type(exc).__qualname__, error_message(exc), kept, run.count, run.cell_id, run.source, left_out
        )

    def _start_capture(self) -> None:
        capture = _Capture(self._output_chars)
        for stream in (sys.stdout, sys.stderr):
            original = getattr(stream, "write", None)
            if original is None:
                continue

            def write(text: Any, _original: Any = original) -> Any:
                if isinstance(text, str):
                    with self._lock:
                        if self._capture is capture:
                            capture.add(text)
                return _original(text)

            try:
                stream.write = write  # type: ignore[method-assign]  # on the instance: the stream stays itself
            except (AttributeError, TypeError):  # a plain TextIOWrapper (a terminal IPython): not captured
                continue
            self._wrapped.append(stream)
        self._capture = capture

    def _stop_capture(self) -> _Capture | None:
        with self._lock:
            capture, self._capture = self._capture, None
        for stream in self._wrapped:
            try:
                del stream.write
            except AttributeError:  # the cell replaced or removed it itself
                pass
        self._wrapped = []
        return capture


def error_message(exc: BaseException) -> str:
    """The exception's message, read without running its code: ``str()`` only when its ``__str__`` is a built-in
    exception's and its arguments are plain values; otherwise its arguments are described by :mod:`.describe`."""
    from aries_kernel.notebook.describe import describe

    owner = next((base for base in type(exc).__mro__ if "__str__" in vars(base)), BaseException)
    args = BaseException.__dict__["args"].__get__(exc)
    if owner.__module__ == "builtins" and all(any(type(arg) is kind for kind in _PLAIN_ARGS) for arg in args):
        text = str(exc)
    else:
        text = ", ".join(describe(arg) for arg in args)
    return text if len(text) <= _MESSAGE_CHARS else text[:_MESSAGE_CHARS] + f"... [{len(text):,} chars]"


def _cell_frames(exc: BaseException, shell: Any) -> list[str]:
    """The traceback's frames as text, IPython's own before the cell left out, a cell's file named ``Cell In[n]``."""
    cells = getattr(getattr(shell, "compile", None), "_filename_map", {}) or {}
    frames: list[str] = []
    for frame in traceback.extract_tb(exc.__traceback__):
        if _IPYTHON_DIR in frame.filename and not frames:
            continue  # interactiveshell.run_code and the like, before the cell's own frame
        number = cells.get(frame.filename)
        where = f"Cell In[{number}]" if number is not None else f'File "{frame.filename}"'
        text = f"  {where}, line {frame.lineno}, in {frame.name}"
        if frame.line:
            text += f"\n    {frame.line.strip()[:300]}"
        frames.append(text)
    return frames


def names_read(source: str, shell: Any = None) -> list[str]:
    """The names ``source`` reads (IPython syntax transformed first), each once; [] if it does not parse."""
    code = source
    transform = getattr(shell, "transform_cell", None)
    if transform is not None:
        try:
            code = transform(source)
        except Exception:  # IPython's transformers raise many kinds on odd input: read it as Python then
            code = source
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError):
        return []
    names: dict[str, None] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            names.setdefault(node.id, None)
    return list(names)


def cell_log(context: Any) -> CellLog | None:
    """The record of executed cells the extension keeps for ``context`` (None outside a kernel)."""
    built = getattr(context, "built", None)
    log = built("cells") if built is not None else None
    return log if isinstance(log, CellLog) else None
