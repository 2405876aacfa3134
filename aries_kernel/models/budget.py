"""Spend limits: a budget per session and per day, in USD and in tokens, enforced before every model call.

The router owns one :class:`SpendLimits` shared by all its slots, so the agent's turns, compaction summaries,
``rlm_call``/``rlm_batch`` and the vault's decomposition all draw on the same budget. A *session* is the life of
the router (one kernel); a *day* is the local calendar day, and its spend is kept in a small JSON file
(``$ARIES_SPEND_FILE``, else ``c.AriesModels.spend_file``, else ``~/.aries/spend.json``) shared by every kernel
of the user, so a restart does not reset it; when it cannot be read or written (a read-only home), the day's
budget is still enforced for this process in memory and :attr:`SpendLimits.problem` says why.

**The journal.** A finished call's spend is one line appended to the day's journal beside the file
(``spend.json.2026-12-02.journal``, kept open): one ``O_APPEND`` write, with no lock, no read and no rewrite of
the file (rewriting it per call was most of the harness's own cost per call in bench/bench_models.py). On one
machine such appends are atomic, so kernels recording at once lose nothing; on a network filesystem (NFS emulates
``O_APPEND``, so appends from two machines could overwrite each other) each append takes the file's lock too.
Every reader (:func:`read_spend`; a kernel's check before a call) counts the file's days plus the journal lines
not folded into them yet, reading only what was appended since its last check, so another kernel's spend counts
at its next check. The journals are *folded* into the file's days under the file's exclusive lock, the file
replaced atomically with the offset of each journal it now includes: at a kernel's first call, when the day
changes, every 64 KiB of journal and when the router closes; a day's journal is deleted once two whole days have
passed since the day ended (no kernel's clock or time zone is that far behind).

What a crash can lose: a kernel killed during a call loses that call's spend only (it is written when the call
finishes, in one write that outlives the process at once: nothing is buffered in the kernel); a crash of the
machine can lose the last writes the OS had not stored yet (nothing is synced: a sync per call cost more than
all the rest). A torn journal line (a machine crash in the middle of a write) or a damaged file is reported
(logged, and in :attr:`SpendLimits.problem`) and skipped: every line starts on a line of its own, so a torn line
loses its call alone, and a damaged file counts as empty and is kept beside it as ``spend.json.damaged`` when the
file is next written.

**With a team vault** (``$ARIES_VAULT_URL`` or ``c.AriesVault.url``: a PostgreSQL database) the day's spend is
the team ledger's (:class:`TeamLedger`): each call is added, atomically, to the user's row of the database's UTC
day, so ``daily_budget_*`` and the team lead's ``team_daily_budget_usd`` hold over every server and machine of
the user, and a member whose clock is off adds to the same day as the rest. While the database does not answer,
a call's spend is kept as *pending* in the local spend file (under the user's name, so a home shared by several
hub users keeps them apart), the limits count the last total the database gave plus what is pending, and
:attr:`SpendLimits.problem` says so; when it answers again the pending spend is added to the ledger and taken
off the file in one step under the file's lock, so it is counted once. The local file's days and journals are
kept as without a team vault (this machine's own record).

A call is refused (:class:`~aries_kernel.models.errors.BudgetExceeded`) once a limit is reached; a call that
started below the limit finishes, so the spend may pass a limit by at most the calls already in flight. Under a
USD limit, a call whose price is unknown (``pricing.py``: a model the price table does not know, behind a server
that is no local model server and that the user did not name free) is refused too: its cost could not be counted,
so the limit could not hold.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import functools
import json
import logging
import os
import re
import secrets
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aries_kernel.models.errors import BudgetExceeded
from aries_kernel.paths import aries_path, aries_setting
from aries_kernel.redact import mask_url, redact
from aries_kernel.user import current_user

__all__ = [
    "Spend",
    "SpendFile",
    "SpendLimits",
    "TeamLedger",
    "journal_path",
    "read_spend",
    "spend_file_path",
    "team_ledger",
]

log = logging.getLogger(__name__)

_KEEP_DAYS = 31  # older days are dropped from the file when the journals are folded
_FOLD_BYTES = (
    64 * 1024
)  # a journal is folded into the file each time it grows by this much (about 1,500 calls)
_GRACE_DAYS = 2  # a day's journal is deleted once this many whole days have passed since it ended
# After the team ledger failed to answer, the seconds before a call tries it again (meanwhile: pending).
TEAM_RETRY_SECONDS = 30.0


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
    team_daily_usd_limit: float = 0.0
    # Where today's spend is counted, when not this machine's file ("the team ledger, alice, UTC day ...").
    today_from: str = ""

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
            (self.today_usd, self.team_daily_usd_limit, "team daily", "c.AriesModels.team_daily_budget_usd"),
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
        team_cap = (
            f", team cap {_amount(self.team_daily_usd_limit, True)}" if self.team_daily_usd_limit else ""
        )
        where = f" ({self.today_from})" if self.today_from else ""
        return [
            f"Session: {_against(self.session_usd, self.session_usd_limit, True)}, "
            f"{_against(self.session_tokens, self.session_tokens_limit, False)}",
            f"Today{where}: {_against(self.today_usd, self.daily_usd_limit, True)}, "
            f"{_against(self.today_tokens, self.daily_tokens_limit, False)}{team_cap}",
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
                (self.today_usd, self.team_daily_usd_limit, True, "today (team cap)"),
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

    def __init__(
        self, settings: Any, clock: Callable[[], float] = time.time, team: TeamLedger | None = None
    ) -> None:
        """``team`` is the team ledger to count the day in; None: the one the settings name, if any
        (:func:`team_ledger`, looked up on first use)."""
        self.settings = settings
        self._clock = clock
        self._team = team
        self._team_known = team is not None
        self._lock = threading.Lock()
        self._session = [0.0, 0]  # usd, tokens of this router
        self._memory_days: dict[
            str, list[float]
        ] = {}  # this process's spend by day, when the file is unusable
        self._problem: str | None = None  # why the daily spend is kept in memory only
        # Today's journal as far as this router read it: (day, journal inode, folded offset it started from,
        # offset read to, usd and tokens read), so a check reads only what was appended since the last one.
        self._tail: tuple[str, int, int, int, float, int] | None = None
        self._folded_day: str | None = None  # the day of this router's last fold of the journals
        self._journal = _Journal()
        self._known_path: tuple[tuple[str | None, ...], Path] | None = (
            None  # (what it depends on, spend file)
        )

    @property
    def problem(self) -> str | None:
        """Why the day's spend is not counted where it should be (the file, the team ledger), or None."""
        team = self.team
        return self._problem or (team.problem if team is not None else None) or _damage.get(self._where())

    @property
    def team(self) -> TeamLedger | None:
        """The team ledger the day is counted in, or None (no team vault: the local file)."""
        with self._lock:  # one ledger, whichever thread asks first
            if not self._team_known:
                self._team = team_ledger(self.settings, self._path)
                self._team_known = True
            return self._team

    def close(self) -> None:
        """Fold the journals into the spend file, if this router recorded spend, close its journal and release the
        team ledger's database connections, if it has any (both open again on demand)."""
        if self._folded_day is not None:
            self._fold(self._today())
        self._journal.close()
        if self._team is not None:
            self._team.close()

    def spend(self) -> Spend:
        """Spend so far: this session's, and today's: the team ledger's for this user with a team vault, else
        across every kernel that shares the spend file."""
        team = self.team
        today_from = ""
        if team is not None:
            day, usd, tokens = team.today()
            today_from = f"team ledger, {team.user}, UTC day {day or 'unknown: it has not answered yet'}"
            if team.problem is not None:  # away: at least this machine's own day counts
                local_usd, local_tokens = self._read_day(self._today())
                usd, tokens = max(usd, local_usd), max(tokens, local_tokens)
        else:
            usd, tokens = self._read_day(self._today())
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
            float(s.team_daily_budget_usd),
            today_from,
        )

    def check(self, slot: str, unpriced: str = "") -> None:
        """Raise :class:`BudgetExceeded` before a call on ``slot`` is sent: when a limit is reached, or when a
        USD limit is set and the call's price is unknown (``unpriced`` says why and what to set; "": known)."""
        s = self.settings
        if not (
            s.session_budget_usd
            or s.session_budget_tokens
            or s.daily_budget_usd
            or s.daily_budget_tokens
            or s.team_daily_budget_usd
        ):
            return
        usd = [
            f"c.AriesModels.{name} ({_amount(float(getattr(s, name)), True)})"
            for name in ("session_budget_usd", "daily_budget_usd", "team_daily_budget_usd")
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
            day = self._today()
            if self._add_day(day, usd, tokens) or day != self._folded_day:
                self._fold(day)  # the journal passed a size bound, or a first call or a new day
            team = self.team
            if team is not None:
                team.add(usd, tokens)

    def _today(self) -> str:
        return time.strftime("%Y-%m-%d", time.localtime(self._clock()))

    def _path(self) -> Path:
        """The spend file, computed again only when what it depends on changed (it is asked at every call)."""
        setting = str(self.settings.spend_file)
        given = (aries_setting("ARIES_SPEND_FILE", setting), os.environ.get("HOME"))
        known = self._known_path
        if known is None or known[0] != given:
            known = self._known_path = (given, spend_file_path(setting))
        return known[1]

    def _where(self) -> str:
        try:
            return str(self._path())
        except RuntimeError:
            return ""

    def _read_day(self, day: str) -> tuple[float, int]:
        """The day's spend in the file, with its journal: the lines folded into the file, plus those read since
        (kept in ``_tail`` while the file's fold offset stays), plus those appended since the last read."""
        with self._lock:
            memory = self._memory_days.get(day)
            tail = self._tail
        if memory is not None:
            return memory[0], int(memory[1])
        try:
            path = self._path()
            record = _load(path)
            usd, tokens = _day_spend(record.days.get(day, {}))
            try:
                handle = open(journal_path(path, day), "rb")
            except FileNotFoundError:
                return usd, tokens
            with handle:
                stat = os.fstat(handle.fileno())
                inode, base = stat.st_ino, _from(record.folded.get(day, 0), stat.st_size)
                if tail is not None and tail[:3] == (day, inode, base) and stat.st_size >= tail[3]:
                    start, read_usd, read_tokens = tail[3], tail[4], tail[5]
                else:  # a new day, a new fold, or a journal replaced: from the fold's offset
                    start, read_usd, read_tokens = base, 0.0, 0
                handle.seek(start)
                more_usd, more_tokens, used = _sum_lines(handle.read(), journal_path(path, day), start)
        except (OSError, RuntimeError, ValueError, TypeError) as exc:
            self._fall_back(exc)
            return 0.0, 0
        read_usd, read_tokens = read_usd + more_usd, read_tokens + more_tokens
        with self._lock:
            self._tail = (day, inode, base, start + used, read_usd, read_tokens)
        return usd + read_usd, tokens + read_tokens

    def _add_day(self, day: str, usd: float, tokens: int) -> bool:
        """Count one call's spend on ``day``; True when its journal just passed a fold bound."""
        with self._lock:
            memory = self._memory_days.get(day)
            if memory is not None:
                memory[0] += usd
                memory[1] += tokens
                return False
        try:
            return self._journal.append(self._path(), day, usd, tokens)
        except (OSError, RuntimeError) as exc:
            self._fall_back(exc)
            with self._lock:
                memory = self._memory_days.setdefault(day, [0.0, 0])
                memory[0] += usd
                memory[1] += tokens
            return False

    def _fold(self, today: str) -> None:
        """Fold the journals into the file; a failure is only logged (the journals still count)."""
        first = self._folded_day is None
        self._folded_day = today
        with self._lock:
            if self._memory_days:
                return  # the file is unusable: nothing was journalled
        try:
            fold_journals(self._path(), today)
        except (OSError, RuntimeError, ValueError, TypeError) as exc:
            (log.warning if first else log.debug)("The spend journals were not folded into the file: %s", exc)

    def _fall_back(self, exc: BaseException) -> None:
        """Keep the day's spend in memory from now on (the limit still holds in this kernel), said once."""
        with self._lock:
            if self._problem is not None:
                return
            try:
                where: Any = self._path()
            except RuntimeError:
                where = "~/.aries/spend.json"
            self._problem = (
                f"The daily spend cannot be kept in {where} ({exc}); it is counted in this kernel's memory only, "
                "so a restart starts the day at $0. Set ARIES_SPEND_FILE or c.AriesModels.spend_file to a "
                "writable file."
            )
            self._memory_days.setdefault(self._today(), [0.0, 0])
        log.warning("%s", self._problem)


@dataclass
class SpendFile:
    """A spend file's contents: ``days`` (day: {"usd", "tokens"}), ``pending`` (the spend pending for the team
    ledger, by user: {"usd", "tokens", "calls"}) and ``folded`` (day: the bytes of its journal the days include)."""

    days: dict[str, dict[str, Any]] = field(default_factory=dict)
    pending: dict[str, dict[str, Any]] = field(default_factory=dict)
    folded: dict[str, int] = field(default_factory=dict)
    damaged: bool = False  # the file was there but unreadable as a spend file (reported; counted as empty)


def journal_path(path: Path, day: str) -> Path:
    """The journal of ``day`` beside the spend file ``path``."""
    return path.with_name(f"{path.name}.{day}.journal")


def read_spend(path: Path) -> SpendFile:
    """The spend file at ``path`` as every reader counts it: its days plus each day's journal lines not folded
    into them yet (``folded`` then says where each journal ends). The one reader of the format outside this
    module; a damaged file or journal line is reported and skipped."""
    record = _load(path)
    for day, journal in _journals(path):
        usd, tokens, end, _ = _read_journal(journal, record.folded.get(day, 0))
        _add_spend(record.days, day, usd, tokens)
        record.folded[day] = end
    return record


def fold_journals(path: Path, today: str) -> None:
    """Fold every journal of the spend file ``path`` into its days, under the file's lock, and replace the file
    atomically. The journals of days that ended two whole days before ``today`` began are folded whole and
    deleted; days past the last 31 are dropped."""
    with _locked(path):
        record = _load(path)
        cutoff = (datetime.date.fromisoformat(today) - datetime.timedelta(days=_GRACE_DAYS)).isoformat()
        journals = dict(_journals(path))
        for day, journal in journals.items():
            usd, tokens, end, size = _read_journal(journal, record.folded.get(day, 0))
            _add_spend(record.days, day, usd, tokens)
            record.folded[day] = end
            if day < cutoff:
                if end < size:
                    _report(journal, end, "an unfinished last line (a torn write), dropped")
                journal.unlink(missing_ok=True)
                del record.folded[day]
        kept = sorted(record.days)[-_KEEP_DAYS:]
        for day in set(record.days) - set(kept):
            if day in journals and day in record.folded:
                journals[day].unlink(missing_ok=True)
        record.days = {day: record.days[day] for day in kept}
        record.folded = {
            day: end for day, end in record.folded.items() if day in record.days and day in journals
        }
        _store(path, record)


def _load(path: Path) -> SpendFile:
    """The file alone (no journal); empty when it does not exist yet or is damaged (reported)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return SpendFile()
    try:
        data = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        _report(path, exc.pos, "invalid JSON; the file counts as empty and is kept beside it as .damaged")
        return SpendFile(damaged=True)
    if not isinstance(data, dict):
        _report(path, 0, "not a JSON object; the file counts as empty and is kept beside it as .damaged")
        return SpendFile(damaged=True)
    days, pending, folded = (data.get(name, {}) for name in ("days", "team_pending", "journal"))
    return SpendFile(
        {key: value for key, value in days.items() if isinstance(value, dict)}
        if isinstance(days, dict)
        else {},
        {key: value for key, value in pending.items() if isinstance(value, dict)}
        if isinstance(pending, dict)
        else {},
        {key: value for key, value in folded.items() if isinstance(value, int)}
        if isinstance(folded, dict)
        else {},
    )


def _store(path: Path, record: SpendFile) -> None:
    """Replace the file atomically: a reader sees the old days or the new ones, never half a file. Callers hold
    the file's lock.

    No fsync: the rename alone survives the kernel's crash or kill (the data is in the OS's cache); only a crash
    of the machine itself can lose the last folds. A damaged file is set aside as ``<name>.damaged`` first."""
    if record.damaged:
        with contextlib.suppress(FileNotFoundError):
            os.replace(path, path.with_name(path.name + ".damaged"))
    temp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    data: dict[str, Any] = {"version": 2, "days": record.days}
    if record.pending:
        data["team_pending"] = record.pending
    if record.folded:
        data["journal"] = record.folded  # day: bytes of its journal that "days" includes
    try:
        with open(temp, "w", encoding="utf-8") as handle:
            json.dump(data, handle)
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)


def _day_spend(entry: dict[str, Any]) -> tuple[float, int]:
    return float(entry.get("usd", 0.0)), int(entry.get("tokens", 0))


def _add_spend(days: dict[str, dict[str, Any]], day: str, usd: float, tokens: int) -> None:
    if usd or tokens or day not in days:
        old_usd, old_tokens = _day_spend(days.get(day, {}))
        days[day] = {"usd": old_usd + usd, "tokens": old_tokens + tokens}


class _Journal:
    """The day's journal a router appends to, kept open between calls (one open per day, not one per call)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: tuple[Path, int] | None = None  # (journal, descriptor)
        self._closer: weakref.finalize[Any, Any] | None = None
        self._where: tuple[Path, str, Path, bool] | None = (
            None  # spend file, day, its journal, on a network fs
        )

    def append(self, path: Path, day: str, usd: float, tokens: int) -> bool:
        """Append one call's spend to the day's journal beside ``path``, in one write; True when the journal
        just passed a multiple of the fold bound. The line starts with a newline too, so a torn line before it
        (a machine crash in the middle of a write) ends there and is skipped alone. On a network filesystem
        the journal is opened for each append, under the file's lock."""
        line = ("\n" + json.dumps({"usd": usd, "tokens": tokens}) + "\n").encode()
        where = self._where
        if where is None or where[0] is not path or where[1] != day:
            where = self._where = (path, day, journal_path(path, day), _networked(str(path.parent)))
        journal, networked = where[2], where[3]
        with _locked(path) if networked else contextlib.nullcontext(), self._lock:
            fd = self._descriptor(path, journal, networked)
            written = os.write(fd, line)
            end = os.lseek(fd, 0, os.SEEK_CUR)
            if networked:
                self._release()
        if written != len(line):
            raise OSError(f"only {written} of {len(line)} bytes of a call's spend were written to {journal}")
        return end // _FOLD_BYTES != (end - len(line)) // _FOLD_BYTES

    def close(self) -> None:
        """Close the journal (the next append opens it again)."""
        with self._lock:
            self._release()

    def _release(self) -> None:
        if self._closer is not None:
            self._closer()  # closes the descriptor, once
        self._open = self._closer = None

    def _descriptor(self, path: Path, journal: Path, networked: bool) -> int:
        """The open journal; opened again for a new day or spend file, when it was deleted (a fold deletes
        only journals days old, a user any), and on a network filesystem (whose deleted files still count links)."""
        known = self._open
        if not networked and known is not None and known[0] == journal and os.fstat(known[1]).st_nlink:
            return known[1]
        self._release()
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
        try:
            fd = os.open(journal, flags, 0o600)
        except FileNotFoundError:  # the first call of a new home: make the folder
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(journal, flags, 0o600)
        self._open, self._closer = (journal, fd), weakref.finalize(self, os.close, fd)
        return fd


def _journals(path: Path) -> Iterator[tuple[str, Path]]:
    """(day, journal) of each journal beside the spend file ``path``."""
    pattern = re.compile(re.escape(path.name) + r"\.(\d{4}-\d{2}-\d{2})\.journal")
    try:
        names = os.listdir(path.parent)
    except FileNotFoundError:
        return
    for name in sorted(names):
        if found := pattern.fullmatch(name):
            yield found.group(1), path.with_name(name)


def _read_journal(journal: Path, offset: int) -> tuple[float, int, int, int]:
    """(usd, tokens, end, size): the sum of the journal's complete lines from ``offset``, the offset after the
    last of them, and the journal's size; nothing when the journal is gone."""
    try:
        with open(journal, "rb") as handle:
            offset = _from(offset, os.fstat(handle.fileno()).st_size)
            handle.seek(offset)
            data = handle.read()
    except FileNotFoundError:
        return 0.0, 0, offset, offset
    usd, tokens, used = _sum_lines(data, journal, offset)
    return usd, tokens, offset + used, offset + len(data)


def _from(folded: int, size: int) -> int:
    """Where to read a journal of ``size`` bytes whose first ``folded`` bytes the file includes: there, or from
    the start when the journal is shorter (someone deleted it since, and this is a new one)."""
    return folded if size >= folded else 0


def _sum_lines(data: bytes, journal: Path, offset: int) -> tuple[float, int, int]:
    """(usd, tokens, bytes used) of the complete lines in ``data``, read from ``offset`` of ``journal``. A line
    that is not a call's spend is reported and skipped; an unfinished last line is left for the next read (its
    writer may be in the middle of the write)."""
    used = data.rfind(b"\n") + 1
    with contextlib.suppress(
        ValueError, TypeError, KeyError
    ):  # all well formed: one parse (a fold reads 2,000)
        entries = json.loads(
            b"[" + b",".join(line for line in data[:used].split(b"\n") if line.strip()) + b"]"
        )
        return sum(float(e["usd"]) for e in entries), sum(int(e["tokens"]) for e in entries), used
    usd, tokens, at = 0.0, 0, offset
    for line in data[:used].split(b"\n"):
        if line.strip():
            try:
                entry = json.loads(line)
                call_usd, call_tokens = float(entry["usd"]), int(entry["tokens"])
            except (ValueError, TypeError, KeyError, IndexError):
                _report(journal, at, "a line that is not a call's spend (a torn write?), skipped")
            else:
                usd += call_usd
                tokens += call_tokens
        at += len(line) + 1
    return usd, tokens, used


# Damage found in spend files, by the spend file's path: what SpendLimits.problem shows (reported once each).
_damage: dict[str, str] = {}
_reported: set[tuple[str, int]] = set()


def _report(where: Path, offset: int, what: str) -> None:
    """Log damage found at ``offset`` of a spend file or journal, once per process, and keep it for
    :attr:`SpendLimits.problem`."""
    if (str(where), offset) in _reported:
        return
    _reported.add((str(where), offset))
    spend_file = (
        where.with_name(where.name[: -len(".2026-12-02.journal")]) if where.suffix == ".journal" else where
    )
    _damage[str(spend_file)] = f"The spend ledger {where} has {what} (at byte {offset})."
    log.warning("%s", _damage[str(spend_file)])


# Filesystems where O_APPEND is not atomic across machines (NFS emulates it; FUSE: unknown), so appends lock.
_NETWORK_FILESYSTEMS = ("nfs", "nfs4", "cifs", "smb3", "smbfs", "ceph", "glusterfs", "lustre", "gpfs", "9p")


@functools.lru_cache(maxsize=16)
def _networked(folder: str) -> bool:
    """Whether ``folder`` is on a network filesystem (by ``/proc/self/mountinfo``; False without it)."""
    try:
        mountinfo = Path("/proc/self/mountinfo").read_text(encoding="utf-8")
    except OSError:
        return False
    kind = filesystem_of(os.path.realpath(folder), mountinfo)
    return kind in _NETWORK_FILESYSTEMS or kind.startswith("fuse")


def filesystem_of(folder: str, mountinfo: str) -> str:
    """The filesystem type of the mount holding the absolute path ``folder``, by the text of a
    ``/proc/<pid>/mountinfo`` file ("" when no mount holds it)."""
    best, kind = -1, ""
    for line in mountinfo.splitlines():
        fields = line.split(" ")
        if " - " not in line or len(fields) < 5:
            continue
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])  # "\040" is a space
        inside = folder == point or folder.startswith(point.rstrip("/") + "/")
        if inside and len(point) > best:
            best, kind = len(point), line.split(" - ", 1)[1].split(" ")[0]
    return kind


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


def team_ledger(settings: Any, spend_file: Callable[[], Path]) -> TeamLedger | None:
    """The team ledger of the team vault that ``settings``' config names (``$ARIES_VAULT_URL``, else
    ``c.AriesVault.url``; the schema ``$ARIES_VAULT_SCHEMA``, else ``c.AriesVault.schema``), or None without
    one. ``spend_file`` gives the local file that keeps pending spend."""
    from aries_kernel.vault.vault import AriesVault  # the vault's settings, only when spend is first counted

    vault = AriesVault(config=getattr(settings, "config", None))
    url = aries_setting("ARIES_VAULT_URL", vault.url)
    if not url:
        return None
    return TeamLedger(url, aries_setting("ARIES_VAULT_SCHEMA", vault.schema), spend_file)


class TeamLedger:
    """One user's spend in a team vault's database, by the database's UTC day (see the module docstring).

    ``user`` defaults to :func:`aries_kernel.user.current_user`. Every method is safe from several threads; a
    failure of the database is never raised: the spend goes pending and :attr:`problem` says why."""

    def __init__(
        self,
        url: str,
        schema_name: str,
        spend_file: Callable[[], Path],
        *,
        user: str | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = url
        self.schema_name = schema_name
        self.user = user or current_user()
        self.where = f"{redact(mask_url(url))} (schema {schema_name})"
        self.retry_seconds = TEAM_RETRY_SECONDS
        self.problem: str | None = None  # why the ledger is not counting right now
        self._spend_file = spend_file
        self._monotonic = monotonic
        self._lock = threading.RLock()
        self._index: Any = None  # the VaultIndex on the database, opened on first use
        self._known: tuple[str, float, int] = ("", 0.0, 0)  # (day, usd, tokens) the database last gave
        self._failed_at = -float("inf")  # when the database last failed to answer (monotonic)
        self._memory: list[float] = [0.0, 0, 0]  # pending spend the file could not keep: usd, tokens, calls

    def today(self) -> tuple[str, float, int]:
        """(day, usd, tokens) of this user today: the ledger's total, plus any spend still pending; while the
        database is away, the last total it gave plus the pending spend ("" for a day it never gave)."""
        with self._lock:
            self._ask(lambda index: index.spend_today())
            day, usd, tokens = self._known
            pending = self._pending()
            return day, usd + pending[0], tokens + int(pending[1])

    def add(self, usd: float, tokens: int) -> None:
        """Add one call's spend to the ledger, or, while it does not answer, to the pending spend."""
        with self._lock:
            if not self._ask(lambda index: index.add_spend(usd, tokens)):
                self._keep_pending(usd, tokens)

    def close(self) -> None:
        """Release the database connections."""
        with self._lock:
            if self._index is not None:
                self._index.close()
                self._index = None

    # -- the database ---------------------------------------------------------------------------------------

    def _ask(self, work: Callable[[Any], tuple[str, float, int]]) -> bool:
        """Push the pending spend, then ``work(index)`` (its result becomes the known total); False when the
        database did not answer (or is not tried again yet)."""
        from sqlalchemy.exc import SQLAlchemyError

        from aries_kernel.vault.errors import VaultUnavailable

        if self._monotonic() < self._failed_at + self.retry_seconds:
            return False
        try:
            if self._index is None:
                from aries_kernel.vault.db import VaultIndex

                # retry_seconds=0: one attempt, so a model call never waits on an absent database.
                self._index = VaultIndex(
                    url=self.url, schema_name=self.schema_name, user=self.user, retry_seconds=0.0
                )
            pushed = self._push_pending(self._index)
            self._known = work(self._index)
        # ValueError: a URL or schema name the vault refuses; ImportError: no psycopg (both say what to do).
        except (VaultUnavailable, SQLAlchemyError, OSError, ImportError, ValueError) as exc:
            self._away(exc)
            return False
        if self.problem is not None:
            log.warning("The team spend ledger %s answers again; %s pending added to it.", self.where, pushed)
            self.problem = None
        return True

    def _away(self, exc: BaseException) -> None:
        self._failed_at = self._monotonic()
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        told = self.problem is not None
        self.problem = (
            f"The team spend ledger {self.where} does not answer ({redact(reason)}); this kernel's spend is kept "
            f"as pending in {self._where_pending()} and added to the ledger when it answers (tried again every "
            f"{self.retry_seconds:.0f} s). Until then the daily limits count the ledger's last total plus the "
            "pending spend."
        )
        if not told:
            log.warning("%s", self.problem)

    # -- pending spend --------------------------------------------------------------------------------------

    def _where_pending(self) -> str:
        try:
            return str(self._spend_file())
        except RuntimeError:
            return "this kernel's memory (no home folder)"

    def _pending(self) -> tuple[float, int]:
        """(usd, tokens) pending for this user: in the file, and in memory when the file could not keep it."""
        try:
            entry = _load(self._spend_file()).pending.get(self.user, {})
        except (OSError, RuntimeError, ValueError):
            entry = {}
        return (
            float(entry.get("usd", 0.0)) + self._memory[0],
            int(entry.get("tokens", 0)) + int(self._memory[1]),
        )

    def _keep_pending(self, usd: float, tokens: int) -> None:
        try:
            path = self._spend_file()
            with _locked(path):
                record = _load(path)
                entry = record.pending.setdefault(self.user, {"usd": 0.0, "tokens": 0, "calls": 0})
                entry["usd"] = float(entry.get("usd", 0.0)) + usd
                entry["tokens"] = int(entry.get("tokens", 0)) + tokens
                entry["calls"] = int(entry.get("calls", 0)) + 1
                _store(path, record)
        except (OSError, RuntimeError, ValueError):
            self._memory[0] += usd
            self._memory[1] += tokens
            self._memory[2] += 1

    def _push_pending(self, index: Any) -> str:
        """Add the pending spend to the ledger and take it off the file, under the file's lock (so two kernels
        sharing the file push it once); returns what was pushed, as a phrase."""
        usd, tokens, calls = self._memory
        if calls:
            index.add_spend(usd, int(tokens), int(calls))
            self._memory = [0.0, 0, 0]
        try:
            path = self._spend_file()
            if not path.exists():
                return _amount(usd, True)
            with _locked(path):
                record = _load(path)
                entry = record.pending.pop(self.user, None)
                if entry:
                    index.add_spend(
                        float(entry.get("usd", 0.0)), int(entry.get("tokens", 0)), int(entry.get("calls", 0))
                    )
                    _store(path, record)
                    usd += float(entry.get("usd", 0.0))
        except (OSError, RuntimeError, ValueError):  # no usable file: nothing can be pending in it
            pass
        return _amount(usd, True)
