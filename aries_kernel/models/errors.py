"""The model layer's exception tree; SDK errors are translated into it at the provider boundary.

::

    ModelError                      anything that stops a model call
    ├── BudgetExceeded              a spend limit (session or day, USD or tokens) is reached, or a USD limit
    │                               cannot be checked (the call's price is unknown); nothing was sent
    ├── ConfigurationError          a bad slot spec or setting, found before any request is sent
    │   ├── MissingKeyError         the provider needs an API key and its variable is not set
    │   └── ModelNotFoundError      an unknown shortname or provider, or a 404 for the model
    └── ProviderError               an error status from the provider (``.status``), or no answer at all
        ├── AuthenticationError     401/403: the key was rejected
        ├── ContextOverflowError    the request does not fit the model's context window (the agent compacts)
        ├── RateLimitError          429, still refused after the retries
        ├── ProviderTimeoutError    no first token, or a silent stream, within the timeouts
        └── ProviderConnectionError the base URL could not be reached, or the server cut the answer short

Every message says what the user can do about it.
"""

from __future__ import annotations

__all__ = [
    "AuthenticationError",
    "BudgetExceeded",
    "ConfigurationError",
    "ContextOverflowError",
    "MissingKeyError",
    "ModelError",
    "ModelNotFoundError",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderTimeoutError",
    "RateLimitError",
]


class ModelError(Exception):
    """Base of every error raised by the model layer."""


class BudgetExceeded(ModelError):
    """A spend limit of ``c.AriesModels`` is reached, or a USD one cannot be checked; the call was not sent."""


class ConfigurationError(ModelError):
    """A slot spec or setting is wrong; nothing was sent."""


class MissingKeyError(ConfigurationError):
    """The provider needs an API key and its environment variable is empty."""


class ModelNotFoundError(ConfigurationError):
    """The model is not known: an unknown shortname or provider prefix, or a 404 from the provider."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ProviderError(ModelError):
    """The provider answered with an error status, or could not be reached (``status`` is None then)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class AuthenticationError(ProviderError):
    """The provider rejected the API key (401/403)."""


class ContextOverflowError(ProviderError):
    """The request is longer than the model's context window (``window``: as the server stated it, if it did)."""

    def __init__(self, message: str, status: int | None = None, window: int | None = None) -> None:
        super().__init__(message, status)
        self.window = window


class RateLimitError(ProviderError):
    """The provider kept answering 429 after the retries."""


class ProviderTimeoutError(ProviderError):
    """No answer arrived within the configured timeout, after the retries."""


class ProviderConnectionError(ProviderError):
    """The base URL could not be reached, after the retries."""
