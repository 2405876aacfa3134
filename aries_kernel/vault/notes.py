"""Markdown notes on disk: front matter, wiki-links, safe file names and atomic writes.

The files are the source of truth of the vault (Ori/Obsidian layout: ``self/``, ``notes/``, ``inbox/``,
``ops/``). A note's title is its file name without ``.md``; titles given by users or models are sanitized so a
note can never be written outside its vault. Reading a file either returns a :class:`Note` or raises
:class:`NoteError` saying why the file was skipped.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import os
import re
import tempfile
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "FOLDERS",
    "MAX_NOTE_BYTES",
    "Note",
    "NoteError",
    "atomic_write",
    "content_hash",
    "iter_note_files",
    "normalize_title",
    "parse_created",
    "parse_note",
    "parse_text",
    "render_note",
    "safe_path",
    "sanitize_title",
    "title_key",
    "wiki_links",
]

FOLDERS = ("self", "notes", "inbox", "ops")
MAX_NOTE_BYTES = 1024 * 1024
MAX_TITLE_CHARS = 160

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

    @property
    def folder(self) -> str:
        """The top-level folder (``notes``, ``inbox``, ``ops``, ``self``) or ``""`` at the root."""
        head, _, rest = self.path.partition("/")
        return head if rest else ""


def sanitize_title(title: str) -> str:
    """A file-name-safe title: path separators and control characters become ``-``, no leading dots.

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
    cleaned = cleaned[:MAX_TITLE_CHARS].rstrip(" .-")
    if not cleaned:
        raise NoteError(
            f"The title {title!r} is empty once path characters are removed; give the note a real title."
        )
    return cleaned


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


def parse_text(text: str, where: str) -> tuple[dict[str, Any], str]:
    """Split ``text`` into front matter (a dict) and body; ``where`` names the file in errors."""
    match = _FRONT_MATTER.match(text)
    if not match:
        if text.startswith(("---\n", "---\r\n")):
            raise NoteError(
                f"{where}: front matter starts with '---' but never ends; add a closing '---' line."
            )
        return {}, text
    try:
        meta = yaml.safe_load(match.group(1)) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 2}" if mark is not None else ""
        raise NoteError(
            f"{where}:{line} broken YAML front matter ({exc.__class__.__name__}); fix or remove it."
        ) from exc
    if not isinstance(meta, dict):
        raise NoteError(
            f"{where}: front matter must be a mapping of keys to values, not {type(meta).__name__}."
        )
    return meta, text[match.end() :]


def parse_created(value: Any, fallback: float) -> float:
    """Epoch seconds from a front-matter ``created`` value (date, datetime or ISO text), else ``fallback``."""
    if isinstance(value, _dt.datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=_dt.UTC)
        return moment.timestamp()
    if isinstance(value, _dt.date):
        return _dt.datetime(value.year, value.month, value.day, tzinfo=_dt.UTC).timestamp()
    if isinstance(value, str):
        try:
            return parse_created(_dt.datetime.fromisoformat(value.strip()), fallback)
        except ValueError:
            return fallback
    if isinstance(value, (int, float)):
        return float(value)
    return fallback


def parse_note(root: Path, path: Path) -> Note:
    """Read and parse one note file; :class:`NoteError` for binary, oversized, non-UTF-8 or broken files."""
    rel = path.relative_to(root).as_posix()
    stat = path.stat()
    if stat.st_size > MAX_NOTE_BYTES:
        raise NoteError(
            f"{rel}: {stat.st_size:,} bytes is over the {MAX_NOTE_BYTES:,}-byte note limit; split it into smaller notes."
        )
    raw = path.read_bytes()
    if b"\x00" in raw[:8192]:
        raise NoteError(f"{rel}: binary file (NUL bytes), not a markdown note; move it out of the vault.")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NoteError(f"{rel}: not UTF-8 text (byte {exc.start}); re-save it as UTF-8.") from exc
    meta, body = parse_text(text, rel)
    body = body.strip()
    return Note(
        title=path.stem,
        path=rel,
        body=body,
        meta=meta,
        links=wiki_links(body),
        content_hash=content_hash(f"{path.stem}\n{body}"),
        size=stat.st_size,
        mtime_ns=stat.st_mtime_ns,
    )


def render_note(meta: dict[str, Any], body: str) -> str:
    """Markdown text with YAML front matter (keys in the given order)."""
    front = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, default_flow_style=False).strip()
    return f"---\n{front}\n---\n\n{body.strip()}\n"


def safe_path(root: Path, rel: str) -> Path:
    """``root / rel``, refusing anything that resolves outside ``root`` (symlinks included)."""
    base = root.resolve()
    target = (base / rel).resolve()
    if target != base and base not in target.parents:
        raise NoteError(f"Refusing to touch {rel!r}: it resolves outside the vault {base}.")
    return target


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` so readers see the old file or the new one, never half of it (temp file + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def iter_note_files(root: Path) -> list[Path]:
    """Every file under ``root`` except hidden ones (index, archive, temp files), sorted."""
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if name.startswith("."):
                continue
            found.append(Path(dirpath) / name)
    return found
