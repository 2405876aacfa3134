"""The two backends' engines and what their errors mean: SQLite on a file, PostgreSQL on a server.

:func:`sqlite_engine` opens a file (WAL, a busy timeout, ``BEGIN IMMEDIATE`` for writers); :func:`server_engine`
connects with the libpq parameters :func:`server_parameters` read from the user's URL, the password going only
to the engine's connect arguments. :func:`upsert` is each backend's ``INSERT ... ON CONFLICT``; :func:`is_busy`,
:func:`is_away` and :func:`is_refused` say whether an error is worth waiting out.
"""

from __future__ import annotations

import re
import sqlite3
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.dialects import postgresql as _pg
from sqlalchemy.dialects import sqlite as _sqlite
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.pool import QueuePool

from aries_kernel.redact import mask_url, redact

__all__ = [
    "SCHEMA_NAME",
    "first_line",
    "is_away",
    "is_busy",
    "is_refused",
    "server_engine",
    "server_parameters",
    "sqlite_engine",
    "upsert",
]


def server_parameters(url: str) -> tuple[str, dict[str, str]]:
    """The vault server ``url`` fit for messages (passwords as ``***``, key values redacted) and its libpq
    connection parameters, password included, as libpq itself parses it: a URL (``postgresql://``,
    ``postgres://``, ``postgresql+psycopg://``, the password in the userinfo or ``?password=``) or a key=value
    string (``host=db dbname=aries password='a b'``). Raises ValueError naming the setting when it is neither."""
    shown = redact(mask_url(url))
    setting = "ARIES_VAULT_URL (or c.AriesVault.url)"
    given = _PSYCOPG_SCHEME.sub("postgresql://", url.strip())
    if "://" in given and not given.startswith(("postgresql://", "postgres://")):
        raise ValueError(
            f"The vault URL {shown} is not a PostgreSQL one: {setting} takes postgresql://user@host:5432/db or "
            "a libpq key=value string (host=db dbname=aries)."
        )
    try:
        from psycopg import Error as PsycopgError
        from psycopg.conninfo import conninfo_to_dict
    except ImportError as exc:
        raise ImportError(
            f"The team vault ({setting}) needs psycopg 3: pip install 'aries-kernel[postgres]'."
        ) from exc
    try:
        parameters = conninfo_to_dict(given)
    except PsycopgError as exc:
        # libpq quotes the text it stumbled on, which can be part of a password: neither it nor the value is shown.
        reason = re.sub(r'"[^"]*"', '"..."', str(exc).strip().splitlines()[0] if str(exc).strip() else "")
        raise ValueError(
            f"{setting} is not a URL or key=value string libpq can read ({reason}); a value with spaces or "
            "quotes is written in single quotes (password='a b'), in a URL percent-encoded."
        ) from None
    return shown, {name: str(value) for name, value in parameters.items()}


SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
# SQLAlchemy's name for the psycopg driver, which libpq's own URL parser does not know.
_PSYCOPG_SCHEME = re.compile(r"^\s*postgres(?:ql)?\+psycopg://")
# ts_rank's weights are given for {D, C, B, A}: body C, description B, title A, as FTS5's bm25(4, 2, 1).

# Server gone or going: restarted, shut down, refused, or the connection cut under a transaction.
_AWAY = (
    "connection refused",
    "could not connect",
    "server closed the connection",
    "terminating connection",
    "the database system is",
    "connection is closed",
    "consuming input failed",
    "connection timeout",
    "timeout expired",
    "no connection to the server",
    "connection to server",
    "cannot connect now",
)
# The server answered and said no (the login or the database), which waiting does not change.
_REFUSED = ("password authentication failed", "no password supplied", "pg_hba.conf rejects", "does not exist")


def upsert(conn: Connection, table: Any) -> Any:
    """The backend's INSERT with ``ON CONFLICT`` (SQLite and PostgreSQL spell it the same way)."""
    return (_pg.insert if conn.dialect.name == "postgresql" else _sqlite.insert)(table)


def first_line(exc: BaseException) -> str:
    """The first line of the driver's message of ``exc``, redacted (for messages and logs)."""
    orig = getattr(exc, "orig", None) or exc
    lines = str(orig).strip().splitlines()
    return redact(lines[0]) if lines else type(orig).__name__


def sqlite_engine(db_path: Path, create: bool = False) -> Engine:
    """An engine on the SQLite file ``db_path`` (``create``: make it if missing); every connection in WAL mode
    with a busy timeout, and a transaction opened with ``sqlite_immediate`` begins ``BEGIN IMMEDIATE``."""
    # mode=rw: a connection opened after the file vanished fails ("unable to open") instead of creating an empty
    # file of its own beside another process's rebuild.
    uri = f"file:{urllib.parse.quote(str(db_path))}?mode={'rwc' if create else 'rw'}"
    engine = create_engine(
        "sqlite://",
        creator=lambda: sqlite3.connect(uri, uri=True, timeout=5.0, check_same_thread=False),
        poolclass=QueuePool,
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: sqlite3.Connection, record: Any) -> None:
        # Let SQLAlchemy's "begin" event issue BEGIN itself, so writers can ask for BEGIN IMMEDIATE.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA busy_timeout = 5000")
        # Switching modes needs the file to itself; it is already WAL unless this is someone else's file.
        if cursor.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
            cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        immediate = conn.get_execution_options().get("sqlite_immediate")
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


def server_engine(server: Mapping[str, str], schema_name: str) -> Engine:
    """An engine on the PostgreSQL server of the libpq parameters ``server``, which only its connect arguments
    keep: its URL names the driver alone, so nothing SQLAlchemy renders or raises can hold the password."""
    connect = {"connect_timeout": "5", **server}
    # search_path confines every unqualified table name to this vault's schema.
    connect["options"] = f"{server.get('options', '')} -c search_path={schema_name}".strip()
    return create_engine(
        "postgresql+psycopg://", pool_pre_ping=True, pool_size=2, max_overflow=4, connect_args=connect
    )


def is_busy(exc: OperationalError) -> bool:
    """Whether ``exc`` is SQLite saying another connection holds the lock."""
    text = str(exc.orig).lower()
    return "locked" in text or "busy" in text


def is_refused(exc: DBAPIError) -> bool:
    """Whether ``exc`` is the PostgreSQL server refusing the connection: wrong credentials, no such database."""
    text_ = str(exc.orig).lower()
    return "connection to server" in text_ and any(words in text_ for words in _REFUSED)


def is_away(exc: DBAPIError) -> bool:
    """Whether ``exc`` means the PostgreSQL server is gone or going (not a bug in the statement)."""
    text_ = str(exc.orig).lower()
    return bool(exc.connection_invalidated) or any(words in text_ for words in _AWAY)
