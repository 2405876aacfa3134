"""The Aries kernel: IPython's kernel with the REPL body and ``%aries`` loaded at start."""

from __future__ import annotations

from typing import Any

from ipykernel.ipkernel import IPythonKernel
from traitlets import Float

from aries_kernel import __version__
from aries_kernel.extension import install

__all__ = ["AriesKernel"]


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
        "cell). Keeps the kernel's first reply as fast as plain ipykernel's.",
    ).tag(config=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # Set once a frontend asks about widget comms: JupyterLab and Notebook 7 do as they connect, a terminal
        # console never does. The agent's panel is shown only where it can render.
        self.frontend_has_widgets = False
        install(self.shell, index_delay=self.index_delay)

    async def comm_info_request(self, stream: Any, ident: Any, parent: dict[str, Any]) -> None:
        """Answer as ipykernel does, noting whether the frontend speaks the widget protocol."""
        target = parent.get("content", {}).get("target_name") or ""
        if target.startswith("jupyter.widget"):
            self.frontend_has_widgets = True
        await super().comm_info_request(stream, ident, parent)
