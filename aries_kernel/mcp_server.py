"""``aries-kernel mcp``: the REPL body served to any MCP client (Claude Code, Codex, opencode, ...).

The server holds its own :class:`~aries_kernel.codebase.Codebase` of the root (warm from
``<root>/.aries/index.db``) and the vault of the root; every operation is a tool with typed inputs, answering
with a compact table as text and the same rows as structured content. The vault learns as under ``%aries``:
the queries of one server run are the exposures of one vault session, a note the client reads counts as used,
and the session is credited once, when the client disconnects (stdio) or the server stops (HTTP).

With ``--kernel <id or connection file>`` the server is attached to a running Aries kernel and adds a ``repl``
tool: the client's Python runs in that kernel's namespace under the Repl guard and permission mode of
``%aries`` (:mod:`aries_kernel.agent.outside`), so the terminal agent and the human in the notebook share
variables.

Transports: stdio (the default), or streamable HTTP on loopback (``--http``), where every request must carry
``Authorization: Bearer <token>`` (``--token``, else ``$ARIES_MCP_TOKEN``, else one generated and printed).
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from aries_kernel.agent.repl import format_value
from aries_kernel.paths import aries_setting
from aries_kernel.redact import redact

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from aries_kernel.attach import KernelLink

__all__ = ["ReplBody", "build_server", "serve"]

_STRUCTURED_ROWS = 200  # rows of a table sent as structured content; the text shows fewer (format_value)

Roles = Annotated[
    str,
    Field(
        description='Which files: "source" (default), "all", or roles among test, example, fixture, generated.'
    ),
]
Limit = Annotated[int, Field(ge=1, le=1000, description="Most rows to return.")]
FilePath = Annotated[
    str, Field(min_length=1, description="A file path relative to the root, or a unique suffix.")
]
Depth = Annotated[int, Field(ge=1, le=10, description="How many dependency steps to follow.")]
Query = Annotated[str, Field(min_length=1, description="What to look for.")]
Snippet = Annotated[str, Field(min_length=1, description="Source code.")]


class ReplBody:
    """The codebase, the vault (one learning session) and, when attached, the kernel a server serves.

    Calls are serialized: the SDK runs each tool in a worker thread, and the vault session records one
    client's queries in order.
    """

    def __init__(self, root: str | os.PathLike[str], *, kernel: KernelLink | None = None) -> None:
        from aries_kernel.codebase import Codebase

        self.root = Path(root).expanduser().resolve()
        self.codebase = Codebase(self.root, root_reason="given to aries-kernel mcp")
        self.codebase.index_in_background()
        self.kernel = kernel
        self.lock = threading.Lock()
        self._vault: Any = None

    def vault(self) -> Any:
        """The vault of the root, opened on first use with its learning session begun."""
        if self._vault is None:
            from aries_kernel.context import AriesContext
            from aries_kernel.pillars import shared_vault

            # The kernel's factory: the same folders, URL, schema and decomposer (no shell, so no Jupyter config).
            self._vault = shared_vault(AriesContext(None, root=self.root))
            self._vault.begin_session()
        return self._vault

    def close(self) -> Any:
        """Credit the vault session once (returns the credits, or None) and let go of the kernel."""
        credited = self._vault.end_session() if self._vault is not None else None
        if self.kernel is not None:
            self.kernel.close()
        return credited


def _result(value: Any, empty: str) -> CallToolResult:
    """A DataFrame as a compact text table plus structured rows; anything else as text."""
    import pandas as pd

    if isinstance(value, pd.DataFrame):
        text = format_value(value) if len(value) else empty
        rows = json.loads(value.head(_STRUCTURED_ROWS).to_json(orient="records", default_handler=str))
        structured: dict[str, Any] = {"columns": [str(c) for c in value.columns], "rows": rows}
        structured["total_rows"] = len(value)
    else:
        text = str(value) if value is not None and str(value) else empty
        structured = {"text": text}
    structured = json.loads(redact(json.dumps(structured)))
    return CallToolResult(
        content=[TextContent(type="text", text=redact(text))], structured_content=structured
    )


def _run(body: ReplBody, func: Callable[[], Any], empty: str) -> CallToolResult:
    """Call ``func`` under the body's lock; an expected failure becomes a tool error the client can read."""
    from mcp.server.mcpserver.exceptions import ToolError

    from aries_kernel.codebase import CodebaseError
    from aries_kernel.rootfs import RootPathError

    try:
        with body.lock:
            value = func()
    except (CodebaseError, KeyError, ValueError, RootPathError, TimeoutError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        raise ToolError(f"{type(exc).__name__}: {message}") from exc
    return _result(value, empty)


def build_server(body: ReplBody, *, name: str = "aries") -> MCPServer:
    """The MCP server of ``body``: codebase and vault tools, and ``repl`` when a kernel is attached."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer(
        name,
        instructions=(
            f"The code graph and learning memory of the repository at {body.root} (aries-kernel). Rankings "
            "list source files unless roles='all'. Tables come as text and as structured rows."
            + (" `repl` runs Python in the user's live Aries kernel." if body.kernel is not None else "")
        ),
        log_level="WARNING",
    )
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    cb = body.codebase

    def tool(description: str, annotations: ToolAnnotations | None = read_only) -> Callable[..., Any]:
        return server.tool(description=description, annotations=annotations)

    # ------------------------------------------------------------------------------------------- code graph

    @tool("Ranked search over definitions and file content: file, role, line, kind, name, snippet, score.")
    def search(query: Query, limit: Limit = 20, roles: Roles = "source") -> CallToolResult:
        return _run(body, lambda: cb.search(query, limit=limit, roles=roles), f"No match for {query!r}.")

    @tool("Files by PageRank over the dependency graph: file, role, pagerank, degrees, symbols, loc.")
    def top_files(limit: Limit = 20, roles: Roles = "source") -> CallToolResult:
        return _run(body, lambda: cb.top_files(limit, roles=roles), "The graph has no files.")

    @tool("Hub and authority score per file (HITS): file, role, hub, authority, hits_role, score.")
    def hits(limit: Limit = 20, roles: Roles = "source") -> CallToolResult:
        return _run(body, lambda: cb.hits(limit, roles=roles), "The graph has no files.")

    @tool(
        "Module boundaries from the dependency structure: one row per file with its role, community and label "
        "(source files by default; their communities come first)."
    )
    def communities(roles: Roles = "source") -> CallToolResult:
        return _run(body, lambda: cb.communities(roles=roles), "The graph has no communities.")

    @tool(
        "Where a function, class or variable is defined (Class.method allowed): name, kind, file, line, ..."
    )
    def find_symbol(
        name: Annotated[str, Field(min_length=1, description="The symbol's name.")],
    ) -> CallToolResult:
        return _run(body, lambda: cb.find_symbol(name), f"No definition of {name!r}.")

    @tool("Files that import or reference a file (reverse dependencies): file, distance, kinds, weight, via.")
    def dependents(file: FilePath, depth: Depth = 1) -> CallToolResult:
        return _run(body, lambda: cb.show_dependents(file, depth), f"Nothing depends on {file}.")

    @tool("Files a file imports or references (forward dependencies): file, distance, kinds, weight, via.")
    def dependencies(file: FilePath, depth: Depth = 1) -> CallToolResult:
        return _run(body, lambda: cb.show_dependencies(file, depth), f"{file} depends on no indexed file.")

    @tool("Numbered source of a file: around the given lines (window lines each side), or all of it.")
    def get_context(
        file: FilePath,
        lines: Annotated[list[int] | None, Field(description="Line numbers to show; none: the file.")] = None,
        window: Annotated[int, Field(ge=0, le=200, description="Lines each side.")] = 5,
    ) -> CallToolResult:
        return _run(body, lambda: cb.get_context(file, lines, window), f"{file} is empty.")

    # -------------------------------------------------------------------------------------------- judgment

    @tool(
        'Symbols like a pattern: mode "name" (identifier tokens), "signature" ("def load_*", "class *Error") '
        'or "shape" (pattern is a code snippet; AST-shape similarity).'
    )
    def find_similar_patterns(
        pattern: Annotated[str, Field(min_length=1, description="A name, a signature filter or a snippet.")],
        limit: Limit = 10,
        mode: Literal["name", "signature", "shape"] = "name",
    ) -> CallToolResult:
        return _run(
            body, lambda: cb.find_similar_patterns(pattern, limit=limit, mode=mode), "No similar symbol."
        )

    @tool("Repository definitions that duplicate a snippet's (exact or structural), most similar first.")
    def detect_duplication(
        snippet: Snippet,
        threshold: Annotated[float, Field(gt=0, le=1, description="Least shape similarity.")] = 0.75,
    ) -> CallToolResult:
        return _run(body, lambda: cb.detect_duplication(snippet, threshold), "No duplicate found.")

    @tool(
        "How far a snippet departs from the style of reference files or a language (naming, structure, "
        "imports); findings with a deviation 0..1."
    )
    def is_consistent_with(
        snippet: Snippet,
        reference: Annotated[str, Field(min_length=1, description="A file path or a language name.")],
        criteria: Annotated[str, Field(description='"all", or naming, structure, imports.')] = "all",
    ) -> CallToolResult:
        return _run(
            body, lambda: cb.is_consistent_with(snippet, reference, criteria), "Consistent: no findings."
        )

    @tool("Communities where code described in words would fit, best first, with a rationale.")
    def suggest_location(
        description: Annotated[str, Field(min_length=1, description="What the new code does.")],
        limit: Limit = 3,
    ) -> CallToolResult:
        return _run(body, lambda: cb.suggest_location(description, limit), "No community fits.")

    @tool('The repository\'s recurring patterns for a topic: "error handling", "logging", "imports", ...')
    def find_convention(
        topic: Annotated[str, Field(min_length=1, description="The topic.")], limit: Limit = 5
    ) -> CallToolResult:
        return _run(body, lambda: cb.find_convention(topic, limit), f"No convention found for {topic!r}.")

    # ----------------------------------------------------------------------------------------------- vault

    @tool("Ranked search of persistent memory (semantic, BM25, PageRank, warmth; learned reranking).")
    def vault_query_ranked(query: Query, limit: Limit = 10) -> CallToolResult:
        return _run(
            body, lambda: body.vault().query_ranked(query, limit=limit), f"No note matches {query!r}."
        )

    @tool("Read one memory note by its title (reading it counts as using it, rewarded at the session's end).")
    def vault_read(
        title: Annotated[str, Field(min_length=1, description="The note's title.")],
    ) -> CallToolResult:
        def read() -> Any:
            vault = body.vault()
            text = vault.read(title)
            vault.mark_used(text.name, where=text.source)
            return text

        return _run(body, read, f"No note titled {title!r}.")

    @tool("Explore memory around a question, following links between notes (personalized PageRank).")
    def vault_explore(query: Query, limit: Limit = 15) -> CallToolResult:
        return _run(
            body, lambda: body.vault().explore(query, limit=limit), f"Nothing found around {query!r}."
        )

    @tool("The warmest notes: recently active and reinforced memory, optionally among a query's matches.")
    def vault_warmth(
        query: Annotated[str, Field(description="Optional focus.")] = "", limit: Limit = 10
    ) -> CallToolResult:
        return _run(
            body, lambda: body.vault().query_warmth(query or None, limit=limit), "The warmth field is empty."
        )

    @tool(
        "Save an insight to memory (the title is a prose claim); a near-duplicate updates its twin.",
        ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False),
    )
    def vault_add(
        title: Annotated[str, Field(min_length=1, description="The insight as a prose claim.")],
        content: Annotated[str, Field(min_length=1, description="Details.")],
        type: Annotated[str, Field(description="insight, decision, pattern, ...")] = "insight",
        project: Annotated[bool, Field(description="Save to the repository's project brain.")] = False,
    ) -> CallToolResult:
        from aries_kernel.vault.provenance import Provenance

        def add() -> Any:
            return body.vault().add(title, content, type=type, project=project, provenance=Provenance("mcp"))

        return _run(body, add, f"Saved {title!r}.")

    if body.kernel is not None:
        kernel = body.kernel

        @tool(
            "Run Python in the user's live Aries kernel: variables persist and are shared with the notebook; "
            "the REPL body (codebase, vault, rlm_call) is preloaded. File writes and processes pass the Repl "
            f"guard of permission mode {kernel.mode or 'of the kernel'}.",
            ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=True),
        )
        def repl(
            code: Annotated[str, Field(min_length=1, description="Python code (magics work).")],
        ) -> CallToolResult:
            return _run(body, lambda: kernel.run(code), "(no output)")

    return server


# --------------------------------------------------------------------------------------------------- running


def serve(
    root: str | os.PathLike[str],
    *,
    kernel: str | None = None,
    mode: str | None = None,
    http: bool = False,
    port: int = 0,
    token: str | None = None,
) -> None:
    """Run the server until the client disconnects (stdio) or the process is stopped (HTTP)."""
    import signal

    link = None
    if kernel is not None:
        from aries_kernel.attach import KernelLink

        link = KernelLink.connect(kernel, mode=mode)
    body = ReplBody(root, kernel=link)
    server = build_server(body)
    # A SIGTERM (a client stopping the server) unwinds like Ctrl-C, so the vault session is still credited.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        if http:
            _serve_http(
                server, port, token or aries_setting("ARIES_MCP_TOKEN", default=secrets.token_urlsafe(24))
            )
        else:
            server.run("stdio")
    except KeyboardInterrupt:
        pass
    finally:
        body.close()


def _serve_http(server: MCPServer, port: int, token: str) -> None:
    """Streamable HTTP on 127.0.0.1 at /mcp; a request without the bearer token is answered 401."""
    import anyio
    import uvicorn
    from starlette.responses import PlainTextResponse

    app = server.streamable_http_app(host="127.0.0.1")
    expected = f"Bearer {token}".encode()

    async def guarded_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not secrets.compare_digest(given, expected):
                response = PlainTextResponse("missing or wrong bearer token", status_code=401)
                await response(scope, receive, send)
                return
        await app(scope, receive, send)

    config = uvicorn.Config(guarded_app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    uv = uvicorn.Server(config)

    async def run() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(uv.serve)
            while not uv.started:
                await anyio.sleep(0.05)
            bound = uv.servers[0].sockets[0].getsockname()[1]
            print(
                f"aries-kernel mcp: http://127.0.0.1:{bound}/mcp (header Authorization: Bearer {token})",
                file=sys.stderr,
                flush=True,
            )

    anyio.run(run)


def main(args: Any) -> None:
    """Run ``aries-kernel mcp`` with parsed ``args``."""
    from aries_kernel.context import discover_root

    root = args.root or aries_setting("ARIES_ROOT") or discover_root(os.getcwd()).path
    serve(root, kernel=args.kernel, mode=args.mode, http=args.http, port=args.port, token=args.token)
