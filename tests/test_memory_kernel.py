"""Memory in the loop end to end: a real Aries kernel, its vault on disk, and the loopback model server.

Scripted sessions over several turns through ``%aries``: preflight notes reach the request, a reply naming a
note's title terms echoes it (an echo access warms it) while an unrelated note does not, and Q-values move
once when the session ends; reflection fires at its threshold through the cheap slot and writes no twin; after
compaction the warm context is still in the system prompt and the extracted notes exist; a broken or empty
vault leaves the agent running, saying memory is off and why.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from aries_kernel.agent.compaction import SUMMARY_HEADER
from aries_kernel.agent.memory import PREFLIGHT_OPEN, WARM_OPEN
from aries_kernel.vault.db import VaultIndex
from aries_kernel.vault.db.schema import access
from tests.kernel_harness import run_cell, start_kernel, stop_kernel
from tests.loopback import Reply, ScriptedModelServer
from tests.test_memory_feedback import CACHE, NOTES, RETRY, WAL, write_note

pytestmark = [pytest.mark.kernel, pytest.mark.usefixtures("backend")]

SETUP = """\
config = get_ipython().config
config.AriesVault.embedder = "hash"
config.AriesMemory.preflight_min_similarity = {similarity}
config.AriesMemory.preflight_strong_similarity = 0.9
config.AriesMemory.reflection_threshold = {threshold}
"""


@pytest.fixture
def vault_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "vault"
    for title, body in NOTES.items():
        write_note(folder / "notes", title, body)
    (folder / "self").mkdir()
    (folder / "self" / "identity.md").write_text("I am Aries, a careful coding agent.\n")
    (folder / "self" / "goals.md").write_text("- Finish the memory loop of aries-kernel\n")
    return folder


def open_kernel(
    root: Path, server: ScriptedModelServer, vault: Path, similarity: float = 0.0, threshold: int = 150
) -> tuple[Any, Any]:
    env = server.kernel_env(ARIES_VAULT=str(vault))
    km, kc = start_kernel(root, env=env)
    cell = run_cell(kc, SETUP.format(similarity=similarity, threshold=threshold))
    assert cell.error is None, cell.error
    return km, kc


def system_of(body: dict[str, Any]) -> str:
    system = body.get("system", "")
    return system if isinstance(system, str) else "".join(block.get("text", "") for block in system)


def index_of(vault: Path) -> VaultIndex:
    """The index the kernel writes (it inherits the backend's environment): the SQLite file in ``vault``, or the
    test's PostgreSQL schema. The kernel and this test run as the same user, so its learned state is read."""
    url = os.environ.get("ARIES_VAULT_URL")
    if url:
        return VaultIndex(url=url, schema_name=os.environ["ARIES_VAULT_SCHEMA"])
    return VaultIndex(vault / ".aries" / "index.db")


def accesses(vault: Path, title: str) -> list[str]:
    index = index_of(vault)
    try:
        return [r[0] for r in index.rows(select(access.c.kind).where(access.c.key == title.casefold()))]
    finally:
        index.close()


def q_values(vault: Path) -> dict[str, float]:
    index = index_of(vault)
    try:
        return {key: q for key, (q, _) in index.q_values().items()}
    finally:
        index.close()


def agent_cell(kc: Any, prompt: str) -> Any:
    cell = run_cell(kc, f"%aries --yes {prompt}", timeout=180)
    assert cell.error is None, cell.error
    return cell


def test_a_session_offers_echoes_fizzles_and_credits_q_values_once(
    small_repo: Path, server: ScriptedModelServer, vault_dir: Path
) -> None:
    km, kc = open_kernel(small_repo, server, vault_dir)
    try:
        todo = ("TodoWrite", {"todos": [{"content": "check sqlite", "status": "in_progress"}]})
        server.script(
            Reply(tool_calls=[todo]),
            Reply(text="Put the SQLite index in WAL mode: readers proceed while the one writer commits."),
        )
        cell = agent_cell(kc, "sqlite writer locked; also 429 rate limits from providers")
        first = system_of(server.requests[0].body)
        assert first.startswith(WARM_OPEN) and "I am Aries, a careful coding agent." in first
        assert PREFLIGHT_OPEN in first and f"[[{WAL}]]" in first and f"[[{RETRY}]]" in first
        assert f"[memory echoed: {WAL}]" in cell.stdout
        assert f"[memory fizzled: {RETRY}]" in cell.stdout
        assert "echo" in accesses(vault_dir, WAL) and "echo" not in accesses(vault_dir, RETRY)

        status = run_cell(kc, "%aries status")
        text = status.stdout + (status.result or "")
        assert "Warm context: ~" in text and f"echoed [[{WAL}]]" in text and f"fizzled [[{RETRY}]]" in text

        assert q_values(vault_dir) == {}  # nothing is credited before the session ends
        reset = run_cell(kc, "%aries reset")
        assert reset.error is None and "credited once" in reset.stdout
        learned = q_values(vault_dir)
        assert learned[WAL.casefold()] > 0.5 >= learned[RETRY.casefold()]
        run_cell(kc, "%aries reset")
        assert q_values(vault_dir) == learned  # credited once, not again
    finally:
        stop_kernel(km, kc)


def test_a_kernel_shut_down_without_reset_still_credits_its_session(
    small_repo: Path, server: ScriptedModelServer, vault_dir: Path
) -> None:
    km, kc = open_kernel(small_repo, server, vault_dir)
    try:
        server.script(Reply(text="WAL mode in SQLite lets readers proceed while the writer commits."))
        agent_cell(kc, "why is the sqlite writer locked?")
        kc.stop_channels()
        km.shutdown_kernel(now=False)  # a clean shutdown runs the exit handlers
    except BaseException:
        stop_kernel(km, kc)
        raise
    assert q_values(vault_dir)[WAL.casefold()] > 0.5


def test_reflection_fires_at_the_threshold_and_writes_no_twin(
    small_repo: Path, server: ScriptedModelServer, vault_dir: Path
) -> None:
    km, kc = open_kernel(small_repo, server, vault_dir, similarity=0.9, threshold=4)
    title = "Planning with TodoWrite keeps long sessions on track"
    insight = Reply(
        text=json.dumps(
            {
                "title": title,
                "content": "A written plan kept the agent from repeating steps across two compactions.",
            }
        )
    )
    todo = ("TodoWrite", {"todos": [{"content": "plan", "status": "pending"}]})
    try:
        server.script(Reply(tool_calls=[todo]), Reply(tool_calls=[todo]), insight, Reply(text="Planned."))
        cell = agent_cell(kc, "plan the work")
        assert f"[reflection saved: {title}]" in cell.stdout
        assert "long-term memory" in system_of(server.requests[2].body)
        inbox = sorted(path.name for path in (vault_dir / "inbox").glob("*.md"))
        assert inbox == [f"{title}.md"]

        server.script(Reply(tool_calls=[todo]), insight, Reply(text="Planned again."))
        cell = agent_cell(kc, "plan it again")  # 1 + 3 points: the second firing
        assert "reflection dropped" in cell.stdout and title in cell.stdout
        assert sorted(path.name for path in (vault_dir / "inbox").glob("*.md")) == inbox
        cost = run_cell(kc, "%aries cost")
        assert "cheap" in (cost.result or cost.stdout)
    finally:
        stop_kernel(km, kc)


def test_compaction_extracts_notes_and_keeps_the_warm_context(
    small_repo: Path, server: ScriptedModelServer, vault_dir: Path
) -> None:
    km, kc = open_kernel(small_repo, server, vault_dir, similarity=0.9)
    items = [
        {
            "title": "The loader reads settings from pyproject before setup.cfg",
            "content": "Seen in loader.py.",
            "type": "learning",
            "scope": "project",
        },
        {
            "title": "Monotonic clocks are the right base for timeouts",
            "content": "Wall clocks jump.",
            "type": "insight",
            "scope": "global",
        },
        {
            "title": "We keep the public API in the package init only",
            "content": "Decided with the user.",
            "type": "decision",
            "scope": "project",
        },
    ]
    try:
        server.script(
            Reply(text="The loader reads pyproject first."), Reply(text="Timeouts use monotonic time.")
        )
        agent_cell(kc, "how does the loader read settings?")
        agent_cell(kc, "and the timeouts?")
        server.script(
            Reply(text=json.dumps(items)),
            Reply(text="## Goal\nUnderstand the loader\n## Work done\nRead loader.py"),
        )
        compact = run_cell(kc, "%aries compact")
        assert compact.error is None, compact.error
        assert "saved before compaction" in compact.stdout
        extraction = server.requests[-2].body
        assert "durable" in system_of(extraction) and "how does the loader read settings?" in json.dumps(
            extraction
        )
        brain = small_repo / ".aries" / "memory" / "inbox"
        assert (brain / f"{items[0]['title']}.md").exists() and (brain / f"{items[2]['title']}.md").exists()
        assert (vault_dir / "inbox" / f"{items[1]['title']}.md").exists()

        server.script(Reply(text="Still here."))
        agent_cell(kc, "what next?")
        after = server.requests[-1].body
        assert system_of(after).startswith(WARM_OPEN) and "I am Aries, a careful coding agent." in system_of(
            after
        )
        history = json.dumps(after["messages"])
        assert (
            SUMMARY_HEADER.replace('"', '\\"') in history or "Summary of the earlier conversation" in history
        )
        assert all(item["title"] in history for item in items)  # the summary names the notes saved
    finally:
        stop_kernel(km, kc)


@pytest.mark.parametrize("vault_kind", ["fails to open", "missing"])
def test_the_agent_runs_without_a_usable_vault_and_says_why(
    small_repo: Path,
    server: ScriptedModelServer,
    tmp_path: Path,
    vault_kind: str,
    backend: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if vault_kind == "fails to open":
        blocker = tmp_path / "not-a-folder"
        blocker.write_text("a file where the vault folder should be")
        vault, reason = blocker / "vault", "the vault failed to open"
        if backend == "postgresql":
            # A team vault's index is on the server, so a folder that cannot be made does not stop it opening
            # (the folder is only its mirror); what fails there is the database side: a schema name it refuses.
            monkeypatch.setenv("ARIES_VAULT_SCHEMA", "Not-A-Schema")
    else:
        vault, reason = tmp_path / "no-vault-here", "the vault has no notes yet"
    km, kc = open_kernel(small_repo, server, vault)
    try:
        server.script(Reply(text="Answered without memory."))
        cell = agent_cell(kc, "why is sqlite locked?")
        assert "Answered without memory." in cell.stdout
        assert f"[Memory is off: {reason}" in cell.stdout
        assert WARM_OPEN not in system_of(server.requests[0].body)
        if vault_kind == "missing":  # (the Vault section of %aries status raises on a vault that cannot open)
            status = run_cell(kc, "%aries status")
            assert f"Memory: off, {reason}" in status.stdout + (status.result or "")
    finally:
        stop_kernel(km, kc)


def test_preflight_reaches_the_project_brain_in_the_kernel(
    small_repo: Path, server: ScriptedModelServer, vault_dir: Path
) -> None:
    write_note(
        small_repo / ".aries" / "memory" / "notes", CACHE, "cache.py uses sha256 of the file text as its key."
    )
    km, kc = open_kernel(small_repo, server, vault_dir, similarity=0.1)
    try:
        server.script(Reply(text="It keys entries by content hash."))
        cell = agent_cell(kc, "how does the cache decide its keys?")
        assert f"[[{CACHE}]] (project)" in system_of(server.requests[0].body)
        assert f"[memory echoed: {CACHE}]" in cell.stdout
    finally:
        stop_kernel(km, kc)
