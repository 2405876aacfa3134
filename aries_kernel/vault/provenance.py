"""Where a note (or one edit of it) came from: the writer's origin, agent session and turn, and kernel process.

Every write to the vault carries a :class:`Provenance`. Callers that write on the agent's behalf pass one
explicitly (the VaultAdd tool, reflection, compaction's extract step, the MCP server); code the agent runs in
the kernel (its Repl tool) runs inside :func:`acting`, so a ``vault.add`` in that code is the agent's too. Any
other write is the user's. :data:`KERNEL` names this process, so ``%aries vault session`` can find what the
agent wrote here.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["AGENT_ORIGINS", "KERNEL", "ORIGINS", "Provenance", "acting", "current"]

ORIGINS = ("user", "agent_tool", "reflection", "compaction", "mcp")
# What the agent itself writes (the session review lists these).
AGENT_ORIGINS = ("agent_tool", "reflection", "compaction")
# This process: its start time, pid and a random part (pids are reused).
KERNEL = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{secrets.token_hex(2)}"


@dataclass(frozen=True)
class Provenance:
    """Who wrote: ``origin`` (one of :data:`ORIGINS`), the agent ``session`` id and ``turn`` when known
    (``""`` and ``None`` otherwise), and the ``kernel`` process (default: this one)."""

    origin: str = "user"
    session: str = ""
    turn: int | None = None
    kernel: str = field(default=KERNEL)

    def __post_init__(self) -> None:
        if self.origin not in ORIGINS:
            raise ValueError(f"Unknown origin {self.origin!r}; origins are {', '.join(ORIGINS)}.")

    def front_matter(self) -> dict[str, Any]:
        """The keys written to a note's front matter: ``origin`` always, the others when known (a user's note
        names no kernel: nothing looks it up by one)."""
        meta: dict[str, Any] = {"origin": self.origin}
        if self.session:
            meta["session"] = self.session
        if self.turn is not None:
            meta["turn"] = self.turn
        if self.origin != "user":
            meta["kernel"] = self.kernel
        return meta

    @classmethod
    def from_front_matter(cls, meta: dict[str, Any]) -> Provenance:
        """The provenance a note's front matter records (hand-written notes are the user's)."""
        origin = str(meta.get("origin") or "user")
        turn = meta.get("turn")
        return cls(
            origin=origin if origin in ORIGINS else "user",
            session=str(meta.get("session") or "")[:200],
            turn=turn if isinstance(turn, int) and not isinstance(turn, bool) else None,
            kernel=str(meta.get("kernel") or "")[:200],
        )


_acting: contextvars.ContextVar[Provenance | None] = contextvars.ContextVar("aries_provenance", default=None)


def current() -> Provenance:
    """The provenance of a write that names none: the one :func:`acting` set, else the user's."""
    return _acting.get() or Provenance()


@contextlib.contextmanager
def acting(provenance: Provenance) -> Iterator[None]:
    """Attribute every write made inside the block that names no provenance to ``provenance``."""
    token = _acting.set(provenance)
    try:
        yield
    finally:
        _acting.reset(token)
