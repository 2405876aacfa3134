"""Token estimates before a call, for context management; calibrated by the counts servers report after it.

The one estimator of the code base (the agent's phases, compaction and memory use it too). Providers count
tokens with their own tokenizers and report the count in each response's usage; before a call only Anthropic
can count (``SlotClient.count_tokens``, one small request), so context management uses this free estimate:
characters / 4 (the usual rule for BPE tokenizers on English and code) plus a small per-message overhead,
scaled by how far off earlier estimates were for this model at this server (:func:`estimator_for`): a small
model's tokenizer can need a third more tokens than the rule says.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Sequence

from aries_kernel.models.types import Message, ModelRequest

__all__ = [
    "TokenEstimator",
    "estimate_text_tokens",
    "estimate_tokens",
    "estimator_for",
    "history_tokens",
    "message_tokens",
]

_CHARS_PER_TOKEN = 4.0
_MESSAGE_OVERHEAD = 4  # role markers and separators per message
_TOOL_CALL_OVERHEAD = 8


def estimate_text_tokens(text: str) -> int:
    """Tokens in ``text`` by the characters / 4 rule."""
    return math.ceil(len(text) / _CHARS_PER_TOKEN)


def message_tokens(message: Message) -> int:
    """Uncalibrated tokens of one message, tool-call arguments included."""
    tokens = _MESSAGE_OVERHEAD + estimate_text_tokens(message.content)
    for call in message.tool_calls:
        tokens += _TOOL_CALL_OVERHEAD + estimate_text_tokens(
            call.name + json.dumps(call.arguments, default=str)
        )
    return tokens


def history_tokens(messages: Sequence[Message]) -> int:
    """Uncalibrated tokens of a message list."""
    return sum(message_tokens(message) for message in messages)


def estimate_tokens(request: ModelRequest) -> int:
    """Uncalibrated estimate of the input tokens of ``request``: system, messages, tool calls and tool
    schemas.
    """
    total = estimate_text_tokens(request.system) + history_tokens(request.messages)
    for tool in request.tools:
        total += estimate_text_tokens(tool.name + tool.description + json.dumps(tool.parameters))
    return total


class TokenEstimator:
    """Per-slot estimates, corrected by the ratio of reported to estimated input tokens of past calls."""

    _SMOOTHING = 0.3  # weight of the newest observation
    _BOUNDS = (0.5, 2.5)  # a wildly off observation (e.g. heavy caching) must not wreck the estimate

    def __init__(self) -> None:
        self.ratio = 1.0
        self._lock = threading.Lock()

    def estimate(self, request: ModelRequest) -> int:
        """Calibrated estimate of the input tokens of ``request``."""
        return math.ceil(estimate_tokens(request) * self.ratio)

    def observe(self, request: ModelRequest, reported_input_tokens: int) -> None:
        """Learn from the provider's count for a request that was just sent."""
        raw = estimate_tokens(request)
        if raw <= 0 or reported_input_tokens <= 0:
            return
        low, high = self._BOUNDS
        observed = min(high, max(low, reported_input_tokens / raw))
        with self._lock:
            self.ratio += self._SMOOTHING * (observed - self.ratio)


_estimators: dict[str, TokenEstimator] = {}
_estimators_lock = threading.Lock()


def estimator_for(key: str) -> TokenEstimator:
    """The estimator of one model at one server (``key``: provider, base URL and model), made on first use."""
    with _estimators_lock:
        return _estimators.setdefault(key, TokenEstimator())
