"""Which files of a repository get indexed, and how they are read: the walk, the skip rules and .gitignore.

Skipped without a word: VCS and virtualenv folders, node_modules, build output, caches, ``.aries/`` and whatever
a ``.gitignore`` (at any level) ignores. Reported as skipped (a :class:`Problem`): symlink loops, broken symlinks,
directory symlinks (not followed, so nothing is indexed twice or forever), symlinks that point outside the root
(never followed out of it), FIFOs, sockets and device files (never opened), file and folder names that are not
UTF-8, folders nested deeper than :data:`MAX_DEPTH`, folders that cannot be listed and ``.gitignore`` lines that
are not valid patterns (only that line is ignored). Files too large, binary, not decodable or unreadable are
found later, when they are read.

Every read goes through :func:`aries_kernel.rootfs.read_regular` with ``walked=True``: one component at a time
beneath the root with ``O_NOFOLLOW`` (so a folder swapped for a symlink between the walk and the read cannot lead
outside, and a symlinked folder is not read through, as the walk does not enter it), a final symlink followed only
to a target inside the root, ``O_NONBLOCK`` (a FIFO cannot block it), regular files only and at most
``limit + 1`` bytes, whatever ``stat`` said.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aries_kernel.codebase.languages import language_for_path
from aries_kernel.rootfs import Folder, RefusedPathError, kind, read_regular, walk_folders

__all__ = [
    "CONFIG_FILES",
    "MAX_DEPTH",
    "SKIP_DIRS",
    "Problem",
    "SourceFile",
    "Walk",
    "display_name",
    "gitignore_spec",
    "indexable",
    "read_gitignore",
    "walk",
]

SKIP_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".bzr",
        ".aries",
        "node_modules",
        "__pycache__",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".ipynb_checkpoints",
        "site-packages",
        "build",
        "dist",
        ".next",
        ".nuxt",
        ".turbo",
        ".parcel-cache",
        ".eggs",
        "coverage",
        ".coverage_html",
    }
)
# Files that change how imports resolve; their content is part of the index key.
CONFIG_FILES = frozenset({"tsconfig.json", "jsconfig.json"})


# Deeper folders are reported, not walked: no real repository nests this far outside skipped folders.
MAX_DEPTH = 128
# A .gitignore larger than this is reported and its rules ignored (real ones are a few KB).
GITIGNORE_MAX_BYTES = 1 << 20
# Python's regex engine backtracks on `a*a*a*a*b` against a long name (0.6 s per name at 4 stars, 250 chars);
# patterns with more single stars in one path part than this are reported and ignored.
_MAX_STARS = 3
_STARS = re.compile(r"(?<!\\)\*+")


@dataclass(frozen=True)
class SourceFile:
    """A source file found by the walk: path relative to the root (POSIX), language and stat keys."""

    rel: str
    language: str
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class Problem:
    """A path the walk could not index, with the reason shown in ``skipped()``."""

    rel: str
    reason: str


@dataclass
class Walk:
    """What a walk found: source files, import-config files (tsconfig) and problems."""

    sources: list[SourceFile] = field(default_factory=list)
    configs: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


def display_name(rel: str) -> str:
    """``rel`` printable and storable: bytes that are not UTF-8 (surrogate escapes) shown as ``\\xff``."""
    return os.fsencode(rel).decode("utf-8", "backslashreplace")


def gitignore_spec(lines: Iterable[str]) -> tuple[Any, list[tuple[int, str]]]:
    """A ``GitIgnoreSpec`` of the valid lines, and ``(line number, reason)`` for each line left out.

    Git itself ignores a pattern it cannot use; pathspec raises on the whole file (a lone ``!``, a trailing
    backslash), so each line is checked on its own.
    """
    from pathspec import GitIgnoreSpec

    good: list[str] = []
    bad: list[tuple[int, str]] = []
    for number, line in enumerate(lines, 1):
        if _too_many_stars(line):
            bad.append((number, f"more than {_MAX_STARS} '*' in one path part (matching could hang)"))
            continue
        try:
            GitIgnoreSpec.from_lines([line])
        except (ValueError, re.error) as exc:  # GitIgnorePatternError is a ValueError
            bad.append((number, str(exc) or type(exc).__name__))
            continue
        good.append(line)
    return GitIgnoreSpec.from_lines(good), bad


def _too_many_stars(line: str) -> bool:
    return any(part != "**" and len(_STARS.findall(part)) > _MAX_STARS for part in line.split("/"))


def read_gitignore(root: Path, rel: str) -> tuple[Any, list[Problem]]:
    """The spec of the .gitignore ``rel`` (None if it cannot be used) and the problems found reading it
    (missing, unreadable, too large, bad lines: those lines are left out)."""
    try:
        data, _ = read_regular(root, rel, GITIGNORE_MAX_BYTES, walked=True)
    except OSError as exc:
        reason = str(exc) if isinstance(exc, RefusedPathError) else f"unreadable: {exc.strerror or exc}"
        return None, [Problem(rel, f"{reason}; its rules are ignored")]
    if len(data) > GITIGNORE_MAX_BYTES:
        return None, [Problem(rel, f"too large (over {GITIGNORE_MAX_BYTES:,} bytes); its rules are ignored")]
    lines = data.decode("utf-8", "replace").splitlines()
    spec, bad = gitignore_spec(lines)
    problems = [
        Problem(
            rel, f"line {number} ({lines[number - 1][:80]!r}) is not a valid pattern: {reason}; line ignored"
        )
        for number, reason in bad
    ]
    return spec, problems


def walk(root: Path, extra_ignores: list[str] | tuple[str, ...] = ()) -> Walk:
    """Walk ``root`` and classify what is there; the result is sorted by path so indexing is deterministic.

    Folders are listed by :func:`aries_kernel.rootfs.walk_folders` (by handle, so a folder swapped for a
    symlink is not walked into); the walk is iterative (a deep tree cannot exhaust the stack) and bounded by
    :data:`MAX_DEPTH`.
    """
    result = Walk()
    extra = gitignore_spec(extra_ignores)[0] if extra_ignores else None
    # The folders to be listed, each with [(folder relative to root, spec)] of the .gitignores above it.
    specs_of: dict[str, Sequence[tuple[str, Any]]] = {"": []}
    for folder in walk_folders(root):
        specs = specs_of.pop(folder.rel)
        if folder.error is not None:
            reason = folder.error.strerror or folder.error
            result.problems.append(Problem(folder.rel or ".", f"cannot list folder: {reason}"))
            continue
        for name, local_specs in _list_dir(root, folder, specs, extra, result):
            rel = _join(folder.rel, name)
            if folder.depth >= MAX_DEPTH:
                result.problems.append(
                    Problem(rel, f"folder nested deeper than {MAX_DEPTH} levels; not indexed")
                )
            else:
                specs_of[rel] = local_specs
                folder.enter.append(name)
    result.sources.sort(key=lambda s: s.rel)
    result.configs.sort()
    result.problems.sort(key=lambda p: p.rel)
    return result


def indexable(root: Path, rel: str, extra_ignores: list[str] | tuple[str, ...] = ()) -> bool:
    """Whether the walk would index ``rel``: no skipped folder on its way and no .gitignore rule against it.

    Used to re-index named paths without walking the whole repository.
    """
    parts = rel.split("/")
    if len(parts) > MAX_DEPTH + 1 or not _utf8(rel) or not _regular_inside(root, rel):
        return False
    extra = gitignore_spec(extra_ignores)[0] if extra_ignores else None
    specs: list[tuple[str, Any]] = []
    for depth in range(len(parts)):
        folder = "/".join(parts[:depth])
        if depth and (
            parts[depth - 1] in SKIP_DIRS
            or parts[depth - 1].endswith(".egg-info")
            or (root / folder / "pyvenv.cfg").exists()
            or _ignored(folder, True, specs, extra)
        ):
            return False
        gitignore = _join(folder, ".gitignore")
        if (root / gitignore).is_file():
            spec, _ = read_gitignore(root, gitignore)
            if spec is not None:
                specs.append((folder, spec))
    return not _ignored(rel, False, specs, extra)


def _regular_inside(root: Path, rel: str) -> bool:
    """A regular file, or a symlink to one inside the root (what the walk would index)."""
    path = root / rel
    try:
        if path.is_symlink():
            path = path.resolve(strict=True)
            if not path.is_relative_to(root):
                return False
        return stat.S_ISREG(path.stat().st_mode)
    except (OSError, RuntimeError):
        return False


def _ignored(rel: str, is_dir: bool, specs: Sequence[tuple[str, Any]], extra: Any | None) -> bool:
    candidate = rel + "/" if is_dir else rel
    if extra is not None and extra.match_file(candidate):
        return True
    for base, spec in specs:
        if base and not candidate.startswith(base + "/"):
            continue
        if spec.match_file(candidate[len(base) + 1 :] if base else candidate):
            return True
    return False


def _utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _list_dir(
    root: Path, folder: Folder, specs: Sequence[tuple[str, Any]], extra: Any | None, out: Walk
) -> list[tuple[str, Sequence[tuple[str, Any]]]]:
    """Classify one folder's entries into ``out``; returns the names of its subfolders to walk, with the specs
    in force."""
    rel_dir, entries = folder.rel, folder.entries
    local_specs = specs
    if any(e.name == ".gitignore" for e in entries):
        spec, problems = read_gitignore(root, _join(rel_dir, ".gitignore"))
        out.problems += problems
        if spec is not None:
            local_specs = [*specs, (rel_dir, spec)]
    folders: list[tuple[str, Sequence[tuple[str, Any]]]] = []
    for entry in entries:
        rel = _join(rel_dir, entry.name)
        try:
            mode = entry.stat(follow_symlinks=False).st_mode
        except OSError:
            continue
        if not _utf8(entry.name):
            if stat.S_ISDIR(mode) or language_for_path(entry.name) is not None:
                out.problems.append(
                    Problem(display_name(rel), "name is not valid UTF-8; rename it to index it")
                )
            continue
        if stat.S_ISLNK(mode):
            _symlink(root, entry, rel, local_specs, extra, out)
        elif stat.S_ISDIR(mode):
            if not _skip_dir(root, rel) and not _ignored(rel, True, local_specs, extra):
                folders.append((entry.name, local_specs))
        elif stat.S_ISREG(mode):
            _file(entry, rel, local_specs, extra, out)
        elif _wanted(entry.name) and not _ignored(rel, False, local_specs, extra):
            out.problems.append(Problem(rel, f"not a regular file ({kind(mode)}); not read"))
    return folders


def _wanted(name: str) -> bool:
    return language_for_path(name) is not None or name in CONFIG_FILES


def _symlink(
    root: Path,
    entry: os.DirEntry[str],
    rel: str,
    specs: Sequence[tuple[str, Any]],
    extra: Any | None,
    out: Walk,
) -> None:
    """Symlinked files inside the root are indexed under the link's path; folder links and links out of the
    root are reported and not followed."""
    path = root / rel
    try:
        target = path.resolve(strict=True)
    except RuntimeError:
        out.problems.append(Problem(rel, "symlink loop"))
        return
    except OSError as exc:
        if exc.errno == 40:  # ELOOP
            out.problems.append(Problem(rel, "symlink loop"))
        elif _wanted(rel):
            out.problems.append(Problem(rel, f"broken symlink to {os.readlink(path)}"))
        return
    try:
        is_dir = target.is_dir()
        mode = target.stat().st_mode
    except OSError as exc:
        if _wanted(rel):
            out.problems.append(Problem(rel, f"unreadable: {exc.strerror or exc}"))
        return
    if (
        (not is_dir and not _wanted(rel))
        or _ignored(rel, is_dir, specs, extra)
        or (is_dir and _skip_dir(root, rel))
    ):
        return
    if not target.is_relative_to(root):
        link = display_name(os.readlink(path))
        out.problems.append(Problem(rel, f"symlink to outside the repository ({link}); not followed"))
    elif is_dir:
        where = os.path.relpath(target, root)
        loop = path.parent.resolve().is_relative_to(target)
        out.problems.append(
            Problem(rel, "symlink loop" if loop else f"symlink to a folder ({where}), not followed")
        )
    elif not stat.S_ISREG(mode):
        out.problems.append(Problem(rel, f"symlink to a {kind(mode)}; not read"))
    else:
        _file(entry, rel, specs, extra, out)


def _file(
    entry: os.DirEntry[str], rel: str, specs: Sequence[tuple[str, Any]], extra: Any | None, out: Walk
) -> None:
    name = entry.name
    language = language_for_path(name)
    if language is None and name not in CONFIG_FILES:
        return
    if _ignored(rel, False, specs, extra):
        return
    if language is None:
        out.configs.append(rel)
        return
    try:
        info = entry.stat()
    except OSError as exc:
        out.problems.append(Problem(rel, f"unreadable: {exc.strerror or exc}"))
        return
    out.sources.append(SourceFile(rel, language, info.st_size, info.st_mtime_ns))


def _skip_dir(root: Path, rel: str) -> bool:
    name = rel.rpartition("/")[2]
    if name in SKIP_DIRS or name.endswith(".egg-info"):
        return True
    # A virtualenv under any name.
    return os.path.exists(root / rel / "pyvenv.cfg")


def _join(rel_dir: str, name: str) -> str:
    return f"{rel_dir}/{name}" if rel_dir else name
