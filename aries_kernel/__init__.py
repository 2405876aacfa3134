"""aries-kernel: a Jupyter kernel whose namespace holds a REPL body (codebase, vault, rlm) and a coding agent.

Use it as a kernel (``jupyter console --kernel aries``) or as an extension in any IPython kernel
(``%load_ext aries_kernel``).
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["__version__", "load_ipython_extension", "unload_ipython_extension"]


def load_ipython_extension(ip: Any) -> None:
    """Put the REPL body in the user namespace and register ``%aries`` (``%load_ext aries_kernel``)."""
    from aries_kernel.extension import install

    install(ip)


def unload_ipython_extension(ip: Any) -> None:
    """Remove the names the extension put in the namespace."""
    from aries_kernel.extension import uninstall

    uninstall(ip)
