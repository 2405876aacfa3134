"""``kill -USR1 <kernel pid>`` writes every thread's stack to a log file, for a hung loop.

The log folder is optional: when it cannot be created or written (a read-only home on a hub), the kernel starts
without the stack dump and :func:`stack_dump_problem` says why and which setting moves the folder.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path

from aries_kernel.paths import aries_path

__all__ = ["install_stack_dump", "stack_dump_path", "stack_dump_problem"]

log = logging.getLogger(__name__)

_log_path: Path | None = None
_problem: str | None = None


def stack_dump_path() -> Path:
    """Where stack dumps go: ``$ARIES_LOG_DIR`` or ``~/.aries/logs``, one file per process id.

    Raises RuntimeError when neither is set nor a home folder can be found.
    """
    return aries_path("ARIES_LOG_DIR", default="logs") / f"stack-dump-{os.getpid()}.txt"


def install_stack_dump() -> Path | None:
    """Register SIGUSR1 to append all thread stacks to :func:`stack_dump_path`; returns the path, or None
    when there is no SIGUSR1 or the log file cannot be opened (then :func:`stack_dump_problem` says why).

    The signal's handler, on the main thread, only wakes a thread of its own, which reads every thread's
    frames as Python code does, with the GIL, so none changes them under the dump. faulthandler's dump of all
    threads reads them without: from its C handler, a dump taken while a background thread imported numpy
    stopped halfway and the kernel never answered again (1 kernel in 5); called from Python on 3.13, it hung
    the kernel while another thread ran. Python runs the handler as soon as the main thread is between two
    bytecodes or in a blocking call (which the signal interrupts, PEP 475), which covers a hung loop, a lock
    wait and a stuck read; only a C call that holds the GIL forever gets no dump. Must be called on the main
    thread (the kernel's extension loads there).
    """
    global _log_path, _problem
    if not hasattr(signal, "SIGUSR1"):
        return None
    if _log_path is not None:
        return _log_path
    path: Path | None = None
    try:
        path = stack_dump_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8"):  # writable now; each dump opens it again on its own thread
            pass
    except (OSError, RuntimeError) as exc:
        where = path.parent if path is not None else "~/.aries/logs"
        _problem = (
            f"Stack dumps (kill -USR1) are off: the log folder {where} cannot be written ({exc}). "
            "Set ARIES_LOG_DIR to a writable folder in the kernel's environment."
        )
        log.warning("%s", _problem)
        return None
    _problem = None
    _log_path = path
    threading.Thread(target=_dump_on_request, name="aries-stack-dump", daemon=True).start()
    signal.signal(signal.SIGUSR1, _request_dump)
    # Restart the system calls the signal interrupts (SA_RESTART), as faulthandler's handler did: libzmq's
    # and the kernel's threads are in reads and polls that an EINTR would end.
    signal.siginterrupt(signal.SIGUSR1, False)
    return path


_dump_requested = threading.Event()


def _request_dump(signum: int, frame: object) -> None:
    """SIGUSR1's handler, on the main thread: it only wakes the dumping thread (a handler that does more runs
    inside whatever the main thread was doing)."""
    _dump_requested.set()


def _dump_on_request() -> None:
    """Write every thread's stack each time SIGUSR1 asks. The frames come from ``sys._current_frames()``, read
    with the GIL held like any Python code, so no thread changes them under the dump (faulthandler's dump of all
    threads hung the kernel on Python 3.13 while a thread ran)."""
    while True:
        _dump_requested.wait()
        _dump_requested.clear()
        if _log_path is None:
            continue
        try:
            with open(_log_path, "a", encoding="utf-8") as log_file:
                log_file.write(_all_stacks())
        except OSError as exc:  # the folder went away or filled up: say so where the kernel logs
            log.warning("Could not write the stack dump to %s: %s", _log_path, exc)


def _all_stacks() -> str:
    """Every thread's stack, most recent call last, under a line with the time."""
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    parts = [f"--- kill -USR1 at {time.strftime('%Y-%m-%d %H:%M:%S')} ---\n"]
    for ident, frame in sys._current_frames().items():
        parts.append(f"Thread 0x{ident:016x} ({names.get(ident, 'not a threading thread')}):\n")
        parts.extend(traceback.format_stack(frame))
        parts.append("\n")
    return "".join(parts)


def stack_dump_problem() -> str | None:
    """Why the stack dump is not installed (an unwritable log folder), or None."""
    return _problem
