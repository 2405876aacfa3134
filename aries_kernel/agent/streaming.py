"""Read a blocking stream in a worker thread, so its reader hears about silence instead of blocking in it.

The model's stream blocks while the provider thinks. :func:`read_in_thread` iterates it in a daemon thread that
feeds a queue, and yields each item in the caller's thread, or a :class:`Silence` mark every ``tick`` seconds
while nothing has come. The caller can show a waiting indicator and handle widget clicks (a Stop button) in
those gaps, and a kernel interrupt lands in the caller's ``queue.get`` at once.

Stopping early (closing the generator, or an exception in the caller) tells the worker to stop: it closes the
stream in its own thread (a generator cannot be closed from another thread while it runs) as soon as its
blocking read returns, which for an HTTP stream is the provider's next byte or its timeout.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Generator, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = ["Silence", "read_in_thread"]

T = TypeVar("T")
_ITEM, _END, _ERROR = "item", "end", "error"


@dataclass(frozen=True)
class Silence:
    """Nothing arrived for ``seconds`` (since the start, or since the last item)."""

    seconds: float


def read_in_thread(stream: Iterable[T], tick: float = 0.25) -> Generator[T | Silence, None, None]:
    """Yield the items of ``stream`` as they come, and a :class:`Silence` every ``tick`` seconds without one.

    An exception the stream raises (``KeyboardInterrupt`` included) is raised here, in the caller's thread.
    """
    items: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
    stop = threading.Event()

    def pump() -> None:
        iterator = iter(stream)
        try:
            for item in iterator:
                if stop.is_set():
                    break
                items.put((_ITEM, item))
            items.put((_END, None))
        except BaseException as exc:  # handed to the caller, who decides; nothing is lost in this thread
            items.put((_ERROR, exc))
        finally:
            close = getattr(iterator, "close", None)
            if close is not None:
                close()  # closes the HTTP response in the thread that reads it

    worker = threading.Thread(target=pump, name="aries-model-stream", daemon=True)
    worker.start()
    last = time.monotonic()
    try:
        while True:
            try:
                kind, value = items.get(timeout=tick)
            except queue.Empty:
                yield Silence(time.monotonic() - last)
                continue
            if kind == _END:
                break
            if kind == _ERROR:
                raise value
            last = time.monotonic()
            yield value
    finally:
        stop.set()
    worker.join()  # the stream has ended (or failed), so the worker is returning now
