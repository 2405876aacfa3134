"""The agent panel: the event stream of one ``%aries`` run rendered as ipywidgets.

Streamed text, a card per tool call (arguments, result, a diff for edits), approvals and their decisions, a
context meter (tokens used of the window, phase, cost) and a memory strip (notes retrieved, echoed, fizzled).
It is a consumer of :mod:`aries_kernel.agent.events`, exactly like the text renderer: call the panel with each
event. In a frontend without widgets (``jupyter console``) use the text renderer instead.
"""

from __future__ import annotations

import difflib
import html
import json
import time
from typing import Any

import ipywidgets as w

from aries_kernel.agent.events import (
    ApprovalRequested,
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

__all__ = ["AgentPanel", "ContextMeter", "MemoryStrip", "edit_diff_html"]

_TEXT_FLUSH_SECONDS = 0.1  # one widget update per this interval while text streams, not one per token
_RESULT_CHARS = 4000


def edit_diff_html(old: str, new: str, path: str = "") -> str:
    """A coloured unified diff of an Edit's ``old_string`` -> ``new_string``."""
    lines = difflib.unified_diff(old.splitlines(), new.splitlines(), path, path, lineterm="", n=2)
    styled = []
    for line in lines:
        colour = "#1a7f37" if line.startswith("+") else "#cf222e" if line.startswith("-") else "#57606a"
        styled.append(f'<span style="color:{colour}">{html.escape(line)}</span>')
    return '<pre style="margin:0">' + "\n".join(styled) + "</pre>"


class ContextMeter(w.HBox):
    """Tokens used of the model's context window, the tool phase, and the run's cost."""

    def __init__(self, window: int = 0) -> None:
        self.window = window
        self.bar = w.FloatProgress(value=0.0, min=0.0, max=1.0, layout=w.Layout(width="14em"))
        self.label = w.Label("no turns yet")
        super().__init__([self.bar, self.label])

    def update(self, tokens: int, phase: str, cost_usd: float) -> None:
        """Show ``tokens`` used in ``phase`` at a total cost of ``cost_usd``."""
        share = tokens / self.window if self.window else 0.0
        self.bar.value = min(share, 1.0)
        self.bar.bar_style = "danger" if share >= 0.7 else "warning" if share >= 0.5 else ""
        of_window = f" of {self.window:,} ({share:.0%})" if self.window else ""
        self.label.value = f"{tokens:,} tokens{of_window} · {phase} tools · ${cost_usd:.4f}"


class MemoryStrip(w.HTML):
    """The notes retrieved before the last turn, with the ones the response echoed or let fizzle."""

    def __init__(self) -> None:
        super().__init__("")
        self.retrieved: list[str] = []
        self.echoed: list[str] = []
        self.fizzled: list[str] = []

    def show(self) -> None:
        """Redraw the strip from the current lists."""

        def chips(titles: list[str], colour: str) -> str:
            return "".join(
                f'<span style="background:{colour};border-radius:8px;padding:1px 6px;margin:2px;'
                f'display:inline-block">{html.escape(title)}</span>'
                for title in titles
            )

        parts = []
        if self.echoed:
            parts.append("echoed " + chips(self.echoed, "#d4f8d4"))
        if self.fizzled:
            parts.append("fizzled " + chips(self.fizzled, "#eeeeee"))
        pending = [t for t in self.retrieved if t not in self.echoed and t not in self.fizzled]
        if pending:
            parts.append("retrieved " + chips(pending, "#dbe9ff"))
        self.value = "<small>memory: " + " ".join(parts) + "</small>" if parts else ""


class AgentPanel(w.VBox):
    """A live view of one agent run; call it with each event (``panel(event)``)."""

    def __init__(self, title: str = "Aries", window: int = 0) -> None:
        self.meter = ContextMeter(window)
        self.memory = MemoryStrip()
        self.transcript = w.VBox([])
        self.footer = w.HTML("")
        self._text: w.HTML | None = None
        self._text_buffer = ""
        self._last_flush = 0.0
        self._cards: dict[str, tuple[w.Accordion, dict[str, Any]]] = {}
        self._cost = 0.0
        header = w.HBox([w.HTML(f"<b>{html.escape(title)}</b>"), self.meter])
        super().__init__([header, self.memory, self.transcript, self.footer])

    # -- text -------------------------------------------------------------------------------------------
    def _append(self, child: w.Widget) -> None:
        self.transcript.children = (*self.transcript.children, child)

    def _flush_text(self) -> None:
        if self._text is not None:
            self._text.value = f'<div style="white-space:pre-wrap">{html.escape(self._text_buffer)}</div>'
            self._last_flush = time.monotonic()

    def _end_text(self) -> None:
        self._flush_text()
        self._text, self._text_buffer = None, ""

    def text(self) -> str:
        """Everything the model said in this run, as plain text (for tests and copying)."""
        return "".join(getattr(child, "_aries_text", "") for child in self.transcript.children)

    # -- events -----------------------------------------------------------------------------------------
    def __call__(self, event: Event) -> None:
        """Render one event."""
        if isinstance(event, TextDelta):
            if self._text is None:
                self._text = w.HTML("")
                self._append(self._text)
            self._text_buffer += event.text
            self._text._aries_text = self._text_buffer  # type: ignore[attr-defined]
            if time.monotonic() - self._last_flush >= _TEXT_FLUSH_SECONDS:
                self._flush_text()
            return
        self._end_text()
        if isinstance(event, ToolCallStarted):
            self._tool_started(event)
        elif isinstance(event, ToolCallFinished):
            self._tool_finished(event)
        elif isinstance(event, ApprovalRequested):
            self._note(f"approval needed: {event.summary}", "#fff4ce")
        elif isinstance(event, TurnFinished):
            self._cost += event.cost_usd
            self.meter.update(event.context_tokens, event.phase, self._cost)
        elif isinstance(event, MemoryRetrieved):
            self.memory.retrieved, self.memory.echoed, self.memory.fizzled = list(event.titles), [], []
            self.memory.show()
        elif isinstance(event, MemoryEchoed):
            self.memory.echoed = list(event.titles)
            self.memory.show()
        elif isinstance(event, MemoryFizzled):
            self.memory.fizzled = list(event.titles)
            self.memory.show()
        elif isinstance(event, PhaseWidened):
            self._note(f"tools widened to the full set for {event.tool}", "#f0f0f0")
        elif isinstance(event, Compaction):
            self._note(
                f"context compacted ({event.stage}): ~{event.tokens_before:,} → ~{event.tokens_after:,} tokens",
                "#f0f0f0",
            )
        elif isinstance(event, Reindexed):
            self._note(f"re-indexed {', '.join(event.paths)}", "#f0f0f0")
        elif isinstance(event, ReflectionWritten):
            self._note(f"reflection saved: {event.title}", "#d4f8d4")
        elif isinstance(event, Notice):
            self._note(event.text, "#fff4ce")
        elif isinstance(event, RunFinished):
            self.footer.value = (
                f"<small>{html.escape(event.reason)} · {event.turns} turn(s) · {event.input_tokens:,} in / "
                f"{event.output_tokens:,} out tokens · ${event.cost_usd:.4f}</small>"
            )

    def _note(self, text: str, colour: str) -> None:
        self._append(
            w.HTML(
                f'<div style="background:{colour};padding:2px 6px"><small>{html.escape(text)}</small></div>'
            )
        )

    def _tool_started(self, event: ToolCallStarted) -> None:
        args = event.arguments
        if event.name == "Edit" and {"old_string", "new_string"} <= args.keys():
            body = edit_diff_html(
                str(args["old_string"]), str(args["new_string"]), str(args.get("file_path", ""))
            )
        elif event.name == "Repl" and "code" in args:
            body = f"<pre style='margin:0'>{html.escape(str(args['code']))}</pre>"
        else:
            body = f"<pre style='margin:0'>{html.escape(json.dumps(args, indent=2, default=str))}</pre>"
        content = w.HTML(body)
        card = w.Accordion(children=[w.VBox([content])], titles=(f"{event.name} …",))
        self._cards[event.id] = (card, {"name": event.name, "body": content})
        self._append(card)

    def _tool_finished(self, event: ToolCallFinished) -> None:
        card, parts = self._cards.get(event.id, (None, {}))
        if card is None:
            return
        output = event.output if len(event.output) <= _RESULT_CHARS else event.output[:_RESULT_CHARS] + "\n…"
        colour = "#cf222e" if event.is_error else "inherit"
        result = w.HTML(f"<pre style='margin:0;color:{colour}'>{html.escape(output)}</pre>")
        card.children = (w.VBox([parts["body"], result]),)
        mark = "✗" if event.is_error else "✓"
        card.set_title(0, f"{event.name} {mark} {event.seconds:.1f}s")
