"""Spend limits: a budget per session and per day, in USD and in tokens, enforced before every model call.

The router owns one :class:`SpendLimits` shared by all its slots, so the agent's turns, compaction summaries,
``rlm_call``/``rlm_batch`` and the vault's decomposition all draw on the same budget. A *session* is the life of
the router (one kernel); a *day* is the local calendar day, and its spend is kept in a small JSON file
(``$ARIES_SPEND_FILE``, else ``c.AriesModels.spend_file``, else ``~/.aries/spend.json``) shared by every kernel
of the user, so a restart does not reset it. The file is updated under an exclusive lock and replaced
atomically; when it cannot be read or written (a read-only home), the day's budget is still enforced for this
process in memory and :attr:`SpendLimits.problem` says why.

A call is refused (:class:`~aries_kernel.models.errors.BudgetExceeded`) once a limit is reached; a call that
started below the limit finishes, so the spend may pass a limit by at most the calls already in flight. Under a
USD limit, a call whose price is unknown (``pricing.py``: a model the price table does not know, behind a server
that is no local model server and that the user did not name free) is refused too: its cost could not be counted,
so the limit could not hold.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aries_kernel.models.errors import BudgetExceeded
from aries_kernel.paths import aries_path

__all__ = ["Spend", "SpendLimits", "spend_file_path"]

log = logging.getLogger(__name__)

_KEEP_DAYS = 31  # older days are dropped from the file on the next write


def spend_file_path(setting: str = "") -> Path:
    """The per-day spend file: ``$ARIES_SPEND_FILE``, else ``setting``, else ``~/.aries/spend.json``.

    Raises RuntimeError when neither is set and there is no home folder.
    """
    return aries_path("ARIES_SPEND_FILE", setting, "spend.json")


@dataclass
class Spend:
    """Spend so far against the limits; a limit of 0 means none."""

    session_usd: float
    session_tokens: int
    today_usd: float
    today_tokens: int
    session_usd_limit: float
    session_tokens_limit: int
    daily_usd_limit: float
    daily_tokens_limit: int

    def exceeded(self) -> str | None:
        """Which limit is reached, as a phrase ("the session budget of $1.00"), or None."""
        checks = (
            (self.session_usd, self.session_usd_limit, "session", "c.AriesModels.session_budget_usd"),
            (
                self.session_tokens,
                self.session_tokens_limit,
                "session",
                "c.AriesModels.session_budget_tokens",
            ),
            (self.today_usd, self.daily_usd_limit, "daily", "c.AriesModels.daily_budget_usd"),
            (self.today_tokens, self.daily_tokens_limit, "daily", "c.AriesModels.daily_budget_tokens"),
        )
        for spent, limit, which, setting in checks:
            if limit and spent >= limit:
                usd = "usd" in setting
                return (
                    f"the {which} budget of {_amount(limit, usd)} is reached ({_amount(spent, usd)} spent; "
                    f"{setting})"
                )
        return None

    def lines(self) -> list[str]:
        """One line for the session and one for today: spend, and the limits when set."""
        return [
            f"Session: {_against(self.session_usd, self.session_usd_limit, True)}, "
            f"{_against(self.session_tokens, self.session_tokens_limit, False)}",
            f"Today: {_against(self.today_usd, self.daily_usd_limit, True)}, "
            f"{_against(self.today_tokens, self.daily_tokens_limit, False)}",
        ]

    def short(self) -> str:
        """The tightest limit as a short phrase for the context meter ("$0.12 of $1.00 today"), or ""."""
        shares = [
            (spent / limit, f"{_amount(spent, usd)} of {_amount(limit, usd)} {when}")
            for spent, limit, usd, when in (
                (self.session_usd, self.session_usd_limit, True, "this session"),
                (self.session_tokens, self.session_tokens_limit, False, "this session"),
                (self.today_usd, self.daily_usd_limit, True, "today"),
                (self.today_tokens, self.daily_tokens_limit, False, "today"),
            )
            if limit
        ]
        return max(shares)[1] if shares else ""


def _amount(value: float, usd: bool) -> str:
    return f"${value:,.4f}" if usd else f"{int(value):,} tokens"


def _against(spent: float, limit: float, usd: bool) -> str:
    return f"{_amount(spent, usd)} of {_amount(limit, usd)}" if limit else f"{_amount(spent, usd)} (no limit)"


class SpendLimits:
    """The session and daily budgets of one router (``settings`` is its :class:`AriesModels`)."""

    def __init__(self, settings: Any, clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self._clock = clock
        self._lock = threading.Lock()
        self._session = [0.0, 0]  # usd, tokens of this router
        self._memory_days: dict[
            str, list[float]
        ] = {}  # this process's spend by day, when the file is unusable
        self.problem: str | None = None  # why the daily spend is kept in memory only

    def spend(self) -> Spend:
        """Spend so far: this session's, and today's across every kernel that shares the spend file."""
        today = self._today()
        usd, tokens = self._read_day(today)
        with self._lock:
            session_usd, session_tokens = self._session
        s = self.settings
        return Spend(
            session_usd,
            int(session_tokens),
            usd,
            int(tokens),
            float(s.session_budget_usd),
            int(s.session_budget_tokens),
            float(s.daily_budget_usd),
            int(s.daily_budget_tokens),
        )

    def check(self, slot: str, unpriced: str = "") -> None:
        """Raise :class:`BudgetExceeded` before a call on ``slot`` is sent: when a limit is reached, or when a
        USD limit is set and the call's price is unknown (``unpriced`` says why and what to set; "": known)."""
        s = self.settings
        if not (
            s.session_budget_usd or s.session_budget_tokens or s.daily_budget_usd or s.daily_budget_tokens
        ):
            return
        usd = [
            f"c.AriesModels.{name} ({_amount(float(getattr(s, name)), True)})"
            for name in ("session_budget_usd", "daily_budget_usd")
            if getattr(s, name)
        ]
        if unpriced and usd:
            raise BudgetExceeded(
                f"Spend limit: {' and '.join(usd)} cannot be checked for this {slot} call, so it was not sent: "
                f"{unpriced}; or set the USD limits to 0."
            )
        reached = self.spend().exceeded()
        if reached:
            raise BudgetExceeded(
                f"Spend limit: {reached}, so this {slot} call was not sent. Raise or clear the limit "
                "(0 means none) to continue; %aries cost shows the spend."
            )

    def record(self, tokens: int, usd: float) -> None:
        """Add one finished call's tokens and cost to the session and to today's total."""
        with self._lock:
            self._session[0] += usd
            self._session[1] += tokens
        if tokens or usd:
            self._add_day(self._today(), usd, tokens)

    def _today(self) -> str:
        return time.strftime("%Y-%m-%d", time.localtime(self._clock()))

    def _path(self) -> Path:
        return spend_file_path(str(self.settings.spend_file))

    def _read_day(self, day: str) -> tuple[float, int]:
        with self._lock:
            memory = self._memory_days.get(day)
        if memory is not None:
            return memory[0], int(memory[1])
        try:
            days = _read(self._path())
        except (OSError, RuntimeError, ValueError) as exc:
            self._fall_back(exc)
            return 0.0, 0
        entry = days.get(day, {})
        return float(entry.get("usd", 0.0)), int(entry.get("tokens", 0))

    def _add_day(self, day: str, usd: float, tokens: int) -> None:
        with self._lock:
            memory = self._memory_days.get(day)
            if memory is not None:
                memory[0] += usd
                memory[1] += tokens
                return
        try:
            path = self._path()
            with _locked(path):
                days = _read(path)
                entry = days.setdefault(day, {"usd": 0.0, "tokens": 0})
                entry["usd"] = float(entry.get("usd", 0.0)) + usd
                entry["tokens"] = int(entry.get("tokens", 0)) + tokens
                _write(path, {key: days[key] for key in sorted(days)[-_KEEP_DAYS:]})
        except (OSError, RuntimeError, ValueError) as exc:
            self._fall_back(exc)
            with self._lock:
                memory = self._memory_days.setdefault(day, [0.0, 0])
                memory[0] += usd
                memory[1] += tokens

    def _fall_back(self, exc: BaseException) -> None:
        """Keep the day's spend in memory from now on (the limit still holds in this kernel), said once."""
        with self._lock:
            if self.problem is not None:
                return
            try:
                where: Any = self._path()
            except RuntimeError:
                where = "~/.aries/spend.json"
            self.problem = (
                f"The daily spend cannot be kept in {where} ({exc}); it is counted in this kernel's memory only, "
                "so a restart starts the day at $0. Set ARIES_SPEND_FILE or c.AriesModels.spend_file to a "
                "writable file."
            )
            self._memory_days.setdefault(self._today(), [0.0, 0])
        log.warning("%s", self.problem)


def _read(path: Path) -> dict[str, dict[str, Any]]:
    """The file's days, or none when the file does not exist yet; a damaged file counts as empty."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    try:
        data = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError:
        log.warning("%s is not valid JSON; today's spend starts again from it being empty", path)
        return {}
    days = data.get("days", {}) if isinstance(data, dict) else {}
    return {key: value for key, value in days.items() if isinstance(value, dict)}


def _write(path: Path, days: dict[str, dict[str, Any]]) -> None:
    """Replace the file atomically: a reader sees the old days or the new ones, never half a file."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    try:
        with open(temp, "w", encoding="utf-8") as handle:
            json.dump({"version": 1, "days": days}, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock beside ``path`` so two kernels adding at once do not lose one's spend."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a", encoding="utf-8") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
