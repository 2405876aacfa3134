"""Race-free file access beneath a root folder: the one way aries-kernel opens, reads, writes and walks the files
of a project (the agent's file tools and the code index both go through it).

Every path is opened relative to a directory handle of the root, one component at a time, each with
``O_NOFOLLOW`` and ``dir_fd`` of the folder before it. What a component is (file, folder, symlink) is therefore
decided at the moment it is opened, not at an earlier check, so a path swapped between a file and a symlink, or a
folder swapped for a symlink, cannot redirect a read or a write. A symlink on the way is followed only by reading
it and walking its target again beneath the root's handle (at most :data:`MAX_LINKS` of them, as the kernel
allows); a target that leads outside the root is refused. ``..`` pops back to the handle of the folder already
opened, never through the name ``..``.

Paths come in two kinds. A path someone typed (a tool argument) is checked first by :func:`normalize`: absolute
paths inside the root and ``~`` are accepted, backslashes and NUL bytes refused. A *walked* path (``walked=True``:
one a walk of the root produced, as the index's) is taken as the name it is, and a symlinked folder among its own
components is refused rather than followed, as the walks do not follow folder links (so nothing is seen twice).
With ``follow_links=False`` (the vault's rule) no symlink is followed at all: one on the way is refused, and a
final one is handed to the caller as the name it is, to be opened with ``O_NOFOLLOW`` or replaced.

Reads (:func:`read_regular`, :func:`read_at`) open only regular files, with ``O_NONBLOCK`` so a FIFO cannot
block, and read at most ``limit + 1`` bytes whatever ``stat`` said, so a caller sees that a file is over its
limit without reading all of it. Writes (:func:`write_bytes`) go to a temporary file in the target's folder (by
``dir_fd``), then ``os.replace`` by ``dir_fd`` onto the name: the directory entry is replaced, whatever it is at
that moment, so a write never goes through a symlink and never into a hard-linked inode; :func:`move` renames
by the handles of both folders the same way. The walk
(:func:`walk_folders`, under the one project walk of :mod:`aries_kernel.codebase.files`) lists folders through
their handles and never walks into a symlink.

What this cannot stop: a process that renames a folder of the root to somewhere outside it while a call holds
that folder's handle (the handle moves with the folder); ``openat2(RESOLVE_BENEATH)`` would not stop that
either. Hard links inside the root to outside files are read like any file.

Errors (all are ``OSError``, so a caller that handles the system's errors handles these; each message names the
path and says what to do)::

    RootPathError                 a path that is not opened, read or written
    ├── RefusedPathError          refused by the rules above: malformed, a folder, not a regular file, a symlink
    │   └── OutsideRootError      that leads outside the root, or a path that does (``..``, absolute)
    └── FailedPathError           the system refused it (``errno`` and ``strerror`` say why): it may change
        └── MissingPathError      the path, or a folder on its way, does not exist
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "MAX_LINKS",
    "FailedPathError",
    "Folder",
    "MissingPathError",
    "OutsideRootError",
    "Place",
    "RefusedPathError",
    "RootPathError",
    "exists",
    "kind",
    "located",
    "move",
    "normalize",
    "read_at",
    "read_open",
    "read_regular",
    "read_stat_at",
    "remove",
    "replace_at",
    "require_real_folders",
    "resolve",
    "walk_folders",
    "within_root",
    "write_bytes",
]

MAX_LINKS = 40  # symlinks followed while resolving one path, as Linux's own limit
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_CHUNK = 1 << 16


class RootPathError(OSError):
    """A path beneath the root that is not opened, read or written; the message names it and says why."""

    def __str__(self) -> str:
        # The message, even where errno and strerror are set (OSError would show "[Errno n] ..." instead).
        return str(self.args[0]) if self.args else ""


class RefusedPathError(RootPathError):
    """Refused by rule: a malformed path, a folder, not a regular file, a symlinked folder on a walked path."""


class OutsideRootError(RefusedPathError):
    """A path leads outside the root (``..``, an absolute path or a symlink)."""


class FailedPathError(RootPathError):
    """The system refused the path (no permission, a file where a folder should be...); ``errno`` and
    ``strerror`` are the system's, so a caller can tell a lasting refusal from one that may change."""


class MissingPathError(FailedPathError):
    """A path, or a folder on its way, does not exist."""


def _failed(cls: type[FailedPathError], message: str, cause: OSError) -> FailedPathError:
    error = cls(message)
    error.errno, error.strerror = cause.errno, cause.strerror
    return error


def kind(mode: int) -> str:
    """What a ``stat`` mode is, in words: "folder", "FIFO", "socket", "character device", ..."""
    kinds = (
        (stat.S_ISREG, "regular file"),
        (stat.S_ISDIR, "folder"),
        (stat.S_ISFIFO, "FIFO"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISLNK, "symlink"),
    )
    return next((name for test, name in kinds if test(mode)), "special file")


def _outside(path: str, how: str) -> OutsideRootError:
    return OutsideRootError(
        f"Refused: {path} {how}. Only files inside the project root can be read or changed."
    )


def _not_regular(shown: str, mode: int) -> RefusedPathError:
    if stat.S_ISDIR(mode):
        return RefusedPathError(f"{shown} is a folder; give a file path.")
    return RefusedPathError(f"{shown} is not a regular file (a {kind(mode)}); it is not read.")


def normalize(root: Path, path: object) -> list[str]:
    """The components of a typed ``path`` relative to ``root``, checked and with ``.`` and inner ``..`` folded.

    Refused with a message the model can act on: a non-string, an empty path, NUL bytes, backslashes, an
    absolute path outside the root, and ``..`` that climbs above the root. Symlinks are not looked at here.
    """
    if not isinstance(path, str):
        raise RefusedPathError(f"the path must be a string, not {type(path).__name__} ({path!r}).")
    if path.strip() == "":
        raise RefusedPathError("the path is empty; give a file path relative to the project root.")
    if "\0" in path:
        raise RefusedPathError(f"the path {path!r} contains a NUL byte; file names cannot.")
    if "\\" in path:
        raise RefusedPathError(
            f"the path {path!r} contains a backslash; separate folders with / (paths are POSIX here)."
        )
    try:
        os.fsencode(path)
    except UnicodeEncodeError as exc:
        raise RefusedPathError(
            f"the path {path!r} has a character that cannot be in a file name (position {exc.start})."
        ) from None
    text = os.path.expanduser(path) if path.startswith("~") else path
    if text.startswith("/"):
        text = within_root(root, text)
    return _fold(root, text, path)


def _fold(root: Path, text: str, shown: str) -> list[str]:
    """The components of the root-relative ``text``, without ``.`` and with ``..`` folded into its folder."""
    parts: list[str] = []
    for part in text.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise _outside(shown, f"is outside the project root {root} (it climbs out with '..')")
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
class Place:
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
        cls = MissingPathError if isinstance(exc, FileNotFoundError) else FailedPathError
        raise _failed(cls, f"the project root {root} cannot be opened: {exc.strerror or exc}.", exc) from exc


@contextmanager
def located(
    root: Path,
    path: str,
    *,
    walked: bool = False,
    create_folders: bool = False,
    follow_links: bool = True,
) -> Iterator[Place]:
    """The place of ``path`` beneath the root: the one way this module finds a path (see the module docstring).

    Every folder is opened with ``O_NOFOLLOW`` from the handle of the one before; a final symlink is followed
    too, so the place names a non-symlink (or a name that does not exist yet), unless ``follow_links`` is False:
    then any symlink on the way is refused and a final one is the place's name. Its handle is closed on exit.
    """
    pending = _fold(root, path, path) if walked else normalize(root, path)
    stack = [_open_root(root)]
    try:
        with _reported(path):
            place = _walk_parts(root, path, pending, stack, walked, create_folders, follow_links)
    finally:
        for fd in stack:
            os.close(fd)
    try:
        yield place
    finally:
        os.close(place.dir_fd)


@contextmanager
def _reported(path: str) -> Iterator[None]:
    """Any other OS error (a name too long, no permission) as a FailedPathError naming the path."""
    try:
        yield
    except RootPathError:
        raise
    except OSError as exc:
        raise _failed(FailedPathError, f"{path}: {exc.strerror or exc}.", exc) from None


def _walk_parts(
    root: Path, path: str, pending: list[str], stack: list[int], walked: bool, create: bool, follow: bool
) -> Place:
    """Consume ``pending`` from the folder ``stack[-1]``; ``stack`` holds the handles of the folders walked, and
    the one handed back in the place is taken off it."""
    folder: list[str] = []
    given = len(pending)  # components of the path itself still pending (a link's target goes before them)
    links = 0
    via = ""  # the last symlink followed, for the message
    while pending:
        own = len(pending) == given  # a component of the path itself, not of a link's target
        given -= own
        part = pending.pop(0)
        if part == "..":  # only from a link's target: back to the folder handle already held
            if not folder:
                raise _outside(path, f"leads outside the project root {root} through a symlink{via}")
            os.close(stack.pop())
            folder.pop()
            continue
        if part == ".":
            continue
        target = _link_target(part, stack[-1])
        if target is not None and not follow and not pending:
            # The link itself is the name: the caller opens it with O_NOFOLLOW or replaces it, never follows it.
            return Place(stack.pop(), folder, part)
        if target is not None:
            link = "/".join([*folder, part])
            if not follow:
                raise RefusedPathError(
                    f"Refused: {path}: {link!r} is not a plain folder (a symlink, which is not followed here)."
                )
            if walked and own and pending:
                raise RefusedPathError(
                    f"Refused: {path} passes through the symlinked folder {link}, which walks do not follow."
                )
            links += 1
            if links > MAX_LINKS:
                raise RefusedPathError(f"{path}: too many levels of symlinks (a loop?).")
            pending[:0] = _link_parts(root, path, link, target)
            via = f" ({link} -> {target})"
            continue
        if not pending:  # the final name: the caller opens it, with O_NOFOLLOW
            return Place(stack.pop(), folder, part)
        stack.append(_open_folder(path, stack[-1], folder, part, create))
        folder.append(part)
    return Place(stack.pop(), folder, None)


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
        raise RefusedPathError(f"{path}: the symlink {link} has a malformed target.")
    if not target.startswith("/"):
        return [part for part in target.split("/") if part not in ("", ".")]
    for prefix in {os.path.abspath(root), os.path.realpath(root)}:
        clean = os.path.normpath(target)
        if clean == prefix or clean.startswith(prefix.rstrip("/") + "/"):
            # Walk it from the root: pop back up with one '..' per folder of the link's own location.
            ups = [".."] * link.count("/")
            return ups + [part for part in clean[len(prefix) :].split("/") if part]
    raise _outside(
        path,
        f"leads outside the project root {os.path.realpath(root)} through a symlink ({link} -> {target})",
    )


def _open_folder(path: str, dir_fd: int, folder: list[str], part: str, create: bool) -> int:
    shown = "/".join([*folder, part])
    for _ in range(2):
        try:
            return os.open(part, _DIR_FLAGS, dir_fd=dir_fd)
        except FileNotFoundError as exc:
            if not create:
                raise _failed(MissingPathError, f"{path} does not exist (no folder {shown}).", exc) from None
            try:
                os.mkdir(part, 0o777, dir_fd=dir_fd)
            except FileExistsError:
                pass  # made by someone else meanwhile; open it (O_NOFOLLOW still decides what it is)
        except NotADirectoryError as exc:
            raise _failed(FailedPathError, f"{path}: {shown} is a file, not a folder.", exc) from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # swapped for a symlink since we looked: refuse rather than chase
                raise RefusedPathError(
                    f"{path}: {shown} changed while it was being opened; try again."
                ) from None
            raise _failed(
                FailedPathError, f"{path}: cannot open folder {shown}: {exc.strerror or exc}.", exc
            ) from None
    raise FailedPathError(f"{path}: cannot create folder {shown}.")


def resolve(root: Path, path: str) -> str:
    """``path`` relative to the root after following symlinks that stay inside it ("" for the root)."""
    with located(root, path) as place:
        return place.rel


def exists(root: Path, path: str, *, walked: bool = False, follow_links: bool = True) -> bool:
    """Whether ``path`` names anything beneath the root (with ``follow_links=False``, a final symlink counts as
    itself); a missing folder on the way is False, a refused path raises."""
    try:
        with located(root, path, walked=walked, follow_links=follow_links) as place:
            if place.name is None:
                return True
            os.stat(place.name, dir_fd=place.dir_fd, follow_symlinks=False)
            return True
    except (MissingPathError, FileNotFoundError):
        return False


def require_real_folders(root: Path, path: str) -> None:
    """Refuse when any existing component of ``path`` is a symlink (for state folders such as ``.aries``)."""
    fds = [_open_root(root)]
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
                raise _failed(
                    FailedPathError, f"{'/'.join(walked)} is not a folder: {exc.strerror or exc}.", exc
                ) from None
    finally:
        for fd in fds:
            os.close(fd)


def read_regular(root: Path, path: str, limit: int, *, walked: bool = False) -> tuple[bytes, str]:
    """The bytes of the regular file at ``path`` beneath ``root``, at most ``limit + 1`` of them (so a caller
    sees that a file is over the limit without reading all of it), and its real path relative to the root.

    ``walked``: ``path`` came from a walk of the root (see the module docstring).
    """
    with located(Path(root), path, walked=walked) as place:
        if place.name is None:
            raise RefusedPathError(f"{path} is a folder; give a file path.")
        return read_at(place.dir_fd, place.name, limit, path), place.rel


def read_at(dir_fd: int, name: str, limit: int, shown: str) -> bytes:
    """The bytes of the regular file ``name`` in the folder ``dir_fd``, at most ``limit + 1`` of them."""
    return read_stat_at(dir_fd, name, limit, shown)[0]


def read_stat_at(dir_fd: int, name: str, limit: int, shown: str) -> tuple[bytes, os.stat_result]:
    """As :func:`read_at`, with the ``fstat`` of the file read (so size and time belong to the bytes)."""
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        raise _unopened(dir_fd, name, shown, exc) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _not_regular(shown, info.st_mode)
        return read_open(fd, limit), info
    finally:
        os.close(fd)


def read_open(fd: int, limit: int) -> bytes:
    """At most ``limit + 1`` bytes of the open file ``fd`` from where it stands: the file may have grown since
    any stat, so no more than this is read whatever its size, and a caller sees that it is over the limit."""
    chunks = []
    left = limit + 1
    while left > 0:
        chunk = os.read(fd, min(_CHUNK, left))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _unopened(dir_fd: int, name: str, shown: str, exc: OSError) -> RootPathError:
    """Why the final name of a path did not open, as the error to raise."""
    if exc.errno == errno.ELOOP:
        return RefusedPathError(f"{shown} changed into a symlink while it was being opened; try again.")
    try:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except OSError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode) and not stat.S_ISLNK(mode):
        return _not_regular(shown, mode)  # a socket or a device that refuses to open
    if isinstance(exc, FileNotFoundError):
        return _failed(MissingPathError, f"{shown} does not exist.", exc)
    return _failed(FailedPathError, f"{shown} cannot be read: {exc.strerror or exc}.", exc)


def write_bytes(root: Path, path: str, data: bytes) -> tuple[bool, str]:
    """Write ``data`` to ``path`` atomically (creating folders), returning (whether it existed, real path).

    The new content goes to a temporary file in the same folder, then replaces the name by ``dir_fd``: if the
    name became a symlink meanwhile, the link itself is replaced, never its target. An existing file keeps its
    permission bits.
    """
    with located(root, path, create_folders=True) as place:
        if place.name is None:
            raise RefusedPathError(f"{path} is a folder; give a file path.")
        return replace_at(place.dir_fd, place.name, data, path), place.rel


def replace_at(dir_fd: int, name: str, data: bytes, shown: str) -> bool:
    """Replace the name ``name`` in the folder ``dir_fd`` with a new file holding ``data`` (as
    :func:`write_bytes` does), returning whether something was there."""
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise _failed(FailedPathError, f"{shown} cannot be written: {exc.strerror or exc}.", exc) from None
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise RefusedPathError(f"{shown} is a folder; give a file path.")
    temp = f".{secrets.token_hex(6)}.aries-tmp"
    with _reported(shown):
        fd = os.open(temp, _TEMP_FLAGS, 0o666, dir_fd=dir_fd)
    try:
        try:
            if info is not None and stat.S_ISREG(info.st_mode):
                os.fchmod(fd, stat.S_IMODE(info.st_mode))
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException as exc:
        try:
            os.unlink(temp, dir_fd=dir_fd)
        except FileNotFoundError:
            pass
        if isinstance(exc, IsADirectoryError):  # became a folder after the stat above
            raise RefusedPathError(f"{shown} is a folder; give a file path.") from None
        if isinstance(exc, OSError):
            raise _failed(
                FailedPathError, f"{shown} cannot be written: {exc.strerror or exc}.", exc
            ) from None
        raise
    return info is not None


def remove(root: Path, path: str, *, walked: bool = False) -> bool:
    """Unlink the file ``path`` beneath the root by its folder's handle (a final symlink is removed itself, never
    its target); returns whether something was there. A folder is refused."""
    try:
        with located(root, path, walked=walked, follow_links=False) as place:
            if place.name is None:
                raise RefusedPathError(f"{path} is a folder; give a file path.")
            with _reported(path):
                try:
                    os.unlink(place.name, dir_fd=place.dir_fd)
                except FileNotFoundError:
                    return False
                except IsADirectoryError:
                    raise RefusedPathError(f"{path} is a folder; give a file path.") from None
            return True
    except MissingPathError:
        return False


def move(root: Path, src: str, dst: str, *, walked: bool = False, follow_links: bool = True) -> str:
    """Rename ``src`` to ``dst`` beneath the root (folders of ``dst`` created), by the handles of both folders,
    so the entry renamed and the one replaced are the names found, whatever they are; returns ``dst``'s real
    path relative to the root."""
    with (
        located(root, src, walked=walked, follow_links=follow_links) as source,
        located(root, dst, walked=walked, follow_links=follow_links, create_folders=True) as target,
    ):
        if source.name is None or target.name is None:
            raise RefusedPathError(f"{src} -> {dst}: a folder's own path; give file paths.")
        with _reported(src):
            os.replace(source.name, target.name, src_dir_fd=source.dir_fd, dst_dir_fd=target.dir_fd)
        return target.rel


@dataclass
class Folder:
    """A folder met by :func:`walk_folders`: its handle (open until the walk moves on), its path relative to the
    root, how deep it is below where the walk started, and its entries sorted by name. ``error`` says why it
    could not be opened or listed (it then has no entries and no handle). The walk goes next into the names of
    subfolders the caller appends to ``enter`` before it asks for the next folder."""

    fd: int
    rel: str
    depth: int
    entries: list[os.DirEntry[str]]
    error: OSError | None = None
    enter: list[str] = field(default_factory=list)


def walk_folders(root: Path, start: str = "") -> Iterator[Folder]:
    """The folders of ``root``, depth first, from ``start`` (a walked folder path, ``""`` for the root) into the
    subfolders each caller enters (see :class:`Folder`), each opened by handle with ``O_NOFOLLOW``: a symlink is
    never walked into, and a folder swapped for one after it was listed is not followed."""
    try:
        if start:
            with located(root, start, walked=True) as place:
                top = os.open(place.name or ".", _DIR_FLAGS, dir_fd=place.dir_fd)
        else:
            top = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        yield Folder(-1, start, 0, [], exc)
        return
    yield from _walk_from(top, start)


def _walk_from(top: int, top_rel: str) -> Iterator[Folder]:
    # The folders with subfolders still to enter, each with its handle open: handles held = depth.
    stack: list[Folder] = []
    try:
        folder: Folder | None = _listed(top, top_rel, 0)
        while folder is not None:
            if folder.error is None:
                stack.append(folder)
            yield folder
            folder = None
            while stack and folder is None:
                parent = stack[-1]
                if not parent.enter:
                    os.close(stack.pop().fd)
                    continue
                name = parent.enter.pop(0)
                rel = f"{parent.rel}/{name}" if parent.rel else name
                try:
                    fd = os.open(name, _DIR_FLAGS, dir_fd=parent.fd)
                except OSError as exc:  # gone, swapped for a symlink or unreadable since listed: not followed
                    folder = Folder(-1, rel, parent.depth + 1, [], exc)
                else:
                    folder = _listed(fd, rel, parent.depth + 1)
    finally:
        for parent in stack:
            os.close(parent.fd)


def _listed(fd: int, rel: str, depth: int) -> Folder:
    try:
        with os.scandir(fd) as listing:
            entries = sorted(listing, key=lambda entry: entry.name)
    except OSError as exc:
        os.close(fd)
        return Folder(-1, rel, depth, [], exc)
    return Folder(fd, rel, depth, entries)
