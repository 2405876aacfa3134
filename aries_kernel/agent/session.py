"""Persisted agent sessions: one JSON-lines file per session under ``<root>/.aries/sessions/``.

Every record is appended the moment it happens (a message, a tool call with its result, an approval, the usage
of a model call, a compaction), so an interrupt or a crash keeps everything said so far, and ``%aries resume``
replays the file to continue. A compaction writes the whole new message list, which replaces the old one on
replay.

Every record passes through :func:`aries_kernel.redact.redact` on its way to the file, so a key that reached a
message, a tool result or an argument is on disk only as ``[REDACTED:<kind>]``.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from aries_kernel.models.types import Message, SlotUsage, ToolCall, Usage
from aries_kernel.redact import redact

log = logging.getLogger(__name__)

__all__ = ["AgentSession", "sessions_dir", "list_sessions", "message_to_dict", "message_from_dict"]


def sessions_dir(root: Path) -> Path:
    """Where the sessions of the project at ``root`` are kept."""
    return root / ".aries" / "sessions"


def message_to_dict(message: Message) -> dict[str, Any]:
    """A message as plain JSON data."""
    return asdict(message)


def message_from_dict(data: dict[str, Any]) -> Message:
    """The message of :func:`message_to_dict`."""
    calls = [ToolCall(**call) for call in data.get("tool_calls", [])]
    return Message(**{**data, "tool_calls": calls})


@dataclass
class AgentSession:
    """One conversation with the agent and its file."""

    id: str
    path: Path
    messages: list[Message] = field(default_factory=list)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    approvals: list[dict[str, Any]] = field(default_factory=list)
    # Runs that stopped early: (how many messages there were then, why), for the user's transcript only.
    stops: list[tuple[int, str]] = field(default_factory=list)
    usage: dict[str, SlotUsage] = field(default_factory=dict)
    prompts: int = 0
    turns: int = 0
    problem: str | None = None  # why the session is not being saved, if it is not

    @classmethod
    def create(cls, root: Path, **meta: Any) -> AgentSession:
        """A new, empty session with its file started."""
        session_id = time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)
        directory = sessions_dir(root)
        session = cls(id=session_id, path=directory / f"{session_id}.jsonl")
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            session._not_saved(exc)
        session._append({"kind": "meta", "id": session_id, "created": time.time(), "root": str(root), **meta})
        return session

    @classmethod
    def load(cls, path: Path) -> AgentSession:
        """Replay a session file; a torn last line (a kill mid-write) is skipped, a corrupt one elsewhere is
        named."""
        session = cls(id=path.stem, path=path)
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                if number == len(lines):
                    break
                raise ValueError(
                    f"{path}:{number} is not valid JSON ({exc}); the session cannot be resumed."
                ) from exc
            session._replay(record)
        return session

    def _replay(self, record: dict[str, Any]) -> None:
        kind = record.get("kind")
        if kind == "message":
            self.messages.append(message_from_dict(record["message"]))
        elif kind == "prompt":
            self.prompts += 1
        elif kind == "tool":
            self.tool_calls.append(record)
        elif kind == "approval":
            self.approvals.append(record)
        elif kind == "stop":
            self.stops.append((int(record["after"]), str(record["why"])))
        elif kind == "usage":
            self._add_usage(record)
        elif kind == "compaction":
            self.messages = [message_from_dict(item) for item in record["messages"]]

    def _append(self, record: dict[str, Any]) -> None:
        if self.problem is not None:
            return
        line = json.dumps(_redacted(record), default=str)
        try:
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write(line + "\n")
        except OSError as exc:
            self._not_saved(exc)

    def _not_saved(self, exc: OSError) -> None:
        self.problem = (
            f"This agent session is kept in memory only: {self.path.parent} cannot be written ({exc}), so "
            "%aries resume will not find it after a restart."
        )
        log.warning("%s", self.problem)

    def _add_usage(self, record: dict[str, Any]) -> None:
        usage = Usage(
            int(record.get("input_tokens", 0)),
            int(record.get("output_tokens", 0)),
            int(record.get("cache_read_tokens", 0)),
            int(record.get("cache_write_tokens", 0)),
            float(record.get("cost_usd", 0.0)),
        )
        self.usage.setdefault(record["slot"], SlotUsage()).add(usage)
        if record["slot"] == "primary":
            self.turns += 1

    def add_prompt(self, text: str, **meta: Any) -> None:
        """Note that a new prompt starts a run (its user message is added separately); ``meta`` (the run's
        permission mode) goes with it."""
        self.prompts += 1
        self._append({"kind": "prompt", "text": text, **meta, "time": time.time()})

    def add_message(self, message: Message) -> None:
        """Append ``message`` to the transcript and the file."""
        self.messages.append(message)
        self._append({"kind": "message", "message": message_to_dict(message), "time": time.time()})

    def add_stop(self, why: str) -> None:
        """Note that a run stopped early (a failed call, an interrupt): shown in the transcript, never sent to
        the model as if it had said it."""
        self.stops.append((len(self.messages), why))
        self._append({"kind": "stop", "after": len(self.messages), "why": why, "time": time.time()})

    def add_tool_call(self, record: dict[str, Any]) -> None:
        """Record one tool call: id, name, arguments, output, is_error, seconds, turn."""
        record = {"kind": "tool", **record, "time": time.time()}
        self.tool_calls.append(record)
        self._append(record)

    def add_approval(
        self, tool_call_id: str, name: str, approved: bool, by: str, reason: str = "", summary: str = ""
    ) -> None:
        """Record who ("user", "policy" or "nobody") allowed or refused a tool call, or one effect of a Repl
        step (``summary`` says which)."""
        record = {
            "kind": "approval",
            "tool_call_id": tool_call_id,
            "name": name,
            "approved": approved,
            "by": by,
            "reason": reason,
            "time": time.time(),
        }
        if summary:
            record["summary"] = summary
        self.approvals.append(record)
        self._append(record)

    def add_usage(self, slot: str, model: str, usage: Usage) -> None:
        """Record the tokens (prompt-cache reads and writes included) and cost of one model call on ``slot``."""
        record = {
            "kind": "usage",
            "slot": slot,
            "model": model,
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cache_read_tokens": usage.cache_read_tokens,
            "cache_write_tokens": usage.cache_write_tokens,
            "cost_usd": usage.cost_usd,
            "time": time.time(),
        }
        self._add_usage(record)
        self._append(record)

    def replace_messages(self, messages: list[Message], stage: str) -> None:
        """Swap in a compacted transcript (the file keeps the old records before it)."""
        self.messages = list(messages)
        self._append(
            {
                "kind": "compaction",
                "stage": stage,
                "messages": [message_to_dict(m) for m in messages],
                "time": time.time(),
            }
        )

    def repl_steps(self) -> list[str]:
        """The code of every Repl call, in order: the agent's work as re-runnable cells."""
        return [
            str(call["arguments"].get("code", "")) for call in self.tool_calls if call.get("name") == "Repl"
        ]

    @property
    def cost_usd(self) -> float:
        """Total cost of the session over every slot."""
        return sum(slot.cost_usd for slot in self.usage.values())


def _redacted(value: Any) -> Any:
    """``value`` (a record) with every string in it redacted, keys of dicts included."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {_redacted(key): _redacted(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redacted(item) for item in value]
    return value


def list_sessions(root: Path) -> list[Path]:
    """Session files of the project, oldest first."""
    directory = sessions_dir(root)
    if not directory.is_dir():
        return []
    return sorted(directory.glob("*.jsonl"), key=lambda path: (path.stat().st_mtime, path.name))
