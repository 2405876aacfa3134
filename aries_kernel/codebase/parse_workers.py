"""Parsing in worker processes, so that what a file does to the parser costs that file and never the kernel.

tree-sitter is native code: a file it cannot handle may crash it (SIGSEGV) or keep it busy for minutes. Every
file the index parses is therefore read in this process (bounded, by :func:`.extract.read_checked`) and parsed
in a worker process (``python -m aries_kernel.codebase.parse_workers``), one file at a time over a pipe:

- a worker that dies (a signal, an abort, a stack overflow) loses the one file it was parsing, listed in
  ``skipped()`` as "the parser crashed"; a new worker takes the rest;
- a worker still busy with one file after ``AriesCodebase.parse_timeout`` seconds (parse and extraction) is
  killed and the file listed as "parse took longer than N s";
- a worker's memory may grow by :data:`MEMORY_BASE` plus :data:`MEMORY_PER_BYTE` per byte of the file
  (``RLIMIT_AS``): past it the parse fails (a ``MemoryError``, or the crash tree-sitter makes of a failed
  allocation), and the file is listed, rather than the machine's memory taken.

The budget is kept from here rather than by tree-sitter's progress callback: in py-tree-sitter 0.26 that
callback comes only with a read callback, and a tree parsed from one has no source of its own (``Node.text``
calls the read callback again for every node; handing it a memoryview crashes), so keeping it would cost a
second parse of every file. A kill costs nothing until a file runs out of time.

Workers are plain subprocesses (safe from a threaded kernel, and nothing re-imports the user's ``__main__``).
One stays alive between runs for the next reindex, and exits when its pipe closes.
"""

from __future__ import annotations

import atexit
import marshal
import os
import queue
import resource
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from aries_kernel.codebase.extract import Record, extract_source, read_checked, skipped_record

__all__ = ["MEMORY_BASE", "MEMORY_PER_BYTE", "WORKER_COMMAND", "parse_files"]

# A worker's command line (a seam: tests run a worker that crashes on purpose).
WORKER_COMMAND = [sys.executable, "-m", "aries_kernel.codebase.parse_workers"]
# How much a worker's memory may grow for one file: tree-sitter does not check its allocations, so running out
# is a SIGSEGV, after taking what the machine has (a one-line Go list `[]int{1,1,...}` takes about 195 bytes per
# byte, 10 GB for 50 MB; ordinary code about 25, a minified bundle about 60). The bound makes it a crash of one
# file, early.
MEMORY_BASE = 512 << 20
MEMORY_PER_BYTE = 128
# Seconds a worker is given to exit once its input is closed, before it is killed.
_EXIT_WAIT = 5.0
_HEADER = struct.Struct("<Q")
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


class _Worker:
    """One worker process and its pipes."""

    def __init__(self, command: list[str]) -> None:
        self.command = command
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH", "")) if p)
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            close_fds=True,
            # Out of the kernel's process group: ipykernel's shutdown signals the group's children and waits
            # until none is left, and an idle worker it cannot reap would hold the shutdown past the client's
            # patience (the kernel is then killed before its exit handlers run). A worker ends when its input
            # closes, which the kernel's exit does whatever the way it goes.
            start_new_session=True,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self._in = self.process.stdin.fileno()
        self._out = self.process.stdout.fileno()

    def parse(self, request: tuple[str, str, bytes, bool, int], deadline: float) -> Record | str:
        """The record of one request, or why there is none: "crashed (SIGSEGV)", "timed out"."""
        payload = marshal.dumps(request)
        try:
            _write_all(self._in, _HEADER.pack(len(payload)) + payload)
        except OSError:  # the worker is gone (it died after its last answer)
            return self._death()
        buffer = bytearray()
        needed: int | None = None
        while needed is None or len(buffer) < needed:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._out], [], [], left)[0]:
                self.close(kill=True)
                return "timed out"
            chunk = os.read(self._out, 1 << 20)
            if not chunk:
                return self._death()
            buffer += chunk
            if needed is None and len(buffer) >= _HEADER.size:
                needed = _HEADER.size + _HEADER.unpack_from(buffer)[0]
        record: Record = marshal.loads(bytes(buffer[_HEADER.size :]))
        return record

    def _death(self) -> str:
        code = self.process.wait()
        self.close()
        if code < 0:
            try:
                return f"crashed ({signal.Signals(-code).name})"
            except ValueError:
                return f"crashed (signal {-code})"
        return f"crashed (exit status {code})"

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self, kill: bool = False) -> None:
        """End the worker: closing its input ends it; ``kill`` ends it at once."""
        if kill and self.process.poll() is None:
            self.process.kill()
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:
                    pass
        try:
            self.process.wait(timeout=_EXIT_WAIT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


_idle: list[_Worker] = []
_idle_lock = threading.Lock()


def _take(command: list[str]) -> _Worker:
    with _idle_lock:
        for worker in _idle:
            if worker.command == command:
                _idle.remove(worker)
                if worker.alive():
                    return worker
                worker.close()
                break
    return _Worker(command)


def _give_back(workers: list[_Worker]) -> None:
    """Keep one live worker for the next run; end the others."""
    with _idle_lock:
        for worker in workers:
            if worker.alive() and not any(w.command == worker.command for w in _idle):
                _idle.append(worker)
            else:
                worker.close()


@atexit.register
def _close_idle() -> None:
    with _idle_lock:
        while _idle:
            _idle.pop().close()


def parse_files(
    root: str,
    items: list[tuple[str, str]],
    max_bytes: int,
    hashes: bool,
    budget: float,
    workers: int,
    on_record: Callable[[Record], None],
) -> None:
    """Read and parse every ``(relative path, language)`` of ``items`` with ``workers`` worker processes, each
    file within ``budget`` seconds; ``on_record`` gets each record in this thread, as they come."""
    pending = iter(items)
    lock = threading.Lock()
    results: queue.Queue[Record | BaseException | None] = queue.Queue()
    used: list[_Worker] = []
    command = list(WORKER_COMMAND)
    stop = threading.Event()  # the caller stopped waiting (an error, an interrupt): hand out no more files

    def next_item() -> tuple[str, str] | None:
        with lock:
            return None if stop.is_set() else next(pending, None)

    def run() -> None:
        worker: _Worker | None = None
        try:
            while (item := next_item()) is not None:
                rel, language = item
                data = read_checked(root, rel, language, max_bytes)
                if not isinstance(data, bytes):
                    results.put(data)
                    continue
                if worker is None or not worker.alive():
                    worker = _take(command)
                    with lock:
                        used.append(worker)
                answer = worker.parse((rel, language, data, hashes, max_bytes), time.monotonic() + budget)
                if isinstance(answer, str):
                    results.put(_failed(rel, language, data, answer, budget))
                else:
                    results.put(answer)
        except BaseException as exc:  # reported to the caller's thread
            results.put(exc)
        finally:
            results.put(None)

    threads = [threading.Thread(target=run, daemon=True) for _ in range(max(1, min(workers, len(items))))]
    for thread in threads:
        thread.start()
    running = len(threads)
    error: BaseException | None = None
    try:
        while running:
            result = results.get()
            if result is None:
                running -= 1
            elif isinstance(result, BaseException):
                error = error or result
                stop.set()
            elif error is None:
                on_record(result)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        _give_back([w for w in used if w.alive()])
    if error is not None:
        raise error


def _failed(rel: str, language: str, data: bytes, what: str, budget: float) -> Record:
    if what == "timed out":
        return skipped_record(rel, language, f"parse took longer than {budget:g} s", data)
    return skipped_record(rel, language, f"the parser {what}; the file is not indexed", data)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_exactly(stream: int, size: int) -> bytes | None:
    """``size`` bytes from ``stream``, or None at its end."""
    parts = bytearray()
    while len(parts) < size:
        chunk = os.read(stream, size - len(parts))
        if not chunk:
            return None
        parts += chunk
    return bytes(parts)


def _requests(stream: int) -> Iterator[tuple[str, str, bytes, bool, int]]:
    while (header := _read_exactly(stream, _HEADER.size)) is not None:
        payload = _read_exactly(stream, _HEADER.unpack(header)[0])
        if payload is None:
            return
        rel, language, data, hashes, max_bytes = marshal.loads(payload)
        yield rel, language, data, hashes, max_bytes


def _limit_memory(size: int) -> None:
    """Let the worker's address space grow by at most :data:`MEMORY_BASE` plus :data:`MEMORY_PER_BYTE` per
    byte of the file about to be parsed (nothing on a system without ``/proc``)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            used = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = used + MEMORY_BASE + MEMORY_PER_BYTE * size
    resource.setrlimit(
        resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard)
    )


def main() -> None:
    """The worker: parse each request from stdin and answer its record on stdout, until stdin closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # an interrupt is the kernel's to handle, not a parse's
    stdin, stdout = sys.stdin.fileno(), os.dup(sys.stdout.fileno())
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # a stray print cannot corrupt an answer
    for rel, language, data, hashes, max_bytes in _requests(stdin):
        _limit_memory(len(data))
        payload = marshal.dumps(extract_source(rel, language, data, hashes, max_bytes))
        _write_all(stdout, _HEADER.pack(len(payload)) + payload)


if __name__ == "__main__":
    main()
