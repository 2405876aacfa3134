"""The window in which the agent's own step (Repl code, a Bash command) runs on the main thread.

A Stop clicked while a step runs must cut that step short, as a kernel interrupt would: user code (a sleep, a
long loop, a blocking call) sees no flag, so the interrupt is a SIGINT to the main thread. It must never land in
Aries's own code around the step (a SQLite write, the checkpoint, event rendering), where it would cut a write in
half. :data:`STEP` sends the signal only while a step's window is open, under a lock the step's exit takes too,
and the exit absorbs a signal that arrived as the step was ending (the Stop is then the run's to honour).

One window per process: steps run on the main thread, and a process has one (two kernels in one process share
it, and never run two steps at once).

:func:`interrupts_held` is the other half: a few lines that must not be cut (starting a command and the reader
of its output) hold a SIGINT that lands among them and take it at their end.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["STEP", "StepWindow", "interrupts_held"]


def _check_signals() -> None:
    """A Python call: a signal handler pending on the main thread runs at its start (CPython's eval breaker)."""


@contextmanager
def interrupts_held() -> Iterator[None]:
    """Hold a SIGINT that lands inside (main thread only) and deliver it, to the handler before, at the end."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signals are handled on the main thread only: none can land here
        return
    held: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: held.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if held:
            signal.raise_signal(signal.SIGINT)
            _check_signals()  # the handler before (a KeyboardInterrupt, as a rule) runs here, not a line later


class StepWindow:
    """Marks the running step; :meth:`interrupt` sends SIGINT to the main thread only inside it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open = False
        self._sent = False
        self.landed = False  # the last interrupt sent reached its step as a KeyboardInterrupt

    @property
    def open(self) -> bool:
        """Whether a step runs now."""
        return self._open

    @contextmanager
    def running(self) -> Iterator[None]:
        """Open the window around a step's own code (main thread only); nested windows are one window."""
        if threading.current_thread() is not threading.main_thread() or self._open:
            yield
            return
        with self._lock:
            self._open, self._sent, self.landed = True, False, False
        try:
            yield
        except KeyboardInterrupt:
            self.landed = self._sent
            raise
        finally:  # whatever the step raised (its own errors included), the window closes
            self._close()

    def _close(self) -> None:
        sent = False
        try:
            with self._lock:
                self._open = False
                sent = self._sent
            if sent:
                _check_signals()  # the SIGINT sent before the lock was released is handled here, not later
        except KeyboardInterrupt:
            if not sent:
                raise  # the kernel's own interrupt, not a Stop: it goes on as before

    def interrupt(self) -> bool:
        """Send SIGINT to the main thread if a step runs (from any thread); returns whether it was sent."""
        with self._lock:
            if not self._open or self._sent:
                return self._sent and self._open
            self._sent = True
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
            return True


STEP = StepWindow()
