"""Clicks on the agent panel while a cell runs: where they arrive, and the one fallback that reads them.

A cell runs on the kernel's main thread, and a frontend's messages to it wait in ipykernel's main-thread shell
queue until the cell returns. A frontend that sends widget messages on a kernel subshell (JEP 91: JupyterLab
>= 4.4 with a kernel that has subshells) has ipykernel run a click's handler (ipywidgets' ``on_click``) on that
subshell's thread while the cell runs. That is the path the panel relies on, through public APIs only; since
traitlets are not thread-safe, a handler only records what was clicked in a :class:`ClickInbox`, and the main
thread, where the agent loop waits, takes the records and changes the widgets.

Where no click reaches a subshell (classic ``jupyter_client`` frontends, JupyterLab < 4.4, or ipykernel 7.4,
which routes a comm's messages to the thread that last published on it: the main thread, for a panel the running
cell draws), :class:`ShellStreamFallback` reads the main thread's shell queue while the agent waits or streams.
It needs ipykernel internals, so it names the versions it knows (:attr:`ShellStreamFallback.SUPPORTED`) and
refuses others with a reason; the panel then asks its questions as text. :func:`click_route` says which path a
kernel uses, for ``%aries status``.

Every button of the panel and of its Rewind bar goes through one mechanism, :class:`ClickInbox`: the handler
records the click and returns, and the inbox's ``apply`` does the work and changes the widgets on the main
thread, called either by a main-thread loop that waits for clicks (the agent run's approvals and Stop) or, for
a click that arrives while nothing waits (a finished run's Rewind bar, clicked between cells or on a subshell
while another cell runs), by the main thread's event loop when it is next free (:func:`on_main_thread`, which
the community graph's redraw after a click on a disc uses directly: that click is a synced trait, not a
button). The inbox and the loop it hands work to belong to the panel and to its kernel's :class:`ClickRoute`,
never to this module, so two kernels in one process share nothing here.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any

__all__ = ["ClickInbox", "ClickRoute", "ShellStreamFallback", "click_route", "main_loop", "on_main_thread"]

_COMM_MESSAGES = frozenset({"comm_open", "comm_msg", "comm_close"})


def main_loop(kernel: Any) -> Any:
    """The event loop of ``kernel``'s main thread (ipykernel's ``Kernel.io_loop``, a tornado ``IOLoop``); None
    outside a kernel."""
    return getattr(kernel, "io_loop", None)


def on_main_thread(main_loop: Any, work: Callable[[], object]) -> None:
    """Run ``work`` on the kernel's main thread: at once when called there, else as a callback of ``main_loop``
    (ipykernel's ``Kernel.io_loop``, whose ``add_callback`` is tornado's thread-safe way in), which runs it when
    the main thread next returns to its event loop: after the cell it runs, or at once when it is idle. asyncio
    runs it in a copy of the caller's context variables, where ipykernel keeps the message being handled, so
    what ``work`` sends answers the click. Without a loop (no kernel) ``work`` runs at once on the caller's
    thread, there being no other to run it on."""
    if main_loop is None or threading.current_thread() is threading.main_thread():
        work()
    else:
        main_loop.add_callback(work)


class ClickInbox:
    """What was clicked, recorded by handlers on any thread and applied on the main thread by ``apply``.

    A click is applied once, by whichever comes first: :meth:`deliver` called by a main-thread loop that waits
    for clicks (:meth:`wait`), or the delivery :meth:`put` hands to the main thread's event loop
    (:func:`on_main_thread`) for when nothing waits. ``main_loop`` is that loop, None outside a kernel.
    """

    def __init__(self, apply: Callable[[tuple[str, ...]], None], main_loop: Any = None) -> None:
        self.apply = apply
        self.main_loop = main_loop
        self._items: queue.SimpleQueue[tuple[str, ...]] = queue.SimpleQueue()
        self._arrived = threading.Event()

    def put(self, *item: str) -> None:
        """Record a click (a button's handler, on any thread), wake a waiting :meth:`wait`, and have the main
        thread deliver it if nothing waiting does first."""
        self._items.put(item)
        self._arrived.set()
        on_main_thread(self.main_loop, self.deliver)

    def deliver(self) -> int:
        """Apply everything recorded since the last delivery, in order (main thread); how many clicks."""
        self._arrived.clear()
        taken = []
        while True:
            try:
                taken.append(self._items.get_nowait())
            except queue.Empty:
                break
        for item in taken:
            self.apply(item)
        return len(taken)

    def wait(self, seconds: float) -> bool:
        """Wait up to ``seconds`` for a click; whether one arrived."""
        return self._arrived.wait(seconds)


def _ipykernel_version() -> str:
    try:
        return version("ipykernel")
    except PackageNotFoundError:
        return ""


class ShellStreamFallback:
    """Reads widget messages from ipykernel's main-thread shell stream, for frontends without subshells.

    On the versions in :attr:`SUPPORTED` (ipykernel 7.4.x): the stream is ``SubshellManager._shell_channel_to_main
    .to_stream``, read with pyzmq's ``ZMQStream.flush`` after swapping its ``_recv_callback``; comm messages go to
    ``kernel.shell_handlers`` at once and anything else back to ipykernel's handler, which runs it after the cell
    as it would have anyway. :meth:`on_arrival` wraps the comm's ``_reply_subshell_for`` (7.4's routing hook, on
    the shell channel thread) so that a Stop is seen as it arrives while a step keeps the main thread busy.
    """

    SUPPORTED = ("7.4.",)

    def __init__(self, kernel: Any, ipykernel_version: str | None = None) -> None:
        self.kernel = kernel
        self.version = _ipykernel_version() if ipykernel_version is None else ipykernel_version
        self.problem = self._refusal()

    def _refusal(self) -> str | None:
        if not self.version.startswith(self.SUPPORTED):
            known = ", ".join(f"{prefix}x" for prefix in self.SUPPORTED)
            return f"ipykernel {self.version or '(none)'} is not a version the shell-stream fallback knows ({known})"
        if self._stream() is None:
            return "this kernel has no ipykernel main-thread shell stream"
        return None

    @property
    def available(self) -> bool:
        """Whether this fallback can read clicks in this kernel."""
        return self.problem is None

    def _stream(self) -> Any:
        channel = getattr(self.kernel, "shell_channel_thread", None)
        pair = getattr(getattr(channel, "manager", None), "_shell_channel_to_main", None)
        return getattr(pair, "to_stream", None)

    def on_arrival(self, button: Any, react: Callable[[], None]) -> bool:
        """Call ``react()`` on the shell channel thread as each click on ``button`` arrives; ``react`` must be
        quick and touch no widget. Returns False where this fallback is not available."""
        comm = getattr(button, "comm", None)
        route = getattr(comm, "_reply_subshell_for", None)
        if not self.available or comm is None or route is None:
            return False

        def routed(data: Any, default: Any) -> Any:
            content = data.get("content") if isinstance(data, dict) else None
            if isinstance(content, dict) and content.get("event") == "click":
                react()
            return route(data, default)

        comm._reply_subshell_for = routed
        return True

    def process(self, limit: int = 100) -> int:
        """Handle the widget messages that have arrived (at most ``limit``, main thread only); how many."""
        if not self.available or threading.current_thread() is not threading.main_thread():
            return 0
        import zmq

        stream = self._stream()
        received: list[Any] = []
        callback, copy = stream._recv_callback, stream._recv_copy
        stream.on_recv(received.append, copy=False)
        try:
            stream.flush(zmq.POLLIN, limit)
        finally:
            stream.on_recv(callback, copy=copy)
        for raw in received:
            self._dispatch(raw, callback)
        return len(received)

    def _dispatch(self, raw: list[Any], handler: Any) -> None:
        kernel = self.kernel
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


# What happens on either path to a click no agent run waits for (ClickInbox hands it to the main thread's loop).
_UNWAITED = "; a Rewind clicked while a cell runs is done on the main thread when that cell ends."


class ClickRoute:
    """How one kernel's panel learns of clicks while a cell runs: subshells, the fallback, or neither."""

    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel
        self.fallback = ShellStreamFallback(kernel)
        # The main thread's event loop, where a click's work goes when nothing waits for it (see ClickInbox).
        self.main_loop: Any = main_loop(kernel)
        self.subshell_thread: str | None = None  # the thread of the last click handled off the main thread

    def note_click(self) -> None:
        """Record where a click's handler runs (called by the handler, on its thread)."""
        thread = threading.current_thread()
        if thread is not threading.main_thread():
            self.subshell_thread = thread.name

    def subshells(self) -> list[str]:
        """The subshells frontends made in this kernel (ipykernel 7's public ``list_subshell``)."""
        manager = getattr(getattr(self.kernel, "shell_channel_thread", None), "manager", None)
        listing = getattr(manager, "list_subshell", None)
        try:
            return list(listing()) if listing is not None else []
        except Exception:  # a kernel shutting down
            return []

    @property
    def path(self) -> str:
        """``subshell routing``, ``shell-stream fallback`` or ``none``."""
        if self.subshell_thread is not None:
            return "subshell routing"
        if self.fallback.available:
            return "shell-stream fallback"
        return "subshell routing" if self.subshells() else "none"

    @property
    def clickable(self) -> bool:
        """Whether a click can reach the panel while a cell runs."""
        return self.path != "none"

    def describe(self) -> str:
        """One line for ``%aries status``: the path and what the panel can do on it."""
        path = self.path
        if path == "subshell routing":
            where = f" (the last on thread {self.subshell_thread})" if self.subshell_thread else ""
            return (
                f"Panel clicks: subshell routing: the frontend's widget messages are handled on a kernel subshell "
                f"while a cell runs{where}; approvals, Stop, and Stop mid-step (only the step is interrupted)"
                f"{_UNWAITED}"
            )
        if path == "shell-stream fallback":
            versions = ", ".join(f"{prefix}x" for prefix in ShellStreamFallback.SUPPORTED)
            routed = (
                " (the frontend has subshells, but ipykernel sends this panel's clicks to the main thread)"
                if self.subshells()
                else ""
            )
            return (
                f"Panel clicks: shell-stream fallback for ipykernel {versions}{routed}: clicks are read from the "
                "main thread's queue while the agent waits or streams; approvals, Stop, and Stop mid-step "
                f"(only the step is interrupted){_UNWAITED}"
            )
        return (
            f"Panel clicks: none: {self.fallback.problem}, and no frontend sends widget messages on a subshell; "
            "runs are shown as text, approvals asked as text, Stop is the kernel's interrupt."
        )


def click_route(shell: Any) -> ClickRoute:
    """The :class:`ClickRoute` of ``shell``'s kernel, kept on its Aries context."""
    from aries_kernel.context import get_context

    kernel = getattr(shell, "kernel", None)
    return get_context(shell).lazy("ui_click_route", lambda _: ClickRoute(kernel))  # type: ignore[no-any-return]
