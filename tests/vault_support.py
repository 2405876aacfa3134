"""What the vault tests share: a clock they set by hand, so warmth, timestamps and grace periods are exact."""

from __future__ import annotations

T0 = 1_790_000_000.0  # a fixed "now" in 2026


class Clock:
    """A settable clock (``clock.now = ...``) for ``open_vault(..., clock=...)``."""

    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
