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

from aries_kernel.vault import HashEmbedder, Vault, index, open_vault

T0 = 1_790_000_000.0


class Clock:
    """A clock the tests move by hand."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


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
        handle.truncate(index.LEARNING_EXPORT_MAX_BYTES + 1)
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
