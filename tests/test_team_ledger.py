"""The team spend ledger: with a team vault, each user's spend per UTC day of the database, on a real PostgreSQL.

Two users, one database: each one's total is their own; many threads and processes of one user recording at
once lose no call; ``team_daily_budget_usd`` stops a member whose other machine spent the cap; a member whose
clock is off counts on the database's day; a database that goes away keeps the spend pending in the local file
and adds it once when it answers; and ``%aries cost`` in a real kernel shows the user's team total.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from traitlets.config import Config

from aries_kernel.models import BudgetExceeded, ModelRouter, SpendLimits
from aries_kernel.models.budget import TeamLedger, read_spend
from aries_kernel.models.router import AriesModels
from aries_kernel.models.types import Message, ModelRequest
from tests.kernel_harness import run_cell, start_kernel, stop_kernel
from tests.loopback import ScriptedModelServer
from tests.models_support import fast_config
from tests.pg_support import PgServer, temporary_server

TOKENS_PER_CALL = 11 + 7  # the loopback server's usage of one call
PRICES = {"haiku": [1000.0, 1000.0]}  # $1,000 per million tokens: one call of 18 tokens is $0.018
REQUEST = ModelRequest([Message("user", "hi")], max_tokens=50)


@pytest.fixture
def team(pg_server: PgServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[str]:
    """A fresh team vault schema on the suite's server, named in the environment (as a hub's spawner would)."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    monkeypatch.setenv("ARIES_VAULT_URL", pg_server.url)
    monkeypatch.setenv("ARIES_VAULT_SCHEMA", schema)
    monkeypatch.setenv("ARIES_SPEND_FILE", str(tmp_path / "spend.json"))
    try:
        yield schema
    finally:
        pg_server.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def _ledger(url: str, schema: str, user: str, spend_file: Path) -> TeamLedger:
    return TeamLedger(url, schema, lambda: spend_file, user=user)


def _rows(url: str, schema: str) -> dict[str, tuple[str, float, int, int]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(f"SELECT username, day, usd, tokens, calls FROM {schema}.spend").fetchall()
    return {r[0]: (r[1], float(r[2]), int(r[3]), int(r[4])) for r in rows}


def _db_day(url: str) -> str:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD')").fetchone()
    assert row is not None
    return str(row[0])


def test_two_users_each_have_their_own_total_and_the_settings_find_the_ledger(
    team: str, pg_server: PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JUPYTERHUB_USER", "alice")
    alice = SpendLimits(
        AriesModels(config=Config())
    )  # the team ledger from $ARIES_VAULT_URL, user from the hub
    assert alice.team is not None and alice.team.user == "alice"
    bob = SpendLimits(
        AriesModels(config=Config()), team=_ledger(pg_server.url, team, "bob", tmp_path / "bob.json")
    )
    alice.record(100, 0.25)
    alice.record(50, 0.5)
    bob.record(7, 0.125)
    day = _db_day(pg_server.url)
    assert _rows(pg_server.url, team) == {"alice": (day, 0.75, 150, 2), "bob": (day, 0.125, 7, 1)}
    spend = alice.spend()
    assert (spend.today_usd, spend.today_tokens) == (0.75, 150)
    assert bob.spend().today_usd == 0.125
    assert (
        spend.lines()[1]
        == f"Today (team ledger, alice, UTC day {day}): $0.7500 (no limit), 150 tokens (no limit)"
    )
    assert alice.problem is None
    alice.close()
    bob.close()


WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from aries_kernel.models.budget import TeamLedger
    url, schema, spend_file, count = sys.argv[1], sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
    ledger = TeamLedger(url, schema, lambda: spend_file, user="alice")
    for _ in range(count):
        ledger.add(0.001, 3)
    assert ledger.problem is None, ledger.problem
    print("done", flush=True)
    """
)


def test_threads_and_processes_recording_at_once_lose_no_call(
    team: str, pg_server: PgServer, tmp_path: Path
) -> None:
    threads_n, processes_n, each = 6, 3, 40
    start = threading.Barrier(threads_n)
    ledgers = [_ledger(pg_server.url, team, "alice", tmp_path / f"t{i}.json") for i in range(threads_n)]
    for ledger in ledgers:
        ledger.today()  # connected (and the schema built) before the burst

    def record(ledger: TeamLedger) -> None:
        start.wait()
        for _ in range(each):
            ledger.add(0.001, 3)

    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, pg_server.url, team, str(tmp_path / f"p{i}.json"), str(each)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(processes_n)
    ]
    workers = [threading.Thread(target=record, args=(ledger,)) for ledger in ledgers]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0 and out.strip() == "done", err
    calls = (threads_n + processes_n) * each
    _, usd, tokens, counted = _rows(pg_server.url, team)["alice"]
    assert (counted, tokens) == (calls, 3 * calls)
    assert usd == pytest.approx(0.001 * calls)
    assert all(ledger.problem is None for ledger in ledgers)
    for ledger in ledgers:
        ledger.close()


def test_the_team_cap_stops_a_member_whose_other_machine_spent_it(
    team: str,
    pg_server: PgServer,
    server: ScriptedModelServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ARIES_USER", "carol")
    # Carol's other machine: its own home and spend file, the same team ledger.
    other = _ledger(pg_server.url, team, "carol", tmp_path / "other-machine.json")
    other.add(0.04, 40)
    router = ModelRouter(config=fast_config(prices=PRICES, team_daily_budget_usd=0.05))
    client = router.client("cheap")
    client.complete(REQUEST)  # $0.04 < $0.05 before it: sent, and it crosses the cap
    with pytest.raises(BudgetExceeded) as raised:
        client.complete(REQUEST)
    assert len(server.requests) == 1
    assert "team daily budget of $0.0500 is reached ($0.0580 spent" in str(raised.value)
    assert "c.AriesModels.team_daily_budget_usd" in str(raised.value)
    # A member below the cap is not stopped by carol's spend.
    monkeypatch.setenv("ARIES_USER", "dave")
    dave = ModelRouter(config=fast_config(prices=PRICES, team_daily_budget_usd=0.05))
    dave.client("cheap").complete(REQUEST)
    assert len(server.requests) == 2
    assert _rows(pg_server.url, team)["dave"][2] == TOKENS_PER_CALL
    for made in (router, dave):
        made.close()
    other.close()


def test_a_member_whose_clock_is_off_counts_on_the_databases_day(
    team: str, pg_server: PgServer, tmp_path: Path
) -> None:
    day = _db_day(pg_server.url)
    for user, offset in (("erin", 0.0), ("frank", 3600.0), ("gina", -3600.0 * 30)):
        limits = SpendLimits(
            AriesModels(config=Config()),
            clock=lambda offset=offset: time.time() + offset,  # type: ignore[misc]
            team=_ledger(pg_server.url, team, user, tmp_path / f"{user}.json"),
        )
        limits.record(10, 0.01)
        assert limits.spend().today_from.endswith(f"UTC day {day}")
        limits.close()
    assert {user: row[0] for user, row in _rows(pg_server.url, team).items()} == {
        "erin": day,
        "frank": day,
        "gina": day,
    }


def test_a_database_that_goes_away_keeps_the_spend_pending_and_adds_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spend_file = tmp_path / "home" / ".aries" / "spend.json"
    monkeypatch.setenv("ARIES_SPEND_FILE", str(spend_file))
    with temporary_server() as pg:
        ledger = _ledger(pg.url, "aries_vault", "hana", spend_file)
        settings = AriesModels(config=Config(AriesModels={"daily_budget_usd": 1.0}))
        limits = SpendLimits(settings, team=ledger)
        limits.record(100, 0.5)
        pg.stop()
        limits.record(100, 0.25)  # the database is away: pending in the file
        assert ledger.problem is not None and "does not answer" in ledger.problem
        assert str(spend_file) in ledger.problem and limits.problem == ledger.problem
        pending = read_spend(spend_file).pending["hana"]
        assert (pending["usd"], pending["tokens"], pending["calls"]) == (0.25, 100, 1)
        ledger.retry_seconds = 0.0  # try the database at every call from now on
        limits.record(100, 0.25)  # still away: pending grows
        with pytest.raises(BudgetExceeded, match=r"daily budget of \$1.0000 is reached \(\$1.0000 spent"):
            limits.check("primary")  # the last total the database gave plus the pending spend
        pg.start()
        spend = limits.spend()  # the database answers: the pending spend is added to it
        assert (spend.today_usd, spend.today_tokens) == (1.0, 300)
        assert ledger.problem is None and limits.problem is None
        assert not read_spend(spend_file).pending
        assert limits.spend().today_usd == 1.0  # counted once
        assert _rows(pg.url, "aries_vault")["hana"][1:] == (1.0, 300, 3)
        limits.close()


def test_aries_cost_in_a_real_kernel_shows_the_users_team_total(
    team: str, pg_server: PgServer, tmp_path: Path
) -> None:
    # Ivan spent on another server; his new kernel, started as a hub's spawner starts it, shows the team total.
    _ledger(pg_server.url, team, "ivan", tmp_path / "elsewhere.json").add(0.1234, 567)
    env = {
        "JUPYTERHUB_USER": "ivan",
        "ARIES_USER": "someone-else",
        "ARIES_VAULT_URL": pg_server.url,
        "ARIES_VAULT_SCHEMA": team,
        "ARIES_SPEND_FILE": str(tmp_path / "kernel-spend.json"),
    }
    km, kc = start_kernel(tmp_path, env=env)
    try:
        cost = run_cell(kc, "%aries cost")
        assert cost.error is None, cost.error
        day = _db_day(pg_server.url)
        assert f"Today (team ledger, ivan, UTC day {day}): $0.1234 (no limit), 567 tokens (no limit)" in str(
            cost.result
        )
        status = run_cell(kc, "%aries status")
        assert "ivan (from $JUPYTERHUB_USER)" in str(status.result)
        assert f"Daily spend: the team ledger in {pg_server.url} (schema {team})" in str(status.result)
    finally:
        stop_kernel(km, kc)


def test_a_ledger_that_never_answered_still_counts_this_machines_day(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ARIES_VAULT_URL", raising=False)
    with socket.socket() as sock:  # a port nothing listens on: the team database is down from the start
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    spend_file = tmp_path / "spend.json"
    monkeypatch.setenv("ARIES_SPEND_FILE", str(spend_file))
    settings = AriesModels(config=Config(AriesModels={"daily_budget_usd": 1.0}))
    SpendLimits(settings).record(10, 0.9)  # this machine's spend earlier today, before the team vault was set
    ledger = _ledger(f"postgresql://aries@127.0.0.1:{port}/postgres", "aries_vault", "ivo", spend_file)
    limits = SpendLimits(settings, team=ledger)
    limits.record(10, 0.05)
    assert ledger.problem is not None and "does not answer" in ledger.problem
    assert "UTC day unknown" in limits.spend().today_from
    limits.check("primary")  # $0.95 of $1.00
    limits.record(10, 0.05)
    with pytest.raises(BudgetExceeded, match=r"daily budget of \$1.0000 is reached"):
        limits.check("primary")
