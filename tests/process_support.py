"""Reading what a test's subprocess printed, when some of it was already read line by line."""

from __future__ import annotations

import subprocess
import threading
from typing import IO

__all__ = ["finish"]


def finish(proc: subprocess.Popen[str], timeout: float = 600) -> tuple[str, str]:
    """The rest of ``proc``'s stdout and stderr once it ends. Read through the same text streams a test's
    ``readline()`` used: ``communicate()`` reads the raw pipes and loses what ``readline()`` had buffered
    beyond its line (a writer's acknowledged add went missing that way). Both are read at once, so neither
    pipe can fill and stall the process."""
    parts: dict[str, str] = {}

    def read(name: str, stream: IO[str] | None) -> None:
        if stream is not None:
            with stream:  # closed once read, as communicate() closes the pipes
                parts[name] = stream.read()

    readers = [
        threading.Thread(target=read, args=("out", proc.stdout), daemon=True),
        threading.Thread(target=read, args=("err", proc.stderr), daemon=True),
    ]
    for reader in readers:
        reader.start()
    proc.wait(timeout=timeout)
    for reader in readers:
        reader.join(timeout)
    return parts.get("out", ""), parts.get("err", "")
