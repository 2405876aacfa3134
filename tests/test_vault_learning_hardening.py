"""The vault's learned state survives what a real checkout and a hostile folder do to it.

1. A hostile learning export (a FIFO, a folder, a huge file, a symlink out, broken JSON) in place of
   ``index.learning.json``: the vault opens, the rebuild finishes, the user is told which file and why, the file
   is kept aside and the next save writes a good export (never through the symlink).
2. A note missing from the index (another git branch checked out) keeps its learned state for
   ``MISSING_GRACE_SECONDS`` and has it back when it returns; only after that, or a purge, is it swept.
3. A new note under the title of an archived one starts from the prior; the archived note keeps its state
   and has it back when restored.
4. A rebuilt index lists the archived notes again (from the archive folder), so their learned state is kept.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from aries_kernel.vault import HashEmbedder, Vault, learning, open_vault
from aries_kernel.vault.db import VaultIndex, schema
from aries_kernel.vault.db.export import LEARNING_EXPORT_MAX_BYTES
from aries_kernel.vault.db.learned import MISSING_GRACE_SECONDS
from tests.vault_support import T0, Clock


def make(folder: Path, root: Path | None = None) -> Vault:
    return open_vault(root, path=folder, embedder=HashEmbedder(), clock=Clock())


def close(vault: Vault) -> None:
    for store in vault.stores:
        store.index.close()


def learn(vault: Vault, titles: dict[str, str]) -> None:
    """The notes, and one session that used the first two together (Q-values, accesses, a pair)."""
    for title, body in titles.items():
        vault.add(title, body)
    first, second = list(titles)[:2]
    vault.begin_session()
    vault.query_ranked(" ".join(titles.values()))
    vault.mark_used(first)
    vault.mark_used(second)
    vault.end_session()


NOTES = {
    "Retries back off with jitter": "Retry 429 and 5xx with exponential backoff and jitter.",
    "Cache keys are rehashed": "The cache rehashes keys on every call, which is slow.",
    "Kernel start stays fast": "Heavy imports wait until after the first reply.",
}


# -- 1. a hostile learning export -----------------------------------------------------------------------------


def fifo(export: Path, outside: Path) -> str:
    os.mkfifo(export)
    return "FIFO"


def folder(export: Path, outside: Path) -> str:
    export.mkdir()
    (export / "inside.json").write_text("{}")
    return "folder"


def oversized(export: Path, outside: Path) -> str:
    with export.open("wb") as handle:  # sparse: costs no disk and is never read
        handle.truncate(LEARNING_EXPORT_MAX_BYTES + 1)
    return "over the"


def symlink_out(export: Path, outside: Path) -> str:
    outside.write_text(json.dumps({"users": {}}))
    export.symlink_to(outside)
    return "symlink"


def malformed(export: Path, outside: Path) -> str:
    export.write_text('{"format": "aries-vault-learning", "users": {')
    return "not valid JSON"


HOSTILE = {
    "fifo": fifo,
    "folder": folder,
    "oversized": oversized,
    "symlink": symlink_out,
    "malformed": malformed,
}


def in_thread(work: Any, unblock: Path | None = None) -> Any:
    """``work()`` in a thread, so a regression that blocks on a FIFO fails instead of hanging the suite: if it
    has not returned after a generous wait, a writer opens the FIFO (which ends a blocked open or read)."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = work()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread below
            out["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(60)
    blocked = thread.is_alive()
    if blocked and unblock is not None:
        os.close(os.open(unblock, os.O_WRONLY | os.O_NONBLOCK))
    thread.join()
    assert not blocked, "blocked on the learning export"
    if "error" in out:
        raise out["error"]
    return out["value"]


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_a_hostile_export_is_kept_aside_and_reported_and_the_rebuild_finishes(
    tmp_path: Path, kind: str
) -> None:
    home = tmp_path / "vault"
    vault = make(home)
    learn(vault, NOTES)
    close(vault)
    export = home / ".aries" / "index.learning.json"
    db = home / ".aries" / "index.db"
    export.unlink()
    outside = tmp_path / "elsewhere.json"
    reason = HOSTILE[kind](export, outside)
    db.write_bytes(b"not a database at all" * 10)  # the rebuild is what reads the export
    outside_before = outside.read_bytes() if outside.exists() else None

    reopened = in_thread(lambda: make(home), unblock=export if kind == "fifo" else None)
    problems = reopened.problems
    assert len(problems) == 1, problems
    message = problems[0]
    assert str(export) in message and reason in message and "learned state" in message and "lost" in message
    kept = [p for p in export.parent.iterdir() if p.name.startswith(f"{export.name}.bad-")]
    assert len(kept) == 1 and kept[0].name in message
    assert not os.path.lexists(export)  # out of the way: the next save writes a good one
    assert sorted(reopened.titles()) == sorted(NOTES)  # the notes came back from the files

    learn(reopened, NOTES)  # a session's end saves the export
    assert json.loads(export.read_text())["users"]
    assert not export.is_symlink() and export.is_file()
    if outside_before is not None:
        assert outside.read_bytes() == outside_before  # never written through the link
    close(reopened)


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_a_save_over_a_hostile_export_does_not_block_or_follow_it(tmp_path: Path, kind: str) -> None:
    home = tmp_path / "vault"
    vault = make(home)
    learn(vault, NOTES)
    idx = vault.stores[0].index
    export = idx.learning_path
    assert export is not None
    export.unlink()
    outside = tmp_path / "elsewhere.json"
    reason = HOSTILE[kind](export, outside)
    outside_before = outside.read_bytes() if outside.exists() else None

    assert in_thread(idx.save_learning, unblock=export if kind == "fifo" else None) == export
    assert idx.learning_problem is not None
    assert str(export) in idx.learning_problem and reason in idx.learning_problem
    assert vault.problems == [f"global: {idx.learning_problem}"]
    saved = json.loads(export.read_text())
    assert saved["users"][idx.user]["q_values"] and export.is_file() and not export.is_symlink()
    assert [p for p in export.parent.iterdir() if p.name.startswith(f"{export.name}.bad-")]
    if outside_before is not None:
        assert outside.read_bytes() == outside_before
    close(vault)


# -- 2. a branch switch does not erase learned state ---------------------------------------------------------

PROJECT = "Deploys go through the staging cluster"
GLOBAL = "Retries back off with jitter"


def branch_vault(tmp_path: Path) -> tuple[Vault, Path]:
    """A vault with a project note used with a global one (Q-values, accesses, a pair in the project brain)."""
    vault = make(tmp_path / "vault", root=tmp_path / "repo")
    vault.add(PROJECT, "Every deploy goes to staging first, then production.", project=True)
    vault.add(GLOBAL, "Retry 429 and 5xx with exponential backoff and jitter.")
    vault.read(PROJECT)
    vault.begin_session()
    vault.mark_used(PROJECT)
    vault.mark_used(GLOBAL)
    vault.end_session()
    note = tmp_path / "repo" / ".aries" / "memory" / "inbox" / f"{PROJECT}.md"
    assert note.is_file()
    return vault, note


def project_state(vault: Vault) -> tuple[Any, ...]:
    """What the project brain learned about its note, over every table."""
    idx = vault._store("project").index
    key = PROJECT.casefold()
    pairs = sorted(p for p in idx.cooccurrence() if f"project:{key}" in p[:2])
    return idx.q_values().get(key), sorted(t for k, t in idx.accesses() if k == key), pairs


def missing_keys(vault: Vault) -> dict[str, float]:
    idx = vault._store("project").index
    return {r[0]: float(r[1]) for r in idx.rows(schema.missing.select())}


def test_a_note_back_from_another_branch_keeps_its_learned_state(backend: str, tmp_path: Path) -> None:
    vault, note = branch_vault(tmp_path)
    before = project_state(vault)
    assert before[0] is not None and before[1] and before[2]
    hidden = tmp_path / "other-branch.md"
    note.rename(hidden)  # `git checkout other-branch`: the note's file is not in that branch
    vault.sync()
    assert PROJECT not in vault.titles()
    assert missing_keys(vault) == {PROJECT.casefold(): T0}  # remembered as missing since now
    vault.clock.now += MISSING_GRACE_SECONDS - 3600  # type: ignore[attr-defined]
    vault.sync()
    assert project_state(vault) == before  # kept all through the grace period
    hidden.rename(note)  # `git checkout main`
    vault.sync()
    assert PROJECT in vault.titles()
    assert project_state(vault) == before and missing_keys(vault) == {}
    close(vault)


def test_a_note_missing_past_the_grace_period_loses_its_learned_state(backend: str, tmp_path: Path) -> None:
    vault, note = branch_vault(tmp_path)
    note.unlink()
    vault.sync()
    vault.clock.now += MISSING_GRACE_SECONDS + 1  # type: ignore[attr-defined]
    vault.sync()
    assert project_state(vault) == (None, [], [])
    assert missing_keys(vault) == {}  # the record went with the rows
    # Nothing else names it either: the global store keeps only its own live note.
    assert vault._store("global").index.live_keys(vault.clock.now) == {GLOBAL.casefold()}
    close(vault)


def test_a_missing_note_can_be_purged_at_once(backend: str, tmp_path: Path) -> None:
    vault, note = branch_vault(tmp_path)
    note.unlink()
    vault.sync()
    dry = vault.forget(PROJECT, purge=True, dry_run=True)
    assert {"q_values", "access", "cooccurrence", "missing"} <= set(dry["what"])
    assert project_state(vault) != (None, [], [])  # a dry run changes nothing
    vault.forget(PROJECT, purge=True)
    assert project_state(vault) == (None, [], []) and missing_keys(vault) == {}
    close(vault)


# -- 3. a new note under an archived note's title starts from the prior --------------------------------------

OLD = "Cache keys are rehashed"


def learned_of(vault: Vault, key: str) -> tuple[Any, ...]:
    """Q-value, accesses and pairs of the global note ``key``."""
    idx = vault._store("global").index
    pairs = sorted(p for p in idx.cooccurrence() if f"global:{key}" in p[:2])
    return idx.q_values().get(key), sorted(t for k, t in idx.accesses() if k == key), pairs


def used_then_forgotten(tmp_path: Path) -> tuple[Vault, tuple[Any, ...]]:
    vault = make(tmp_path / "vault")
    learn(vault, NOTES)
    vault.read(OLD)
    state = learned_of(vault, OLD.casefold())
    assert state[0] is not None and state[1] and state[2]
    vault.forget(OLD)
    vault.sync()
    assert learned_of(vault, OLD.casefold()) == state  # archived: kept, for a restore
    return vault, state


def test_a_note_added_under_an_archived_title_starts_from_the_prior(backend: str, tmp_path: Path) -> None:
    vault, old_state = used_then_forgotten(tmp_path)
    assert vault.add(OLD, "A different claim: the cache keys are stable now.").action == "created"
    assert learned_of(vault, OLD.casefold()) == (None, [], [])
    ranked = vault.query_ranked("cache keys stable", record=False)
    assert OLD in set(ranked["title"])
    # The new note learns on its own from the prior: one use takes it where the old note's one use took it
    # (an inherited Q would have moved on from there).
    vault.begin_session()
    vault.mark_used(OLD)
    vault.end_session()
    q, _ = vault._store("global").index.q_values()[OLD.casefold()]
    assert old_state[0][0] > learning.Q_START and q == old_state[0][0]
    close(vault)


def test_a_new_file_under_an_archived_title_starts_from_the_prior(backend: str, tmp_path: Path) -> None:
    vault, _ = used_then_forgotten(tmp_path)
    note = tmp_path / "vault" / "inbox" / f"{OLD}.md"
    note.write_text("---\ntype: insight\n---\nWritten by hand after the old note was archived.\n")
    later = T0 + 3600
    os.utime(note, (later, later))  # written after the forget (a team vault compares the times)
    vault.clock.now = later  # type: ignore[attr-defined]
    vault.sync()
    assert OLD in vault.titles()
    assert learned_of(vault, OLD.casefold()) == (None, [], [])
    close(vault)


def test_the_archived_note_has_its_state_back_when_restored(backend: str, tmp_path: Path) -> None:
    vault, old_state = used_then_forgotten(tmp_path)
    vault.add(OLD, "A different claim: the cache keys are stable now.")
    idx = vault._store("global").index
    rel = f"inbox/{OLD}.md"
    # The new note goes (deleted by hand; a team vault's row with it), and the archived one is restored.
    idx.write(lambda c: VaultIndex.delete_note(c, rel))
    (tmp_path / "vault" / rel).unlink()
    vault.restore(OLD)
    assert learned_of(vault, OLD.casefold()) == old_state
    assert idx.rows(schema.archive.select().with_only_columns(schema.archive.c.learned)) == [("",)]
    close(vault)


# -- 4. a rebuilt index lists the archived notes again -------------------------------------------------------


def test_a_rebuilt_index_keeps_the_archived_notes_and_their_learned_state(tmp_path: Path) -> None:
    home = tmp_path / "vault"
    vault, state = used_then_forgotten(tmp_path)
    vault.end_session()
    vault._store("global").index.save_learning()  # the export holds the archived note's state
    close(vault)
    db = home / ".aries" / "index.db"
    db.write_bytes(os.urandom(db.stat().st_size))  # corrupt

    reopened = make(home)
    assert "restored" in reopened.problems[0]
    assert reopened.summary()[0]["archived"] == 1  # listed again from .archive/
    assert OLD not in reopened.titles()
    reopened.sync()  # the sweep that used to drop it: an archived note keeps its state
    assert learned_of(reopened, OLD.casefold()) == state
    idx = reopened._store("global").index
    assert any("archived notes listed again" in d for d in reopened.audit(50)["detail"])
    assert reopened.restore(OLD).action == "restored"
    assert OLD in reopened.titles() and learned_of(reopened, OLD.casefold()) == state
    assert idx.rows(schema.archive.select().with_only_columns(schema.archive.c.restored_at))[0][0] is not None
    close(reopened)


def test_a_rebuild_keeps_the_state_set_aside_for_an_archived_note(tmp_path: Path) -> None:
    home = tmp_path / "vault"
    vault, old_state = used_then_forgotten(tmp_path)
    vault.add(OLD, "A different claim: the cache keys are stable now.")  # sets the old note's state aside
    vault.begin_session()
    vault.mark_used(OLD)  # the new note learns something of its own
    vault.end_session()
    new_state = learned_of(vault, OLD.casefold())
    assert new_state[0] is not None and new_state != old_state
    vault._store("global").index.save_learning()
    close(vault)
    db = home / ".aries" / "index.db"
    db.write_bytes(os.urandom(db.stat().st_size))  # corrupt

    reopened = make(home)
    assert "restored" in reopened.problems[0]
    reopened.sync()
    # The new note keeps its own state; the archived one's is still set aside, and comes back on restore.
    assert learned_of(reopened, OLD.casefold()) == new_state
    idx = reopened._store("global").index
    rel = f"inbox/{OLD}.md"
    idx.write(lambda c: VaultIndex.delete_note(c, rel))
    (home / rel).unlink()
    reopened.restore(OLD)
    assert learned_of(reopened, OLD.casefold()) == old_state
    close(reopened)
