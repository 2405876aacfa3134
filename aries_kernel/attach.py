"""A link to a running Aries kernel, for an outside agent (``aries-kernel mcp --kernel``).

The kernel is found by its connection file (a path) or its id (``find_connection_file`` looks in the Jupyter
runtime folder). Code is sent as an ordinary execute request that calls :func:`aries_kernel.agent.outside.run`
in the kernel: the kernel runs it under the Repl guard, and its IOPub carries the request like any other
client's, so a console with other clients' output on shows what the outside agent ran.
"""

from __future__ import annotations

import os
import queue
import threading
from pathlib import Path
from typing import Any

from jupyter_client import find_connection_file
from jupyter_client.blocking.client import BlockingKernelClient

__all__ = ["KernelLink", "KernelLinkError"]


class KernelLinkError(RuntimeError):
    """The kernel could not be reached, or it did not answer in time."""


class KernelLink:
    """A blocking client of one kernel; :meth:`run` executes an outside agent's code there."""

    def __init__(
        self, client: BlockingKernelClient, *, mode: str | None = None, timeout: float = 600.0
    ) -> None:
        self.client = client
        self.mode = mode
        self.timeout = timeout
        self._lock = threading.Lock()

    @classmethod
    def connect(cls, kernel: str, *, mode: str | None = None, timeout: float = 600.0) -> KernelLink:
        """Connect to the kernel whose connection file is ``kernel`` (a path) or whose id it is."""
        path = Path(kernel).expanduser()
        if not path.is_file():
            try:
                path = Path(find_connection_file(kernel))
            except OSError as exc:
                raise KernelLinkError(
                    f"No kernel {kernel!r}: not a connection file, and no kernel-{kernel}*.json in the Jupyter "
                    "runtime folder (`jupyter --runtime-dir`; in a notebook, %connect_info names the file)."
                ) from exc
        client = BlockingKernelClient(connection_file=os.fspath(path))
        client.load_connection_file()
        client.start_channels()
        try:
            client.wait_for_ready(timeout=30)
        except RuntimeError as exc:
            client.stop_channels()
            raise KernelLinkError(f"The kernel of {path} did not answer: {exc}") from exc
        return cls(client, mode=mode, timeout=timeout)

    def run(self, code: str) -> str:
        """Run ``code`` in the kernel's namespace through the guarded helper; returns what it printed."""
        call = (
            "__import__('aries_kernel.agent.outside', fromlist=['run']).run("
            f"get_ipython(), {code!r}, mode={self.mode!r})"
        )
        printed: list[str] = []
        errors: list[str] = []

        def collect(message: dict[str, Any]) -> None:
            kind, content = message["header"]["msg_type"], message["content"]
            if kind == "stream" and content.get("name") == "stdout":
                printed.append(content["text"])
            elif kind == "error":  # the helper itself failed (Aries missing in that kernel, say)
                errors.append(f"{content['ename']}: {content['evalue']}")

        with self._lock:
            try:
                reply = self.client.execute_interactive(
                    call, store_history=False, allow_stdin=False, timeout=self.timeout, output_hook=collect
                )
            except TimeoutError as exc:
                raise KernelLinkError(
                    f"The kernel did not finish within {self.timeout:g} s; the code may still be running there."
                ) from exc
            except queue.Empty as exc:  # older jupyter_client raises this on a reply timeout
                raise KernelLinkError(f"The kernel did not answer within {self.timeout:g} s.") from exc
        if errors:
            raise KernelLinkError("The kernel could not run the code: " + "; ".join(errors))
        if reply["content"].get("status") == "aborted":
            raise KernelLinkError(
                "The kernel aborted the request (an earlier cell failed or it was interrupted)."
            )
        return "".join(printed).rstrip("\n")

    def close(self) -> None:
        """Stop the client's channels (the kernel runs on)."""
        self.client.stop_channels()
