"""MemoryFeedback against a real vault (files, SQLite or PostgreSQL index) and the cheap slot of a real router on the
loopback server: warm context, preflight, echo and fizzle, Q credit once, reflection, extraction, memory
off."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from traitlets.config import Config

from aries_kernel.agent.events import MemoryEchoed, MemoryFizzled, MemoryRetrieved, Notice, ReflectionWritten
from aries_kernel.agent.memory import PREFLIGHT_OPEN, WARM_OPEN, AriesMemory, MemoryFeedback
from aries_kernel.models import types as mt
from aries_kernel.models.router import ModelRouter
from aries_kernel.vault import HashEmbedder, Vault, open_vault
from aries_kernel.vault.db.schema import access
from tests.loopback import Reply, ScriptedModelServer

# Every test here runs on SQLite and on PostgreSQL (tests/pg_support.py).
pytestmark = pytest.mark.usefixtures("backend")

WAL = "SQLite WAL mode lets readers proceed while one writer commits"
RETRY = "Retry HTTP 429 responses with exponential backoff and jitter"
GROUPBY = "Pandas groupby with observed=True avoids empty categorical groups"
CACHE = "The cache module keys entries by content hash"

NOTES = {
    WAL: "With journal_mode=WAL readers never block the single writer; checkpoints run in the background.",
    RETRY: "Rate limits from providers need backoff; jitter avoids thundering herds of retries.",
    GROUPBY: "Pass observed=True when grouping by categoricals, or each category shows up as an empty group.",
}


def write_note(folder: Path, title: str, body: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{title}.md").write_text(f"---\ntype: insight\n---\n\n{body}\n", encoding="utf-8")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    write_note(
        root / ".aries" / "memory" / "notes", CACHE, "cache.py uses sha256 of the file text as its key."
    )
    return root


@pytest.fixture
def vault_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "vault"
    for title, body in NOTES.items():
        write_note(folder / "notes", title, body)
    (folder / "self").mkdir(parents=True)
    (folder / "self" / "identity.md").write_text(
        "---\ntype: self\n---\n\nI am Aries, a careful coding agent.\n"
    )
    (folder / "self" / "goals.md").write_text("- Finish the memory loop of aries-kernel\n")
    return folder


def settings(**values: Any) -> AriesMemory:
    """Memory settings for the hash embedder, whose similarities are lower than wordllama's."""
    config = Config()
    config.AriesMemory.preflight_min_similarity = 0.1
    config.AriesMemory.preflight_strong_similarity = 0.9
    for name, value in values.items():
        setattr(config.AriesMemory, name, value)
    return AriesMemory(config=config)


@pytest.fixture
def vault(repo: Path, vault_dir: Path) -> Vault:
    return open_vault(repo, path=vault_dir, embedder=HashEmbedder())


@pytest.fixture
def cheap(server: ScriptedModelServer, make_router: Callable[..., ModelRouter]) -> Any:  # noqa: F811
    return make_router().client("cheap")  # make_router closes its connections after the test


def feedback_for(vault: Vault, cheap: Any = None, **values: Any) -> MemoryFeedback:
    return MemoryFeedback(
        lambda: vault, (lambda: cheap) if cheap is not None else None, settings=settings(**values)
    )


def warmth(vault: Vault, title: str) -> float:
    frame = vault.query_warmth(None, limit=50)
    return float(frame.loc[frame["title"] == title, "warmth"].iloc[0])


# ----------------------------------------------------------------------------------------------- warm context


def test_warm_context_holds_identity_goals_and_warmest_notes(vault: Vault) -> None:
    memory = feedback_for(vault)
    vault.read(RETRY)  # an access makes this note the warmest
    text = memory.warm_context()
    assert text.startswith(WARM_OPEN)
    assert "I am Aries, a careful coding agent." in text and "Finish the memory loop" in text
    assert f"[[{RETRY}]]" in text and "identity.md" not in text
    assert len(text) // 4 <= memory.settings.warm_tokens
    status = memory.status()
    assert "Warm context: ~" in status and RETRY in status


def test_warm_context_stays_put_between_refreshes_and_rebuilds_after_ten_turns(vault: Vault) -> None:
    memory = feedback_for(vault)
    first = memory.warm_context()
    vault.add("Gzip compression of JSON responses saves bandwidth", "Measured 80% less transfer.")
    for _ in range(9):
        memory.on_turn(tool_using=False)
        assert memory.warm_context() == first  # a stable prefix between refreshes
    memory.on_turn(tool_using=False)
    assert "Gzip compression of JSON responses saves bandwidth" in memory.warm_context()


def test_warm_context_respects_its_budget(vault: Vault) -> None:
    for n in range(40):
        vault.add(f"Long note number {n} explains one thing in detail", "word " * 400)
    memory = feedback_for(vault, warm_tokens=300, warm_notes=30)
    text = memory.warm_context()
    assert len(text) // 4 <= 300


# -------------------------------------------------------------------------------------------- preflight, echo


def test_preflight_offers_only_notes_that_clear_the_threshold(vault: Vault) -> None:
    memory = feedback_for(vault)
    memory.start_session()
    block = memory.preflight("why is the database locked when two processes write to sqlite?")
    assert block is not None and block.startswith(PREFLIGHT_OPEN) and f"[[{WAL}]]" in block
    assert RETRY not in block and GROUPBY not in block
    assert [type(e) for e in memory.take_events()] == [MemoryRetrieved]
    # only the offered note counts as exposed in the vault session, not every row the query returned
    assert set(vault.session.retrieved) == {f"global:{WAL.casefold()}"}
    assert memory.preflight("fix the typo in README") is None
    assert memory.take_events() == []


def test_preflight_reaches_the_project_brain(vault: Vault) -> None:
    memory = feedback_for(vault)
    block = memory.preflight("how does the cache decide its keys?")
    assert block is not None and f"[[{CACHE}]] (project)" in block


def test_echo_warms_the_named_note_and_fizzle_leaves_the_other(vault: Vault) -> None:
    memory = feedback_for(vault, preflight_min_similarity=0.0)
    memory.start_session()
    block = memory.preflight("sqlite writer locked; also 429 rate limits from providers")
    assert block is not None and WAL in block and RETRY in block
    memory.take_events()
    before = {title: warmth(vault, title) for title in (WAL, RETRY)}
    echoed, fizzled = memory.after_response(
        "Switch the SQLite index to WAL mode: readers proceed while the writer commits."
    )
    assert echoed == [WAL] and fizzled == [RETRY]
    assert [type(e) for e in memory.take_events()] == [MemoryEchoed, MemoryFizzled]
    assert warmth(vault, WAL) > before[WAL]
    assert warmth(vault, RETRY) == pytest.approx(before[RETRY])
    status = memory.status()
    assert f"echoed [[{WAL}]]" in status and f"fizzled [[{RETRY}]]" in status


def test_session_end_moves_q_values_once(vault: Vault) -> None:
    memory = feedback_for(vault, preflight_min_similarity=0.0)
    memory.start_session()
    memory.preflight("sqlite writer locked; also 429 rate limits from providers")
    memory.after_response("WAL mode in SQLite lets readers proceed while the writer commits.")
    credits = memory.end_session()
    assert credits is not None
    rows = credits.set_index("title")
    assert rows.loc[WAL, "used"] and rows.loc[WAL, "q_after"] > rows.loc[WAL, "q_before"]
    assert not rows.loc[RETRY, "used"] and rows.loc[RETRY, "q_after"] <= rows.loc[RETRY, "q_before"]
    learned = vault.stores[0].index.q_values()
    assert learned[WAL.casefold()][0] == pytest.approx(rows.loc[WAL, "q_after"])
    assert any(isinstance(e, Notice) and "credited once" in e.text for e in memory.take_events())
    again = memory.end_session()
    assert again is not None and len(again) == 0
    assert vault.stores[0].index.q_values() == learned


# ------------------------------------------------------------------------------------------------- reflection


def reflection(title: str, content: str) -> Reply:
    return Reply(text=json.dumps({"title": title, "content": content}))


def test_reflection_fires_at_the_threshold_and_writes_one_note(
    vault: Vault,
    cheap: Any,
    server: ScriptedModelServer,  # noqa: F811
) -> None:
    memory = feedback_for(vault, cheap)
    history = [mt.Message("user", "speed up the cache"), mt.Message("assistant", "Keyed it by content hash.")]
    title = "Keying the cache by content hash makes invalidation automatic"
    server.script(reflection(title, "Changing a file changes its hash, so stale entries are never read."))
    for _ in range(49):
        assert memory.on_turn(tool_using=True, history=history) is None
    assert memory.importance == 147 and not server.requests
    saved = memory.on_turn(tool_using=True, history=history)
    assert saved is not None and saved.action == "created" and saved.title == title
    assert memory.importance == 0
    assert len(server.requests) == 1 and "Keyed it by content hash." in json.dumps(server.requests[0].body)
    assert [e.title for e in memory.take_events() if isinstance(e, ReflectionWritten)] == [title]
    assert (vault.stores[0].root / "inbox" / f"{title}.md").exists()


def test_a_second_firing_with_the_same_insight_writes_no_twin(
    vault: Vault,
    cheap: Any,
    server: ScriptedModelServer,  # noqa: F811
) -> None:
    memory = feedback_for(vault, cheap, reflection_threshold=3)
    title = "Keying the cache by content hash makes invalidation automatic"
    body = "Changing a file changes its hash, so stale entries are never read."
    server.script(
        reflection(title, body), reflection("Cache keys by content hash make invalidation automatic", body)
    )
    for _ in range(3):
        memory.on_turn(tool_using=False)
    count = len(vault.query_important(limit=100))
    for _ in range(3):
        saved = memory.on_turn(tool_using=False)
    assert saved is not None and saved.action == "dropped" and saved.title == title
    assert len(vault.query_important(limit=100)) == count
    notices = [e.text for e in memory.take_events() if isinstance(e, Notice)]
    assert any("dropped" in text and title in text for text in notices)


def test_a_reflection_adding_something_is_merged_into_its_twin(
    vault: Vault,
    cheap: Any,
    server: ScriptedModelServer,  # noqa: F811
) -> None:
    memory = feedback_for(vault, cheap, reflection_threshold=1)
    count = len(vault.query_important(limit=100))
    server.script(
        reflection(
            "SQLite WAL mode lets readers proceed while a writer commits",
            "Measured: checkpoint starvation appears when a reader holds a snapshot for hours; "
            "wal_autocheckpoint cannot reset the file then.",
        )
    )
    saved = memory.on_turn(tool_using=False)
    assert saved is not None and saved.action == "merged" and saved.title == WAL
    assert "checkpoint starvation" in vault.read(WAL)
    assert len(vault.query_important(limit=100)) == count  # no twin


def test_a_label_is_not_a_reflection(vault: Vault, cheap: Any, server: ScriptedModelServer) -> None:  # noqa: F811
    memory = feedback_for(vault, cheap, reflection_threshold=1)
    server.script(reflection("Caching", "Some words."))
    saved = memory.on_turn(tool_using=False)
    assert saved is not None and saved.action == "skipped"


def test_a_failing_cheap_model_costs_the_reflection_not_the_session(
    vault: Vault,
    cheap: Any,
    server: ScriptedModelServer,  # noqa: F811
) -> None:
    memory = feedback_for(vault, cheap, reflection_threshold=1)
    server.script(*[Reply(status=400, error="bad request")] * 4)
    assert memory.on_turn(tool_using=False) is None
    assert memory.importance == 0
    assert any(isinstance(e, Notice) and "reflection failed" in e.text for e in memory.take_events())
    assert memory.off_reason is None


# ------------------------------------------------------------------------------------------------- compaction


def test_extract_before_compaction_saves_items_to_the_vault_and_the_brain(
    vault: Vault,
    cheap: Any,
    server: ScriptedModelServer,  # noqa: F811
) -> None:
    memory = feedback_for(vault, cheap)
    items = [
        {
            "title": "The loader reads settings from pyproject before setup.cfg",
            "content": "Found in loader.py.",
            "type": "learning",
            "scope": "project",
        },
        {
            "title": "We keep the public API in the package init only",
            "content": "Decided with the user.",
            "type": "decision",
            "scope": "project",
        },
        {
            "title": "Monotonic clocks are the right base for timeouts",
            "content": "Wall clocks jump.",
            "type": "insight",
            "scope": "global",
        },
        {"title": WAL, "content": NOTES[WAL], "type": "insight", "scope": "global"},
    ]
    server.script(Reply(text="Here they are:\n" + json.dumps(items)))
    history = [
        mt.Message("user", "refactor the loader"),
        mt.Message("assistant", "Done; settings come first."),
    ]
    titles = memory.extract_before_compaction(history)
    assert titles == [item["title"] for item in items[:3]]
    project, global_ = vault.stores[1], vault.stores[0]
    assert project.find(items[0]["title"]) is not None and project.find(items[1]["title"]) is not None
    assert global_.find(items[2]["title"]) is not None
    assert [s.action for s in memory.extracted] == ["created", "created", "created", "dropped"]
    assert "refactor the loader" in json.dumps(server.requests[0].body)
    assert "Saved at the last compaction" in memory.status()


# ------------------------------------------------------------------------------------------------- memory off


def test_a_vault_that_fails_to_open_turns_memory_off_and_says_why() -> None:
    def broken() -> Vault:
        raise PermissionError("[Errno 13] Permission denied: '/vault/.aries'")

    memory = MemoryFeedback(broken, settings=settings())
    assert memory.warm_context() == ""
    assert memory.preflight("anything at all") is None
    assert memory.after_response("text") == ([], [])
    assert memory.on_turn(tool_using=True) is None
    assert memory.extract_before_compaction([mt.Message("user", "x")]) == []
    assert memory.end_session() is None
    events = memory.take_events()
    assert len(events) == 1 and isinstance(events[0], Notice)
    assert "Memory is off" in events[0].text and "Permission denied" in events[0].text
    assert memory.status().startswith("Memory: off, the vault failed to open (PermissionError")


def test_an_empty_vault_offers_nothing_says_why_and_turns_on_when_notes_arrive(
    tmp_path: Path,
    cheap: Any,
    server: ScriptedModelServer,  # noqa: F811
) -> None:
    vault = open_vault(tmp_path / "repo", path=tmp_path / "missing-vault", embedder=HashEmbedder())
    memory = feedback_for(vault, cheap, reflection_threshold=1)
    assert memory.warm_context() == ""
    assert memory.preflight("why is sqlite locked?") is None
    assert "has no notes yet" in memory.status()
    server.script(
        reflection("Keying the cache by content hash makes invalidation automatic", "Hashes change.")
    )
    saved = memory.on_turn(tool_using=False)
    assert saved is not None and saved.action == "created"
    assert memory.off_reason is None and memory.status().startswith("Memory: on")
    texts = [e.text for e in memory.take_events() if isinstance(e, Notice)]
    assert texts[0].startswith("Memory is off: the vault has no notes yet") and "Memory is on" in texts[-1]


def test_status_before_the_first_prompt_does_not_open_the_vault() -> None:
    opened = []
    memory = MemoryFeedback(lambda: opened.append(1), settings=settings())
    assert memory.status() == "Memory: on; the vault opens with the first prompt."
    assert not opened


def test_memory_turned_off_in_settings_never_opens_the_vault() -> None:
    opened = []
    memory = MemoryFeedback(lambda: opened.append(1), settings=settings(enabled=False))
    assert memory.preflight("sqlite") is None and memory.warm_context() == ""
    assert not opened
    assert "c.AriesMemory.enabled = False" in memory.status()


def test_within_a_run_a_note_echoes_once_and_fizzles_only_at_the_final_reply(vault: Vault) -> None:
    memory = feedback_for(vault, preflight_min_similarity=0.0)
    prompt = "sqlite writer locked; also 429 rate limits from providers"
    assert memory.preflight(prompt) is not None
    assert memory.after_response("", final=False) == ([], [])  # a tool turn: nothing decided yet
    memory.preflight(prompt)  # the next turn of the same run offers the same notes again
    events = memory.take_events()
    assert [type(e) for e in events] == [MemoryRetrieved]  # retrieved once, when first offered
    echo = "SQLite WAL mode: readers proceed while the writer commits."
    assert memory.after_response(echo, final=False) == ([WAL], [])
    memory.preflight(prompt)
    assert memory.after_response(echo, final=True) == ([], [RETRY])  # WAL echoed already in this run
    assert [type(e) for e in memory.take_events()] == [MemoryEchoed, MemoryFizzled]
    assert accesses_of(vault, WAL).count("echo") == 1


def accesses_of(vault: Vault, title: str) -> list[str]:
    # A Core query (raw SQL with "?" placeholders is SQLite's alone), of this user's accesses.
    index = vault.stores[0].index
    a = access.c
    rows = index.rows(select(a.kind).where(a.key == title.casefold(), a.username == index.user))
    return [row[0] for row in rows]
