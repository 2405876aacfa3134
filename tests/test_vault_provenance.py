"""Provenance and forgetting: where each note came from, its history, supersede, purge, and the session review.

Every test runs on SQLite and on PostgreSQL (tests/pg_support.py). The agent's paths are driven for real: the
agent loop on the router and the loopback model server (the VaultAdd tool, reflection at its threshold,
compaction's extract step), and in a real kernel for ``%aries vault --session``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import inspect, select, text

from aries_kernel.agent import Agent
from aries_kernel.agent.memory import MemoryHook
from aries_kernel.agent.settings import AriesAgent
from aries_kernel.models.router import ModelRouter
from aries_kernel.vault import HashEmbedder, Vault, open_vault
from aries_kernel.vault.db import VaultIndex, schema
from aries_kernel.vault.db.schema import MIGRATIONS, audit, cooccurrence, notes, q_values
from aries_kernel.vault.notes import parse_note
from aries_kernel.vault.provenance import KERNEL, Provenance, acting
from tests.agent_scripted import FakeContext
from tests.kernel_harness import run_cell, start_kernel, stop_kernel
from tests.loopback import Reply, ScriptedModelServer
from tests.test_memory_feedback import reflection, settings

pytestmark = pytest.mark.usefixtures("backend")

WORD = "zyzzogeton"  # in no other note: any row holding it is about the purged note


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    return root


@pytest.fixture
def vault(repo: Path, tmp_path: Path) -> Vault:
    return open_vault(repo, path=tmp_path / "vault", embedder=HashEmbedder())


def make_agent(repo: Path, vault: Vault, router: ModelRouter, **memory: Any) -> Agent:
    agent = Agent(
        root=repo,
        router=router,
        settings=AriesAgent(),
        context=FakeContext(repo, pillars={"vault": vault}, build=True),
    )
    agent.hooks.append(MemoryHook.for_agent(agent, lambda: vault, settings(**memory)))
    return agent


def row_of(vault: Vault, title: str, where: str = "global") -> dict[str, Any]:
    store = vault._store(where)
    n = notes.c
    found = store.index.rows(
        select(n.origin, n.session_id, n.turn, n.kernel, n.author, n.superseded_by).where(
            n.key == title.casefold()
        )
    )
    assert found, title
    return dict(found[0]._mapping)


def front_matter(vault: Vault, title: str, where: str = "global") -> dict[str, Any]:
    store = vault._store(where)
    found = store.find(title)
    assert found is not None
    return parse_note(store.root, store.root / found["path"]).meta


# ------------------------------------------------------------------------------------------------ provenance


def test_a_note_written_in_a_cell_is_the_users_and_keeps_it_through_a_rebuild(vault: Vault) -> None:
    vault.add("Retries use exponential backoff", "We retry 429 with backoff and jitter.")
    assert row_of(vault, "Retries use exponential backoff")["origin"] == "user"
    assert front_matter(vault, "Retries use exponential backoff")["origin"] == "user"
    with acting(Provenance("agent_tool", "s-1", 4)):  # what the agent's Repl code writes
        vault.add("Agent code wrote this claim", "A vault.add inside the agent's Repl code.")
    vault.rebuild()  # the index is built again from the markdown: provenance comes back from front matter
    row = row_of(vault, "Agent code wrote this claim")
    assert (row["origin"], row["session_id"], row["turn"], row["kernel"]) == ("agent_tool", "s-1", 4, KERNEL)
    assert row_of(vault, "Retries use exponential backoff")["origin"] == "user"


def test_the_vault_add_tool_records_the_agent_session_and_turn(
    repo: Path, vault: Vault, server: ScriptedModelServer, make_router: Callable[..., ModelRouter]
) -> None:
    agent = make_agent(repo, vault, make_router())
    title = "The loader reads pyproject before setup.cfg"
    todo = ("TodoWrite", {"todos": [{"content": "read the loader", "status": "in_progress"}]})
    server.script(
        Reply(tool_calls=[todo]),  # turn 1
        Reply(tool_calls=[("VaultAdd", {"title": title, "content": "Seen in loader.py."})]),  # turn 2
        Reply(text="Saved."),
    )
    list(agent.run("remember how the loader reads settings"))
    server.script(
        Reply(
            tool_calls=[
                ("ProjectSave", {"title": "We keep the public API in the init", "content": "Agreed."})
            ]
        ),
        Reply(text="Saved too."),
    )
    list(agent.run("and the API rule", auto_approve=True))  # ProjectSave edits the repository: approved
    assert agent.session is not None
    row = row_of(vault, title)
    assert (row["origin"], row["session_id"], row["turn"], row["kernel"]) == (
        "agent_tool",
        agent.session.id,
        2,
        KERNEL,
    )
    project = row_of(vault, "We keep the public API in the init", "project")
    assert project["origin"] == "agent_tool" and project["session_id"] == agent.session.id
    assert project["turn"] is not None and project["turn"] > row["turn"]
    meta = front_matter(vault, title)
    assert (meta["origin"], meta["session"], meta["turn"]) == ("agent_tool", agent.session.id, row["turn"])


def test_reflection_and_compaction_record_their_origin(
    repo: Path, vault: Vault, server: ScriptedModelServer, make_router: Callable[..., ModelRouter]
) -> None:
    agent = make_agent(repo, vault, make_router(), reflection_threshold=4)
    todo = ("TodoWrite", {"todos": [{"content": "plan", "status": "pending"}]})
    reflected = "Planning with TodoWrite keeps long sessions on track"
    server.script(
        Reply(tool_calls=[todo]),
        Reply(tool_calls=[todo]),  # over the threshold after turn 2: the cheap slot reflects
        reflection(reflected, "A written plan kept the agent from repeating steps."),
        Reply(text="Planned."),
    )
    list(agent.run("plan the work"))
    assert agent.session is not None
    row = row_of(vault, reflected)
    assert (row["origin"], row["session_id"], row["turn"]) == ("reflection", agent.session.id, 2)

    extracted = "Monotonic clocks are the right base for timeouts"
    items = [{"title": extracted, "scope": "global", "content": "Wall clocks jump.", "type": "insight"}]
    server.script(Reply(text=json.dumps(items)), Reply(text="## Goal\nTimeouts"))
    agent.compact()
    row = row_of(vault, extracted)
    assert (row["origin"], row["session_id"], row["kernel"]) == ("compaction", agent.session.id, KERNEL)
    assert front_matter(vault, extracted)["origin"] == "compaction"
    review = vault.agent_notes()
    assert set(review["title"]) == {reflected, extracted}
    assert set(review["origin"]) == {"reflection", "compaction"} and set(review["wrote"]) == {"created"}
    assert vault.agent_notes(kernel="another kernel").empty


def test_an_index_from_before_m007_is_upgraded(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(schema, "MIGRATIONS", MIGRATIONS[:6])  # an index written before provenance
    old = _index(backend, tmp_path)
    old.write(
        lambda c: c.execute(
            text(
                "INSERT INTO notes (path, title, key, norm, folder, body, content_hash, created, updated) "
                "VALUES ('inbox/An old note.md', 'An old note', 'an old note', 'an old note', 'inbox', 'x', 'h', 1, 1)"
            )
        )
    )
    old.write(
        lambda c: c.execute(
            text("INSERT INTO audit (at, action, title, path) VALUES (1, 'add', 'An old note', 'p')")
        )
    )
    old.close()
    monkeypatch.setattr(schema, "MIGRATIONS", MIGRATIONS)
    upgraded = _index(backend, tmp_path)
    n, a = notes.c, audit.c
    assert upgraded.rows(select(n.origin, n.session_id, n.turn, n.kernel, n.superseded_by)) == [
        ("user", "", None, "", "")
    ]
    assert upgraded.rows(select(a.origin, a.key, a.change)) == [("", "", "")]  # unrecorded before m007
    names = upgraded.read(lambda c: list(c.execute(text("SELECT name FROM _vault_migrations")).scalars()))
    assert names.count("m007_provenance") == 1
    upgraded.close()


def _index(backend: str, tmp_path: Path) -> VaultIndex:
    if backend == "sqlite":
        return VaultIndex(tmp_path / "index.db")
    return VaultIndex(url=os.environ["ARIES_VAULT_URL"], schema_name=os.environ["ARIES_VAULT_SCHEMA"])


# --------------------------------------------------------------------------------------------------- history


def test_history_lists_each_edit_with_who_where_from_and_what_changed(vault: Vault) -> None:
    title = "Timeouts use monotonic time"
    vault.add(title, "time.monotonic() never jumps.")
    vault.add(
        title, "time.monotonic() never jumps.\nWall clocks do.", provenance=Provenance("reflection", "s-9", 7)
    )
    vault.forget(title)
    vault.restore(title)
    history = vault.history(title)
    assert list(history["action"]) == ["add", "update", "forget", "restore"]
    assert list(history["origin"]) == ["user", "reflection", "user", "user"]
    assert history.loc[1, "session"] == "s-9" and history.loc[1, "turn"] == 7
    assert history.loc[0, "change"] == "+time.monotonic() never jumps."
    assert history.loc[1, "change"] == "+Wall clocks do."
    assert set(history["actor"]) == {vault.stores[0].index.user}
    assert history["at"].is_monotonic_increasing
    with pytest.raises(KeyError, match="No note titled"):
        vault.history("No such note anywhere")


# ------------------------------------------------------------------------------------------------- supersede


def test_supersede_archives_the_old_note_linked_both_ways(vault: Vault) -> None:
    old, new = "SQLite is slow under many readers", "SQLite WAL mode lets readers proceed"
    vault.add(old, "Readers block each other in sqlite.")
    vault.add(new, "With WAL, sqlite readers never block the writer.")
    assert set(vault.query_ranked("sqlite readers")["title"]) == {old, new}
    vault.supersede(old, new)
    assert front_matter(vault, old)["superseded_by"] == new
    assert front_matter(vault, new)["supersedes"] == [old]
    assert list(vault.query_ranked("sqlite readers")["title"]) == [new]
    assert old in set(vault.query_ranked("sqlite readers", superseded=True)["title"])
    assert old not in set(vault.query_important()["title"]) | set(vault.query_warmth()["title"])
    assert old not in set(vault.explore("sqlite readers")["title"])
    assert "Readers block each other" in vault.read(old)  # still readable
    assert "supersede" in set(vault.history(old)["action"]) and "supersede" in set(
        vault.history(new)["action"]
    )
    assert f"superseded by [[{new}]]" in set(vault.audit(5)["detail"])
    vault.rebuild()  # the link is in front matter: it survives a rebuild from the markdown
    assert row_of(vault, old)["superseded_by"] == new
    assert list(vault.query_ranked("sqlite readers")["title"]) == [new]
    with pytest.raises(ValueError, match="already superseded"):
        vault.supersede(new, old)


# ----------------------------------------------------------------------------------------------------- purge


def _everything(vault: Vault) -> dict[str, list[str]]:
    """Every row of every table of every store, as text, plus every file under each vault folder."""
    out: dict[str, list[str]] = {}
    for store in vault.stores:
        index = store.index

        def dump(conn: Any) -> dict[str, list[str]]:
            tables = inspect(conn).get_table_names()
            rows: dict[str, list[str]] = {}
            for table in tables:
                if conn.dialect.name == "postgresql":
                    found = conn.execute(text(f"SELECT t::text FROM {table} t")).scalars()
                    rows[table] = sorted(found)
                else:
                    found = conn.exec_driver_sql(f'SELECT * FROM "{table}"').all()
                    rows[table] = sorted(repr(tuple(r)) for r in found)
            return rows

        for table, rows in index.read(dump).items():
            out[f"{store.source}:{table}"] = rows
        files = sorted(p.relative_to(store.root).as_posix() for p in store.root.rglob("*.md"))
        out[f"{store.source}:files"] = files
    return out


def test_purge_dry_run_changes_nothing_and_purge_leaves_no_row_about_the_note(vault: Vault) -> None:
    title = f"The {WORD} cache is poisoned"
    partner, brain = "Backoff doubles after each retry", "The project keeps its API in the init"
    vault.add(partner, "Each retry waits twice as long.")
    vault.add(brain, "Only the package init exports names.", project=True)
    vault.add(title, f"An old {WORD} version of the note.")
    vault.forget(title)  # an archived copy, with its own row and file
    vault.add(title, f"A first {WORD} draft.", provenance=Provenance("agent_tool", "s-2", 1))
    vault.query_ranked(f"{WORD} cache")  # embeds this version
    vault.add(title, f"A second {WORD} draft, rewritten.", provenance=Provenance("agent_tool", "s-2", 2))
    vault.begin_session()
    vault.query_ranked(f"{WORD} cache retry")  # embeds the second version, exposes the notes
    for used in (title, partner, brain):
        vault.mark_used(used)
    vault.end_session()
    vault.read(title)
    vault.supersede(partner, title)
    bob = vault.stores[0].index
    bob.write(
        lambda c: c.execute(
            q_values.insert().values(
                username="bob", key=title.casefold(), q=0.9, exposures=1, updates=1, updated=1
            )
        )
    )
    uid = f"global:{title.casefold()}"
    pairs = [
        r
        for store in vault.stores
        for r in store.index.rows(select(cooccurrence.c.a, cooccurrence.c.b))
        if uid in r
    ]
    assert (
        len(pairs) == 2
    )  # with the global partner in the global index, with the brain's note in the brain's
    before = _everything(vault)
    assert any(WORD in row for rows in before.values() for row in rows)

    plan = vault.forget(title, purge=True, dry_run=True)
    assert _everything(vault) == before  # the dry run changed nothing
    what = set(zip(plan["source"], plan["what"], strict=True))
    expected = {
        ("global", w)
        for w in ("file", "archived file", "notes row", "archive row", "q_values", "access", "cooccurrence",
                  "embeddings", "audit", "front matter")
    } | {("project", "cooccurrence")}  # fmt: skip
    assert what == expected
    assert (
        plan.loc[plan["what"] == "embeddings", "rows"].sum() == 2
    )  # both versions written since it came back
    assert plan.loc[plan["what"] == "q_values", "rows"].sum() == 2  # this user's and bob's

    done = vault.forget(title, purge=True)
    assert done.drop(columns="rows").equals(plan.drop(columns="rows"))
    after = _everything(vault)
    leftovers = {table: [r for r in rows if WORD in r.casefold()] for table, rows in after.items()}
    assert {t: r for t, r in leftovers.items() if r} == {}
    assert not [r for rows in after.values() for r in rows if uid in r]
    assert row_of(vault, partner)["superseded_by"] == "a purged note"  # it stays out of retrieval
    assert partner not in set(vault.query_ranked("retry")["title"])
    assert "purge" in set(vault.audit(10)["action"])
    with pytest.raises(KeyError, match="No note or archived note"):
        vault.forget(title, purge=True, dry_run=True)
    with pytest.raises(ValueError, match="purge=True"):
        vault.forget(partner, dry_run=True)


# -------------------------------------------------------------------------------------------- session review

SETUP = 'get_ipython().config.AriesVault.embedder = "hash"\n'


@pytest.mark.kernel
def test_the_session_review_lists_and_purges_what_the_agent_wrote_in_this_kernel(
    small_repo: Path, server: ScriptedModelServer, tmp_path: Path
) -> None:
    env = server.kernel_env(ARIES_VAULT=str(tmp_path / "vault"))
    km, kc = start_kernel(small_repo, env=env)
    try:
        assert run_cell(kc, SETUP).error is None
        mine = "Users write this note by hand in a cell"
        assert run_cell(kc, f"vault.add({mine!r}, 'Typed by the user.');").error is None
        tool_note, code_note = "The agent saved this with its tool", "The agent wrote this from its code"
        server.script(
            Reply(tool_calls=[("VaultAdd", {"title": tool_note, "content": "Through VaultAdd."})]),
            Reply(tool_calls=[("Repl", {"code": f"vault.add({code_note!r}, 'Through Repl code.')"})]),
            Reply(text="Done."),
        )
        cell = run_cell(kc, "%aries --yes save two notes", timeout=180)
        assert cell.error is None, cell.error
        listed = run_cell(kc, "print(sorted(vault.agent_notes()['title']))")
        assert listed.stdout.strip() == repr(sorted([tool_note, code_note]))
        review = run_cell(kc, "%aries vault --session")
        assert review.error is None and tool_note in (review.result or "")

        asked = run_cell(kc, "%aries vault --session --purge")
        shown = asked.result or ""
        assert "Would purge 2 note(s)" in shown and "--purge --yes" in shown and mine not in shown
        still = run_cell(kc, "print(len(vault.agent_notes()))")
        assert still.stdout.strip() == "2"  # asking changed nothing

        purged = run_cell(kc, "%aries vault --session --purge --yes")
        assert purged.error is None and "Purged 2 note(s)" in (purged.result or "")
        left = run_cell(kc, "print(sorted(vault.titles()), len(vault.agent_notes()))")
        assert left.stdout.strip() == f"{[mine]!r} 0"
        assert not list((tmp_path / "vault").rglob("The agent*.md"))
        usage = run_cell(kc, "%aries vault --purge")
        assert "UsageError" in usage.stderr and "go with --session" in usage.stderr
    finally:
        stop_kernel(km, kc)
