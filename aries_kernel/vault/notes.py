"""Markdown notes on disk: front matter, wiki-links, safe file names and atomic writes.

The files are the source of truth of the vault (Ori/Obsidian layout: ``self/``, ``notes/``, ``inbox/``,
``ops/``). A note's title is its file name without ``.md``; titles given by users or models are sanitized so a
note can never be written outside its vault. Reading a file either returns a :class:`Note` or raises
:class:`NoteError` saying which file was skipped and why.

Hostile files are expected: every file access goes through :mod:`aries_kernel.rootfs` with ``follow_links=False``
(the vault follows no symlink at all): only regular files are read (a symlink, FIFO or device file is refused
without being opened, and the open itself uses ``O_NOFOLLOW`` under a walk of directory handles from the vault
root, so nothing swapped in between is followed out), reads stop at :data:`MAX_NOTE_BYTES`, and front matter is
parsed by a YAML safe loader capped in bytes, nesting depth and alias expansion (no billion laughs). Writes and
moves go through the same directory handles, so a folder swapped for a symlink cannot redirect them.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import hashlib
import math
import os
import re
import stat as _stat
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from aries_kernel import rootfs

__all__ = [
    "FOLDERS",
    "MAX_FRONT_MATTER_BYTES",
    "MAX_NOTE_BYTES",
    "MAX_YAML_DEPTH",
    "MAX_YAML_NODES",
    "Note",
    "NoteError",
    "atomic_write",
    "content_hash",
    "iter_note_files",
    "move_file",
    "normalize_title",
    "not_a_file",
    "note_exists",
    "parse_created",
    "parse_note",
    "parse_text",
    "read_note_bytes",
    "remove_file",
    "render_note",
    "sanitize_title",
    "title_key",
    "wiki_links",
]

FOLDERS = ("self", "notes", "inbox", "ops")
MAX_NOTE_BYTES = 1024 * 1024
# A file name is at most 255 bytes on common file systems (ext4, XFS, btrfs, APFS), whatever the characters: a
# title is cut in UTF-8 bytes, leaving room for ".md" and the " (n)" that the archive adds to a name already taken.
MAX_FILE_NAME_BYTES = 255
MAX_TITLE_BYTES = MAX_FILE_NAME_BYTES - len(".md") - len(" (99999)")
# Front matter is a handful of keys: these caps keep a hostile one cheap to refuse (PyYAML's scanner is
# quadratic in flow nesting, its composer and constructor recurse, and aliases multiply what a reader expands).
MAX_FRONT_MATTER_BYTES = 64 * 1024
MAX_YAML_DEPTH = 64
MAX_YAML_NODES = 100_000

# [[target]], [[target|alias]], [[target#heading]], [[target#heading|alias]]
_WIKILINK = re.compile(r"\[\[([^\[\]|#\n]*)(?:#([^\[\]|\n]*))?(?:\|([^\[\]\n]*))?\]\]")
_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)
_UNSAFE = re.compile(r'[\\/:*?"<>|\x00-\x1f\x7f]+')
_PUNCT = re.compile(r"[^\w\s]+")


class NoteError(ValueError):
    """A file or title that cannot be a note; the message says which file and what to do."""


@dataclass
class Note:
    """One parsed note: ``path`` is relative to the vault root, ``meta`` is its front matter."""

    title: str
    path: str
    body: str
    meta: dict[str, Any] = field(default_factory=dict)
    links: list[str] = field(default_factory=list)
    content_hash: str = ""
    size: int = 0
    mtime_ns: int = 0
    created: float = 0.0
    # Things wrong with a note that still loads (a ``created`` that is not a date): reported, not fatal.
    problems: list[str] = field(default_factory=list)

    @property
    def folder(self) -> str:
        """The top-level folder (``notes``, ``inbox``, ``ops``, ``self``) or ``""`` at the root."""
        head, _, rest = self.path.partition("/")
        return head if rest else ""


def sanitize_title(title: str) -> str:
    """A file-name-safe title: path separators and control characters become ``-``, no leading dots, and at most
    :data:`MAX_TITLE_BYTES` in UTF-8 (cut where a character ends, see :func:`_cut_utf8`).

    ``"../x"`` becomes ``"x"``, ``"a/b"`` becomes ``"a-b"``; an empty result raises :class:`NoteError`.
    """
    if not isinstance(title, str):
        raise NoteError(f"A note title must be a string, not {type(title).__name__}.")
    cleaned = unicodedata.normalize("NFC", title).strip()
    cleaned = _UNSAFE.sub("-", cleaned)
    # "." and ".." segments would climb out of the vault once a separator is involved; drop them outright.
    parts = [p for p in cleaned.split("-") if not (p.strip() and set(p.strip()) == {"."})]
    cleaned = "-".join(parts)
    cleaned = re.sub(r"-{2,}", "-", cleaned).strip(" .-")
    cleaned = _cut_utf8(cleaned, MAX_TITLE_BYTES).rstrip(" .-")
    if not cleaned:
        raise NoteError(
            f"The title {title!r} is empty once path characters are removed; give the note a real title."
        )
    return cleaned


_ZWJ = "\u200d"
_REGIONAL_INDICATORS = "".join(map(chr, range(0x1F1E6, 0x1F200)))


def _cut_utf8(text: str, limit: int) -> str:
    """The longest prefix of ``text`` within ``limit`` UTF-8 bytes that ends where a reader sees a character end:
    never inside a multi-byte character, nor before a combining mark, variation selector, skin-tone modifier or
    tag, nor on either side of a zero-width joiner, nor between the two halves of a flag."""
    if len(text.encode("utf-8")) <= limit:
        return text
    end = len(text.encode("utf-8")[:limit].decode("utf-8", errors="ignore"))
    while end > 0 and (_extends(text[end]) or text[end - 1] == _ZWJ):
        end -= 1
    indicators = len(text[:end]) - len(text[:end].rstrip(_REGIONAL_INDICATORS))
    return text[: end - indicators % 2]  # an odd run of regional indicators ends in half a flag


def _extends(char: str) -> bool:
    """Whether ``char`` belongs to the character before it (combining, joining, selecting or modifying it)."""
    point = ord(char)
    return (
        unicodedata.category(char) in ("Mn", "Mc", "Me")
        or char == _ZWJ
        or 0xFE00 <= point <= 0xFE0F  # variation selectors (text or emoji presentation)
        or 0x1F3FB <= point <= 0x1F3FF  # skin-tone modifiers
        or 0xE0020 <= point <= 0xE007F  # tags (subdivision flags)
        or 0xE0100 <= point <= 0xE01EF  # variation selectors supplement
    )


def title_key(title: str) -> str:
    """The case-insensitive lookup key of a title (what wiki-links and ``read`` match on)."""
    return sanitize_title(title).casefold()


def normalize_title(title: str) -> str:
    """Title reduced to lowercase words, for near-duplicate detection ("Cats purr." == "cats  purr")."""
    return " ".join(_PUNCT.sub(" ", title.casefold()).split())


def content_hash(text: str) -> str:
    """SHA-256 of ``"title\nbody"``: the key of cached embeddings and of exact-duplicate detection."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def wiki_links(text: str) -> list[str]:
    """Link targets in ``text`` as lookup keys, in order, without duplicates (alias and heading dropped)."""
    seen: dict[str, None] = {}
    for match in _WIKILINK.finditer(text):
        target = match.group(1).strip()
        if not target:
            continue
        try:
            seen.setdefault(title_key(target), None)
        except NoteError:
            continue
    return list(seen)


class _TooComplex(yaml.YAMLError):
    """Front matter over the depth or alias-expansion cap (raised while composing, before construction)."""


class _FrontMatterLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` with a nesting cap, an alias-expansion cap and dates that may be invalid.

    PyYAML shares one object between an anchor and its aliases, so a billion-laughs document loads small but
    explodes for whoever walks it (``str()``, ``yaml.safe_dump``, JSON); the composed node graph is measured as if
    every alias were copied out, and refused past :data:`MAX_YAML_NODES` nodes, :data:`MAX_YAML_DEPTH` levels or
    on a recursive alias.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise _TooComplex(f"nested more than {MAX_YAML_DEPTH} levels deep")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self) -> Any:
        node = super().compose_document()
        _check_expansion(node)
        return node

    def construct_lenient_timestamp(self, node: yaml.ScalarNode) -> Any:
        # "2024-13-45" looks like a date to the resolver and then fails to construct; keep it as text, so the
        # note loads and parse_created() reports the bad value by name.
        try:
            return self.construct_yaml_timestamp(node)
        except (ValueError, OverflowError):
            return self.construct_scalar(node)


_FrontMatterLoader.add_constructor(
    "tag:yaml.org,2002:timestamp", _FrontMatterLoader.construct_lenient_timestamp
)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _check_expansion(root: yaml.Node | None) -> None:
    """Raise :class:`_TooComplex` if ``root``, aliases expanded, is too big, too deep or recursive."""
    if root is None:
        return
    # Iterative post-order walk, memoized per node (aliases are the same node object): linear in the graph.
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            kids = _children(node)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            depth[key] = 1 + max((depth[id(k)] for k in kids), default=0)
            if size[key] > MAX_YAML_NODES:
                raise _TooComplex(f"aliases expand to over {MAX_YAML_NODES:,} values (an alias bomb?)")
            if depth[key] > MAX_YAML_DEPTH:
                raise _TooComplex(f"aliases nest values more than {MAX_YAML_DEPTH} levels deep")
            continue
        if key in size:
            continue
        if key in on_path:
            raise _TooComplex("an alias refers to a value that contains it (recursive alias)")
        on_path.add(key)
        stack.append((node, True))
        stack.extend((kid, False) for kid in _children(node) if id(kid) not in size)


def _flow_depth(text: str) -> int:
    """The deepest nesting of ``[``/``{`` in ``text``, brackets in quotes counted too (an upper bound)."""
    deepest = level = 0
    for char in text:
        if char in "[{":
            level += 1
            deepest = max(deepest, level)
        elif char in "]}" and level:
            level -= 1
    return deepest


def parse_text(text: str, where: str) -> tuple[dict[str, Any], str]:
    """Split ``text`` into front matter (a dict) and body; ``where`` names the file in errors.

    Raises :class:`NoteError` (never anything else) for front matter that does not end, is over
    :data:`MAX_FRONT_MATTER_BYTES`, is not a mapping, is broken YAML, or is nested or aliased past the caps."""
    if not isinstance(text, str):
        raise NoteError(f"{where}: a note must be text, not {type(text).__name__}.")
    match = _FRONT_MATTER.match(text)
    if not match:
        if text.startswith(("---\n", "---\r\n")):
            raise NoteError(
                f"{where}: front matter starts with '---' but never ends; add a closing '---' line."
            )
        return {}, text
    front = match.group(1)
    size = len(front.encode("utf-8", errors="replace"))
    if size > MAX_FRONT_MATTER_BYTES:
        raise NoteError(
            f"{where}: front matter is {size:,} bytes, over the {MAX_FRONT_MATTER_BYTES:,}-byte limit; "
            "keep it to a few keys and move the rest into the body."
        )
    if _flow_depth(front) > MAX_YAML_DEPTH:
        # Checked before parsing: PyYAML's scanner takes quadratic time on deep [ and { nesting.
        raise NoteError(
            f"{where}: front matter nests brackets more than {MAX_YAML_DEPTH} levels deep; flatten it."
        )
    try:
        meta = yaml.load(front, Loader=_FrontMatterLoader)
    except _TooComplex as exc:
        raise NoteError(f"{where}: front matter refused: {exc}; simplify it.") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 2}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or exc.__class__.__name__
        raise NoteError(
            f"{where}:{line} broken YAML front matter ({exc.__class__.__name__}: {problem}); fix or remove it."
        ) from exc
    except Exception as exc:  # noqa: BLE001 - PyYAML's constructors also raise ValueError, IndexError...
        raise NoteError(
            f"{where}: broken YAML front matter ({exc.__class__.__name__}: {exc}); fix or remove it."
        ) from exc
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise NoteError(
            f"{where}: front matter must be a mapping of keys to values, not {type(meta).__name__}."
        )
    return meta, text[match.end() :]


def parse_created(value: Any, fallback: float, where: str = "") -> tuple[float, str | None]:
    """Epoch seconds from a front-matter ``created`` value (date, datetime, ISO text or a number) and ``None``;
    ``(fallback, problem)`` when the value is there but is not a valid moment (``2024-13-45``, ``.nan``)."""
    if value is None:
        return fallback, None
    seconds: float | None = None
    try:
        if isinstance(value, _dt.datetime):
            moment = value if value.tzinfo else value.replace(tzinfo=_dt.UTC)
            seconds = moment.timestamp()
        elif isinstance(value, _dt.date):
            seconds = _dt.datetime(value.year, value.month, value.day, tzinfo=_dt.UTC).timestamp()
        elif isinstance(value, str):
            return parse_created(_dt.datetime.fromisoformat(value.strip()), fallback, where)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            seconds = float(value)
    except (ValueError, OverflowError, OSError):
        seconds = None
    if seconds is not None and math.isfinite(seconds) and _MIN_CREATED <= seconds <= _MAX_CREATED:
        return seconds, None
    shown = repr(value) if not isinstance(value, str) else value
    return fallback, (
        f"{where}: 'created: {shown[:60]}' is not a valid date or time; the file's modification time is used "
        "instead (write it as YYYY-MM-DD)."
    )


# datetime's own range (years 1 to 9999), as epoch seconds.
_MIN_CREATED = _dt.datetime(1, 1, 1, tzinfo=_dt.UTC).timestamp()
_MAX_CREATED = _dt.datetime(9999, 12, 31, tzinfo=_dt.UTC).timestamp()


def not_a_file(mode: int) -> str | None:
    """Why an ``lstat`` mode is not a note the vault reads (a symlink, FIFO, device...), or None."""
    if _stat.S_ISREG(mode):
        return None
    if _stat.S_ISLNK(mode):
        return "a symbolic link, not followed (the vault reads only regular files inside its folder)"
    if _stat.S_ISDIR(mode):
        return "a folder, not a note"
    kinds = {
        _stat.S_ISFIFO: "a FIFO (named pipe)",
        _stat.S_ISCHR: "a character device",
        _stat.S_ISBLK: "a block device",
        _stat.S_ISSOCK: "a socket",
    }
    kind = next((name for test, name in kinds.items() if test(mode)), "not a regular file")
    return f"{kind}, not a regular file; the vault reads only regular files"


def _parts(rel: str) -> list[str]:
    parts = rel.split("/")
    if not rel or any(p in ("", ".", "..") or "\x00" in p for p in parts):
        raise NoteError(f"Refusing the path {rel!r}: it must be a plain path inside the vault.")
    return parts


@contextlib.contextmanager
def _confined(rel: str) -> Iterator[None]:
    """A path :mod:`aries_kernel.rootfs` refused (a symlink on the way, a file where a folder should be) as a
    :class:`NoteError` naming it; other system errors stay ``OSError``."""
    try:
        yield
    except rootfs.RefusedPathError as exc:
        raise NoteError(str(exc)) from exc
    except rootfs.FailedPathError as exc:
        if exc.errno != errno.ENOTDIR:
            raise
        raise NoteError(f"{exc} {rel!r} is not a plain path inside the vault.") from exc


def read_note_bytes(root: Path, rel: str) -> tuple[bytes, os.stat_result]:
    """The bytes of the regular file ``root/rel`` (at most :data:`MAX_NOTE_BYTES`) and its stat.

    :class:`NoteError` names the file when it is a symlink, FIFO, device or folder (none of them opened for
    reading, so nothing blocks), or is over the size limit."""
    _parts(rel)
    with _confined(rel), rootfs.located(root, rel, walked=True, follow_links=False) as place:
        assert place.name is not None  # _parts refused "", "." and ".."
        kind = not_a_file(os.lstat(place.name, dir_fd=place.dir_fd).st_mode)
        if kind:
            raise NoteError(f"{rel}: {kind}.")
        raw, info = rootfs.read_stat_at(place.dir_fd, place.name, MAX_NOTE_BYTES, rel)
    if info.st_size > MAX_NOTE_BYTES:
        raise NoteError(
            f"{rel}: {info.st_size:,} bytes is over the {MAX_NOTE_BYTES:,}-byte note limit; "
            "split it into smaller notes."
        )
    if len(raw) > MAX_NOTE_BYTES:
        raise NoteError(f"{rel}: grew over the {MAX_NOTE_BYTES:,}-byte note limit while being read.")
    return raw, info


def parse_note(root: Path, path: Path) -> Note:
    """Read and parse one note file; :class:`NoteError` (naming the file) for anything that is not a readable
    markdown note: not a regular file, oversized, binary, not UTF-8, or broken front matter."""
    rel = path.relative_to(root).as_posix()
    raw, info = read_note_bytes(root, rel)
    if b"\x00" in raw[:8192]:
        raise NoteError(f"{rel}: binary file (NUL bytes), not a markdown note; move it out of the vault.")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NoteError(f"{rel}: not UTF-8 text (byte {exc.start}); re-save it as UTF-8.") from exc
    meta, body = parse_text(text, rel)
    body = body.strip()
    created, problem = parse_created(meta.get("created"), info.st_mtime_ns / 1e9, rel)
    return Note(
        title=path.stem,
        path=rel,
        body=body,
        meta=meta,
        links=wiki_links(body),
        content_hash=content_hash(f"{path.stem}\n{body}"),
        size=info.st_size,
        mtime_ns=info.st_mtime_ns,
        created=created,
        problems=[problem] if problem else [],
    )


def render_note(meta: dict[str, Any], body: str) -> str:
    """Markdown text with YAML front matter (keys in the given order)."""
    front = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, default_flow_style=False).strip()
    return f"---\n{front}\n---\n\n{body.strip()}\n"


def note_exists(root: Path, rel: str) -> bool:
    """Whether anything (a symlink included) is at ``root/rel``; a symlinked folder on the way is refused, as it
    could lead outside the vault."""
    _parts(rel)
    with _confined(rel):
        try:
            return rootfs.exists(root, rel, walked=True, follow_links=False)
        except rootfs.RefusedPathError as exc:
            raise NoteError(
                f"Refusing to touch {rel!r}: it could lead outside the vault {root} ({exc})"
            ) from exc


def atomic_write(root: Path, rel: str, text: str) -> os.stat_result:
    """Write ``text`` to ``root/rel`` so readers see the old file or the new one, never half of it (temp file
    + rename, both inside a folder handle reached without following symlinks); returns the new file's stat."""
    _parts(rel)
    root.mkdir(parents=True, exist_ok=True)
    with (
        _confined(rel),
        rootfs.located(root, rel, walked=True, follow_links=False, create_folders=True) as place,
    ):
        assert place.name is not None  # _parts refused "", "." and ".."
        rootfs.replace_at(place.dir_fd, place.name, text.encode("utf-8"), rel)
        return os.stat(place.name, dir_fd=place.dir_fd, follow_symlinks=False)


def move_file(root: Path, src: str, dst: str) -> None:
    """Rename ``root/src`` to ``root/dst`` (folders of ``dst`` created), both reached without following symlinks."""
    _parts(src)
    _parts(dst)
    with _confined(src):
        rootfs.move(root, src, dst, walked=True, follow_links=False)


def remove_file(root: Path, rel: str) -> bool:
    """Unlink ``root/rel`` (a final symlink itself, never its target) by its folder's handle; returns whether
    something was there."""
    _parts(rel)
    with _confined(rel):
        return rootfs.remove(root, rel, walked=True)


def iter_note_files(root: Path) -> tuple[list[Path], list[tuple[str, str]]]:
    """Every entry under ``root`` that is not a folder or hidden (index, archive, temp files), sorted, and the
    (path, reason) of folders that could not be listed. Symlinks are listed, never descended (the walk is
    :func:`aries_kernel.rootfs.walk_folders`, by handle and without recursion)."""
    found: list[Path] = []
    problems: list[tuple[str, str]] = []
    for folder in rootfs.walk_folders(root):
        rel = folder.rel or "."
        if folder.error is not None:
            problems.append((rel, f"{rel}: folder not listed ({folder.error.strerror or folder.error})"))
            continue
        for entry in folder.entries:
            if entry.name.startswith("."):
                continue
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if is_dir:
                folder.enter.append(entry.name)
            else:
                found.append(root / folder.rel / entry.name)
    return sorted(found), problems
