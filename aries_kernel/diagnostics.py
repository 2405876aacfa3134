"""``kill -USR1 <kernel pid>`` writes every thread's stack to a log file, for a hung loop (faulthandler).

The log folder is optional: when it cannot be created or written (a read-only home on a hub), the kernel starts
without the stack dump and :func:`stack_dump_problem` says why and which setting moves the folder.
"""

from __future__ import annotations

import faulthandler
import logging
import os
import signal
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

    faulthandler's handler runs in C, so it still reports while the Python main thread is blocked.
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
        # Kept open for the life of the process: faulthandler writes to the file descriptor from a signal handler.
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
    faulthandler.register(signal.SIGUSR1, file=_log_file, all_threads=True, chain=False)
    return path


def stack_dump_problem() -> str | None:
    """Why the stack dump is not installed (an unwritable log folder), or None."""
    return _problem
