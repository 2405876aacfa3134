"""The providers Aries can talk to and the model shortnames (SPEC section 5), with context windows and prices.

A slot spec is either a shortname (``"sonnet"``) or ``"provider:model"`` (``"ollama:llama3"``);
:func:`resolve` turns either into a :class:`ModelInfo`. Prices are list prices in USD per million tokens at
the time of writing; ``c.AriesModels.prices`` overrides them, and a model with no known price is counted at 0
and marked unpriced.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from aries_kernel.models.errors import ModelNotFoundError

__all__ = ["PROVIDERS", "SHORTNAMES", "ModelInfo", "ProviderInfo", "resolve"]


@dataclass(frozen=True)
class ProviderInfo:
    name: str
    label: str
    wire: str  # the entry point in the ``aries_kernel.providers`` group that speaks its API
    key_env: str | None  # None: a local server that needs no key
    base_url: str | None  # None: must be configured (custom endpoints)
    base_url_env: str | None = None  # the SDK's own base-URL variable, honoured when set
    key_required: bool = True
    local: bool = False


_PROVIDER_LIST = [
    ProviderInfo(
        "anthropic",
        "Anthropic",
        "anthropic",
        "ANTHROPIC_API_KEY",
        "https://api.anthropic.com",
        "ANTHROPIC_BASE_URL",
    ),
    ProviderInfo(
        "openai", "OpenAI", "openai", "OPENAI_API_KEY", "https://api.openai.com/v1", "OPENAI_BASE_URL"
    ),
    ProviderInfo(
        "google",
        "Google",
        "openai",
        "GOOGLE_API_KEY",
        "https://generativelanguage.googleapis.com/v1beta/openai/",
    ),
    ProviderInfo("deepseek", "DeepSeek", "openai", "DEEPSEEK_API_KEY", "https://api.deepseek.com/v1"),
    ProviderInfo("moonshot", "Moonshot", "openai", "MOONSHOT_API_KEY", "https://api.moonshot.ai/v1"),
    ProviderInfo("groq", "Groq", "openai", "GROQ_API_KEY", "https://api.groq.com/openai/v1"),
    ProviderInfo("openrouter", "OpenRouter", "openai", "OPENROUTER_API_KEY", "https://openrouter.ai/api/v1"),
    ProviderInfo(
        "ollama", "Ollama", "openai", None, "http://localhost:11434/v1", key_required=False, local=True
    ),
    ProviderInfo(
        "llamacpp",
        "llama.cpp server",
        "openai",
        None,
        "http://localhost:8080/v1",
        key_required=False,
        local=True,
    ),
    # Any OpenAI-compatible URL: c.AriesModels.base_urls = {"custom": "http://host:port/v1"}; key optional.
    ProviderInfo("custom", "Custom endpoint", "openai", "ARIES_CUSTOM_API_KEY", None, key_required=False),
]
PROVIDERS: dict[str, ProviderInfo] = {p.name: p for p in _PROVIDER_LIST}
_PROVIDER_ALIASES = {
    "llama.cpp": "llamacpp",
    "llama-cpp": "llamacpp",
    "llama_cpp": "llamacpp",
    "gemini": "google",
    "kimi": "moonshot",
    "claude": "anthropic",
}


@dataclass(frozen=True)
class ModelInfo:
    shortname: str  # the table's name, or the spec itself ("ollama:llama3") for a model outside the table
    provider: str
    model: str
    context_window: int
    input_price: float | None = None  # USD per million tokens; None when unknown
    output_price: float | None = None
    cache_read_price: float | None = None
    cache_write_price: float | None = None

    @property
    def priced(self) -> bool:
        """Whether cost can be computed (unknown remote models are counted at 0)."""
        return self.input_price is not None and self.output_price is not None

    def cost(self, input_tokens: int, output_tokens: int, cache_read: int = 0, cache_write: int = 0) -> float:
        """USD for one call; 0 when the price is unknown."""
        if not self.priced:
            return 0.0
        assert self.input_price is not None and self.output_price is not None
        read = self.cache_read_price if self.cache_read_price is not None else self.input_price
        write = self.cache_write_price if self.cache_write_price is not None else self.input_price
        total = (
            input_tokens * self.input_price
            + output_tokens * self.output_price
            + cache_read * read
            + cache_write * write
        )
        return total / 1_000_000


_K, _M = 1000, 1_000_000
SHORTNAMES: dict[str, ModelInfo] = {
    m.shortname: m
    for m in [
        ModelInfo("opus", "anthropic", "claude-opus-4-6", 1 * _M, 5.0, 25.0, 0.5, 6.25),
        ModelInfo("sonnet", "anthropic", "claude-sonnet-4-6", 200 * _K, 3.0, 15.0, 0.3, 3.75),
        ModelInfo("haiku", "anthropic", "claude-haiku-4-5", 200 * _K, 1.0, 5.0, 0.1, 1.25),
        ModelInfo("gemini", "google", "gemini-2.5-pro", 1 * _M, 1.25, 10.0, 0.31),
        ModelInfo("flash", "google", "gemini-2.5-flash", 1 * _M, 0.30, 2.50, 0.075),
        ModelInfo("gpt5", "openai", "gpt-5", 1 * _M, 1.25, 10.0, 0.125),
        ModelInfo("gpt4o", "openai", "gpt-4o", 128 * _K, 2.50, 10.0, 1.25),
        ModelInfo("deepseek", "deepseek", "deepseek-chat", 128 * _K, 0.28, 0.42, 0.028),
        ModelInfo("deepseek-r1", "deepseek", "deepseek-reasoner", 128 * _K, 0.28, 0.42, 0.028),
        ModelInfo("kimi", "moonshot", "kimi-k2", 128 * _K, 0.60, 2.50, 0.15),
        ModelInfo("llama", "groq", "llama-3.3-70b-versatile", 128 * _K, 0.59, 0.79),
        ModelInfo("local", "llamacpp", "local", 32_768, 0.0, 0.0),
        ModelInfo("devstral", "llamacpp", "devstral", 131_072, 0.0, 0.0),
        ModelInfo("qwen-coder-7b", "llamacpp", "qwen2.5-coder-7b", 32_768, 0.0, 0.0),
        ModelInfo("phi4-mini", "llamacpp", "phi-4-mini", 131_072, 0.0, 0.0),
    ]
}
_DEFAULT_WINDOW = {True: 32_768, False: 128 * _K}  # keyed by ProviderInfo.local, for models outside the table


def provider_names() -> str:
    """The provider prefixes, comma-separated, for error messages."""
    return ", ".join(PROVIDERS)


def resolve(spec: str) -> ModelInfo:
    """The model a slot spec names: a shortname, or ``provider:model`` (the table supplies window and
    prices).
    """
    spec = spec.strip()
    if spec in SHORTNAMES:
        return SHORTNAMES[spec]
    provider, sep, model = spec.partition(":")
    provider = _PROVIDER_ALIASES.get(provider.lower(), provider.lower())
    if not sep or not model:
        raise ModelNotFoundError(
            f"Unknown model {spec!r}. Use a shortname ({', '.join(SHORTNAMES)}) "
            f"or provider:model with a provider among {provider_names()} (e.g. 'ollama:llama3')."
        )
    if provider not in PROVIDERS:
        raise ModelNotFoundError(
            f"Unknown provider {provider!r} in {spec!r}. Providers: {provider_names()}; "
            f"or use a shortname ({', '.join(SHORTNAMES)})."
        )
    for info in SHORTNAMES.values():
        if info.provider == provider and info.model == model:
            return info
    local = PROVIDERS[provider].local
    free = 0.0 if local else None
    return ModelInfo(f"{provider}:{model}", provider, model, _DEFAULT_WINDOW[local], free, free)


def with_overrides(info: ModelInfo, windows: dict[str, int], prices: dict[str, list[float]]) -> ModelInfo:
    """``info`` with a context window and prices from the settings (keyed by shortname or model id)."""
    window = windows.get(info.shortname, windows.get(info.model))
    price = prices.get(info.shortname, prices.get(info.model))
    if window is not None:
        info = replace(info, context_window=int(window))
    if price is not None:
        values: list[float | None] = [float(p) for p in price] + [None, None]
        info = replace(
            info,
            input_price=values[0],
            output_price=values[1],
            cache_read_price=values[2],
            cache_write_price=values[3],
        )
    return info
