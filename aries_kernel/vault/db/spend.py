"""The team spend ledger's statements: one atomic add per model call, and a user's total for the day.

The day is the database's: ``YYYY-MM-DD`` of its clock in UTC, computed in the statement itself, so a member
whose machine's clock or time zone is off still adds to the same day as everyone else, and the day turns for the
whole team at once. An add is one ``INSERT ... ON CONFLICT DO UPDATE SET usd = usd + excluded.usd``: two
kernels adding at once both count, whatever the isolation level, with no lock of the vault's writers.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from aries_kernel.vault.db.engine import upsert
from aries_kernel.vault.db.schema import spend

__all__ = ["add_spend", "spend_today"]


def _utc_day(conn: Connection) -> Any:
    """The database's UTC calendar day, as an SQL expression."""
    if conn.dialect.name == "postgresql":
        return func.to_char(func.timezone("UTC", func.now()), "YYYY-MM-DD")
    return func.date("now")  # SQLite's 'now' is UTC


def add_spend(
    conn: Connection, user: str, usd: float, tokens: int, calls: int, at: float
) -> tuple[str, float, int]:
    """Add ``usd``, ``tokens`` and ``calls`` to ``user``'s row of the database's day; returns (day, usd, tokens)
    of that row after the add."""
    s = spend.c
    statement = upsert(conn, spend).values(
        username=user, day=_utc_day(conn), usd=usd, tokens=tokens, calls=calls, updated=at
    )
    statement = statement.on_conflict_do_update(
        index_elements=[s.username, s.day],
        set_={
            "usd": s.usd + statement.excluded.usd,
            "tokens": s.tokens + statement.excluded.tokens,
            "calls": s.calls + statement.excluded.calls,
            "updated": statement.excluded.updated,
        },
    ).returning(s.day, s.usd, s.tokens)
    row = conn.execute(statement).one()
    return str(row[0]), float(row[1]), int(row[2])


def spend_today(conn: Connection, user: str) -> tuple[str, float, int]:
    """(day, usd, tokens) that ``user`` spent on the database's day so far (0 without a row)."""
    s = spend.c
    day = conn.execute(select(_utc_day(conn))).scalar_one()
    row = conn.execute(select(s.usd, s.tokens).where(s.username == user, s.day == day)).first()
    return str(day), float(row[0]) if row else 0.0, int(row[1]) if row else 0
