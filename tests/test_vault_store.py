"""Vault storage: capture, duplicates, archive, audit, learning, persistence, rebuild and bad input."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import aries_kernel.vault as vault_pkg
from aries_kernel.vault import HashEmbedder, NoteError, open_vault
from aries_kernel.vault.db import VaultIndex
from aries_kernel.vault.db import search as vault_search
from aries_kernel.vault.db.schema import MIGRATIONS
from aries_kernel.vault.notes import MAX_NOTE_BYTES, parse_text, sanitize_title, wiki_links
from tests.vault_support import T0, Clock

# Every test here runs on SQLite and on PostgreSQL (tests/pg_support.py).
pytestmark = pytest.mark.usefixtures("backend")


def make(tmp_path: Path, clock: Clock | None = None):  # type: ignore[no-untyped-def]
    return open_vault(
        tmp_path / "repo", path=tmp_path / "vault", embedder=HashEmbedder(), clock=clock or Clock()
    )


def files_under(path: Path) -> set[str]:
    return {p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file()}


def test_exported_names() -> None:
    assert set(vault_pkg.__all__) == {
        "AddResult", "AriesVault", "Embedder", "HashEmbedder", "NoteError", "NoteText", "Session", "Vault",
        "VaultBusyError", "VaultIndex", "VaultUnavailable", "WordLlamaEmbedder", "make_embedder", "open_vault",
    }  # fmt: skip


def test_wiki_links_and_front_matter() -> None:
    text = "See [[Alpha]], [[alpha|the first]], [[Beta#Usage]] and [[Gamma#h|g]]; not [[]]."
    assert wiki_links(text) == ["alpha", "beta", "gamma"]
    meta, body = parse_text("---\ntype: insight\ncreated: 2026-11-01\n---\nbody\n", "x.md")
    assert meta["type"] == "insight" and body.strip() == "body"
    with pytest.raises(NoteError, match="x.md: line .*broken YAML front matter"):
        parse_text("---\ntype: [unclosed\n---\nbody\n", "x.md")


@pytest.mark.sqlite_only  # PostgreSQL's migrations: tests/test_vault_backends.py
def test_migrations_on_fresh_database(tmp_path: Path) -> None:
    index = VaultIndex(tmp_path / "fresh.db")
    names = index.read(lambda c: [r[0] for r in c.exec_driver_sql("SELECT name FROM _vault_migrations")])
    assert names == [m.__name__ for m in MIGRATIONS]
    pragmas = index.read(
        lambda c: (
            c.exec_driver_sql("PRAGMA journal_mode").scalar(),
            c.exec_driver_sql("PRAGMA busy_timeout").scalar(),
        )
    )
    assert pragmas == ("wal", 5000)
    VaultIndex(tmp_path / "fresh.db")  # reopening applies nothing twice
    assert index.read(lambda c: c.exec_driver_sql("SELECT count(*) FROM _vault_migrations").scalar()) == len(
        MIGRATIONS
    )


def test_add_read_and_layout_in_both_vaults(tmp_path: Path) -> None:
    vault = make(tmp_path)
    created = vault.add(
        "Retries use exponential backoff", "We retry 429 with backoff. See [[Rate limits are per key]]."
    )
    assert (created.action, created.source, created.path) == (
        "created",
        "global",
        "inbox/Retries use exponential backoff.md",
    )
    project = vault.add("Rate limits are per key", "Each key has its own bucket.", project=True)
    assert project.source == "project"
    assert (tmp_path / "repo/.aries/memory/inbox/Rate limits are per key.md").exists()
    text = (tmp_path / "vault/inbox/Retries use exponential backoff.md").read_text()
    assert text.startswith("---\n") and "type: insight" in text and "created:" in text
    note = vault.read("retries use EXPONENTIAL backoff")
    assert note.source == "global" and "We retry 429" in note
    frame = vault.query_ranked("rate limit bucket per key")
    assert set(frame["source"]) == {"global", "project"}
    assert frame.iloc[0]["title"] == "Rate limits are per key"
    summary = repr(vault)
    assert "global: 1 notes, 1 links" in summary and "project: 1 notes" in summary
    assert "| global | 1 | 1 |" in vault._repr_markdown_()


def test_near_duplicates_update_instead_of_twin(tmp_path: Path) -> None:
    vault = make(tmp_path)
    vault.add("Cats purr when content", "Domestic cats purr at 25 to 150 Hz, mostly when relaxed and safe.")
    same_title = vault.add(
        "cats purr, when content!", "Domestic cats purr at 25 to 150 Hz when relaxed, safe and fed."
    )
    assert same_title.action == "updated" and same_title.title == "Cats purr when content"
    same_text = vault.add("Purring cats", "Domestic cats purr at 25 to 150 Hz when relaxed, safe and fed.")
    assert same_text.action == "unchanged" and same_text.duplicate_of == "Cats purr when content"
    near_text = vault.add(
        "Why cats purr", "Domestic cats purr at 25 to 150 Hz when relaxed, safe and well fed."
    )
    assert near_text.action == "updated" and near_text.duplicate_of == "Cats purr when content"
    assert files_under(tmp_path / "vault" / "inbox") == {"Cats purr when content.md"}
    assert "well fed" in vault.read("Cats purr when content")
    actions = list(vault.audit()["action"])
    assert actions.count("add") == 1 and actions.count("update") == 2


def test_forget_archives_and_restore_brings_back(tmp_path: Path) -> None:
    vault = make(tmp_path)
    vault.add("Leiden finds communities", "igraph's Leiden algorithm finds modules in the code graph.")
    archived = vault.forget("Leiden finds communities")
    assert archived == ".archive/inbox/Leiden finds communities.md"
    assert (tmp_path / "vault" / archived).exists()
    assert vault.query_ranked("leiden communities").empty
    with pytest.raises(KeyError):
        vault.read("Leiden finds communities")
    restored = vault.restore("leiden finds communities")
    assert restored.action == "restored" and restored.path == "inbox/Leiden finds communities.md"
    assert vault.query_ranked("leiden communities").iloc[0]["title"] == "Leiden finds communities"
    assert {"forget", "restore"} <= set(vault.audit()["action"])


@pytest.mark.sqlite_only  # deletes or damages the SQLite file; a server database does not vanish with a folder
def test_restore_works_from_archive_folder_after_index_loss(tmp_path: Path) -> None:
    vault = make(tmp_path)
    vault.add("Sourdough needs a starter", "Feed it twice a day for a week.")
    vault.forget("Sourdough needs a starter")
    for store in vault.stores:
        store.index.close()
    (tmp_path / "vault/.aries/index.db").unlink()
    again = make(tmp_path)
    assert again.query_ranked("sourdough").empty
    assert again.restore("Sourdough needs a starter").action == "restored"
    assert again.query_ranked("sourdough starter").iloc[0]["title"] == "Sourdough needs a starter"


def test_learning_session_credits_q_once_and_cooccurrence(tmp_path: Path) -> None:
    clock = Clock()
    vault = make(tmp_path, clock)
    vault.add("WAL lets readers run during writes", "SQLite write-ahead logging keeps readers on a snapshot.")
    vault.add("busy_timeout waits for locks", "SQLite busy_timeout waits for a lock instead of failing.")
    vault.add("Cats purr when content", "Felines purr when relaxed.")
    session = vault.begin_session()
    vault.query_ranked("sqlite locks", limit=2)
    vault.query_ranked("sqlite readers", limit=2)
    vault.mark_used("WAL lets readers run during writes")
    vault.boost("busy_timeout waits for locks")
    assert session.retrieved and len(session.used) == 2
    credits = vault.end_session().set_index("title")
    assert credits.loc["WAL lets readers run during writes", "q_after"] == pytest.approx(0.55)
    assert credits.loc["busy_timeout waits for locks", "q_after"] == pytest.approx(0.55)
    assert vault.end_session().empty  # credited once
    second = vault.begin_session()
    vault.query_ranked("sqlite readers", limit=3)
    vault.mark_used("WAL lets readers run during writes")
    exposed = set(second.retrieved)
    credits = vault.end_session().set_index("title")
    expected = 0.55 + 0.1 * (1.0 - 0.55)  # used again: another step toward 1
    assert credits.loc["WAL lets readers run during writes", "q_after"] == pytest.approx(expected)
    if "global:cats purr when content" in exposed:
        assert credits.loc["Cats purr when content", "q_after"] == 0.5  # exposed, unused: Q unchanged
    ranked = vault.query_ranked("sqlite write-ahead logging").set_index("title")
    assert ranked.loc["WAL lets readers run during writes", "q_value"] == pytest.approx(expected)
    # co-occurrence: the two notes used together pull each other in
    pulled = vault.query_ranked("write-ahead logging snapshot", limit=3).set_index("title")
    assert pulled.loc["busy_timeout waits for locks", "cooccurrence"] > 0


def test_warmth_from_accesses_with_clock(tmp_path: Path) -> None:
    clock = Clock()
    vault = make(tmp_path, clock)
    vault.add("Warm note about tokens", "Token budgets matter.")
    vault.add("Cold note about tokens", "Token limits matter too.")
    clock.now = T0 + 3 * 3600
    vault.boost("Warm note about tokens")
    clock.now = T0 + 4 * 3600
    field = vault.query_warmth("tokens").set_index("title")
    assert field.loc["Cold note about tokens", "activation"] == pytest.approx(math.log(4**-0.5))
    assert field.loc["Warm note about tokens", "activation"] == pytest.approx(math.log(4**-0.5 + 1.0))
    assert field.index[0] == "Warm note about tokens"


@pytest.mark.sqlite_only  # deletes or damages the SQLite file; a server database does not vanish with a folder
def test_export_and_import_learning_survive_a_lost_index(tmp_path: Path) -> None:
    vault = make(tmp_path)
    vault.add("Compaction prunes tool results", "Old tool outputs become markers first.")
    vault.begin_session()
    vault.boost("Compaction prunes tool results")
    vault.end_session()
    exported = vault.export_learning(tmp_path / "learned.json")
    assert json.loads(exported.read_text())["stores"]["global"]["q_values"][0][1] == pytest.approx(0.55)
    for store in vault.stores:
        store.index.close()
    for name in ("index.db", "index.learning.json"):  # the automatic export too: only the manual one is left
        (tmp_path / "vault/.aries" / name).unlink()
    fresh = make(tmp_path)
    assert fresh.query_ranked("compaction").iloc[0]["q_value"] == pytest.approx(0.5)
    fresh.import_learning(exported)
    assert fresh.query_ranked("compaction").iloc[0]["q_value"] == pytest.approx(0.55)
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ValueError, match="not a vault learning export"):
        fresh.import_learning(tmp_path / "bad.json")


@pytest.mark.sqlite_only  # deletes or damages the SQLite file; a server database does not vanish with a folder
def test_persistence_across_processes_and_rebuild_gives_same_ranking(tmp_path: Path) -> None:
    env = {**os.environ, "ARIES_VAULT": str(tmp_path / "vault")}
    writer = textwrap.dedent(
        """
        from aries_kernel.vault import HashEmbedder, open_vault
        v = open_vault(None, embedder=HashEmbedder())
        v.add("SQLite WAL lets readers run during writes", "Readers keep a snapshot. [[busy_timeout waits]]")
        v.add("busy_timeout waits", "Wait for the lock instead of failing. [[BEGIN IMMEDIATE avoids deadlocks]]")
        v.add("BEGIN IMMEDIATE avoids deadlocks", "Take the write lock first. [[SQLite WAL lets readers run during writes]]")
        v.add("Cats purr", "Cats purr when content and relaxed.")
        """
    )
    reader = textwrap.dedent(
        """
        import json
        from aries_kernel.vault import HashEmbedder, open_vault
        v = open_vault(None, embedder=HashEmbedder(), clock=lambda: 1.9e9)
        f = v.query_ranked("sqlite lock writers", limit=4)
        print(json.dumps({"titles": list(f.title), "scores": list(f.score)}))
        """
    )
    subprocess.run([sys.executable, "-c", writer], env=env, check=True, timeout=120)
    first = json.loads(subprocess.run([sys.executable, "-c", reader], env=env, check=True, timeout=120,
                                      capture_output=True, text=True).stdout)  # fmt: skip
    assert len(first["titles"]) == 4 and first["titles"][-1] == "Cats purr"
    (tmp_path / "vault/.aries/index.db").unlink()
    for extra in ("index.db-wal", "index.db-shm"):
        (tmp_path / "vault/.aries" / extra).unlink(missing_ok=True)
    second = json.loads(subprocess.run([sys.executable, "-c", reader], env=env, check=True, timeout=120,
                                       capture_output=True, text=True).stdout)  # fmt: skip
    assert second["titles"] == first["titles"]
    assert second["scores"] == pytest.approx(first["scores"])


def test_rebuild_keeps_ranking_and_learning(tmp_path: Path) -> None:
    vault = make(tmp_path)
    for i, topic in enumerate(["retry budget", "rate limit", "sqlite lock", "tree-sitter parse"]):
        vault.add(f"Note {i} on {topic}", f"Details about the {topic}, see [[Note {(i + 1) % 4} on x]].")
    vault.begin_session()
    vault.mark_used("Note 2 on sqlite lock")
    vault.end_session()
    before = vault.query_ranked("sqlite lock retry")
    vault.rebuild()
    after = vault.query_ranked("sqlite lock retry")
    assert list(after["title"]) == list(before["title"])
    assert list(after["score"]) == pytest.approx(list(before["score"]))
    assert after.set_index("title").loc["Note 2 on sqlite lock", "q_value"] == pytest.approx(0.55)
    assert "rebuild" in set(vault.audit()["action"])


@pytest.mark.sqlite_only  # deletes or damages the SQLite file; a server database does not vanish with a folder
def test_corrupt_index_is_moved_aside_and_rebuilt(tmp_path: Path) -> None:
    vault = make(tmp_path)
    vault.add("Kernel interrupts stop the agent", "SIGINT stops the loop within a second.")
    for store in vault.stores:
        store.index.close()
    db = tmp_path / "vault/.aries/index.db"
    for extra in ("index.db-wal", "index.db-shm"):
        (tmp_path / "vault/.aries" / extra).unlink(missing_ok=True)
    db.write_bytes(b"this is not a database, just garbage" * 100)
    again = make(tmp_path)
    assert again.query_ranked("interrupt").iloc[0]["title"] == "Kernel interrupts stop the agent"
    assert again.stores[0].index.corrupt_copy is not None and again.stores[0].index.corrupt_copy.exists()


def test_bad_files_are_skipped_with_a_reason(tmp_path: Path, backend: str) -> None:
    notes = tmp_path / "vault" / "notes"
    notes.mkdir(parents=True)
    (notes / "Good note.md").write_text("---\ntype: insight\n---\nA fine note about parsing.\n")
    (notes / "Broken front matter.md").write_text("---\ntype: [oops\n---\nbody\n")
    (notes / "Unclosed front matter.md").write_text("---\ntype: insight\nbody with no end\n")
    (notes / "Binary.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00binary")
    (notes / "picture.png").write_bytes(b"\x89PNG\x00\x00")
    (notes / "Latin-1.md").write_bytes("caf\xe9".encode("latin-1"))
    (notes / "Huge.md").write_text("x" * (10 * 1024 * 1024))
    vault = make(tmp_path)
    reasons = dict(zip(vault.skipped["path"], vault.skipped["reason"], strict=False))
    assert "broken YAML front matter" in reasons["notes/Broken front matter.md"]
    assert "never ends" in reasons["notes/Unclosed front matter.md"]
    assert "binary" in reasons["notes/Binary.md"]
    assert "not a markdown" in reasons["notes/picture.png"]
    assert "not UTF-8" in reasons["notes/Latin-1.md"]
    assert "over the" in reasons["notes/Huge.md"] and "split it" in reasons["notes/Huge.md"]
    assert list(vault.query_ranked("parsing")["title"]) == ["Good note"]
    # a note that breaks later is reported on the next sync; on SQLite (the folder is the truth) it leaves the
    # index, in a team vault on PostgreSQL (the database is the truth) the team's copy stays until forgotten
    (notes / "Good note.md").write_text("---\ntype: [\n---\nnow broken\n")
    vault.sync()
    assert vault.query_ranked("parsing").empty == (backend == "sqlite")
    assert "notes/Good note.md" in set(vault.skipped["path"])


def test_bad_titles_queries_and_sizes(tmp_path: Path) -> None:
    vault = make(tmp_path)
    outside_before = files_under(tmp_path) - {
        p for p in files_under(tmp_path) if p.startswith(("vault/", "repo/"))
    }
    assert vault.add("../x", "climbing out").path == "inbox/x.md"
    assert vault.add("a/b", "a slash").path == "inbox/a-b.md"
    assert vault.add("../../etc/passwd", "nope").path == "inbox/etc-passwd.md"
    assert vault.add("..\\..\\win", "backslashes").path == "inbox/win.md"
    with pytest.raises(NoteError, match="empty once path characters are removed"):
        vault.add("../..", "nothing left")
    with pytest.raises(NoteError, match="over the .*-byte limit"):
        vault.add("A huge note", "x" * (10 * 1024 * 1024))
    assert not (tmp_path / "vault/inbox/A huge note.md").exists()
    with pytest.raises(NoteError, match="NUL"):
        vault.add("Binary content", "abc\x00def")
    with pytest.raises(NoteError, match="Unknown folder"):
        vault.add("Somewhere", "text", folder="../elsewhere")
    for query in ("", "   ", "?!"):
        with pytest.raises(ValueError, match="query"):
            vault.query_ranked(query)
    with pytest.raises(ValueError, match="non-empty query"):
        vault.explore("")
    with pytest.raises(ValueError, match="Unknown signals"):
        vault.query_ranked("x", signals=["vibes"])
    outside_after = files_under(tmp_path) - {
        p for p in files_under(tmp_path) if p.startswith(("vault/", "repo/"))
    }
    assert outside_after == outside_before
    assert all(sanitize_title(t) for t in ("a/b", "../x", "C:\\x"))
    assert MAX_NOTE_BYTES < 10 * 1024 * 1024


def test_project_index_stays_out_of_git_but_the_brain_travels(tmp_path: Path) -> None:
    vault = make(tmp_path)
    vault.add("Project decision", "We use SQLite in WAL mode.", project=True)
    ignore = (tmp_path / "repo/.aries/.gitignore").read_text()
    assert "*" in ignore.splitlines() and "!memory/" in ignore.splitlines()
    assert (tmp_path / "repo/.aries/vault.db").exists()


def test_add_over_an_unindexed_file(tmp_path: Path) -> None:
    vault = make(tmp_path)
    inbox = tmp_path / "vault" / "inbox"
    inbox.mkdir(parents=True)
    (inbox / "Orphan note.md").write_text(
        "---\ntype: insight\n---\nleft by a writer that died before committing\n"
    )
    (inbox / "Broken note.md").write_text("---\ntype: [\n---\nbody\n")
    assert vault.add("Orphan note", "The real content.").action == "created"
    assert "The real content." in (inbox / "Orphan note.md").read_text()
    with pytest.raises(NoteError, match="Broken note.md: the file there is not a valid note"):
        vault.add("Broken note", "Would overwrite a file the user must fix.")
    assert "type: [" in (inbox / "Broken note.md").read_text()


def test_bm25_in_a_large_vault_skips_common_only_notes_with_exact_scores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "Large" starts at COMMON_TERMS_MIN_NOTES (5,000); 1,200 notes over a lowered bar show the same pruning
    # at a fifth of the cost (this test took half a minute on PostgreSQL).
    monkeypatch.setattr(vault_search, "COMMON_TERMS_MIN_NOTES", 1000)
    vault = make(tmp_path)
    colours = ["red", "green", "blue", "amber", "violet", "cyan", "ochre", "teal", "plum", "sand"]
    items = [
        (
            f"Note {i}",
            f"{'project ' if i % 2 else ''}status {colours[i % 10]} item{i % 397} day{i % 31}",
            "insight",
        )
        for i in range(1200)
    ]
    vault.add_many(items, near_duplicates=False)
    index = vault.stores[0].index
    for query in ("project status item42", "project day7 violet", "status project item5 day3"):
        terms = query.split()
        assert "project" in index._common_terms(terms)
        pruned = index.bm25(terms, 10)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(index, "_common_terms", lambda terms: [])  # the plain query over every match
            full = index.bm25(terms, 10)
        assert [n for n, _ in pruned] == [n for n, _ in full]
        assert [s for _, s in pruned] == pytest.approx([s for _, s in full])
    # only common words: the plain query runs
    assert len(index.bm25(["project", "status"], 10)) == 10
    monkeypatch.setattr(vault_search, "COMMON_TERMS_MIN_NOTES", 1201)
    index._df_generation = -1  # the note count is read again
    assert index._common_terms(["project"]) == []  # below the bar nothing is left out


def test_unrecorded_query_leaves_session_exposures_alone(tmp_path: Path) -> None:
    vault = make(tmp_path)
    vault.add("Widgets degrade to text", "jupyter console shows the text/plain fallback.")
    session = vault.begin_session()
    vault.query_ranked("console fallback", record=False)
    assert session.retrieved == {} and session.queries == []
    vault.query_ranked("console fallback")
    assert session.retrieved == {"global:widgets degrade to text": 1}
    note = vault.read("Widgets degrade to text")
    assert (note.name, note.source, note.path) == (
        "Widgets degrade to text",
        "global",
        "inbox/Widgets degrade to text.md",
    )
    assert note.title() == note.title() and note._repr_markdown_().startswith("**Widgets degrade to text**")
