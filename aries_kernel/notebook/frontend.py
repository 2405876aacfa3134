"""The kernel's end of the notebook bridge: the comm that aries-kernel's JupyterLab extension opens per notebook.

Protocol version 1 (the frontend's side is ``labextension/src/protocol.ts``). The frontend opens a comm on the
target ``aries.notebook`` with a ``hello`` carrying a snapshot of the live notebook, and sends a new ``snapshot``
just before each execution it schedules. While a ``%aries`` cell runs, the kernel's shell channel is busy, so a
message from the frontend waits until the cell ends, while what the kernel sends (IOPub) arrives at once: the
snapshot sent before the running cell is the live notebook for the whole run, and the kernel's requests
(``insert``, ``run``, ``remove``) are answered by a ``reply`` that arrives after the cell. A message of a wrong shape on
either side gets an error message back; nothing raises in a comm handler.

:class:`NotebookBridge` holds one :class:`NotebookLink` per open notebook; :func:`bridge_of` finds it for a
context. Without the extension (console, classic Notebook, Kernel Gateway clients) there is no link, and
callers fall back to IPython's ``set_next_input`` payload.
"""

from __future__ import annotations

import itertools
import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from aries_kernel.notebook.executed import cell_log
from aries_kernel.notebook.nbfile import Cell

__all__ = [
    "PROTOCOL",
    "STEPS_MIME",
    "TARGET",
    "BridgeError",
    "NotebookBridge",
    "NotebookLink",
    "bridge_of",
    "live_cells",
    "register",
]

log = logging.getLogger(__name__)

PROTOCOL = 1
TARGET = "aries.notebook"
STEPS_MIME = (
    "application/vnd.aries.steps+json"  # a run's steps in its record; the extension's button reads it
)
MAX_CELLS = 1000  # cells in one insert (the frontend's limit too)
MAX_SNAPSHOT_CELLS = 20_000
_PROBLEMS_KEPT = 20


class BridgeError(RuntimeError):
    """The bridge cannot do what was asked (no notebook linked, two candidates, a bad argument): the message
    says why and what to do."""


def _shape_error(snapshot: Any) -> str | None:
    """What is wrong with a notebook snapshot's shape, or None when it is good."""
    if not isinstance(snapshot, dict):
        return "notebook must be an object"
    if not isinstance(snapshot.get("path"), str):
        return "notebook.path must be a string"
    cells = snapshot.get("cells")
    if not isinstance(cells, list):
        return "notebook.cells must be a list"
    if len(cells) > MAX_SNAPSHOT_CELLS:
        return f"notebook.cells has {len(cells)} cells, over {MAX_SNAPSHOT_CELLS}"
    for index, cell in enumerate(cells):
        if not isinstance(cell, dict):
            return f"notebook.cells[{index}] must be an object"
        for key in ("id", "cell_type", "source"):
            if not isinstance(cell.get(key), str):
                return f"notebook.cells[{index}].{key} must be a string"
        outputs = cell.get("outputs", [])
        if not isinstance(outputs, list) or not all(isinstance(text, str) for text in outputs):
            return f"notebook.cells[{index}].outputs must be a list of strings"
    return None


@dataclass
class NotebookLink:
    """One notebook open in a frontend with the extension: its comm and the last snapshot it sent."""

    comm: Any
    snapshot: dict[str, Any]
    frontend: str = "jupyterlab"
    closed: bool = False
    replies: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def path(self) -> str:
        """The notebook's path as the frontend names it (relative to the server's root)."""
        return str(self.snapshot.get("path", ""))

    def cell_ids(self) -> list[str]:
        """The ids of the notebook's cells, in order, as of the last snapshot."""
        return [cell["id"] for cell in self.snapshot.get("cells", [])]


class NotebookBridge:
    """The kernel's links to the notebooks open on it, and the requests it sent them."""

    def __init__(self, cell_id: Any = None) -> None:
        # The running cell's id (the frontend sends it with each execute request), from the notebook context's
        # record of executed cells; a callable returning None when unknown.
        self._cell_id = cell_id or (lambda: None)
        self.links: dict[str, NotebookLink] = {}  # by comm id
        self.problems: deque[str] = deque(maxlen=_PROBLEMS_KEPT)  # bad messages, newest last
        self.sent: dict[str, tuple[NotebookLink, str]] = {}  # request id -> (link, what was asked)
        self._ids = itertools.count(1)

    # -- the comm -------------------------------------------------------------------------------------------
    def open(self, comm: Any, message: dict[str, Any]) -> None:
        """The comm target's handler: a frontend opened a comm with its ``hello``."""
        data = (message.get("content") or {}).get("data")
        problem = self._hello_error(data)
        if problem is not None or not isinstance(data, dict):
            problem = problem or "the message is not a JSON object"
            self._problem(f"a frontend's hello was refused: {problem}")
            comm.send({"protocol": PROTOCOL, "type": "error", "error": problem})
            comm.close()
            return
        link = NotebookLink(comm, data["notebook"], frontend=str(data.get("frontend", "jupyterlab")))
        self.links[comm.comm_id] = link
        comm.on_msg(lambda msg: self._message(link, msg))
        comm.on_close(lambda _msg: self._closed(link))

    @staticmethod
    def _hello_error(data: Any) -> str | None:
        if not isinstance(data, dict):
            return "the message is not a JSON object"
        if data.get("protocol") != PROTOCOL:
            return (
                f"protocol {data.get('protocol')!r} is not supported (this kernel speaks {PROTOCOL}); install the "
                "aries-kernel whose extension this is"
            )
        if data.get("type") != "hello":
            return f"the first message must be a hello, not {data.get('type')!r}"
        return _shape_error(data.get("notebook"))

    def _message(self, link: NotebookLink, message: dict[str, Any]) -> None:
        data = (message.get("content") or {}).get("data")
        try:
            problem = self._handle(link, data)
        except (
            Exception
        ) as exc:  # a bug here must not lose the frontend's message silently, nor raise in ipykernel
            log.exception("aries.notebook message")
            problem = f"the kernel failed on it: {type(exc).__name__}: {exc}"
        if problem is not None:
            kind = data.get("type") if isinstance(data, dict) else None
            self._problem(f"a message from {link.path or 'a notebook'} was refused: {problem}")
            link.comm.send({"protocol": PROTOCOL, "type": "error", "error": problem, "about": kind})

    def _handle(self, link: NotebookLink, data: Any) -> str | None:
        """Apply one frontend message; the error to send back when its shape is wrong."""
        if not isinstance(data, dict):
            return "the message is not a JSON object"
        if data.get("protocol") != PROTOCOL:
            return f"protocol {data.get('protocol')!r} is not supported (this kernel speaks {PROTOCOL})"
        kind = data.get("type")
        if kind == "snapshot":
            problem = _shape_error(data.get("notebook"))
            if problem is None:
                link.snapshot = data["notebook"]
            return problem
        if kind == "reply":
            request = data.get("request")
            if not isinstance(request, str) or not isinstance(data.get("ok"), bool):
                return "a reply needs request (a string) and ok (true or false)"
            if not data["ok"] and not isinstance(data.get("error"), str):
                return "a failed reply needs error (a string)"
            link.replies[request] = data
            if not data["ok"]:
                asked = self.sent.get(request, (link, "a request"))[1]
                self._problem(f"{link.path}: {asked} failed: {data['error']}")
            return None
        return f"unknown message type {kind!r} (expected snapshot or reply)"

    def _closed(self, link: NotebookLink) -> None:
        link.closed = True
        self.links = {key: value for key, value in self.links.items() if value is not link}

    def _problem(self, text: str) -> None:
        log.warning("%s", text)
        self.problems.append(text)

    # -- what the kernel uses -------------------------------------------------------------------------------
    def link(self, cell_id: str | None = None) -> NotebookLink:
        """The notebook holding ``cell_id`` (by default the running cell), else the only notebook linked."""
        links = [link for link in self.links.values() if not link.closed]
        if not links:
            raise BridgeError(
                "No notebook is linked: aries-kernel's JupyterLab extension is not in this frontend (console, "
                "classic Notebook, Kernel Gateway) or has not connected yet."
            )
        wanted = cell_id or self._cell_id()
        if wanted:
            holding = [link for link in links if wanted in link.cell_ids()]
            if len(holding) == 1:
                return holding[0]
        if len(links) == 1:
            return links[0]
        raise BridgeError(
            f"{len(links)} notebooks are open on this kernel ({', '.join(link.path for link in links)}) and none "
            f"is known to hold cell {wanted or '(no cell id)'}: nothing was written."
        )

    def available(self) -> bool:
        """Whether a notebook with the extension is linked."""
        return any(not link.closed for link in self.links.values())

    def live_notebook(self, cell_id: str | None = None) -> dict[str, Any] | None:
        """The live notebook (path, dirty, read_only, cells with id, cell_type, source, outputs), as the frontend
        sent it before the running cell; None without a link."""
        try:
            return self.link(cell_id).snapshot
        except BridgeError:
            return None

    def insert_cells(self, cells: list[dict[str, Any]], after: str | None = None) -> str:
        """Ask the frontend to insert ``cells`` (``cell_type``, ``source``, ``metadata``) below the cell ``after``
        (by default the running cell) as one undoable action; returns the request id, whose reply arrives once
        the running cell has ended (:meth:`reply`)."""
        if not cells or len(cells) > MAX_CELLS:
            raise BridgeError(f"An insert takes 1 to {MAX_CELLS} cells, not {len(cells)}.")
        for index, cell in enumerate(cells):
            if cell.get("cell_type") not in ("code", "markdown") or not isinstance(cell.get("source"), str):
                raise BridgeError(f"cells[{index}] needs cell_type code or markdown and a string source.")
        after = after or self._cell_id()
        link = self.link(after)
        if link.snapshot.get("read_only"):
            raise BridgeError(f"{link.path} is open read-only: no cell was inserted.")
        new = [
            {"cell_type": c["cell_type"], "source": c["source"], "metadata": dict(c.get("metadata") or {})}
            for c in cells
        ]
        return self._send(
            link, {"type": "insert", "after": after, "cells": new}, f"inserting {len(new)} cell(s)"
        )

    def run_cell(self, cell_id: str) -> str:
        """Ask the frontend to run the agent's cell ``cell_id`` (it runs once the kernel is free); the request id."""
        link = self.link(cell_id)
        return self._send(link, {"type": "run", "cell_id": cell_id}, f"running cell {cell_id}")

    def remove_cells(self, cells: list[dict[str, str]]) -> str:
        """Ask the frontend to remove the agent's cells ``cells`` (``id``, ``source``) in one undoable action,
        each only if its source is still ``source``; the request id (the reply lists ``removed`` and ``kept``)."""
        if not cells or len(cells) > MAX_CELLS:
            raise BridgeError(f"A removal takes 1 to {MAX_CELLS} cells, not {len(cells)}.")
        link = self.link(cells[0]["id"])
        shown = [{"id": cell["id"], "source": cell["source"]} for cell in cells]
        return self._send(link, {"type": "remove", "cells": shown}, f"removing {len(shown)} cell(s)")

    def reply(self, request: str) -> dict[str, Any] | None:
        """The frontend's reply to ``request`` (ok, and ids or error), or None while none has arrived."""
        link = self.sent.get(request, (None, ""))[0]
        return link.replies.get(request) if link is not None else None

    def _send(self, link: NotebookLink, message: dict[str, Any], what: str) -> str:
        request = f"k{next(self._ids)}"
        self.sent[request] = (link, what)
        link.comm.send({"protocol": PROTOCOL, "request": request, **message})
        return request

    def status(self) -> str:
        """The "Cell writing" part of ``%aries status``: which way the agent's cells are written."""
        links = [link for link in self.links.values() if not link.closed]
        if links:
            names = ", ".join(f"{link.path} ({len(link.cell_ids())} cells)" for link in links)
            lines = [f"Through aries-kernel's JupyterLab extension (protocol {PROTOCOL}): {names}"]
        else:
            lines = [
                "Fallback: no notebook is linked through aries-kernel's JupyterLab extension, so a run's steps go "
                "into one new cell (IPython's set_next_input), as in a console, classic Notebook or Kernel Gateway"
            ]
        if self.problems:
            lines.append(f"{len(self.problems)} problem(s); the last: {self.problems[-1]}")
        return "\n".join(lines)


def register(context: Any) -> NotebookBridge | None:
    """Register the comm target on the kernel of ``context``'s shell (none outside a kernel); the bridge."""
    kernel = getattr(context.shell, "kernel", None)
    manager = getattr(kernel, "comm_manager", None)
    if manager is None:
        return None

    def running_cell() -> str | None:
        cells = cell_log(context)
        return cells.current_id if cells is not None else None

    bridge: NotebookBridge = context.lazy("notebook_bridge", lambda _: NotebookBridge(running_cell))
    manager.register_target(TARGET, bridge.open)
    return bridge


def bridge_of(context: Any) -> NotebookBridge | None:
    """The bridge registered for ``context``, or None outside a kernel."""
    built = getattr(context, "built", None)
    bridge = built("notebook_bridge") if built is not None else None
    return bridge if isinstance(bridge, NotebookBridge) else None


def live_cells(context: Any) -> list[Cell] | None:
    """The cells of the live notebook the running cell belongs to, as the extension last sent them (unsaved
    edits included; text outputs as stdout streams), or None without the extension."""
    bridge = bridge_of(context)
    snapshot = bridge.live_notebook() if bridge is not None else None
    if snapshot is None:
        return None
    cells = []
    for index, cell in enumerate(snapshot["cells"]):
        outputs = tuple(
            {"output_type": "stream", "name": "stdout", "text": text} for text in cell.get("outputs", [])
        )
        count = cell.get("execution_count")
        cells.append(
            Cell(
                index,
                cell["id"],
                cell["cell_type"],
                cell["source"],
                outputs,
                count if isinstance(count, int) else None,
            )
        )
    return cells
