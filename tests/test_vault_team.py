"""A team vault: two users, two home directories, one vault, adding and querying at once.

On PostgreSQL each user has a folder of their own (two machines): the database is the source of truth and each
folder its mirror. On SQLite the index lives in the folder, so two users share one folder (one machine, or a
shared mount). Either way each sees the other's notes, each note names its author, forget and restore are in
the audit log with who did them, and one user's Q-values do not change the other's ranking.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from aries_kernel.vault import HashEmbedder, Vault, open_vault

pytestmark = pytest.mark.usefixtures("backend")

USER = textwrap.dedent(
    """
    import sys
    from aries_kernel.vault import HashEmbedder, open_vault
    me, other, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    vault = open_vault(None, embedder=HashEmbedder())
    seen = 0
    for i in range(count):
        assert vault.add(f"{me} finding {i}", f"{me} measured widget{i} latency at {i} ms.").action == "created"
        frame = vault.query_ranked(f"{other} finding widget{i}", limit=50)
        seen = max(seen, sum(frame["title"].str.startswith(f"{other} finding")))
    print(seen, flush=True)
    """
)


def _home(tmp_path: Path, user: str, backend: str) -> dict[str, str]:
    home = tmp_path / user
    # Two machines on PostgreSQL (a folder each); one shared folder on SQLite, whose index lives in it.
    folder = home / ".aries" / "vault" if backend == "postgresql" else tmp_path / "shared-vault"
    return {**os.environ, "HOME": str(home), "ARIES_USER": user, "ARIES_VAULT": str(folder)}


def _open_as(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Vault:
    for name in ("HOME", "ARIES_USER", "ARIES_VAULT"):
        monkeypatch.setenv(name, env[name])
    return open_vault(None, embedder=HashEmbedder())


def test_two_users_see_each_others_notes_with_authors(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    envs = {user: _home(tmp_path, user, backend) for user in ("alice", "bob")}
    _open_as(envs["alice"], monkeypatch).stores[0].index.close()  # the vault exists before both start
    procs = {
        user: subprocess.Popen(
            [sys.executable, "-c", USER, user, other, "150"],
            env=envs[user],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for user, other in (("alice", "bob"), ("bob", "alice"))
    }
    results = {user: proc.communicate(timeout=900) for user, proc in procs.items()}
    for user, (out, err) in results.items():
        assert procs[user].returncode == 0, err
        assert int(out.strip()) > 0, f"{user} never saw the other's notes while both were writing"
    for user, other in (("alice", "bob"), ("bob", "alice")):
        vault = _open_as(envs[user], monkeypatch)
        authors = vault.authors()
        assert len(authors) == 300
        assert {authors[f"{u} finding {i}"] for u in ("alice", "bob") for i in range(150)} == {"alice", "bob"}
        assert all(authors[f"{u} finding {i}"] == u for u in ("alice", "bob") for i in (0, 77, 149))
        top = vault.query_ranked(f"{other} finding widget42 latency", limit=3)
        assert top.iloc[0]["title"] == f"{other} finding 42"
        # the other user's notes are in this user's folder too, front matter naming their author
        text = (Path(envs[user]["ARIES_VAULT"]) / "inbox" / f"{other} finding 42.md").read_text()
        assert f"author: {other}" in text
        vault.stores[0].index.close()


def test_forget_and_restore_are_audited_with_who_and_reach_the_other_user(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice_env, bob_env = _home(tmp_path, "alice", backend), _home(tmp_path, "bob", backend)
    alice = _open_as(alice_env, monkeypatch)
    alice.add("Deploys happen on Tuesdays", "The release train leaves every Tuesday at 10:00.")
    alice.stores[0].index.close()
    bob = _open_as(bob_env, monkeypatch)
    assert bob.read("Deploys happen on Tuesdays").source == "global"
    bob.forget("Deploys happen on Tuesdays")
    bob.stores[0].index.close()
    alice = _open_as(alice_env, monkeypatch)
    assert "Deploys happen on Tuesdays" not in alice.titles()
    assert not (Path(alice_env["ARIES_VAULT"]) / "inbox" / "Deploys happen on Tuesdays.md").exists()
    restored = alice.restore("Deploys happen on Tuesdays")
    assert restored.action == "restored" and "Deploys happen on Tuesdays" in alice.titles()
    log = alice.audit(limit=50)
    who = {action: set(log[log["action"] == action]["actor"]) for action in ("add", "forget", "restore")}
    assert who == {"add": {"alice"}, "forget": {"bob"}, "restore": {"alice"}}
    assert alice.authors()["Deploys happen on Tuesdays"] == "alice"
    alice.stores[0].index.close()


def test_one_users_q_values_do_not_rerank_the_others_memory(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice_env, bob_env = _home(tmp_path, "alice", backend), _home(tmp_path, "bob", backend)
    alice = _open_as(alice_env, monkeypatch)
    for i in range(8):
        alice.add(f"Cache note {i}", f"The cache layer {i} keeps hot keys for {i + 1} minutes.")
    bob = _open_as(bob_env, monkeypatch)
    before = bob.query_ranked("cache layer hot keys", limit=8)
    target = before.iloc[-1]["title"]  # alice comes to rely on the note bob sees last
    alice = _open_as(alice_env, monkeypatch)
    for _ in range(5):
        alice.begin_session()
        alice.query_ranked("cache layer hot keys", limit=8)
        alice.mark_used(target)
        alice.read(target)
        alice.end_session()
    mine = alice.query_ranked("cache layer hot keys", limit=8).set_index("title")
    assert mine.loc[target, "q_value"] > 0.51  # alice's habit is learned ...
    bob = _open_as(bob_env, monkeypatch)
    after = bob.query_ranked("cache layer hot keys", limit=8)
    # ... and bob's ranking is exactly what it was: same order, same scores, his Q at its start value
    assert list(after["title"]) == list(before["title"])
    assert list(after["score"]) == pytest.approx(list(before["score"]))
    assert set(after["q_value"]) == {0.5}
    for vault in (alice, bob):
        vault.stores[0].index.close()


def test_read_and_ranked_queries_name_the_author_and_the_last_editor(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice_env, bob_env = _home(tmp_path, "alice", backend), _home(tmp_path, "bob", backend)
    title = "Backups run at midnight"
    alice = _open_as(alice_env, monkeypatch)
    alice.add(title, "The nightly backup copies the database to the bucket at 00:00 UTC.")
    alice.add("Alerts page the on-call", "An alert pages whoever is on call [[Backups run at midnight]].")
    assert alice.read(title).startswith(f"# {title}\n\n_by alice_\n\n")  # no other editor yet
    alice.stores[0].index.close()
    bob = _open_as(bob_env, monkeypatch)
    assert bob.add(
        title, "The nightly backup copies the database to the bucket at 01:00 UTC now."
    ).action == ("updated")
    bob.add("Restores are tested monthly", "Each month a backup is restored into staging and checked.")
    note = bob.read(title)
    assert (note.author, note.editor) == ("alice", "bob")
    assert note.startswith(f"# {title}\n\n_by alice, last edited by bob_\n\n") and "01:00 UTC now" in note
    frame = bob.query_ranked("nightly backup bucket restored", limit=5).set_index("title")
    assert frame.loc[title, "author"] == "alice"
    assert frame.loc["Restores are tested monthly", "author"] == "bob"
    for other in (bob.query_important(), bob.query_warmth(), bob.explore("backup")):
        authors = dict(zip(other["title"], other["author"], strict=True))
        assert authors[title] == "alice", other
    bob.stores[0].index.close()
    alice = _open_as(alice_env, monkeypatch)  # the other member sees the same names
    assert alice.read(title).editor == "bob"
    alice.stores[0].index.close()


def test_a_user_name_with_control_and_punctuation_characters_is_an_author_as_given(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = _home(tmp_path, "alice", backend)
    env["ARIES_USER"] = 'O\'Brien: #1 "Zoë"/../x\n\ty\x1b'
    vault = _open_as(env, monkeypatch)
    shown = 'O\'Brien: #1 "Zoë"/../x y'  # control characters become one space; the rest is kept
    vault.add(
        "Names are kept as given", "A name with quotes, colons and slashes is an author like any other."
    )
    assert vault.read("Names are kept as given").author == shown
    assert vault.query_ranked("names kept given")["author"].tolist()[0] == shown
    vault.rebuild()  # the index again from the files: front matter keeps the name
    assert vault.authors()["Names are kept as given"] == shown
    vault.stores[0].index.close()
