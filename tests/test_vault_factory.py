"""One way to open the vault: every path (the ``vault`` name, ``%aries vault`` and status, the agent's memory and
tools, the MCP server) gets the same object from :func:`aries_kernel.pillars.shared_vault`, decomposer included.

The kernel tests open the vault first through each path in turn (``%aries status``, a vault subcommand, an agent
run against the loopback server), then go through the others: ``vault.decompose`` stays set, and ``explore``
asks the cheap slot for sub-questions through it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from aries_kernel.magics.vault import get_vault
from IPython.core.interactiveshell import InteractiveShell

from aries_kernel.agent.memory import MemoryHook
from aries_kernel.agent.tools import AriesAgent, ToolEnv
from aries_kernel.context import AriesContext, set_context
from aries_kernel.mcp_server import ReplBody
from aries_kernel.pillars import shared_vault
from tests.kernel_harness import run_cell, start_kernel, stop_kernel
from tests.loopback import Reply, ScriptedModelServer


@pytest.fixture
def context(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[AriesContext]:
    monkeypatch.setenv("ARIES_VAULT", str(tmp_path / "vault"))
    shell = InteractiveShell.instance()
    shell.config.AriesVault.embedder = "hash"
    context = AriesContext(shell, root=tmp_path / "repo")
    set_context(shell, context)
    yield context


def test_every_path_returns_the_one_vault_with_its_decomposer(context: AriesContext) -> None:
    agent = SimpleNamespace(context=context, client=lambda slot: None, ensure_session=lambda: None)
    opened = [
        MemoryHook.for_agent(agent).feedback.vault,  # type: ignore[arg-type]
        ToolEnv(context.root, AriesAgent(), context=context).vault(),
        get_vault(context),
        shared_vault(context),
    ]
    assert all(vault is opened[0] for vault in opened)
    assert opened[0].decompose is not None
    assert [store.source for store in opened[0].stores] == ["global", "project"]
    assert opened[0].stores[0].root == context.root.parent / "vault"


def test_the_mcp_server_opens_its_vault_the_same_way(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARIES_VAULT", str(tmp_path / "vault"))
    (tmp_path / "repo").mkdir()
    body = ReplBody(tmp_path / "repo")
    try:
        vault = body.vault()
        assert vault is body.vault() and vault.decompose is not None
        assert [store.source for store in vault.stores] == ["global", "project"]
        assert vault.stores[0].root == tmp_path / "vault"
    finally:
        body.close()
        body.codebase.wait_ready()


# -- in a real kernel ---------------------------------------------------------------------------------------

SETUP = 'get_ipython().config.AriesVault.embedder = "hash"'
AGENT_RUN = "%aries --yes say done"
OPENERS = {
    "status": "%aries status",
    "vault subcommand": "%aries vault -n 3 retry",
    "agent run": AGENT_RUN,
}
BUILT = (
    "from aries_kernel.context import get_context\n"
    "from aries_kernel.magics.vault import get_vault\n"
    "built = get_context(get_ipython()).built('vault')\n"
    "(built is not None, built is get_vault(get_context(get_ipython())), built.decompose is not None)"
)


@pytest.mark.kernel
@pytest.mark.parametrize("first", list(OPENERS))
def test_decompose_stays_set_whichever_path_opens_the_vault_first(
    first: str, small_repo: Path, tmp_path: Path
) -> None:
    with ScriptedModelServer() as server:
        env = server.kernel_env(ARIES_VAULT=str(tmp_path / "vault"))
        km, kc = start_kernel(small_repo, env=env)
        try:
            assert run_cell(kc, SETUP).error is None
            for line in [OPENERS[first], *(code for name, code in OPENERS.items() if name != first)]:
                if line == AGENT_RUN:
                    server.script(Reply(text="done."))
                cell = run_cell(kc, line, timeout=180)
                assert cell.error is None, (line, cell.error)
                assert run_cell(kc, BUILT).result == "(True, True, True)", line
            assert run_cell(kc, "vault.stores is built.stores").result == "True"  # the `vault` name too

            add = "vault.add('Retries back off', 'Exponential backoff with jitter on 429.')"
            assert run_cell(kc, add).error is None
            server.reset_counts()
            server.script(Reply(text="1. How do retries back off?"))
            out = run_cell(kc, "len(vault.explore('why do retries wait?', depth=2))")
            assert out.error is None, out.error
            # The decomposer is the cheap slot's: explore's one model call carries the question.
            assert len(server.requests) == 1
            assert "why do retries wait?" in str(server.requests[-1].body["messages"])
        finally:
            stop_kernel(km, kc)
