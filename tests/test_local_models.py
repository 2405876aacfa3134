"""Local model servers (issue 13): the window asked of the server, its limits honoured, honest cost and tokens,
slots that follow a local primary, clear messages, and settings read from the Jupyter config folders.

Every server here is the loopback server (``tests/loopback.py``) playing llama.cpp, vLLM or Ollama: their
metadata endpoints and llama.cpp's context-overflow error, over both wire formats where it matters.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from traitlets.config import Config

from aries_kernel.agent import Agent
from aries_kernel.agent.events import Compaction, Notice, RunFinished
from aries_kernel.agent.render import TextRenderer
from aries_kernel.agent.settings import AriesAgent
from aries_kernel.models import ContextOverflowError, ModelRouter, ProviderConnectionError, Rlm
from aries_kernel.models.router import SlotClient
from aries_kernel.models.types import Message, ModelRequest
from tests.loopback import Reply, ScriptedModelServer
from tests.net_support import free_port
from widgets.panel import AgentPanel

HELLO = ModelRequest([Message("user", "hello")])
OVERFLOW = "request (10934 tokens) exceeds the available context size (8192 tokens), try increasing it"


def local_slot(router: ModelRouter, server: ScriptedModelServer, spec: str = "local") -> SlotClient:
    """``spec`` (a llama.cpp route by default) on the primary slot, at the loopback server."""
    return router.set_slot("primary", spec, base_url=server.openai_url)


# ------------------------------------------------------------------------------------- asking the server


def test_the_window_is_read_from_llama_cpp_props_and_shown_with_its_source(
    server: ScriptedModelServer, make_router: Callable[..., ModelRouter]
) -> None:
    server.props = {
        "default_generation_settings": {"n_ctx": 8192},
        "model_path": "/models/SmolLM2-135M-Instruct-Q8_0.gguf",
        "chat_template": "{% for m in messages %}{{ m.content }}{% endfor %}",
    }
    router = make_router()
    client = local_slot(router, server)
    assert client.window() == (8192, "llama.cpp /props n_ctx")
    row = router.slots().loc["primary"]
    assert (row["context_window"], row["window_from"]) == (8192, "llama.cpp /props n_ctx")
    assert row["served_model"] == "SmolLM2-135M-Instruct-Q8_0.gguf"
    assert row["tools"] == "no (llama.cpp chat template)"  # a template that never mentions tools
    asked = len(server.metadata_requests)
    assert client.context_window == 8192 and make_router().set_slot(
        "cheap", "local", base_url=server.openai_url
    )
    assert len(server.metadata_requests) == asked  # cached per base URL: asked once


def test_the_window_is_read_from_v1_models_meta_or_vllm_max_model_len(
    server: ScriptedModelServer, make_router: Callable[..., ModelRouter]
) -> None:
    server.models = [{"id": "smollm2", "object": "model", "meta": {"n_ctx": 4096, "n_ctx_train": 8192}}]
    client = local_slot(make_router(), server)
    assert client.window() == (4096, "llama.cpp /v1/models meta.n_ctx")
    with ScriptedModelServer() as vllm:
        vllm.models = [{"id": "qwen", "object": "model"}, {"id": "phi", "max_model_len": 16384}]
        other = local_slot(make_router(), vllm, "custom:phi")
        assert other.window() == (16384, "vLLM /v1/models max_model_len")
        assert other.facts().served_model == "phi"


def test_ollama_is_a_named_route_whose_window_comes_from_api_show(
    server: ScriptedModelServer, make_router: Callable[..., ModelRouter], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    router = make_router()
    default = router.set_slot("bulk", "ollama:llama3.2")
    assert (default.base_url, default.key_status()) == ("http://localhost:11434/v1", "not needed")
    server.ollama_show = {
        "parameters": "stop <|eot_id|>\nnum_ctx 6144",
        "model_info": {"llama.context_length": 131072},
        "capabilities": ["completion", "tools"],
    }
    client = local_slot(router, server, "ollama:llama3.2")
    assert client.window() == (6144, "Ollama /api/show num_ctx")  # what it runs with, not what it could
    assert client.facts().tools is True
    assert "/api/show" in server.metadata_requests
    with ScriptedModelServer() as bare:
        bare.ollama_show = {"model_info": {"llama.context_length": 131072}, "capabilities": ["completion"]}
        plain = local_slot(make_router(), bare, "ollama:llama3.2")
        assert plain.window() == (131072, "Ollama /api/show model_info context_length")
        assert plain.facts().tools is False


def test_without_metadata_the_table_stands_and_settings_win_over_the_server(
    server: ScriptedModelServer, make_router: Callable[..., ModelRouter]
) -> None:
    assert local_slot(make_router(), server).window() == (32_768, "shortname table")
    assert local_slot(make_router(), server, "custom:x").window() == (32_768, "default for a local server")
    server.props = {"default_generation_settings": {"n_ctx": 8192}}
    configured = local_slot(make_router(context_windows={"local": 2048}), server)
    assert configured.window() == (2048, "c.AriesModels.context_windows['local']")


def test_a_cloud_api_is_never_asked(
    make_router: Callable[..., ModelRouter], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    client = make_router().client("primary")
    assert not client.local and client.window() == (200_000, "shortname table")


# ------------------------------------------------------------------------------------ the server's limits


@pytest.mark.parametrize(
    ("message", "window", "prompt"),
    [
        (OVERFLOW, 8192, 10934),
        (
            "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.",
            8192,
            9000,
        ),
        ("prompt is too long: 210000 tokens > 200000 maximum", 200000, 210000),
    ],
)
def test_a_context_overflow_is_read_and_its_window_learned(
    server: ScriptedModelServer,
    make_router: Callable[..., ModelRouter],
    message: str,
    window: int,
    prompt: int,
) -> None:
    client = local_slot(make_router(), server)
    server.script(Reply(status=400, error=message))
    with pytest.raises(ContextOverflowError, match=f"{window:,}-token context window") as caught:
        client.complete(HELLO)
    assert caught.value.window == window and len(server.requests) == 1  # not retried
    assert client.window() == (window, "the server's context-overflow error (HTTP 400)")
    assert client.estimate_tokens(HELLO) > len("hello") // 4 + 4  # calibrated towards the server's count


def test_an_overflowing_prompt_is_compacted_and_asked_again(
    server: ScriptedModelServer,
    make_router: Callable[..., ModelRouter],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")  # the cheap slot (haiku) follows the local primary
    router = make_router()
    local_slot(router, server)
    agent = Agent(None, root=tmp_path, router=router, settings=AriesAgent())
    server.script(Reply(text="noted"))
    list(agent.run("remember this: " + "lorem ipsum " * 400))
    server.context_size = server.token_counter(server.requests[-1].body) + 100  # the next prompt will not fit
    server.script(Reply(text="## Goal\nremember the text"), Reply(text="Here it is."))
    events = list(agent.run("and now this: " + "dolor sit " * 40))
    finished = events[-1]
    assert isinstance(finished, RunFinished) and finished.reason == "done", finished.detail
    notice = next(e for e in events if isinstance(e, Notice) and "did not fit" in e.text)
    assert "compacting the history and asking again" in notice.text
    assert any(isinstance(e, Compaction) and e.stage == "summarize" for e in events)
    statuses = [r.path for r in server.requests[1:]]
    assert len(statuses) == 3  # the overflow, the summary (cheap, on the local model), the retry
    assert agent.session is not None and agent.session.messages[-1].content == "Here it is."
    # The window the server stated is the one compaction now works with.
    assert router.client("primary").window() == (
        server.context_size,
        "the server's context-overflow error (HTTP 400)",
    )


def test_max_tokens_defaults_to_a_quarter_of_the_window(
    server: ScriptedModelServer,
    make_router: Callable[..., ModelRouter],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server.props = {"default_generation_settings": {"n_ctx": 8192}}
    router = make_router()
    local_slot(router, server)
    router.set_slot("bulk", "local", base_url=server.openai_url)
    agent = Agent(None, root=tmp_path, router=router, settings=AriesAgent())
    assert agent.request().max_tokens == 2048
    assert (
        Agent(None, root=tmp_path, router=router, settings=AriesAgent(max_tokens=300)).request().max_tokens
        == 300
    )
    Rlm(router).call("q")
    assert server.requests[-1].body["max_tokens"] == 2048
    sonnet = make_router().client("primary")  # the Anthropic route to the same llama.cpp server
    assert sonnet.window() == (8192, "llama.cpp /props n_ctx") and sonnet.default_max_tokens(8192) == 2048
    monkeypatch.delenv("ANTHROPIC_BASE_URL")
    assert sonnet.window()[0] == 200_000 and sonnet.default_max_tokens(8192) == 8192  # the cloud: as before


def test_timeouts_and_retries_are_sized_to_the_kind_of_server(
    server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = Config()
    config.AriesModels.backoff_base = 0.01
    router = ModelRouter(config=config)  # max_retries left at -1: by kind
    try:
        local = local_slot(router, server)
        waits = local.timeouts()
        assert (waits.connect, waits.first_token, waits.idle) == (2.0, 120.0, 30.0)
        server.script(*[Reply(status=500, error="kaput")] * 5)
        with pytest.raises(Exception, match="after 2 attempts"):
            local.complete(HELLO)
        assert len(server.requests) == 2  # a local server gets one retry, not four
        monkeypatch.delenv("ANTHROPIC_BASE_URL")
        cloud = router.client("cheap")
        waits = cloud.timeouts()
        assert not cloud.local and (waits.connect, waits.first_token, waits.idle) == (15.0, 600.0, 120.0)
    finally:
        router.close()


# ------------------------------------------------------------------------------------ clean history, messages


def test_a_failed_call_leaves_no_invented_reply_in_what_the_model_is_sent(
    server: ScriptedModelServer, make_router: Callable[..., ModelRouter], tmp_path: Path
) -> None:
    router = make_router(max_retries=0)
    local_slot(router, server)
    agent = Agent(None, root=tmp_path, router=router, settings=AriesAgent())
    server.script(Reply(status=500, error="kaput"), Reply(text="second answer"))
    first = list(agent.run("first"))
    assert first[-1].reason == "error"
    assert list(agent.run("second"))[-1].reason == "done"
    sent = server.requests[-1].body["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "user"]
    assert "no reply" not in json.dumps(sent)
    shown: list[str] = []
    renderer = TextRenderer(out=SimpleNamespace(write=shown.append, flush=lambda: None))
    for event in first:
        renderer(event)
    assert "kaput" in "".join(shown)  # the user sees the failure
    assert agent.session is not None and agent.session.stops == [(1, "the model call failed")]


def test_a_server_that_dies_mid_stream_is_not_called_unreachable(
    server: ScriptedModelServer, make_router: Callable[..., ModelRouter]
) -> None:
    client = local_slot(make_router(), server)
    server.script(Reply(text="a long answer that is cut", cut_after=3))
    with pytest.raises(
        ProviderConnectionError, match="closed the connection in the middle of its answer"
    ) as caught:
        list(client.stream(HELLO))
    assert "Could not reach" not in str(caught.value) and "Is the server running" not in str(caught.value)


def test_a_refused_connection_says_so(make_router: Callable[..., ModelRouter]) -> None:
    port = free_port()  # nothing listens on it
    client = make_router(max_retries=0).set_slot("primary", "local", base_url=f"http://127.0.0.1:{port}/v1")
    with pytest.raises(ProviderConnectionError, match="connection was refused.*Is the server running"):
        client.complete(HELLO)


def test_a_server_whose_template_takes_no_tools_is_warned_about_once(
    server: ScriptedModelServer, make_router: Callable[..., ModelRouter], tmp_path: Path
) -> None:
    server.props = {
        "chat_template_caps": {"supports_tools": False},
        "default_generation_settings": {"n_ctx": 8192},
    }
    router = make_router()
    local_slot(router, server)
    agent = Agent(None, root=tmp_path, router=router, settings=AriesAgent())
    warned = [e for e in agent.run("hi") if isinstance(e, Notice) and "takes no tool calls" in e.text]
    assert len(warned) == 1 and "llama.cpp chat_template_caps" in warned[0].text
    assert not [e for e in agent.run("again") if isinstance(e, Notice) and "takes no tool calls" in e.text]


# ------------------------------------------------------------------------------------ honest tokens and cost


@pytest.mark.parametrize("spec", ["haiku", "gpt4o"])
def test_a_local_server_costs_nothing_whatever_its_wire_format(
    server: ScriptedModelServer, make_router: Callable[..., ModelRouter], spec: str
) -> None:
    server.present("llama.cpp")  # llama-server speaks both wire formats
    router = make_router()
    client = router.set_slot("primary", spec)  # the SDKs' base-URL variables point at the loopback server
    server.script(Reply(text="ok", input_tokens=1_000_000, output_tokens=1_000_000))
    assert client.local and client.complete(HELLO).usage.cost_usd == 0.0
    assert router.slots().loc["primary", "price"] == "free: llama.cpp server (/props)"
    priced = make_router(prices={spec: [1.0, 2.0]}).set_slot("primary", spec)  # unless prices are set
    server.script(Reply(text="ok", input_tokens=1_000_000, output_tokens=1_000_000))
    assert priced.complete(HELLO).usage.cost_usd == pytest.approx(3.0)


@pytest.mark.parametrize("spec", ["haiku", "gpt4o"])
def test_prompt_cache_tokens_are_shown_as_such(
    server: ScriptedModelServer, make_router: Callable[..., ModelRouter], tmp_path: Path, spec: str
) -> None:
    router = make_router()
    router.set_slot("primary", spec)
    router.set_slot("bulk", spec)
    server.script(Reply(text="a", input_tokens=1, cached_tokens=1935), Reply(text="b", input_tokens=5))
    rlm = Rlm(router)
    rlm.call("one")
    rlm.call("two")
    stats = rlm.stats()
    table = stats.table
    assert (stats.input_tokens, stats.cache_read_tokens) == (6, 1935)
    assert (table["input_tokens"].sum(), table["cache_read_tokens"].sum()) == (6, 1935)  # one source of truth
    assert "6 in (+1935 cache read, 0 cache write)" in repr(stats)
    server.script(Reply(text="done", input_tokens=1, cached_tokens=1935))
    agent = Agent(None, root=tmp_path, router=router, settings=AriesAgent())
    finished = list(agent.run("hi"))[-1]
    assert isinstance(finished, RunFinished) and (finished.input_tokens, finished.cache_read_tokens) == (
        1,
        1935,
    )
    shown: list[str] = []
    TextRenderer(out=SimpleNamespace(write=shown.append, flush=lambda: None))(finished)
    assert "1 in (+1,935 cached) / " in "".join(shown)
    panel = AgentPanel()
    panel(finished)
    assert (
        "1 in (+1,935 cached) / " in panel.footer.value and "1 in (+1,935 cached) / " in panel.record().html
    )
    assert agent.session is not None
    assert agent.session.usage["primary"].cache_read_tokens == 1935  # what %aries cost lists per slot


def test_there_is_one_token_estimator_calibrated_per_model_and_server(
    server: ScriptedModelServer, make_router: Callable[..., ModelRouter]
) -> None:
    import aries_kernel.agent.compaction as compaction
    import aries_kernel.agent.phases as phases
    import aries_kernel.models.tokens as tokens

    assert not hasattr(phases, "estimate_tokens")
    assert compaction.message_tokens is tokens.message_tokens
    router = make_router()
    primary = local_slot(router, server)
    bulk = router.set_slot("bulk", "local", base_url=server.openai_url)
    assert primary.estimator is bulk.estimator  # the same model at the same server
    raw = primary.estimate_tokens(HELLO)
    server.script(*[Reply(text="ok", input_tokens=raw * 2)] * 6)
    for _ in range(6):
        bulk.complete(HELLO)
    assert primary.estimate_tokens(HELLO) > raw * 1.5  # a tokenizer that needs more tokens than chars / 4


# ------------------------------------------------------------------------------------ slots that follow


def test_slots_without_a_key_follow_a_local_primary(
    server: ScriptedModelServer, make_router: Callable[..., ModelRouter], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    router = make_router()
    local_slot(router, server)
    for slot in ("reasoning", "cheap", "bulk"):
        client = router.client(slot)
        assert (client.shortname, client.base_url) == ("local", server.openai_url)
    table = router.slots()
    assert (
        table.loc["cheap", "resolves"] == "haiku needs ANTHROPIC_API_KEY, which is not set: follows primary"
    )
    assert table.loc["bulk", "resolves"].endswith("follows cheap")
    Rlm(router).call("q")
    assert server.requests[-1].path == "/v1/chat/completions"  # no missing-key error
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    assert router.client("cheap").shortname == "haiku"  # with a key, the slot is its own again
    assert router.slots().loc["cheap", "resolves"] == "set"


def test_a_cloud_primary_is_not_followed(
    make_router: Callable[..., ModelRouter], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    router = make_router()
    router.set_slot("primary", "gpt4o")
    assert router.client("cheap").shortname == "haiku"  # fails with its own missing-key message when called


def test_notebook_04_advice_works(
    server: ScriptedModelServer, make_router: Callable[..., ModelRouter], monkeypatch: pytest.MonkeyPatch
) -> None:
    """ "point OPENAI_BASE_URL at a local llama.cpp or Ollama server and choose %aries model primary local"."""
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    monkeypatch.delenv("OPENAI_API_KEY")
    router = make_router()
    primary = router.set_slot("primary", "local")
    assert primary.base_url == server.openai_url
    assert router.client("cheap").base_url == server.openai_url and router.client("bulk").shortname == "local"
    assert primary.complete(HELLO).message.content == "echo: hello"
    assert server.requests[-1].body["model"] == "local"  # the server published no model: the placeholder
    with ScriptedModelServer() as ollama:  # Ollama needs a real name: the one model it lists is sent
        ollama.models = [{"id": "smollm2:135m", "object": "model"}]
        monkeypatch.setenv("OPENAI_BASE_URL", ollama.openai_url)
        other = make_router().set_slot("primary", "local")
        other.complete(HELLO)
        assert ollama.requests[-1].body["model"] == "smollm2:135m"
        assert other.facts().served_model == "smollm2:135m"
    monkeypatch.setenv("OPENAI_BASE_URL", "https://proxy.example.com/v1")  # a remote proxy is not local
    assert router.client("primary").base_url == "http://localhost:8080/v1"


# ------------------------------------------------------------------------------------ settings files


def test_settings_are_read_from_jupyter_config_py_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aries_kernel.context import AriesContext

    folder = tmp_path / "jupyter"
    folder.mkdir()
    (folder / "jupyter_config.py").write_text(
        "c.AriesModels.context_windows = {'local': 8192}\nc.AriesModels.primary = 'local'\nc.Other.x = 1\n"
    )
    (folder / "ipython_kernel_config.json").write_text(json.dumps({"AriesModels": {"cheap": "local"}}))
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(folder))
    config = Config()
    config.AriesModels.primary = "sonnet"  # what the kernel read itself wins
    context = AriesContext(SimpleNamespace(config=config), root=tmp_path)
    assert context.config.AriesModels.context_windows == {"local": 8192}
    assert context.config.AriesModels.cheap == "local"
    assert context.config.AriesModels.primary == "sonnet"
    assert "Other" not in context.config
    router = ModelRouter(config=context.config)
    try:
        assert router.client("cheap").window() == (8192, "c.AriesModels.context_windows['local']")
    finally:
        router.close()


def test_rlm_call_errors_come_without_chained_tracebacks(
    server: ScriptedModelServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from IPython.core.interactiveshell import InteractiveShell

    monkeypatch.chdir(tmp_path)
    InteractiveShell.clear_instance()  # a fresh shell: an earlier test's may have the extension marked loaded
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "aries_kernel")
    try:
        shell.run_line_magic("aries", f"model bulk local --base-url {server.openai_url}")
        server.script(*[Reply(status=500, error="kaput")] * 5)
        with pytest.raises(Exception, match="kaput") as caught:
            shell.user_ns["rlm_call"]("q")
        error: Any = caught.value
        assert error.__cause__ is None and error.__suppress_context__
        frames, tb = 0, error.__traceback__
        while tb is not None:
            frames, tb = frames + 1, tb.tb_next
        assert frames <= 2  # this test's frame and rlm_call's, not the SDK's and httpx's
    finally:
        shell._aries_context.built("models").close()
        shell.run_line_magic("unload_ext", "aries_kernel")
        InteractiveShell.clear_instance()


def test_compaction_says_a_missing_key_once(
    server: ScriptedModelServer,
    make_router: Callable[..., ModelRouter],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from aries_kernel.agent.loop import AgentHook

    class Extract(AgentHook):  # as the memory hook does: it asks the cheap model first, and says it failed
        def before_summarize(self, agent: Agent, older: list[Message]) -> Any:
            try:
                agent.client("cheap").complete(HELLO)
            except Exception as exc:
                yield Notice(f"Memory: extracting failed ({type(exc).__name__}: {exc}).")

    monkeypatch.delenv("ANTHROPIC_API_KEY")
    agent = Agent(None, root=tmp_path, router=make_router(), settings=AriesAgent(), hooks=[Extract()])
    session = agent.ensure_session()
    for i in range(4):
        session.add_message(Message("user", f"question {i} " * 50))
        session.add_message(Message("assistant", f"answer {i} " * 50))
    notices = [e.text for e in agent.compact() if isinstance(e, Notice)]
    assert sum("ANTHROPIC_API_KEY" in text for text in notices) == 1, notices
    assert "History summarized without the cheap model (see above)." in notices


def test_a_server_that_was_reached_is_not_asked_again_but_an_absent_one_is(
    server: ScriptedModelServer, make_router: Callable[..., ModelRouter], monkeypatch: pytest.MonkeyPatch
) -> None:
    from aries_kernel.models import server as facts_module

    assert facts_module.server_facts(server.openai_url, "m").reached  # reached, though it published nothing
    asked = len(server.metadata_requests)
    facts_module.server_facts(server.openai_url, "m")
    assert len(server.metadata_requests) == asked
    url = f"http://127.0.0.1:{free_port()}/v1"
    assert not facts_module.server_facts(url, "m").reached
    # A server that was not there is asked again once RETRY_SECONDS have passed (it may have been starting).
    monkeypatch.setattr(facts_module, "RETRY_SECONDS", 0.0)
    server.props = {"default_generation_settings": {"n_ctx": 1024}}
    monkeypatch.setitem(
        facts_module._cache, (server.openai_url + "/x", "m"), (facts_module.ServerFacts(), 0.0)
    )
    assert facts_module.server_facts(server.openai_url + "/x", "m").context_window is None  # asked: 404 there
    assert server.metadata_requests[-1].startswith("/v1/x")


def test_a_stream_that_goes_silent_mid_answer_is_stopped_at_the_idle_timeout(
    server: ScriptedModelServer, make_router: Callable[..., ModelRouter], tmp_path: Path
) -> None:
    import time

    router = make_router(idle_timeout=0.5, timeout=2.0)  # the read timeout bounds the reader thread's wait
    local_slot(router, server)
    agent = Agent(None, root=tmp_path, router=router, settings=AriesAgent())
    server.script(Reply(text="I will now think very hard", hold_after=3, hold=30))
    events = list(agent.run("think"))
    finished = events[-1]
    assert isinstance(finished, RunFinished) and finished.reason == "error"
    assert "sent nothing for 0.5s in the middle of its answer (c.AriesModels.idle_timeout)" in finished.detail
    session = agent.session
    assert session is not None and session.messages[-1].role == "assistant"  # what it wrote is kept, as is
    assert "[" not in session.messages[-1].content
    while server.in_flight:  # the reader closes the held stream once its read times out (2 s)
        time.sleep(0.05)
