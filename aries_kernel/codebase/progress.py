"""A progress display for long waits: an HTML bar updated in place in a notebook, text lines elsewhere.

In a Jupyter kernel it uses ``IPython.display.display(..., display_id=True)`` and ``update`` (both HTML and
plain text are sent, so ``jupyter console`` shows the text); outside a kernel it prints a line now and then.
No ipywidgets: the bar must work in every frontend and cost nothing to import.

A bar ends when its work ends: :meth:`Progress.close` (or leaving ``with Progress(...)``, also on an error)
leaves a full, still bar with the final message; an HTML ``<progress>`` without a value would animate forever.
"""

from __future__ import annotations

import html
import sys
import time
from types import TracebackType
from typing import Any, Self, TextIO

__all__ = ["Progress", "in_kernel"]

_MIN_INTERVAL = 0.2  # seconds between in-place updates
_TEXT_INTERVAL = 2.0  # seconds between printed lines


def in_kernel() -> bool:
    """True inside a Jupyter kernel (where rich displays reach a frontend)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


class _Bar:
    """The rich display object of one progress state."""

    def __init__(self, label: str, done: int, total: int, detail: str, finished: bool = False) -> None:
        self.label, self.done, self.total, self.detail = label, done, total, detail
        self.finished = finished

    def text(self) -> str:
        if self.finished:
            return self.label
        if self.total <= 0:
            return f"{self.label}: {self.detail}".rstrip(": ")
        percent = 100 * self.done // self.total
        tail = f" ({self.detail})" if self.detail else ""
        return f"{self.label}: {self.done:,}/{self.total:,} files ({percent}%){tail}"

    def __repr__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        if self.finished:
            value = 'value="1" max="1"'
        elif self.total > 0:
            value = f'value="{self.done}" max="{self.total}"'
        else:
            value = ""  # unknown amount: the browser's indeterminate (moving) bar, until close()
        return (
            f'<div style="font-family: monospace"><progress {value} style="width: 20em; vertical-align: middle">'
            f"</progress> {html.escape(self.text())}</div>"
        )


class Progress:
    """Shows how far a job is; call :meth:`update` as often as you like, it throttles itself."""

    def __init__(self, label: str, *, stream: TextIO | None = None, rich: bool | None = None) -> None:
        self.label = label
        self._stream = stream
        self._rich = in_kernel() if rich is None else rich
        self._handle: Any = None
        self._last = 0.0
        self._last_text = ""
        self._closed = False

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if not self._closed:
            self.close(f"{self.label}: {'stopped' if kind is not None else 'done'}")

    def update(self, done: int, total: int, detail: str = "", *, force: bool = False) -> None:
        """Show ``done`` of ``total`` (total 0 means unknown) with an optional detail."""
        if self._closed:
            return
        now = time.monotonic()
        interval = _MIN_INTERVAL if self._rich else _TEXT_INTERVAL
        if not force and now - self._last < interval:
            return
        self._last = now
        bar = _Bar(self.label, done, total, detail)
        if self._rich:
            from IPython.display import display

            if self._handle is None:
                self._handle = display(bar, display_id=True)
            else:
                self._handle.update(bar)
            return
        text = bar.text()
        if text != self._last_text:
            self._last_text = text
            print(text, file=self._stream or sys.stdout, flush=True)

    def close(self, message: str) -> None:
        """End the bar: a full, still bar with ``message`` (nothing is shown if the bar never appeared)."""
        if self._closed:
            return
        self._closed = True
        if self._rich:
            if self._handle is not None:
                self._handle.update(_Bar(message, 0, 0, "", finished=True))
            return
        if self._last_text:
            print(message, file=self._stream or sys.stdout, flush=True)
