"""A tiny stdio MCP server for the tests of MCP tools in ``%aries``: ``python -m tests.mcp_fixture_server``."""

from __future__ import annotations

import os

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("fixture", log_level="WARNING")


@server.tool(description="Add two integers.")
def add(a: int, b: int) -> str:
    return f"{a} + {b} = {a + b}"


@server.tool(description="The server's process id.")
def pid() -> str:
    return str(os.getpid())


@server.tool(description="Text with a credential in it (redaction test).")
def leaky() -> str:
    return "token sk-ant-" + "a1" * 20 + " and some text " + "x" * 30_000


@server.tool(description="Always fails.")
def broken(reason: str = "") -> str:
    raise ToolError(f"broken on purpose {reason}".strip())


if __name__ == "__main__":
    server.run("stdio")
