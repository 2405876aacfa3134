"""Models: providers over the official SDKs, the four-slot router, token estimates and rlm sub-calls.

``ModelRouter(config=...)`` maps the slots primary, reasoning, cheap and bulk to models;
``router.client(slot)`` streams or completes a :class:`ModelRequest`; :class:`Rlm` is ``rlm_call`` /
``rlm_batch``. Importing this package does not import the SDKs: a provider is loaded on the first call.
"""

from __future__ import annotations

from aries_kernel.models.budget import Spend, SpendLimits
from aries_kernel.models.errors import (
    AuthenticationError,
    BudgetExceeded,
    ConfigurationError,
    ContextOverflowError,
    MissingKeyError,
    ModelError,
    ModelNotFoundError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
)
from aries_kernel.models.rlm import BUDGET_EXHAUSTED, AriesRlm, Rlm, RlmStats
from aries_kernel.models.router import SLOTS, AriesModels, ModelRouter, SlotClient
from aries_kernel.models.shortnames import PROVIDERS, SHORTNAMES, ModelInfo
from aries_kernel.models.types import (
    Completion,
    Message,
    ModelRequest,
    SlotUsage,
    StreamEvent,
    StreamText,
    StreamToolCall,
    StreamUsage,
    ToolCall,
    ToolCallDelta,
    ToolSchema,
    Usage,
)

__all__ = [
    "BUDGET_EXHAUSTED",
    "PROVIDERS",
    "SHORTNAMES",
    "SLOTS",
    "AriesModels",
    "AriesRlm",
    "AuthenticationError",
    "BudgetExceeded",
    "Completion",
    "ConfigurationError",
    "ContextOverflowError",
    "Message",
    "MissingKeyError",
    "ModelError",
    "ModelInfo",
    "ModelNotFoundError",
    "ModelRequest",
    "ModelRouter",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderTimeoutError",
    "RateLimitError",
    "Rlm",
    "RlmStats",
    "SlotClient",
    "SlotUsage",
    "Spend",
    "SpendLimits",
    "StreamEvent",
    "StreamText",
    "StreamToolCall",
    "StreamUsage",
    "ToolCall",
    "ToolCallDelta",
    "ToolSchema",
    "Usage",
]
