"""Which files of a project changed since the last look: told by inotify where the platform has it, else found by
walking the tree.

:class:`ChangeWatch` serves the agent's per-turn change detection. Its first look walks the project once through
the one project walk (:class:`aries_kernel.codebase.files.ProjectTree`, so the skip policy is the index's, Grep's
and Glob's) and records each file's modification time and size; with inotify it also watches each folder the walk
enters, before the folder is listed (nothing created meanwhile is missed). A later look reads the events queued
since, without blocking and without a thread: the kernel queues an event in the system call that made the change,
so a change made by a Bash command or a Repl cell that has returned is always in the queue. Only the paths named
by events are looked at (one ``lstat`` each); a new folder is walked and watched; the skipped folders are not
watched (a skipped-by-evidence folder only at its top, where its evidence lives).

A new walk, compared against the record, stands in whenever the events cannot be trusted to say everything: the
queue overflowed, a watched folder moved, a file that decides what is skipped changed (.gitignore, pyvenv.cfg,
tsconfig.json, setup.py ...: :data:`aries_kernel.codebase.files.POLICY_FILES`), or a watch could not be added
(the per-user watch limit). Without inotify (not Linux, ``watch=False``, no ``inotify_simple``) every look walks.

The inotify handle is one file descriptor, closed by :meth:`ChangeWatch.close`, or when the watch is collected
or the interpreter exits.
"""

from __future__ import annotations

import errno
import os
import stat
import weakref
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from aries_kernel.codebase.files import POLICY_FILES, Listed, ProjectTree, skip_rule

__all__ = ["ChangeWatch"]

# What a file record holds: (modification time in ns, size).
_Key = tuple[int, int]


class ChangeWatch:
    """The files (paths relative to ``root``) created, changed or deleted between two calls of :meth:`changed`.

    ``mode`` is ``"inotify"`` or ``"walk"``; ``reason`` says why it walks every time, ``last_walk`` why the
    last full walk was made, and ``walks`` counts them.
    """

    def __init__(self, root: str | os.PathLike[str], *, watch: bool = True) -> None:
        self.root = Path(root).resolve()
        self.mode = "walk"
        self.reason = "not started"
        self.walks = 0
        self.last_walk = ""
        self._want_watch = watch
        self._files: dict[str, _Key] | None = None
        self._inotify: Any = None
        self._finalizer: weakref.finalize[Any, Any] | None = None
        self._folders: dict[int, tuple[str, Listed | None]] = {}  # watch -> folder, its rules (None: skipped)
        self._watch_of: dict[str, int] = {}

    def __len__(self) -> int:
        """How many files the record holds."""
        return len(self._files or {})

    def files(self) -> list[str]:
        """The files of the record (as of the last look), sorted."""
        return sorted(self._files or {})

    # lifecycle

    def close(self) -> None:
        """Stop watching (the next look walks the tree again and starts a new watch)."""
        if self._finalizer is not None:
            self._finalizer()
        self._inotify = self._finalizer = None
        self._folders.clear()
        self._watch_of.clear()
        self.mode = "walk"

    def __enter__(self) -> ChangeWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # looking

    def changed(self) -> list[str]:
        """Paths created, changed or deleted since the last call, sorted; the first call records the tree and
        returns ``[]``."""
        if self._files is None:
            self._files = self._walk()
            return []
        if self._inotify is None:
            return self._rewalk(self.reason)
        paths, why = self._drain()
        if why:
            return self._rewalk(why)
        return self._look(paths)

    def _rewalk(self, why: str) -> list[str]:
        """Walk the whole tree again (watching anew) and compare it with the record."""
        before = self._files or {}
        self.close()
        self._files = self._walk()
        self.last_walk = why
        after = self._files
        changed = set(before.keys() ^ after.keys())
        changed.update(rel for rel in before.keys() & after.keys() if before[rel] != after[rel])
        return sorted(changed)

    def _walk(self, start: str = "") -> dict[str, _Key]:
        """Record the files beneath ``start`` (the whole tree: and start watching it, when inotify is on)."""
        if not start:
            self.walks += 1
            self._start_watching()
        files: dict[str, _Key] = {}
        tree = ProjectTree(self.root, start=start, on_enter=self._add_watch if self._inotify else None)
        self._add_watch(start)
        for listed in tree:
            self._set_rules(listed.folder.rel, listed)
            for entry in listed.folder.entries:
                rel = f"{listed.folder.rel}/{entry.name}" if listed.folder.rel else entry.name
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISREG(info.st_mode) and not listed.ignored(rel):
                    files[rel] = (info.st_mtime_ns, info.st_size)
        for problem in tree.skipped:  # watched at their top only (the evidence that skips them lives there)
            self._set_rules(problem.rel, None)
        return files

    # inotify

    def _start_watching(self) -> None:
        if not self._want_watch:
            self.reason = "watching is turned off"
            return
        try:
            from inotify_simple import INotify
        except (ImportError, OSError) as exc:  # not Linux, or no libc inotify
            self.reason = f"inotify unavailable ({exc})"
            return
        try:
            inotify = INotify()
        except OSError as exc:  # the per-user instance limit
            self.reason = f"inotify unavailable ({exc.strerror or exc})"
            return
        self._inotify = inotify
        self._finalizer = weakref.finalize(self, inotify.close)
        self.mode, self.reason = "inotify", ""

    def _add_watch(self, rel: str) -> None:
        if self._inotify is None:
            return
        from inotify_simple import flags

        mask = (
            flags.CREATE
            | flags.DELETE
            | flags.MODIFY
            | flags.ATTRIB
            | flags.CLOSE_WRITE
            | flags.MOVED_FROM
            | flags.MOVED_TO
            | flags.DELETE_SELF
            | flags.MOVE_SELF
            | flags.ONLYDIR
            | flags.DONT_FOLLOW
            | flags.EXCL_UNLINK
        )
        try:
            wd = self._inotify.add_watch(os.path.join(self.root, rel), mask)
        except OSError as exc:  # ENOSPC: the watch limit; gone or unreadable since listed
            if exc.errno in (errno.ENOENT, errno.EACCES, errno.ENOTDIR):  # that folder, not the watch
                return
            self.close()
            self._want_watch = False  # the limit stays: do not try again at every look
            self.reason = f"inotify watch limit reached ({exc.strerror or exc}); walking instead"
            return
        self._folders[wd] = (rel, None)
        self._watch_of[rel] = wd

    def _set_rules(self, rel: str, listed: Listed | None) -> None:
        wd = self._watch_of.get(rel)
        if wd is not None:
            self._folders[wd] = (rel, listed)

    def _drain(self) -> tuple[set[str], str]:
        """The paths named by the queued events (without blocking), and why a walk is needed instead ('')."""
        from inotify_simple import flags

        paths: set[str] = set()
        new_folders: list[str] = []
        while True:
            events = list(self._inotify.read(timeout=0))
            if not events:
                break
            for event in events:
                if event.mask & flags.Q_OVERFLOW:
                    return paths, "the inotify queue overflowed"
                if event.mask & flags.MOVE_SELF:
                    return paths, "a watched folder moved"
                if event.mask & flags.IGNORED:
                    rel, _ = self._folders.pop(event.wd, ("", None))
                    if self._watch_of.get(rel) == event.wd:
                        del self._watch_of[rel]
                    continue
                if event.wd not in self._folders or not event.name:
                    continue
                folder, listed = self._folders[event.wd]
                if listed is None or event.name in POLICY_FILES:
                    # A skipped folder's evidence, or what decides skipping, changed: the walk decides anew.
                    return paths, f"{os.path.join(folder, event.name)} changed what is skipped"
                rel = f"{folder}/{event.name}" if folder else event.name
                if event.mask & flags.ISDIR:
                    if event.mask & (flags.CREATE | flags.MOVED_TO):
                        new_folders.append(rel)
                    else:  # deleted or moved away: whatever was recorded beneath it
                        paths.update(_beneath(self._files or {}, rel))
                elif not listed.ignored(rel):
                    paths.add(rel)
        for rel in new_folders:
            if self._inotify is None:  # a watch could not be added
                return paths, self.reason
            if skip_rule(self.root, rel) is None:
                found = self._walk(rel)
                paths.update(found)
        return paths, ""

    def _look(self, paths: Iterable[str]) -> list[str]:
        """Stat each of ``paths``; those whose record changed are returned, and the record updated."""
        files = self._files if self._files is not None else {}
        changed = []
        for rel in paths:
            try:
                info = os.stat(os.path.join(self.root, rel), follow_symlinks=False)
                key: _Key | None = (info.st_mtime_ns, info.st_size) if stat.S_ISREG(info.st_mode) else None
            except OSError:
                key = None
            if key == files.get(rel):
                continue
            changed.append(rel)
            if key is None:
                files.pop(rel, None)
            else:
                files[rel] = key
        return sorted(changed)


def _beneath(files: dict[str, _Key], folder: str) -> list[str]:
    prefix = folder + "/"
    return [rel for rel in files if rel.startswith(prefix)]
