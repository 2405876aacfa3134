"""Which notebook this kernel serves: the file jupyter_server named when it started the kernel.

jupyter_server starts a notebook's kernel with ``JPY_SESSION_NAME`` set to the notebook's path, and ipykernel
copies it into the namespace as ``__session__``. Frontends without a notebook (a console, a Kernel Gateway
client) set neither, or a name that is not an ``.ipynb`` file: then there is no notebook.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["notebook_path"]


def notebook_path(shell: Any) -> Path | None:
    """The ``.ipynb`` file of the notebook ``shell`` serves (absolute), or None when it serves none."""
    namespace = getattr(shell, "user_ns", None) or {}
    name = namespace.get("__session__") or os.environ.get("JPY_SESSION_NAME") or ""
    if not isinstance(name, str) or not name.endswith(".ipynb"):
        return None
    path = Path(name).expanduser()
    return path if path.is_absolute() else (Path.cwd() / path)
