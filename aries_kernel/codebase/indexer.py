"""Turning a walk into records: reuse what ``index.db`` already knows, parse the rest on every core.

A stored record is reused when the file's size and mtime are unchanged, or when they changed but the content
hash did not. Everything else is parsed in worker processes (:mod:`.parse_workers`: a crash or a hang costs
one file), on every core when there is enough of it to pay for starting the workers, in one worker otherwise.
A worker hashes and profiles each file's definitions and scans its conventions from the tree it parsed for the
record, so the judgment operations never parse the file again: the hashes stay in the record, the profiles and
conventions go to ``on_judgment``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aries_kernel.codebase import extract
from aries_kernel.codebase.extract import Record, content_hash
from aries_kernel.codebase.files import SourceFile
from aries_kernel.codebase.notebooks import file_cap
from aries_kernel.codebase.parse_workers import parse_files
from aries_kernel.codebase.store import JUDGMENT_KINDS, Pending, StoredFile, compact

__all__ = ["JudgmentSink", "Plan", "plan", "run_plan", "too_large"]

# Below this many bytes to parse, starting more than one worker process costs more than it saves.
POOL_MIN_BYTES = 2_000_000
# Files whose judgment data are handed on at a time (they are stored, not kept: a cold index's are 10+ MB).
_JUDGMENT_BATCH = 256
# Judgment data of the parsed files, by kind (see store.JUDGMENT_KINDS): (kind, [(path, content hash, value)]).
JudgmentSink = Callable[[str, list[tuple[str, str, Any]]], None]


@dataclass
class Plan:
    """Which files keep their stored record (a :class:`Pending` one while not read yet) and which must be
    parsed."""

    reused: dict[str, Record | Pending] = field(default_factory=dict)
    to_parse: list[SourceFile] = field(default_factory=list)
    # Stored rows whose stat keys must be refreshed (content unchanged, mtime touched).
    restat: list[tuple[str, int, int, Record | Pending]] = field(default_factory=list)


def too_large(source: SourceFile, max_bytes: int) -> Record:
    """The record of a file over the size limit, made from its stat alone (it is never read)."""
    return {
        "file": source.rel,
        "language": source.language,
        "status": "skipped",
        "reason": f"too large: {source.size:,} bytes, over the limit of {max_bytes:,}",
        "hash": "",
        "size": source.size,
        "loc": 0,
        "symbols": (),
        "imports": (),
        "uses": "",
    }


def plan(root: Path, sources: list[SourceFile], stored: dict[str, StoredFile], max_bytes: int) -> Plan:
    """Split ``sources`` into reusable records and files to parse."""
    result = Plan()
    for source in sources:
        if source.size > (cap := file_cap(source.rel, max_bytes)):
            result.reused[source.rel] = too_large(source, cap)
            continue
        known = stored.get(source.rel)
        if known is None:
            result.to_parse.append(source)
            continue
        size, mtime_ns, digest, record = known
        if size == source.size and mtime_ns == source.mtime_ns:
            result.reused[source.rel] = record
            continue
        try:
            unchanged = digest and content_hash(extract.read_source(str(root), source.rel, cap)) == digest
        except OSError:
            unchanged = False
        if unchanged:
            result.reused[source.rel] = record
            result.restat.append((source.rel, source.size, source.mtime_ns, record))
        else:
            result.to_parse.append(source)
    return result


def run_plan(
    root: Path,
    to_parse: list[SourceFile],
    max_bytes: int,
    workers: int,
    on_progress: Callable[[int], None],
    *,
    budget: float,
    on_judgment: JudgmentSink,
) -> dict[str, Record]:
    """Parse ``to_parse`` in worker processes (see :mod:`.parse_workers`), each file within ``budget``
    seconds; ``on_progress(n)`` is called with the number of files done so far. Definitions get their shape
    and exact hashes, and ``on_judgment(kind, rows)`` gets the ``(path, content hash, value)`` of parsed files'
    ``profiles`` and ``conventions`` in batches, as they come (see :func:`extract.extract_source`)."""
    out: dict[str, Record] = {}
    if not to_parse:
        return out
    batches: dict[str, list[tuple[str, str, Any]]] = {kind: [] for kind in sorted(JUDGMENT_KINDS)}

    def done(record: Record) -> None:
        for kind, batch in batches.items():
            if kind in record:
                batch.append((record["file"], record["hash"], record.pop(kind)))
                if len(batch) >= _JUDGMENT_BATCH:
                    on_judgment(kind, batch[:])
                    batch.clear()
        out[record["file"]] = compact(record)  # names interned as they arrive: far less memory at peak
        on_progress(len(out))

    if sum(s.size for s in to_parse) < POOL_MIN_BYTES:
        workers = 1
    items = [(s.rel, s.language) for s in sorted(to_parse, key=lambda s: -s.size)]  # the last files are short
    parse_files(str(root), items, max_bytes, True, budget, workers, done)
    for kind, batch in batches.items():
        if batch:
            on_judgment(kind, batch)
    return out


def default_workers() -> int:
    """One worker per core the process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1
