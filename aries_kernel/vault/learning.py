"""What the vault learns from use: the session record, the Q-value update and co-occurrence.

A :class:`Session` collects which notes were retrieved (exposed) and which were used. At its end each exposed
note is credited once, however many queries returned it (crediting per query would favour notes that are
simply shown often). Q moves by ``Q += ALPHA * (r - Q)`` from ``Q_START``, with ``r = 1`` for a note used and
``r = Q_START`` for a note shown but not used: a fizzle pulls Q back toward the prior, never below it, so Q
stays in ``[Q_START, 1]`` and ``Q - Q_START`` is half the note's recent rate of use when shown. No exposure can
rank a note below one never shown, and no amount of use can lower a note (a reward damped by the exposure
count, as the ported system had, fell below the prior after two exposures and sank the most-used notes).

Co-occurrence weights move the same way: when either note of a pair is used in a session the weight becomes
``COOC_KEEP * w + 1`` if both were used, else ``COOC_KEEP * w``. So ``w`` never exceeds
``1 / (1 - COOC_KEEP) = COOC_CAP`` however long the vault is used, a pair that stops being used together fades,
and a weight below ``COOC_FLOOR`` is dropped.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = [
    "ALPHA",
    "COOC_CAP",
    "COOC_FLOOR",
    "COOC_KEEP",
    "Q_START",
    "Credit",
    "Session",
    "cooccurrence_pairs",
    "cooccurrence_weight",
    "credit",
    "q_update",
]

ALPHA = 0.1
Q_START = 0.5
COOC_CAP = 10.0  # the sum 1 + KEEP + KEEP^2 + ... of a pair used together in every session
COOC_KEEP = 1.0 - 1.0 / COOC_CAP  # each session that uses a note keeps 90% of its pairs' weights
COOC_FLOOR = 0.1  # a single co-use fades below this after 22 sessions using one note without the other


def q_update(q: float, reward: float, alpha: float = ALPHA) -> float:
    """One step of ``Q += alpha (r - Q)``."""
    return q + alpha * (reward - q)


def cooccurrence_weight(weight: float, together: bool) -> float:
    """A pair's weight after a session that used one of its notes (``together``: both)."""
    return COOC_KEEP * weight + (1.0 if together else 0.0)


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
    """The end-of-session update of one note; ``reward`` is 1 for a note used, else 0."""

    uid: str
    used: bool
    reward: float
    q_before: float
    q_after: float
    exposures: int


def credit(session: Session, learned: Mapping[str, tuple[float, int]]) -> list[Credit]:
    """One credit per note exposed or used in ``session``; ``learned`` maps uid -> (Q, sessions exposed).

    A used note's Q moves toward 1, a note only exposed moves toward ``Q_START``.
    """
    credits = []
    for uid in sorted(set(session.retrieved) | session.used):
        q, exposures = learned.get(uid, (Q_START, 0))
        used = uid in session.used
        target = 1.0 if used else Q_START
        credits.append(Credit(uid, used, 1.0 if used else 0.0, q, q_update(q, target), exposures + 1))
    return credits


def cooccurrence_pairs(used: Iterable[str]) -> list[tuple[str, str]]:
    """Every unordered pair of notes used together, each as (smaller uid, larger uid)."""
    return list(itertools.combinations(sorted(set(used)), 2))
