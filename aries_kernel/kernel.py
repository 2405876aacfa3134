"""The Aries kernel: IPython's kernel with the REPL body and ``%aries`` loaded at start."""

from __future__ import annotations

from typing import Any

from ipykernel.ipkernel import IPythonKernel

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

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        install(self.shell)
