"""The Aries kernel: IPython's kernel with the REPL body and ``%aries`` loaded at start.

In ``jupyter console`` the kernel is not a terminal but the console is. ``aries-kernel console`` puts its
terminal's size in the metadata of every request it sends (:data:`TERMINAL_METADATA`, read again before each
cell, so a resize is followed); without it (stock ``jupyter console``) the kernel's original stdout, when it is
that terminal, is asked. Before each cell and before a DataFrame is shown, pandas' ``display.width`` and the
kernel's ``COLUMNS``/``LINES`` (what ``shutil.get_terminal_size()``, and so pandas' ``display.max_columns = 0``,
go by) are set to that size, so DataFrames use a wide terminal and follow a resize. Frontends that render
widgets (JupyterLab, Notebook) show DataFrames as HTML and are left alone.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from ipykernel.ipkernel import IPythonKernel
from traitlets import Float

from aries_kernel import __version__
from aries_kernel.extension import install

__all__ = ["AriesKernel", "TERMINAL_METADATA", "terminal_columns"]

# The key of a request's metadata under which a terminal client sends ``{"columns": int, "lines": int}``.
TERMINAL_METADATA = "aries_terminal_size"


def terminal_columns() -> int | None:
    """The width of the terminal the kernel's original stdout or stderr is, or None when neither is one.

    ipykernel replaces ``sys.stdout`` and points fd 1 at a pipe, but its stream's ``fileno()`` is a copy of the
    original descriptor; without that capture, ``sys.__stdout__`` still is the original.
    """
    for stream in (sys.stdout, sys.__stdout__, sys.stderr, sys.__stderr__):
        try:
            return os.get_terminal_size(stream.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, OSError, ValueError):  # no stream, no fileno, or not a terminal
            continue
    return None


class AriesKernel(IPythonKernel):
    """An :class:`IPythonKernel` whose namespace holds ``codebase``, ``vault`` and ``rlm_call``/``rlm_batch``."""

    implementation = "aries-kernel"
    implementation_version = __version__
    banner = (
        f"Aries {__version__}: IPython with a REPL body.\n"
        "  codebase   the code graph of this repository (codebase.top_files(), .search(), ...)\n"
        "  vault      persistent memory (vault.query_ranked(...))\n"
        "  rlm_call   focused sub-model calls\n"
        "  %aries     the coding agent (%aries help)\n"
    )

    index_delay = Float(
        1.0,
        help="Seconds after start before indexing begins in the background (it also begins after the first "
        "cell, and never while a cell runs; the warm-up imports of the SDK and the agent follow it). Keeps the "
        "kernel's first reply as fast as plain ipykernel's.",
    ).tag(config=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # Set once a frontend asks about widget comms: JupyterLab and Notebook 7 do as they connect, a terminal
        # console never does. The agent's panel is shown only where it can render.
        self.frontend_has_widgets = False
        shell = self.shell
        assert shell is not None  # IPythonKernel.__init__ has made it
        # The size the console's client last sent with a request (columns, lines), None until one does.
        self.client_terminal_size: tuple[int, int] | None = None
        install(shell, index_delay=self.index_delay)
        shell.events.register("pre_run_cell", self._fit_console_width)
        # pandas may be imported by the cell itself: fit the width again when a frame is shown. Its classes say
        # they are from "pandas" since pandas 3, from their own modules before.
        plain = shell.display_formatter.formatters["text/plain"]
        for module, name in (
            ("pandas", "DataFrame"),
            ("pandas", "Series"),
            ("pandas.core.frame", "DataFrame"),
            ("pandas.core.series", "Series"),
        ):
            plain.for_type_by_name(module, name, self._pretty_pandas)

    def _note_client_terminal(self) -> None:
        """Keep the terminal size the current request's client sent, if it sent one."""
        size = (self.get_parent("shell").get("metadata") or {}).get(TERMINAL_METADATA)
        if isinstance(size, dict):
            columns, lines = size.get("columns"), size.get("lines")
            if isinstance(columns, int) and isinstance(lines, int) and columns > 0 and lines > 0:
                self.client_terminal_size = (columns, lines)

    def _fit_console_width(self, *_: Any) -> None:
        """Fit pandas and ``shutil.get_terminal_size()`` to the console, when the frontend is a terminal."""
        self._note_client_terminal()
        if self.frontend_has_widgets:
            return
        if self.client_terminal_size is not None:
            columns, lines = self.client_terminal_size
        elif (own := terminal_columns()) is not None:
            columns, lines = own, 0
        else:
            return  # not a terminal frontend, or one that does not say its size
        # pandas' display.max_columns = 0 ("fit the terminal", if the user sets it) asks shutil, which reads
        # COLUMNS because stdout is not a terminal.
        os.environ["COLUMNS"] = str(columns)
        if lines:
            os.environ["LINES"] = str(lines)
        pandas = sys.modules.get("pandas")
        if pandas is not None:
            pandas.set_option("display.width", columns)

    def _pretty_pandas(self, obj: Any, printer: Any, cycle: bool) -> None:
        self._fit_console_width()
        printer.text(repr(obj))

    async def comm_info_request(self, stream: Any, ident: Any, parent: dict[str, Any]) -> None:
        """Answer as ipykernel does, noting whether the frontend speaks the widget protocol."""
        target = parent.get("content", {}).get("target_name") or ""
        if target.startswith("jupyter.widget"):
            self.frontend_has_widgets = True
        await super().comm_info_request(stream, ident, parent)

    def do_history(  # type: ignore[override]  # IPythonKernel's is synchronous; Kernel declares it async
        self,
        hist_access_type: str,
        output: bool,
        raw: bool,
        session: int = 0,
        start: int = 0,
        stop: int | None = None,
        n: int | None = None,
        pattern: str | None = None,
        unique: bool = False,
    ) -> dict[str, Any]:
        """Answer as ipykernel does, but name the current session by its number in every entry: IPython gives a
        range of the running session as session 0 (its own alias for "this session"), where a tail request for
        the same lines gives the number, so a client that asks a range by the session a tail named got another."""
        reply = super().do_history(
            hist_access_type, output, raw, session=session, start=start, stop=stop, n=n, pattern=pattern,
            unique=unique,
        )
        assert self.shell is not None
        current = self.shell.history_manager.session_number
        reply["history"] = [(current, *entry[1:]) if entry[0] == 0 else entry for entry in reply["history"]]
        return reply
