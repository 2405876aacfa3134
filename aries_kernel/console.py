"""``aries-kernel console``: jupyter console on the Aries kernel, without its first-cell hang.

jupyter_console sends the first cell as soon as the kernel answers ``kernel_info`` on the shell channel, but
its IOPub (SUB) socket may not have finished subscribing by then (ZeroMQ's "slow joiner"): the cell's
``status: idle`` is lost and the console waits for it forever. This console waits until IOPub delivers a
message of its own before it reads the first line, the way ``jupyter_client``'s ``wait_for_ready`` waits for
the shell channel. Everything else is stock jupyter_console.
"""

from __future__ import annotations

import signal
import time
from queue import Empty
from typing import Any

from jupyter_client.consoleapp import JupyterConsoleApp
from jupyter_console.app import ZMQTerminalIPythonApp
from jupyter_console.ptshell import ZMQTerminalInteractiveShell

__all__ = ["AriesConsoleApp", "wait_for_iopub"]

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


class AriesConsoleShell(ZMQTerminalInteractiveShell):
    """jupyter_console's shell, ready only once IOPub is subscribed."""

    def init_kernel_info(self) -> None:
        super().init_kernel_info()
        wait_for_iopub(self.client, self.kernel_timeout)


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
