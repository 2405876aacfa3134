"""Who the user is (aries_kernel.user): the hub's name first, then ARIES_USER, then the login name."""

from __future__ import annotations

import getpass
import os
from pathlib import Path

import pytest

from aries_kernel.user import MAX_LENGTH, current_user, user_and_source
from aries_kernel.vault.db import VaultIndex


@pytest.fixture(autouse=True)
def no_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JUPYTERHUB_USER", raising=False)
    monkeypatch.delenv("ARIES_USER", raising=False)
    monkeypatch.setattr(getpass, "getuser", lambda: "hubuser")  # the one system login a hub's servers share


def test_the_hub_user_comes_before_aries_user_and_the_login(monkeypatch: pytest.MonkeyPatch) -> None:
    assert user_and_source() == ("hubuser", "the login name")
    monkeypatch.setenv("ARIES_USER", "alice")
    assert user_and_source() == ("alice", "$ARIES_USER")
    monkeypatch.setenv("JUPYTERHUB_USER", "bob@example.org")
    assert user_and_source() == ("bob@example.org", "$JUPYTERHUB_USER")
    assert current_user() == "bob@example.org"


def test_a_name_that_is_empty_once_cleaned_counts_as_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUPYTERHUB_USER", " \n\t\x7f ")
    monkeypatch.setenv("ARIES_USER", "carol\r\nadmin\x1b[31m")
    assert user_and_source() == ("carol admin [31m", "$ARIES_USER")
    monkeypatch.setenv("ARIES_USER", "d" * 500)
    assert current_user() == "d" * MAX_LENGTH


def test_no_login_name_gives_the_user_id(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_passwd_entry() -> str:
        raise KeyError("getpwuid(): uid not found: 4242")

    monkeypatch.setattr(getpass, "getuser", no_passwd_entry)
    assert user_and_source() == (f"uid{os.getuid()}", "the user id (no login name)")


def test_the_vault_writes_as_the_hub_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARIES_USER", "alice")
    monkeypatch.setenv("JUPYTERHUB_USER", "erin")
    index = VaultIndex(tmp_path / "index.db")
    assert index.user == "erin"
    index.close()
