"""A mapping whose values are read when first asked for: the base of the index's records and of a loaded graph's
per-file fields, which both hold placeholders until a query needs the value."""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from typing import Any, TypeVar

__all__ = ["LazyValues"]

_V = TypeVar("_V")


class LazyValues(MutableMapping[str, _V]):
    """Keys in insertion order over the plain dict ``_data``, whose values may be placeholders: a subclass's
    ``__getitem__`` replaces one with the real value when first asked for. Setting, deleting, iterating, the
    size and membership are the dict's own, and never read a value."""

    _data: dict[str, Any]

    def __setitem__(self, key: str, value: _V) -> None:
        self._data[key] = value

    def __delitem__(self, key: str) -> None:
        del self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data
