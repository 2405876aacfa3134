"""Say what was lost: a corrupt index is rebuilt from the notes, kept aside, and its learned state (Q-values,
access history, co-occurrence) comes back from the automatic export beside it, or the user is told it is lost.

The export is written at each session's end and every ``LEARNING_EXPORT_EVERY`` changes, atomically, keeping
other users' entries. A PostgreSQL vault has no file to corrupt and no export: its sessions run as before.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aries_kernel.magics.vault import vault_status
from IPython.core.interactiveshell import InteractiveShell

from aries_kernel.context import AriesContext, set_context
from aries_kernel.vault import HashEmbedder, Vault, open_vault
from aries_kernel.vault.db import VaultIndex
from aries_kernel.vault.db import export as learning_export
from tests.kernel_harness import run_cell, start_kernel, stop_kernel

NOTES = {
    "Retries back off with jitter": "Retry 429 and 5xx with exponential backoff and jitter.",
    "Cache keys are rehashed": "The cache rehashes keys on every call, which is slow.",
    "Kernel start stays fast": "Heavy imports wait until after the first reply.",
}


def make(folder: Path) -> Vault:
    return open_vault(None, path=folder, embedder=HashEmbedder())


def close(vault: Vault) -> None:
    for store in vault.stores:
        store.index.close()


def learned(vault: Vault) -> tuple[Any, ...]:
    idx = vault.stores[0].index
    return idx.q_values(), sorted(idx.cooccurrence()), sorted(idx.accesses())


def learn(vault: Vault) -> tuple[Any, ...]:
    """Notes, a read, and one session that used two notes together: Q-values, an access, a co-occurrence."""
    for title, body in NOTES.items():
        vault.add(title, body)
    vault.read("Kernel start stays fast")
    vault.begin_session()
    vault.query_ranked("retries and the cache")
    vault.mark_used("Retries back off with jitter")
    vault.mark_used("Cache keys are rehashed")
    vault.end_session()
    state = learned(vault)
    assert state[0] and state[1] and state[2]
    return state


def garbage(db: Path) -> None:
    db.write_bytes(os.urandom(db.stat().st_size))


def truncated(db: Path) -> None:
    with db.open("r+b") as handle:  # the header stays: SQLite opens it and finds it malformed
        handle.truncate(db.stat().st_size // 2)


def cut_short(db: Path) -> None:
    with db.open("r+b") as handle:  # not even a header left
        handle.truncate(40)


CORRUPTIONS: dict[str, Callable[[Path], None]] = {
    "garbage bytes": garbage,
    "truncated": truncated,
    "cut short": cut_short,
}


def aside(folder: Path) -> list[Path]:
    return [p for p in (folder / ".aries").glob("index.db.*-*") if not p.name.endswith(("-wal", "-shm"))]


@pytest.mark.parametrize("corrupt", list(CORRUPTIONS))
def test_a_corrupt_index_comes_back_with_its_learned_state(
    corrupt: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "vault"
    vault = make(folder)
    before = learn(vault)
    close(vault)
    export = folder / ".aries" / "index.learning.json"
    assert export.is_file()
    CORRUPTIONS[corrupt](folder / ".aries" / "index.db")
    with caplog.at_level(logging.WARNING, logger="aries_kernel.vault.db.index"):
        vault = make(folder)
    try:
        (kept,) = aside(folder)  # the corrupt file, kept for inspection
        report = vault.stores[0].index.rebuild_report
        assert report is not None and kept.name in report and str(export) in report
        assert "restored" in report and "3 Q-values" in report and "1 co-occurrence pairs" in report
        assert report in caplog.text  # told as it happens
        assert report in repr(vault) and report in vault._repr_markdown_()  # and shown later
        assert learned(vault) == before
        assert sorted(vault.titles()) == sorted(NOTES)  # the notes came back from the markdown files
        assert "the learned state" in vault.audit(limit=50)["detail"].str.cat(sep="\n")
    finally:
        close(vault)


def test_without_an_export_the_user_is_told_the_learned_state_is_lost(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "vault"
    vault = make(folder)
    learn(vault)
    close(vault)
    (folder / ".aries" / "index.learning.json").unlink()
    garbage(folder / ".aries" / "index.db")
    with caplog.at_level(logging.WARNING, logger="aries_kernel.vault.db.index"):
        vault = make(folder)
    try:
        report = vault.stores[0].index.rebuild_report or ""
        assert "was lost: there was no export" in report and report in caplog.text
        assert len(aside(folder)) == 1
        assert learned(vault) == ({}, [], [])
        assert sorted(vault.titles()) == sorted(NOTES)
    finally:
        close(vault)


def test_an_index_damaged_under_a_running_vault_restores_too(tmp_path: Path) -> None:
    folder = tmp_path / "vault"
    vault = make(folder)
    try:
        before = learn(vault)
        truncated(folder / ".aries" / "index.db")  # noticed before the next transaction: it shrank
        assert vault.query_ranked("cache keys", record=False)["title"].iloc[0] == "Cache keys are rehashed"
        assert "restored" in (vault.stores[0].index.rebuild_report or "")
        assert learned(vault) == before
        assert len(aside(folder)) == 1
    finally:
        close(vault)


def test_a_new_vault_says_nothing_and_a_missing_index_is_restored(tmp_path: Path) -> None:
    folder = tmp_path / "vault"
    vault = make(folder)
    assert vault.problems == [] and not (folder / ".aries" / "index.learning.json").exists()
    before = learn(vault)
    close(vault)
    (folder / ".aries" / "index.db").unlink()  # deleted while no kernel ran
    vault = make(folder)
    try:
        (problem,) = vault.problems
        assert "was missing" in problem and "restored" in problem
        assert learned(vault) == before
    finally:
        close(vault)


def test_an_index_deleted_between_the_look_and_the_open_is_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user's rm takes no lock: the file can go after the vault saw it and before SQLite opens it (seen in a
    full run: "unable to open database file" from a writer starting up while the test deleted the index)."""
    folder = tmp_path / "vault"
    vault = make(folder)
    before = learn(vault)
    close(vault)
    db = folder / ".aries" / "index.db"
    real_open = VaultIndex._open_engine
    deleted: list[bool] = []

    def delete_first(self: VaultIndex) -> Any:
        if not deleted and self.db_path == db:
            deleted.append(True)
            for suffix in ("", "-wal", "-shm"):
                Path(f"{db}{suffix}").unlink(missing_ok=True)
        return real_open(self)

    monkeypatch.setattr(VaultIndex, "_open_engine", delete_first)
    vault = make(folder)
    try:
        assert deleted, "the file went in the window"
        assert sorted(vault.titles()) == sorted(NOTES), "rebuilt from the markdown notes"
        assert learned(vault) == before, "and the learned state restored from the export"
    finally:
        close(vault)


def test_learned_state_is_exported_every_n_changes_atomically(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(learning_export, "LEARNING_EXPORT_EVERY", 3)
    folder = tmp_path / "vault"
    export = folder / ".aries" / "index.learning.json"
    vault = make(folder)
    try:
        vault.add("Retries back off with jitter", NOTES["Retries back off with jitter"])
        user = vault.stores[0].index.user
        export.write_text(json.dumps({"format": "aries-vault-learning", "users": {"someone-else": {"x": 1}}}))
        vault.read("Retries back off with jitter")
        vault.read("Retries back off with jitter")
        assert "someone-else" in export.read_text() and user not in json.loads(export.read_text())["users"]
        vault.read("Retries back off with jitter")  # the third change
        users = json.loads(export.read_text())["users"]
        assert users["someone-else"] == {"x": 1}  # another user's entry is kept
        assert len(users[user]["access"]) == 3
        assert sorted(p.name for p in export.parent.iterdir() if "learning" in p.name) == [export.name]
    finally:
        close(vault)


def test_the_status_section_shows_what_a_rebuild_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "vault"
    vault = make(folder)
    learn(vault)
    close(vault)
    garbage(folder / ".aries" / "index.db")
    monkeypatch.setenv("ARIES_VAULT", str(folder))
    shell = InteractiveShell.instance()
    shell.config.AriesVault.embedder = "hash"
    context = AriesContext(shell, root=tmp_path / "repo")
    set_context(shell, context)
    try:
        status = vault_status(context) or ""
        assert "warning: global: " in status and "restored from" in status
    finally:
        close(context.built("vault"))


@pytest.mark.usefixtures("backend")
def test_sessions_and_reopening_work_on_both_backends(tmp_path: Path) -> None:
    folder = tmp_path / "vault"
    vault = make(folder)
    before = learn(vault)
    shared = vault.stores[0].index.shared
    close(vault)
    # On PostgreSQL the server is the one copy of the learned state: no export file, nothing to restore.
    assert (folder / ".aries" / "index.learning.json").exists() is not shared
    vault = make(folder)
    try:
        assert vault.problems == [] and learned(vault) == before
    finally:
        close(vault)


@pytest.mark.kernel
def test_the_kernel_user_is_told_in_the_cell_that_opened_the_vault(small_repo: Path, tmp_path: Path) -> None:
    folder = tmp_path / "vault"
    vault = make(folder)
    learn(vault)
    close(vault)
    (folder / ".aries" / "index.learning.json").unlink()
    truncated(folder / ".aries" / "index.db")
    km, kc = start_kernel(small_repo, env={"ARIES_VAULT": str(folder)})
    try:
        setup = 'get_ipython().config.AriesVault.embedder = "hash"'
        assert run_cell(kc, setup).error is None
        cell = run_cell(kc, "len(vault.titles())")
        assert cell.error is None, cell.error
        assert cell.result == "3"
        assert "was lost: there was no export" in cell.stderr
        status = run_cell(kc, "%aries status")
        assert "was lost" in (status.result or "")
    finally:
        stop_kernel(km, kc)
