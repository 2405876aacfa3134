"""The typed event stream of one agent run: what the loop tells whoever is watching.

The loop (:mod:`aries_kernel.agent.loop`) knows nothing of display; it yields these events. The ``%aries``
magic renders them as text (:mod:`aries_kernel.agent.render`), the widgets as a panel, tests assert on them,
and hooks (memory, in issue 6) listen to them. An :class:`ApprovalRequested` is a question on the stream: the
consumer answers it with :meth:`ApprovalRequested.approve` or :meth:`ApprovalRequested.deny` before asking for
the next event; unanswered, the agent's policy decides.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Event",
    "RunStarted",
    "TextDelta",
    "Waiting",
    "ToolCallStarted",
    "ToolCallFinished",
    "ApprovalRequested",
    "PhaseWidened",
    "Compaction",
    "Reindexed",
    "MemoryRetrieved",
    "MemoryEchoed",
    "MemoryFizzled",
    "ReflectionWritten",
    "TurnFinished",
    "RunFinished",
    "Notice",
    "Checkpointed",
]


@dataclass
class Event:
    """Base of every event; ``turn`` is the 1-based model turn of the session it belongs to."""

    turn: int = field(default=0, kw_only=True)


@dataclass
class RunStarted(Event):
    """A run begins: its prompt, its permission mode (default, acceptEdits, plan, bypassPermissions) and its
    tool mode (repl or bare)."""

    prompt: str
    permission_mode: str
    tool_mode: str


@dataclass
class TextDelta(Event):
    """A piece of the model's text, as it streams."""

    text: str


@dataclass
class Waiting(Event):
    """Nothing has come from the model for ``seconds`` (sent about every quarter second while it is silent).

    A consumer may call :meth:`stop` to end the run the way a kernel interrupt does; a watcher with buttons
    also gets a moment here to handle its clicks.
    """

    seconds: float
    stopped: bool = False

    def stop(self) -> None:
        """End the run now, as an interrupt would (the transcript so far is kept)."""
        self.stopped = True


@dataclass
class ToolCallStarted(Event):
    """The model asked for a tool; it is about to run (after approval, if it needs one)."""

    id: str
    name: str
    arguments: dict[str, Any]


@dataclass
class ToolCallFinished(Event):
    """A tool ran (or was refused); ``output`` is exactly what the model receives. ``interrupted``: an
    interrupt (or Stop) cut it short, and ``output`` says so, with what it printed before."""

    id: str
    name: str
    output: str
    is_error: bool
    seconds: float
    interrupted: bool = False


@dataclass
class ApprovalRequested(Event):
    """A tool that changes things wants to run; answer with :meth:`approve` or :meth:`deny`.

    ``effect`` is "edit" or "command". Asked by the Repl guard in the middle of a Repl step, the request is not
    on the stream (the step cannot pause for it): the run's ``approver`` answers it in place; ``name`` is then
    "Repl" and ``summary`` says what the code is about to do."""

    tool_call_id: str
    name: str
    summary: str
    arguments: dict[str, Any]
    effect: str = "edit"
    decision: bool | None = None
    reason: str = ""
    for_run: bool = False

    def approve(self, for_run: bool = False) -> None:
        """Let the tool run; ``for_run`` allows every later call of this run without asking."""
        self.decision = True
        self.for_run = for_run

    def deny(self, reason: str = "") -> None:
        """Refuse the tool; ``reason`` is passed on to the model."""
        self.decision = False
        self.reason = reason


@dataclass
class PhaseWidened(Event):
    """The model called a gated tool, so this turn's request set widened from lean to full."""

    tool: str
    phase: str = "full"


@dataclass
class Compaction(Event):
    """History was compacted at a turn boundary: ``stage`` is "prune" or "summarize"."""

    stage: str
    tokens_before: int
    tokens_after: int
    messages_affected: int


@dataclass
class Reindexed(Event):
    """Files changed under the root were re-indexed in the code graph before the next model turn."""

    paths: list[str]


@dataclass
class MemoryRetrieved(Event):
    """Notes retrieved before a turn (preflight) and offered to the model."""

    titles: list[str]


@dataclass
class MemoryEchoed(Event):
    """Retrieved notes the response referred to."""

    titles: list[str]


@dataclass
class MemoryFizzled(Event):
    """Retrieved notes the response did not refer to."""

    titles: list[str]


@dataclass
class ReflectionWritten(Event):
    """An insight note the cheap model wrote to the vault."""

    title: str


@dataclass
class TurnFinished(Event):
    """One model call and its tool calls are done; usage and cost are of that call and the sub-calls its tools
    made (``rlm_call`` in a Repl step); ``spend`` is the spend against the tightest limit ("" without one)."""

    stop_reason: str
    input_tokens: int
    output_tokens: int
    cost_usd: float
    model: str
    tools_used: int
    context_tokens: int
    phase: str
    spend: str = ""


@dataclass
class RunFinished(Event):
    """The run for one prompt ended: ``reason`` is "done", "max_turns", "interrupted", "budget" (a spend limit
    was reached) or "error"; usage and cost count every model call of the run, sub-calls included."""

    reason: str
    turns: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    detail: str = ""
    # Prompt tokens read from or written to the provider's prompt cache (not in input_tokens), as billed.
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


@dataclass
class Checkpointed(Event):
    """A turn's changes were checkpointed (:mod:`~aries_kernel.agent.checkpoints`): ``%aries rewind <turn>``
    (or the panel's Rewind button) puts back the state before it."""

    checkpoint: int
    files: list[str]
    names: list[str]


@dataclass
class Notice(Event):
    """Something the user should know that is not model output (a provider error, a skipped step)."""

    text: str
