"""The per-user key that authenticates ``.aries/index.db`` records: ``$ARIES_INDEX_KEY`` or ``~/.aries/index.key``.

A repository can commit its own ``index.db``, and :mod:`marshal` is not safe against crafted data, so a record
is unmarshalled only when its MAC verifies under this key, which lives in the user's home and never in a
repository. The key is 32 random bytes, created 0600 on first use: written to a private temporary file and
linked into place, so a kernel starting at the same moment reads the whole key or creates none. When the key
can be neither read nor created (a read-only home, no home at all), a random key for this process is used and
logged once: indexing works, but the index is not reused across restarts.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
import stat
import threading
from dataclasses import dataclass
from pathlib import Path

from aries_kernel.paths import aries_path

__all__ = ["KEY_BYTES", "TAG_BYTES", "IndexKey", "index_key", "key_path", "read_key"]

KEY_BYTES = 32
TAG_BYTES = 32
log = logging.getLogger(__name__)

_lock = threading.Lock()
# By key file location, and process-wide on purpose: the key is the user's, not a kernel's. Two kernels of one
# process indexing one repository must tag its rows alike, and so must share a process-only key when the file
# cannot be had (each with its own would empty the other's rows); the file is read, or warned about, once.
_keys: dict[str, IndexKey] = {}


@dataclass(frozen=True)
class IndexKey:
    """A MAC key; ``persistent`` is False for a key that lives only as long as this process."""

    secret: bytes
    persistent: bool

    def tag(self, fields: tuple[str, int, int, str], *blob: bytes | memoryview) -> bytes:
        """The MAC of one stored row: its path, stat keys and hash, then the record's bytes (given whole or in
        consecutive parts, so a large blob need not be joined first)."""
        mac = hashlib.blake2b(key=self.secret, digest_size=TAG_BYTES, person=b"aries-index")
        # Paths hold no NUL, so the joined header is unambiguous; surrogates pass, sqlite refuses them later.
        mac.update("\0".join(map(str, fields)).encode("utf-8", "surrogatepass") + b"\0")
        for part in blob:
            mac.update(part)
        return mac.digest()

    def verifies(self, fields: tuple[str, int, int, str], blob: bytes | memoryview, tag: bytes) -> bool:
        """Whether ``tag`` is this key's MAC of the row (compared in constant time)."""
        return hmac.compare_digest(self.tag(fields, blob), tag)

    @property
    def marker(self) -> str | None:
        """What ``index.db`` records about a process-only key (None for the user's key), so a later process
        knows those rows' key is gone and empties them instead of taking them for a foreign index."""
        if self.persistent:
            return None
        return "process:" + hashlib.blake2b(b"marker", key=self.secret, digest_size=8).hexdigest()


def key_path() -> Path:
    """Where the user's key lives: ``$ARIES_INDEX_KEY``, else ``~/.aries/index.key``.

    Raises RuntimeError when there is no home folder to find.
    """
    return aries_path("ARIES_INDEX_KEY", default="index.key")


def index_key() -> IndexKey:
    """The user's key, read or created once per process; a process-only key when that is impossible."""
    with _lock:
        try:
            path: Path | None = key_path()
        except RuntimeError:  # no HOME and no passwd entry (some containers)
            path = None
        name = str(path)
        if name not in _keys:
            _keys[name] = _load(path)
        return _keys[name]


def _load(path: Path | None) -> IndexKey:
    try:
        if path is None:
            raise OSError("no home folder")
        return IndexKey(_read_or_create(path), persistent=True)
    except (OSError, ValueError) as exc:
        log.warning(
            "No per-user index key at %s (%s); using a key for this process only, so .aries/index.db "
            "files are not reused across restarts (set ARIES_INDEX_KEY to a writable file path)",
            path,
            exc,
        )
        return IndexKey(secrets.token_bytes(KEY_BYTES), persistent=False)


def _read_or_create(path: Path) -> bytes:
    try:
        return read_key(path)
    except FileNotFoundError:
        pass
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    secret = secrets.token_bytes(KEY_BYTES)
    temp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(secret)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(temp, path)  # never replaces: a key another kernel created first wins
        except FileExistsError:
            return read_key(path)
    finally:
        temp.unlink(missing_ok=True)
    return secret


def read_key(path: Path) -> bytes:
    """The key in the file at ``path``: exactly 32 bytes, a regular file (no symlink, FIFO or device)."""
    # O_NOFOLLOW: a symlink is refused; O_NONBLOCK: a FIFO there does not block the open.
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise ValueError(f"{path} is not a regular file")
        data = handle.read(KEY_BYTES + 1)
    if len(data) != KEY_BYTES:
        raise ValueError(f"{path} does not hold a {KEY_BYTES}-byte key")
    return data
