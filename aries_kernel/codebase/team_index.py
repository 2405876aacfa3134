"""One index per commit for a team: a kernel whose repository is at a commit a member already indexed starts
from that member's index instead of parsing, then parses only the files that differ in its own work tree.

The copies live in a folder the team shares (:mod:`.team_settings`: set by the environment or the config,
fixed when the kernel starts), one ``<commit>.index.db`` per commit: an ordinary ``index.db`` whose every row is
tagged under the team key (32 random bytes, readable by the team only), not a member's own key, which nobody
else can verify. Records are unmarshalled only from rows whose MAC verifies, so a forged, truncated or foreign
copy is refused whole, with a message, and the kernel indexes on its own; nobody's kernel can be fed a forged
index by someone without the team key.

- **Adopt** (:func:`adopt`): a kernel whose own ``.aries/index.db`` is empty copies the rows of its commit's
  copy into it, tagged again under the user's key. A file git tracks and says is as the commit has it takes
  this tree's stat keys, so the warm start that follows reuses its record without reading it; every other file
  is read and hashed, and parsed only when its content differs: only what differs from the commit is parsed.
- **Publish** (:func:`publish`): after an index of a commit that has no copy yet, the kernel writes one of the
  files git tracks and says are as the commit has them; a changed, untracked or ignored file is left out, and
  the graph too when any is, so nobody receives a member's unsaved work. The copy is written to a temporary file and linked into
  place, so a reader sees a whole copy or none, and of two members publishing one commit at once, the first
  wins; a copy of an older schema is replaced.
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
import subprocess
import threading
from pathlib import Path

from aries_kernel.codebase.store import SCHEMA_VERSION, ForeignIndex, IndexStore, copy_index, schema_of
from aries_kernel.codebase.team_settings import TeamIndex

__all__ = ["adopt", "publish"]

log = logging.getLogger(__name__)
_GIT_SECONDS = 30
# A team copy larger than this many bytes per byte of the files git tracks, plus the slack, is refused unread (a
# 20,000-file tree's copy is about half the size of its files; a small repository's is mostly SQLite pages).
_INDEX_PER_SOURCE_BYTE = 4
_INDEX_SLACK_BYTES = 64 << 20


def _git(root: Path, *args: str) -> str | None:
    """What ``git args`` prints in ``root``, or None when git is missing or fails."""
    try:
        done = subprocess.run(
            ["git", "-C", str(root), *args],
            capture_output=True,
            text=True,
            timeout=_GIT_SECONDS,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def head_commit(root: Path) -> str | None:
    """The commit ``root``'s work tree is at, or None outside a git repository."""
    out = _git(root, "rev-parse", "--verify", "HEAD")
    commit = out.strip() if out else ""
    return commit if len(commit) in (40, 64) and all(c in "0123456789abcdef" for c in commit) else None


def changed_files(root: Path) -> set[str] | None:
    """Paths under ``root`` that differ from its commit (changed, staged, untracked), or None if git fails."""
    out = _git(root, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--", ".")
    if out is None:
        return None
    prefix = _git(root, "rev-parse", "--show-prefix")
    prefix = (prefix or "").strip()
    changed: set[str] = set()
    entries = iter(out.split("\0"))
    for entry in entries:
        if len(entry) < 4:
            continue
        status, path = entry[:2], entry[3:]
        if status[0] in "RC":
            changed.add(next(entries, ""))  # a rename names its source next
        changed.add(path)
    inside = {path.removeprefix(prefix) for path in changed if path.startswith(prefix)}
    return {path for path in inside if not path.startswith(".aries/")}  # Aries' own folder is not indexed


def committed_files(root: Path) -> tuple[frozenset[str], int] | None:
    """The files under ``root`` that git tracks and says are as the commit has them, and how many tracked or
    untracked files differ (None when git fails). Only these are shared, and only these are taken on trust."""
    tracked = _tracked(root)
    changed = changed_files(root)
    if tracked is None or changed is None:
        return None
    return frozenset(path for path in tracked if path not in changed), len(changed)


def _tracked(root: Path) -> list[str] | None:
    """The files under ``root`` that git tracks, relative to ``root`` as the index has them (None: git failed)."""
    out = _git(root, "ls-files", "-z", "--", ".")
    return None if out is None else [path for path in out.split("\0") if path]


def adopt(store: IndexStore, root: Path, team: TeamIndex) -> str:
    """Fill an empty ``store`` from the team's copy of ``root``'s commit; says what happened."""
    commit = head_commit(root)
    if commit is None:
        return "not a git work tree: no team index"
    copy = team.copy_of(commit)
    try:
        found = os.lstat(copy)
    except FileNotFoundError:
        return f"no team index of commit {commit[:12]} yet"
    except OSError as exc:
        return _refused(copy, f"not readable ({exc})")
    if not stat.S_ISREG(found.st_mode):  # a link could lead anywhere: only the team's own files are read
        kind = "a symlink" if stat.S_ISLNK(found.st_mode) else "not a regular file"
        return _refused(copy, f"it is {kind}")
    # This tree's stat keys of the files git tracks; those git says are as the commit has them (``git status``,
    # which takes a while on a large tree, runs while the copy's judgment rows are copied) take the copy's
    # record, which they need not be read to be recognised by (every other file is read and hashed).
    changed: list[set[str] | None] = []
    status = threading.Thread(target=lambda: changed.append(changed_files(root)), name="aries-git-status")
    status.start()
    try:
        stats: dict[str, tuple[int, int]] = {}
        top = str(root)
        for rel in _tracked(root) or ():
            try:
                info = os.lstat(f"{top}/{rel}")  # a str, not a Path per file: 60,000 of them on a large tree
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode):
                stats[rel] = (info.st_size, info.st_mtime_ns)
        # An index is a fraction of the files it describes: a copy far larger is not one (and is not read whole).
        most = _INDEX_SLACK_BYTES + _INDEX_PER_SOURCE_BYTE * sum(size for size, _ in stats.values())
        if found.st_size > most:
            return _refused(
                copy, f"it is {found.st_size:,} bytes, more than an index of this repository can be ({most:,})"
            )
        committed: dict[str, tuple[int, int]] | None = None

        def stat_of(rel: str) -> tuple[int, int] | None:
            nonlocal committed
            if committed is None:  # the first file row: git status is needed from here on
                status.join()
                differ = changed[0] if changed else None
                committed = {} if differ is None else {p: v for p, v in stats.items() if p not in differ}
            return committed.get(rel)

        try:
            count = copy_index(copy, team.key, store, stat_of=stat_of)  # only read: nothing is written to it
        except ForeignIndex as exc:
            return _refused(copy, str(exc))
    finally:
        status.join()
    return f"started from the team index of commit {commit[:12]} ({count:,} files)"


def _refused(copy: Path, why: str) -> str:
    message = f"the team index {copy} is not used: {why}"
    log.warning("%s", message)
    return message


def publish(store: IndexStore, root: Path, team: TeamIndex) -> str:
    """Write the team's copy of ``root``'s commit from ``store`` unless one exists; says what happened."""
    commit = head_commit(root)
    if commit is None:
        return "not a git work tree: no team index written"
    final = team.copy_of(commit)
    # A copy of an older (or unreadable) schema is replaced; a current one is kept: the first member's wins.
    replace = final.exists() and schema_of(final) != SCHEMA_VERSION
    if final.exists() and not replace:
        return f"the team index of commit {commit[:12]} exists"
    committed = committed_files(root)
    if committed is None:
        return "git failed: no team index written"
    shared, changed = committed
    temp = final.with_name(f".{final.name}.{os.getpid()}.{secrets.token_hex(4)}")
    try:
        team.folder.mkdir(parents=True, exist_ok=True)
        target = IndexStore(temp, team.key)
        try:
            count = store.copy_to(target, only=shared)  # the graph too when nothing is left out
        finally:
            target.close()
        if replace:
            os.replace(temp, final)
        else:
            os.link(temp, final)  # never replaces: a copy another member linked first wins
    except FileExistsError:
        return f"the team index of commit {commit[:12]} was written by another member first"
    except (OSError, ForeignIndex) as exc:
        message = f"could not write the team index {final}: {exc}"
        log.warning("%s", message)
        return message
    finally:
        for suffix in ("", "-journal", "-wal", "-shm"):
            Path(f"{temp}{suffix}").unlink(missing_ok=True)
    left = f", {changed:,} changed files left out" if changed else ""
    return f"wrote the team index of commit {commit[:12]} ({count:,} files{left})"
