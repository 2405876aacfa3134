"""A parse worker that fails on purpose, by file name: ``crash.py`` kills it with SIGSEGV, ``abort.py`` with
``os.abort()``, ``hang.py`` never answers, ``hog.py`` aborts unless a 2 GiB allocation is refused (the memory
bound); every other file is parsed as the real worker does.

Run as ``python -m tests.parse_worker_faults`` in place of :data:`aries_kernel.codebase.parse_workers.WORKER_COMMAND`.
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any

from aries_kernel.codebase import parse_workers


def _faulty(rel: str, *args: Any) -> Any:
    name = rel.rpartition("/")[2]
    if name == "crash.py":
        ctypes.string_at(0)  # reads address 0: SIGSEGV, as a native parser bug would
    if name == "abort.py":
        os.abort()
    if name == "hang.py":
        threading.Event().wait()
    if name == "hog.py":  # 2 GiB: refused under the worker's memory bound, else granted (untouched pages)
        try:
            bytearray(2 << 30)
        except MemoryError:
            return _real(rel, *args)
        os.abort()
    return _real(rel, *args)


_real = parse_workers.extract_source
parse_workers.extract_source = _faulty

if __name__ == "__main__":
    parse_workers.main()
