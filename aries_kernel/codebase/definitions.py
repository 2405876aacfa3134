"""Every definition of the index as compact numpy columns, for the operations that look at all of them.

A repository of 25,000 files holds about half a million definitions. As a DataFrame of Python strings (the public
``symbol_table()``) they take about 300 MB, mostly in strings no two rows share: signatures and two hex hashes.
:class:`Definitions` keeps, per definition, references to strings the records already share (names, kinds and
parents are interned, the path and language are one string per file), three integers and the two hashes as
fixed-width bytes: about 120 bytes a row. Signatures are read from the records only for the rows an answer
shows (:meth:`Definitions.frame`), a batch of files at a time, so a warm start's pending records stay pending.
"""

from __future__ import annotations

from array import array
from collections import defaultdict
from collections.abc import Iterable, Sequence
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
# Hashes collected as Python strings before they are packed into one fixed-width array.
_CHUNK = 50_000


def _packed(hashes: list[str | None]) -> np.ndarray:
    return np.array([h or "" for h in hashes], dtype=_HASH)


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

        def objects(values: list[str]) -> np.ndarray:
            out = np.empty(len(values), dtype=object)
            out[:] = values
            return out

        return cls(
            records=records,
            name=objects(names),
            kind=objects(kinds),
            parent=objects(parents),
            file=objects(files),
            language=objects(languages),
            line=np.frombuffer(lines, dtype=np.int64),
            end_line=np.frombuffer(ends, dtype=np.int64),
            position=np.frombuffer(positions, dtype=np.int64),
            shape_hash=np.concatenate(shapes),
            exact_hash=np.concatenate(exacts),
        )

    def __len__(self) -> int:
        return len(self.name)

    def isin(self, column: str, values: Iterable[str]) -> np.ndarray:
        """A mask of the rows whose ``column`` (kind, language, file, ...) is one of ``values``."""
        import pandas as pd

        return pd.Series(getattr(self, column), copy=False).isin(list(values)).to_numpy(copy=True)

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
