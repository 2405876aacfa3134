"""A real PostgreSQL server for the vault tests, and the ``backend`` fixture that runs a test on SQLite and on it.

The server is Debian's PostgreSQL (``/usr/lib/postgresql/<n>/bin``), started once per test session in a
temporary folder, listening on 127.0.0.1 on a free port with trust authentication, and stopped at the end.
``initdb`` refuses to run as root, so as root the cluster belongs to ``nobody``. A missing server is a failure,
never a skip: ``.ci/run`` installs the ``postgresql`` package.

A test that takes the ``backend`` fixture runs twice, ``[sqlite]`` and ``[postgresql]``; on PostgreSQL it gets
``$ARIES_VAULT_URL`` and a fresh ``$ARIES_VAULT_SCHEMA`` (dropped afterwards), which ``open_vault`` and every
process the test starts inherit. Mark a test ``@pytest.mark.sqlite_only`` when it is about the SQLite file
itself (its header, its -wal, deleting it), which has no PostgreSQL counterpart, and ``postgres_only`` when it
is about the server (restarting it).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from tests.net_support import free_port

__all__ = ["PgServer", "backend", "pg_server", "temporary_server"]

BACKENDS = ("sqlite", "postgresql")


@dataclass
class PgServer:
    """One running cluster: its URL (no password), data folder, and the user that owns it."""

    bin: Path
    data: Path
    port: int
    owner: str | None

    @property
    def url(self) -> str:
        return f"postgresql://aries@127.0.0.1:{self.port}/postgres"

    def _ctl(self, *args: str) -> None:
        command = [str(self.bin / "pg_ctl"), "-D", str(self.data), *args]
        if self.owner:
            command = ["runuser", "-u", self.owner, "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=120)

    def start(self) -> None:
        # A throwaway test server: no fsync, no wait for the WAL flush at commit, no full-page images. A crash
        # of this machine may lose what it holds, which the suite never needs; what the tests check (every add
        # that returned is there, across a server restart) holds, since a clean stop writes everything out.
        options = (
            f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.data} -c max_connections=200 "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        self._ctl("-o", options, "-l", str(self.data / "server.log"), "-w", "start")

    def stop(self) -> None:
        self._ctl("-m", "fast", "-w", "stop")

    def execute(self, sql: str) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(sql)


def _pg_bin() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        pytest.fail(
            "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb): the vault suite runs on SQLite "
            "and on PostgreSQL. Install Debian's package: apt-get install postgresql (.ci/run does).",
            pytrace=False,
        )
    return Path(found[-1]).parent


@contextlib.contextmanager
def temporary_server() -> Iterator[PgServer]:
    """A PostgreSQL cluster in a temporary folder on a free loopback port, stopped and removed on exit."""
    binary = _pg_bin()
    owner = "nobody" if os.geteuid() == 0 else None
    data = Path(tempfile.mkdtemp(prefix="aries-pg-"))
    if owner:
        record = pwd.getpwnam(owner)
        os.chown(data, record.pw_uid, record.pw_gid)
    server = PgServer(binary, data, free_port(), owner)
    init = [str(binary / "initdb"), "-D", str(data), "-U", "aries", "-A", "trust", "-E", "UTF8", "--no-sync"]
    try:
        subprocess.run(
            ["runuser", "-u", owner, "--", *init] if owner else init,
            check=True,
            capture_output=True,
            timeout=300,
        )
        server.start()
        yield server
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            server.stop()
        shutil.rmtree(data, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """A PostgreSQL server for the whole session (see :func:`temporary_server`)."""
    with temporary_server() as server:
        yield server


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" in metafunc.fixturenames:
        names = list(BACKENDS)
        if metafunc.definition.get_closest_marker("sqlite_only"):
            names = ["sqlite"]
        elif metafunc.definition.get_closest_marker("postgres_only"):
            names = ["postgresql"]
        metafunc.parametrize("backend", names, indirect=True)


@pytest.fixture
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """``sqlite`` or ``postgresql``; on PostgreSQL the vault URL and a fresh schema are in the environment."""
    name = request.param
    if name == "sqlite":
        monkeypatch.delenv("ARIES_VAULT_URL", raising=False)
        yield name
        return
    server: PgServer = request.getfixturevalue("pg_server")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    monkeypatch.setenv("ARIES_VAULT_URL", server.url)
    monkeypatch.setenv("ARIES_VAULT_SCHEMA", schema)
    try:
        yield name
    finally:
        server.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
