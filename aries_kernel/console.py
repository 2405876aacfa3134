"""``aries-kernel console``: jupyter console on the Aries kernel, without its first-cell hang.

jupyter_console sends the first cell as soon as the kernel answers ``kernel_info`` on the shell channel, but
its IOPub (SUB) socket may not have finished subscribing by then (ZeroMQ's "slow joiner"): the cell's
``status: idle`` is lost and the console waits for it forever. This console waits until IOPub delivers a
message of its own before it reads the first line, the way ``jupyter_client``'s ``wait_for_ready`` waits for
the shell channel.

The kernel's stdout is not the console's terminal (it is a pipe, or another terminal when the kernel runs
elsewhere), so the console tells the kernel its terminal's size: it is in the metadata of every request the
console sends, read from the terminal again before each cell so that a resize (SIGWINCH) is followed. It rides on
the request itself because a separate message would bring its own busy/idle statuses, which jupyter_console
would take for the running cell's. Everything else is stock jupyter_console.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from queue import Empty
from typing import Any

from jupyter_client.consoleapp import JupyterConsoleApp
from jupyter_console.app import ZMQTerminalIPythonApp
from jupyter_console.ptshell import ZMQTerminalInteractiveShell

from aries_kernel.kernel import TERMINAL_METADATA

__all__ = ["AriesConsoleApp", "terminal_size", "wait_for_iopub"]

_PROBE_SECONDS = 0.5


def wait_for_iopub(client: Any, timeout: float) -> None:
    """Send ``kernel_info`` requests until one's status message arrives on IOPub (so IOPub is subscribed).

    Raises ``RuntimeError`` after ``timeout`` seconds without one.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        probe = client.kernel_info()
        until = min(deadline, time.monotonic() + _PROBE_SECONDS)
        while (left := until - time.monotonic()) > 0:
            try:
                message = client.get_iopub_msg(timeout=left)
            except Empty:
                break
            if message["parent_header"].get("msg_id") == probe:
                _drain(client, probe)
                return
    raise RuntimeError(f"The kernel's IOPub channel sent nothing in {timeout:.0f} s.")


def _drain(client: Any, probe: str) -> None:
    """Drop the probe's replies so the console starts with empty queues (the last probe's idle included)."""
    while True:
        try:
            message = client.get_iopub_msg(timeout=_PROBE_SECONDS)
        except Empty:
            break
        if (
            message["parent_header"].get("msg_id") == probe
            and message["header"]["msg_type"] == "status"
            and message["content"].get("execution_state") == "idle"
        ):
            break
    while True:
        try:
            client.get_shell_msg(timeout=0.01)
        except Empty:
            return


def terminal_size() -> tuple[int, int] | None:
    """The (columns, lines) of the terminal the console's stdout or stdin is, or None when neither is one."""
    for stream in (sys.stdout, sys.stdin):
        try:
            size = os.get_terminal_size(stream.fileno())
        except (AttributeError, OSError, ValueError):  # no stream, no fileno, or not a terminal
            continue
        return size.columns, size.lines
    return None


class AriesConsoleShell(ZMQTerminalInteractiveShell):
    """jupyter_console's shell, ready only once IOPub is subscribed, telling the kernel its terminal's size."""

    def init_kernel_info(self) -> None:
        self.send_terminal_size()
        super().init_kernel_info()
        wait_for_iopub(self.client, self.kernel_timeout)

    def send_terminal_size(self) -> None:
        """Put the terminal's current size in the metadata every later request of this client carries."""
        size = terminal_size()
        metadata = self.client.session.metadata
        if size is None:
            metadata.pop(TERMINAL_METADATA, None)
        else:
            metadata[TERMINAL_METADATA] = {"columns": size[0], "lines": size[1]}

    def run_cell(self, cell: str, store_history: bool = True) -> None:
        self.send_terminal_size()  # the terminal may have been resized since the last cell
        super().run_cell(cell, store_history)


class AriesConsoleApp(ZMQTerminalIPythonApp):
    """``jupyter console --kernel aries`` with :class:`AriesConsoleShell`."""

    name = "aries-kernel-console"
    classes = [AriesConsoleShell, *ZMQTerminalIPythonApp.classes]

    def init_shell(self) -> None:
        # As the stock app does, with this module's shell class.
        JupyterConsoleApp.initialize(self)
        signal.signal(signal.SIGINT, self.handle_sigint)
        self.shell = AriesConsoleShell.instance(
            parent=self,
            manager=self.kernel_manager,
            client=self.kernel_client,
            confirm_exit=self.confirm_exit,
        )
        self.shell.own_kernel = not self.existing
