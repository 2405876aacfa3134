"""Every definition of the index as compact numpy columns, for the operations that look at all of them.

A repository of 25,000 files holds about half a million definitions. As a DataFrame of Python strings (the public
``symbol_table()``) they take about 300 MB, mostly in strings no two rows share: signatures and two hex hashes.
:class:`Definitions` keeps, per definition, references to strings the records already share (names, kinds and
parents are interned, the path and language are one string per file), three integers and the two hashes as
fixed-width bytes: about 120 bytes a row. Signatures are read from the records only for the rows an answer
shows (:meth:`Definitions.frame`), a batch of files at a time, so a warm start's pending records stay pending.

The index stores the columns with the graph they were read from (:meth:`Definitions.blob`), so the first
query of a warm start that needs them loads one blob instead of decoding every record.
"""

from __future__ import annotations

import marshal
import struct
from array import array
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

    from aries_kernel.codebase.store import Records

__all__ = ["SYMBOL_COLUMNS", "Definitions"]

# The columns of ``Codebase.symbol_table()``, in order.
SYMBOL_COLUMNS = (
    "name",
    "kind",
    "file",
    "line",
    "end_line",
    "signature",
    "language",
    "shape_hash",
    "exact_hash",
    "parent",
)
# Hex digests of 16 bytes (shapes._DIGEST_SIZE, extract's content hash): "" where a definition has none.
_HASH = "S32"
# The blob's first bytes: the length of its header.
_LENGTH = struct.Struct("<Q")
# Hashes collected as Python strings before they are packed into one fixed-width array.
_CHUNK = 50_000


def _packed(hashes: list[str | None]) -> np.ndarray:
    return np.array([h or "" for h in hashes], dtype=_HASH)


def _objects(values: Sequence[str]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


@dataclass(frozen=True, eq=False)
class Definitions:
    """One row per definition of every record not skipped, in record order; ``position`` is the definition's
    index in its record's ``symbols``, by which :meth:`frame` finds its signature."""

    records: Records
    name: np.ndarray  # object: interned str
    kind: np.ndarray  # object: interned str
    parent: np.ndarray  # object: interned str, "" at top level
    file: np.ndarray  # object: the record's path
    language: np.ndarray  # object: the record's language
    line: np.ndarray  # int64
    end_line: np.ndarray  # int64
    position: np.ndarray  # int64
    shape_hash: np.ndarray  # S32
    exact_hash: np.ndarray  # S32

    @classmethod
    def of(cls, records: Records) -> Definitions:
        """The definitions of ``records``, read with :meth:`Records.scan` (a batch at a time, none kept)."""
        names: list[str] = []
        kinds: list[str] = []
        parents: list[str] = []
        files: list[str] = []
        languages: list[str] = []
        lines, ends, positions = array("q"), array("q"), array("q")
        shapes: list[np.ndarray] = []
        exacts: list[np.ndarray] = []
        shape_text: list[str | None] = []
        exact_text: list[str | None] = []
        for rel, record in records.scan():
            symbols = record["symbols"]
            if record["status"] == "skipped" or not symbols:
                continue
            name, kind, line, end_line, _signature, parent, shape, exact = zip(*symbols, strict=True)
            count = len(symbols)
            names += name
            kinds += kind
            parents += parent
            files += [rel] * count
            languages += [record["language"]] * count
            lines.extend(line)
            ends.extend(end_line)
            positions.extend(range(count))
            shape_text += shape
            exact_text += exact
            if len(shape_text) >= _CHUNK:
                shapes.append(_packed(shape_text))
                exacts.append(_packed(exact_text))
                shape_text, exact_text = [], []
        shapes.append(_packed(shape_text))
        exacts.append(_packed(exact_text))
        return cls(
            records=records,
            name=_objects(names),
            kind=_objects(kinds),
            parent=_objects(parents),
            file=_objects(files),
            language=_objects(languages),
            line=np.frombuffer(lines, dtype=np.int64),
            end_line=np.frombuffer(ends, dtype=np.int64),
            position=np.frombuffer(positions, dtype=np.int64),
            shape_hash=np.concatenate(shapes),
            exact_hash=np.concatenate(exacts),
        )

    def blob(self, graph_tag: bytes) -> list[memoryview]:
        """The table as the index stores it, in consecutive parts: the length of a marshalled header (the
        graph's MAC; the files and their languages once each, with their definition counts; names, kinds and
        parents as tuples of strings, which marshal writes once each however many rows share them), the
        header, padding to 8 bytes, then the number and hash columns' own buffers (no copy of them is made).
        :meth:`from_blob` reads it back."""
        starts = (
            np.flatnonzero(np.r_[True, self.file[1:] != self.file[:-1]]) if len(self) else np.empty(0, int)
        )
        counts = np.diff(np.r_[starts, len(self)]).astype(np.int64)
        header = marshal.dumps(
            (
                graph_tag,
                tuple(self.file[starts]),
                tuple(self.language[starts]),
                counts.tobytes(),
                tuple(self.name),
                tuple(self.kind),
                tuple(self.parent),
            )
        )
        columns = (self.line, self.end_line, self.position, self.shape_hash, self.exact_hash)
        return [
            memoryview(_LENGTH.pack(len(header))),
            memoryview(header + b"\0" * (-len(header) % 8)),
            *(column.view(np.uint8).data for column in columns),
        ]

    @classmethod
    def from_blob(cls, records: Records, blob: bytes, graph_tag: bytes) -> Definitions | None:
        """The table :meth:`blob` stored, its columns views of ``blob``; None when it was stored for another
        graph than the one ``graph_tag`` names, ValueError when ``blob`` is not such a table."""
        if len(blob) < _LENGTH.size:
            raise ValueError("a truncated definitions blob")
        (size,) = _LENGTH.unpack_from(blob)
        start = _LENGTH.size + size + (-size % 8)
        if start > len(blob):
            raise ValueError("a truncated definitions blob")
        header = marshal.loads(memoryview(blob)[_LENGTH.size : _LENGTH.size + size])
        if not (isinstance(header, tuple) and len(header) == 7):
            raise ValueError("not a definitions blob")
        tag, files, languages, counts, names, kinds, parents = header
        if tag != graph_tag:
            return None
        texts = (files, languages, names, kinds, parents)
        if not (
            all(isinstance(t, tuple) and set(map(type, t)) <= {str} for t in texts) and type(counts) is bytes
        ):
            raise ValueError("malformed stored definitions")
        per_file = np.frombuffer(counts, dtype=np.int64)
        rows = int(per_file.sum())
        if not (
            len(files) == len(languages) == len(per_file)
            and (per_file > 0).all()
            and len(names) == len(kinds) == len(parents) == rows
            and len(blob) == start + (3 * 8 + 2 * 32) * rows
        ):
            raise ValueError("stored definitions of mismatched lengths")
        line, end_line, position = (
            np.frombuffer(blob, dtype=np.int64, count=rows, offset=start + i * 8 * rows) for i in range(3)
        )
        shape_hash, exact_hash = (
            np.frombuffer(blob, dtype=_HASH, count=rows, offset=start + 24 * rows + i * 32 * rows)
            for i in range(2)
        )
        return cls(
            records=records,
            name=_objects(names),
            kind=_objects(kinds),
            parent=_objects(parents),
            file=np.repeat(_objects(files), per_file),
            language=np.repeat(_objects(languages), per_file),
            line=line,
            end_line=end_line,
            position=position,
            shape_hash=shape_hash,
            exact_hash=exact_hash,
        )

    def __len__(self) -> int:
        return len(self.name)

    def isin(self, column: str, values: Iterable[str]) -> np.ndarray:
        """A mask of the rows whose ``column`` (kind, language, file, ...) is one of ``values``."""
        import pandas as pd

        return pd.Series(getattr(self, column), copy=False).isin(list(values)).to_numpy(copy=True)

    def named(self, test: Callable[[str], bool], among: np.ndarray | None = None) -> np.ndarray:
        """A mask of the rows (of those ``among`` marks, or all) whose name passes ``test``, called once per
        distinct name rather than once per row."""
        names = self.name if among is None else self.name[among]
        mask = self.isin("name", [n for n in set(names) if test(n)])
        return mask if among is None else mask & among

    def frame(self, rows: np.ndarray | None = None, columns: Sequence[str] = SYMBOL_COLUMNS) -> pd.DataFrame:
        """The ``rows`` (indices; every row when None) as a DataFrame of ``columns`` of :data:`SYMBOL_COLUMNS`,
        indexed by row; the hashes as hex strings, the signatures read from the records."""
        import pandas as pd

        picked = np.arange(len(self)) if rows is None else np.asarray(rows, dtype=np.int64)
        data: dict[str, Any] = {}
        for column in columns:
            if column == "signature":
                data[column] = self.signatures(picked)
            elif column in ("shape_hash", "exact_hash"):
                data[column] = getattr(self, column)[picked].astype(str).astype(object)
            else:
                data[column] = getattr(self, column)[picked]
        return pd.DataFrame(data, columns=list(columns), index=picked)

    def signatures(self, rows: np.ndarray) -> np.ndarray:
        """The signatures of ``rows``, read from their records a batch of files at a time; "" for a definition
        its record no longer holds (the file was reindexed since)."""
        out = np.empty(len(rows), dtype=object)
        out[:] = ""
        by_file: defaultdict[str, list[int]] = defaultdict(list)
        for at, row in enumerate(rows):
            by_file[self.file[row]].append(at)
        for rel, record in self.records.scan(list(by_file)):
            symbols = record["symbols"]
            for at in by_file[rel]:
                row = rows[at]
                position = self.position[row]
                if position < len(symbols):
                    found = symbols[position]
                    if found[0] == self.name[row] and found[2] == self.line[row]:
                        out[at] = found[4]
        return out
