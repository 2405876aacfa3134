"""Memory in the loop: warm context, preflight, echo and fizzle, reflection, and compaction's extract step.

:class:`MemoryFeedback` closes the loop between the agent and the vault (SPEC section 6). The loop calls it at
fixed points; :class:`MemoryHook` is the adapter that plugs it into :class:`~aries_kernel.agent.loop.Agent`.

Each feature answers the reason the terminal harness once removed it:

- *Preflight offered irrelevant notes*: a note is offered only when its own similarity to the request clears a
  threshold and it shares a word with it (rank-fused scores are relative, so they cannot say "nothing fits");
  otherwise nothing is offered. Only offered notes count as exposed in the vault session.
- *Per-query credit rewarded exposure*: echoes warm a note now (``vault.boost``) and the vault session credits
  Q-values once, when the agent session ends, damped by exposure (``vault.end_session``).
- *Reflections polluted the vault*: a reflection or an extracted item is compared with the notes it
  resembles; it is dropped when it adds nothing, merged into its twin when it adds a little, written only when
  it is new.

Whatever goes wrong with the vault (missing, empty, unreadable, failing mid-session), the agent keeps working:
memory switches off with the reason, which ``%aries status`` shows, and a :class:`Notice` says so once.
"""

from __future__ import annotations

import atexit
import json
import re
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from traitlets import Bool, Float, Int
from traitlets.config import Configurable

from aries_kernel.agent import HookFactory
from aries_kernel.agent.compaction import SUMMARY_HEADER, render_transcript
from aries_kernel.agent.echo import EchoDetector, content_terms
from aries_kernel.agent.events import (
    Event,
    MemoryEchoed,
    MemoryFizzled,
    MemoryRetrieved,
    Notice,
    ReflectionWritten,
)
from aries_kernel.agent.loop import Agent, AgentHook
from aries_kernel.models import types as mt
from aries_kernel.models.tokens import estimate_text_tokens
from aries_kernel.vault.notes import NoteError, parse_note
from aries_kernel.vault.provenance import Provenance

__all__ = [
    "AGENT_HOOK",
    "PREFLIGHT_OPEN",
    "WARM_OPEN",
    "AriesMemory",
    "MemoryFeedback",
    "MemoryHook",
    "Offered",
    "Saved",
]

WARM_OPEN, WARM_CLOSE = "<warm-context>", "</warm-context>"
PREFLIGHT_OPEN, PREFLIGHT_CLOSE = "<memory-preflight>", "</memory-preflight>"
_TWIN_TITLE_OVERLAP = 0.5  # Jaccard of title terms from which two notes make the same claim
_NOVEL_FRACTION = 0.25  # share of new content words below which a twin's update adds nothing
_SUMMARY_SEPARATOR = "\n\n---\n\n"  # between a compaction summary and the prompt it was merged into
_PREFLIGHT_INTRO = (
    "Notes from your memory that bear on this request (each cleared a relevance threshold). Use them if they "
    "help; they may be out of date."
)
_JSON_BLOCK = re.compile(r"(\{.*\}|\[.*\])", re.DOTALL)

_REFLECT_SYSTEM = """\
You distill a coding agent's recent work into one durable insight for its long-term memory. Answer with \
JSON only: {"title": "...", "content": "..."}. The title is one sentence that states a reusable claim in \
prose (for example "SQLite WAL mode lets readers proceed while one writer commits"), not a topic label. \
The content gives the evidence and context in two to five sentences. If nothing durable was learned, \
answer {"title": "", "content": ""}."""

_EXTRACT_SYSTEM = """\
A coding agent's conversation is about to be compacted. Extract the {low} to {high} most durable items \
from it (decisions, learnings, insights) that should outlive the conversation. Answer with a JSON list \
only: [{{"title": "...", "content": "...", "type": "decision|learning|insight", \
"scope": "project|global"}}]. Each title is one sentence stating a claim in prose; content is two to four \
sentences of evidence. Scope "project" is for facts about this repository, "global" for lessons that hold \
anywhere. Leave out chatter and anything temporary."""


class AriesMemory(Configurable):
    """Settings of memory in the agent loop (``c.AriesMemory.<name>``)."""

    enabled = Bool(
        True, help="Use the vault in the agent loop (warm context, preflight, echo, reflection)."
    ).tag(config=True)
    warm_tokens = Int(2000, help="Size of the warm context block in the system prompt, in tokens.").tag(
        config=True
    )
    warm_notes = Int(8, help="Warmest notes listed in the warm context.").tag(config=True)
    warm_refresh_turns = Int(10, help="Model turns after which the warm context is rebuilt.").tag(config=True)
    preflight_limit = Int(3, help="Most notes offered before a turn.").tag(config=True)
    preflight_min_similarity = Float(
        0.25, help="Semantic similarity a note needs, with a shared word, to be offered before a turn."
    ).tag(config=True)
    preflight_strong_similarity = Float(
        0.5, help="Semantic similarity at which a note is offered even without a shared word."
    ).tag(config=True)
    reflection_threshold = Int(
        150, help="Importance points at which the cheap model writes a reflection."
    ).tag(config=True)
    tool_turn_points = Int(3, help="Importance points of a turn that used tools.").tag(config=True)
    plain_turn_points = Int(1, help="Importance points of a plain conversation turn.").tag(config=True)
    extract_items = Int(
        7, help="Most durable items saved before a compaction summary (at least 3 are asked)."
    ).tag(config=True)


@dataclass
class Offered:
    """A note offered by preflight: where it lives and why it cleared the threshold."""

    title: str
    source: str
    similarity: float
    snippet: str


@dataclass
class Saved:
    """What happened to a reflection or an extracted item: ``action`` is created, merged, dropped or
    skipped."""

    title: str
    source: str
    action: str
    detail: str = ""


@dataclass
class _Warm:
    text: str = ""
    identity_chars: int = 0
    goals_chars: int = 0
    notes: list[str] = field(default_factory=list)
    built_turn: int = 0


class MemoryFeedback:
    """The agent's memory in one session. ``vault`` opens (or returns) the Vault; ``cheap`` returns the cheap
    slot's client. Results of each call are returned; the events it produced wait in :meth:`take_events`."""

    def __init__(
        self,
        vault: Callable[[], Any],
        cheap: Callable[[], Any] | None = None,
        *,
        settings: AriesMemory | None = None,
        config: Any = None,
        clock: Callable[[], float] = time.time,
        on_usage: Callable[[mt.Completion], None] | None = None,
    ) -> None:
        self.settings = settings or AriesMemory(config=config)
        self._open = vault
        self._cheap = cheap
        self._clock = clock
        self._on_usage = on_usage
        self._vault: Any = None
        self.off_reason: str | None = (
            None if self.settings.enabled else "turned off (c.AriesMemory.enabled = False)"
        )
        self._events: list[Event] = []
        self._warm = _Warm()
        self._detector = EchoDetector()
        self.turn = 0
        self.session_id = ""  # the agent session's id (set by MemoryHook): provenance of the notes written
        self.importance = 0
        self.offered: list[Offered] = []
        self._run_offered: dict[str, Offered] = {}  # offered at some turn of the current run, by title
        self._run_echoed: set[str] = set()
        self.last_retrieved: list[str] = []
        self.last_echoed: list[str] = []
        self.last_fizzled: list[str] = []
        self.last_prompt = ""
        self.reflections: list[Saved] = []
        self.extracted: list[Saved] = []
        self.credited: pd.DataFrame | None = None

    # ----------------------------------------------------------------------------------------------- plumbing

    def take_events(self) -> list[Event]:
        """The events produced since the last call, in order (the loop yields them)."""
        events, self._events = self._events, []
        return events

    def _emit(self, event: Event) -> None:
        event.turn = event.turn or self.turn
        self._events.append(event)

    def _off(self, reason: str, said: str = "") -> None:
        """Memory is off for ``reason`` (kept for ``%aries status``), said once per kernel as ``said`` if
        given."""
        if self.off_reason is None:
            self.off_reason = reason
            self._emit(Notice(said or f"Memory is off: {reason}. The agent goes on without it."))

    @contextmanager
    def _guard(self, what: str) -> Iterator[None]:
        """Turn a vault or model failure inside ``what`` into a notice; the session goes on."""
        try:
            yield
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:  # memory must never break the agent; the user hears what failed
            self._emit(Notice(f"Memory: {what} failed ({type(exc).__name__}: {exc})."))

    @property
    def vault(self) -> Any:
        """The open vault, or None when memory is off (opening it on first use, reporting why it failed)."""
        if self._vault is None and self.off_reason is None:
            try:
                self._vault = self._open()
            except (KeyboardInterrupt, SystemExit):
                raise
            except Exception as exc:  # any failure to open means no memory this session, said once
                self._off(f"the vault failed to open ({type(exc).__name__}: {exc})")
                return None
            self._check_empty()
        return self._vault

    @property
    def on(self) -> bool:
        """True when the vault is open and has notes to offer."""
        return self.vault is not None and self.off_reason is None

    def _check_empty(self) -> None:
        counts = self._vault.note_counts()
        if not any(counts.values()):
            places = ", ".join(f"{store.source} at {store.root}" for store in self._vault.stores)
            # Said in one line: the common case of a fresh install, not a fault; status says where the vault is.
            self._off(
                f"the vault has no notes yet ({places}); notes saved with VaultAdd, ProjectSave, reflection "
                "or compaction turn it on",
                "Memory is off: the vault has no notes yet; saving one turns it on (%aries status).",
            )
        elif self.off_reason and self.off_reason.startswith("the vault has no notes"):
            self.off_reason = None
            self._emit(Notice("Memory is on: the vault has notes now."))

    # ------------------------------------------------------------------------------------------------ session

    def start_session(self) -> None:
        """Open the vault session (what it records is credited once at :meth:`end_session`)."""
        vault = self.vault
        if vault is not None:
            with self._guard("starting the vault session"):
                vault.begin_session()

    def end_session(self) -> pd.DataFrame | None:
        """Credit Q-values once for this session through the vault; returns the credits (one row per note)."""
        vault = self._vault
        self.credited = None
        if vault is not None:
            with self._guard("crediting the session"):
                self.credited = vault.end_session()
                if len(self.credited):
                    used = int(self.credited["used"].sum())
                    self._emit(
                        Notice(
                            f"Memory: Q-values credited once for {len(self.credited)} note(s), "
                            f"{used} of them used."
                        )
                    )
        self.turn = 0
        self.importance = 0
        self._warm = _Warm()
        self.offered, self._run_offered, self._run_echoed = [], {}, set()
        return self.credited

    # ------------------------------------------------------------------------------------------- warm context

    def warm_context(self) -> str:
        """The warm block for the system prompt (identity, goals, warmest notes), rebuilt every
        ``warm_refresh_turns`` turns and otherwise unchanged, so the prompt prefix stays stable."""
        stale = not self._warm.text or self.turn - self._warm.built_turn >= self.settings.warm_refresh_turns
        if stale and self.vault is not None:
            with self._guard("building the warm context"):
                self._check_empty()
                self._warm = self._build_warm()
                self._detector = EchoDetector(self._vault.titles())
        return self._warm.text

    def _build_warm(self) -> _Warm:
        budget = self.settings.warm_tokens * 4  # characters, at about four a token
        identity = _self_file(self._vault, "identity")[: int(budget * 0.35)]
        goals = _self_file(self._vault, "goals")[: int(budget * 0.35)]
        parts = [WARM_OPEN]
        if identity:
            parts.append("## Identity\n" + identity)
        if goals:
            parts.append("## Active goals\n" + goals)
        notes: list[str] = []
        if self.off_reason is None:
            frame = self._vault.query_warmth(None, limit=self.settings.warm_notes * 2)
            frame = frame[frame["folder"] != "self"].head(self.settings.warm_notes)
            lines = []
            used = sum(len(part) for part in parts) + len(WARM_CLOSE) + 60
            for row in frame.itertuples():
                line = f"- [[{row.title}]] ({row.source}): {_flat(row.snippet, 200)}"
                if used + len(line) > budget:
                    break
                used += len(line) + 1
                lines.append(line)
                notes.append(str(row.title))
            if lines:
                parts.append("## Warm notes (recently active memory)\n" + "\n".join(lines))
        if len(parts) == 1:
            return _Warm(built_turn=self.turn)
        parts.append(WARM_CLOSE)
        return _Warm("\n".join(parts), len(identity), len(goals), notes, self.turn)

    # ---------------------------------------------------------------------------------------------- preflight

    def preflight(self, user_message: str, recent_context: str = "") -> str | None:
        """The notes relevant enough to offer before a turn, as a marked block; None when none clears the bar.

        The block is rebuilt every turn (it lives in the system prompt's tail); a note counts as retrieved,
        and as exposed in the vault session, when it is first offered in a run.
        """
        self.offered = []
        self.last_retrieved, self.last_echoed, self.last_fizzled = [], [], []
        self.last_prompt = user_message
        if not self.on:
            return None
        query = _flat(f"{user_message} {recent_context[-600:]}", 2000)
        if not re.search(r"\w", query):
            return None
        with self._guard("preflight retrieval"):
            pool = max(10, 3 * self.settings.preflight_limit)
            frame = self._vault.query_ranked(query, limit=pool, record=False)
            self.offered = self._clear_threshold(frame)
        fresh = [o for o in self.offered if o.title not in self._run_offered]
        if fresh:
            with self._guard("recording the notes offered"):
                session = self._vault.begin_session()
                session.record_retrieval(query, [f"{o.source}:{o.title.casefold()}" for o in fresh])
            self._run_offered.update((o.title, o) for o in fresh)
            self._emit(MemoryRetrieved([o.title for o in fresh]))
        if not self.offered:
            return None
        self.last_retrieved = [o.title for o in self.offered]
        lines = [f"- [[{o.title}]] ({o.source}): {o.snippet}" for o in self.offered]
        return "\n".join([PREFLIGHT_OPEN, _PREFLIGHT_INTRO, *lines, PREFLIGHT_CLOSE])

    def _clear_threshold(self, frame: pd.DataFrame) -> list[Offered]:
        chosen: list[Offered] = []
        for row in frame.itertuples():
            if row.folder == "self":
                continue  # identity and goals are in the warm context already
            similarity = float(row.semantic) if pd.notna(row.semantic) else 0.0
            lexical = pd.notna(row.bm25)
            strong = similarity >= self.settings.preflight_strong_similarity
            if strong or (lexical and similarity >= self.settings.preflight_min_similarity):
                chosen.append(
                    Offered(str(row.title), str(row.source), round(similarity, 3), _flat(row.snippet, 240))
                )
            if len(chosen) >= self.settings.preflight_limit:
                break
        return chosen

    # --------------------------------------------------------------------------------------------------- echo

    def after_response(self, text: str, final: bool = True) -> tuple[list[str], list[str]]:
        """Judge ``text`` against the notes on offer: returns (echoed now, fizzled).

        A note echoes at most once in a run, and is boosted in the vault when it does. ``final`` marks the
        run's last reply (no tool calls follow): the notes offered during the run that never echoed fizzle
        then, so a note the model uses after a few tool turns is not first declared a fizzle.
        """
        echoed = [
            note
            for note in self.offered
            if note.title not in self._run_echoed
            and self._detector.echoes(note.title, text, self.last_prompt)
        ]
        for note in echoed:
            with self._guard(f"boosting {note.title!r}"):
                self._vault.boost(note.title, where=note.source)
            self._run_echoed.add(note.title)
        fizzled: list[str] = []
        if final:
            fizzled = [title for title in self._run_offered if title not in self._run_echoed]
            self._run_offered, self._run_echoed = {}, set()
        self.last_echoed = [n.title for n in echoed]
        self.last_fizzled = fizzled
        if echoed:
            self._emit(MemoryEchoed(list(self.last_echoed)))
        if fizzled:
            self._emit(MemoryFizzled(list(fizzled)))
        return self.last_echoed, self.last_fizzled

    # --------------------------------------------------------------------------------------------- reflection

    def on_turn(self, tool_using: bool, history: Sequence[mt.Message] = ()) -> Saved | None:
        """Count a finished turn; past the threshold, reflect on ``history`` with the cheap slot and reset."""
        turn = self.turn or None  # the turn that finished (0 outside a loop: unknown)
        self.turn += 1
        self.importance += self.settings.tool_turn_points if tool_using else self.settings.plain_turn_points
        if self.importance < self.settings.reflection_threshold:
            return None
        self.importance = 0
        if self._vault is None and self.vault is None:
            return None
        saved: Saved | None = None
        with self._guard("reflection"):
            transcript = render_transcript(list(history)[-60:], 24_000)
            reply = self._ask_cheap(_REFLECT_SYSTEM, "Recent activity of the agent:\n\n" + transcript)
            item = _first_item(reply)
            if item is None or not item.get("title"):
                saved = Saved("", "global", "skipped", "the cheap model found nothing durable to reflect on")
            else:
                saved = self._save(
                    str(item["title"]),
                    str(item.get("content", "")),
                    "insight",
                    "global",
                    Provenance("reflection", self.session_id, turn),
                )
            self.reflections.append(saved)
            if saved.action in ("created", "merged"):
                self._emit(ReflectionWritten(saved.title))
            else:
                self._emit(Notice(f"Memory: reflection {saved.action}: {saved.detail}."))
        return saved

    # --------------------------------------------------------------------------------------------- compaction

    def extract_before_compaction(self, history: Sequence[mt.Message]) -> list[str]:
        """Save the 3 to 7 most durable items of ``history`` (the part about to be summarized) into the vault
        or the project brain; returns the titles saved (created or merged), for the summary to name."""
        self.extracted = []
        if self._vault is None and self.vault is None:
            return []
        high = max(3, self.settings.extract_items)
        with self._guard("extracting durable items before compaction"):
            transcript = render_transcript(list(history), 48_000)
            reply = self._ask_cheap(
                _EXTRACT_SYSTEM.format(low=3, high=high), "The conversation:\n\n" + transcript
            )
            items = _items(reply)[:high]
            for item in items:
                if not isinstance(item, dict) or not str(item.get("title", "")).strip():
                    continue
                scope = "project" if str(item.get("scope", "")).lower() == "project" else "global"
                kind = str(item.get("type") or "insight")
                provenance = Provenance("compaction", self.session_id, self.turn or None)
                self.extracted.append(
                    self._save(str(item["title"]), str(item.get("content", "")), kind, scope, provenance)
                )
        titles = [s.title for s in self.extracted if s.action in ("created", "merged")]
        if titles:
            self._emit(Notice("Memory: saved before compaction: " + ", ".join(f"[[{t}]]" for t in titles)))
        return titles

    # ------------------------------------------------------------------------------------------ writing notes

    def _ask_cheap(self, system: str, user: str) -> str:
        if self._cheap is None:
            raise RuntimeError("no cheap model slot is available")
        client = self._cheap()
        completion = client.complete(
            mt.ModelRequest(messages=[mt.Message("user", user)], system=system, max_tokens=1500)
        )
        if self._on_usage is not None:
            self._on_usage(completion)
        return str(completion.message.content)

    def _save(self, title: str, content: str, kind: str, where: str, provenance: Provenance) -> Saved:
        """Write a claim unless the vault already holds it: dropped when it adds nothing, merged when it adds
        a little to its twin, created otherwise; ``provenance`` says which step of the agent wrote it."""
        title = " ".join(title.split()).rstrip(".")
        if len(title.split()) < 3:
            return Saved(title, where, "skipped", f"{title!r} is a label, not a claim in prose")
        if where == "project" and not any(s.source == "project" for s in self._vault.stores):
            where = "global"
        twin = self._twin(title)
        if twin is not None:
            source, row = twin
            old = set(content_terms(f"{row['title']} {row['body']}"))
            new = list(dict.fromkeys(content_terms(f"{title} {content}")))
            novel = [t for t in new if t not in old]
            if not new or len(novel) / len(new) < _NOVEL_FRACTION:
                return Saved(row["title"], source, "dropped", f"adds nothing to [[{row['title']}]]")
            stamp = time.strftime("%Y-%m-%d", time.gmtime(self._clock()))
            merged = f"{row['body'].rstrip()}\n\nAdded {stamp}: {title}. {content.strip()}"
            self._vault.add(row["title"], merged, kind, where=source, provenance=provenance)
            return Saved(row["title"], source, "merged", f"merged into [[{row['title']}]]")
        result = self._vault.add(title, content.strip() or title, kind, where=where, provenance=provenance)
        if result.action != "created":
            return Saved(
                result.title,
                result.source,
                "dropped" if result.action == "unchanged" else "merged",
                f"the vault matched it to [[{result.title}]]",
            )
        self._check_empty()
        return Saved(result.title, result.source, "created")

    def _twin(self, title: str) -> tuple[str, dict[str, Any]] | None:
        """The existing note making the same claim as ``title`` (its title terms mostly shared), if any."""
        mine = set(content_terms(title))
        if not mine or sum(self._vault.note_counts().values()) == 0:
            return None
        frame = self._vault.query_ranked(title, limit=5, record=False)
        for row in frame.itertuples():
            theirs = set(content_terms(str(row.title)))
            if theirs and len(mine & theirs) / len(mine | theirs) >= _TWIN_TITLE_OVERLAP:
                store = next(s for s in self._vault.stores if s.source == row.source)
                found = store.find(str(row.title))
                if found is not None:
                    return str(row.source), found
        return None

    # ------------------------------------------------------------------------------------------------- status

    def status(self) -> str:
        """Lines for ``%aries status``: on or off (and why), warm context size and contents, the last turn's
        retrieved, echoed and fizzled notes, the reflection accumulator and what was saved."""
        if self._vault is None:
            if self.off_reason is not None:
                return f"Memory: off, {self.off_reason}."
            return "Memory: on; the vault opens with the first prompt."
        lines = [f"Memory: {'on' if self.off_reason is None else 'off, ' + self.off_reason}"]
        warm = self._warm
        if warm.text:
            what = [
                f"identity {warm.identity_chars:,} chars" if warm.identity_chars else "no identity",
                f"goals {warm.goals_chars:,} chars" if warm.goals_chars else "no goals",
                f"{len(warm.notes)} warm note(s)",
            ]
            lines.append(
                f"Warm context: ~{estimate_text_tokens(warm.text):,} tokens ({', '.join(what)}), built at turn "
                f"{warm.built_turn}, refreshed every {self.settings.warm_refresh_turns} turns"
            )
            if warm.notes:
                lines.append("  warm notes: " + "; ".join(warm.notes))
        else:
            lines.append("Warm context: empty (no identity, goals or warm notes yet)")
        lines.append(
            f"Last turn: retrieved {_names(self.last_retrieved)}; echoed {_names(self.last_echoed)}; "
            f"fizzled {_names(self.last_fizzled)}"
        )
        lines.append(
            f"Reflection: {self.importance}/{self.settings.reflection_threshold} points"
            + (
                f"; last: {self.reflections[-1].action} {self.reflections[-1].title!r}"
                if self.reflections
                else ""
            )
        )
        if self.extracted:
            lines.append(
                "Saved at the last compaction: "
                + "; ".join(f"{s.action} {s.title!r}" for s in self.extracted)
            )
        return "\n".join(lines)


class MemoryHook(AgentHook):
    """Plugs a :class:`MemoryFeedback` into the agent loop's hook points."""

    def __init__(self, feedback: MemoryFeedback) -> None:
        self.feedback = feedback
        self._started = False

    @classmethod
    def for_agent(
        cls, agent: Agent, vault: Callable[[], Any] | None = None, settings: AriesMemory | None = None
    ) -> MemoryHook:
        """Memory for ``agent``: the context's shared vault (or ``vault()``), the agent's cheap slot, and the
        cheap calls' usage recorded in the agent's session."""
        context = agent.context

        def context_vault() -> Any:
            from aries_kernel.pillars import shared_vault

            if context is None:
                raise RuntimeError("the agent has no Aries context to find the vault in")
            return shared_vault(context)

        def usage(completion: mt.Completion) -> None:
            agent.ensure_session().add_usage(completion.slot, completion.model, completion.usage)

        feedback = MemoryFeedback(
            vault or context_vault,
            lambda: agent.client("cheap"),
            settings=settings,
            config=getattr(context, "config", None),
            on_usage=usage,
        )
        # A kernel that shuts down without `%aries reset` still ends its session: credit it on the way out.
        # Held weakly, so an agent dropped before then (and its router's connections) can still be collected.
        atexit.register(_call_if_alive, weakref.WeakMethod(feedback.end_session))
        return cls(feedback)

    def _drain(self) -> list[Event]:
        return self.feedback.take_events()

    def system_sections(self, agent: Agent) -> list[str]:
        """The warm context, at the top of every system prompt (so it survives compaction)."""
        if not self._started:
            self._started = True
            self.feedback.start_session()
        text = self.feedback.warm_context()
        return [text] if text else []

    def before_turn(self, agent: Agent, turn: int) -> Iterable[Event]:
        """Preflight: offer the notes relevant to the last user message and the recent context."""
        self.feedback.turn = turn
        messages = agent.session.messages if agent.session is not None else []
        user = next((m.content for m in reversed(messages) if m.role == "user" and m.content), "")
        if user.startswith(
            SUMMARY_HEADER
        ):  # after compaction the summary leads the message: ask with the prompt
            _, separator, prompt = user.rpartition(_SUMMARY_SEPARATOR)
            user = prompt if separator else ""
        recent = " ".join(m.content for m in messages[-4:] if m.role == "assistant" and m.content)
        block = self.feedback.preflight(user, recent)
        if block:
            agent.turn_context.append(block)
        return self._drain()

    def after_response(self, agent: Agent, turn: int, message: mt.Message) -> Iterable[Event]:
        """Echo and fizzle of the notes offered before this turn, judged on the reply and its tool arguments
        (a note used in Repl code is used too)."""
        arguments = [
            value
            for call in message.tool_calls
            for value in call.arguments.values()
            if isinstance(value, str)
        ]
        self.feedback.after_response("\n".join([message.content, *arguments]), final=not message.tool_calls)
        return self._drain()

    def after_turn(self, agent: Agent, turn: int, tools_used: int) -> Iterable[Event]:
        """Importance accounting and, at the threshold, a reflection."""
        history = agent.session.messages if agent.session is not None else []
        self.feedback.session_id = agent.session.id if agent.session is not None else ""
        self.feedback.on_turn(tools_used > 0, history)
        return self._drain()

    def before_summarize(self, agent: Agent, older: list[mt.Message]) -> Iterable[Event]:
        """Compaction's extract step: save the durable items of ``older`` before it is summarized away; the
        summary names the notes saved."""
        self.feedback.session_id = agent.session.id if agent.session is not None else ""
        agent.summary_notes.extend(self.feedback.extract_before_compaction(older))
        return self._drain()

    def status(self, agent: Agent) -> str | None:
        """The memory lines of ``%aries status``."""
        return self.feedback.status()

    def end_session(self, agent: Agent) -> Iterable[Event]:
        """Credit the vault session once."""
        self.feedback.end_session()
        self._started = False
        return self._drain()


def _call_if_alive(method: weakref.WeakMethod[Callable[[], object]]) -> None:
    bound = method()
    if bound is not None:
        bound()


AGENT_HOOK: HookFactory = MemoryHook.for_agent  # every agent built by agent_for() has memory


# ---------------------------------------------------------------------------------------------------- helpers


def _self_file(vault: Any, name: str) -> str:
    """The body of ``self/<name>.md`` in the global vault (front matter dropped), or ""."""
    for store in vault.stores:
        if store.source != "global":
            continue
        try:
            # parse_note reads only a regular file, bounded in size: a FIFO or symlink here never blocks.
            return parse_note(store.root, store.root / "self" / f"{name}.md").body
        except (OSError, NoteError):
            return ""
    return ""


def _flat(text: Any, limit: int) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _names(titles: Sequence[str]) -> str:
    return ", ".join(f"[[{t}]]" for t in titles) if titles else "none"


def _parse_json(text: str) -> Any:
    match = _JSON_BLOCK.search(text)
    if match is None:
        return None
    try:
        return json.loads(match.group(1))
    except json.JSONDecodeError:
        return None


def _first_item(text: str) -> dict[str, Any] | None:
    """The reflection in a reply: a JSON object, or else a first line as title and the rest as content."""
    data = _parse_json(text)
    if isinstance(data, list):
        data = data[0] if data else None
    if isinstance(data, dict):
        return data
    head, _, rest = text.strip().partition("\n")
    head = head.strip().strip("#").strip()
    return {"title": head, "content": rest.strip()} if head else None


def _items(text: str) -> list[Any]:
    data = _parse_json(text)
    if isinstance(data, dict):
        data = data.get("items", [data])
    return list(data) if isinstance(data, list) else []
