"""``aries-kernel mcp`` driven by the mcp SDK's own client over stdio: the codebase and vault tools on the
fixture repository, argument errors, the vault session credited once, and the ``repl`` tool attached to a
real Aries kernel (shared variables both ways, the Repl guard refusing a write outside the root)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from aries_kernel.vault import open_vault
from tests.kernel_harness import run_cell


@asynccontextmanager
async def _client(root: Path, vault: Path, *options: str) -> AsyncIterator[Client]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "aries_kernel", "mcp", "--root", str(root), *options],
        env={"ARIES_VAULT": str(vault), "ARIES_INDEX_KEY": os.environ["ARIES_INDEX_KEY"]},  # as the kernel's
    )
    async with Client(params, read_timeout_seconds=120) as client:
        yield client


def _text(result: Any) -> str:
    return "\n".join(block.text for block in result.content)


def _serve(root: Path, vault: Path, *options: str, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """The results of ``calls`` made in one client session, and the tool list first."""

    async def go() -> list[Any]:
        async with _client(root, vault, *options) as client:
            results: list[Any] = [await client.list_tools()]
            for name, arguments in calls:
                results.append(await client.call_tool(name, arguments))
            return results

    return anyio.run(go)


def test_codebase_and_vault_tools_over_stdio(small_repo: Path, tmp_path: Path) -> None:
    vault_dir = tmp_path / "vault"
    vault = open_vault(None, path=vault_dir)
    vault.add("The engine greets users by name", "Engine.greet formats the user's name.", type="insight")
    listed, top, symbol, similar, ranked, bad_type, missing, unknown_file = _serve(
        small_repo,
        vault_dir,
        calls=[
            ("top_files", {"limit": 3}),
            ("find_symbol", {"name": "Engine.greet"}),
            ("find_similar_patterns", {"pattern": "greet_user", "limit": 5}),
            ("vault_query_ranked", {"query": "engine greets"}),
            ("top_files", {"limit": "many"}),
            ("find_symbol", {}),
            ("dependents", {"file": "no/such.py"}),
        ],
    )
    names = {tool.name for tool in listed.tools}
    assert {
        "search",
        "top_files",
        "hits",
        "communities",
        "find_symbol",
        "dependents",
        "dependencies",
    } <= names
    assert {"get_context", "detect_duplication", "is_consistent_with", "suggest_location"} <= names
    assert {"vault_query_ranked", "vault_read", "vault_explore", "vault_warmth", "vault_add"} <= names
    assert "repl" not in names  # no kernel attached
    schema = next(tool for tool in listed.tools if tool.name == "top_files").input_schema
    assert schema["properties"]["limit"]["type"] == "integer"

    assert not top.is_error
    rows = top.structured_content["rows"]
    assert len(rows) == 3 and top.structured_content["columns"][0] == "file"
    assert rows[0]["pagerank"] >= rows[1]["pagerank"] >= rows[2]["pagerank"]
    assert rows[0]["file"] in _text(top)

    assert not symbol.is_error
    (found,) = symbol.structured_content["rows"]
    assert (found["file"], found["parent"], found["kind"]) == ("app/core.py", "Engine", "method")

    assert not similar.is_error
    assert "greet" in [row["name"] for row in similar.structured_content["rows"]]

    assert not ranked.is_error
    assert ranked.structured_content["rows"][0]["title"] == "The engine greets users by name"

    assert bad_type.is_error and "limit" in _text(bad_type) and "integer" in _text(bad_type)
    assert missing.is_error and "name" in _text(missing)
    assert unknown_file.is_error and "no/such.py is not an indexed file" in _text(unknown_file)


def test_a_client_session_credits_the_vault_once(small_repo: Path, tmp_path: Path) -> None:
    vault_dir = tmp_path / "vault"
    title = "The engine greets users by name"
    open_vault(None, path=vault_dir).add(title, "Engine.greet formats the user's name.")

    def q_value() -> float:
        frame = open_vault(None, path=vault_dir).query_ranked("engine greets", record=False)
        return float(frame.set_index("title").loc[title, "q_value"])

    before = q_value()
    _, ranked, note = _serve(
        small_repo,
        vault_dir,
        calls=[("vault_query_ranked", {"query": "engine greets"}), ("vault_read", {"title": title})],
    )
    assert not ranked.is_error and not note.is_error and "Engine.greet" in _text(note)
    after = q_value()
    assert after > before  # exposed and used in the session, rewarded when the client went away
    _serve(small_repo, vault_dir, calls=[])  # a session that touched nothing credits nothing
    assert q_value() == after


@pytest.mark.kernel
def test_repl_shares_the_kernel_namespace_under_the_guard(
    aries_kernel: tuple[Any, Any], small_repo: Path, tmp_path: Path
) -> None:
    km, kc = aries_kernel
    assert run_cell(kc, "from_cell = 'made in a cell'").status == "ok"
    outside = tmp_path / "outside.txt"
    inside = small_repo / "inside.txt"
    listed, made, seen, escape, edit, noted = _serve(
        small_repo,
        tmp_path / "vault",
        "--kernel",
        km.connection_file,
        calls=[
            ("repl", {"code": "from_mcp = 6 * 7\nprint('set')"}),
            ("repl", {"code": "from_cell.upper()"}),
            ("repl", {"code": f"open({str(outside)!r}, 'w').write('x')"}),
            ("repl", {"code": f"open({str(inside)!r}, 'w').write('x')"}),
            ("repl", {"code": "vault.add('Noted by an MCP client', 'Written through the repl tool.');"}),
        ],
    )
    assert "repl" in {tool.name for tool in listed.tools}
    assert not made.is_error and _text(made) == "set"
    read = run_cell(kc, "from_mcp")
    assert read.result == "42"  # the client's variable, read by a cell
    # The notebook's next cell is told what the outside agent ran (its own output went to the agent's request).
    note = "".join(str(d.get("text/plain", "")) for d in read.displays)
    assert "[Aries] Since your last cell, outside agents ran 5 step(s)" in note
    assert "from_mcp = 6 * 7 ..." in note and "from_cell.upper()" in note and "refused:" in note
    assert _text(seen) == "MADE IN A CELL"  # the cell's variable, seen by the client

    assert "PermissionError" in _text(escape) and "outside the project root" in _text(escape)
    assert not outside.exists()
    # The kernel's mode (default) asks before edits, and nobody can be asked from outside: refused, with the way.
    assert "PermissionError" in _text(edit) and "--mode acceptEdits" in _text(edit)
    assert not inside.exists()
    runs = run_cell(kc, "from aries_kernel.agent.outside import RUNS; [run['code'] for run in RUNS]")
    assert "from_mcp = 6 * 7" in runs.result
    assert not runs.displays  # told once
    status = run_cell(kc, "%aries status")
    shown = status.stdout + str(status.result) + "".join(str(d.get("text/plain", "")) for d in status.displays)
    assert "5 step(s) from MCP clients" in shown and "2 effect(s) refused" in shown
    # The note the client's code wrote is recorded as the MCP client's, not the user's.
    assert not noted.is_error
    origins = run_cell(kc, "list(vault.history('Noted by an MCP client')['origin'])")
    assert origins.result == "['mcp']"


@contextmanager
def http_server(root: Path, vault: Path, token: str) -> Iterator[str]:
    """``aries-kernel mcp --http`` on ``root``; yields its URL, stops it with SIGTERM (it must exit cleanly)."""
    command = [sys.executable, "-m", "aries_kernel", "mcp", "--root", str(root), "--http", "--token", token]
    server = subprocess.Popen(
        command, stderr=subprocess.PIPE, text=True, env={**os.environ, "ARIES_VAULT": str(vault)}
    )
    assert server.stderr is not None
    try:
        line = server.stderr.readline()  # the address line, printed once uvicorn listens
        url = line.split()[2]
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
        yield url
    finally:
        server.terminate()
        server.wait()
        server.stderr.close()
    assert server.returncode == 0  # SIGTERM unwinds: the vault session is closed on the way out


def test_streamable_http_on_loopback_needs_the_token(small_repo: Path, tmp_path: Path) -> None:
    import httpx
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    with http_server(small_repo, tmp_path / "vault", "s3cret-token") as url:
        with httpx.Client() as plain:
            refused = plain.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert refused.status_code == 401

        async def found() -> list[str]:
            headers = {"Authorization": "Bearer s3cret-token"}
            async with create_mcp_http_client(headers=headers) as http:
                async with Client(streamable_http_client(url, http_client=http)) as client:
                    result = await client.call_tool("find_symbol", {"name": "Engine"})
                    assert not result.is_error
                    return [row["file"] for row in result.structured_content["rows"]]

        assert anyio.run(found) == ["app/core.py"]
