"""Race-free file access under the project root, for the agent's file tools.

Every path is opened relative to a directory handle of the root, one component at a time, each with
``O_NOFOLLOW`` and ``dir_fd`` of the folder before it. What a component is (file, folder, symlink) is therefore
decided at the moment it is opened, not at an earlier check, so a path swapped between a file and a symlink, or a
folder swapped for a symlink, cannot redirect a read or a write. A symlink on the way is followed only by reading
it and walking its target again beneath the root's handle (at most :data:`MAX_LINKS` of them, as the kernel
allows); a target that leads outside the root is refused. ``..`` pops back to the handle of the folder already
opened, never through the name ``..``.

Writes go to a temporary file in the target's folder (by ``dir_fd``), then ``os.replace`` by ``dir_fd`` onto the
name: the directory entry is replaced, whatever it is at that moment, so a write never goes through a symlink
and never into a hard-linked inode. Reads open only regular files, with ``O_NONBLOCK`` so a FIFO cannot block,
and read at most a limit.

The walk (:class:`FileWalk`) lists folders through their handles and never follows a symlink, to a file or a
folder. What this cannot stop: a process that renames a folder of the root to somewhere outside it while a call
holds that folder's handle (the handle moves with the folder); ``openat2(RESOLVE_BENEATH)`` would not stop that
either. Hard links inside the root to outside files are read like any file.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "MAX_LINKS",
    "FileWalk",
    "Found",
    "MissingPathError",
    "OutsideRootError",
    "RootPathError",
    "normalize",
    "read_bytes",
    "read_at",
    "require_real_folders",
    "resolve",
    "within_root",
    "write_bytes",
]

MAX_LINKS = 40  # symlinks followed while resolving one path, as Linux's own limit
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_CHUNK = 1 << 16


class RootPathError(ValueError):
    """A path a tool was given cannot be used (malformed, missing, the wrong kind); the message says why."""


class OutsideRootError(RootPathError):
    """A path leads outside the project root (``..``, an absolute path or a symlink)."""


class MissingPathError(RootPathError):
    """A path, or a folder on its way, does not exist."""


def normalize(root: Path, path: object) -> list[str]:
    """The components of ``path`` relative to ``root``, checked and with ``.`` and inner ``..`` folded.

    Refused with a message the model can act on: a non-string, an empty path, NUL bytes, backslashes, an
    absolute path outside the root, and ``..`` that climbs above the root. Symlinks are not looked at here.
    """
    if not isinstance(path, str):
        raise RootPathError(f"the path must be a string, not {type(path).__name__} ({path!r}).")
    if path.strip() == "":
        raise RootPathError("the path is empty; give a file path relative to the project root.")
    if "\0" in path:
        raise RootPathError(f"the path {path!r} contains a NUL byte; file names cannot.")
    if "\\" in path:
        raise RootPathError(
            f"the path {path!r} contains a backslash; separate folders with / (paths are POSIX here)."
        )
    try:
        os.fsencode(path)
    except UnicodeEncodeError as exc:
        raise RootPathError(
            f"the path {path!r} has a character that cannot be in a file name (position {exc.start})."
        ) from None
    text = os.path.expanduser(path) if path.startswith("~") else path
    if text.startswith("/"):
        text = within_root(root, text)
    parts: list[str] = []
    for part in text.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise OutsideRootError(
                    f"Refused: {path} is outside the project root {root} (it climbs out with '..'). "
                    "Only files inside the project root can be read or changed."
                )
            parts.pop()
            continue
        parts.append(part)
    return parts


def within_root(root: Path, absolute: str) -> str:
    """The part of an absolute path below the root (as given or resolved), refused when it is not below."""
    clean = os.path.normpath(absolute)
    for prefix in {os.path.abspath(root), os.path.realpath(root)}:
        if clean == prefix:
            return ""
        if clean.startswith(prefix.rstrip("/") + "/"):
            return clean[len(prefix.rstrip("/")) + 1 :]
    raise OutsideRootError(
        f"Refused: {absolute} is outside the project root {os.path.realpath(root)}. "
        "Only files inside the project root can be read or changed; give a path relative to it."
    )


@dataclass
class _Place:
    """Where a path ends: an open handle of its folder, that folder's components, and the final name."""

    dir_fd: int
    folder: list[str]
    name: str | None  # None: the path is the folder ``folder`` itself, and ``dir_fd`` its handle

    @property
    def rel(self) -> str:
        return "/".join([*self.folder, self.name] if self.name else self.folder)


def _open_root(root: Path) -> int:
    try:
        return os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise RootPathError(f"the project root {root} cannot be opened: {exc.strerror or exc}.") from exc


def _locate(root: Path, root_fd: int, path: str, *, create_folders: bool = False) -> _Place:
    """Walk ``path`` beneath ``root_fd``, following symlinks only to targets inside the root.

    Every folder is opened with ``O_NOFOLLOW`` from the handle of the one before; a final symlink is followed
    too, so the returned place names a non-symlink (or a name that does not exist yet). The caller closes
    ``dir_fd``.
    """
    pending = normalize(root, path)
    stack = [os.dup(root_fd)]
    try:
        with _reported(path):
            return _walk_parts(root, path, pending, stack, create_folders)
    finally:
        for fd in stack:
            os.close(fd)


@contextmanager
def _reported(path: str) -> Iterator[None]:
    """Any other OS error (a name too long, no permission) as a RootPathError naming the path."""
    try:
        yield
    except OSError as exc:
        raise RootPathError(f"{path}: {exc.strerror or exc}.") from None


def _walk_parts(root: Path, path: str, pending: list[str], stack: list[int], create: bool) -> _Place:
    """Consume ``pending`` from the folder ``stack[-1]``; ``stack`` holds the handles of the folders walked, and
    the one handed back in the place is taken off it."""
    folder: list[str] = []
    links = 0
    via = ""  # the last symlink followed, for the message
    while pending:
        part = pending.pop(0)
        if part == "..":  # only from a link's target: back to the folder handle already held
            if not folder:
                raise OutsideRootError(
                    f"Refused: {path} leads outside the project root {root} through a symlink{via}. "
                    "Only files inside the project root can be read or changed."
                )
            os.close(stack.pop())
            folder.pop()
            continue
        if part == ".":
            continue
        target = _link_target(part, stack[-1])
        if target is not None:
            links += 1
            if links > MAX_LINKS:
                raise RootPathError(f"{path}: too many levels of symlinks (a loop?).")
            link = "/".join([*folder, part])
            pending[:0] = _link_parts(root, path, link, target)
            via = f" ({link} -> {target})"
            continue
        if not pending:  # the final name: the caller opens it, with O_NOFOLLOW
            return _Place(stack.pop(), folder, part)
        stack.append(_open_folder(root, path, stack[-1], folder, part, create))
        folder.append(part)
    return _Place(stack.pop(), folder, None)


def _link_target(name: str, dir_fd: int) -> str | None:
    """What the symlink ``name`` points to, or None when ``name`` is not a symlink (or does not exist)."""
    try:
        return os.readlink(name, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.EINVAL, errno.ENOENT, errno.ENOTDIR):
            return None
        raise


def _link_parts(root: Path, path: str, link: str, target: str) -> list[str]:
    """A symlink's target as components to walk from the link's folder (absolute targets: from the root)."""
    if "\0" in target:
        raise RootPathError(f"{path}: the symlink {link} has a malformed target.")
    if not target.startswith("/"):
        return [part for part in target.split("/") if part not in ("", ".")]
    for prefix in {os.path.abspath(root), os.path.realpath(root)}:
        clean = os.path.normpath(target)
        if clean == prefix or clean.startswith(prefix.rstrip("/") + "/"):
            # Walk it from the root: pop back up with one '..' per folder of the link's own location.
            ups = [".."] * link.count("/")
            return ups + [part for part in clean[len(prefix) :].split("/") if part]
    raise OutsideRootError(
        f"Refused: {path} leads outside the project root {os.path.realpath(root)} through a symlink "
        f"({link} -> {target}). Only files inside the project root can be read or changed."
    )


def _open_folder(root: Path, path: str, dir_fd: int, folder: list[str], part: str, create: bool) -> int:
    shown = "/".join([*folder, part])
    for _ in range(2):
        try:
            return os.open(part, _DIR_FLAGS, dir_fd=dir_fd)
        except FileNotFoundError:
            if not create:
                raise MissingPathError(f"{path} does not exist (no folder {shown}).") from None
            try:
                os.mkdir(part, 0o777, dir_fd=dir_fd)
            except FileExistsError:
                pass  # made by someone else meanwhile; open it (O_NOFOLLOW still decides what it is)
        except NotADirectoryError:
            raise RootPathError(f"{path}: {shown} is a file, not a folder.") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # swapped for a symlink since we looked: refuse rather than chase
                raise RootPathError(
                    f"{path}: {shown} changed while it was being opened; try again."
                ) from None
            raise RootPathError(f"{path}: cannot open folder {shown}: {exc.strerror or exc}.") from None
    raise RootPathError(f"{path}: cannot create folder {shown}.")


def resolve(root: Path, path: str) -> str:
    """``path`` relative to the root after following symlinks that stay inside it ("" for the root)."""
    root_fd = _open_root(root)
    try:
        place = _locate(root, root_fd, path)
        os.close(place.dir_fd)
        return place.rel
    finally:
        os.close(root_fd)


def require_real_folders(root: Path, path: str) -> None:
    """Refuse when any existing component of ``path`` is a symlink (for state folders such as ``.aries``)."""
    root_fd = _open_root(root)
    fds = [root_fd]
    try:
        walked: list[str] = []
        for part in normalize(root, path):
            walked.append(part)
            if _link_target(part, fds[-1]) is not None:
                raise OutsideRootError(
                    f"Refused: {'/'.join(walked)} is a symlink; aries-kernel keeps its state only in real "
                    "folders of the project root. Replace the symlink with a folder."
                )
            try:
                fds.append(os.open(part, _DIR_FLAGS, dir_fd=fds[-1]))
            except FileNotFoundError:
                return
            except OSError as exc:
                raise RootPathError(f"{'/'.join(walked)} is not a folder: {exc.strerror or exc}.") from None
    finally:
        for fd in fds:
            os.close(fd)


def read_at(dir_fd: int, name: str, limit: int, shown: str) -> bytes:
    """The bytes of the regular file ``name`` in the folder ``dir_fd``, refused past ``limit`` bytes."""
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        raise MissingPathError(f"{shown} does not exist.") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise RootPathError(
                f"{shown} changed into a symlink while it was being opened; try again."
            ) from None
        raise RootPathError(f"{shown} cannot be read: {exc.strerror or exc}.") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise RootPathError(f"{shown} is a folder; use Glob to list it.")
        if not stat.S_ISREG(info.st_mode):
            raise RootPathError(f"{shown} is not a regular file ({_kind(info.st_mode)}); it is not read.")
        if info.st_size > limit:
            raise RootPathError(
                f"{shown} is {info.st_size:,} bytes, over the {limit:,}-byte limit for this tool."
            )
        chunks = []
        size = 0
        while size <= limit:  # the file may grow after fstat: read at most limit + 1 bytes
            chunk = os.read(fd, min(_CHUNK, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise RootPathError(f"{shown} grew past the {limit:,}-byte limit for this tool while being read.")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a file"


def read_bytes(root: Path, path: str, limit: int) -> tuple[bytes, str]:
    """The bytes of the regular file at ``path`` (at most ``limit``) and its real path relative to the root."""
    root_fd = _open_root(root)
    try:
        place = _locate(root, root_fd, path)
        try:
            if place.name is None:
                raise RootPathError(f"{path} is a folder; use Glob to list it.")
            return read_at(place.dir_fd, place.name, limit, path), place.rel
        finally:
            os.close(place.dir_fd)
    finally:
        os.close(root_fd)


def write_bytes(root: Path, path: str, data: bytes) -> tuple[bool, str]:
    """Write ``data`` to ``path`` atomically (creating folders), returning (whether it existed, real path).

    The new content goes to a temporary file in the same folder, then replaces the name by ``dir_fd``: if the
    name became a symlink meanwhile, the link itself is replaced, never its target. An existing file keeps its
    permission bits.
    """
    root_fd = _open_root(root)
    try:
        place = _locate(root, root_fd, path, create_folders=True)
        try:
            if place.name is None:
                raise RootPathError(f"{path} is a folder; give a file path.")
            return _replace(place, data, path), place.rel
        finally:
            os.close(place.dir_fd)
    finally:
        os.close(root_fd)


def _replace(place: _Place, data: bytes, shown: str) -> bool:
    assert place.name is not None
    try:
        info = os.stat(place.name, dir_fd=place.dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise RootPathError(f"{shown} cannot be written: {exc.strerror or exc}.") from None
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise RootPathError(f"{shown} is a folder; give a file path.")
    temp = f".{secrets.token_hex(6)}.aries-tmp"
    with _reported(shown):
        fd = os.open(temp, _TEMP_FLAGS, 0o666, dir_fd=place.dir_fd)
    try:
        try:
            if info is not None and stat.S_ISREG(info.st_mode):
                os.fchmod(fd, stat.S_IMODE(info.st_mode))
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(temp, place.name, src_dir_fd=place.dir_fd, dst_dir_fd=place.dir_fd)
    except BaseException as exc:
        try:
            os.unlink(temp, dir_fd=place.dir_fd)
        except FileNotFoundError:
            pass
        if isinstance(exc, IsADirectoryError):  # became a folder after the stat above
            raise RootPathError(f"{shown} is a folder; give a file path.") from None
        if isinstance(exc, OSError):
            raise RootPathError(f"{shown} cannot be written: {exc.strerror or exc}.") from None
        raise
    return info is not None


@dataclass(frozen=True)
class Found:
    """A regular file met by :class:`FileWalk`: its path relative to the root, the handle of its folder (open
    only until the walk moves on), its name there, size and modification time."""

    rel: str
    dir_fd: int
    name: str
    size: int
    mtime: float


@dataclass
class FileWalk:
    """The regular files beneath ``start`` (a path relative to the root), never through a symlink.

    ``skip_folder(rel, name)`` prunes folders; ``max_depth`` bounds how many folders deep it goes below
    ``start`` and ``max_entries`` how many directory entries it looks at. ``notes`` says afterwards what was cut.
    Files come sorted by name within a folder, before its subfolders.
    """

    root: Path
    start: str = "."
    skip_folder: Callable[[str, str], bool] = lambda rel, name: False
    max_depth: int = 64
    max_entries: int = 200_000
    notes: list[str] = field(default_factory=list)
    seen: int = 0

    def __iter__(self) -> Iterator[Found]:
        root_fd = _open_root(self.root)
        try:
            place = _locate(self.root, root_fd, self.start)
        finally:
            os.close(root_fd)
        try:
            if place.name is not None:
                try:
                    info = os.stat(place.name, dir_fd=place.dir_fd, follow_symlinks=False)
                except FileNotFoundError:
                    raise MissingPathError(f"{self.start} does not exist.") from None
                if not stat.S_ISDIR(info.st_mode):
                    if stat.S_ISREG(info.st_mode):
                        yield Found(place.rel, place.dir_fd, place.name, info.st_size, info.st_mtime)
                    return
                top = _open_folder(self.root, self.start, place.dir_fd, place.folder, place.name, False)
            else:
                top = os.dup(place.dir_fd)
        finally:
            os.close(place.dir_fd)
        yield from self._folders(top, place.rel)

    def _folders(self, top: int, top_rel: str) -> Iterator[Found]:
        # A stack of (folder handle, its path, subfolder names still to visit): handles held = depth.
        stack: list[tuple[int, str, list[str]]] = []
        child, child_rel = top, top_rel
        try:
            while True:
                try:
                    subfolders = yield from self._list(child, child_rel)
                except BaseException:
                    os.close(child)
                    raise
                if subfolders and len(stack) >= self.max_depth:
                    self._note(f"folders more than {self.max_depth} levels deep were not searched")
                    subfolders = []
                stack.append((child, child_rel, subfolders))
                child = -1
                while stack and child < 0:
                    fd, rel, pending = stack[-1]
                    if not pending:
                        os.close(stack.pop()[0])
                        continue
                    name = pending.pop(0)
                    child_rel = f"{rel}/{name}" if rel else name
                    try:
                        child = os.open(name, _DIR_FLAGS, dir_fd=fd)
                    except OSError:  # gone, swapped for a symlink or unreadable since listed: not followed
                        continue
                if child < 0:
                    return
        finally:
            for fd, _, _ in stack:
                os.close(fd)

    def _list(self, fd: int, rel: str) -> Iterator[Found]:
        """Yield the folder's regular files; return its subfolders (not symlinks, not skipped)."""
        folders: list[str] = []
        if self.seen >= self.max_entries:
            return folders
        try:
            with os.scandir(fd) as listing:
                entries = sorted(listing, key=lambda entry: entry.name)
        except OSError:
            self._note(f"{rel or '.'} could not be listed")
            return folders
        for entry in entries:
            self.seen += 1
            if self.seen > self.max_entries:
                self._note(f"stopped after {self.max_entries:,} entries")
                return []
            child_rel = f"{rel}/{entry.name}" if rel else entry.name
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode):
                if not self.skip_folder(child_rel, entry.name):
                    folders.append(entry.name)
            elif stat.S_ISREG(info.st_mode):
                yield Found(child_rel, fd, entry.name, info.st_size, info.st_mtime)
        return folders

    def _note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)
