"""Replay: run a notebook's code cells top to bottom in a fresh kernel, bounded, and say what a fresh run does.

The fresh kernel is started with :mod:`jupyter_client` from the same kernelspec as the kernel asking (``aries``
in the Aries kernel, ``python3`` where ``%load_ext aries_kernel`` loaded Aries), in the notebook's folder (as
JupyterLab starts a notebook's kernel) with ``$ARIES_ROOT`` set to the same project root. Each cell has
``c.AriesReplay.cell_timeout`` seconds and the whole replay ``c.AriesReplay.timeout``: a cell past its bound is
interrupted, and if it has not stopped :data:`INTERRUPT_GRACE` seconds later the kernel is killed and the cells
left are skipped. A failing cell does not stop the replay (the cells after it show what depends on it). The
fresh kernel is always shut down at the end, on an interrupt of the kernel asking too; the notebook file is only
read.

Per code cell the report says: ran, failed (with the error), timeout or skipped; whether its text output
(``text/plain`` and streams, with memory addresses and prompt numbers normalised) differs from the output saved in
the file; and the names it uses that no earlier cell defines (:mod:`aries_kernel.notebook.hidden`).
"""

from __future__ import annotations

import itertools
import os
import queue
import re
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from traitlets import Float, Unicode
from traitlets.config import Configurable

from aries_kernel.codebase.notebooks import cell_text
from aries_kernel.notebook.hidden import analyse_cells, fresh_names, missing_names
from aries_kernel.notebook.nbfile import Cell, Notebook

__all__ = [
    "INTERRUPT_GRACE",
    "AriesReplay",
    "CellOutcome",
    "ReplayError",
    "kernel_name_of",
    "replay_env",
    "replay_frame",
    "run_cells",
    "text_outputs",
]

# Seconds a cell past its bound has, after the interrupt, to stop before its kernel is killed.
INTERRUPT_GRACE = 5.0
# Seconds the fresh kernel may take to start and answer (within the replay's own bound).
START_TIMEOUT = 120.0
# Characters of text output kept per cell (a cell that prints in a loop must not fill the memory).
OUTPUT_CHARS = 100_000

_ADDRESS = re.compile(r"0x[0-9a-fA-F]{4,}")
_PROMPT_NUMBER = re.compile(r"\b(In|Out)\s*\[\s*\d+\s*\]")


class AriesReplay(Configurable):
    """Settings of ``%aries replay`` (``c.AriesReplay.<name>`` in a Jupyter config file)."""

    cell_timeout = Float(
        60.0, help="Seconds one cell may run in the replay before it is interrupted (then killed)."
    ).tag(config=True)
    timeout = Float(
        600.0,
        help="Seconds the whole replay may take, the fresh kernel's start included; the rest is skipped.",
    ).tag(config=True)
    kernel_name = Unicode(
        "",
        help="The kernelspec of the fresh kernel; empty: the one of the kernel asking (aries in the Aries "
        "kernel, python3 where %load_ext aries_kernel loaded it).",
    ).tag(config=True)


class ReplayError(RuntimeError):
    """The fresh kernel could not be started; the message names the kernelspec and the reason."""


@dataclass
class CellOutcome:
    """What one cell did in the replay."""

    status: str = "ran"  # ran, failed, timeout or skipped
    error: str = ""  # "KeyError: 'revenue_q3'", or why it timed out or was skipped
    outputs: list[tuple[str, str]] = field(default_factory=list)  # (stdout | stderr | text | error, text)
    seconds: float = 0.0


def kernel_name_of(shell: Any) -> str:
    """The kernelspec ``shell`` runs under: ``aries`` in the Aries kernel, else ``python3``."""
    from aries_kernel.kernel import AriesKernel
    from aries_kernel.kernelspec import KERNEL_NAME

    return KERNEL_NAME if isinstance(getattr(shell, "kernel", None), AriesKernel) else "python3"


# ------------------------------------------------------------------------------------------ text outputs


def _add(outputs: list[tuple[str, str]], kind: str, text: str) -> None:
    """Append ``text``, joining a stream to the same stream just before it (as the frontends show it)."""
    if outputs and kind in ("stdout", "stderr") and outputs[-1][0] == kind:
        outputs[-1] = (kind, outputs[-1][1] + text)
    else:
        outputs.append((kind, text))


def text_outputs(outputs: Sequence[dict[str, Any]]) -> list[tuple[str, str]]:
    """The text outputs of a saved cell (nbformat 4 output dicts), as the replay collects them."""
    found: list[tuple[str, str]] = []
    for output in outputs:
        kind = output.get("output_type")
        if kind == "stream":
            _add(
                found,
                "stderr" if output.get("name") == "stderr" else "stdout",
                cell_text(output.get("text")) or "",
            )
        elif kind in ("execute_result", "display_data"):
            data = output.get("data")
            if isinstance(data, dict) and "text/plain" in data:
                _add(found, "text", cell_text(data["text/plain"]) or "")
        elif kind == "error":
            _add(found, "error", f"{output.get('ename', '')}: {output.get('evalue', '')}")
    return found


def _normalised(outputs: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """Outputs as compared: addresses and prompt numbers masked, line ends and trailing spaces made even."""
    normal = []
    for kind, text in outputs:
        text = _PROMPT_NUMBER.sub(r"\1[N]", _ADDRESS.sub("0x…", text[:OUTPUT_CHARS].replace("\r\n", "\n")))
        text = "\n".join(line.rstrip() for line in text.splitlines()).strip("\n")
        if text:
            normal.append((kind, text))
    return normal


def _difference(saved: Sequence[tuple[str, str]], now: Sequence[tuple[str, str]]) -> str:
    """The first line that differs, as "saved 'x', now 'y'" (lines prefixed by their kind when not stdout)."""

    def lines(outputs: Sequence[tuple[str, str]]) -> list[str]:
        return [
            line if kind == "stdout" else f"[{kind}] {line}"
            for kind, text in outputs
            for line in text.split("\n")
        ]

    before, after = lines(saved), lines(now)
    for old, new in itertools.zip_longest(before, after, fillvalue=""):
        if old != new:
            return f"saved {old[:80]!r}, now {new[:80]!r}"
    return ""


# ------------------------------------------------------------------------------------------- the fresh kernel


class _Kernel:
    """The fresh kernel: started on entry, shut down (killed) on exit whatever happened."""

    def __init__(self, kernel_name: str, cwd: Path, env: dict[str, str], ready_timeout: float) -> None:
        self.kernel_name, self.cwd, self.env, self.ready_timeout = kernel_name, cwd, env, ready_timeout
        self.km: Any = None
        self.kc: Any = None
        # The kernel's own stdout and stderr (start-up warnings) stay out of the cell; the end of stderr is quoted
        # when the kernel does not start or dies.
        self.log = tempfile.TemporaryFile()

    def __enter__(self) -> _Kernel:
        from jupyter_client.kernelspec import NoSuchKernel
        from jupyter_client.manager import KernelManager

        try:
            self.km = KernelManager(kernel_name=self.kernel_name)
            self.km.start_kernel(
                cwd=str(self.cwd), env=self.env, stdout=subprocess.DEVNULL, stderr=self.log.fileno()
            )
            self.kc = self.km.client()
            self.kc.start_channels()
            self.kc.wait_for_ready(timeout=self.ready_timeout)
        except NoSuchKernel:
            self.__exit__()
            raise ReplayError(
                f"No kernelspec named {self.kernel_name!r} is installed (jupyter kernelspec list shows them); "
                "set c.AriesReplay.kernel_name to one that is."
            ) from None
        except (RuntimeError, OSError) as exc:
            message = f"The fresh {self.kernel_name!r} kernel did not start: {exc}{self.stderr_tail()}"
            self.__exit__()
            raise ReplayError(message) from None
        except BaseException:  # an interrupt while it starts: no kernel is left behind
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
        self.log.close()

    def close(self) -> None:
        """Stop the channels and kill the kernel (its whole process group), if it was started."""
        if self.kc is not None:
            self.kc.stop_channels()
            self.kc = None
        if self.km is not None and self.km.has_kernel:
            self.km.shutdown_kernel(now=True)
        self.km = None

    def stderr_tail(self) -> str:
        """The last lines the kernel wrote to stderr, as a sentence to append to a message ("" if none)."""
        self.log.seek(0, os.SEEK_END)
        size = self.log.tell()
        self.log.seek(max(0, size - 1000))
        text = self.log.read().decode("utf-8", "replace").strip()
        return f"; its stderr ends: {text}" if text else ""

    def alive(self) -> bool:
        return bool(self.km is not None and self.km.is_alive())

    def wait(self, msg_id: str, until: float, outcome: CellOutcome) -> str:
        """Collect the cell's output until its kernel is idle ("idle"), ``until`` passes ("late") or the kernel
        dies ("dead")."""
        kept = sum(len(text) for _, text in outcome.outputs)
        while True:
            left = until - time.monotonic()
            if left <= 0:
                return "late"
            try:
                message = self.kc.get_iopub_msg(timeout=min(left, 0.5))
            except queue.Empty:
                if not self.alive():
                    return "dead"
                continue
            if message["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = message["msg_type"], message["content"]
            if kind == "status" and content.get("execution_state") == "idle":
                return "idle"
            text, name = "", ""
            if kind == "stream":
                name, text = (
                    ("stderr" if content.get("name") == "stderr" else "stdout"),
                    content.get("text", ""),
                )
            elif kind in ("execute_result", "display_data"):
                name, text = "text", content.get("data", {}).get("text/plain", "")
            elif kind == "error":
                outcome.status = "failed"
                outcome.error = f"{content.get('ename', '')}: {content.get('evalue', '')}"
                name, text = "error", outcome.error
            elif kind == "clear_output":
                outcome.outputs.clear()
                kept = 0
            if name and kept < OUTPUT_CHARS:
                text = text[: OUTPUT_CHARS - kept]
                kept += len(text)
                _add(outcome.outputs, name, text)

    def reply(self, msg_id: str) -> None:
        """Take the cell's execute_reply off the shell channel (earlier cells' late replies are passed over)."""
        until = time.monotonic() + INTERRUPT_GRACE
        while (left := until - time.monotonic()) > 0:
            try:
                message = self.kc.get_shell_msg(timeout=left)
            except queue.Empty:
                return
            if message["parent_header"].get("msg_id") == msg_id:
                return


def run_cells(
    cells: Sequence[tuple[str, str]],
    *,
    kernel_name: str,
    cwd: Path,
    env: dict[str, str],
    cell_timeout: float,
    timeout: float,
) -> list[CellOutcome]:
    """Run ``cells`` ((source, reason to skip it or "") in order) in a fresh ``kernel_name`` kernel.

    Each cell is bounded by ``cell_timeout`` and all of them, with the kernel's start, by ``timeout`` (seconds).
    The kernel is shut down before this returns or raises. Raises :class:`ReplayError` when the kernel does not start.
    """
    start = time.monotonic()
    end = start + timeout
    outcomes: list[CellOutcome] = []
    with _Kernel(kernel_name, cwd, env, max(1.0, min(START_TIMEOUT, timeout))) as kernel:
        stopped = ""
        for source, skip in cells:
            if stopped or skip:
                outcomes.append(CellOutcome("skipped", stopped or skip))
                continue
            began = time.monotonic()
            bound = min(began + cell_timeout, end)
            outcome = CellOutcome()
            msg_id = kernel.kc.execute(source, allow_stdin=False, stop_on_error=False)
            state = kernel.wait(msg_id, bound, outcome)
            if state == "late":
                kernel.km.interrupt_kernel()
                state = kernel.wait(msg_id, time.monotonic() + INTERRUPT_GRACE, outcome)
                total = bound >= end
                setting = (
                    f"c.AriesReplay.timeout = {timeout:g} s for the whole replay"
                    if total
                    else f"c.AriesReplay.cell_timeout = {cell_timeout:g} s"
                )
                outcome.status = "timeout"
                outcome.error = f"still running after {round(bound - began, 1):g} s ({setting}): interrupted"
                if state != "idle":
                    outcome.error += (
                        f", and killed with its kernel when it did not stop within {INTERRUPT_GRACE:g} s"
                    )
                    kernel.close()
                    stopped = "not run: the replay kernel was killed at an earlier cell that did not stop"
                elif total:
                    stopped = "not run: the replay's total time (c.AriesReplay.timeout) ran out"
            elif state == "dead":
                outcome.status = "failed"
                outcome.error = outcome.error or f"the kernel died while the cell ran{kernel.stderr_tail()}"
                stopped = stopped or "not run: the replay kernel died at an earlier cell"
            if state == "idle":
                kernel.reply(msg_id)
            outcome.seconds = time.monotonic() - began
            outcomes.append(outcome)
    return outcomes


# ------------------------------------------------------------------------------------------------- the report


def replay_frame(cells: Sequence[Cell], outcomes: Sequence[CellOutcome], shell: Any = None) -> Any:
    """The per-cell report (a DataFrame indexed by cell id): cell (index in the file), status, error,
    output_differs (None where nothing is compared: the cell was not saved run, or did not run now),
    difference (the first differing line), undefined_names, seconds."""
    import pandas as pd

    transform = getattr(shell, "transform_cell", None)
    analysed = analyse_cells((cell.source for cell in cells), fresh_names(shell), transform)
    rows = []
    for cell, outcome, missing in zip(cells, outcomes, missing_names(analysed), strict=True):
        saved = _normalised(text_outputs(cell.outputs))
        now = _normalised(outcome.outputs)
        compared = outcome.status in ("ran", "failed") and (cell.execution_count is not None or cell.outputs)
        rows.append(
            {
                "id": cell.id,
                "cell": cell.index,
                "status": outcome.status,
                "error": outcome.error,
                "output_differs": (saved != now) if compared else None,
                "difference": _difference(saved, now) if compared and saved != now else "",
                "undefined_names": ", ".join(name for name, _ in missing),
                "seconds": round(outcome.seconds, 3),
            }
        )
    columns = ["cell", "status", "error", "output_differs", "difference", "undefined_names", "seconds"]
    return pd.DataFrame(rows, columns=["id", *columns]).set_index("id")


def replay_env(notebook: Notebook, root: Path) -> dict[str, str]:
    """The fresh kernel's environment: this one's, with the notebook named as jupyter_server names it and the
    project root given, so the same root is found."""
    env = dict(os.environ)
    env["JPY_SESSION_NAME"] = str(notebook.path)
    env["ARIES_ROOT"] = str(root)
    return env
