"""The one retry policy: exponential backoff with jitter.

The wait before retry ``n`` (0 for the first) is ``min(longest, first * 2**n)`` times a random factor between
0.5 and 1, so that callers that failed together do not retry together. The model router waits so between
attempts at a call (``c.AriesModels.backoff_base`` and ``backoff_max``; a server's retry-after comes first), and
the vault between tries of a transaction while another writer holds its database or its server is away.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["Backoff"]


@dataclass(frozen=True)
class Backoff:
    """Waits that double from ``first`` seconds up to ``longest``, each with jitter."""

    first: float
    longest: float

    def delay(self, attempt: int) -> float:
        """Seconds to wait before retry ``attempt`` (0 for the first retry)."""
        return min(self.longest, self.first * 2.0**attempt) * random.uniform(0.5, 1.0)

    def delays(self) -> Iterator[float]:
        """The waits before retry 0, 1, 2, ..., without end (the caller stops at its deadline)."""
        return (self.delay(attempt) for attempt in itertools.count())
