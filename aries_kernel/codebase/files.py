"""Which files of a repository are the project's, and how they are read: the one walk and its one skip policy.

:class:`ProjectTree` is the only walk of a project: the index (:func:`walk`), the agent's change detection
(:mod:`aries_kernel.codebase.changes`), Grep and Glob (:class:`FileWalk`) all go through it, so they agree on
what is skipped. A folder is skipped by evidence, not by its name alone, and every folder skipped is reported
(one :class:`Problem` for the folder, never one per file in it) with the rule that skipped it:

- by name, only for names that the tool making the folder chose and that never hold a project's own source:
  version-control data (``.git``, ``.hg``, ``.svn``, ``.bzr``), Aries' own state (``.aries``: the one folder
  skipped and not listed, as the index makes it in every repository), installed npm
  packages (``node_modules``), installed Python packages (``site-packages``, ``dist-packages``: the names
  Python's ``site`` module and Debian give them), Python bytecode (``__pycache__``), tool caches
  (``.mypy_cache``, ``.pytest_cache``, ``.ruff_cache``, ``.ipynb_checkpoints``, ``.parcel-cache``, ``.turbo``,
  ``.next``, ``.nuxt``), tox and nox environments (``.tox``, ``.nox``: virtualenvs named by the tool) and
  setuptools' downloaded eggs (``.eggs``);
- by what is in it: a virtualenv (a ``pyvenv.cfg``, whatever the folder's name), a conda environment
  (``conda-meta``), or a folder tagged as a cache by a ``CACHEDIR.TAG`` (Cargo's ``target/`` has one);
- by what the project says: what a ``.gitignore`` (at any level) or the ``AriesCodebase.ignore`` setting ignores
  (the row names the file, the line and the pattern); the ``outDir`` or ``declarationDir`` that a
  ``tsconfig.json`` or ``jsconfig.json`` gives, relative to its own folder (its own file only, not ``extends``);
  and setuptools' build folder: a ``build`` next to a ``setup.py``, ``setup.cfg`` or ``pyproject.toml`` that
  holds setuptools' own ``lib``, ``lib.*``, ``bdist.*``, ``temp.*`` or ``scripts-*`` folders and no
  ``__init__.py``.

Any other folder is walked whatever its name: ``build``, ``dist``, ``coverage``, ``venv`` or ``out`` holding the
project's own source (coverage.py's ``coverage/`` package, pypa/build's ``src/build/``) is indexed.

Also reported as skipped (a :class:`Problem`): symlink loops, broken symlinks, directory symlinks (not followed,
so nothing is indexed twice or forever), symlinks that point outside the root (never followed out of it), FIFOs,
sockets and device files (never opened), file and folder names that are not UTF-8, folders nested deeper than
:data:`MAX_DEPTH`, folders that cannot be listed and ``.gitignore`` lines that are not valid patterns (only that
line is ignored). Files too large, binary, not decodable or unreadable are found later, when they are read.

Every read goes through :func:`aries_kernel.rootfs.read_regular` with ``walked=True``: one component at a time
beneath the root with ``O_NOFOLLOW`` (so a folder swapped for a symlink between the walk and the read cannot lead
outside, and a symlinked folder is not read through, as the walk does not enter it), a final symlink followed only
to a target inside the root, ``O_NONBLOCK`` (a FIFO cannot block it), regular files only and at most
``limit + 1`` bytes, whatever ``stat`` said.
"""

from __future__ import annotations

import os
import posixpath
import re
import stat
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from aries_kernel.codebase.bounded import MAX_BYTES as CONFIG_MAX_BYTES
from aries_kernel.codebase.languages import language_for_path
from aries_kernel.codebase.resolve import parse_jsonc
from aries_kernel.rootfs import (
    Folder,
    MissingPathError,
    RefusedPathError,
    kind,
    located,
    read_regular,
    walk_folders,
)

__all__ = [
    "CONFIG_FILES",
    "MAX_DEPTH",
    "NAMED_SKIPS",
    "OWN_STATE",
    "POLICY_FILES",
    "FileWalk",
    "Found",
    "Ignores",
    "Listed",
    "Problem",
    "ProjectTree",
    "SourceFile",
    "Walk",
    "display_name",
    "evidence_rule",
    "folder_rule",
    "gitignore_spec",
    "indexable",
    "read_gitignore",
    "walk",
]

# The only folders skipped by name: each name is chosen by the tool that makes the folder, and none ever holds a
# project's own source (see the module docstring). The value is the rule shown in skipped().
NAMED_SKIPS: dict[str, str] = {
    ".git": "version-control data",
    ".hg": "version-control data",
    ".svn": "version-control data",
    ".bzr": "version-control data",
    "node_modules": "installed npm packages",
    "site-packages": "installed Python packages",
    "dist-packages": "installed Python packages",
    "__pycache__": "Python bytecode cache",
    ".mypy_cache": "tool cache",
    ".pytest_cache": "tool cache",
    ".ruff_cache": "tool cache",
    ".parcel-cache": "tool cache",
    ".turbo": "tool cache",
    ".next": "framework build cache",
    ".nuxt": "framework build cache",
    ".ipynb_checkpoints": "notebook checkpoints",
    ".tox": "tox environments (virtualenvs)",
    ".nox": "nox environments (virtualenvs)",
    ".eggs": "setuptools' downloaded eggs",
}
# Aries' own state (the index itself, sessions, the project brain): never walked and, alone of the skipped
# folders, not listed, as every indexed repository has one (the index makes it before it walks).
OWN_STATE = ".aries"
# Files that change how imports resolve; their content is part of the index key.
CONFIG_FILES = frozenset({"tsconfig.json", "jsconfig.json", "package.json", "go.mod", "Cargo.toml"})
# Files whose presence or content changes which folders are skipped: a change to one calls for a new walk.
_PYTHON_BUILD_CONFIGS = frozenset({"setup.py", "setup.cfg", "pyproject.toml"})
POLICY_FILES = frozenset(
    {".gitignore", "pyvenv.cfg", "conda-meta", "CACHEDIR.TAG", *CONFIG_FILES, *_PYTHON_BUILD_CONFIGS}
)
# setuptools' own folders inside its build folder (build_py, bdist_*, build_ext's temp, build_scripts).
_SETUPTOOLS_BUILD = re.compile(r"lib|lib\..+|bdist\..+|temp\..+|scripts-.+")

# Deeper folders are reported, not walked: no real repository nests this far outside skipped folders.
MAX_DEPTH = 128
# A .gitignore larger than this is reported and its rules ignored (real ones are a few KB).
GITIGNORE_MAX_BYTES = CONFIG_MAX_BYTES
# A .gitignore with more patterns than this is reported and its rules ignored: every path beneath it is matched
# against each pattern (about a microsecond each), so 60,000 patterns cost 11 s for 200 files. The largest
# common templates hold a few hundred.
GITIGNORE_MAX_PATTERNS = 1_000
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
    """What a walk found: source files, import-config files (tsconfig) and problems (skipped folders included)."""

    sources: list[SourceFile] = field(default_factory=list)
    configs: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


@dataclass(frozen=True)
class Ignores:
    """The rules of one .gitignore (or of the ``AriesCodebase.ignore`` setting): the folder they apply beneath
    (``""``: the root), where they come from, and the line number and text of each pattern of ``spec``."""

    base: str
    source: str
    spec: Any
    lines: tuple[tuple[int, str], ...]

    def matches(self, candidate: str) -> bool:
        """Whether ``candidate`` (relative to the root; a folder ends in ``/``) is ignored by these rules."""
        if self.base and not candidate.startswith(self.base + "/"):
            return False
        return bool(self.spec.match_file(candidate[len(self.base) + 1 :] if self.base else candidate))

    def why(self, candidate: str) -> str:
        """The rule that ignores ``candidate``: the source, line and pattern that decided it (the last match)."""
        local = candidate[len(self.base) + 1 :] if self.base else candidate
        decided = None
        for (number, text), pattern in zip(self.lines, self.spec.patterns, strict=False):
            if pattern.include is not None and pattern.match_file(local) is not None:
                decided = (number, text) if pattern.include else None
        if decided is None:
            return f"ignored by {self.source}"
        number, text = decided
        where = f" line {number}" if number else ""
        return f"ignored by {self.source}{where} ({text!r})"


def display_name(rel: str) -> str:
    """``rel`` printable and storable: bytes that are not UTF-8 (surrogate escapes) shown as ``\\xff``."""
    return os.fsencode(rel).decode("utf-8", "backslashreplace")


def gitignore_spec(lines: Iterable[str]) -> tuple[Any, list[tuple[int, str]]]:
    """A ``GitIgnoreSpec`` of the valid lines, and ``(line number, reason)`` for each line left out.

    Git itself ignores a pattern it cannot use; pathspec raises on the whole file (a lone ``!``, a trailing
    backslash), so each line is checked on its own.
    """
    spec, _, bad = _checked_spec(list(lines))
    return spec, bad


def _checked_spec(lines: list[str]) -> tuple[Any, list[tuple[int, str]], list[tuple[int, str]]]:
    """The spec of the valid lines, ``(number, text)`` of each of its patterns, and the lines left out."""
    from pathspec import GitIgnoreSpec

    good: list[tuple[int, str]] = []
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
        good.append((number, line))
    spec = GitIgnoreSpec.from_lines([line for _, line in good])
    return spec, good, bad


def _too_many_stars(line: str) -> bool:
    return any(part != "**" and len(_STARS.findall(part)) > _MAX_STARS for part in line.split("/"))


def read_gitignore(root: Path, rel: str) -> tuple[Ignores | None, list[Problem]]:
    """The rules of the .gitignore ``rel`` (None if it cannot be used) and the problems found reading it
    (missing, unreadable, too large, bad lines: those lines are left out)."""
    try:
        data, _ = read_regular(root, rel, GITIGNORE_MAX_BYTES, walked=True)
    except OSError as exc:
        reason = str(exc) if isinstance(exc, RefusedPathError) else f"unreadable: {exc.strerror or exc}"
        return None, [Problem(rel, f"{reason}; its rules are ignored")]
    if len(data) > GITIGNORE_MAX_BYTES:
        reason = f"too large: over the limit of {GITIGNORE_MAX_BYTES:,} bytes; its rules are ignored"
        return None, [Problem(rel, reason)]
    lines = data.decode("utf-8", "replace").splitlines()
    patterns = sum(1 for line in lines if line.strip() and not line.startswith("#"))
    if patterns > GITIGNORE_MAX_PATTERNS:
        return None, [
            Problem(
                rel,
                f"{patterns:,} patterns, over the limit of {GITIGNORE_MAX_PATTERNS:,}; its rules are ignored",
            )
        ]
    spec, good, bad = _checked_spec(lines)
    problems = [
        Problem(
            rel, f"line {number} ({lines[number - 1][:80]!r}) is not a valid pattern: {reason}; line ignored"
        )
        for number, reason in bad
    ]
    base = rel.rpartition("/")[0]
    return Ignores(base, rel, spec, tuple((n, text.strip()) for n, text in good)), problems


def _extra_rules(extra_ignores: Sequence[str]) -> list[Ignores]:
    """The ``AriesCodebase.ignore`` patterns as rules applying from the root (none: no rules)."""
    if not extra_ignores:
        return []
    spec, good, _ = _checked_spec(list(extra_ignores))
    return [Ignores("", "AriesCodebase.ignore", spec, tuple((0, text) for _, text in good))]


def _ignored_by(candidate: str, ignores: Sequence[Ignores]) -> Ignores | None:
    return next((rules for rules in ignores if rules.matches(candidate)), None)


def folder_rule(rel: str, ignores: Sequence[Ignores], out_dirs: dict[str, str]) -> str | None:
    """Why the folder ``rel`` is skipped before it is opened (its name, an ignore rule, a tsconfig's outDir),
    or None; ``out_dirs`` maps the folders named by an ``outDir`` to the tsconfig that names them."""
    name = rel.rpartition("/")[2]
    if name == OWN_STATE:
        return "Aries' own state (.aries)"
    if name in NAMED_SKIPS:
        return f"{NAMED_SKIPS[name]} ({name})"
    rules = _ignored_by(rel + "/", ignores)
    if rules is not None:
        return rules.why(rel + "/")
    if rel in out_dirs:
        return f"build output (outDir of {out_dirs[rel]})"
    return None


def evidence_rule(
    name: str, names: Callable[[], Iterable[str]], has: Callable[[str], bool], parent_builds: bool
) -> str | None:
    """Why a folder is skipped by what it holds (``has(name)``: whether it holds that entry; ``names()``: all of
    its entries), or None. ``parent_builds``: its parent holds a Python build config (setup.py ...)."""
    if has("pyvenv.cfg"):
        return "virtualenv (pyvenv.cfg)"
    if has("conda-meta"):
        return "conda environment (conda-meta)"
    if has("CACHEDIR.TAG"):  # the Cache Directory Tagging convention: Cargo's target/, among others
        return "cache or build output (CACHEDIR.TAG)"
    if (
        name == "build"
        and parent_builds
        and not has("__init__.py")
        and any(_SETUPTOOLS_BUILD.fullmatch(entry) for entry in names())
    ):
        return "build output (setuptools' build folder next to its build config)"
    return None


def _out_dirs(root: Path, folder: str, config: str) -> dict[str, str]:
    """The folders that the tsconfig/jsconfig ``config`` of ``folder`` names as its outDir or declarationDir
    (relative to the root; only inside ``folder``'s tree)."""
    rel = _join(folder, config)
    try:
        data, _ = read_regular(root, rel, CONFIG_MAX_BYTES, walked=True)
        options = parse_jsonc(data.decode("utf-8", "replace")).get("compilerOptions", {})
    except (OSError, ValueError, AttributeError):
        return {}  # the index reports an unusable tsconfig itself (resolve.load_tsconfigs)
    found = {}
    for key in ("outDir", "declarationDir"):
        value = options.get(key) if isinstance(options, dict) else None
        if isinstance(value, str) and value.strip() and not value.startswith("/"):
            target = posixpath.normpath(posixpath.join(folder, value))
            if target not in (".", "") and not target.startswith(".."):
                found[target] = rel
    return found


@dataclass
class Listed:
    """A folder the walk entered: its handle and entries (a :class:`aries_kernel.rootfs.Folder`, whose ``enter``
    already names the subfolders the walk goes into next; a caller may take names out), and the ignore rules in
    force for its files."""

    folder: Folder
    ignores: Sequence[Ignores]

    def ignored(self, rel: str) -> bool:
        """Whether the file ``rel`` of this folder is ignored (by a .gitignore or the ignore setting)."""
        return _ignored_by(rel, self.ignores) is not None


class ProjectTree:
    """The one walk of a project with its one skip policy (see the module docstring): iterate it for the
    folders it enters, depth first from ``start`` (a walked folder path, ``""`` for the root), each as a
    :class:`Listed`.

    ``start`` itself is walked whatever it is (a caller named it); the rules of the folders above it apply.
    ``on_enter(rel)`` is called for each subfolder before it is listed (the change watcher watches it then, so
    nothing created while it is listed is missed). As it goes, ``skipped`` gets one :class:`Problem` per folder
    not walked, with its rule, and ``problems`` the folders that could not be listed or are nested deeper than
    ``max_depth``, and the .gitignore lines that could not be used.
    """

    def __init__(
        self,
        root: Path,
        extra_ignores: Sequence[str] = (),
        *,
        start: str = "",
        on_enter: Callable[[str], None] | None = None,
        max_depth: int = MAX_DEPTH,
    ) -> None:
        self.root = root
        self.start = start
        self.on_enter = on_enter
        self.max_depth = max_depth
        self.skipped: list[Problem] = []
        self.problems: list[Problem] = []
        self._extra = _extra_rules(extra_ignores)

    def __iter__(self) -> Iterator[Listed]:
        above, out_dirs, builds = _rules_above(self.root, self.start, self._extra)
        rules_of: dict[str, Sequence[Ignores]] = {self.start: above}  # folder to list -> rules from above it
        for folder in walk_folders(self.root, self.start):
            ignores = rules_of.pop(folder.rel)
            if folder.error is not None:
                reason = folder.error.strerror or folder.error
                self.problems.append(Problem(folder.rel or ".", f"cannot list folder: {reason}"))
                continue
            names = {entry.name for entry in folder.entries}
            if folder.rel != self.start:
                parent, _, name = folder.rel.rpartition("/")
                rule = evidence_rule(name, partial(iter, names), names.__contains__, parent in builds)
                if rule is not None:
                    self.skipped.append(_skipped(folder.rel, rule))
                    continue
            if ".gitignore" in names:
                rules, problems = read_gitignore(self.root, _join(folder.rel, ".gitignore"))
                self.problems += problems
                if rules is not None:
                    ignores = [*ignores, rules]
            for config in sorted(CONFIG_FILES & names):
                out_dirs.update(_out_dirs(self.root, folder.rel, config))
            if names & _PYTHON_BUILD_CONFIGS:
                builds.add(folder.rel)
            self._enter(folder, ignores, out_dirs, rules_of)
            entered = list(folder.enter)
            yield Listed(folder, ignores)
            if len(folder.enter) != len(entered):  # the caller took some out: they are never listed
                for name in set(entered) - set(folder.enter):
                    rules_of.pop(_join(folder.rel, name), None)

    def _enter(
        self,
        folder: Folder,
        ignores: Sequence[Ignores],
        out_dirs: dict[str, str],
        rules_of: dict[str, Sequence[Ignores]],
    ) -> None:
        """Decide which subfolders of ``folder`` the walk goes into (``folder.enter``); report the others."""
        for entry in folder.entries:
            if not _utf8(entry.name) or not _is_folder(entry):
                continue  # a folder name that is not UTF-8 is reported by the index's walk
            rel = _join(folder.rel, entry.name)
            rule = folder_rule(rel, ignores, out_dirs)
            if entry.name == OWN_STATE:
                continue
            if rule is not None:
                self.skipped.append(_skipped(rel, rule))
            elif folder.depth >= self.max_depth:
                self.problems.append(
                    Problem(rel, f"folder nested deeper than {self.max_depth} levels; not indexed")
                )
            else:
                rules_of[rel] = ignores
                if self.on_enter is not None:
                    self.on_enter(rel)
                folder.enter.append(entry.name)


def _skipped(rel: str, rule: str) -> Problem:
    return Problem(rel, f"folder skipped: {rule}")


def _is_folder(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def _rules_above(
    root: Path, folder: str, extra: Sequence[Ignores]
) -> tuple[list[Ignores], dict[str, str], set[str]]:
    """What the folders above ``folder`` (and not ``folder`` itself) say about it and its contents: the ignore
    rules in force, the outDirs their tsconfigs name, and which of them hold a Python build config."""
    ignores = list(extra)
    out_dirs: dict[str, str] = {}
    builds: set[str] = set()
    parts = folder.split("/") if folder else []
    for depth in range(len(parts)):
        above = "/".join(parts[:depth])
        names = {
            name
            for name in (".gitignore", *CONFIG_FILES, *_PYTHON_BUILD_CONFIGS)
            if _exists(root, above, name)
        }
        if ".gitignore" in names:
            rules, _ = read_gitignore(root, _join(above, ".gitignore"))
            if rules is not None:
                ignores.append(rules)
        for config in sorted(CONFIG_FILES & names):
            out_dirs.update(_out_dirs(root, above, config))
        if names & _PYTHON_BUILD_CONFIGS:
            builds.add(above)
    return ignores, out_dirs, builds


def _exists(root: Path, folder: str, name: str) -> bool:
    return os.path.lexists(os.path.join(root, folder, name))


def skip_rule(root: Path, rel: str, extra_ignores: Sequence[str] = ()) -> str | None:
    """Why the walk skips the folder ``rel``, or one above it (that folder's rule, named), or None: the same
    rules as :class:`ProjectTree`, for one path without walking the repository."""
    parts = rel.split("/")
    extra = _extra_rules(extra_ignores)
    for depth in range(1, len(parts) + 1):
        folder = "/".join(parts[:depth])
        ignores, out_dirs, builds = _rules_above(root, folder, extra)
        rule = folder_rule(folder, ignores, out_dirs)
        if rule is None:
            rule = evidence_rule(
                parts[depth - 1],
                partial(os.listdir, os.path.join(root, folder)),
                partial(_exists, root, folder),
                "/".join(parts[: depth - 1]) in builds,
            )
        if rule is not None:
            return rule if depth == len(parts) else f"{rule}, in {folder}"
    return None


def walk(root: Path, extra_ignores: list[str] | tuple[str, ...] = ()) -> Walk:
    """Walk ``root`` through :class:`ProjectTree` and classify what is there; the result is sorted by path so
    indexing is deterministic, and its problems include every folder skipped, with its rule."""
    result = Walk()
    tree = ProjectTree(root, extra_ignores)
    for listed in tree:
        _classify(root, listed, tree, result)
    result.problems += tree.skipped + tree.problems
    result.sources.sort(key=lambda s: s.rel)
    result.configs.sort()
    result.problems.sort(key=lambda p: p.rel)
    return result


def indexable(root: Path, rel: str, extra_ignores: list[str] | tuple[str, ...] = ()) -> bool:
    """Whether the walk would index ``rel``: no skipped folder on its way and no ignore rule against it.

    Used to re-index named paths without walking the whole repository.
    """
    parts = rel.split("/")
    if len(parts) > MAX_DEPTH + 1 or not _utf8(rel) or not _regular_inside(root, rel):
        return False
    folder = "/".join(parts[:-1])
    if folder and skip_rule(root, folder, extra_ignores) is not None:
        return False
    ignores, _, _ = _rules_above(root, rel, _extra_rules(extra_ignores))
    return _ignored_by(rel, ignores) is None


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


def _utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _classify(root: Path, listed: Listed, tree: ProjectTree, out: Walk) -> None:
    """Classify one folder's entries (but its subfolders, which the tree decides) into ``out``."""
    folder = listed.folder
    for entry in folder.entries:
        rel = _join(folder.rel, entry.name)
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
            _symlink(root, entry, rel, listed, out)
        elif stat.S_ISREG(mode):
            _file(entry, rel, listed, out)
        elif not stat.S_ISDIR(mode) and _wanted(entry.name) and not listed.ignored(rel):
            out.problems.append(Problem(rel, f"not a regular file ({kind(mode)}); not read"))


def _wanted(name: str) -> bool:
    return language_for_path(name) is not None or name in CONFIG_FILES


def _symlink(root: Path, entry: os.DirEntry[str], rel: str, listed: Listed, out: Walk) -> None:
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
    if not is_dir and (not _wanted(rel) or listed.ignored(rel)):
        return
    rule = None
    if is_dir:
        rule = folder_rule(rel, listed.ignores, {}) or evidence_rule(
            entry.name, lambda: os.listdir(target), lambda name: (target / name).exists(), False
        )
    if rule is not None:
        out.problems.append(_skipped(rel, f"{rule}; a symlink, not followed"))
    elif not target.is_relative_to(root):
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
        _file(entry, rel, listed, out)


def _file(entry: os.DirEntry[str], rel: str, listed: Listed, out: Walk) -> None:
    name = entry.name
    language = language_for_path(name)
    if language is None and name not in CONFIG_FILES:
        return
    if listed.ignored(rel):
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
    """The project's regular files beneath ``start`` (a typed path relative to the root), through the one walk
    (:class:`ProjectTree`): skipped folders are not entered, ignored files not yielded, symlinks never followed.

    ``skip_folder(rel)`` prunes more folders (Glob: those deeper than its pattern reaches); ``max_depth`` bounds
    how many folders deep it goes below ``start`` and ``max_entries`` how many directory entries it looks at.
    ``notes`` says afterwards what was cut. Files come sorted by name within a folder, before its subfolders.
    """

    root: Path
    start: str = "."
    skip_folder: Callable[[str], bool] = lambda rel: False
    max_depth: int = 64
    max_entries: int = 200_000
    notes: list[str] = field(default_factory=list)
    seen: int = 0

    def __iter__(self) -> Iterator[Found]:
        with located(self.root, self.start) as place:
            start = place.rel
            if place.name is not None:
                try:
                    info = os.stat(place.name, dir_fd=place.dir_fd, follow_symlinks=False)
                except FileNotFoundError as exc:
                    error = MissingPathError(f"{self.start} does not exist.")
                    error.errno, error.strerror = exc.errno, exc.strerror
                    raise error from None
                if not stat.S_ISDIR(info.st_mode):
                    if stat.S_ISREG(info.st_mode):
                        yield Found(place.rel, place.dir_fd, place.name, info.st_size, info.st_mtime)
                    return
        tree = ProjectTree(self.root, start=start, max_depth=self.max_depth)
        reported = 0
        for listed in tree:
            yield from self._files(listed)
            for problem in tree.problems[reported:]:
                if problem.reason.startswith("cannot list"):
                    self._note(f"{problem.rel} could not be listed")
                elif problem.reason.startswith("folder nested deeper"):
                    self._note(f"folders more than {self.max_depth} levels deep were not searched")
            reported = len(tree.problems)

    def _files(self, listed: Listed) -> Iterator[Found]:
        """Yield the folder's regular files that are not ignored; prune its subfolders past the limits."""
        folder = listed.folder
        if self.seen >= self.max_entries:
            folder.enter.clear()
            return
        for entry in folder.entries:
            self.seen += 1
            if self.seen > self.max_entries:
                self._note(f"stopped after {self.max_entries:,} entries")
                folder.enter.clear()
                return
            rel = _join(folder.rel, entry.name)
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode) and not listed.ignored(rel):
                yield Found(rel, folder.fd, entry.name, info.st_size, info.st_mtime)
        folder.enter[:] = [name for name in folder.enter if not self.skip_folder(_join(folder.rel, name))]

    def _note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)


def _join(rel_dir: str, name: str) -> str:
    return f"{rel_dir}/{name}" if rel_dir else name
