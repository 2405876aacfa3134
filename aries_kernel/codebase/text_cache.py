"""The source texts ``Codebase.source`` has read, kept up to a total size, the least recently used let go first.

``search`` reads every file of the repository and ``suggest_location`` every file of its communities; keeping
every text they read would hold the whole repository's source in the kernel (hundreds of MB on a big one).
"""

from __future__ import annotations

__all__ = ["TextCache"]


class TextCache:
    """Texts by path, up to ``limit`` characters in all (a text larger than that is not kept)."""

    def __init__(self, limit: int) -> None:
        self._texts: dict[str, str] = {}
        self._size = 0
        self.limit = limit

    def get(self, rel: str) -> str | None:
        text = self._texts.pop(rel, None)
        if text is not None:
            self._texts[rel] = text  # the most recently used last
        return text

    def put(self, rel: str, text: str) -> None:
        self.pop(rel)
        if len(text) > self.limit:
            return
        while self._size + len(text) > self.limit:
            self.pop(next(iter(self._texts)))
        self._texts[rel] = text
        self._size += len(text)

    def pop(self, rel: str) -> None:
        text = self._texts.pop(rel, None)
        if text is not None:
            self._size -= len(text)

    def clear(self) -> None:
        self._texts.clear()
        self._size = 0

    def __len__(self) -> int:
        return len(self._texts)
