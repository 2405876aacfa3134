"""The agent loop: prompt assembly, model call, tool dispatch, context management, sessions; no display.

:meth:`Agent.run` is a generator of :mod:`~aries_kernel.agent.events`. One *run* answers one prompt and is
made of *turns*: a streamed call to the primary slot, then the tool calls it asked for. It repeats until the
model stops calling tools or ``max_turns`` is reached. Between turns (a turn boundary) it re-indexes files
that changed and compacts the history when it is over its share of the context window.

Memory (issue 6) plugs in through :class:`AgentHook`: system prompt sections (warm context), events before a
turn (preflight, which may offer notes through :attr:`Agent.turn_context`), after a response (echo/fizzle) and
after a turn (reflection). Listeners see every event.

A ``KeyboardInterrupt`` (kernel interrupt) stops the run at once: what the model said so far is kept, tool
calls that did not run get a result saying so, and everything is already on disk because the session is
written as it goes.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Generator, Iterable, Iterator
from pathlib import Path
from typing import Any

from aries_kernel.agent import compaction
from aries_kernel.agent.events import (
    ApprovalRequested,
    Compaction,
    Event,
    Notice,
    PhaseWidened,
    Reindexed,
    RunFinished,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    Waiting,
)
from aries_kernel.agent.phases import PhaseState, estimate_tokens, schema_tokens
from aries_kernel.agent.prompt import build_system_prompt, orientation
from aries_kernel.agent.safety import describe_call
from aries_kernel.agent.session import Session, list_sessions
from aries_kernel.agent.settings import AriesAgent
from aries_kernel.agent.tools import TOOLS, ToolEnv, iter_files, run_tool
from aries_kernel.models import types as mt

__all__ = ["Agent", "AgentHook", "Listener"]

Listener = Callable[[Event], None]
# Tools after which files may have changed without the agent knowing which (so the root is re-scanned).
_OPAQUE_TOOLS = frozenset({"Repl", "Bash"})


class AgentHook:
    """Base of the loop's extension points; every method is optional and may yield events."""

    def system_sections(self, agent: Agent) -> list[str]:
        """Stable sections put at the top of the system prompt (warm context)."""
        return []

    def before_turn(self, agent: Agent, turn: int) -> Iterable[Event]:
        """Before each model call (preflight); may append text to ``agent.turn_context``."""
        return ()

    def after_response(self, agent: Agent, turn: int, message: mt.Message) -> Iterable[Event]:
        """After the model's message is complete, before its tools run (echo/fizzle)."""
        return ()

    def after_turn(self, agent: Agent, turn: int, tools_used: int) -> Iterable[Event]:
        """After a turn's tools ran (reflection)."""
        return ()

    def before_summarize(self, agent: Agent, older: list[mt.Message]) -> Iterable[Event]:
        """Before ``older`` history is summarized away by compaction (extract durable insights first); the
        titles of notes saved go in ``agent.summary_notes``, and the summary names them."""
        return ()

    def status(self, agent: Agent) -> str | None:
        """Lines for the "Agent" section of ``%aries status`` (None: nothing to say)."""
        return None

    def end_session(self, agent: Agent) -> Iterable[Event]:
        """When the session is reset or replaced (credit rewards)."""
        return ()


class _Stopped(Exception):
    """The model layer failed; the run ends with its message."""


class Agent:
    """The coding agent of one kernel: its session, tools, phase and model access."""

    def __init__(
        self,
        context: Any = None,
        *,
        root: str | os.PathLike[str] | None = None,
        shell: Any = None,
        router: Any = None,
        settings: AriesAgent | None = None,
        hooks: Iterable[AgentHook] = (),
    ) -> None:
        self.context = context
        self.root = Path(root if root is not None else context.root).resolve()
        self.shell = shell if shell is not None else getattr(context, "shell", None)
        self.settings = settings or AriesAgent(config=getattr(context, "config", None))
        self._router = router
        self.hooks: list[AgentHook] = list(hooks)
        self.listeners: list[Listener] = []
        self.env = ToolEnv(self.root, self.settings, self.shell, context)
        self.phase = PhaseState(mode=self.settings.mode, widen_turns=self.settings.widen_turns)
        self.turn_context: list[str] = []
        self.summary_notes: list[
            str
        ] = []  # notes saved by hooks at the last compaction, named in its summary
        self.session: Session | None = None
        self.last_request_tokens = 0
        self._orientation: str | None = None
        self._snapshot: dict[str, tuple[int, int]] | None = None
        self._partial_text = ""
        self._pending: list[mt.ToolCall] = []

    # ------------------------------------------------------------------------------------------ model access

    @property
    def router(self) -> Any:
        """The model router of the context (built on first use)."""
        if self._router is None:
            from aries_kernel.models import ModelRouter

            self._router = self.context.lazy("models", lambda ctx: ModelRouter(config=ctx.config))
        return self._router

    def client(self, slot: str = "primary") -> Any:
        """The router's client for ``slot``."""
        return self.router.client(slot)

    # ---------------------------------------------------------------------------------------------- sessions

    def ensure_session(self) -> Session:
        """The current session, created on first use."""
        if self.session is None:
            self.session = Session.create(self.root, mode=self.settings.mode)
        return self.session

    def reset(self) -> list[Event]:
        """End the current session (hooks credit it) and start afresh on the next prompt."""
        events = [event for hook in self.hooks for event in hook.end_session(self)] if self.session else []
        self.session = None
        self.phase.reset()
        self.env.todos.clear()
        self._orientation = None
        return events

    def resume(self, session_id: str | None = None) -> Session:
        """Continue a saved session: the latest one, or the one whose id starts with ``session_id``."""
        paths = list_sessions(self.root)
        if session_id:
            paths = [path for path in paths if path.stem.startswith(session_id)]
        if not paths:
            where = f" matching {session_id!r}" if session_id else ""
            raise FileNotFoundError(f"No saved session{where} under {self.root / '.aries' / 'sessions'}.")
        self.reset()
        self.session = Session.load(paths[-1])
        return self.session

    # ---------------------------------------------------------------------------------------------- requests

    def system_prompt(self) -> str:
        """The system prompt the next request carries."""
        if self._orientation is None:
            self._orientation = self._build_orientation()
        return build_system_prompt(
            str(self.root),
            self.phase.gated_names() if self.phase.phase == "lean" else [],
            self._orientation,
            leading=[section for hook in self.hooks for section in hook.system_sections(self)],
            trailing=self.turn_context,
        )

    def _build_orientation(self) -> str:
        if self.context is None:
            return ""
        try:
            return orientation(self.context.codebase)
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:  # the agent can still work without the map; it says why it is missing
            return f"(The code graph is not available: {type(exc).__name__}: {exc})"

    def request(self) -> mt.ModelRequest:
        """The request for the next model call, from the current session and phase."""
        session = self.ensure_session()
        return mt.ModelRequest(
            messages=list(session.messages),
            system=self.system_prompt(),
            tools=self.phase.schemas(),
            max_tokens=self.settings.max_tokens,
        )

    def estimate(self, request: mt.ModelRequest, client: Any = None) -> int:
        """Estimated input tokens of ``request`` (the client's estimator when it has one)."""
        estimator = getattr(client, "estimate_tokens", None)
        if estimator is not None:
            return int(estimator(request))
        return (
            estimate_tokens(request.system)
            + schema_tokens(TOOLS[tool.name] for tool in request.tools)
            + compaction.history_tokens(request.messages)
        )

    # ----------------------------------------------------------------------------------------------- the run

    def run(
        self,
        prompt: str,
        *,
        max_turns: int | None = None,
        auto_approve: bool | None = None,
        mode: str | None = None,
    ) -> Generator[Event, None, None]:
        """Answer ``prompt``: yield events until the model is done, ``max_turns`` is hit, or an interrupt.

        ``max_turns``, ``auto_approve`` and ``mode`` ("repl" or "bare") override the settings for this run.
        """
        self.phase.mode = mode or self.settings.mode
        for event in self._run(
            prompt,
            max_turns or self.settings.max_turns,
            self.settings.auto_approve if auto_approve is None else auto_approve,
        ):
            for listener in self.listeners:
                listener(event)
            yield event

    def _run(self, prompt: str, max_turns: int, auto_approve: bool) -> Generator[Event, None, None]:
        session = self.ensure_session()
        self.phase.reset()
        totals = [0, 0, 0.0]
        turns = 0
        reason, detail = "done", ""
        try:
            yield from self._reindex_changes(session.turns)
            session.add_prompt(prompt)
            session.add_message(mt.Message("user", prompt))
            while True:
                if turns >= max_turns:
                    reason, detail = "max_turns", f"Stopped after {max_turns} turns (max_turns)."
                    break
                turns += 1
                turn = session.turns + 1
                client = self.client("primary")
                yield from self._compact_if_needed(client, turn)
                for hook in self.hooks:
                    yield from hook.before_turn(self, turn)
                request = self.request()
                self.turn_context.clear()
                self.last_request_tokens = self.estimate(request, client)
                completion = yield from self._stream(client, request, turn)
                usage = completion.usage
                totals[0] += usage.input_tokens
                totals[1] += usage.output_tokens
                totals[2] += usage.cost_usd
                message = completion.message
                self._pending = list(message.tool_calls)
                self._partial_text = ""
                session.add_message(message)
                for hook in self.hooks:
                    yield from hook.after_response(self, turn, message)
                gated = set(self.phase.gated_names())
                for call in message.tool_calls:
                    auto_approve = yield from self._call_tool(call, turn, auto_approve)
                if any(call.name in _OPAQUE_TOOLS for call in message.tool_calls) or self.env.changed:
                    yield from self._reindex_changes(turn)
                for hook in self.hooks:
                    yield from hook.after_turn(self, turn, len(message.tool_calls))
                yield TurnFinished(
                    completion.stop_reason,
                    usage.input_tokens,
                    usage.output_tokens,
                    usage.cost_usd,
                    completion.model,
                    len(message.tool_calls),
                    self.last_request_tokens,
                    self.phase.phase,
                    turn=turn,
                )
                self.phase.end_turn(
                    any(
                        call.name in gated and not TOOLS[call.name].memory
                        for call in message.tool_calls
                        if call.name in TOOLS
                    )
                )
                if not message.tool_calls:
                    if completion.stop_reason == "max_tokens":
                        detail = "The reply was cut at max_tokens; ask it to continue."
                    break
        except KeyboardInterrupt:
            reason, detail = "interrupted", "Interrupted; the transcript so far is kept."
            self._settle("interrupted by the user")
        except _Stopped as exc:
            reason, detail = "error", str(exc)
            self._settle("the model call failed")
        except GeneratorExit:  # the consumer closed the run (an interrupt while it was rendering)
            self._settle("interrupted by the user")
            raise
        except BaseException:  # a bug in a tool layer or a hook: keep the transcript, then let it show
            self._settle("the run stopped on an error")
            raise
        if detail:
            yield Notice(detail, turn=session.turns)
        yield RunFinished(
            reason, turns, int(totals[0]), int(totals[1]), float(totals[2]), detail, turn=session.turns
        )

    def _stream(
        self, client: Any, request: mt.ModelRequest, turn: int
    ) -> Generator[Event, None, mt.Completion]:
        """Stream one model call, yielding text as it comes and :class:`Waiting` while the model is silent;
        returns the Completion. The stream is read in a worker thread so that silence is seen (and a Stop
        clicked in it honoured) instead of blocking the kernel."""
        from aries_kernel.agent.streaming import Silence, read_in_thread
        from aries_kernel.models.errors import ModelError

        completion: mt.Completion | None = None
        stream = read_in_thread(client.stream(request))
        try:
            for item in stream:
                if isinstance(item, Silence):
                    waiting = Waiting(item.seconds, turn=turn)
                    yield waiting
                    if waiting.stopped:
                        raise KeyboardInterrupt  # a Stop button ends the run exactly as an interrupt does
                elif isinstance(item, mt.TextDelta):
                    self._partial_text += item.text
                    yield TextDelta(item.text, turn=turn)
                elif isinstance(item, mt.Completion):
                    completion = item
        except ModelError as exc:
            raise _Stopped(f"The model call failed: {exc}") from exc
        finally:
            stream.close()  # an interrupt mid-stream tells the reader to close the HTTP response
        if completion is None:
            raise _Stopped("The model stream ended without a completion.")
        session = self.ensure_session()
        usage = completion.usage
        session.add_usage(
            completion.slot, completion.model, usage.input_tokens, usage.output_tokens, usage.cost_usd
        )
        return completion

    def _settle(self, why: str) -> None:
        """Keep the transcript well-formed after an early stop: partial text kept, pending calls answered."""
        session = self.session
        if session is None:
            return
        if self._partial_text or (session.messages and session.messages[-1].role == "user"):
            text = self._partial_text or f"[no reply: {why}]"
            session.add_message(
                mt.Message("assistant", text + ("" if not self._partial_text else f"\n[{why}]"))
            )
        for call in self._pending:
            session.add_message(mt.Message("tool", f"Not run: {why}.", tool_call_id=call.id, is_error=True))
        self._pending = []
        self._partial_text = ""

    # ------------------------------------------------------------------------------------------------- tools

    def _call_tool(self, call: mt.ToolCall, turn: int, auto_approve: bool) -> Generator[Event, None, bool]:
        """Run one call (asking first if it must); returns whether the rest of the run is allowed."""
        session = self.ensure_session()
        started = time.monotonic()
        tool = TOOLS.get(call.name)
        yield ToolCallStarted(call.id, call.name, call.arguments, turn=turn)
        if tool is None:
            output, is_error = f"There is no tool named {call.name!r}. Tools: {', '.join(TOOLS)}.", True
        else:
            if self.phase.admit(call.name):
                yield PhaseWidened(call.name, turn=turn)
            approved, reason = True, ""
            if tool.needs_approval:
                approved, reason, auto_approve = yield from self._approve(call, turn, auto_approve)
            if approved:
                output, is_error = run_tool(tool, self.env, call.arguments)
            else:
                output, is_error = (
                    f"The user did not allow this {call.name} call.{' ' + reason if reason else ''}",
                    True,
                )
        seconds = time.monotonic() - started
        session.add_tool_call(
            {
                "id": call.id,
                "name": call.name,
                "arguments": call.arguments,
                "output": output,
                "is_error": is_error,
                "seconds": round(seconds, 3),
                "turn": turn,
            }
        )
        session.add_message(mt.Message("tool", output, tool_call_id=call.id, is_error=is_error))
        self._pending.remove(call)
        yield ToolCallFinished(call.id, call.name, output, is_error, seconds, turn=turn)
        return auto_approve

    def _approve(
        self, call: mt.ToolCall, turn: int, auto_approve: bool
    ) -> Generator[Event, None, tuple[bool, str, bool]]:
        """Ask whoever watches the stream; returns (approved, reason, allow the rest of the run)."""
        session = self.ensure_session()
        if auto_approve:
            session.add_approval(call.id, call.name, True, "policy")
            return True, "", True
        request = ApprovalRequested(
            call.id, call.name, describe_call(call.name, call.arguments), call.arguments, turn=turn
        )
        yield request
        if request.decision is None:
            reason = (
                "Nobody answered the approval request; the user can allow edits and commands with "
                "`%aries --yes` or c.AriesAgent.auto_approve = True."
            )
            session.add_approval(call.id, call.name, False, "nobody", reason)
            return False, reason, False
        session.add_approval(call.id, call.name, request.decision, "user", request.reason)
        return request.decision, request.reason, request.decision and request.for_run

    # ------------------------------------------------------------------------------------------- re-indexing

    def _scan(self) -> dict[str, tuple[int, int]]:
        state = {}
        for path in iter_files(self.root, self.root):
            try:
                info = path.stat()
            except OSError:
                continue
            state[str(path)] = (info.st_mtime_ns, info.st_size)
        return state

    def changed_files(self) -> list[Path]:
        """Files under the root created, changed or deleted since the last look, tool edits included."""
        current = self._scan()
        changed = {path.resolve() for path in self.env.changed}
        if self._snapshot is not None:
            before = self._snapshot
            changed.update(Path(path) for path in current.keys() ^ before.keys())
            changed.update(
                Path(path) for path in current.keys() & before.keys() if current[path] != before[path]
            )
        self._snapshot = current
        self.env.changed.clear()
        return sorted(changed)

    def _reindex_changes(self, turn: int) -> Iterator[Event]:
        changed = self.changed_files()
        if not changed or self.context is None:
            return
        relative = [self.env.relative(path) for path in changed]
        try:
            self.context.codebase.reindex(relative)
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:  # a failed re-index leaves a stale graph, which the user must hear about
            yield Notice(
                f"Re-indexing {len(relative)} changed file(s) failed: {type(exc).__name__}: {exc}", turn=turn
            )
            return
        yield Reindexed(relative, turn=turn)

    # -------------------------------------------------------------------------------------------- compaction

    def _compact_if_needed(self, client: Any, turn: int, force: bool = False) -> Iterator[Event]:
        session = self.ensure_session()
        limit = int(self.settings.compact_threshold * int(client.context_window))
        before = self.estimate(self.request(), client)
        if before <= limit and not force:
            return
        protect = min(self.settings.protected_tool_tokens, limit // 2)
        pruned, count = compaction.prune(session.messages, protect)
        tokens = before
        if count:
            session.replace_messages(pruned, "prune")
            tokens = self.estimate(self.request(), client)
            yield Compaction("prune", before, tokens, count, turn=turn)
        if tokens <= limit and not force:
            return
        # Keep a tail worth about half the limit; the split works in local estimates, scaled to the client's.
        local = self.estimate(self.request())
        history = compaction.history_tokens(session.messages)
        keep = max(int(limit / 2 * local / max(tokens, 1)) - (local - history), 0)
        split = compaction.split_point(session.messages, keep)
        if split == 0:
            yield Notice("The history cannot be compacted further: one turn fills the context.", turn=turn)
            return
        older = session.messages[:split]
        self.summary_notes = []
        for hook in self.hooks:
            yield from hook.before_summarize(self, older)
        summary, how = compaction.summarize(older, self._summarizer(), limit_chars=self._summary_chars())
        if self.summary_notes:
            saved = "\n".join(f"- [[{title}]]" for title in self.summary_notes)
            summary = f"{summary}\n\n## Notes saved to memory\n{saved}"
        session.replace_messages(compaction.with_summary(summary, session.messages[split:]), "summarize")
        after = self.estimate(self.request(), client)
        yield Compaction("summarize", tokens, after, len(older), turn=turn)
        if how != "model":
            yield Notice(f"History summarized without the cheap model ({how}).", turn=turn)

    def _summarizer(self) -> compaction.Summarizer | None:
        try:
            client = self.client("cheap")
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception:  # no cheap slot configured: the mechanical summary stands in
            return None
        session = self.ensure_session()

        def summarize(request: mt.ModelRequest) -> str:
            completion = client.complete(request)
            usage = completion.usage
            session.add_usage(
                completion.slot, completion.model, usage.input_tokens, usage.output_tokens, usage.cost_usd
            )
            return str(completion.message.content)

        return summarize

    def _summary_chars(self) -> int:
        try:
            window = int(self.client("cheap").context_window)
        except Exception:  # same fallback as the summarizer: a conservative transcript size
            window = 32_000
        return window * 2  # about half the cheap window, at four characters a token

    def compact(self) -> list[Event]:
        """Compact now, whatever the size (``%aries compact``)."""
        return list(self._compact_if_needed(self.client("primary"), self.ensure_session().turns, force=True))
