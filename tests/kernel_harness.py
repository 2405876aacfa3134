"""Start the real Aries kernel with jupyter_client and run cells in it, for tests and benchmarks.

The kernelspec is written into a private Jupyter data directory (prepended to ``JUPYTER_PATH``) on import, so
tests never depend on what is installed on the machine. Kernels get a private vault (``ARIES_VAULT``) and log
directory unless the caller's ``env`` says otherwise.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import KernelManager

from aries_kernel.kernelspec import KERNEL_NAME, write_kernelspec

__all__ = ["CellResult", "start_kernel", "run_cell", "stop_kernel", "JUPYTER_DATA", "KERNEL_PYTHON"]

# The interpreter the kernels run on: this one, or another environment's where ``ARIES_TEST_KERNEL_ENV`` names
# one (.ci/run: a venv with the wheel installed and the oldest ipykernel and ipywidgets the package declares).
KERNEL_ENV = os.environ.get("ARIES_TEST_KERNEL_ENV")
KERNEL_PYTHON = str(Path(KERNEL_ENV) / "bin" / "python") if KERNEL_ENV else sys.executable
JUPYTER_DATA = Path(tempfile.mkdtemp(prefix="aries-test-jupyter-"))
_SPEC = write_kernelspec(JUPYTER_DATA / "kernels" / KERNEL_NAME, python=KERNEL_PYTHON)
if KERNEL_ENV:  # the installed package, never a checkout in the kernel's working folder (python -P)
    _kernel_json = json.loads((_SPEC / "kernel.json").read_text())
    _kernel_json["env"] = {**_kernel_json.get("env", {}), "PYTHONSAFEPATH": "1"}
    (_SPEC / "kernel.json").write_text(json.dumps(_kernel_json))
os.environ["JUPYTER_PATH"] = os.pathsep.join(
    filter(None, [str(JUPYTER_DATA), os.environ.get("JUPYTER_PATH")])
)

StdinReply = str | list[str] | Callable[[str], str] | None

# A client's kernel and log folder, for the thread dump a timed-out cell asks for (see _thread_dump).
_HANG_DUMPS: dict[int, tuple[KernelManager, Path]] = {}


@dataclass
class CellResult:
    """What one execute_request produced."""

    status: str = ""
    stdout: str = ""
    stderr: str = ""
    result: str | None = None
    displays: list[dict[str, Any]] = field(default_factory=list)
    error: tuple[str, str, list[str]] | None = None
    prompts: list[str] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    payload: list[dict[str, Any]] = field(default_factory=list)  # the execute reply's (set_next_input, ...)


def start_kernel(
    cwd: str | os.PathLike[str], env: dict[str, str] | None = None, kernel_name: str = KERNEL_NAME
) -> tuple[KernelManager, BlockingKernelClient]:
    """Start ``kernel_name`` in ``cwd`` and return its manager and a ready blocking client."""
    full_env = dict(os.environ)
    scratch = Path(tempfile.mkdtemp(prefix="aries-test-kernel-"))
    full_env["ARIES_VAULT"] = str(scratch / "vault")  # its own, unless ``env`` names one
    full_env["ARIES_LOG_DIR"] = str(scratch / "logs")
    full_env.update(env or {})
    # IPC sockets in the kernel's scratch folder, not TCP ports: a port the manager picked can be taken by another
    # process before the kernel binds it ("Address already in use" when suites run side by side).
    km = KernelManager(kernel_name=kernel_name, transport="ipc", connection_file=str(scratch / "kernel.json"))
    km.start_kernel(cwd=str(cwd), env=full_env)
    kc = km.client()
    _HANG_DUMPS[id(kc)] = (km, Path(full_env["ARIES_LOG_DIR"]))
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=120)
    except RuntimeError:
        stop_kernel(km, kc)
        raise
    return km, kc


def _next_reply(reply: StdinReply, prompt: str) -> str:
    if callable(reply):
        return reply(prompt)
    if isinstance(reply, list):
        return reply.pop(0) if reply else ""
    return reply or ""


def run_cell(
    kc: BlockingKernelClient,
    code: str,
    timeout: float = 120,
    stdin_reply: StdinReply = None,
    cell_id: str | None = None,
) -> CellResult:
    """Execute ``code`` and collect its output until the kernel is idle again.

    ``stdin_reply`` answers ``input()`` calls in the kernel: a string for every prompt, a list consumed in order,
    or a function of the prompt text. ``cell_id`` is sent as JupyterLab sends it, in the request's metadata.
    """
    if cell_id is None:
        msg_id = kc.execute(code, allow_stdin=stdin_reply is not None)
    else:
        content = {
            "code": code,
            "silent": False,
            "store_history": True,
            "user_expressions": {},
            "allow_stdin": stdin_reply is not None,
            "stop_on_error": True,
        }
        request = kc.session.msg("execute_request", content, metadata={"cellId": cell_id})
        kc.shell_channel.send(request)
        msg_id = request["header"]["msg_id"]
    out = CellResult()
    deadline = time.monotonic() + timeout
    idle = False
    while not idle:
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"cell did not finish within {timeout} s: {code[:80]!r}\n"
                f"--- its stdout so far (last 2,000 characters) ---\n{out.stdout[-2000:]}\n"
                f"--- its stderr so far ---\n{out.stderr[-2000:]}\n{_thread_dump(kc)}"
            )
        if stdin_reply is not None:
            try:
                request = kc.get_stdin_msg(timeout=0.01)
            except queue.Empty:
                pass
            else:
                prompt = request["content"].get("prompt", "")
                out.prompts.append(prompt)
                kc.input(_next_reply(stdin_reply, prompt))
        try:
            msg = kc.get_iopub_msg(timeout=0.05)
        except queue.Empty:
            continue
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        out.messages.append(msg)
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream":
            if content["name"] == "stdout":
                out.stdout += content["text"]
            else:
                out.stderr += content["text"]
        elif kind == "execute_result":
            out.result = content["data"].get("text/plain")
        elif kind in ("display_data", "update_display_data"):
            out.displays.append(content["data"])
        elif kind == "error":
            out.error = (content["ename"], content["evalue"], content["traceback"])
        elif kind == "status" and content["execution_state"] == "idle":
            idle = True
    reply = kc.get_shell_msg(timeout=max(1.0, deadline - time.monotonic()))
    while reply["parent_header"].get("msg_id") != msg_id:  # a reply to a request sent outside run_cell
        reply = kc.get_shell_msg(timeout=max(1.0, deadline - time.monotonic()))
    out.status = reply["content"]["status"]
    out.payload = reply["content"].get("payload", [])
    return out


def _thread_dump(kc: BlockingKernelClient) -> str:
    """Every thread's stack in the client's kernel (its ``kill -USR1`` dump), so a hung cell in a CI run says where
    it hung; or why there is none."""
    started = _HANG_DUMPS.get(id(kc))
    pid = getattr(started[0].provisioner, "pid", None) if started else None
    if started is None or pid is None:
        return "(no thread dump: the kernel was not started by start_kernel, or has no process id)"
    logs = started[1]
    try:
        os.kill(pid, signal.SIGUSR1)
    except OSError as exc:
        return f"(no thread dump: {exc})"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        dumps = sorted(logs.glob("stack-dump-*.txt"))
        text = "".join(path.read_text(errors="replace") for path in dumps)
        if text.strip():
            time.sleep(0.5)  # let the dump thread finish writing
            text = "".join(path.read_text(errors="replace") for path in dumps)
            return f"--- the kernel's threads (kill -USR1) ---\n{text}"
        time.sleep(0.2)
    return f"(no thread dump in {logs} within 10 s)"


def stop_kernel(km: KernelManager, kc: BlockingKernelClient) -> None:
    """Stop the client's channels and shut the kernel down."""
    _HANG_DUMPS.pop(id(kc), None)
    kc.stop_channels()
    km.shutdown_kernel(now=True)
