"""MCP servers as tools of ``%aries``: the servers of ``c.AriesAgent.mcp_servers``, started on first use.

:class:`McpServers` owns one event loop in a thread of its own (the MCP client SDK is async) and one client
session per server, each held open by a task on that loop until :meth:`McpServers.close`. A server's tools
become :class:`~aries_kernel.agent.tools.Tool` objects named ``mcp__<server>__<tool>`` with the server's own
JSON schema; they are gated (names in the lean prompt, schemas once widened), their effect is ``command`` so the
permission mode weighs them as it weighs Bash, and the loop redacts and truncates their output like every
tool's. A server that fails to start, or dies, is reported once and its tools leave the set; the agent goes
on without it.

:class:`McpHook` plugs the servers into the loop: before each turn it starts what is configured and not yet
started, and puts the live servers' tools in the phase.
"""

from __future__ import annotations

import asyncio
import atexit
import re
import shlex
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Iterable
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aries_kernel.agent import HookFactory
from aries_kernel.agent.events import Event, Notice
from aries_kernel.agent.loop import Agent, AgentHook
from aries_kernel.agent.tools import Tool, ToolEnv, ToolError
from aries_kernel.extras import require

__all__ = ["AGENT_HOOK", "McpHook", "McpServers", "tool_name"]

_PREFIX = "mcp"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_CLOSE_SECONDS = 10.0


def tool_name(server: str, tool: str) -> str:
    """The agent's name of ``tool`` of ``server`` (characters providers refuse in a name become ``_``)."""
    return f"{_PREFIX}__{_UNSAFE.sub('_', server)}__{_UNSAFE.sub('_', tool)}"[:64]


@dataclass
class _Server:
    name: str
    spec: str | dict[str, Any]
    client: Any = None
    tools: list[Any] = field(default_factory=list)
    error: str | None = None  # why it is not running (failed to start, or died)
    reported: bool = False
    closing: asyncio.Event | None = None
    holder: Any = None  # the concurrent future of the task that holds the session open


class McpServers:
    """The configured MCP servers of one agent, on a dedicated event loop thread."""

    def __init__(self, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self._servers: dict[str, _Server] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------------------------------ lifecycle

    def start(self, config: dict[str, str | dict[str, Any]]) -> None:
        """Start every server of ``config`` not started yet (a failure is kept, see :meth:`problems`)."""
        with self._lock:
            for name, spec in config.items():
                known = self._servers.get(name)
                if known is not None and known.spec == spec:
                    continue
                if known is not None:  # its settings changed: the old session goes, the new one starts
                    self._stop(known)
                server = self._servers[name] = _Server(name, spec)
                self._connect(server)

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="aries-mcp-loop", daemon=True)
            thread.start()
            self._loop, self._thread = loop, thread
        return self._loop

    def _connect(self, server: _Server) -> None:
        loop = self._ensure_loop()

        async def hold() -> None:
            server.closing = asyncio.Event()
            try:
                async with _client(server.spec, self.timeout) as client:
                    server.tools = list((await client.list_tools()).tools)
                    server.client = client
                    ready.set_result(None)
                    await server.closing.wait()
            except Exception as exc:  # a server that cannot start or dies is reported, never raised
                server.error = server.error or f"{type(exc).__name__}: {_message(exc)}"
            finally:
                server.client = None
                if not ready.done():
                    ready.set_result(None)

        async def begin() -> asyncio.Future[None]:
            return loop.create_future()

        ready = asyncio.run_coroutine_threadsafe(begin(), loop).result()
        server.holder = asyncio.run_coroutine_threadsafe(hold(), loop)
        try:
            asyncio.run_coroutine_threadsafe(_wait(ready), loop).result(self.timeout)
        except FutureTimeout:
            server.error = f"it did not start within {self.timeout:g} s (c.AriesAgent.mcp_timeout)"
            self._stop(server)
        if server.error is None and server.client is None:
            server.error = "it stopped while starting"

    def _stop(self, server: _Server) -> None:
        """End ``server``'s session and wait for its task (its process is stopped by the SDK on the way out)."""
        loop = self._loop
        if loop is None or server.holder is None:
            return
        if server.closing is not None:
            loop.call_soon_threadsafe(server.closing.set)
        try:
            server.holder.result(_CLOSE_SECONDS)
        except FutureTimeout:
            server.holder.cancel()
        except Exception:  # the holder reports its own failures in server.error
            pass
        server.client = None

    def close(self) -> None:
        """Stop every server, then the loop and its thread."""
        with self._lock:
            for server in self._servers.values():
                self._stop(server)
            self._servers.clear()
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is not None and thread is not None:
            asyncio.run_coroutine_threadsafe(loop.shutdown_asyncgens(), loop).result(_CLOSE_SECONDS)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(_CLOSE_SECONDS)
            loop.close()

    # ---------------------------------------------------------------------------------------------- tools

    def problems(self) -> list[str]:
        """Servers that failed or died since the last call, each said once."""
        said = []
        for server in self._servers.values():
            if server.error is not None and not server.reported:
                server.reported = True
                said.append(
                    f"MCP server {server.name!r} is not available: {server.error}. The agent goes on without its "
                    "tools."
                )
        return said

    def tools(self) -> dict[str, Tool]:
        """The tools of the servers that are running, by namespaced name."""
        found: dict[str, Tool] = {}
        for server in self._servers.values():
            if server.client is None or server.error is not None:
                continue
            for item in server.tools:
                name = tool_name(server.name, item.name)
                schema = dict(item.input_schema or {})
                schema.setdefault("type", "object")
                schema.setdefault("properties", {})
                schema.setdefault("required", [])
                description = f"[MCP server {server.name}] {item.description or item.name}"
                caller = self._caller(server.name, item.name)
                found[name] = Tool(name, description, schema, caller, effect="command")  # asked, like Bash
        return found

    def _caller(self, server_name: str, tool: str) -> Callable[..., str]:
        def call(env: ToolEnv, **arguments: Any) -> str:
            return self.call(server_name, tool, arguments)

        return call

    def call(self, server_name: str, tool: str, arguments: dict[str, Any]) -> str:
        """Call ``tool`` of a running server; its text, or :class:`ToolError` (its error, or it died)."""
        server = self._servers.get(server_name)
        if server is None or server.client is None or self._loop is None:
            why = server.error if server is not None and server.error else "it is not running"
            raise ToolError(f"MCP server {server_name!r} is not available: {why}.")
        future = asyncio.run_coroutine_threadsafe(server.client.call_tool(tool, arguments), self._loop)
        try:
            result = future.result(self.timeout)
        except FutureTimeout:
            future.cancel()
            raise ToolError(
                f"MCP server {server_name!r} did not answer {tool} within {self.timeout:g} s "
                "(c.AriesAgent.mcp_timeout)."
            ) from None
        except Exception as exc:  # the connection broke: the server died or hung up
            server.error = f"it stopped answering ({type(exc).__name__}: {_message(exc)})"
            self._stop(server)
            raise ToolError(
                f"MCP server {server_name!r} is gone: {server.error}. Its tools are removed; go on without them."
            ) from None
        text = _result_text(result)
        if result.is_error:
            raise ToolError(text or "the tool reported an error")
        return text


def _message(exc: BaseException) -> str:
    """The message of ``exc``, looking inside the exception groups anyio raises."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return str(exc) or type(exc).__name__


async def _wait(future: asyncio.Future[None]) -> None:
    await future


@asynccontextmanager
async def _client(spec: str | dict[str, Any], timeout: float) -> AsyncIterator[Any]:
    """An open mcp ``Client`` for a server spec: a command line, a URL, or a dict of command/args/env/cwd or
    url/headers."""
    require("mcp", "An MCP server of c.AriesAgent.mcp_servers")
    from mcp import Client, StdioServerParameters

    if isinstance(spec, str):
        spec = {"url": spec} if spec.startswith(("http://", "https://")) else {"command": spec}
    async with AsyncExitStack() as stack:
        if "url" in spec:
            target: Any = str(spec["url"])
            headers = {str(k): str(v) for k, v in (spec.get("headers") or {}).items()}
            if headers:
                from mcp.client.streamable_http import streamable_http_client
                from mcp.shared._httpx_utils import create_mcp_http_client

                http = await stack.enter_async_context(create_mcp_http_client(headers=headers))
                target = streamable_http_client(target, http_client=http)
        else:
            command = spec.get("command")
            if not command:
                raise ValueError(f"an MCP server needs a command or a url, not {spec!r}")
            words = shlex.split(command) if isinstance(command, str) else [str(word) for word in command]
            target = StdioServerParameters(
                command=words[0],
                args=[*words[1:], *(str(arg) for arg in spec.get("args", ()))],
                env={str(k): str(v) for k, v in (spec.get("env") or {}).items()} or None,
                cwd=spec.get("cwd"),
            )
        yield await stack.enter_async_context(Client(target, read_timeout_seconds=timeout))


def _result_text(result: Any) -> str:
    """A tool result as text: its text blocks, other blocks named, structured content when there is no text."""
    import json

    parts = []
    for block in result.content:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource" and getattr(block.resource, "text", None) is not None:
            parts.append(block.resource.text)
        else:
            parts.append(f"[{kind or 'content'} block: {getattr(block, 'mime_type', '') or 'not text'}]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, indent=1, default=str))
    return "\n".join(parts)


class McpHook(AgentHook):
    """Starts the agent's MCP servers on first use and keeps their tools in its phase."""

    def __init__(self, servers: McpServers) -> None:
        self.servers = servers

    @classmethod
    def for_agent(cls, agent: Agent) -> McpHook:
        """The hook of ``agent``; its servers are stopped at exit if nobody closed them before."""
        hook = cls(McpServers(agent.settings.mcp_timeout))
        atexit.register(_close_if_alive, weakref.ref(hook.servers))
        return hook

    def _refresh(self, agent: Agent, turn: int) -> Iterable[Event]:
        config = agent.settings.mcp_servers
        if config:
            self.servers.timeout = agent.settings.mcp_timeout
            self.servers.start(dict(config))
        agent.phase.external = self.servers.tools()
        return [Notice(problem, turn=turn) for problem in self.servers.problems()]

    def before_turn(self, agent: Agent, turn: int) -> Iterable[Event]:
        """Start what is configured and not running yet; the live servers' tools join the phase."""
        return self._refresh(agent, turn)

    def after_turn(self, agent: Agent, turn: int, tools_used: int) -> Iterable[Event]:
        """A server that died during the turn is reported, and its tools leave the set."""
        return self._refresh(agent, turn)

    def status(self, agent: Agent) -> str | None:
        """The MCP line of ``%aries status``."""
        if not agent.settings.mcp_servers:
            return None
        names = sorted({name.split("__")[1] for name in self.servers.tools()})
        return f"MCP servers running: {', '.join(names) or 'none'} ({len(self.servers.tools())} tools)"

    def close(self) -> None:
        """Stop the servers (and the loop thread)."""
        self.servers.close()


def _close_if_alive(ref: weakref.ref[McpServers]) -> None:
    servers = ref()
    if servers is not None:
        servers.close()


AGENT_HOOK: HookFactory = McpHook.for_agent  # every agent built by agent_for() can use MCP servers
