"""The agent loop: prompt assembly, model call, tool dispatch, context management, sessions; no display.

:meth:`Agent.run` is a generator of :mod:`~aries_kernel.agent.events`. One *run* answers one prompt and is
made of *turns*: a streamed call to the primary slot, then the tool calls it asked for. It repeats until the
model stops calling tools or ``max_turns`` is reached. Between turns (a turn boundary) it re-indexes files
that changed and compacts the history when it is over its share of the context window; a request the server
refuses as too long for its window is compacted and asked once more. In code-action mode
(:mod:`~aries_kernel.agent.code_actions`, for models without tool calling) the calls are the reply's Python
blocks, run as Repl steps. A failed call leaves no text in the history that the model did not write: the stop
is a session record, shown to the user.

Memory (issue 6) plugs in through :class:`AgentHook`: system prompt sections (warm context), events before a
turn (preflight, which may offer notes through :attr:`Agent.turn_context`), after a response (echo/fizzle) and
after a turn (reflection). Listeners see every event.

Each run has a permission mode (:mod:`~aries_kernel.agent.permissions`): the settings' unless the run names
one. It decides, per effect, whether a tool call runs, is asked for (an :class:`ApprovalRequested` on the
stream) or is refused. A ``Repl`` step runs under the Repl guard (:mod:`~aries_kernel.agent.guard`): the file
writes and processes of the agent's code are weighed by the same mode, and what must be asked is put to the
run's *approver*, a callable the consumer passes to :meth:`Agent.run` that answers an
:class:`ApprovalRequested` in place (the step cannot pause the stream). The provider keys are withheld from
``os.environ`` during the step, and every tool result is redacted before the model or the session sees it.
A run is untrusted code to the settings' owner (:mod:`~aries_kernel.settings_owner`): the permission settings
refuse changes while it runs, and a Repl step that changed them behind the traits' back has them set back.

Every model call of a run counts in the session's usage and the run's totals, the sub-calls of a Repl step
(``rlm_call``, ``rlm_batch``) included, and each Repl step has its own rlm call budget. When the router's spend
limit is reached the run ends with reason "budget" and the limit's message.

A ``KeyboardInterrupt`` (kernel interrupt) stops the run at once: what the model said so far is kept, tool
calls that did not run get a result saying so (a Repl step cut short says it ran partly), and everything is
already on disk because the session is written as it goes.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator
from pathlib import Path
from typing import Any

from aries_kernel.agent import code_actions, compaction
from aries_kernel.agent.checkpoints import Checkpoints, RewindReport
from aries_kernel.agent.events import (
    ApprovalRequested,
    Checkpointed,
    Compaction,
    Event,
    Notice,
    PhaseWidened,
    Reindexed,
    RunFinished,
    RunStarted,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    Waiting,
)
from aries_kernel.agent.guard import Ask, Verdict, guarded
from aries_kernel.agent.permissions import Decision, decide, effective_mode, refusal
from aries_kernel.agent.phases import PhaseState
from aries_kernel.agent.prompt import build_system_prompt, orientation
from aries_kernel.agent.safety import describe_call
from aries_kernel.agent.session import AgentSession, list_sessions
from aries_kernel.agent.settings import AriesAgent
from aries_kernel.agent.tools import Tool, ToolEnv, run_tool
from aries_kernel.codebase.changes import ChangeWatch
from aries_kernel.models import types as mt
from aries_kernel.models.tokens import estimate_tokens
from aries_kernel.redact import redact, withheld_keys
from aries_kernel.settings_owner import SettingsOwner

__all__ = ["Agent", "AgentHook", "Approver", "Listener", "RunInProgressError"]

Listener = Callable[[Event], None]
# Answers an ApprovalRequested in place (approve or deny), synchronously: how a Repl step's questions reach
# the user (stdin, the widget panel); also asked for a request on the stream that was left unanswered.
Approver = Callable[[ApprovalRequested], None]
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
    """The model layer failed; the run ends with its message and ``reason`` ("error", or "budget")."""

    def __init__(self, message: str, reason: str = "error") -> None:
        super().__init__(message)
        self.reason = reason


class _Overflow(_Stopped):
    """The request did not fit the model's context window; the run compacts and asks once more."""


class RunInProgressError(RuntimeError):
    """A run was asked for while another is in progress (from the agent's own Repl code, say)."""


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
        # One owner of the permission settings: the kernel's (from its start), else one of this agent's own.
        self.owner: SettingsOwner = getattr(context, "settings_owner", None) or SettingsOwner()
        if settings is None:
            agent_settings = getattr(context, "agent_settings", None)
            settings = agent_settings or AriesAgent(config=getattr(context, "config", None))
        self.settings = settings
        self.owner.adopt(settings)
        self._router = router
        self.hooks: list[AgentHook] = list(hooks)
        self.listeners: list[Listener] = []
        self.env = ToolEnv(self.root, self.settings, self.shell, context)
        self.phase = PhaseState(mode=self.settings.mode, widen_turns=self.settings.widen_turns)
        self.turn_context: list[str] = []
        # The notebook section of each prompt of the session, kept with its message (see _notebook_section).
        self._sections: list[tuple[mt.Message, str]] = []
        self._last_section = ""
        self.summary_notes: list[
            str
        ] = []  # notes saved by hooks at the last compaction, named in its summary
        self.session: AgentSession | None = None
        self.last_request_tokens = 0
        self._orientation: str | None = None
        self.changes = ChangeWatch(self.root)  # files changed between turns (inotify, else a walk)
        self._unindexed: set[Path] = set()  # changes a checkpoint's look saw, for the next re-index
        self.checkpoints = Checkpoints(
            self.root,
            self._look,
            self.changes.files,
            lambda: getattr(self.shell, "user_ns", None),
            config=getattr(context, "config", None),
            hidden=lambda: getattr(self.shell, "user_ns_hidden", {}),
        )
        self._partial_text = ""
        self._pending: list[mt.ToolCall] = []
        self._running = False
        self._run_mode: str | None = None
        self._allow_all = False  # the user allowed the rest of this run ("a" at an approval)
        self._approver: Approver | None = None
        self._running_call: tuple[str, float] | None = None  # (tool call id, start) while a tool runs
        self._warned_no_tools: set[tuple[Any, str]] = set()  # (base URL, model) said to take no tools
        self.code_actions = False  # this run acts by code blocks, not tool calls (code_actions.py)
        self._run_actions: str | None = None  # the run's actions option, over the setting
        # Input tokens, output tokens and cost of the run in progress, its sub-calls included.
        self._totals = [0, 0, 0.0, 0, 0]  # ..., cache-read and cache-written prompt tokens
        # How the run in progress ends, once known (kept for a consumer that closes the run before this
        # RunFinished reaches it: a Stop landing while the run's last events are rendered), else None.
        self.ending: RunFinished | None = None
        self._usage_lock = threading.Lock()  # rlm_batch reports its sub-calls from worker threads

    @property
    def running(self) -> bool:
        """Whether a run is in progress (its permission settings are locked)."""
        return self._running

    @property
    def permission_mode(self) -> str:
        """The permission mode of the run in progress, else the one the next run takes from the settings."""
        return self._run_mode or effective_mode(self.settings)

    # ------------------------------------------------------------------------------------------ model access

    @property
    def router(self) -> Any:
        """The model router of the context (built on first use)."""
        if self._router is None:
            from aries_kernel.pillars import shared_models

            self._router = shared_models(self.context)
        return self._router

    def client(self, slot: str = "primary") -> Any:
        """The router's client for ``slot``."""
        return self.router.client(slot)

    # ---------------------------------------------------------------------------------------------- sessions

    def ensure_session(self) -> AgentSession:
        """The current session, created on first use."""
        if self.session is None:
            self.session = AgentSession.create(self.root, mode=self.settings.mode)
        return self.session

    def reset(self) -> list[Event]:
        """End the current session (hooks credit it) and start afresh on the next prompt."""
        events = [event for hook in self.hooks for event in hook.end_session(self)] if self.session else []
        self.session = None
        self._sections, self._last_section = [], ""
        self.phase.reset()
        self.env.todos.clear()
        self._orientation = None
        return events

    def resume(self, session_id: str | None = None) -> AgentSession:
        """Continue a saved session: the latest one, or the one whose id starts with ``session_id``."""
        paths = list_sessions(self.root)
        if session_id:
            paths = [path for path in paths if path.stem.startswith(session_id)]
        if not paths:
            where = f" matching {session_id!r}" if session_id else ""
            raise FileNotFoundError(f"No saved session{where} under {self.root / '.aries' / 'sessions'}.")
        self.reset()
        self.session = AgentSession.load(paths[-1])
        return self.session

    def rewind(self, turn: int | None = None, *, force: bool = False, keep: bool = False) -> RewindReport:
        """Put files, names and the conversation back as they were before ``turn`` (default: undo the last
        checkpoint); see :mod:`~aries_kernel.agent.checkpoints`. Refused while a run is in progress."""
        if self._running:
            raise RunInProgressError("An agent run is in progress: it cannot be rewound until it ends.")
        return self.checkpoints.rewind(turn, session=self.session, force=force, keep=keep)

    # ---------------------------------------------------------------------------------------------- requests

    def system_prompt(self) -> str:
        """The system prompt the next request carries."""
        orientation_text = self._orientation
        if orientation_text is None:
            orientation_text = self._build_orientation()
        return build_system_prompt(
            str(self.root),
            self.phase.gated_names() if self.phase.phase == "lean" else [],
            orientation_text,
            leading=[section for hook in self.hooks for section in hook.system_sections(self)],
            trailing=self.turn_context,
            registry=self.phase.registry(),
        )

    def _build_orientation(self) -> str:
        """The repository map, kept for the session once the index is ready.

        The first request never waits for the index (on a large repository that is many seconds): until the
        index is ready the prompt says how far it is, and the map joins the prompt once it can be read.
        """
        if self.context is None:
            self._orientation = ""
            return ""
        codebase = self.context.codebase
        try:
            if not codebase.ready:
                codebase.index_in_background()
                progress = codebase.status().splitlines()[0]
                return f"(The code graph is being built: {progress}. codebase operations wait for it.)"
            self._orientation = orientation(codebase)
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:  # the agent can still work without the map; it says why it is missing
            self._orientation = f"(The code graph is not available: {type(exc).__name__}: {exc})"
        return self._orientation

    def request(self) -> mt.ModelRequest:
        """The request for the next model call, from the current session and phase."""
        session = self.ensure_session()
        return mt.ModelRequest(
            messages=self._with_sections(session.messages),
            system=self.system_prompt() + (f"\n\n{code_actions.INSTRUCTIONS}" if self.code_actions else ""),
            tools=[] if self.code_actions else self.phase.schemas(),
            max_tokens=self._max_tokens(),
        )

    def _notebook_section(self, prompt: mt.Message) -> None:
        """Give the run's prompt the notebook section (:func:`aries_kernel.notebook.context.section`: variables,
        cells run, the last error, ``c.AriesAgent.notebook_context``). It is built once, as the prompt is given,
        and kept with that message for the session (not in its file), so every later request repeats it byte for
        byte and the cached prompt prefix holds; one that repeats the last is not sent again."""
        from aries_kernel.notebook.context import UNCHANGED, repeated, section

        try:
            text = section(self.shell, self.context, self.settings.notebook_context)
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:  # the run goes on without it, and the model hears why
            text = f"<notebook_context>\n(Not available: {type(exc).__name__}: {exc})\n</notebook_context>"
        if not text:
            return
        if repeated(self._last_section, text):
            text = UNCHANGED
        else:
            self._last_section = text
        self._sections.append((prompt, text))

    def _with_sections(self, messages: list[mt.Message]) -> list[mt.Message]:
        """The session's messages, each prompt with its notebook section before it."""
        if not self._sections:
            return list(messages)
        sections = {id(message): (message, text) for message, text in self._sections}
        shown = []
        for message in messages:
            kept = sections.get(id(message))
            if kept is not None and kept[0] is message:
                message = mt.Message("user", f"{kept[1]}\n\n{message.content}")
            shown.append(message)
        return shown

    def _max_tokens(self) -> int:
        """The answer-length limit: the setting, else (0) a quarter of the primary window, at most 8,192."""
        if self.settings.max_tokens > 0:
            return int(self.settings.max_tokens)
        share = getattr(self.client("primary"), "default_max_tokens", None)  # a scripted router may lack it
        return int(share(8192)) if share is not None else 8192

    def estimate(self, request: mt.ModelRequest, client: Any = None) -> int:
        """Estimated input tokens of ``request`` (the client's estimator when it has one)."""
        estimator = getattr(client, "estimate_tokens", None)
        if estimator is not None:
            return int(estimator(request))
        return estimate_tokens(request)

    # ----------------------------------------------------------------------------------------------- the run

    def run(
        self,
        prompt: str,
        *,
        max_turns: int | None = None,
        auto_approve: bool | None = None,
        mode: str | None = None,
        permission_mode: str | None = None,
        approver: Approver | None = None,
        actions: str | None = None,
    ) -> Generator[Event, None, None]:
        """Answer ``prompt``: yield events until the model is done, ``max_turns`` is hit, or an interrupt.

        ``max_turns``, ``mode`` ("repl" or "bare"), ``permission_mode`` and ``actions`` ("auto", "tools" or
        "code": see :mod:`~aries_kernel.agent.code_actions`) override the settings for this run;
        ``auto_approve=True`` is ``permission_mode="bypassPermissions"``. ``approver`` answers the questions
        of the Repl guard (unanswered, they are refused). Refused with :class:`RunInProgressError` while a
        run is in progress.
        """
        if self._running:
            raise RunInProgressError(
                "An agent run is in progress: a run cannot start another, nor change its permission mode."
            )
        if (reason := self.owner.refusal_reason()) is not None:
            raise RunInProgressError(f"An agent run cannot be started {reason}.")
        self.owner.settle("user")  # the run takes the settings the user last set, in a cell of their own
        permission_mode = effective_mode(self.settings, permission_mode, auto_approve)
        if actions not in (None, "auto", "tools", "code"):
            raise ValueError(f"Unknown actions {actions!r}; they are auto, tools and code.")
        return self._events(
            prompt,
            max_turns or self.settings.max_turns,
            mode or self.settings.mode,
            permission_mode,
            approver,
            actions,
        )

    def _events(
        self,
        prompt: str,
        max_turns: int,
        mode: str,
        permission_mode: str,
        approver: Approver | None,
        actions: str | None = None,
    ) -> Generator[Event, None, None]:
        self.phase.mode = mode
        self._run_actions = actions
        self._running, self._run_mode, self._allow_all, self._approver = (
            True,
            permission_mode,
            False,
            approver,
        )
        run = self._run(prompt, max_turns)
        try:
            with self.owner.untrusted("the agent"):
                for event in run:
                    for listener in self.listeners:
                        listener(event)
                    yield event
        finally:
            # An interrupt here (in a listener) or the consumer's close must reach the run now, not when the
            # collector gets to it: the run settles its transcript and leaves its accounting in ``ending``.
            run.close()
            self._running, self._run_mode, self._approver = False, None, None
            self._run_actions = None
            self.checkpoints.end_run()

    def _run(self, prompt: str, max_turns: int) -> Generator[Event, None, None]:
        session = self.ensure_session()
        self.phase.reset()
        totals = self._totals = [0, 0, 0.0, 0, 0]
        turns = 0
        self.ending = None
        reason, detail = "done", ""
        cut: ToolCallFinished | None = None  # the call an interrupt stopped, with what it printed
        try:
            yield RunStarted(prompt, self.permission_mode, self.phase.mode, turn=session.turns)
            if session.problem:
                yield Notice(session.problem, turn=session.turns)
            yield from self._reindex_changes(session.turns)
            session.add_prompt(prompt, permission_mode=self.permission_mode)
            self.checkpoints.start_run(prompt, session)
            session.add_message(mt.Message("user", prompt))
            self._notebook_section(session.messages[-1])
            yield from self._choose_actions(session.turns)
            while True:
                if turns >= max_turns:
                    reason, detail = "max_turns", f"Stopped after {max_turns} turns (max_turns)."
                    break
                turns += 1
                turn = session.turns + 1
                self.checkpoints.start_turn(turn)
                client = self.client("primary")
                yield from self._compact_if_needed(client, turn)
                for hook in self.hooks:
                    yield from hook.before_turn(self, turn)
                request = self.request()
                self.turn_context.clear()
                self.last_request_tokens = self.estimate(request, client)
                before = list(totals)
                try:
                    completion = yield from self._stream(client, request, turn)
                except _Overflow:  # the server's window is smaller than assumed: compact, then ask once more
                    yield Notice(
                        "The request did not fit the model's context window "
                        f"({int(client.context_window):,} tokens); compacting the history and asking again.",
                        turn=turn,
                    )
                    yield from self._compact_if_needed(client, turn, force=True)
                    request = self.request()
                    self.last_request_tokens = self.estimate(request, client)
                    completion = yield from self._stream(client, request, turn)  # a second overflow ends it
                message = completion.message
                # In code-action mode the reply's Python blocks are its calls (a model's stray native calls too).
                calls = message.tool_calls or (
                    code_actions.calls_in(message, turn) if self.code_actions else []
                )
                self._pending = list(calls)
                self._partial_text = ""
                session.add_message(message)
                for hook in self.hooks:
                    yield from hook.after_response(self, turn, message)
                gated = set(self.phase.gated_names())
                results: list[tuple[str, bool]] = []
                for call in calls:
                    for event in self._call_tool(call, turn):
                        if isinstance(event, ToolCallFinished) and code_actions.is_code_call(call):
                            results.append((event.output, event.is_error))
                        yield event
                if results:  # the blocks' outputs go back as text: the wire has no tool call to answer
                    session.add_message(code_actions.results_message(results))
                yield from self._end_checkpoint()
                if any(call.name in _OPAQUE_TOOLS for call in calls) or self.env.changed or self._unindexed:
                    yield from self._reindex_changes(turn)
                for hook in self.hooks:
                    yield from hook.after_turn(self, turn, len(calls))
                yield TurnFinished(
                    completion.stop_reason,
                    int(totals[0] - before[0]),
                    int(totals[1] - before[1]),
                    float(totals[2] - before[2]),
                    completion.model,
                    len(calls),
                    self.last_request_tokens,
                    self.phase.phase,
                    self._spend_line(),
                    turn=turn,
                )
                self.phase.end_turn(
                    any(
                        call.name in gated and not tool.memory
                        for call in message.tool_calls
                        if (tool := self.phase.tool(call.name)) is not None
                    )
                )
                if not calls:
                    if completion.stop_reason == "max_tokens":
                        detail = "The reply was cut at max_tokens; ask it to continue."
                    break
        except KeyboardInterrupt as exc:
            reason, detail = "interrupted", "Interrupted; the transcript so far is kept."
            cut = self._settle("interrupted by the user", getattr(exc, "output", ""))
        except _Stopped as exc:
            reason, detail = exc.reason, str(exc)
            self._settle("the spend limit was reached" if exc.reason == "budget" else "the model call failed")
        except GeneratorExit:  # the consumer closed the run (an interrupt while it was rendering)
            self._settle("interrupted by the user")
            # It can yield nothing more: its accounting is kept for the consumer to show.
            self.ending = self._finished(
                "interrupted", turns, "Interrupted; the transcript so far is kept.", session.turns
            )
            raise
        except BaseException:  # a bug in a tool layer or a hook: keep the transcript, then let it show
            self._settle("the run stopped on an error")
            raise
        self.ending = self._finished(reason, turns, detail, session.turns)
        if cut is not None:
            yield cut
        yield from self._end_checkpoint()  # a turn cut short by an interrupt can be rewound too
        if detail:
            yield Notice(detail, turn=session.turns)
        yield self.ending

    def _end_checkpoint(self) -> Iterator[Event]:
        """Close the turn's checkpoint and say so, when it recorded a change."""
        checkpoint = self.checkpoints.end_turn()
        if checkpoint is not None and checkpoint.turn is not None:
            changed_names = checkpoint.names + checkpoint.inplace
            yield Checkpointed(checkpoint.number, list(checkpoint.files), changed_names, turn=checkpoint.turn)

    def _finished(self, reason: str, turns: int, detail: str, turn: int) -> RunFinished:
        """The run's closing event: how it ended and what it used, its sub-calls included."""
        totals = self._totals
        return RunFinished(
            reason,
            turns,
            int(totals[0]),
            int(totals[1]),
            float(totals[2]),
            detail,
            int(totals[3]),
            int(totals[4]),
            turn=turn,
        )

    def _choose_actions(self, turn: int) -> Iterator[Event]:
        """Tool calls or code blocks for this run (``c.AriesAgent.actions``; "auto": code blocks when the
        primary model's server publishes that its chat template takes no tools, which it would drop without a
        word, and the model would make up their results). Says so once per server and model."""
        choice = self._run_actions or self.settings.actions
        client = self.client("primary")
        facts = getattr(client, "facts", None)  # a scripted router in tests has none
        server = facts() if facts is not None else None
        no_tools = server is not None and server.tools is False
        self.code_actions = choice == "code" or (choice == "auto" and no_tools)
        if not no_tools or (client.base_url, client.model) in self._warned_no_tools:
            return
        assert server is not None  # no_tools: the server was asked
        key = (client.base_url, client.model)
        self._warned_no_tools.add(key)
        if self.code_actions:
            then = "the agent works in code-action mode: it writes Python blocks, which run in this kernel"
        else:
            then = (
                "with c.AriesAgent.actions = 'tools' it may make up their results; 'auto' writes code blocks"
            )
        yield Notice(
            f"{client.model} at {client.base_url} takes no tool calls ({server.tools_source} has no tool "
            f"support), so {then}. A model whose chat template supports tools (llama-server --jinja with such a "
            "model) gets the tools.",
            turn=turn,
        )

    def _stream(
        self, client: Any, request: mt.ModelRequest, turn: int
    ) -> Generator[Event, None, mt.Completion]:
        """Stream one model call, yielding text as it comes and :class:`Waiting` while the model is silent;
        returns the Completion. The stream is read in a worker thread so that silence is seen (and a Stop
        clicked in it honoured) instead of blocking the kernel."""
        from aries_kernel.agent.streaming import Silence, read_in_thread
        from aries_kernel.models.errors import BudgetExceeded, ContextOverflowError, ModelError

        completion: mt.Completion | None = None
        # The HTTP client waits as long for a first token as between two; a stream that began is held to the
        # (shorter) idle limit here, where its silences are seen.
        timeouts = getattr(client, "timeouts", None)
        idle = float(timeouts().idle) if timeouts is not None else None
        began = False
        reported: mt.Usage | None = None  # what the provider's stream said it counted so far
        streamed: list[str] = []  # the answer's text and call arguments so far, for a stopped call's count
        stream = read_in_thread(client.stream(request))
        try:
            for item in stream:
                if isinstance(item, Silence):
                    waiting = Waiting(item.seconds, turn=turn)
                    yield waiting
                    if waiting.stopped:
                        raise KeyboardInterrupt  # a Stop button ends the run exactly as an interrupt does
                    if began and idle is not None and item.seconds > idle:
                        raise _Stopped(
                            f"The model call failed: {client.model} at {client.base_url} sent nothing for "
                            f"{idle:g}s in the middle of its answer (c.AriesModels.idle_timeout); the server may "
                            "be stuck. What it wrote so far is kept."
                        )
                    continue
                began = True
                if isinstance(item, mt.StreamText):
                    self._partial_text += item.text
                    streamed.append(item.text)
                    yield TextDelta(item.text, turn=turn)
                elif isinstance(item, mt.ToolCallDelta):
                    streamed.append(item.arguments_fragment)
                elif isinstance(item, mt.StreamUsage):
                    reported = item.usage
                elif isinstance(item, mt.Completion):
                    completion = item
        except BudgetExceeded as exc:
            raise _Stopped(f"The run stopped at the spend limit. {exc}", reason="budget") from exc
        except ContextOverflowError as exc:
            raise _Overflow(f"The model call failed: {exc}") from exc
        except ModelError as exc:
            raise _Stopped(f"The model call failed: {exc}") from exc
        finally:
            stream.close()  # an interrupt mid-stream tells the reader to close the HTTP response
            if completion is None and began:
                self._record_stopped_call(client, request, reported, "".join(streamed))
        if completion is None:
            raise _Stopped("The model stream ended without a completion.")
        self._record_usage(completion)
        return completion

    def _record_stopped_call(
        self, client: Any, request: mt.ModelRequest, reported: mt.Usage | None, streamed: str
    ) -> None:
        """Count a call that stopped after its answer began (a Stop, an interrupt, a broken stream): the
        provider bills it, so its tokens and cost stay in the footer, the session, ``%aries cost`` and the
        spend ledger."""
        charge = getattr(client, "charge_stopped", None)  # a scripted client in tests may not have one
        if charge is None:
            return
        usage = charge(request, reported, streamed)
        self._record_usage(
            mt.Completion(mt.Message("assistant", streamed), "other", usage, client.model, client.slot, 0.0)
        )

    def _record_usage(self, completion: mt.Completion) -> None:
        """Count one finished model call in the session (its file) and the run's totals."""
        usage = completion.usage
        with self._usage_lock:
            self.ensure_session().add_usage(completion.slot, completion.model, usage)
            self._totals[0] += usage.input_tokens
            self._totals[1] += usage.output_tokens
            self._totals[2] += usage.cost_usd
            self._totals[3] += usage.cache_read_tokens
            self._totals[4] += usage.cache_write_tokens

    def _spend_line(self) -> str:
        """The spend against the tightest limit of the router, for the context meter ("" without a limit)."""
        limits = getattr(self.router, "limits", None)  # a scripted router in tests has none
        return limits.spend().short() if limits is not None else ""

    def _settle(self, why: str, printed: str = "") -> ToolCallFinished | None:
        """Keep the transcript well-formed after an early stop: partial text kept, pending calls answered;
        returns the result of the call that was running, with what it ``printed``, for its card."""
        session = self.session
        if session is None:
            return None
        # Only what the model wrote goes into the history it is sent again; the stop is noted for the user.
        if self._partial_text:
            session.add_message(mt.Message("assistant", self._partial_text))
        session.add_stop(why)
        said = {call.id: self._cut_short(call, why, printed) for call in self._pending}
        cut = [(said[call.id], True) for call in self._pending if code_actions.is_code_call(call)]
        for call in self._pending:
            if not code_actions.is_code_call(call):
                session.add_message(mt.Message("tool", said[call.id], tool_call_id=call.id, is_error=True))
        if cut:  # blocks of a reply that did not run (or ran partly): said as text, as their outputs are
            session.add_message(code_actions.results_message(cut))
        finished, running = None, self._running_call
        for call in self._pending:
            if running is not None and call.id == running[0]:
                seconds = time.monotonic() - running[1]
                finished = ToolCallFinished(
                    call.id,
                    call.name,
                    said[call.id],
                    True,
                    seconds,
                    interrupted=True,
                    turn=self.env.turn or session.turns,  # set as the call began
                )
        self._pending = []
        self._partial_text = ""
        self._running_call = None
        return finished

    def _cut_short(self, call: mt.ToolCall, why: str, printed: str = "") -> str:
        """The result of a call the stop left unanswered: not run, or (the one running) run partly, with what
        it ``printed`` before it stopped."""
        if self._running_call is None or self._running_call[0] != call.id:
            return f"Not run: {why}."
        seconds = time.monotonic() - self._running_call[1]
        when = (
            f"Interrupted after {seconds:.1f} s"
            if why == "interrupted by the user"
            else (f"Stopped after {seconds:.1f} s ({why})")
        )
        what = "the code ran partly" if call.name == "Repl" else f"{call.name} was stopped while it ran"
        said = f"{when}: {what}; its effects so far are kept."
        return f"{said} Its output before it stopped:\n{redact(printed)}" if printed else said

    # ------------------------------------------------------------------------------------------------- tools

    def _call_tool(self, call: mt.ToolCall, turn: int) -> Generator[Event, None, None]:
        """Run one call if the permission mode allows it (asking first if it says so)."""
        session = self.ensure_session()
        started = time.monotonic()
        tool = self.phase.tool(call.name)
        yield ToolCallStarted(call.id, call.name, call.arguments, turn=turn)
        if tool is None:
            output, is_error = (
                f"There is no tool named {call.name!r}. Tools: {', '.join(self.phase.registry())}.",
                True,
            )
        else:
            if self.phase.admit(call.name):
                yield PhaseWidened(call.name, turn=turn)
            decision = self._decision(tool.effect)
            approved, refused = True, ""
            if decision == "refuse":
                approved, refused = (
                    False,
                    f"{call.name} was not run: {refusal(self.permission_mode, tool.effect)}.",
                )
                session.add_approval(call.id, call.name, False, "policy", refused)
            elif decision == "ask":
                approved, reason = yield from self._approve(call, tool.effect, turn)
                refused = f"The user did not allow this {call.name} call.{' ' + reason if reason else ''}"
            elif tool.needs_approval:
                session.add_approval(
                    call.id, call.name, True, "policy", f"permission mode {self.permission_mode}"
                )
            if approved:
                self._running_call = (call.id, started)
                self.env.session_id, self.env.turn = session.id, turn  # the provenance of notes it writes
                if tool.effect == "repl":
                    output, is_error, changed = self._run_repl(tool, call, turn)
                    if changed:
                        yield Notice(
                            f"The agent's Repl code changed {', '.join(changed)}; set back (only you change "
                            "the permission mode and approval settings).",
                            turn=turn,
                        )
                else:
                    with self.checkpoints.around(call.name, tool.effect, call.arguments):
                        output, is_error = run_tool(tool, self.env, call.arguments)
                self._running_call = None
                output = redact(output)
            else:
                output, is_error = refused, True
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
        if not code_actions.is_code_call(call):  # a code block's output goes back with its reply's others
            session.add_message(mt.Message("tool", output, tool_call_id=call.id, is_error=is_error))
        self._pending.remove(call)
        yield ToolCallFinished(call.id, call.name, output, is_error, seconds, turn=turn)

    def _decision(self, effect: str) -> Decision:
        return "allow" if self._allow_all else decide(self.permission_mode, effect)

    def _approve(self, call: mt.ToolCall, effect: str, turn: int) -> Generator[Event, None, tuple[bool, str]]:
        """Ask whoever watches the stream (else the approver) about ``call``, of the tool's ``effect``; returns
        (approved, reason)."""
        session = self.ensure_session()
        request = ApprovalRequested(
            call.id,
            call.name,
            describe_call(call.name, call.arguments),
            call.arguments,
            effect=effect,
            turn=turn,
        )
        yield request
        if request.decision is None and self._approver is not None:
            self._approver(request)
        if request.decision is None:
            reason = (
                f"Nobody answered the approval request (permission mode {self.permission_mode}); the user can "
                "allow edits and commands with `%aries --yes`, edits alone with `%aries --mode acceptEdits`, "
                "or set c.AriesAgent.permission_mode."
            )
            session.add_approval(call.id, call.name, False, "nobody", reason)
            return False, reason
        session.add_approval(call.id, call.name, request.decision, "user", request.reason)
        self._allow_all = self._allow_all or (request.decision and request.for_run)
        return request.decision, request.reason

    def _run_repl(self, tool: Tool, call: mt.ToolCall, turn: int) -> tuple[str, bool, list[str]]:
        """One Repl step: keys withheld, effects guarded, its own rlm budget, its sub-calls counted; returns
        (output, is_error, settings set back)."""
        rlm = self.context.built("rlm") if self.context is not None else None
        if rlm is not None:
            rlm.start_execution()  # an rlm built during the step starts with a fresh budget anyway
        with (
            self.checkpoints.around(call.name, tool.effect, call.arguments),
            withheld_keys(self.settings.pass_env_keys),
            guarded(self.root, self._guard_ask(call, turn)) as report,
            self.router.observe(self._record_usage),
        ):
            output, is_error = run_tool(tool, self.env, call.arguments)
        changed = self.owner.settle("the agent's Repl code", report=False)  # the step says so itself
        if report.refused:
            output += "\n[Refused by the Repl guard: " + "; ".join(report.refused) + "]"
        if changed:
            output += (
                f"\n[This code changed {', '.join(changed)}; it was set back: only the user changes the "
                "permission mode and approval settings.]"
            )
        return output, is_error, changed

    def _guard_ask(self, call: mt.ToolCall, turn: int) -> Ask:
        """The Repl guard's question, answered by the permission mode and, when it says ask, the approver."""
        session = self.ensure_session()

        def ask(effect: str, summary: str) -> Verdict:
            mode = self.permission_mode
            decision = self._decision(effect)
            if decision != "ask":
                reason = f"permission mode {mode}" if decision == "allow" else refusal(mode, effect)
                session.add_approval(call.id, call.name, decision == "allow", "policy", reason, summary)
                return Verdict(decision == "allow", reason)
            request = ApprovalRequested(
                call.id, call.name, summary, {"effect": effect}, effect=effect, turn=turn
            )
            if self._approver is not None:
                self._approver(request)
            if request.decision is None:
                reason = f"permission mode {mode}; nobody answered the approval request"
                session.add_approval(call.id, call.name, False, "nobody", reason, summary)
                return Verdict(False, reason)
            session.add_approval(call.id, call.name, request.decision, "user", request.reason, summary)
            if not request.decision:
                said = f": {request.reason}" if request.reason else ""
                return Verdict(False, f"permission mode {mode}; the user denied{said}")
            self._allow_all = self._allow_all or request.for_run
            return Verdict(True)

        return ask

    # ------------------------------------------------------------------------------------------- re-indexing

    def changed_files(self) -> list[Path]:
        """Files under the root created, changed or deleted since the last look, tool edits included (the first
        look records the tree); skipped folders and ignored files are not looked at."""
        self._look()
        changed, self._unindexed = self._unindexed, set()
        return sorted(changed)

    def _look(self) -> list[str]:
        """Files changed since the last look (tool edits included), relative to the root; they are also kept
        for the next re-index, as a checkpoint looks between re-indexes."""
        found = {path.resolve() for path in self.env.changed}
        found.update(self.root / rel for rel in self.changes.changed())
        self.env.changed.clear()
        self._unindexed |= found
        return sorted(self.env.relative(path) for path in found)

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
        said: list[str] = []  # the hooks' notices
        for hook in self.hooks:
            for event in hook.before_summarize(self, older):
                said.extend([event.text] if isinstance(event, Notice) else [])
                yield event
        summary, how = compaction.summarize(older, self._summarizer(), limit_chars=self._summary_chars())
        if self.summary_notes:
            saved = "\n".join(f"- [[{title}]]" for title in self.summary_notes)
            summary = f"{summary}\n\n## Notes saved to memory\n{saved}"
        session.replace_messages(compaction.with_summary(summary, session.messages[split:]), "summarize")
        after = self.estimate(self.request(), client)
        yield Compaction("summarize", tokens, after, len(older), turn=turn)
        if how != "model":  # a reason a hook's notice already gave (a missing key) is not said twice
            known = any(how in text for text in said)
            yield Notice(
                f"History summarized without the cheap model ({'see above' if known else how}).", turn=turn
            )

    def _summarizer(self) -> compaction.Summarizer | None:
        try:
            client = self.client("cheap")
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception:  # no cheap slot configured: the mechanical summary stands in
            return None

        def summarize(request: mt.ModelRequest) -> str:
            completion = client.complete(request)
            self._record_usage(completion)
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
