"""The one rule for a setting that has an ``ARIES_*`` variable, and the Aries home.

The rule: ``$ARIES_X`` when set and not empty, else the traitlet setting (``c.AriesY.x``) when not empty, else
the default; a file or folder's default lies under the Aries home, ``~/.aries``, and a path has ``~`` expanded
wherever it came from. A value given for one call (a function's argument, a command-line flag) is not a
setting: the caller puts it first (``path or aries_path(...)``).

The home folder is looked up only when the default is needed, so a variable or a setting works where there is
none (some containers); without either, :func:`aries_home` raises RuntimeError, as :meth:`Path.home` does.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["aries_home", "aries_path", "aries_setting"]


def aries_home() -> Path:
    """``~/.aries``, the folder of the user's own Aries files; RuntimeError when there is no home folder."""
    return Path.home() / ".aries"


def aries_setting(variable: str, setting: str = "", default: str = "") -> str:
    """``$variable``, else ``setting``, else ``default`` (an empty variable or setting counts as unset)."""
    return os.environ.get(variable) or setting or default


def aries_path(variable: str, setting: str = "", default: str = "") -> Path:
    """:func:`aries_setting` for a path: ``$variable``, else ``setting``, else ``default`` under
    :func:`aries_home`; ``~`` expanded."""
    value = aries_setting(variable, setting)
    return Path(value).expanduser() if value else aries_home() / default
