"""Plain-text rendering of the agent's event stream, for the ``%aries`` magic and ``jupyter console``.

Text streams as it comes; tool calls show as one line with their arguments and a few lines of their result;
the run ends with a line of usage and cost. Approvals are asked on stdin (in a kernel, ``input()`` goes
through the frontend's stdin channel, so this works in a notebook and in the console).

A renderer of a ``%aries`` run (this one, or the widget panel) is called with each event and answers each
:class:`ApprovalRequested` through :meth:`TextRenderer.answer`; ``stop_requested`` says the user asked to stop,
and :meth:`TextRenderer.finish` ends the run's output.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any, Protocol, TextIO

from aries_kernel.agent.events import (
    ApprovalRequested,
    Checkpointed,
    Compaction,
    Event,
    MemoryEchoed,
    MemoryFizzled,
    MemoryRetrieved,
    Notice,
    PhaseWidened,
    ReflectionWritten,
    Reindexed,
    RunFinished,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
)

__all__ = [
    "TEXT_FLUSH_SECONDS",
    "Renderer",
    "TextRenderer",
    "ask_on_stdin",
    "checkpoint_text",
    "decision_text",
    "format_arguments",
    "run_footer",
]

_RESULT_LINES = 8
_MEMORY_VERBS = {MemoryRetrieved: "retrieved", MemoryEchoed: "echoed", MemoryFizzled: "fizzled"}
_ARGUMENT_CHARS = 160
# Streamed text goes out at most this often (lines and the run's end at once). Flushed per token, a fast model's
# reply became one IOPub message per token, more than ZeroMQ's high-water mark of 1,000 queued messages to a
# client that is busy for a moment: the client lost messages, the run's idle status among them (a test's cell
# "never finished" under load), and jupyter_server's IOPub rate limit (1,000 messages/s) drops them too.
TEXT_FLUSH_SECONDS = 0.1


def format_arguments(arguments: dict[str, Any]) -> str:
    """Tool arguments on one line, long values cut."""
    parts = []
    for key, value in arguments.items():
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        text = text.replace("\n", "\\n")
        if len(text) > _ARGUMENT_CHARS:
            text = text[:_ARGUMENT_CHARS] + f"... ({len(text):,} chars)"
        parts.append(f"{key}={text}")
    return ", ".join(parts)


class Renderer(Protocol):
    """What ``%aries`` drives: the text renderer here, or the widget panel."""

    stop_requested: bool

    def __call__(self, event: Event) -> None:
        """Show one event."""

    def answer(self, event: ApprovalRequested) -> None:
        """Answer ``event`` (approve or deny it), blocking until the user has; unanswered, the policy refuses."""

    def finish(self, reason: str = "interrupted") -> Any:
        """The run is over; ``reason`` says how when no RunFinished was rendered."""


def checkpoint_text(event: Checkpointed) -> str:
    """A checkpoint in one line: what the turn changed, and how to go back before it."""
    changed = [f"{len(event.files)} file(s)"] if event.files else []
    changed += [f"name(s) {', '.join(event.names)}"] if event.names else []
    return f"checkpoint {event.checkpoint}: turn {event.turn} changed {' and '.join(changed)}; " + (
        f"%aries rewind {event.turn} goes back before it"
    )


class TextRenderer:
    """Writes events to ``out`` (stdout by default) as they arrive."""

    def __init__(self, out: TextIO | None = None, result_lines: int = _RESULT_LINES) -> None:
        self.out = out
        self.result_lines = result_lines
        self.stop_requested = False  # no Stop button in a terminal: a kernel interrupt stops the run
        self._in_text = False
        self._finished = False
        self._last_flush = 0.0

    def _write(self, text: str, streaming: bool = False) -> None:
        out = self.out or sys.stdout  # looked up late: the kernel swaps sys.stdout per cell
        out.write(text)
        now = time.monotonic()
        if not streaming or now - self._last_flush >= TEXT_FLUSH_SECONDS:
            out.flush()
            self._last_flush = now

    def _line(self, text: str) -> None:
        if self._in_text:
            self._write("\n")
            self._in_text = False
        self._write(text + "\n")

    def __call__(self, event: Event) -> None:
        """Render one event."""
        if isinstance(event, TextDelta):
            self._write(event.text, streaming=True)
            self._in_text = not event.text.endswith("\n")
        elif isinstance(event, ToolCallStarted):
            self._line(f"> {event.name}({format_arguments(event.arguments)})")
        elif isinstance(event, ToolCallFinished):
            lines = event.output.splitlines() or [""]
            shown = lines[: self.result_lines]
            more = len(lines) - len(shown)
            mark = "! " if event.is_error else "  "
            body = "\n".join(f"{mark}| {line}" for line in shown)
            self._line(body + (f"\n  | ... {more} more lines" if more > 0 else ""))
        elif isinstance(event, ApprovalRequested):
            self._line(f"? approval needed: {event.summary}")
            if event.decision is not None:  # a transcript written after the fact says what was decided
                self._line(f"  -> {decision_text(event)}")
        elif isinstance(event, PhaseWidened):
            self._line(f"[tools widened to the full set for {event.tool}]")
        elif isinstance(event, Compaction):
            self._line(
                f"[compacted ({event.stage}): {event.messages_affected} messages, "
                f"~{event.tokens_before:,} -> ~{event.tokens_after:,} tokens]"
            )
        elif isinstance(event, Checkpointed):
            self._line(f"[{checkpoint_text(event)}]")
        elif isinstance(event, Reindexed):
            self._line(f"[re-indexed {len(event.paths)} changed file(s): {', '.join(event.paths[:5])}]")
        elif isinstance(event, (MemoryRetrieved, MemoryEchoed, MemoryFizzled)):
            self._line(f"[memory {_MEMORY_VERBS[type(event)]}: {'; '.join(event.titles)}]")
        elif isinstance(event, ReflectionWritten):
            self._line(f"[reflection saved: {event.title}]")
        elif isinstance(event, Notice):
            self._line(f"[{event.text}]")
        elif isinstance(event, TurnFinished) and event.spend:
            self._line(f"[spend: {event.spend}]")
        elif isinstance(event, RunFinished):
            self._finished = True
            self._line(f"[{run_footer(event)}]")

    def answer(self, event: ApprovalRequested) -> None:
        """Answer an approval question: asked on stdin."""
        if event.decision is None:
            ask_on_stdin(event)
            self._write(f"  -> {decision_text(event)}\n")

    def finish(self, reason: str = "interrupted") -> None:
        """End the run's output; says so when the run stopped without its closing line (an interrupt)."""
        if not self._finished:
            self._line(f"[{reason}; the transcript so far is kept]")
            self._finished = True


def run_footer(event: RunFinished) -> str:
    """How a run ended, in one line: reason, turns, tokens in (prompt-cache use beside them) and out, cost."""
    return (
        f"{event.reason} · {event.turns} turn(s) · {event.input_tokens:,} in{cache_text(event)} / "
        f"{event.output_tokens:,} out tokens · ${event.cost_usd:.4f}"
    )


def cache_text(event: RunFinished) -> str:
    """The prompt-cache part of a run's footer: " (+1,935 cached)", with the tokens written to the cache when
    there are any; "" without cache use (a prompt served from the cache is not a 1-token prompt)."""
    parts = [f"{event.cache_read_tokens:,} cached"] if event.cache_read_tokens else []
    parts += [f"{event.cache_write_tokens:,} written to cache"] if event.cache_write_tokens else []
    return f" (+{', '.join(parts)})" if parts else ""


def decision_text(event: ApprovalRequested) -> str:
    """What was decided on an approval: approved, allowed for this run, denied (with the reason)."""
    if event.decision is None:
        return "not answered"
    if not event.decision:
        return "denied" + (f" ({event.reason})" if event.reason else "")
    return "allowed for this run" if event.for_run else "approved"


def ask_on_stdin(event: ApprovalRequested) -> None:
    """Answer ``event`` with ``input()``.

    y allows, a allows the rest of the run, anything else refuses (and its text is the reason the model gets).
    """
    from IPython.core.error import StdinNotImplementedError

    try:
        answer = input(f"Allow {event.summary}? [y/N/a(ll this run)] ").strip()
    except (StdinNotImplementedError, EOFError):
        return  # no stdin here (a headless run): the agent's policy refuses and tells the model how to allow
    word = answer.lower()
    if word in ("y", "yes", "a", "all"):
        event.approve(for_run=word in ("a", "all"))
    else:
        event.deny("" if word in ("", "n", "no") else f"The user said: {answer}")
