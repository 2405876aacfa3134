"""The stored form of the file graph: node names, edge arrays and the users index, as one blob.

A warm start loads this instead of resolving every import and weighing every name again: the edges go into
rustworkx in a few calls, from arrays (source, target, payload id). The blob is a length-prefixed
:mod:`marshal` header (file names, their record hashes and statuses, the import configs' hashes, the distinct edge payloads,
the used-name vocabulary, array lengths) followed by the raw arrays. :mod:`.store` keeps it behind the same MAC
as the records; :func:`decode` still checks every field and index range, and raises :class:`BadSnapshot` for
anything else, so a damaged blob means a rebuild, never a crash.
"""

from __future__ import annotations

import hashlib
import marshal
import operator
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["ARRAYS", "BadSnapshot", "Snapshot", "code_digest", "decode", "encode"]

# name, dtype: edges (source and target positions in ``files``, payload id), the users index (see graph.Users:
# per vocabulary name, positions in ``files``) and each file's top-level names (per file, vocabulary ids).
ARRAYS = (
    ("source", "<u4"),
    ("target", "<u4"),
    ("payload", "<u4"),
    ("offsets", "<i8"),
    ("members", "<u4"),
    ("defined_at", "<i8"),
    ("defined", "<u4"),
)
_KINDS = frozenset({"import", "reference"})
_STATUSES = frozenset({"indexed", "partial"})
_HEAD = struct.Struct("<Q")


class BadSnapshot(ValueError):
    """The blob is not a snapshot this version wrote."""


@dataclass
class Snapshot:
    """A graph as stored: ``files`` in node order with their record ``hashes`` and ``languages``; ``key`` is what
    else the edges depend on (root name, import configs, the code that computes them)."""

    key: str
    files: tuple[str, ...]
    hashes: tuple[str, ...]
    statuses: tuple[str, ...]  # indexed or partial: a warm start need not read a record to know it
    languages: tuple[str, ...]
    payloads: tuple[tuple[str, float, bool], ...]
    vocabulary: tuple[str, ...]
    arrays: dict[str, np.ndarray]


_digest: str | None = None


def code_digest() -> str:
    """A digest of this package's code, so edges stored by other code (a resolution fix) are recomputed."""
    global _digest
    if _digest is None:
        blake = hashlib.blake2b(digest_size=16)
        for path in sorted(Path(__file__).parent.glob("*.py")):
            blake.update(path.name.encode() + b"\0" + path.read_bytes())
        _digest = blake.hexdigest()
    return _digest


def encode(snapshot: Snapshot) -> list[memoryview]:
    """The blob of a snapshot, as consecutive parts (the arrays' own memory, not copies)."""
    arrays = [np.ascontiguousarray(snapshot.arrays[name], dtype=dtype) for name, dtype in ARRAYS]
    header = marshal.dumps(
        (
            snapshot.key,
            snapshot.files,
            snapshot.hashes,
            snapshot.statuses,
            snapshot.languages,
            snapshot.payloads,
            snapshot.vocabulary,
            tuple(len(a) for a in arrays),
        )
    )
    return [
        memoryview(_HEAD.pack(len(header))),
        memoryview(header),
        # a.data is memoryview(a), typed: numpy's stubs give ndarray a __buffer__ only for Python 3.12+.
        *(a.data.cast("B") for a in arrays),
    ]


def decode(blob: bytes) -> Snapshot:
    """The snapshot in ``blob``, every field and index checked; :class:`BadSnapshot` otherwise."""
    try:
        (size,) = _HEAD.unpack_from(blob)
        header = marshal.loads(blob[_HEAD.size : _HEAD.size + size])
        key, files, hashes, statuses, languages, payloads, vocabulary, lengths = header
    except (struct.error, EOFError, ValueError, TypeError, MemoryError, RecursionError) as exc:
        raise BadSnapshot(f"undecodable header ({exc})") from None
    _check(isinstance(key, str), "key")
    for name, value in (
        ("files", files),
        ("hashes", hashes),
        ("statuses", statuses),
        ("languages", languages),
        ("vocabulary", vocabulary),
    ):
        _check(isinstance(value, tuple) and _all_of(value, str), name)
    _check(len(hashes) == len(statuses) == len(languages) == len(files) == len(set(files)), "file list")
    _check(set(statuses) <= _STATUSES, "statuses")
    _check(all(map(operator.lt, vocabulary, vocabulary[1:])), "vocabulary order")  # sorted, no repeats
    _check(
        isinstance(payloads, tuple)
        and _all_of(payloads, tuple)
        and all(
            len(p) == 3 and p[0] in _KINDS and type(p[1]) is float and type(p[2]) is bool for p in payloads
        ),
        "payloads",
    )
    _check(isinstance(lengths, tuple) and len(lengths) == len(ARRAYS) and _all_of(lengths, int), "lengths")
    arrays: dict[str, np.ndarray] = {}
    offset = _HEAD.size + size
    for (name, dtype), length in zip(ARRAYS, lengths, strict=True):
        width = np.dtype(dtype).itemsize
        _check(0 <= length and offset + length * width <= len(blob), f"array {name}")
        arrays[name] = np.frombuffer(blob, dtype=dtype, count=length, offset=offset)
        offset += length * width
    _check(offset == len(blob), "trailing bytes")
    edges = len(arrays["source"])
    _check(len(arrays["target"]) == len(arrays["payload"]) == edges, "edge arrays")
    _check(_below(arrays["source"], len(files)) and _below(arrays["target"], len(files)), "edge ends")
    _check(_below(arrays["payload"], len(payloads)), "edge payloads")
    _check(_index(arrays["offsets"], arrays["members"], len(vocabulary), len(files)), "users")
    _check(_index(arrays["defined_at"], arrays["defined"], len(files), len(vocabulary)), "definitions")
    return Snapshot(key, files, hashes, statuses, languages, payloads, vocabulary, arrays)


def _index(offsets: np.ndarray, members: np.ndarray, rows: int, bound: int) -> bool:
    """``offsets`` cut ``members`` (each below ``bound``) into ``rows`` runs."""
    return (
        len(offsets) == rows + 1
        and offsets[0] == 0
        and offsets[-1] == len(members)
        and bool(np.all(np.diff(offsets) >= 0))
        and _below(members, bound)
    )


def _all_of(values: tuple[Any, ...], kind: type) -> bool:
    return set(map(type, values)) <= {kind}  # one pass in C, where a loop over 500,000 names would not be


def _below(values: np.ndarray, bound: int) -> bool:
    return len(values) == 0 or int(values.max()) < bound


def _check(ok: bool, what: str) -> None:
    if not ok:
        raise BadSnapshot(f"malformed {what}")
