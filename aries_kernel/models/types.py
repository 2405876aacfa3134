"""Provider-neutral message, request, usage and stream-event types shared by the router and the agent loop."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]  # already JSON-decoded


@dataclass
class Message:
    role: Literal["user", "assistant", "tool"]
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)  # assistant messages only
    tool_call_id: str | None = None  # tool messages only
    is_error: bool = False  # tool messages only


@dataclass
class ToolSchema:
    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of type "object"


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0


@dataclass
class ModelRequest:
    messages: list[Message]
    system: str = ""
    tools: list[ToolSchema] = field(default_factory=list)
    max_tokens: int = 4096
    temperature: float | None = None


# stream events, in order; the last one is always a Completion
@dataclass
class TextDelta:
    text: str


@dataclass
class ToolCallStarted:
    id: str
    name: str


@dataclass
class ToolCallDelta:
    id: str
    arguments_fragment: str


StopReason = Literal["end_turn", "tool_use", "max_tokens", "stop_sequence", "refusal", "other"]


@dataclass
class Completion:
    message: Message  # the assembled assistant message (text + tool_calls)
    stop_reason: StopReason
    usage: Usage
    model: str
    slot: str
    seconds: float


StreamEvent = TextDelta | ToolCallStarted | ToolCallDelta | Completion
