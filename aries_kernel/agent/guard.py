"""The Repl guard: the agent's Python runs freely, but its effects pass the same gate as the other tools.

While an agent ``Repl`` step runs (:func:`guarded`), a Python audit hook (PEP 578) watches the events the
interpreter raises before it changes the world:

- *edits*: opening a file for writing, appending or creating (``open``, ``os.open``, ``io``, ``pathlib``,
  ``tempfile``), ``os.remove``/``unlink``, ``os.rename``/``replace``, ``os.mkdir``/``rmdir``, ``os.truncate``,
  ``os.chmod``/``chown``/``utime``, ``os.link``/``symlink``, extended attributes, ``shutil.rmtree``/``move``/
  ``copytree``, ``os.mkfifo``/``mknod`` (they raise no audit event: the guard wraps them), and SQLite: the file
  ``sqlite3.connect`` opens (a ``file:`` URI read as SQLite reads it) and, through an authorizer set on every
  connection opened in the step, the file of an ``ATTACH`` or ``VACUUM INTO``. A path outside the project root
  (after following symlinks, ``..`` and ``dir_fd``) is refused in every permission mode; inside it is an edit,
  allowed, asked for or refused by the mode.
- *commands*: ``subprocess.Popen`` (so ``subprocess.run`` and friends), ``os.system``, ``os.exec*``,
  ``os.posix_spawn``, ``os.fork``/``forkpty`` (so ``os.spawn*``, ``pty.spawn``, ``multiprocessing`` with fork)
  and IPython ``!`` lines (they go through a pty fork), treated as a Bash call.

A refusal raises :class:`PermissionError` inside the agent's code, naming what was refused and why. The hook
is installed once per process (``sys.addaudithook`` cannot be undone) and does nothing unless the current
context (a :mod:`contextvars` variable set by :func:`guarded`) is inside a step, so the user's own cells, other
threads and Aries' code outside the step are never affected. The functions it replaces (``sqlite3.connect``,
``os.mkfifo``, ``os.mknod``) are replaced only while a step runs (in any thread or kernel of the process) and put
back when the last one ends; meanwhile they pass straight through outside a step. The step's imports write no
bytecode cache (the import system's write is refused quietly, as on a read-only disk, and not asked for), while
``sys.dont_write_bytecode`` and every other thread's imports are left as they are. Inside a step, writes by Aries' own stores (the vault, the code index) are exempt: an event
whose nearest non-library caller is in ``aries_kernel/vault``, ``codebase``, ``models``, ``context`` or ``lazy``
is Aries' own, except a note written into the project brain (``<root>/.aries/memory``), an edit of the
repository like ``ProjectSave``. One approved action covers what it does internally (``shutil.rmtree``'s unlinks, the spawn
inside ``subprocess.Popen``); the same change to the same path is asked for once a step.

What it cannot see is described in the README ("Safety and permission modes"): ctypes and C extensions that
call the C library directly, writes through file descriptors or SQLite connections opened before the step,
threads and processes started before the step or (threads) during it, and Python code written to switch the
guard off.
"""

from __future__ import annotations

import _sqlite3
import functools
import os
import posix
import shlex
import sqlite3
import sqlite3.dbapi2
import stat
import sys
import sysconfig
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any
from urllib.parse import unquote_to_bytes

__all__ = ["Ask", "GuardReport", "Verdict", "guarded", "in_step"]


@dataclass(frozen=True)
class Verdict:
    """The answer to one question of the guard: allowed, or refused with the reason shown to the model."""

    allowed: bool
    reason: str = ""


# ask(effect, summary) -> Verdict: effect is "edit" or "command", summary says what the code is about to do
# ("write pkg/out.csv", "run `ls -la` (a ! shell line)"). The loop answers by the permission mode, asking the
# user through the magic's approver when the mode says ask.
Ask = Callable[[str, str], Verdict]


@dataclass
class GuardReport:
    """What the guard did during one step, for the tool result."""

    allowed: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


@dataclass
class _Step:
    root: str
    ask: Ask
    report: GuardReport
    active: bool = True
    busy: bool = False  # inside the hook (or the question it asks): the guard's own work is not watched
    approved_frames: list[FrameType] = field(default_factory=list)
    denied_frames: list[tuple[FrameType, str]] = field(default_factory=list)  # with the reason
    approved_paths: set[tuple[str, str]] = field(default_factory=set)  # (verb, path)
    connecting: int = 0  # inside sqlite3.connect (the guard's wrapper)


_current: ContextVar[_Step | None] = ContextVar("aries_repl_guard", default=None)
# Process-wide by necessity: an audit hook is the interpreter's and cannot be removed, so it is added once (for
# every kernel of the process) and is inert outside a step; the replaced functions are module attributes, one
# per process, replaced while at least one step runs (_running counts them, in every thread and kernel).
_install_lock = threading.Lock()
_installed = False
_running = 0
_in_forked_child = False  # set in a forked child, which is a process of its own

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
_ARIES = Path(__file__).resolve().parent.parent
_ARIES_OWN = tuple(
    [str(_ARIES / part) + os.sep for part in ("vault", "codebase", "models")]
    + [str(_ARIES / name) for name in ("context.py", "lazy.py")]
)
# The shared file layer, and the guard's own wrappers (sqlite3.connect, os.mkfifo): whoever called them (a
# store, or the agent's own code) decides, as for a library.
_ARIES_PASS_THROUGH = (str(_ARIES / "rootfs.py"), str(Path(__file__).resolve()))


def _library_prefixes() -> tuple[str, ...]:
    prefixes = set()
    for scheme_vars in ({}, {"base": sys.base_prefix, "platbase": sys.base_exec_prefix}):
        paths = sysconfig.get_paths(vars=scheme_vars or None)
        for key in ("stdlib", "platstdlib", "purelib", "platlib"):
            if paths.get(key):
                prefixes.add(os.path.realpath(paths[key]) + os.sep)
    return tuple(sorted(prefixes))


_LIBRARY = _library_prefixes()


def in_step() -> bool:
    """Whether the current context is inside a guarded Repl step."""
    step = _current.get()
    return step is not None and step.active


@contextmanager
def guarded(root: str | os.PathLike[str], ask: Ask) -> Iterator[GuardReport]:
    """Guard the block (one Repl step) in the current context: file writes confined to ``root`` and weighed
    as edits, processes weighed as commands, both through ``ask``. The block's imports write no bytecode cache
    (they would otherwise ask to write ``__pycache__``). Everything it changes outside the block's context is
    put back when it ends (the replaced functions, once no other step runs)."""
    _start()
    step = _Step(root=os.path.realpath(root), ask=ask, report=GuardReport())
    token = _current.set(step)
    try:
        yield step.report
    finally:
        step.active = False
        step.approved_frames.clear()
        step.denied_frames.clear()
        _current.reset(token)
        _end()


# No audit event says enough for these: the functions themselves are replaced wherever they are reachable.
_MODULES_CONNECT: tuple[Any, ...] = (sqlite3, sqlite3.dbapi2, _sqlite3)  # _sqlite3 has no stubs
_REPLACED = ("mkfifo", "mknod")


def _start() -> None:
    global _installed, _running
    with _install_lock:
        if not _installed:
            sys.addaudithook(_hook)
            os.register_at_fork(after_in_child=_forget_in_child)
            _installed = True
        if _running == 0:
            for name, wrapper in zip(_REPLACED, (_guarded_mkfifo, _guarded_mknod), strict=True):
                setattr(os, name, wrapper)
                setattr(posix, name, wrapper)
                os.supports_dir_fd.add(wrapper)
            for module in _MODULES_CONNECT:
                module.connect = _guarded_connect
        _running += 1


def _end() -> None:
    """The last step ending puts the replaced functions back (not where other code has replaced them since)."""
    global _running
    with _install_lock:
        _running -= 1
        if _running:
            return
        for name, wrapper, original in zip(
            _REPLACED, (_guarded_mkfifo, _guarded_mknod), (_MKFIFO, _MKNOD), strict=True
        ):
            for module in (os, posix):
                if getattr(module, name) is wrapper:
                    setattr(module, name, original)
            os.supports_dir_fd.discard(wrapper)
        for module in _MODULES_CONNECT:
            if module.connect is _guarded_connect:
                module.connect = _CONNECT


def _forget_in_child() -> None:
    # A fork the user allowed: the child (a shell line, a spawned program) is not the agent's Repl any more.
    global _in_forked_child
    _in_forked_child = True


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if _HANDLERS is None:  # interpreter shutdown has cleared this module's globals; no Repl step runs now
        return
    handler = _HANDLERS.get(event)
    if handler is not None:
        _watch(handler, args, sys._getframe(1))


def _watch(handler: _Handler, args: tuple[Any, ...], frame: FrameType) -> None:
    """Run ``handler`` on what the code at ``frame`` is about to do, if the current context is inside a step
    (and not already inside the guard's own work)."""
    step = _current.get()
    if step is None or not step.active or step.busy or _in_forked_child:
        return
    if _caches_bytecode(frame):
        # The import system writing a __pycache__ file: it takes an OSError as "cannot write here" and imports
        # on, so the step's imports write no cache and ask nothing, and sys.dont_write_bytecode stays as it is.
        raise PermissionError("aries-kernel's Repl guard: no bytecode cache is written during a step")
    step.busy = True
    try:
        handler(step, args, frame)
    finally:
        step.busy = False


def _bytecode_writers() -> frozenset[Any]:
    from importlib import _bootstrap_external as external  # the import system's own (frozen) module

    return frozenset(
        {
            external.SourceLoader._cache_bytecode.__code__,  # type: ignore[attr-defined]
            external.SourceFileLoader._cache_bytecode.__code__,  # type: ignore[attr-defined]
        }
    )


_BYTECODE_WRITERS = _bytecode_writers()


def _caches_bytecode(frame: FrameType) -> bool:
    """Whether ``frame`` is the import system writing a bytecode cache: ``_cache_bytecode`` calling
    ``set_data`` (its folder) and ``_write_atomic`` (the file), so at most two frames up."""
    current: FrameType | None = frame
    for _ in range(3):
        if current is None:
            return False
        if current.f_code in _BYTECODE_WRITERS:
            return True
        current = current.f_back
    return False


# ------------------------------------------------------------------------------------------------ frames


def _is_library(frame: FrameType) -> bool:
    name = frame.f_code.co_filename
    return name.startswith(("<frozen ", *_LIBRARY))


def _is_aries_own(frame: FrameType) -> bool:
    """Whether the nearest caller that is not the standard library or a third-party package is Aries' own
    store (vault, code index, models): the agent's code calling into them is Aries writing its state."""
    current: FrameType | None = frame
    while current is not None:
        name = current.f_code.co_filename
        if name.startswith(_ARIES_OWN):
            return True
        if not _is_library(current) and name not in _ARIES_PASS_THROUGH:
            return False
        current = current.f_back
    return False


def _under_approved(step: _Step, frame: FrameType) -> bool:
    current: FrameType | None = frame
    while current is not None:
        if any(current is approved for approved in step.approved_frames):
            return True
        current = current.f_back
    return False


def _denied_reason(step: _Step, frame: FrameType) -> str | None:
    """The reason a library call on the stack was refused, if one was: its fallbacks are refused too (the
    ``os.fork`` that ``pty.fork`` tries after a refused ``os.forkpty``)."""
    current: FrameType | None = frame
    while current is not None:
        for denied, reason in step.denied_frames:
            if current is denied:
                return reason
        current = current.f_back
    return None


# ------------------------------------------------------------------------------------------------- paths


def _path(value: Any, dir_fd: Any = None, *, follow: bool = True) -> str | None:
    """The real absolute path an event's path argument names; None for a file descriptor."""
    if isinstance(value, int):
        return None
    text = os.fsdecode(value)
    if not os.path.isabs(text):
        base = os.getcwd()
        if isinstance(dir_fd, int) and dir_fd >= 0:
            base = os.readlink(f"/proc/self/fd/{dir_fd}")
        text = os.path.join(base, text)
    if follow:
        return os.path.realpath(text)
    head, tail = os.path.split(os.path.normpath(text))
    return os.path.join(os.path.realpath(head), tail)


def _inside(step: _Step, path: str) -> bool:
    return path == step.root or path.startswith(step.root + os.sep)


def _shown(step: _Step, path: str) -> str:
    return os.path.relpath(path, step.root) if _inside(step, path) else path


def _refuse(step: _Step, what: str, reason: str) -> None:
    step.report.refused.append(f"{what} ({reason})")
    raise PermissionError(f"Refused by aries-kernel's Repl guard: {what} ({reason}).")


def _edit(step: _Step, frame: FrameType, verb: str, paths: Sequence[str | None]) -> None:
    known = [path for path in paths if path is not None]
    brain = os.path.join(step.root, ".aries", "memory") + os.sep
    if not known or (_is_aries_own(frame) and not any(path.startswith(brain) for path in known)):
        return  # Aries' own state; but the project brain travels with the repository, so writing it is an edit
    what = f"{verb} {' -> '.join(_shown(step, path) for path in known)}"
    for path in known:
        if path != os.devnull and not _inside(step, path):
            _refuse(
                step, what, f"{path} is outside the project root {step.root}; the Repl writes only inside it"
            )
    if all(path == os.devnull for path in known):
        return
    kind = "write" if verb == "create" else verb  # a file allowed to be created may then be written
    if _under_approved(step, frame) or all((kind, path) in step.approved_paths for path in known):
        return
    _decide(step, frame, "edit", what)
    step.approved_paths.update((kind, path) for path in known)


def _decide(step: _Step, frame: FrameType, effect: str, what: str) -> None:
    denied = _denied_reason(step, frame)
    verdict = Verdict(False, denied) if denied is not None else step.ask(effect, what)
    if not verdict.allowed:
        if _is_library(frame):
            step.denied_frames.append((frame, verdict.reason))
        _refuse(step, what, verdict.reason or "refused")
    step.report.allowed.append(what)
    if _is_library(frame):  # what this library call does internally is part of the action just allowed
        step.approved_frames.append(frame)


def _command(step: _Step, frame: FrameType, what: str) -> None:
    if _under_approved(step, frame) or _is_aries_own(frame):
        return
    _decide(step, frame, "command", what)


def _argv(value: Any) -> str:
    if isinstance(value, (str, bytes, os.PathLike)):
        return os.fsdecode(value)
    try:
        return shlex.join(os.fsdecode(part) for part in value)
    except TypeError:
        return repr(value)


def _shell_line(frame: FrameType) -> str | None:
    """The command of an IPython ``!`` line whose fork this is, if it is one."""
    current: FrameType | None = frame
    while current is not None:
        if current.f_code.co_name in ("system_piped", "system_raw", "getoutput"):
            command = current.f_locals.get("cmd")
            if isinstance(command, str):
                return command
        current = current.f_back
    return None


# -------------------------------------------------------------------------------------------- the events


def _on_open(step: _Step, args: tuple[Any, ...], frame: FrameType) -> None:
    path, mode, flags = args
    if isinstance(flags, int) and flags & _WRITE_FLAGS:
        if mode is None and isinstance(path, (str, bytes)) and not os.path.isabs(path):
            # os.open's event does not carry its dir_fd, so a relative name may be relative to any folder.
            if not _is_aries_own(frame) and not _under_approved(step, frame):
                _refuse(
                    step,
                    f"os.open {os.fsdecode(path)} for writing",
                    "a relative os.open may be relative to a dir_fd the guard cannot see; give an absolute path",
                )
            return
        target = _path(path)
        verb = "create" if target is not None and not os.path.exists(target) else "write"
        _edit(step, frame, verb, [target])


def _on_mkdir(step: _Step, args: tuple[Any, ...], frame: FrameType) -> None:
    path = _path(args[0], args[2], follow=False)
    if path is not None and os.path.isdir(path):
        return  # nothing changes (mkdir fails with FileExistsError, as exist_ok expects)
    _edit(step, frame, "create folder", [path])


def _one(verb: str, dir_fd_at: int | None, *, follow: bool) -> _Handler:
    def handle(step: _Step, args: tuple[Any, ...], frame: FrameType) -> None:
        dir_fd = args[dir_fd_at] if dir_fd_at is not None and len(args) > dir_fd_at else None
        _edit(step, frame, verb, [_path(args[0], dir_fd, follow=follow)])

    return handle


def _two(verb: str, *, both_checked: bool = True) -> _Handler:
    def handle(step: _Step, args: tuple[Any, ...], frame: FrameType) -> None:
        src_fd = args[2] if len(args) > 2 else None
        dst_fd = args[3] if len(args) > 3 else None
        source = _path(args[0], src_fd, follow=False) if both_checked else None
        _edit(step, frame, verb, [source, _path(args[1], dst_fd, follow=False)])

    return handle


def _on_symlink(step: _Step, args: tuple[Any, ...], frame: FrameType) -> None:
    # The link's target may be anywhere: writing through the link is checked where it resolves.
    _edit(step, frame, "create symlink", [_path(args[1], args[2] if len(args) > 2 else None, follow=False)])


# ------------------------------------------------------------------------------------------------ SQLite


def _sqlite_writes(name: str) -> list[str]:
    """The files that opening the SQLite database ``name`` (a ``connect`` or an ``ATTACH``) may write: none for
    a database in memory, a private temporary one or a read-only open; else the real path of its file.

    A name starting with ``file:`` is a URI when this SQLite reads every name as one (``USE_URI``, as Debian's
    does); otherwise it may be either (``uri=True`` is not in the audit event), so both readings count."""
    files = _uri_writes(name) if name.startswith("file:") else []  # case-sensitive, as in SQLite
    if name not in ("", ":memory:") and not (name.startswith("file:") and _sqlite_reads_uris()):
        files.append(os.path.realpath(name))
    return files


def _uri_writes(uri: str) -> list[str]:
    """:func:`_sqlite_writes` of a ``file:`` URI, read as ``sqlite3ParseUri`` reads it: an authority, then the
    path up to ``?`` or ``#``, then ``key=value`` pairs joined by ``&``; ``%HH`` escapes decoded in each, and a
    ``%00`` ends the part it is in. A repeated key counts for what it may do (mode=ro only if every mode is
    ro), so no reading of repeats makes a write look like a read."""
    rest = uri[len("file:") :].split("#", 1)[0]
    path, _, query = rest.partition("?")
    if path.startswith("//"):  # file://localhost/...: SQLite refuses any other authority
        _, slash, tail = path[2:].partition("/")
        path = slash + tail
    params: dict[str, list[str]] = {}
    for pair in query.split("&") if query else ():
        key, _, value = pair.partition("=")
        params.setdefault(_unescape(key), []).append(_unescape(value))

    def every(key: str, value: str) -> bool:
        return bool(params.get(key)) and all(given == value for given in params[key])

    path = _unescape(path)
    if path in ("", ":memory:") or every("mode", "memory") or every("vfs", "memdb"):
        return []
    real = os.path.realpath(path)
    # Read-only writes nothing, except the -wal and -shm files SQLite makes beside a WAL database it reads.
    if every("mode", "ro") and (every("immutable", "1") or not _is_wal(real)):
        return []
    return [real]


def _unescape(text: str) -> str:
    decoded = unquote_to_bytes(text).split(b"\0", 1)[0]
    return os.fsdecode(decoded)


@functools.cache
def _sqlite_reads_uris() -> bool:
    """Whether the SQLite library reads every ``file:`` name as a URI (built with ``SQLITE_USE_URI``)."""
    probe = sqlite3.connect(":memory:")
    try:
        return ("USE_URI",) in probe.execute("PRAGMA compile_options").fetchall()
    finally:
        probe.close()


def _is_wal(path: str) -> bool:
    """Whether ``path`` is a SQLite database in WAL mode (its header's format bytes say 2)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO must not block the guard
    except OSError:
        return False
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode) and os.pread(fd, 2, 18) == b"\x02\x02"
    finally:
        os.close(fd)


def _on_sqlite(step: _Step, args: tuple[Any, ...], frame: FrameType) -> None:
    database = os.fsdecode(args[0]) if isinstance(args[0], (str, bytes, os.PathLike)) else ""
    _edit(step, frame, "open database", _sqlite_writes(database))


def _on_sqlite_handle(step: _Step, args: tuple[Any, ...], frame: FrameType) -> None:
    if (
        not step.connecting
    ):  # the authorizer is set by sqlite3.connect (the connection is not usable here yet)
        _refuse(
            step,
            "make a sqlite3.Connection directly",
            "the guard watches the ATTACH and VACUUM INTO of connections sqlite3.connect opens; call it",
        )


def _guarded_connect(*args: Any, **kwargs: Any) -> Any:
    """``sqlite3.connect``: inside a step, the connection gets the guard's authorizer (:func:`_authorize`)."""
    step = _current.get() if _HANDLERS is not None else None
    if step is None or not step.active:
        return _CONNECT(*args, **kwargs)
    step.connecting += 1
    try:
        connection = _CONNECT(*args, **kwargs)
    finally:
        step.connecting -= 1
    # The base class's method, so that a factory's subclass cannot turn it into a no-op.
    sqlite3.Connection.set_authorizer(connection, _authorize)
    return connection


def _authorize(
    action: int, arg1: str | None, arg2: str | None, database: str | None, trigger: str | None
) -> int:
    """The authorizer of connections opened in a step: an ``ATTACH`` (``VACUUM INTO`` attaches its target
    too) opens a file, weighed as ``sqlite3.connect``'s. A refusal denies the statement: sqlite3 raises
    ``DatabaseError: not authorized`` and the step's report says why."""
    if action != sqlite3.SQLITE_ATTACH or _HANDLERS is None:
        return sqlite3.SQLITE_OK
    try:
        _watch(_on_attach, (arg1,), sys._getframe(1))
    except PermissionError:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def _on_attach(step: _Step, args: tuple[Any, ...], frame: FrameType) -> None:
    (name,) = args
    if name is None:  # SQLite gives the authorizer the name only when the statement spells it out
        _refuse(
            step,
            "attach a database named by a parameter or an expression",
            "the guard sees only a file name written as a string literal in the ATTACH; write it so",
        )
    _edit(step, frame, "attach database", _sqlite_writes(name))


# ------------------------------------------------------------------------------- functions with no event


def _guarded_mkfifo(path: Any, mode: int = 0o666, *, dir_fd: int | None = None) -> None:
    """``os.mkfifo``, weighed by the Repl guard first (CPython raises no audit event for it)."""
    if _HANDLERS is not None:
        _watch(_HANDLERS["os.mkfifo"], (path, dir_fd), sys._getframe(1))
    _MKFIFO(path, mode, dir_fd=dir_fd)


def _guarded_mknod(path: Any, mode: int = 0o600, device: int = 0, *, dir_fd: int | None = None) -> None:
    """``os.mknod``, weighed by the Repl guard first (CPython raises no audit event for it)."""
    if _HANDLERS is not None:
        _watch(_HANDLERS["os.mknod"], (path, dir_fd), sys._getframe(1))
    _MKNOD(path, mode, device, dir_fd=dir_fd)


_CONNECT = sqlite3.connect  # the functions the wrappers call
_MKFIFO = os.mkfifo
_MKNOD = os.mknod


def _on_popen(step: _Step, args: tuple[Any, ...], frame: FrameType) -> None:
    argv = args[1]
    if isinstance(argv, list) and len(argv) == 3 and argv[1] == "-c":  # shell=True: show the shell line
        argv = argv[2]
    _command(step, frame, f"run `{_argv(argv)}`")


def _on_system(step: _Step, args: tuple[Any, ...], frame: FrameType) -> None:
    _command(step, frame, f"run `{os.fsdecode(args[0])}` (os.system)")


def _on_exec(step: _Step, args: tuple[Any, ...], frame: FrameType) -> None:
    _command(step, frame, f"replace the kernel process with `{_argv(args[1])}` (os.exec)")


def _on_spawn(step: _Step, args: tuple[Any, ...], frame: FrameType) -> None:
    _command(step, frame, f"run `{_argv(args[1])}` (os.posix_spawn)")


def _on_fork(step: _Step, args: tuple[Any, ...], frame: FrameType) -> None:
    line = _shell_line(frame)
    _command(step, frame, f"run `{line}` (a ! shell line)" if line else "fork the kernel process (os.fork)")


def _on_pty_spawn(step: _Step, args: tuple[Any, ...], frame: FrameType) -> None:
    _command(step, frame, f"run `{_argv(args[0])}` (pty.spawn)")


_Handler = Callable[[_Step, tuple[Any, ...], FrameType], None]
_HANDLERS: dict[str, _Handler] = {
    "open": _on_open,
    "os.mkdir": _on_mkdir,
    "os.remove": _one("delete", 1, follow=False),
    "os.rmdir": _one("delete folder", 1, follow=False),
    "os.truncate": _one("truncate", None, follow=True),
    "os.chmod": _one("change the mode of", 2, follow=True),
    "os.chown": _one("change the owner of", 3, follow=True),
    "os.utime": _one("change the times of", 3, follow=True),
    "os.chflags": _one("change the flags of", None, follow=True),
    "os.lchflags": _one("change the flags of", None, follow=False),
    "os.setxattr": _one("set an attribute of", None, follow=True),
    "os.removexattr": _one("remove an attribute of", None, follow=True),
    "shutil.rmtree": _one("delete the tree", 1, follow=False),
    "os.rename": _two("rename"),
    "os.link": _two("hard-link"),
    "shutil.move": _two("move"),
    "shutil.copytree": _two("copy the tree", both_checked=False),
    "shutil.unpack_archive": lambda step, args, frame: _edit(
        step, frame, "unpack into", [_path(args[1] or os.getcwd())]
    ),
    "os.symlink": _on_symlink,
    "sqlite3.connect": _on_sqlite,
    "sqlite3.connect/handle": _on_sqlite_handle,
    # not audit events: the names under which _guarded_mkfifo and _guarded_mknod look their handlers up
    "os.mkfifo": _one("create a named pipe", 1, follow=False),
    "os.mknod": _one("create a file node", 1, follow=False),
    "subprocess.Popen": _on_popen,
    "os.system": _on_system,
    "os.exec": _on_exec,
    "os.posix_spawn": _on_spawn,
    "os.spawn": _on_spawn,
    "os.fork": _on_fork,
    "os.forkpty": _on_fork,
    "pty.spawn": _on_pty_spawn,
}
