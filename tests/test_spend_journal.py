"""The spend file's journal: a call's spend is one append (the file is not rewritten per call), kernels recording at
once lose nothing and see each other's spend at their next check, the journals fold into the file's days, and a
torn journal line or a damaged file is reported and skipped without losing anything else."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from traitlets.config import Config

from aries_kernel.models import BudgetExceeded, SpendLimits
from aries_kernel.models.budget import filesystem_of, journal_path, read_spend
from aries_kernel.models.router import AriesModels

DAY_SECONDS = 86_400.0


@pytest.fixture
def spend_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "home" / ".aries" / "spend.json"
    monkeypatch.setenv("ARIES_SPEND_FILE", str(path))
    return path


def limits(clock: list[float] | None = None, **settings: object) -> SpendLimits:
    models = AriesModels(config=Config(AriesModels=settings))
    return SpendLimits(models) if clock is None else SpendLimits(models, clock=lambda: clock[0])


def total_tokens(spend_file: Path) -> int:
    return sum(int(day["tokens"]) for day in read_spend(spend_file).days.values())


def test_a_call_appends_to_the_journal_and_leaves_the_file_alone(spend_file: Path) -> None:
    mine = limits()
    mine.record(18, 0.125)  # the first call also folds the journals into the file
    before = os.stat(spend_file)
    for _ in range(50):
        mine.record(18, 0.125)
    after = os.stat(spend_file)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns), "the file was rewritten"
    assert mine.spend().today_usd == 51 * 0.125 and mine.spend().today_tokens == 51 * 18
    mine.close()  # folds
    record = read_spend(spend_file)
    assert [(day["usd"], day["tokens"]) for day in record.days.values()] == [(51 * 0.125, 51 * 18)]
    assert mine.problem is None


WRITER = textwrap.dedent(
    """
    import sys
    from traitlets.config import Config
    from aries_kernel.models import budget
    from aries_kernel.models.router import AriesModels
    budget._FOLD_BYTES = 512  # fold every dozen calls, so folds run while the others append
    limits = budget.SpendLimits(AriesModels(config=Config()))
    print("ready", flush=True)
    sys.stdin.readline()
    for _ in range(int(sys.argv[1])):
        limits.record(3, 0.125)
    limits.close()
    assert limits.problem is None, limits.problem
    print("done", flush=True)
    """
)


def test_kernels_recording_at_once_lose_nothing_and_see_each_other_next_check(spend_file: Path) -> None:
    processes_n, each = 3, 300
    calls = processes_n * each
    watcher = limits(daily_budget_tokens=3 * calls)
    watcher.check("primary")  # read once before: the later checks read only what was appended since
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(each)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes_n)
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready", proc.stderr
    for proc in procs:  # all start at once
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    seen = [watcher.spend().today_tokens]
    while any(proc.poll() is None for proc in procs):
        seen.append(watcher.spend().today_tokens)  # checks while the others append and fold
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0 and out.strip() == "done", err
    assert seen == sorted(seen) and seen[-1] <= 3 * calls, "a check never counts a line twice"
    assert total_tokens(spend_file) == 3 * calls
    assert read_spend(spend_file).days.popitem()[1]["usd"] == calls * 0.125
    with pytest.raises(BudgetExceeded, match=f"daily budget of {3 * calls:,} tokens is reached"):
        watcher.check("primary")
    assert watcher.problem is None


def test_a_torn_journal_line_is_reported_and_skipped_alone(
    spend_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    day = time.strftime("%Y-%m-%d")
    journal = journal_path(spend_file, day)
    journal.parent.mkdir(parents=True)
    # A call's line, then half of one: the machine crashed in the middle of the write.
    journal.write_bytes(b'\n{"usd": 0.5, "tokens": 10}\n\n{"usd": 0.2')
    mine = limits()
    assert mine.spend().today_tokens == 10  # an unfinished last line may still be being written: not yet read
    with caplog.at_level(logging.WARNING, logger="aries_kernel.models.budget"):
        mine.record(7, 0.25)  # its line starts on a line of its own, so the torn one ends there
        spend = mine.spend()
    assert (spend.today_usd, spend.today_tokens) == (0.75, 17)
    assert mine.problem is not None and str(journal) in mine.problem and "torn" in mine.problem
    assert sum(str(journal) in record.getMessage() for record in caplog.records) == 1, "reported once"
    mine.close()
    record = read_spend(spend_file)
    assert record.days[day] == {"usd": 0.75, "tokens": 17}
    assert record.folded[day] == journal.stat().st_size
    assert limits().spend().today_tokens == 17  # another kernel counts the same


def test_a_damaged_spend_file_is_kept_aside_and_the_calls_still_count(spend_file: Path) -> None:
    spend_file.parent.mkdir(parents=True)
    spend_file.write_text('{"version": 2, "days": {"2026-')  # cut short by a full disk or an editor
    mine = limits(daily_budget_tokens=100)
    mine.check("primary")
    mine.record(60, 0.0)
    assert mine.problem is not None and "invalid JSON" in mine.problem and str(spend_file) in mine.problem
    assert spend_file.with_name("spend.json.damaged").read_text() == '{"version": 2, "days": {"2026-'
    mine.record(60, 0.0)
    with pytest.raises(BudgetExceeded, match="daily budget of 100 tokens is reached"):
        mine.check("primary")
    mine.close()
    assert total_tokens(spend_file) == 120


def test_journals_fold_into_the_file_and_old_days_journals_go(spend_file: Path) -> None:
    clock = [1_700_000_000.0]
    days = []
    for _ in range(4):  # four days in a row, a call on each
        mine = limits(clock)
        mine.record(10, 0.5)
        days.append(mine._today())
        clock[0] += DAY_SECONDS
    record = read_spend(spend_file)
    assert sorted(record.days) == days and all(day["tokens"] == 10 for day in record.days.values())
    # The last call's fold took the journal of the day that ended two whole days before its own: in the file now.
    journals = sorted(spend_file.parent.glob("spend.json.*.journal"))
    assert [path.name.split(".")[2] for path in journals] == days[1:]


def test_a_journal_that_cannot_be_written_keeps_the_day_in_memory_and_says_so(spend_file: Path) -> None:
    journal_path(spend_file, time.strftime("%Y-%m-%d")).mkdir(parents=True)  # not a file: every append fails
    mine = limits(daily_budget_tokens=50)
    mine.record(30, 0.0)
    mine.check("primary")
    mine.record(30, 0.0)
    with pytest.raises(BudgetExceeded, match="daily budget of 50 tokens is reached"):
        mine.check("primary")
    assert mine.problem is not None and "in this kernel's memory only" in mine.problem
    assert str(spend_file) in mine.problem


MOUNTINFO = """\
22 1 0:21 / / rw,relatime - overlay overlay rw,lowerdir=/l
35 22 0:40 / /home rw,relatime - nfs4 server:/export/home rw,vers=4.2
36 35 0:41 / /home/my\\040files rw,relatime - ext4 /dev/sdb1 rw
"""


def test_the_filesystem_of_a_folder_is_its_deepest_mounts() -> None:
    assert filesystem_of("/home/alice/.aries", MOUNTINFO) == "nfs4"  # there, appends take the file's lock
    assert filesystem_of("/home/my files/.aries", MOUNTINFO) == "ext4"
    assert filesystem_of("/homework", MOUNTINFO) == "overlay"
    assert filesystem_of("/", MOUNTINFO) == "overlay"


def test_a_journal_deleted_under_a_kernel_is_started_again(spend_file: Path) -> None:
    mine = limits()
    for _ in range(3):
        mine.record(
            10, 0.0
        )  # the first call folds: the file holds its line and the journal's offset after it
    journal_path(spend_file, mine._today()).unlink()  # a user clearing the folder (the kernel has it open)
    mine.record(5, 0.0)
    assert journal_path(spend_file, mine._today()).exists()
    assert mine.spend().today_tokens == 10 + 5  # the folded call, and the new journal read from its start
    assert total_tokens(spend_file) == 15
