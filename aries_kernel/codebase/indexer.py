"""Turning a walk into records: reuse what ``index.db`` already knows, parse the rest on every core.

A stored record is reused when the file's size and mtime are unchanged, or when they changed but the content
hash did not. Everything else is parsed, in a process pool (spawned, so it is safe from a threaded kernel) when
there is enough of it to pay for starting the workers, in the calling thread otherwise.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path

from aries_kernel.codebase import extract
from aries_kernel.codebase.extract import Record, content_hash, extract_batch, extract_file
from aries_kernel.codebase.files import SourceFile
from aries_kernel.codebase.store import Pending, StoredFile, compact

__all__ = ["Plan", "plan", "run_plan", "too_large"]

# Below this many bytes to parse, starting worker processes costs more than it saves.
log = logging.getLogger(__name__)

POOL_MIN_BYTES = 2_000_000
_BATCH_BYTES = 400_000
_BATCH_FILES = 64


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
        "reason": f"too large: {source.size:,} bytes (limit {max_bytes:,})",
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
        if source.size > max_bytes:
            result.reused[source.rel] = too_large(source, max_bytes)
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
            unchanged = (
                digest and content_hash(extract.read_source(str(root), source.rel, max_bytes)) == digest
            )
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
    hashes: bool = False,
) -> dict[str, Record]:
    """Parse ``to_parse``; ``on_progress(n)`` is called with the number of files done so far. ``hashes``
    also computes the definitions' shape and exact hashes (see :func:`extract.extract_source`)."""
    items = [(str(root), s.rel, s.language) for s in to_parse]
    total_bytes = sum(s.size for s in to_parse)
    out: dict[str, Record] = {}
    if workers <= 1 or total_bytes < POOL_MIN_BYTES:
        for base, rel, language in items:
            out[rel] = compact(extract_file(base, rel, language, max_bytes, hashes))
            on_progress(len(out))
        return out
    import multiprocessing

    batches = _batches(items, [s.size for s in to_parse])
    context = multiprocessing.get_context("spawn")
    try:
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            futures = [pool.submit(extract_batch, batch, max_bytes, hashes) for batch in batches]
            for future in as_completed(futures):
                for record in future.result():  # names interned as they arrive: far less memory at peak
                    out[record["file"]] = compact(record)
                on_progress(len(out))
    except BrokenProcessPool:
        # Spawned workers re-import the main module: a script that indexes at import time, without an
        # `if __name__ == "__main__":` guard, kills them. Finish in this process rather than fail.
        log.warning(
            "The indexing worker processes died (a script without a __main__ guard?); indexing "
            "the remaining files in this process."
        )
        for base, rel, language in items:
            if rel not in out:
                out[rel] = compact(extract_file(base, rel, language, max_bytes, hashes))
                on_progress(len(out))
    return out


def _batches(items: list[tuple[str, str, str]], sizes: list[int]) -> list[list[tuple[str, str, str]]]:
    """Group files into batches of bounded size, biggest files first so the last batches are short."""
    order = sorted(range(len(items)), key=lambda i: -sizes[i])
    batches: list[list[tuple[str, str, str]]] = []
    current: list[tuple[str, str, str]] = []
    current_bytes = 0
    for i in order:
        current.append(items[i])
        current_bytes += sizes[i]
        if current_bytes >= _BATCH_BYTES or len(current) >= _BATCH_FILES:
            batches.append(current)
            current, current_bytes = [], 0
    if current:
        batches.append(current)
    return batches


def default_workers() -> int:
    """One worker per core the process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1
