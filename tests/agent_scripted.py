"""A scripted model client behind the same ``.stream()`` interface as the router's slot clients, and the fake
kernel context agents are built on in unit tests.

For unit tests of the agent loop and for the loop benchmark (an instant model, so only the loop's own time is
measured). End-to-end tests use the real router against ``tests.loopback`` instead. Replies are
``tests.loopback.Reply`` objects, or callables that build one from the request.
"""

from __future__ import annotations

import contextlib
import itertools
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from aries_kernel.models import types as mt
from aries_kernel.models.tokens import estimate_text_tokens as estimate_tokens
from tests.loopback import Reply

ReplySource = Reply | Callable[[mt.ModelRequest], Reply] | BaseException

_ids = itertools.count(1)


class ScriptedClient:
    """Answers each request with the next scripted reply (``Reply(text="done")`` once the script is empty)."""

    def __init__(self, *replies: ReplySource, slot: str = "primary", context_window: int = 200_000) -> None:
        self.replies: deque[ReplySource] = deque(replies)
        self.requests: list[mt.ModelRequest] = []
        self.slot = slot
        self.context_window = context_window
        self.model = f"scripted-{slot}"
        self.shortname = self.model
        self.provider = "scripted"

    def script(self, *replies: ReplySource) -> None:
        """Queue more replies."""
        self.replies.extend(replies)

    def estimate_tokens(self, request: mt.ModelRequest) -> int:
        """The same four-characters-a-token estimate the agent uses without a router."""
        from aries_kernel.agent.compaction import history_tokens
        from aries_kernel.agent.phases import schema_tokens
        from aries_kernel.agent.tools import TOOLS

        return (
            estimate_tokens(request.system)
            + schema_tokens(TOOLS.get(t.name, t) for t in request.tools)  # an MCP tool: its own schema
            + history_tokens(request.messages)
        )

    def stream(self, request: mt.ModelRequest) -> Iterator[mt.StreamEvent]:
        """Yield the next reply as text deltas, tool call starts, then a Completion."""
        self.requests.append(request)
        source = self.replies.popleft() if self.replies else Reply(text="done")
        reply = source(request) if callable(source) and not isinstance(source, BaseException) else source
        if isinstance(reply, BaseException):
            raise reply
        step = max(reply.chunk, 1)
        for start in range(0, len(reply.text), step):
            yield mt.StreamText(reply.text[start : start + step])
        calls = [
            mt.ToolCall(f"call_{next(_ids)}", name, dict(arguments)) for name, arguments in reply.tool_calls
        ]
        for call in calls:
            yield mt.StreamToolCall(call.id, call.name)
        stop = reply.stop_reason or ("tool_use" if calls else "end_turn")
        usage = mt.Usage(input_tokens=reply.input_tokens, output_tokens=reply.output_tokens, cost_usd=0.001)
        yield mt.Completion(
            mt.Message("assistant", reply.text, calls), stop, usage, self.model, self.slot, 0.0
        )

    def complete(self, request: mt.ModelRequest) -> mt.Completion:
        """The Completion of :meth:`stream`."""
        *_, completion = self.stream(request)
        assert isinstance(completion, mt.Completion)
        return completion


class ScriptedRouter:
    """``.client(slot)`` for the loop: a scripted primary and cheap client."""

    def __init__(self, primary: ScriptedClient, cheap: ScriptedClient | None = None) -> None:
        self.clients = {"primary": primary, "cheap": cheap or ScriptedClient(slot="cheap")}

    def client(self, slot: str) -> ScriptedClient:
        return self.clients[slot]

    @contextlib.contextmanager
    def observe(self, observer: Callable[[mt.Completion], None]) -> Iterator[None]:
        """The router's usage observer hook; scripted Repl steps make no sub-calls to report."""
        yield


class FakeContext:
    """The parts of ``AriesContext`` an agent uses: a root, a shell, a config, a code graph and its pillars.

    ``lazy`` returns the pillars given in ``pillars``; one not given is built from its factory and kept when
    ``build`` is true, and fails the test otherwise (the agent under test should not build it).
    """

    def __init__(
        self,
        root: Path,
        *,
        shell: Any = None,
        config: Any = None,
        codebase: Any = None,
        pillars: dict[str, Any] | None = None,
        build: bool = False,
    ) -> None:
        from IPython.core.interactiveshell import InteractiveShell

        self.root = root
        self.shell = shell if shell is not None else InteractiveShell.instance()
        self.config = config
        self.codebase = codebase
        self._pillars: dict[str, Any] = dict(pillars or {})
        self._build = build

    def lazy(self, name: str, factory: Callable[[Any], Any]) -> Any:
        if name not in self._pillars:
            if not self._build:
                raise AssertionError(f"the test agent should not build {name}")
            self._pillars[name] = factory(self)
        return self._pillars[name]

    def built(self, name: str) -> Any:
        return self._pillars.get(name)
