"""Vault server URLs never show their password: in every form libpq accepts (the userinfo, ``?password=``, a
key=value string), wherever the URL surfaces (the raised error, its traceback with the chained causes, log
records, ``VaultIndex.url``, the engine, the vault's repr, ``%aries status``), against a real PostgreSQL server
that asks for a password (and one that is not there)."""

from __future__ import annotations

import logging
import traceback
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from aries_kernel.magics.aries import AriesMagics
from IPython.core.interactiveshell import InteractiveShell
from sqlalchemy import func, select

from aries_kernel.context import AriesContext, get_context, set_context
from aries_kernel.vault import HashEmbedder, VaultUnavailable, open_vault
from aries_kernel.vault.db import VaultIndex, schema
from tests.net_support import free_port

from .pg_support import PgServer, temporary_server

PASSWORD = "s3cret pw"  # what the role's password is; a space, so the URL encodes it and the DSN quotes it
WRONG = "wr0ng-guess"
SECRETS = ("s3cret", "wr0ng")


@pytest.fixture(scope="module")
def auth_server() -> Iterator[PgServer]:
    """A server of its own that asks every role but the suite's superuser for a password (SCRAM)."""
    with temporary_server() as server:
        server.execute(f"CREATE ROLE vaultuser LOGIN PASSWORD '{PASSWORD}'")
        server.execute("GRANT CREATE ON DATABASE postgres TO vaultuser")
        (server.data / "pg_hba.conf").write_text(
            "local all all trust\n"
            "host all aries 127.0.0.1/32 trust\n"
            "host all all 127.0.0.1/32 scram-sha-256\n"
        )
        server.execute("SELECT pg_reload_conf()")
        yield server


def _forms(port: int, password: str) -> dict[str, str]:
    """The same server and role, with ``password``, in the three forms libpq accepts."""
    encoded = password.replace(" ", "%20")
    return {
        "userinfo": f"postgresql://vaultuser:{encoded}@127.0.0.1:{port}/postgres",
        "query": f"postgresql://vaultuser@127.0.0.1:{port}/postgres?password={encoded}&sslmode=disable",
        "key=value": f"host=127.0.0.1 port={port} user=vaultuser password='{password}' dbname=postgres",
    }


def _shown(error: BaseException) -> str:
    """Everything a user or a log can see of ``error``: its message and its traceback with every cause."""
    return str(error) + "".join(traceback.format_exception(error))


def _assert_hidden(*texts: str) -> None:
    for text in texts:
        assert not any(secret in text for secret in SECRETS), text


def _drop(server: PgServer, schema: str) -> None:
    server.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@pytest.mark.parametrize("form", ["userinfo", "query", "key=value"])
def test_a_password_that_works_is_never_kept_or_shown(auth_server: PgServer, form: str) -> None:
    url = _forms(auth_server.port, PASSWORD)[form]
    name = f"t_{uuid.uuid4().hex[:12]}"
    index = VaultIndex(url=url, schema_name=name)
    try:
        assert index.rows(select(func.count()).select_from(schema.notes)) == [(0,)]  # logged in: libpq got it
        assert index.engine is not None
        engine_text = [repr(index.engine), index.engine.url.render_as_string(hide_password=False)]
        _assert_hidden(str(index.url), index.where, *engine_text, repr(vars(index)))
        assert "vaultuser" in str(index.url) and "***" in str(index.url) and "127.0.0.1" in index.where
    finally:
        index.close()
        _drop(auth_server, name)


@pytest.mark.parametrize("form", ["userinfo", "query", "key=value"])
def test_a_refused_password_is_not_in_the_error_its_causes_or_the_log(
    auth_server: PgServer, form: str, caplog: pytest.LogCaptureFixture
) -> None:
    url = _forms(auth_server.port, WRONG)[form]
    with caplog.at_level(logging.DEBUG), pytest.raises(VaultUnavailable) as info:
        # The server said no: raised at once, not after waiting out the retry budget as if it were away.
        VaultIndex(url=url, schema_name="t_refused", retry_seconds=20)
    said = _shown(info.value)
    assert "refused the connection" in str(info.value) and "password authentication failed" in said
    assert info.value.__cause__ is not None  # the driver's error is kept as the cause, and shows nothing
    _assert_hidden(
        said, caplog.text, *(_shown(r.exc_info[1]) for r in caplog.records if r.exc_info and r.exc_info[1])
    )
    assert "vaultuser" in str(info.value) and "***" in str(info.value)


@pytest.mark.parametrize("form", ["userinfo", "query", "key=value"])
def test_a_server_that_is_not_there_shows_no_password_while_waiting_or_after(
    form: str, caplog: pytest.LogCaptureFixture
) -> None:
    url = _forms(free_port(), WRONG)[form]
    with (
        caplog.at_level(logging.DEBUG),
        pytest.raises(VaultUnavailable, match="did not answer for 1 s") as info,
    ):
        VaultIndex(url=url, retry_seconds=1.0)
    assert any("is not reachable" in record.getMessage() for record in caplog.records)
    _assert_hidden(_shown(info.value), caplog.text)
    assert "***" in str(info.value) and "***" in caplog.text


def test_the_vault_repr_and_aries_status_show_no_password(
    auth_server: PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"t_{uuid.uuid4().hex[:12]}"
    monkeypatch.setenv("ARIES_VAULT", str(tmp_path / "vault"))
    monkeypatch.setenv("ARIES_VAULT_SCHEMA", name)
    monkeypatch.setenv("ARIES_VAULT_URL", _forms(auth_server.port, PASSWORD)["query"])
    vault = open_vault(None, embedder=HashEmbedder())
    try:
        vault.add("Backoff", "Retry with jitter.")
        _assert_hidden(repr(vault), vault._repr_markdown_(), str(vault.stores[0].index.url))
        ip = InteractiveShell.instance()
        ip.config.AriesVault.embedder = "hash"
        ip.register_magics(AriesMagics)
        set_context(ip, AriesContext(ip, root=tmp_path / "repo"))
        status = str(ip.run_line_magic("aries", "status"))
        assert "global   1 notes" in status
        # The same kernel, the server refusing: the status says why, and shows no password.
        monkeypatch.setenv("ARIES_VAULT_URL", _forms(auth_server.port, WRONG)["query"])
        set_context(ip, AriesContext(ip, root=tmp_path / "repo"))
        refused = str(ip.run_line_magic("aries", "status"))
        assert "unavailable" in refused and "refused the connection" in refused and "password=***" in refused
        _assert_hidden(status, refused, *get_context(ip).problems.values())
    finally:
        vault.stores[0].index.close()
        _drop(auth_server, name)


def test_a_key_value_string_libpq_cannot_read_is_refused_without_showing_it() -> None:
    with pytest.raises(
        ValueError, match=r"ARIES_VAULT_URL \(or c.AriesVault.url\) is not a URL or key=value"
    ) as info:
        VaultIndex(url=f"host=127.0.0.1 password={PASSWORD} dbname=postgres")  # unquoted: libpq stops at "pw"
    _assert_hidden(_shown(info.value))
    assert "password='a b'" in str(info.value)
    with pytest.raises(ValueError, match="is not a PostgreSQL one") as other:
        VaultIndex(url=f"mysql://vaultuser:{WRONG}@db/x")
    _assert_hidden(_shown(other.value))
    assert "mysql://vaultuser:***@db/x" in str(other.value)
