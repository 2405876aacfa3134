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
class SlotUsage:
    """Running totals of the calls on one model slot: a router's slot client, an agent session's slot."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0  # prompt tokens served from the provider's cache (not in input_tokens)
    cache_write_tokens: int = 0  # prompt tokens written to it
    cost_usd: float = 0.0
    seconds: float = 0.0  # wall time of the calls (an agent session's file does not keep it: 0 there)

    def add(self, usage: Usage, seconds: float = 0.0) -> None:
        """Count one call that used ``usage`` and took ``seconds``."""
        self.calls += 1
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.cache_read_tokens += usage.cache_read_tokens
        self.cache_write_tokens += usage.cache_write_tokens
        self.cost_usd += usage.cost_usd
        self.seconds += seconds


@dataclass
class ModelRequest:
    messages: list[Message]
    system: str = ""
    tools: list[ToolSchema] = field(default_factory=list)
    max_tokens: int = 4096
    temperature: float | None = None


# stream events, in order; the last one is always a Completion
@dataclass
class StreamText:
    """A piece of the model's text in a provider's stream (the agent yields it as ``events.TextDelta``)."""

    text: str


@dataclass
class StreamToolCall:
    """A tool call opens in a provider's stream; its arguments follow as :class:`ToolCallDelta` (the agent's
    ``events.ToolCallStarted`` comes when the assembled call is about to run)."""

    id: str
    name: str


@dataclass
class ToolCallDelta:
    id: str
    arguments_fragment: str


@dataclass
class StreamUsage:
    """The tokens a provider's stream has reported so far (Anthropic's says the input at its start): what a
    call stopped before its end is counted at."""

    usage: Usage


StopReason = Literal["end_turn", "tool_use", "max_tokens", "stop_sequence", "refusal", "other"]


@dataclass
class Completion:
    message: Message  # the assembled assistant message (text + tool_calls)
    stop_reason: StopReason
    usage: Usage
    model: str
    slot: str
    seconds: float


StreamEvent = StreamText | StreamToolCall | ToolCallDelta | StreamUsage | Completion
