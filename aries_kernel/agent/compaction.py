"""Context management: keep a conversation under its share of the model's context window.

Two stages, run only at a turn boundary (never between a tool call and its result):

1. *Prune*: old tool results are replaced by a one-line marker, and long arguments of old tool calls are cut,
   so the call skeleton (which tool, on what) stays and the model still knows what it did. The most recent
   tool results, up to a token budget, are protected.
2. *Summarize*: if still over, the older part of the history is summarized by the cheap model into a
   structured summary (goal, constraints, discoveries, work done, relevant files) that replaces it; the recent
   tail is kept word for word. Without a working cheap model the summary is built mechanically from the
   transcript.

The system prompt is never part of the history, so it always survives. The transcript sent to the summarizer
and the summary it returns are redacted (:func:`aries_kernel.redact.redact`): a key never rides along.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace

from aries_kernel.agent.repl import truncate
from aries_kernel.models.tokens import history_tokens, message_tokens
from aries_kernel.models.types import Message, ModelRequest, ToolCall
from aries_kernel.redact import redact

__all__ = [
    "message_tokens",
    "history_tokens",
    "prune",
    "split_point",
    "summarize",
    "with_summary",
    "mechanical_summary",
    "render_transcript",
    "SUMMARY_HEADER",
    "Summarizer",
    "PRUNED_MARKER",
]

PRUNED_MARKER = "[tool result pruned to save context"
SUMMARY_HEADER = "[Summary of the earlier conversation, written when it was compacted]"
_ARGUMENT_KEEP = 200
_TRANSCRIPT_RESULT_CHARS = 1500

Summarizer = Callable[[ModelRequest], str]

_SUMMARY_SYSTEM = """\
You compress the history of a coding agent's session so the agent can continue without it. Write a \
structured summary with exactly these sections, as markdown headings: Goal, Constraints, Discoveries, Work \
done, Relevant files. Be specific: keep names, paths, numbers, decisions and open questions; drop chatter. \
At most 600 words."""


def _skeleton(call: ToolCall) -> ToolCall:
    arguments = {
        key: (
            f"{value[:80]}... [{len(value):,} characters pruned]"
            if isinstance(value, str) and len(value) > _ARGUMENT_KEEP
            else value
        )
        for key, value in call.arguments.items()
    }
    return ToolCall(call.id, call.name, arguments)


def prune(messages: Sequence[Message], protect_tokens: int) -> tuple[list[Message], int]:
    """Prune tool results older than the newest ``protect_tokens``; returns the new list and the count.

    The results of the latest tool-calling message are always kept (the model has not seen them yet), and so
    is the result that crosses the budget. Tool calls keep their name and short arguments; results become a
    marker.
    """
    calls = {call.id: call for message in messages for call in message.tool_calls}
    result = list(messages)
    latest_call = max((i for i, message in enumerate(result) if message.tool_calls), default=len(result))
    seen = 0
    boundary = 0  # tool results before this index are pruned
    for index in range(len(result) - 1, -1, -1):
        message = result[index]
        if message.role == "tool" and not message.content.startswith(PRUNED_MARKER):
            seen += message_tokens(message)
            if seen > protect_tokens:
                boundary = min(index, latest_call)
                break
    changed = 0
    pruned_ids: set[str] = set()
    for index in range(boundary):
        message = result[index]
        if message.role == "tool" and not message.content.startswith(PRUNED_MARKER):
            call = calls.get(message.tool_call_id or "")
            name = call.name if call else "tool"
            marker = f"{PRUNED_MARKER}: {name} returned {len(message.content):,} characters]"
            result[index] = replace(message, content=marker)
            pruned_ids.add(message.tool_call_id or "")
            changed += 1
    for index in range(boundary):
        message = result[index]
        if message.role == "assistant" and any(call.id in pruned_ids for call in message.tool_calls):
            skeletons = [_skeleton(call) if call.id in pruned_ids else call for call in message.tool_calls]
            if skeletons != message.tool_calls:
                result[index] = replace(message, tool_calls=skeletons)
    return result, changed


def split_point(messages: Sequence[Message], keep_tokens: int) -> int:
    """Index where the kept tail starts: the earliest turn start whose tail fits in ``keep_tokens``.

    A tail never starts on a tool result, so every kept result still follows its call. The last turn start is
    chosen even when it alone is over budget; 0 means there is nothing before a turn start to summarize.
    """
    sizes = [message_tokens(message) for message in messages]
    starts = [index for index, message in enumerate(messages) if index > 0 and message.role != "tool"]
    if not starts:
        return 0
    chosen = starts[-1]
    tail = sum(sizes[chosen:])
    for index in reversed(starts[:-1]):
        tail += sum(sizes[index:chosen])
        if tail > keep_tokens:
            break
        chosen = index
    return chosen


def render_transcript(messages: Sequence[Message], limit_chars: int) -> str:
    """The messages as a plain transcript for the summarizer, long tool results cut."""
    calls = {call.id: call for message in messages for call in message.tool_calls}
    lines = []
    for message in messages:
        if message.role == "tool":
            call = calls.get(message.tool_call_id or "")
            label = f"RESULT of {call.name}" if call else "RESULT"
            lines.append(
                f"{label}{' (error)' if message.is_error else ''}: "
                f"{truncate(message.content, _TRANSCRIPT_RESULT_CHARS)}"
            )
            continue
        if message.content:
            lines.append(f"{message.role.upper()}: {message.content}")
        for call in message.tool_calls:
            arguments = json.dumps(_skeleton(call).arguments, default=str)
            lines.append(f"CALL {call.name} {arguments}")
    return truncate("\n".join(lines), limit_chars)


def mechanical_summary(messages: Sequence[Message]) -> str:
    """A summary built without a model: the user's requests, the tools used and the files touched."""
    asks = [
        truncate(message.content, 300) for message in messages if message.role == "user" and message.content
    ]
    tools: dict[str, int] = {}
    files: list[str] = []
    for message in messages:
        for call in message.tool_calls:
            tools[call.name] = tools.get(call.name, 0) + 1
            path = call.arguments.get("file_path") or call.arguments.get("notebook_path")
            if isinstance(path, str) and path not in files:
                files.append(path)

    def section(title: str, items: list[str]) -> list[str]:
        return [f"## {title}", *(f"- {item}" for item in items or ["none"])]

    return "\n".join(
        [
            *section("Goal", asks[-5:]),
            *section("Constraints", ["not extracted: the summary model was unavailable"]),
            *section("Work done", [f"{name}: {count} call(s)" for name, count in tools.items()]),
            *section("Relevant files", files),
        ]
    )


def summarize(older: Sequence[Message], summarizer: Summarizer | None, limit_chars: int) -> tuple[str, str]:
    """A structured summary of ``older``, redacted: (text, how it was made: "model" or the reason it fell
    back)."""
    if summarizer is not None:
        transcript = redact(render_transcript(older, limit_chars))
        request = ModelRequest(
            messages=[Message("user", "Summarize this session history:\n\n" + transcript)],
            system=_SUMMARY_SYSTEM,
            max_tokens=2048,
        )
        try:
            text = summarizer(request).strip()
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:  # a failed summary must not lose the session; fall back and say why
            return redact(mechanical_summary(older)), f"{type(exc).__name__}: {exc}"
        if text:
            return redact(text), "model"
    return redact(mechanical_summary(older)), "no summary model"


def with_summary(summary: str, tail: Sequence[Message]) -> list[Message]:
    """The compacted history: the summary first, merged into the tail's first message if that is a user's."""
    block = f"{SUMMARY_HEADER}\n{summary}"
    if tail and tail[0].role == "user":
        return [replace(tail[0], content=f"{block}\n\n---\n\n{tail[0].content}"), *tail[1:]]
    return [Message("user", block), *tail]
