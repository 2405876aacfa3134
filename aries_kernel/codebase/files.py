"""Which files of a repository get indexed: the walk, the skip rules and .gitignore.

Skipped without a word: VCS and virtualenv folders, node_modules, build output, caches, ``.aries/`` and whatever
a ``.gitignore`` (at any level) ignores. Reported as skipped (a :class:`Problem`): symlink loops, broken symlinks,
directory symlinks (not followed, so nothing is indexed twice or forever) and folders that cannot be listed.
Files too large, binary, not UTF-8 or unreadable are found later, when they are read.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from aries_kernel.codebase.languages import language_for_path

__all__ = ["CONFIG_FILES", "SKIP_DIRS", "Problem", "SourceFile", "Walk", "indexable", "walk"]

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


def walk(root: Path, extra_ignores: list[str] | tuple[str, ...] = ()) -> Walk:
    """Walk ``root`` and classify what is there; the result is sorted by path so indexing is deterministic."""
    from pathspec import GitIgnoreSpec

    result = Walk()
    extra = GitIgnoreSpec.from_lines(extra_ignores) if extra_ignores else None
    # (directory relative to root, spec) for every .gitignore seen on the way down.
    specs: list[tuple[str, GitIgnoreSpec]] = []
    _walk_dir(root, "", specs, extra, result)
    result.sources.sort(key=lambda s: s.rel)
    result.configs.sort()
    result.problems.sort(key=lambda p: p.rel)
    return result


def indexable(root: Path, rel: str, extra_ignores: list[str] | tuple[str, ...] = ()) -> bool:
    """Whether the walk would index ``rel``: no skipped folder on its way and no .gitignore rule against it.

    Used to re-index named paths without walking the whole repository.
    """
    from pathspec import GitIgnoreSpec

    parts = rel.split("/")
    extra = GitIgnoreSpec.from_lines(extra_ignores) if extra_ignores else None
    specs: list[tuple[str, object]] = []
    for depth in range(len(parts)):
        folder = "/".join(parts[:depth])
        if depth and (
            parts[depth - 1] in SKIP_DIRS
            or parts[depth - 1].endswith(".egg-info")
            or (root / folder / "pyvenv.cfg").exists()
            or _ignored(folder, True, specs, extra)
        ):
            return False
        gitignore = root / folder / ".gitignore"
        if gitignore.is_file():
            try:
                lines = gitignore.read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError:
                continue
            specs.append((folder, GitIgnoreSpec.from_lines(lines)))
    return not _ignored(rel, False, specs, extra)


def _ignored(rel: str, is_dir: bool, specs: Sequence[tuple[str, object]], extra: object | None) -> bool:
    candidate = rel + "/" if is_dir else rel
    if extra is not None and extra.match_file(candidate):  # type: ignore[attr-defined]
        return True
    for base, spec in specs:
        if base and not candidate.startswith(base + "/"):
            continue
        if spec.match_file(candidate[len(base) + 1 :] if base else candidate):  # type: ignore[attr-defined]
            return True
    return False


def _walk_dir(
    root: Path, rel_dir: str, specs: Sequence[tuple[str, object]], extra: object | None, out: Walk
) -> None:
    from pathspec import GitIgnoreSpec

    directory = root / rel_dir if rel_dir else root
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError as exc:
        out.problems.append(Problem(rel_dir or ".", f"cannot list folder: {exc.strerror or exc}"))
        return
    gitignore = next((e for e in entries if e.name == ".gitignore" and e.is_file()), None)
    local_specs = specs
    if gitignore is not None:
        try:
            with open(gitignore.path, encoding="utf-8", errors="replace") as handle:
                local_specs = [*specs, (rel_dir, GitIgnoreSpec.from_lines(handle.read().splitlines()))]
        except OSError as exc:
            out.problems.append(Problem(_join(rel_dir, ".gitignore"), f"unreadable: {exc.strerror or exc}"))
    for entry in entries:
        rel = _join(rel_dir, entry.name)
        if entry.is_symlink():
            _symlink(root, entry, rel, local_specs, extra, out)
            continue
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
        except OSError:
            continue
        if is_dir:
            if _skip_dir(entry) or _ignored(rel, True, local_specs, extra):
                continue
            _walk_dir(root, rel, local_specs, extra, out)
        else:
            _file(entry, rel, local_specs, extra, out)


def _symlink(
    root: Path,
    entry: os.DirEntry[str],
    rel: str,
    specs: Sequence[tuple[str, object]],
    extra: object | None,
    out: Walk,
) -> None:
    """Symlinked files are indexed under the link's path; directory links are reported and not followed."""
    try:
        target = Path(entry.path).resolve(strict=True)
    except RuntimeError:
        out.problems.append(Problem(rel, "symlink loop"))
        return
    except OSError as exc:
        if exc.errno == 40:  # ELOOP
            out.problems.append(Problem(rel, "symlink loop"))
        elif language_for_path(rel) is not None:
            out.problems.append(Problem(rel, f"broken symlink to {os.readlink(entry.path)}"))
        return
    if target.is_dir():
        if not _skip_dir(entry) and not _ignored(rel, True, specs, extra):
            where = os.path.relpath(target, root)
            loop = Path(entry.path).parent.resolve().is_relative_to(target)
            out.problems.append(
                Problem(rel, "symlink loop" if loop else f"symlink to a folder ({where}), not followed")
            )
        return
    _file(entry, rel, specs, extra, out)


def _file(
    entry: os.DirEntry[str], rel: str, specs: Sequence[tuple[str, object]], extra: object | None, out: Walk
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
        stat = entry.stat()
    except OSError as exc:
        out.problems.append(Problem(rel, f"unreadable: {exc.strerror or exc}"))
        return
    out.sources.append(SourceFile(rel, language, stat.st_size, stat.st_mtime_ns))


def _skip_dir(entry: os.DirEntry[str]) -> bool:
    name = entry.name
    if name in SKIP_DIRS or name.endswith(".egg-info"):
        return True
    # A virtualenv under any name.
    return os.path.exists(os.path.join(entry.path, "pyvenv.cfg"))


def _join(rel_dir: str, name: str) -> str:
    return f"{rel_dir}/{name}" if rel_dir else name
