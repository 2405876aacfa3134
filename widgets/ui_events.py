"""Handle widget messages (a button click) while a cell is still running, in ipykernel 7.

A cell runs on the kernel's main thread, and the frontend's messages to it wait in ipykernel's main-thread shell
stream until the cell returns; so a button in the agent's panel could never be clicked while the agent waits
for it. jupyter-ui-poll solves this for ipykernel 6 through ``kernel.do_one_iteration``, which ipykernel 7 no
longer has (its 1.1.0 release polls nothing there: checked on ipykernel 7.4). ipykernel 7 itself dispatches
comm messages next to a running cell only when the cell is ``async`` and awaiting, which a magic is not.

:func:`process_ui_events` does the missing iteration with pyzmq's own ``ZMQStream.flush``: the pending
messages of that stream are received in the main thread; comm messages (widget updates and clicks) are handled
at once by the kernel's comm manager, and every other message (the next cell's ``execute_request``, a
completion request) is handed back to ipykernel's own handler, which runs it after the current cell as it
would have anyway.

That needs the main thread to look, which it cannot while a tool runs user code. :func:`on_click_arrival` covers
that case: ipykernel 7's shell channel thread asks each comm where to route its messages
(``_reply_subshell_for``, the hook ipykernel uses to send widget replies back to the subshell that published
them), so a button can learn of its click the moment it arrives, on that thread, before the main thread is
free. The click is still delivered to the button as usual afterwards.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["can_process_ui_events", "on_click_arrival", "process_ui_events"]

_COMM_MESSAGES = frozenset({"comm_open", "comm_msg", "comm_close"})


def _kernel() -> Any:
    from IPython import get_ipython

    shell = get_ipython()
    return getattr(shell, "kernel", None)


def _main_shell_stream(kernel: Any) -> Any:
    """ipykernel 7's stream of shell messages for the main thread (None in other kernels)."""
    channel = getattr(kernel, "shell_channel_thread", None)
    pair = getattr(getattr(channel, "manager", None), "_shell_channel_to_main", None)
    return getattr(pair, "to_stream", None)


def on_click_arrival(button: Any, react: Callable[[], None]) -> bool:
    """Call ``react()`` on ipykernel's shell channel thread as each click on ``button`` arrives, even while the
    main thread is busy. ``react`` must be quick and must not touch widgets (it runs off the main thread).
    Returns False where the kernel has no such routing (not an ipykernel 7 comm)."""
    comm = getattr(button, "comm", None)
    route = getattr(comm, "_reply_subshell_for", None)
    if comm is None or route is None:
        return False

    def routed(data: Any, default: Any) -> Any:
        content = data.get("content") if isinstance(data, dict) else None
        if isinstance(content, dict) and content.get("event") == "click":
            react()
        return route(data, default)

    comm._reply_subshell_for = routed
    return True


def can_process_ui_events() -> bool:
    """Whether :func:`process_ui_events` can see widget messages here (main thread of an ipykernel 7)."""
    return threading.current_thread() is threading.main_thread() and _main_shell_stream(_kernel()) is not None


def process_ui_events(limit: int = 100) -> int:
    """Handle the widget messages that have arrived (at most ``limit`` messages); returns how many were read."""
    if threading.current_thread() is not threading.main_thread():
        return 0
    kernel = _kernel()
    stream = _main_shell_stream(kernel)
    if stream is None:
        return 0
    import zmq

    received: list[Any] = []
    callback, copy = stream._recv_callback, stream._recv_copy
    stream.on_recv(received.append, copy=False)
    try:
        stream.flush(zmq.POLLIN, limit)
    finally:
        stream.on_recv(callback, copy=copy)
    for raw in received:
        _dispatch(kernel, raw, callback)
    return len(received)


def _dispatch(kernel: Any, raw: list[Any], handler: Any) -> None:
    session = kernel.session
    idents, frames = session.feed_identities(raw, copy=False)
    try:
        header = session.deserialize(frames, content=False, copy=False)["header"]
    except Exception:  # a message ipykernel cannot read either: let its own handler log it
        header = {}
    kind = header.get("msg_type")
    if kind in _COMM_MESSAGES:
        # The cell's parent header stays current, so what a click handler displays lands in the running cell.
        msg = session.deserialize(frames, content=True, copy=False)
        kernel.shell_handlers[kind](kernel.shell_stream, idents, msg)
        return
    future = asyncio.ensure_future(handler(raw))  # queued behind the running cell, in arrival order
    deferred = _deferred(kernel)
    deferred.add(future)
    future.add_done_callback(deferred.discard)


def _deferred(kernel: Any) -> set[asyncio.Future[Any]]:
    """The messages handed back to ``kernel``'s handler and not yet handled: strong references (the event loop
    keeps only weak ones), kept on the kernel's Aries context, so one kernel's never mix with another's."""
    from aries_kernel.context import get_context

    return get_context(kernel.shell).lazy("ui_deferred", lambda _: set())  # type: ignore[no-any-return]
