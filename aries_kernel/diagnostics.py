"""``kill -USR1 <kernel pid>`` writes every thread's stack to a log file, for a hung loop (faulthandler)."""

from __future__ import annotations

import faulthandler
import os
import signal
from pathlib import Path
from typing import IO

__all__ = ["install_stack_dump", "stack_dump_path"]

_log_file: IO[str] | None = None


def stack_dump_path() -> Path:
    """Where stack dumps go: ``$ARIES_LOG_DIR`` or ``~/.aries/logs``, one file per process id."""
    base = Path(os.environ.get("ARIES_LOG_DIR") or Path.home() / ".aries" / "logs")
    return base / f"stack-dump-{os.getpid()}.txt"


def install_stack_dump() -> Path | None:
    """Register SIGUSR1 to append all thread stacks to :func:`stack_dump_path`; returns the path, or None.

    faulthandler's handler runs in C, so it still reports while the Python main thread is blocked.
    """
    global _log_file
    if not hasattr(signal, "SIGUSR1"):
        return None
    path = stack_dump_path()
    if _log_file is None:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Kept open for the life of the process: faulthandler writes to the file descriptor from a signal handler.
        _log_file = open(path, "a", encoding="utf-8")  # noqa: SIM115
        faulthandler.register(signal.SIGUSR1, file=_log_file, all_threads=True, chain=False)
    return path
