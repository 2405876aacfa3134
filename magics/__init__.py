"""IPython magics for aries-kernel, shipped as ``aries_kernel.magics``.

``%aries`` is one line/cell magic whose first word picks a subcommand. Each subcommand lives in the module of
the part it drives (``index`` here, ``vault`` in :mod:`.vault`, ``model`` in :mod:`.model`, the agent's in
:mod:`.agent`) and registers itself with :func:`aries.subcommand`.
"""

from .aries import AriesMagics, status_section, subcommand

__all__ = ["AriesMagics", "subcommand", "status_section"]
