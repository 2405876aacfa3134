"""What the extension wires between the pillars, in a real kernel: explore's sub-questions on the cheap slot."""

from __future__ import annotations

from pathlib import Path

from tests.kernel_harness import run_cell, start_kernel, stop_kernel
from tests.loopback import Reply, ScriptedModelServer

NOTES = """
vault.add("Reindex parses only changed files", "Content hashes decide what to parse again.")
vault.add("Kernel start stays fast", "Heavy imports wait until after the first reply.")
vault.add("Widgets render the event stream", "The panel and the text renderer read the same events.")
"""


def test_explore_asks_the_cheap_slot_for_sub_questions(small_repo: Path, tmp_path: Path) -> None:
    with ScriptedModelServer() as server:
        env = {
            "ANTHROPIC_BASE_URL": server.anthropic_url,
            "ANTHROPIC_API_KEY": "k",
            "ARIES_VAULT": str(tmp_path),
        }
        km, kc = start_kernel(small_repo, env=env)
        try:
            assert run_cell(kc, NOTES).error is None
            server.script(Reply(text="1. Why does the kernel start fast?\n2. How do widgets show events?"))
            out = run_cell(
                kc, "frame = vault.explore('how does aries stay quick?', depth=2)\nsorted(set(frame['via']))"
            )
            assert out.error is None, out.error
            # Each seed keeps the (sub-)question that ranked it best: one of the model's must have.
            assert any(sub in (out.result or "") for sub in ("kernel start fast?", "widgets show events?"))
            assert len(server.requests) == 1
            assert "how does aries stay quick?" in str(server.requests[0].body["messages"])
        finally:
            stop_kernel(km, kc)


def test_explore_without_a_key_stays_deterministic(small_repo: Path, tmp_path: Path) -> None:
    km, kc = start_kernel(small_repo, env={"ANTHROPIC_API_KEY": "", "ARIES_VAULT": str(tmp_path)})
    try:
        assert run_cell(kc, NOTES).error is None
        code = "[list(vault.explore('how does aries stay quick?')['title']) for _ in range(2)]"
        out = run_cell(kc, code)
        assert out.error is None, out.error
        first, second = eval(out.result or "[[], None]")  # two lists of titles printed by the kernel
        assert first == second and first
    finally:
        stop_kernel(km, kc)


def test_opening_the_vault_leaves_the_users_logging_alone(small_repo: Path, tmp_path: Path) -> None:
    km, kc = start_kernel(small_repo, env={"ARIES_VAULT": str(tmp_path)})
    try:
        code = (
            "import logging\nbefore = (logging.getLogger().level, len(logging.getLogger().handlers))\n"
            "vault.add('Logging stays quiet', 'wordllama configures logging on import.')\n"
            "vault.query_ranked('logging')\n"
            "before == (logging.getLogger().level, len(logging.getLogger().handlers))"
        )
        out = run_cell(kc, code)
        assert out.error is None, out.error
        assert out.result == "True"
    finally:
        stop_kernel(km, kc)
