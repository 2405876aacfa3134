"""The learning export: each user's learned state kept beside the SQLite file, so a rebuilt index gets it back.

:func:`read_export` reads it like the index file is checked (never through a symlink, never waiting on a FIFO,
a regular file of at most :data:`LEARNING_EXPORT_MAX_BYTES`, a JSON object with a ``users`` object) and puts
anything else aside (:class:`BadExport`); :func:`write_export` merges one user's state into it atomically.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import time
from pathlib import Path
from typing import Any

from aries_kernel import rootfs

__all__ = ["LEARNING_EXPORT_EVERY", "LEARNING_EXPORT_MAX_BYTES", "BadExport", "read_export", "write_export"]

# Changes to learned state between two automatic exports (each session's end exports too).
LEARNING_EXPORT_EVERY = 50
# The most of a learning export that is read (and parsed: JSON takes several times its size in memory). An export
# holds one row per Q-value, access and co-occurrence pair (about 60 bytes each): a vault of 10,000 notes used
# daily for years exports a few MiB, so a file over this is not an export this vault wrote.
LEARNING_EXPORT_MAX_BYTES = 64 * 1024 * 1024
# An export is opened without following a symlink and without waiting for a writer (a FIFO in its place).
_EXPORT_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class BadExport(Exception):
    """The learning export is there but is not one this vault can use; the message says why."""


def read_export(path: Path) -> dict[str, Any] | None:
    """The learning export at ``path``, or None when there is none.

    Any other thing there than a regular file of at most :data:`LEARNING_EXPORT_MAX_BYTES` holding a JSON object
    with a ``users`` object is renamed aside (``<name>.bad-<ns>``, kept for inspection) and :class:`BadExport`
    raised, naming the file, the reason and where it was kept, so nothing blocks and the next save writes a good
    export in its place."""
    try:
        fd = os.open(path, _EXPORT_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as exc:  # ELOOP: a symlink; ENXIO: a socket; EACCES: no permission
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            return None
        reason = (
            f"could not be opened ({exc.strerror or exc})"
            if stat.S_ISREG(mode)
            else f"is a {rootfs.kind(mode)}, not a regular file"
        )
        raise _aside(path, reason) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _aside(path, f"is a {rootfs.kind(info.st_mode)}, not a regular file")
        if info.st_size > LEARNING_EXPORT_MAX_BYTES:
            raise _aside(
                path,
                f"is {info.st_size:,} bytes, over the {LEARNING_EXPORT_MAX_BYTES:,}-byte limit of an export",
            )
        raw = rootfs.read_open(fd, LEARNING_EXPORT_MAX_BYTES)  # it may have grown since the fstat
    finally:
        os.close(fd)
    if len(raw) > LEARNING_EXPORT_MAX_BYTES:
        raise _aside(path, f"grew over the {LEARNING_EXPORT_MAX_BYTES:,}-byte limit while read")
    try:
        export = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, RecursionError, ValueError) as exc:
        raise _aside(path, f"is not valid JSON ({type(exc).__name__}: {exc})") from None
    if not isinstance(export, dict) or not isinstance(export.get("users"), dict):
        raise _aside(path, "is not a learning export (no 'users' object)")
    return export


def write_export(path: Path, user: str, data: dict[str, list[list[Any]]]) -> str | None:
    """Put ``user``'s learned state ``data`` into the export at ``path`` (other users' entries kept), atomically;
    the caller holds the folder's lock. Returns what was wrong with the file found there (kept aside, its other
    users' entries lost), else None.

    The write goes to a new temporary file (``O_EXCL | O_NOFOLLOW``) and ``os.replace`` puts it in place,
    replacing whatever name is there (a symlink is replaced, never written through)."""
    problem = None
    try:
        export = read_export(path) or {}
    except BadExport as exc:
        problem = f"The learning export could not be merged: {exc}"
        export = {}
    users = dict(export.get("users") or {})
    users[user] = data
    export = {"format": "aries-vault-learning", "version": 1, "exported_at": time.time()}
    export["users"] = users
    temp = path.with_name(f".{path.name}.{os.getpid()}-{time.time_ns()}.tmp")
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with open(fd, "w", encoding="utf-8") as handle:
            json.dump(export, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
    return problem


def _aside(path: Path, reason: str) -> BadExport:
    """Rename the unusable export aside (a symlink itself, never its target) and say so."""
    aside = path.with_name(f"{path.name}.bad-{time.time_ns()}")
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return BadExport(f"its export {path} {reason}; it was gone when it was to be kept aside.")
    except OSError as exc:
        return BadExport(f"its export {path} {reason}; it could not be kept aside ({exc.strerror or exc}).")
    return BadExport(f"its export {path} {reason}; it was kept aside as {aside.name}.")
