"""Put the REPL body in an IPython shell: ``codebase``, ``vault``, ``rlm_call``/``rlm_batch``, and ``%aries``.

Used by :class:`aries_kernel.kernel.AriesKernel` at start and by ``%load_ext aries_kernel`` in any IPython kernel.
Nothing heavy happens here: the codebase is imported and indexed in a background thread, the vault and the model
router are built on first use.
"""

from __future__ import annotations

import importlib
import logging
import sys
import threading
import time
from typing import Any

from aries_kernel.context import AriesContext, set_context
from aries_kernel.diagnostics import install_stack_dump, stack_dump_problem
from aries_kernel.lazy import LazyName
from aries_kernel.notebook.executed import CellLog
from aries_kernel.pillars import BODY_NAMES, VaultUnavailable, shared_models, shared_vault
from aries_kernel.settings_owner import ONLY_YOU

__all__ = ["install", "uninstall", "BODY_NAMES", "VaultUnavailable"]

log = logging.getLogger(__name__)


def _rlm(context: AriesContext) -> Any:
    from aries_kernel.models.rlm import Rlm

    return context.lazy("rlm", lambda ctx: Rlm(shared_models(ctx)))


def install(shell: Any, root: str | None = None, index_delay: float = 0.0) -> AriesContext:
    """Attach an :class:`AriesContext` to ``shell``, fill the namespace and register the magics.

    The codebase's module (numpy, pandas, tree-sitter) is imported in a daemon thread at once: every answer
    about the code needs it, and a kernel's start leaves the GIL free often enough that its first reply does
    not wait for it. Indexing starts in the background after ``index_delay`` seconds, or as soon as the first
    cell has run, whichever comes first, but never while a cell runs; a kernel passes a delay so that its
    start-up and first reply do not compete with a cold index's parse. Using ``codebase`` earlier builds it
    at once. The warm-up imports (:func:`_warm_modules`) follow the index, between cells.
    """
    existing = getattr(shell, "_aries_context", None)
    if existing is not None:
        return existing  # %load_ext twice, or the kernel loading the extension again
    context = AriesContext(shell, root=root)
    set_context(shell, context)
    namespace = shell.user_ns

    codebase = LazyName("codebase", lambda: context.codebase, namespace, f"code graph of {context.root}")
    threading.Thread(
        target=_import_quietly, args=(_CODEBASE_MODULE,), name="aries-codebase-import", daemon=True
    ).start()
    namespace["codebase"] = codebase

    # Set while no cell runs. Background work waits for it: what the user runs comes before what may help later.
    idle = threading.Event()
    idle.set()

    def cell_starts(*_: Any) -> None:
        idle.clear()
        # A background import under way ends before the cell runs: the cell may import the same package, and
        # two threads importing a package with circular imports (SQLAlchemy's) can hand one of them the
        # module half initialized ("cannot import name ... from partially initialized module").
        with _background_import:
            pass

    for event, hook in (("pre_run_cell", cell_starts), ("post_run_cell", lambda *_: idle.set())):
        shell.events.register(event, hook)
        context.hooks.append((event, hook))

    def start_background_work(*_: Any) -> None:
        if not idle.is_set():
            return  # the timer fired during a cell: the cell's end starts the work
        codebase.build_in_background()
        # The SDK, the agent and the rest, once the index is ready.
        _warm_up_in_background(context, codebase, idle)

    if index_delay > 0:
        timer = threading.Timer(index_delay, start_background_work)
        timer.daemon = True
        timer.start()
        context.hooks.append(("post_run_cell", start_background_work))
        shell.events.register("post_run_cell", start_background_work)
    else:
        start_background_work()
    namespace["vault"] = LazyName("vault", lambda: shared_vault(context), namespace, "persistent memory")

    def rlm_call(question: str, context_text: str = "") -> str:
        """One focused sub-model call (bulk slot): no tools, answer as a string. See ``rlm_stats()``."""
        from aries_kernel.models.errors import ModelError

        try:
            return _rlm(context).call(question, context_text)
        except ModelError as exc:  # its message says it all: not the SDK's and httpx's chained tracebacks
            raise exc.with_traceback(None) from None

    def rlm_batch(pairs: list[tuple[str, str]]) -> list[str]:
        """Many ``rlm_call``s at once (at most 5 in flight), answers in input order."""
        from aries_kernel.models.errors import ModelError

        try:
            return _rlm(context).batch(pairs)
        except ModelError as exc:
            raise exc.with_traceback(None) from None

    def rlm_stats() -> Any:
        """Calls, tokens, cost and seconds of the ``rlm_*`` calls in the current execution."""
        return _rlm(context).stats()

    namespace.update(rlm_call=rlm_call, rlm_batch=rlm_batch, rlm_stats=rlm_stats)
    # Hidden from %who and %whos like IPython's own names, so `%who` lists only what the user made.
    shell.user_ns_hidden.update({name: namespace[name] for name in BODY_NAMES})

    def start_execution(info: Any = None) -> None:
        cell = getattr(info, "raw_cell", "") or ""
        # Nothing but a thread or a callback can have changed a protected setting since the last cell ended.
        context.settings_owner.settle("between cells")
        rlm = context.built("rlm")
        if rlm is not None:
            rlm.start_execution()  # the rlm call budget is per top-level execution
        # Imported only by an outside agent's first step: until then there is nothing to tell.
        # (A background import may hold it half-initialized: no note_in_cell yet, and nothing has run.)
        outside = sys.modules.get("aries_kernel.agent.outside")
        note_in_cell = getattr(outside, "note_in_cell", None)
        if note_in_cell is not None:
            note_in_cell(cell)
        if "aries_kernel.agent.outside" not in cell:  # an outside agent's own step is not the user's cell
            _show_settings_reports(context)

    def end_execution(result: Any = None) -> None:
        context.settings_owner.settle("user")  # what the user's cell changed is theirs (see settle)

    # The record of executed cells and the last error, for the agent's notebook context (aries_kernel.notebook).
    cells = context.lazy("cells", lambda _: CellLog(shell))
    for event, hook in (
        ("pre_run_cell", start_execution),
        ("post_run_cell", end_execution),
        ("pre_run_cell", cells.pre_run_cell),
        ("post_run_cell", cells.post_run_cell),
    ):
        shell.events.register(event, hook)
        context.hooks.append((event, hook))

    from aries_kernel.notebook.frontend import register

    register(context)  # the comm of aries-kernel's JupyterLab extension: the agent's steps as cells
    from aries_kernel.key_broker import watch_cells

    watch_cells(shell, context)  # with a key broker: keys set in a cell go to it, out of this process
    from aries_kernel.magics import AriesMagics  # registered here only: the core never uses the magics

    shell.register_magics(AriesMagics)
    install_stack_dump()
    if (problem := stack_dump_problem()) is not None:
        context.problems["log folder"] = problem
    return context


def _show_settings_reports(context: AriesContext) -> None:
    """Tell the user, at the start of their cell, of every change to a protected setting refused or set back."""
    reports = context.settings_owner.unshown_reports()
    if reports:
        from IPython.display import display

        lines = "\n".join(f"- {line}" for line in reports)
        text = f"[Aries] Settings only you change:\n{lines}\n{ONLY_YOU}"
        display({"text/plain": text}, raw=True)


def uninstall(shell: Any) -> None:
    """Remove the body's names and hooks from ``shell`` (``%unload_ext aries_kernel``)."""
    context = getattr(shell, "_aries_context", None)
    if context is None:
        return
    for name in BODY_NAMES:
        shell.user_ns.pop(name, None)
        shell.user_ns_hidden.pop(name, None)
    for event, hook in context.hooks:
        shell.events.unregister(event, hook)
    from aries_kernel.magics.aries import keep_question_marks

    if keep_question_marks in shell.input_transformers_cleanup:
        shell.input_transformers_cleanup.remove(keep_question_marks)
    delattr(shell, "_aries_context")


# A fresh kernel answers its first request quickly because it imports almost nothing. The first ``%aries`` then
# paid for the provider SDK, the agent loop, the vault (SQLAlchemy), ipywidgets and igraph, several seconds,
# before its request could leave; so they are imported in a daemon thread, in the order the first request needs
# them. That thread yields to what the user waits for: it starts once the index is ready (two cores run the
# index's workers; an import beside them slows the index as much as it gains) and imports only while no cell runs
# (a prompt sent meanwhile imports what its request needs itself, and nothing else competes with it). The SDKs
# are those of the slots that can be called now (see _warm_modules): a kernel without a key pays for none, one
# with the default Anthropic slots not for OpenAI's (0.7 s of CPU and its memory in every kernel). The lists live
# here because this module is the one part of the core that knows the magics and widgets.
_AGENT_MODULES = (
    "aries_kernel.magics.agent",  # the %aries prompt handler, and with it the agent loop and its tools
    "aries_kernel.agent.memory",  # the memory plug-in, which opens the vault before the first request
    "aries_kernel.vault.vault",  # the vault itself: SQLAlchemy
    "igraph",  # the communities of the code map in the agent's system prompt
    "httpx",  # the local-server probe before a request to a local address
)
_PANEL_MODULE = "aries_kernel.widgets"  # behind the first request: only a widget frontend shows the panel
_warm_up_started = threading.Event()
# Held by the warm-up while it imports; a cell waits for it before it runs (see install).
_background_import = threading.Lock()
# What a codebase answer imports (numpy, pandas, tree-sitter): 0.4 s of a warm kernel's first stats() on pandas.
_CODEBASE_MODULE = "aries_kernel.codebase.core"


def _import_quietly(name: str) -> None:
    """Import module ``name`` ahead of its use; a failure is only logged."""
    had_pandas = "pandas" in sys.modules
    try:
        importlib.import_module(name)
    except Exception as exc:  # the same import fails again, visibly, where the user needs the module
        log.debug("background import of %s failed: %r", name, exc)
    if not had_pandas and (pandas := sys.modules.get("pandas")) is not None:
        _pandas_as_a_cell_imports_it(pandas)


def _pandas_as_a_cell_imports_it(pandas: Any) -> None:
    """Give pandas the ``display.max_columns`` a kernel's cell gives it (20), when this thread imported it.

    pandas picks that default at import from whether ``get_ipython`` is a builtin, which IPython makes it only
    while a cell runs: imported here, between cells, it would take a terminal's 0 ("fit the terminal", columns
    dropped behind "..."), so a frame would print one way or the other by which thread imported pandas first."""
    try:
        if pandas.get_option("display.max_columns") == 0:
            pandas.set_option("display.max_columns", 20)
    except Exception as exc:  # a pandas without these options: leave it as it is
        log.debug("pandas display options not set: %r", exc)


def _warm_modules(context: AriesContext) -> list[str]:
    """What the warm-up imports, in order: the provider of the primary slot's model, the agent
    (:data:`_AGENT_MODULES`), the providers of the other slots, the panel. Only the providers of slots that can
    be called now count (a key set, the key broker holding it, or a local server that needs none): a slot
    without a key would fail before its SDK is used, and a key set later is imported by the request itself."""
    from aries_kernel.models.provider import provider_module

    try:
        wires = shared_models(context).callable_wires()
    except Exception as exc:  # a bad setting: the first request reports it, with its own message
        log.debug("no provider warmed up: %r", exc)
        wires = []
    providers = [module for module in map(provider_module, wires) if module is not None]
    return [*providers[:1], *_AGENT_MODULES, *providers[1:], _PANEL_MODULE]


def _import_warm_modules(context: AriesContext, codebase: LazyName, idle: threading.Event) -> None:
    index = codebase.join()
    while index is not None and not index.ready:
        time.sleep(0.1)  # Codebase.wait_ready would show its progress bar in the user's cell
    while True:
        idle.wait()  # _warm_modules builds the model router: not while a cell runs either
        with _background_import:
            if idle.is_set():
                names = _warm_modules(context)
                break
    while names:
        idle.wait()
        with _background_import:
            if idle.is_set():  # else a cell started meanwhile: it runs first
                _import_quietly(names.pop(0))


def _warm_up_in_background(context: AriesContext, codebase: LazyName, idle: threading.Event) -> None:
    """Start importing :func:`_warm_modules` in a daemon thread (once per process), after ``codebase``'s index
    is ready and while ``idle`` is set."""
    if _warm_up_started.is_set():
        return
    _warm_up_started.set()
    threading.Thread(
        target=_import_warm_modules, args=(context, codebase, idle), name="aries-warm-up", daemon=True
    ).start()
