"""``kill -USR1 <kernel pid>`` writes every thread's stack to a log file, for a hung loop (faulthandler).

The log folder is optional: when it cannot be created or written (a read-only home on a hub), the kernel starts
without the stack dump and :func:`stack_dump_problem` says why and which setting moves the folder.
"""

from __future__ import annotations

import faulthandler
import logging
import os
import signal
import time
from pathlib import Path
from typing import IO

from aries_kernel.paths import aries_path

__all__ = ["install_stack_dump", "stack_dump_path", "stack_dump_problem"]

log = logging.getLogger(__name__)

_log_file: IO[str] | None = None
_problem: str | None = None


def stack_dump_path() -> Path:
    """Where stack dumps go: ``$ARIES_LOG_DIR`` or ``~/.aries/logs``, one file per process id.

    Raises RuntimeError when neither is set nor a home folder can be found.
    """
    return aries_path("ARIES_LOG_DIR", default="logs") / f"stack-dump-{os.getpid()}.txt"


def install_stack_dump() -> Path | None:
    """Register SIGUSR1 to append all thread stacks to :func:`stack_dump_path`; returns the path, or None
    when there is no SIGUSR1 or the log file cannot be opened (then :func:`stack_dump_problem` says why).

    The dump is a Python signal handler, run on the main thread with the GIL, so every other thread is held
    still while its frames are read. faulthandler's own handler (``faulthandler.register``) runs in C at once
    and reads the other threads' frames while they run: a dump taken while a background thread imported numpy
    stopped halfway through a line, and the kernel never answered again (1 kernel in 5). Python runs the
    handler as soon as the main thread is between two bytecodes or in a blocking call (which the signal
    interrupts, PEP 475), which covers a hung loop, a lock wait and a stuck read; only a C call that holds the
    GIL forever gets no dump. Must be called on the main thread (the kernel's extension loads there).
    """
    global _log_file, _problem
    if not hasattr(signal, "SIGUSR1"):
        return None
    if _log_file is not None:
        return Path(_log_file.name)
    path: Path | None = None
    try:
        path = stack_dump_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        # Kept open for the life of the process: the signal handler writes to it, and must not need to open it.
        _log_file = open(path, "a", encoding="utf-8")  # noqa: SIM115
    except (OSError, RuntimeError) as exc:
        where = path.parent if path is not None else "~/.aries/logs"
        _problem = (
            f"Stack dumps (kill -USR1) are off: the log folder {where} cannot be written ({exc}). "
            "Set ARIES_LOG_DIR to a writable folder in the kernel's environment."
        )
        log.warning("%s", _problem)
        return None
    _problem = None
    signal.signal(signal.SIGUSR1, _dump_stacks)
    return path


def _dump_stacks(signum: int, frame: object) -> None:
    """SIGUSR1's handler: every thread's stack, the main thread's (where it was when the signal came) included."""
    if _log_file is None:
        return
    _log_file.write(f"--- kill -USR1 at {time.strftime('%Y-%m-%d %H:%M:%S')} ---\n")
    _log_file.flush()
    faulthandler.dump_traceback(file=_log_file, all_threads=True)
    _log_file.flush()


def stack_dump_problem() -> str | None:
    """Why the stack dump is not installed (an unwritable log folder), or None."""
    return _problem
