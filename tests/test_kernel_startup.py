"""What a fresh Aries kernel imports, on which thread and when: the background warm-up yields to the user.

Each test installs, from a cell, a ``sys.meta_path`` finder that only records the first time each watched module
is looked for (the moment its import begins: the monotonic clock, which the loopback server's arrival times share),
the thread that asked, and whether the codebase index was ready then. The warm-up (aries_kernel.extension) must
not import while a cell runs, must start only once the index is ready, and a ``%aries`` prompt sent at once must
import nothing its first request does not need before that request reaches the model.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.kernel_harness import run_cell, start_kernel, stop_kernel
from tests.loopback import Reply, ScriptedModelServer

# The SDKs, the vault's ORM and the panel's widgets: what the warm-up imports.
WATCHED = ("anthropic", "openai", "sqlalchemy", "ipywidgets")
BEHIND_THE_REQUEST = ("openai", "ipywidgets")  # what a text client's first request does not need

RECORDER = f"""
import sys, threading, time
_watched = {WATCHED!r}
_first_import = {{}}

class _FirstImport:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name in _watched and name not in _first_import:
            index = get_ipython()._aries_context.built("codebase")
            _first_import[name] = (time.monotonic(), threading.current_thread().name, bool(index and index.ready))
        return None

sys.meta_path.insert(0, _FirstImport)
_already = [name for name in _watched if name in sys.modules]
"""


def _records(kc) -> dict[str, list]:
    out = run_cell(kc, "import json; print(json.dumps(_first_import))")
    assert out.error is None, out.error
    return json.loads(out.stdout)


def _kernel_with_index_delay(
    root: Path, tmp_path: Path, delay: float, env: dict[str, str] | None = None, config: str = ""
):
    profile = tmp_path / "ipython" / "profile_default"
    profile.mkdir(parents=True)
    (profile / "ipython_kernel_config.py").write_text(f"c.AriesKernel.index_delay = {delay}\n{config}")
    return start_kernel(root, env={"IPYTHONDIR": str(tmp_path / "ipython"), **(env or {})})


# Polled until the warm-up's last module is in and its thread has ended (a module is in sys.modules as soon as
# its import begins, before it imports ipywidgets).
WARM_UP_DONE = (
    "import sys, threading\n"
    "print('aries_kernel.widgets' in sys.modules"
    " and 'aries-warm-up' not in {thread.name for thread in threading.enumerate()})"
)
NO_KEYS = {"ANTHROPIC_API_KEY": "", "OPENAI_API_KEY": "", "OPENAI_BASE_URL": ""}


def _wait_for_the_warm_up(kc) -> None:
    while run_cell(kc, WARM_UP_DONE).stdout.strip() != "True":
        time.sleep(0.2)


def test_the_warm_up_waits_for_the_running_cell_then_for_the_index(small_repo: Path, tmp_path: Path) -> None:
    # Long enough that the first cell surely starts before the timer fires, even on a loaded machine. Keys for
    # both providers, and a bulk slot on OpenAI's: the warm-up imports both SDKs, the primary slot's first.
    km, kc = _kernel_with_index_delay(
        small_repo,
        tmp_path,
        4.0,
        env={**NO_KEYS, "ANTHROPIC_API_KEY": "sk-test", "OPENAI_API_KEY": "sk-test"},
        config="c.AriesModels.bulk = 'gpt4o'\n",
    )
    try:
        # The first cell outlasts index_delay: neither the index nor the warm-up may start while it runs.
        out = run_cell(
            kc,
            RECORDER
            + "time.sleep(get_ipython().kernel.index_delay + 1)\n"
            + "background = sorted({'aries-codebase', 'aries-codebase-index', 'aries-warm-up'}"
            + " & {thread.name for thread in threading.enumerate()})\n"
            + "print(_already, background, dict(_first_import))",
        )
        assert out.error is None, out.error
        assert out.stdout.strip() == "[] [] {}", out.stdout
        # Between cells the index starts, then the warm-up.
        _wait_for_the_warm_up(kc)
        records = _records(kc)
        assert set(records) >= {"anthropic", "openai", "ipywidgets"}, records
        for name in ("anthropic", "openai", "ipywidgets"):
            _, thread, index_ready = records[name]
            assert (thread, index_ready) == ("aries-warm-up", True), (name, records[name])
        # The SDK of the primary slot comes first, then the other slots' SDK, the panel's widgets last.
        assert records["anthropic"][0] < records["openai"][0] < records["ipywidgets"][0], records
    finally:
        stop_kernel(km, kc)


def test_the_warm_up_imports_no_sdk_that_no_slot_can_call(small_repo: Path, tmp_path: Path) -> None:
    # No key at all: no slot can be called, so neither SDK is worth its import (1.5 s of CPU for Anthropic's);
    # the agent, the vault and the panel are still warmed.
    km, kc = _kernel_with_index_delay(small_repo, tmp_path, 0.0, env=NO_KEYS)
    try:
        _wait_for_the_warm_up(kc)
        out = run_cell(
            kc,
            "print(*(name in sys.modules for name in ('anthropic', 'openai', 'sqlalchemy', 'ipywidgets')))",
        )
        assert out.stdout.split() == ["False", "False", "True", "True"], out.stdout
    finally:
        stop_kernel(km, kc)


def test_a_prompt_sent_at_once_imports_nothing_its_request_does_not_need_before_it(
    small_repo: Path, tmp_path: Path
) -> None:
    with ScriptedModelServer() as server:
        server.responder = lambda body: Reply(text="hello from the loopback model")
        # A short index_delay: the timer fires while the prompt runs, where the warm-up used to start.
        km, kc = _kernel_with_index_delay(small_repo, tmp_path, 0.2, env=server.kernel_env())
        try:
            out = run_cell(kc, RECORDER + "%aries say hello\n")
            assert out.error is None, out.error
            assert "hello from the loopback model" in out.stdout, out.stdout
            (request,) = [r for r in server.requests if r.path.endswith("/v1/messages")]
            records = _records(kc)
        finally:
            stop_kernel(km, kc)
    assert "anthropic" in records, records  # the prompt's own import of the SDK was seen
    early = {
        name: records[name] for name in BEHIND_THE_REQUEST if records.get(name, [1e18])[0] < request.received
    }
    assert not early, f"imported before the first request reached the model: {early}"
