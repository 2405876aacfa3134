"""The shortname table, slot specs and settings, provider entry points, exports, and ``%aries model``."""

from __future__ import annotations

import html
import inspect
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config

from aries_kernel import models
from aries_kernel.models.provider import Provider, load_provider
from aries_kernel.models.router import SLOTS, ModelRouter
from aries_kernel.models.shortnames import SHORTNAMES, resolve
from aries_kernel.models.types import Message, ModelRequest, ToolCall, ToolSchema

# The reference's table: shortname -> (provider, context window).
REFERENCE = {
    "opus": ("anthropic", 1_000_000),
    "sonnet": ("anthropic", 200_000),
    "haiku": ("anthropic", 200_000),
    "gemini": ("google", 1_000_000),
    "flash": ("google", 1_000_000),
    "gpt5": ("openai", 1_000_000),
    "gpt4o": ("openai", 128_000),
    "deepseek": ("deepseek", 128_000),
    "deepseek-r1": ("deepseek", 128_000),
    "kimi": ("moonshot", 128_000),
    "llama": ("groq", 128_000),
    "local": ("llamacpp", 32_768),
    "devstral": ("llamacpp", 131_072),
    "qwen-coder-7b": ("llamacpp", 32_768),
    "phi4-mini": ("llamacpp", 131_072),
}


def test_shortname_table_matches_the_reference() -> None:
    assert {name: (m.provider, m.context_window) for name, m in SHORTNAMES.items()} == REFERENCE
    assert all(m.priced for m in SHORTNAMES.values())


def test_provider_model_specs_use_the_table_when_they_can() -> None:
    assert resolve("anthropic:claude-sonnet-4-6") == SHORTNAMES["sonnet"]
    assert resolve("llama.cpp:my-gguf").provider == "llamacpp"
    unknown = resolve("openrouter:meta/llama-4")
    assert (unknown.model, unknown.context_window, unknown.priced) == ("meta/llama-4", 128_000, False)


def test_slots_come_from_traitlets_config() -> None:
    config = Config()
    config.AriesModels.primary = "gpt5"
    config.AriesModels.bulk = "ollama:qwen3"
    config.AriesModels.context_windows = {"qwen3": 40_960}
    config.AriesModels.prices = {"gpt5": [2.0, 8.0]}
    router = ModelRouter(config=config)
    assert router.client("primary").model == "gpt-5"
    assert router.client("primary").info.cost(1_000_000, 1_000_000) == pytest.approx(10.0)
    assert router.client("bulk").context_window == 40_960
    assert router.client("reasoning").shortname == "opus"


def test_empty_slots_fall_back_and_follow_changes() -> None:
    router = ModelRouter(config=Config({"AriesModels": {"bulk": "", "reasoning": ""}}))
    assert router.spec("bulk") == ("haiku", "cheap")
    assert router.spec("reasoning") == ("sonnet", "primary")
    router.set_slot("cheap", "flash")
    assert router.client("bulk").shortname == "flash"
    assert router.slots().loc["bulk", "shortname"] == "flash (from cheap)"


def test_unknown_slot_is_refused() -> None:
    with pytest.raises(models.ConfigurationError, match="primary, reasoning, cheap, bulk"):
        ModelRouter().client("fast")


def test_router_is_cheap_and_key_free() -> None:
    code = (
        "import sys, os\n"
        "for k in ('ANTHROPIC_API_KEY', 'OPENAI_API_KEY'): os.environ.pop(k, None)\n"
        "from aries_kernel.models import ModelRouter, Rlm\n"
        "r = ModelRouter(); Rlm(r); r.slots(); [r.client(s) for s in ('primary', 'bulk')]\n"
        "print('anthropic' in sys.modules, 'openai' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_callable_wires_are_the_sdks_of_slots_with_a_key_primary_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for variable in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GOOGLE_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(variable, raising=False)
    assert ModelRouter().callable_wires() == []  # no key: no slot can be called, no SDK is needed ahead
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    assert ModelRouter().callable_wires() == ["anthropic"]  # the default slots are all Anthropic's
    mixed = ModelRouter(config=Config({"AriesModels": {"primary": "gpt4o", "bulk": "haiku"}}))
    assert mixed.callable_wires() == ["anthropic"]  # gpt4o has no key: only bulk (and the others) count
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert mixed.callable_wires() == ["openai", "anthropic"]  # the primary slot's SDK first
    local = ModelRouter(config=Config({"AriesModels": {"primary": "local", "reasoning": "", "cheap": ""}}))
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    assert local.callable_wires() == ["openai"]  # a local server needs no key; it speaks OpenAI's API


def test_providers_load_through_entry_points() -> None:
    for wire in ("anthropic", "openai"):
        cls = load_provider(wire)
        assert issubclass(cls, Provider) and cls.__name__.lower().startswith(wire)
    with pytest.raises(models.ConfigurationError, match="aries_kernel.providers"):
        load_provider("carrier-pigeon")


def test_estimates_count_tools_and_calls() -> None:
    client = ModelRouter().client("primary")
    bare = ModelRequest([Message("user", "x" * 400)])
    with_tools = ModelRequest(
        [Message("user", "x" * 400), Message("assistant", "", [ToolCall("1", "Repl", {"code": "y" * 400})])],
        tools=[ToolSchema("Repl", "Run code " * 40, {"type": "object"})],
    )
    assert 100 <= client.estimate_tokens(bare) <= 120
    assert client.estimate_tokens(with_tools) >= client.estimate_tokens(bare) + 180


def test_exported_names() -> None:
    public = {n for n, v in vars(models).items() if not n.startswith("_") and not inspect.ismodule(v)}
    assert set(models.__all__) == public - {"annotations"}
    assert {"ModelRouter", "SlotClient", "Rlm", "ModelError", "Completion", "StreamEvent"} <= set(
        models.__all__
    )


@pytest.fixture
def shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[InteractiveShell]:
    monkeypatch.chdir(tmp_path)  # loading the extension starts indexing its root: not this repository
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "aries_kernel")
    yield ip
    ip.run_line_magic("unload_ext", "aries_kernel")
    InteractiveShell.clear_instance()


def aries(shell: InteractiveShell, line: str) -> Any:
    return shell.run_line_magic("aries", line)


def test_model_magic_shows_and_changes_slots(shell: InteractiveShell) -> None:
    table = aries(shell, "model")
    assert list(table.index) == list(SLOTS)
    assert table.loc["primary", "shortname"] == "sonnet"
    table = aries(shell, "model haiku")
    assert table.loc["primary", "model"] == "claude-haiku-4-5"
    table = aries(shell, "model bulk ollama:llama3 --base-url http://gpu-box:11434/v1")
    assert table.loc["bulk", "base_url"] == "http://gpu-box:11434/v1"
    assert table.loc["bulk", "key"] == "not needed"
    assert "bulk" in aries(shell, "status") and "ollama:llama3" in aries(shell, "status")
    assert list(aries(shell, "model --usage").columns)[:2] == ["model", "calls"]
    assert "http://gpu-box:11434/v1" in repr(table)  # the plain-text form keeps every column


def test_model_magic_html_is_a_list_that_fits_any_width(shell: InteractiveShell) -> None:
    """As a 14-column table it was clipped at JupyterLab's default width, model names broken over three
    lines: each slot is a line of fields that wrap between fields, never inside a model name."""
    table = aries(shell, "model bulk ollama:llama3 --base-url http://gpu-box:11434/v1")
    page = table._repr_html_()
    assert "<table" not in page and page.count('<div style="border-top') == len(SLOTS)
    for slot in SLOTS:
        model = html.escape(table.loc[slot, "model"])
        assert f'white-space:nowrap"><span style="color:#57606a">model</span> {model}</span>' in page, slot
    assert "context_window</span> 200,000<" in page  # numbers grouped
    assert "served_model" not in page, "an empty field takes no room"
    usage = aries(shell, "model --usage")._repr_html_()
    assert "<table" not in usage and "calls</span> 0<" in usage


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("model bulk nonsense", "Unknown model 'nonsense'"),
        ("model fast haiku", "Usage: %aries model"),
        ("model bulk", "Name a model for the bulk slot"),
    ],
)
def test_model_magic_bad_input(shell: InteractiveShell, line: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        aries(shell, line)
