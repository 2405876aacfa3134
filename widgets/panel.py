"""The agent panel: the event stream of one ``%aries`` run rendered as ipywidgets, and its static record.

Live, the panel shows streamed text, a card per tool call (arguments, result, a diff for edits), approvals with
Approve / Deny / Allow for this run buttons on the card that asks, a Stop button, a waiting indicator while the
model is silent, a context meter (tokens used of the window, phase, cost) and a memory strip. It is a consumer
of :mod:`aries_kernel.agent.events`, exactly like the text renderer: call the panel with each event, and
:meth:`AgentPanel.answer` with each :class:`ApprovalRequested`.

The buttons' handlers may run on a subshell's thread while the cell runs (see :mod:`.ui_events`): they only
record the click in the panel's (or the Rewind bar's) :class:`~.ui_events.ClickInbox`. Every widget change and
every rewind happens on the main thread: in :meth:`AgentPanel.answer` (which waits for the click) and
:meth:`AgentPanel.poll` (called with each event) while the run goes on, and, for a click nothing waits for (the
Rewind bar's), on the main thread's event loop when it is next free. A Stop that arrives while the agent's step
runs interrupts that step only (:mod:`aries_kernel.agent.step_window`).

When the run ends, :meth:`AgentPanel.finish` replaces the live output by a :class:`TranscriptRecord` (HTML with
a plain-text fallback, no widget), so a saved notebook, ``nbconvert`` and a plain viewer show the whole run
without the kernel. Below it, until the next cell runs, a :class:`RewindBar` has a Rewind button for each turn
that was checkpointed (``%aries rewind <turn>``: files, names and the conversation), with Keep mine / Overwrite
when a rewind finds changes made since; what each rewind did (or the conflicts that stopped it) joins the record,
so the saved notebook keeps it. In a frontend without widgets (``jupyter console``) use the text renderer instead.
"""

from __future__ import annotations

import difflib
import html
import io
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import ipywidgets as w

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
    Waiting,
)
from aries_kernel.agent.render import (
    TEXT_FLUSH_SECONDS,
    TextRenderer,
    ask_on_stdin,
    checkpoint_text,
    decision_text,
    run_footer,
)
from aries_kernel.agent.step_window import STEP

from .ui_events import ClickInbox, ClickRoute, click_route, on_main_thread

__all__ = ["AgentPanel", "ContextMeter", "MemoryStrip", "RewindBar", "TranscriptRecord", "edit_diff_html"]

# Rewinds before ``turn`` (force: overwrite changes made since; keep: keep them) and says what happened.
Rewinder = Callable[[int, bool, bool], str]
# Shows what a rewind said where the saved notebook keeps it (the panel's record).
Said = Callable[[str], None]

_POLL_SECONDS = 0.1  # how often widget messages (clicks) are handled while events stream
_CLICK_WAIT_SECONDS = 0.05  # longest wait for a click between two reads of the fallback's queue
_RESULT_CHARS = 4000
_WRITE_LINES = 60  # lines of a Write's new content shown as its diff
# Code, commands, results and diffs in a monospace font in any HTML viewer: nbconvert's lab template (and some
# notebook viewers) set pre in the page's proportional font. JupyterLab's own code font where it is defined.
_MONO = "font-family:var(--jp-code-font-family,Menlo,Consolas,DejaVu Sans Mono,monospace)"
_PRE = f"margin:0;white-space:pre-wrap;{_MONO}"
_AFTER = "background:#f0f0f0;padding:2px 6px;margin-top:2px"  # a rewind's result below the run


def edit_diff_html(old: str, new: str, path: str = "") -> str:
    """A coloured unified diff of an Edit's ``old_string`` -> ``new_string``."""
    lines = difflib.unified_diff(old.splitlines(), new.splitlines(), path, path, lineterm="", n=2)
    styled = []
    for line in lines:
        colour = "#1a7f37" if line.startswith("+") else "#cf222e" if line.startswith("-") else "#57606a"
        styled.append(f'<span style="color:{colour}">{html.escape(line)}</span>')
    return f'<pre style="{_PRE}">' + "\n".join(styled) + "</pre>"


def call_body_html(name: str, arguments: dict[str, Any]) -> str:
    """What a tool call is about to do: a diff for Edit and Write, the code or command, else the arguments."""
    path = str(arguments.get("file_path", ""))
    if name == "Edit" and {"old_string", "new_string"} <= arguments.keys():
        return edit_diff_html(str(arguments["old_string"]), str(arguments["new_string"]), path)
    if name == "Write" and "content" in arguments:
        lines = str(arguments["content"]).splitlines()
        more = f"\n… {len(lines) - _WRITE_LINES} more lines" if len(lines) > _WRITE_LINES else ""
        return edit_diff_html("", "\n".join(lines[:_WRITE_LINES]) + more, path)
    for key in ("code", "command"):
        if key in arguments and isinstance(arguments[key], str):
            return f"<pre style='{_PRE}'>{html.escape(arguments[key])}</pre>"
    return f"<pre style='{_PRE}'>{html.escape(json.dumps(arguments, indent=2, default=str))}</pre>"


def _result_html(name: str, output: str, is_error: bool) -> str:
    if name == "Edit" and not is_error:
        # The card already shows the edit's diff above; the model's copy of it would show it twice.
        output = output.split("\n--- a/", 1)[0]
    shown = output if len(output) <= _RESULT_CHARS else output[:_RESULT_CHARS] + "\n…"
    colour = "#cf222e" if is_error else "inherit"
    return f"<pre style='{_PRE};color:{colour};border-top:1px solid #d0d7de'>{html.escape(shown)}</pre>"


def _note_html(text: str, colour: str) -> str:
    return f'<div style="background:{colour};padding:2px 6px"><small>{html.escape(text)}</small></div>'


_TARGET_ARGUMENTS = ("file_path", "notebook_path", "command", "url", "pattern")
_TARGET_CHARS = 60


def _call_target(arguments: dict[str, Any]) -> str:
    """What a call acts on (a file, a command, a URL), for its card's title; multi-line code is left out."""
    for name in _TARGET_ARGUMENTS:
        value = arguments.get(name)
        if isinstance(value, str) and value:
            line = value.splitlines()[0]
            cut = len(line) > _TARGET_CHARS or line != value
            return line[:_TARGET_CHARS] + ("…" if cut else "")
    return ""


def _decision(event: ApprovalRequested) -> str:
    return "waiting for your answer" if event.decision is None else decision_text(event)


def _close_tree(widget: w.Widget) -> None:
    """Close ``widget`` and every widget inside it (their comms, so the kernel forgets them)."""
    for child in getattr(widget, "children", ()):
        _close_tree(child)
    widget.close()


@dataclass
class _Card:
    """One tool call (or a standalone approval) as the panel knows it."""

    id: str
    name: str
    arguments: dict[str, Any]
    state: str = "…"  # "…", "✓ 1.2s", "✗ 0.1s", "interrupted"
    output: str | None = None
    is_error: bool = False
    approvals: list[ApprovalRequested] = field(default_factory=list)
    widget: w.Accordion | None = None
    body: w.VBox | None = None

    def title(self) -> str:
        asked = f" · {_decision(self.approvals[-1])}" if self.approvals else ""
        target = _call_target(self.arguments)
        return f"{self.name} {self.state}{f' · {target}' if target else ''}{asked}"

    def html(self) -> str:
        parts = [call_body_html(self.name, self.arguments)]
        for approval in self.approvals:
            parts.append(_note_html(f"approval: {approval.summary} → {_decision(approval)}", "#fff4ce"))
        if self.output is not None:
            parts.append(_result_html(self.name, self.output, self.is_error))
        return (
            f'<details open style="border:1px solid #d0d7de;border-radius:4px;margin:2px 0;padding:2px 6px">'
            f"<summary><code style='{_MONO}'>{html.escape(self.title())}</code></summary>{''.join(parts)}</details>"
        )


@dataclass
class TranscriptRecord:
    """The finished run as static output: ``text/html`` and a ``text/plain`` transcript, no widget."""

    html: str
    text: str

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/html": self.html, "text/plain": self.text}

    def __repr__(self) -> str:
        return self.text


class ContextMeter(w.HBox):
    """Tokens used of the model's context window, the tool phase, the run's cost and the spend against the
    tightest spend limit."""

    def __init__(self, window: int = 0) -> None:
        self.window = window
        self.bar = w.FloatProgress(value=0.0, min=0.0, max=1.0, layout=w.Layout(width="14em"))
        self.label = w.Label("")
        super().__init__([self.bar, self.label])

    def update(self, tokens: int, phase: str, cost_usd: float, spend: str = "") -> None:
        """Show ``tokens`` used in ``phase`` at a total cost of ``cost_usd``, and ``spend`` against a limit."""
        share = tokens / self.window if self.window else 0.0
        self.bar.value = min(share, 1.0)
        self.bar.bar_style = "danger" if share >= 0.7 else "warning" if share >= 0.5 else ""
        of_window = f" of {self.window:,} ({share:.0%})" if self.window else ""
        limit = f" · spend {spend}" if spend else ""
        self.label.value = f"{tokens:,} tokens{of_window} · {phase} tools · ${cost_usd:.4f}{limit}"


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


class RewindBar(w.VBox):
    """A Rewind button per checkpointed turn; a conflict offers Keep mine and Overwrite for that turn. What
    each rewind says goes to ``said`` (the record above the bar), not to a widget that a saved notebook loses.

    A button's handler only records the click (in :attr:`inbox`); the rewind, which restores files and kernel
    names, and the bar's changes run on the main thread (:class:`~.ui_events.ClickInbox`): at once when the click
    is handled there, else when the main thread is free, so never beside a cell that the main thread runs.
    """

    def __init__(
        self, turns: list[int], rewind: Rewinder, said: Said, route: ClickRoute | None = None
    ) -> None:
        self.rewind = rewind
        self.said = said
        self.route = route
        self.inbox = ClickInbox(self._apply, route.main_loop if route is not None else None)
        self.buttons = [w.Button(description=f"Rewind turn {turn}", icon="undo") for turn in turns]
        for turn, button in zip(turns, self.buttons, strict=True):
            button.on_click(lambda _, turn=turn: self._clicked(turn, ""))
        self.choices = w.HBox([])
        super().__init__([w.HBox(self.buttons), self.choices])

    def show_until_next_cell(self) -> None:
        """Display the bar until the next cell runs, then leave an empty output in its place.

        A widget output saved in a notebook reopens as "Loading widget..." or "Error displaying widget: model
        not found" in JupyterLab, whatever fallback it carries. The buttons serve the moments right after a
        run; the record above the bar says ``%aries rewind N`` for later, so the bar steps aside and a notebook
        saved after any later cell holds no widget output for it.
        """
        from IPython import get_ipython
        from IPython.display import display

        handle = display(self, display_id=True)
        shell = get_ipython()
        if shell is None or handle is None:
            return

        def step_aside() -> None:
            handle.update({"text/plain": ""}, raw=True)
            _close_tree(self)

        def retire(*_: Any) -> None:
            shell.events.unregister("pre_run_cell", retire)
            # A cell on a subshell runs this on its thread: the widgets still change on the main thread.
            on_main_thread(self.inbox.main_loop, step_aside)

        shell.events.register("pre_run_cell", retire)

    def _clicked(self, turn: int, how: str) -> None:
        """A button's handler, on whatever thread ipykernel runs it: record the click, nothing more."""
        if self.route is not None:
            self.route.note_click()
        self.inbox.put(str(turn), how)

    def _apply(self, item: tuple[str, ...]) -> None:
        turn, how = item
        self.click(int(turn), force=how == "force", keep=how == "keep")

    def click(self, turn: int, force: bool = False, keep: bool = False) -> str:
        """Rewind before ``turn`` and show what happened (the buttons' action; main thread)."""
        try:
            text = self.rewind(turn, force, keep)
        except Exception as exc:  # shown where the user clicked: no traceback lands in a button callback
            text = str(exc)
        self.said(text)
        self.choices.children = ()
        if text.startswith("Nothing was rewound"):
            mine = w.Button(description="Keep mine, rewind the rest")
            force_button = w.Button(description="Overwrite mine", button_style="danger")
            mine.on_click(lambda _: self._clicked(turn, "keep"))
            force_button.on_click(lambda _: self._clicked(turn, "force"))
            self.choices.children = (mine, force_button)
        return text


class AgentPanel(w.VBox):
    """A live view of one agent run; call it with each event (``panel(event)``). With ``rewind``, the record
    left by :meth:`finish` has a :class:`RewindBar` for the turns that were checkpointed."""

    def __init__(
        self,
        title: str = "Aries",
        window: int = 0,
        rewind: Rewinder | None = None,
        route: ClickRoute | None = None,
    ) -> None:
        self.title = title
        self.route = route if route is not None else _current_route()
        # What the buttons' handlers recorded, on whatever thread they ran; applied on the main thread.
        self.inbox = ClickInbox(self._apply_click, self.route.main_loop if self.route is not None else None)
        self.stop_seen = (
            threading.Event()
        )  # a Stop click has reached the kernel (set on its arrival's thread)
        self.rewind = rewind
        self.checkpointed: list[int] = []  # turns with a checkpoint, in order
        self.rewind_bar: RewindBar | None = None
        self.meter = ContextMeter(window)
        self.memory = MemoryStrip()
        self.status = w.Label("starting…")
        self.stop_button = w.Button(description="Stop", button_style="danger", icon="stop")
        self.stop_button.on_click(lambda _: self._clicked("stop"))
        if self.route is not None:
            self.route.fallback.on_arrival(self.stop_button, self._stop_arrived)
        self.transcript = w.VBox([])
        self.footer = w.HTML("")
        self.stop_requested = False
        self._stop_signalled = False  # a Stop was sent to a running step as an interrupt
        self._running: set[str] = set()  # ids of tool calls started and not finished
        self._answering = False  # the main thread waits for a click on an approval
        self._items: list[str | _Card | tuple[str, str]] = []  # text, cards and notes, in order
        self._events: list[Event] = []  # for the plain-text record
        self._cards: dict[str, _Card] = {}
        # By id() of the ApprovalRequested: its card, question, button row, and the event itself.
        self._questions: dict[int, tuple[_Card, w.HTML, w.HBox, ApprovalRequested]] = {}
        self._text: w.HTML | None = None
        self._text_buffer = ""
        self._last_flush = 0.0
        self._last_poll = 0.0
        self._cost = 0.0
        self._turns = [0, 0, 0]  # turns, input tokens, output tokens seen in TurnFinished events
        self._finished: RunFinished | None = None
        self._handle: Any = None  # the live panel's display, until finish
        self._record_handle: Any = None  # the same display holding the record, after it
        self._after: list[str] = []  # what the rewinds of the bar below the record said
        header = w.HBox([w.HTML(f"<b>{html.escape(title)}</b>"), self.meter, self.status, self.stop_button])
        super().__init__([header, self.memory, self.transcript, self.footer])

    # -- showing and ending ------------------------------------------------------------------------------
    def show(self) -> None:
        """Display the live panel in the running cell, under a display id that :meth:`finish` replaces."""
        from IPython.display import display

        self._handle = display(self, display_id=True)

    def finish(self, reason: str = "interrupted") -> TranscriptRecord:
        """End the live view: open cards say how the run stopped, and the output becomes the static record.

        ``reason`` is used when the run stopped without a :class:`RunFinished` (closed by an interrupt).
        """
        if self._finished is None:
            turns, tokens_in, tokens_out = self._turns
            self(RunFinished(reason, turns, tokens_in, tokens_out, self._cost))
        record = self.record()
        if self._handle is not None:
            self._handle.update(record)
            self._record_handle, self._handle = self._handle, None
            _close_tree(self)
            if self.rewind is not None and self.checkpointed:
                self.rewind_bar = RewindBar(self.checkpointed, self.rewind, self.add_to_record, self.route)
                self.rewind_bar.show_until_next_cell()
        return record

    def add_to_record(self, text: str) -> None:
        """Append ``text`` (what a rewind did) to the finished run's record, in place in the notebook."""
        self._after.append(text)
        if self._record_handle is not None:
            self._record_handle.update(self.record())

    def record(self) -> TranscriptRecord:
        """The run so far as a static transcript (HTML and plain text)."""
        parts = [f"<div><b>{html.escape(self.title)}</b></div>"]
        for item in self._items:
            if isinstance(item, _Card):
                parts.append(item.html())
            elif isinstance(item, tuple):
                parts.append(_note_html(*item))
            else:
                parts.append(f'<div style="white-space:pre-wrap">{html.escape(item)}</div>')
        if self._text_buffer:
            parts.append(f'<div style="white-space:pre-wrap">{html.escape(self._text_buffer)}</div>')
        if self._finished is not None:
            parts.append(f"<div><small>{html.escape(run_footer(self._finished))}</small></div>")
        parts.extend(f"<pre style='{_PRE};{_AFTER}'>{html.escape(text)}</pre>" for text in self._after)
        body = "".join(parts)
        page = f'<div class="aries-transcript" style="border-left:3px solid #8250df;padding-left:8px">{body}</div>'
        out = io.StringIO()
        text = TextRenderer(out=out, result_lines=40)
        for event in self._events:
            text(event)
        out.writelines(f"{said}\n" for said in self._after)
        return TranscriptRecord(page, out.getvalue())

    # -- text -------------------------------------------------------------------------------------------
    def _append(self, child: w.Widget) -> None:
        self.transcript.children = (*self.transcript.children, child)

    def _flush_text(self) -> None:
        if self._text is not None:
            self._text.value = f'<div style="white-space:pre-wrap">{html.escape(self._text_buffer)}</div>'
            self._last_flush = time.monotonic()

    def _end_text(self) -> None:
        self._flush_text()
        if self._text is not None:
            self._items.append(self._text_buffer)
        self._text, self._text_buffer = None, ""

    def text(self) -> str:
        """Everything the model said in this run, as plain text (for tests and copying)."""
        said = [item for item in self._items if isinstance(item, str)]
        return "".join(said) + self._text_buffer

    # -- events -----------------------------------------------------------------------------------------
    def __call__(self, event: Event) -> None:
        """Render one event."""
        self._keep(event)
        if isinstance(event, Waiting):
            self.status.value = f"waiting for the model… {event.seconds:.1f} s"
        elif isinstance(event, TextDelta):
            self.status.value = ""
            if self._text is None:
                self._text = w.HTML("")
                self._append(self._text)
            self._text_buffer += event.text
            if time.monotonic() - self._last_flush >= TEXT_FLUSH_SECONDS:  # one update per interval, not per token
                self._flush_text()
        else:
            self.status.value = ""
            self._end_text()
            self._render(event)
        self.poll()

    def _keep(self, event: Event) -> None:
        if isinstance(event, Waiting):
            return
        last = self._events[-1] if self._events else None
        if isinstance(event, TextDelta) and isinstance(last, TextDelta):
            self._events[-1] = TextDelta(last.text + event.text, turn=last.turn)
        else:
            self._events.append(event)

    def _render(self, event: Event) -> None:
        if isinstance(event, ToolCallStarted):
            self._card(event.id, event.name, event.arguments)
            self._running.add(event.id)
        elif isinstance(event, ToolCallFinished):
            self._running.discard(event.id)
            self._tool_finished(event)
        elif isinstance(event, ApprovalRequested):
            self._ask(event)
        elif isinstance(event, TurnFinished):
            self._cost += event.cost_usd
            self._turns = [
                self._turns[0] + 1,
                self._turns[1] + event.input_tokens,
                self._turns[2] + event.output_tokens,
            ]
            self.meter.update(event.context_tokens, event.phase, self._cost, event.spend)
        elif isinstance(event, MemoryRetrieved):
            self.memory.retrieved, self.memory.echoed, self.memory.fizzled = list(event.titles), [], []
            self.memory.show()
            self._note(f"memory retrieved: {'; '.join(event.titles)}", "#dbe9ff", live=False)
        elif isinstance(event, MemoryEchoed):
            self.memory.echoed = list(event.titles)
            self.memory.show()
            self._note(f"memory echoed: {'; '.join(event.titles)}", "#d4f8d4", live=False)
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
        elif isinstance(event, Checkpointed):
            self.checkpointed.append(event.turn)
            self._note(checkpoint_text(event), "#f0f0f0")
        elif isinstance(event, Reindexed):
            self._note(f"re-indexed {', '.join(event.paths)}", "#f0f0f0")
        elif isinstance(event, ReflectionWritten):
            self._note(f"reflection saved: {event.title}", "#d4f8d4")
        elif isinstance(event, Notice):
            self._note(event.text, "#fff4ce")
        elif isinstance(event, RunFinished):
            self._run_finished(event)

    def _note(self, text: str, colour: str, live: bool = True) -> None:
        self._items.append((text, colour))
        if live:
            self._append(w.HTML(_note_html(text, colour)))

    # -- cards ------------------------------------------------------------------------------------------
    def _card(self, call_id: str, name: str, arguments: dict[str, Any]) -> _Card:
        card = _Card(call_id, name, arguments)
        card.body = w.VBox([w.HTML(call_body_html(name, arguments))])
        card.widget = w.Accordion(children=[card.body], titles=(card.title(),))
        self._cards[call_id] = card
        self._items.append(card)
        self._append(card.widget)
        return card

    def _retitle(self, card: _Card) -> None:
        if card.widget is not None:
            card.widget.set_title(0, card.title())

    def _tool_finished(self, event: ToolCallFinished) -> None:
        card = self._cards.get(event.id) or self._card(event.id, event.name, {})
        # Cut short, it is no failure: its output says so, then what it printed before it stopped.
        card.output, card.is_error = event.output, event.is_error and not event.interrupted
        if event.interrupted:
            card.state = "interrupted"
        else:
            card.state = f"{'✗' if event.is_error else '✓'} {event.seconds:.1f}s"
        if card.body is not None:
            result = _result_html(card.name, event.output, card.is_error)
            card.body.children = (*card.body.children, w.HTML(result))
        self._retitle(card)

    def _run_finished(self, event: RunFinished) -> None:
        self._finished = event
        for card in self._cards.values():
            if card.state == "…":
                card.state = "interrupted" if event.reason == "interrupted" else f"stopped ({event.reason})"
                self._retitle(card)
        self.stop_button.disabled = True
        self.status.value = ""
        self.footer.value = f"<small>{html.escape(run_footer(event))}</small>"

    # -- approvals and Stop ------------------------------------------------------------------------------
    def _ask(self, event: ApprovalRequested) -> None:
        """Put the question on the card of the call that asks (a card of its own if there is none), expanded,
        with its three buttons."""
        card = self._cards.get(event.tool_call_id)
        if card is None:  # a question from inside a step (the guarded Repl), or from a call shown nowhere
            card = self._card(
                event.tool_call_id or f"approval-{len(self._items)}", event.name, event.arguments
            )
        card.approvals.append(event)
        question = w.HTML(_note_html(f"Allow {event.summary}?", "#fff4ce"))
        buttons = {
            "approve": w.Button(description="Approve", button_style="success"),
            "deny": w.Button(description="Deny", button_style="danger"),
            "run": w.Button(description="Allow for this run"),
        }
        row = w.HBox(list(buttons.values()))
        for choice, button in buttons.items():
            button.on_click(lambda _, choice=choice: self._clicked("decide", str(id(event)), choice))
        self._questions[id(event)] = (card, question, row, event)
        if card.body is not None:
            card.body.children = (*card.body.children, question, row)
        if card.widget is not None:
            card.widget.selected_index = 0
        self._retitle(card)

    def _decided(self, event: ApprovalRequested) -> None:
        if id(event) not in self._questions:
            return
        card, question, row, _ = self._questions.pop(id(event))
        for button in row.children:
            button.disabled = True
        question.value = _note_html(f"{event.summary}: {_decision(event)}", "#fff4ce")
        self._retitle(card)

    def answer(self, event: ApprovalRequested) -> None:
        """Wait for a click on the event's buttons (main thread: the widgets change here); Stop denies.

        Where no click can reach the panel while a cell runs (see :mod:`.ui_events`), the question goes to stdin.
        """
        if event.decision is not None:
            return
        if id(event) not in self._questions:  # asked off the stream: the Repl guard, in the middle of a step
            self._end_text()
            self._keep(event)
            self._ask(event)
        on_main = threading.current_thread() is threading.main_thread()
        if self.route is None or not self.route.clickable or not on_main:
            ask_on_stdin(event)
        else:
            self._answering = True  # a Stop now denies the question rather than interrupting a step
            try:
                while event.decision is None and not self.stop_requested:
                    self.route.fallback.process()
                    self.inbox.deliver()
                    if event.decision is None and not self.stop_requested:
                        self.inbox.wait(_CLICK_WAIT_SECONDS)  # a handler on a subshell wakes it at once
            finally:
                self._answering = False
            if event.decision is None:
                event.deny("The user stopped the run.")
        self._decided(event)

    def _clicked(self, *what: str) -> None:
        """A button's handler: record the click and return; widgets change on the main thread (traitlets are not
        thread-safe). A Stop handled off the main thread (a subshell) arrives while a step may be running."""
        if self.route is not None:
            self.route.note_click()
        self.inbox.put(*what)
        if what[0] == "stop" and threading.current_thread() is not threading.main_thread():
            self._stop_arrived()

    def _apply_click(self, what: tuple[str, ...]) -> None:
        """Apply one recorded click (main thread): a decision on its question, or Stop."""
        if self._finished is not None:
            return  # delivered after the run ended (by the main thread's loop): nothing is left to decide
        if what[0] == "stop":
            self._request_stop()
            return
        _, key, choice = what
        asked = self._questions.get(int(key))
        if asked is None or asked[3].decision is not None:
            return  # a second click on a question already answered
        event = asked[3]
        if choice == "deny":
            event.deny()
        else:
            event.approve(for_run=choice == "run")
        self._decided(event)

    def _request_stop(self) -> None:
        # A Stop that interrupted a running step ends the run through the loop's own interrupt handling; the
        # flag would cut its closing events (the step's output, its checkpoint) short. One that reached the step
        # as it was ending (the interrupt was absorbed) is the run's to honour at its next event.
        self.stop_requested = not (self._stop_signalled and STEP.landed)
        self.stop_button.disabled = True
        self.status.value = "stopping…"

    def _stop_arrived(self) -> None:
        """A Stop click has just reached the kernel, off the main thread (a subshell's handler, or the fallback's
        arrival hook). While the agent's step runs, the main thread sees no event until it returns, so the step
        is interrupted as a kernel interrupt would; never Aries's own code around it. Touches no widget."""
        self.stop_seen.set()
        if not self._answering and self._finished is None and STEP.interrupt():
            # Not ``stop_requested``: the loop's own interrupt handling ends the run and says how.
            self._stop_signalled = True

    def poll(self) -> None:
        """Apply the clicks recorded so far; read the fallback's queue at most every tenth of a second."""
        now = time.monotonic()
        if self.route is not None and now - self._last_poll >= _POLL_SECONDS:
            self._last_poll = now
            self.route.fallback.process()
        self.inbox.deliver()


def _current_route() -> ClickRoute | None:
    """The running kernel's click route (None outside a kernel)."""
    from IPython import get_ipython

    shell = get_ipython()
    return click_route(shell) if shell is not None and getattr(shell, "kernel", None) is not None else None
