"""A kernel's websocket as Jupyter Server and Kernel Gateway serve it (``/api/kernels/<id>/channels``, the v1
JSON protocol): run code in the kernel and collect what it sent back, every wait bounded."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

__all__ = ["Channels"]

Output = dict[str, Any]


class Channels:
    """Execute requests over one kernel websocket (a websocket-client connection whose ``recv`` has a timeout)."""

    def __init__(self, connection: Any, timeout: float = 300) -> None:
        self.connection = connection
        self.session = uuid.uuid4().hex
        self.timeout = timeout

    def send(self, code: str) -> str:
        """Send ``code`` as an execute request; its message id."""
        msg_id = uuid.uuid4().hex
        header = {
            "msg_id": msg_id,
            "msg_type": "execute_request",
            "username": "test",
            "session": self.session,
            "version": "5.3",
            "date": "",
        }
        content = {
            "code": code,
            "silent": False,
            "store_history": False,
            "user_expressions": {},
            "allow_stdin": False,
        }
        message = {
            "header": header,
            "parent_header": {},
            "metadata": {},
            "content": content,
            "channel": "shell",
        }
        self.connection.send(json.dumps(message))
        return msg_id

    def collect(self, msg_id: str, until: Callable[[Output], bool] | None = None) -> Output:
        """What the request ``msg_id`` produced (``stdout``, ``stderr``, ``result``, ``error``, ``status``), once
        the kernel replied and went idle, or as soon as ``until(output so far)`` holds; call again with the same
        ``msg_id`` to go on (output collected before is not repeated). Fails after ``timeout`` seconds."""
        out: Output = {"stdout": "", "stderr": "", "result": None, "error": None, "status": None}
        deadline = time.monotonic() + self.timeout
        idle = False
        while not (idle and out["status"] is not None):
            if until is not None and until(out):
                return out
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"the kernel did not finish request {msg_id} in {self.timeout:.0f} s: {out}"
                )
            reply = json.loads(self.connection.recv())
            if reply.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind, body = reply["msg_type"], reply["content"]
            if kind == "stream":
                out[body["name"]] += body["text"]
            elif kind == "execute_result":
                out["result"] = body["data"].get("text/plain")
            elif kind == "error":
                out["error"] = (body["ename"], body["evalue"])
            elif kind == "execute_reply":
                out["status"] = body["status"]
            elif kind == "status" and body["execution_state"] == "idle":
                idle = True
        return out

    def execute(self, code: str) -> Output:
        """Run ``code`` and wait for all it produced (see :meth:`collect`)."""
        return self.collect(self.send(code))
