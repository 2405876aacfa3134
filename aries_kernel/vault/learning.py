"""What the vault learns from use: the session record, the Q-value update and co-occurrence.

A :class:`Session` collects which notes were retrieved (exposed) and which were used. At its end each exposed
note is credited once, however many queries returned it (crediting per query would favour notes that are
simply shown often): reward 1 if used, else 0, and a positive reward is damped by how often the note had been
exposed before (``1 / (1 + ln(1 + exposures))``). Q moves by ``Q += ALPHA * (r - Q)`` from ``Q_START``. Every
pair of notes used in the same session gains one unit of co-occurrence.
"""

from __future__ import annotations

import itertools
import math
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = [
    "ALPHA",
    "Q_START",
    "Credit",
    "Session",
    "cooccurrence_pairs",
    "credit",
    "damped_reward",
    "q_update",
]

ALPHA = 0.1
Q_START = 0.5


def q_update(q: float, reward: float, alpha: float = ALPHA) -> float:
    """One step of ``Q += alpha (r - Q)``."""
    return q + alpha * (reward - q)


def damped_reward(reward: float, exposures: int) -> float:
    """A positive reward shrunk by prior exposure (0 exposures: unchanged); zero and negative pass through."""
    if reward <= 0:
        return reward
    return reward / (1.0 + math.log1p(exposures))


@dataclass
class Session:
    """One agent session's retrieval record; ``retrieved`` counts exposures per note uid (``source:key``)."""

    started: float
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    retrieved: dict[str, int] = field(default_factory=dict)
    used: set[str] = field(default_factory=set)
    queries: list[str] = field(default_factory=list)
    ended: bool = False

    def record_retrieval(self, query: str, uids: Iterable[str]) -> None:
        """Note that ``uids`` were shown for ``query``."""
        self.queries.append(query)
        for uid in uids:
            self.retrieved[uid] = self.retrieved.get(uid, 0) + 1

    def mark_used(self, uid: str) -> None:
        """Note that ``uid`` was used (read, echoed, cited) in this session."""
        self.used.add(uid)


@dataclass(frozen=True)
class Credit:
    """The end-of-session update of one note."""

    uid: str
    used: bool
    reward: float
    q_before: float
    q_after: float
    exposures: int


def credit(session: Session, learned: Mapping[str, tuple[float, int]]) -> list[Credit]:
    """One credit per note exposed or used in ``session``; ``learned`` maps uid -> (Q, prior exposures).

    A used note's Q moves toward its damped reward; a note only exposed keeps its Q (a fizzle sends no
    signal: decay demotes it) but counts the exposure, which damps its later rewards.
    """
    credits = []
    for uid in sorted(set(session.retrieved) | session.used):
        q, exposures = learned.get(uid, (Q_START, 0))
        if uid in session.used:
            reward = damped_reward(1.0, exposures)
            credits.append(Credit(uid, True, reward, q, q_update(q, reward), exposures + 1))
        else:
            credits.append(Credit(uid, False, 0.0, q, q, exposures + 1))
    return credits


def cooccurrence_pairs(used: Iterable[str]) -> list[tuple[str, str]]:
    """Every unordered pair of notes used together, each as (smaller uid, larger uid)."""
    return list(itertools.combinations(sorted(set(used)), 2))
