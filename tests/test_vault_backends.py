"""The vault index on SQLite and on PostgreSQL: migrations, load from six processes, and faults.

Load: four processes each add 250 notes while two others query, on each backend. Faults: a writer killed with
SIGKILL mid-burst (both backends), the PostgreSQL server stopped and started again mid-burst, and the SQLite
file deleted or truncated mid-burst. In every case each add that returned is in the vault afterwards.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from aries_kernel.redact import mask_url
from aries_kernel.vault import HashEmbedder, open_vault
from aries_kernel.vault.db import VaultIndex, schema
from aries_kernel.vault.db.schema import MIGRATIONS
from tests.process_support import finish

pytestmark = pytest.mark.usefixtures("backend")

WRITER = textwrap.dedent(
    """
    import sys
    from aries_kernel.vault import HashEmbedder, open_vault
    tag, count = sys.argv[1], int(sys.argv[2])
    vault = open_vault(None, embedder=HashEmbedder())
    for i in range(count):
        result = vault.add(f"Writer {tag} fact {i}", f"Process {tag} records fact {i} about topic{i * 7919 % 1009}.")
        # "unchanged": a retry after a commit whose answer was lost with the connection finds the note there.
        assert result.action in ("created", "unchanged"), result
        print(result.title, flush=True)
    """
)

QUERIER = textwrap.dedent(
    """
    import os, sys
    from aries_kernel.vault import HashEmbedder, open_vault
    stop = sys.argv[1]
    vault = open_vault(None, embedder=HashEmbedder())
    done = 0
    while not os.path.exists(stop) or done < 3:
        frame = vault.query_ranked(f"fact about topic{done * 31 % 1009}", limit=5)
        assert list(frame.columns)[:3] == ["title", "source", "score"]
        done += 1
    print(done, flush=True)
    """
)


def _spawn(script: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        env=env or dict(os.environ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture
def vault_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The global vault folder every process of the test shares (``$ARIES_VAULT``)."""
    folder = tmp_path / "vault"
    monkeypatch.setenv("ARIES_VAULT", str(folder))
    return folder


def test_migrations_are_named_ordered_and_applied_once(backend: str, tmp_path: Path) -> None:
    index = _index(backend, tmp_path)
    names = index.read(
        lambda c: list(c.execute(text("SELECT name FROM _vault_migrations ORDER BY applied_at")).scalars())
    )
    assert names == [m.__name__ for m in MIGRATIONS] and names[-1] == "m010_spend"
    index.close()
    again = _index(backend, tmp_path)  # reopening applies nothing twice
    assert again.read(lambda c: c.execute(text("SELECT count(*) FROM _vault_migrations")).scalar()) == len(
        MIGRATIONS
    )
    if backend == "postgresql":
        kinds = again.read(
            lambda c: dict(
                c.execute(
                    text("SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'notes' "
                         "AND table_schema = current_schema()")
                ).all()
            )
        )  # fmt: skip
        assert (
            kinds["tsv"] == "tsvector"
            and kinds["created"] == "double precision"
            and kinds["mtime_ns"] == "bigint"
        )
    again.close()


def test_an_old_index_is_upgraded_and_keeps_its_learned_state(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(schema, "MIGRATIONS", MIGRATIONS[:5])  # an index written before the team vault
    old = _index(backend, tmp_path)
    old.write(lambda c: c.execute(text("INSERT INTO q_values (key, q, exposures) VALUES ('a note', 0.7, 3)")))
    old.close()
    monkeypatch.setattr(schema, "MIGRATIONS", MIGRATIONS)
    monkeypatch.setenv("ARIES_USER", "carol")
    upgraded = _index(backend, tmp_path)
    assert upgraded.q_values() == {"a note": (pytest.approx(0.7), 3)}  # carol migrated it: it is hers
    assert _index(backend, tmp_path, user="dave").q_values() == {}
    upgraded.close()


def _index(backend: str, tmp_path: Path, user: str | None = None) -> VaultIndex:
    if backend == "sqlite":
        return VaultIndex(tmp_path / "index.db", user=user)
    return VaultIndex(
        url=os.environ["ARIES_VAULT_URL"], schema_name=os.environ["ARIES_VAULT_SCHEMA"], user=user
    )


# Adds per writer: enough for the four to overlap all along (each add is a transaction of its own, so the writers
# interleave from the first add on), a quarter of what it was, which took two minutes of the suite on PostgreSQL.
BURST = 250


def test_four_writers_and_two_readers(
    backend: str, vault_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    open_vault(None, embedder=HashEmbedder()).stores[0].index.close()  # schema built before the burst
    stop = tmp_path / "stop"
    started = time.perf_counter()
    writers = [_spawn(WRITER, tag, str(BURST)) for tag in "ABCD"]
    readers = [_spawn(QUERIER, str(stop)) for _ in range(2)]
    outputs = [p.communicate(timeout=1800) for p in writers]
    elapsed = time.perf_counter() - started
    stop.touch()
    queried = [p.communicate(timeout=600) for p in readers]
    for proc, (_out, err) in zip([*writers, *readers], [*outputs, *queried], strict=True):
        assert proc.returncode == 0, err
        assert "Traceback" not in err and "locked" not in err.lower()
    assert [len(out.splitlines()) for out, _ in outputs] == [BURST] * 4
    vault = open_vault(None, embedder=HashEmbedder())
    titles = set(vault.titles())
    assert len(titles) == 4 * BURST and all(
        f"Writer {t} fact {i}" in titles for t in "ABCD" for i in (0, BURST // 2, BURST - 1)
    )
    queries = sum(int(out.strip()) for out, _ in queried)
    with capsys.disabled():
        print(
            f"\n[{backend}] 4 writers x {BURST:,} adds with 2 readers: {4 * BURST / elapsed:,.0f} adds/s "
            f"({elapsed:.1f} s), {queries / elapsed:,.1f} queries/s"
        )
    vault.stores[0].index.close()


def test_a_writer_killed_mid_burst_loses_no_returned_add(backend: str, vault_env: Path) -> None:
    proc = _spawn(WRITER, "K", "100000")
    assert proc.stdout is not None
    returned = [proc.stdout.readline().strip() for _ in range(150)]
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    returned.extend(line.strip() for line in proc.stdout.read().splitlines() if line.strip())
    proc.stdout.close()
    proc.stderr.close()  # type: ignore[union-attr]
    vault = open_vault(None, embedder=HashEmbedder())
    titles = set(vault.titles())
    assert [t for t in returned if t not in titles] == []
    assert vault.add("After the crash", "The vault accepts writes again.").action == "created"
    vault.stores[0].index.close()


@pytest.mark.sqlite_only  # the file itself goes
@pytest.mark.parametrize("damage", ["deleted", "truncated"])
def test_sqlite_index_deleted_or_truncated_mid_burst(backend: str, vault_env: Path, damage: str) -> None:
    open_vault(None, embedder=HashEmbedder()).stores[0].index.close()
    db = vault_env / ".aries" / "index.db"
    writers = [_spawn(WRITER, tag, "150") for tag in "AB"]
    assert writers[0].stdout is not None
    seen = [writers[0].stdout.readline().strip() for _ in range(40)]
    if damage == "deleted":
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
    else:
        os.truncate(db, 0)
    returned = list(seen)
    for proc in writers:
        out, err = finish(proc)  # lines were read from it: see finish
        assert proc.returncode == 0, err
        returned.extend(line.strip() for line in out.splitlines() if line.strip())
    assert len(returned) == 300
    vault = open_vault(None, embedder=HashEmbedder())
    titles = set(vault.titles())
    assert [t for t in returned if t not in titles] == []
    vault.stores[0].index.close()


@pytest.mark.postgres_only
def test_server_restarted_mid_burst(
    backend: str,
    vault_env: Path,
    pg_server,
    monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
) -> None:
    # A password in the URL (trust auth ignores it) must never appear in a message.
    url = pg_server.url.replace("aries@", "aries:hunter2-secret@")
    monkeypatch.setenv("ARIES_VAULT_URL", url)
    open_vault(None, embedder=HashEmbedder()).stores[0].index.close()
    writers = [_spawn(WRITER, tag, "300") for tag in "AB"]
    assert writers[0].stdout is not None
    returned = [writers[0].stdout.readline().strip() for _ in range(60)]
    pg_server.stop()
    # Started again once writer A (240 adds still to go) has met the refused connection and said so: the
    # writers' own retry budget (60 s) bounds the wait, no sleep decides it.
    assert writers[0].stderr is not None
    waited = []
    while not any("is not reachable" in line for line in waited):
        line = writers[0].stderr.readline()
        assert line, "".join(waited)  # writer A ended without meeting the stopped server
        waited.append(line)
    pg_server.start()
    errors = ["".join(waited)]
    for proc in writers:
        out, err = finish(proc)  # lines were read from it: see finish
        assert proc.returncode == 0, err
        returned.extend(line.strip() for line in out.splitlines() if line.strip())
        errors.append(err)
    assert len(returned) == 600
    said = "".join(errors)
    assert "is not reachable" in said and "retrying for up to 60 s" in said and "answers again" in said
    assert "hunter2" not in said and "aries:***@127.0.0.1" in said
    vault = open_vault(None, embedder=HashEmbedder())
    titles = set(vault.titles())
    assert [t for t in returned if t not in titles] == [] and len(titles) == 600
    vault.stores[0].index.close()


@pytest.mark.postgres_only
def test_an_unreachable_server_gives_up_with_a_clear_message(backend: str, tmp_path: Path) -> None:
    from aries_kernel.vault import VaultUnavailable

    with pytest.raises(
        VaultUnavailable, match=r"did not answer for 1 s .*PG\* environment or ~/.pgpass"
    ) as info:
        VaultIndex(url="postgresql://aries:pw-123456@127.0.0.1:9/none", retry_seconds=1.0)
    assert "pw-123456" not in str(info.value) and "aries:***@127.0.0.1:9" in str(info.value)
    assert mask_url("postgresql://aries:pw-123456@db/x") == "postgresql://aries:***@db/x"
