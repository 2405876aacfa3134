"""Who the user is: the one answer every part of Aries uses (a note's author, learned state, the spend ledger).

``$JUPYTERHUB_USER`` first: a hub's spawner sets it to the member's hub name, while the process often runs as
one shared system login. Then ``$ARIES_USER``, then the login name (``uid<n>`` when the system has none). The
name is kept as given for display (an author, ``%aries status``), with control characters (a NUL, a newline:
no database text column or front-matter line holds them) taken out and at most :data:`MAX_LENGTH` characters.
It is only ever stored as a value (a bound parameter, a quoted YAML string), never used as a file or schema
name, so punctuation, spaces and non-ASCII letters are kept.
"""

from __future__ import annotations

import getpass
import os
import re

from aries_kernel.paths import aries_setting

__all__ = ["MAX_LENGTH", "current_user", "user_and_source"]

MAX_LENGTH = 200  # the notes table keeps author at most this long
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")
_SOURCES = ("JUPYTERHUB_USER", "ARIES_USER")


def user_and_source() -> tuple[str, str]:
    """``(name, where it came from)``: ``$JUPYTERHUB_USER``, else ``$ARIES_USER``, else the login name; a
    variable that is empty once cleaned counts as unset."""
    for variable in _SOURCES:
        name = _clean(aries_setting(variable))
        if name:
            return name, f"${variable}"
    try:
        name = _clean(getpass.getuser())
    except (KeyError, OSError):  # a container user with no passwd entry and no $USER
        name = ""
    return (name, "the login name") if name else (f"uid{os.getuid()}", "the user id (no login name)")


def current_user() -> str:
    """The user's name (see the module docstring)."""
    return user_and_source()[0]


def _clean(name: str) -> str:
    return _CONTROL.sub(" ", name).strip()[:MAX_LENGTH].strip()
