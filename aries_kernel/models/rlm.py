"""``rlm_call`` / ``rlm_batch`` (SPEC 3.2): plain sub-model completions on a focused slice, capped per run.

A sub-call is one user turn with no tools: the answer is a string, data that is never executed, and the
sub-model cannot call rlm itself. Calls go to the ``bulk`` slot (an empty bulk slot borrows cheap's model,
then primary's; a slot whose key is missing is skipped for the next one that has a key). Each top-level
execution may make ``c.AriesRlm.max_calls`` calls; past that a call returns :data:`BUDGET_EXHAUSTED` without a
request. The kernel calls :meth:`Rlm.start_execution` before each cell, and the agent before each of its Repl
steps, so each cell and each Repl step has its own budget. Calls draw on the router's spend limits too: past
one, a call is refused with :class:`~aries_kernel.models.errors.BudgetExceeded` without a request.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from traitlets import Int, Unicode
from traitlets.config import Configurable

from aries_kernel.models.errors import BudgetExceeded, ConfigurationError, ModelError
from aries_kernel.models.router import ModelRouter, SlotClient
from aries_kernel.models.types import Completion, Message, ModelRequest

if TYPE_CHECKING:  # imported by the tables, not by a model call
    import pandas as pd

__all__ = ["BUDGET_EXHAUSTED", "AriesRlm", "Rlm", "RlmStats"]

BUDGET_EXHAUSTED = (
    "[rlm budget exhausted: {limit} sub-calls were already made in this execution, so this one was not sent. "
    "Answer from what you have, or continue in the next execution (limit: c.AriesRlm.max_calls).]"
)
_SLOT_ORDER = ("bulk", "cheap", "primary")


class AriesRlm(Configurable):
    """Settings of rlm_call / rlm_batch (``c.AriesRlm.<name>``)."""

    max_calls = Int(
        15,
        help="Sub-calls allowed per top-level execution (a cell, or one Repl step of the agent); later ones "
        "return the budget string.",
    ).tag(config=True)
    concurrency = Int(5, help="Sub-calls of one rlm_batch in flight at once.").tag(config=True)
    max_tokens = Int(
        0,
        help="Answer length limit of one sub-call, in tokens; 0 means a quarter of the model's context window, "
        "at most 4,096.",
    ).tag(config=True)
    system = Unicode(
        "You answer one focused question about the context you are given. Reply with the answer only: no "
        "preamble, no restating the question.",
        help="System prompt of every sub-call.",
    ).tag(config=True)


_COLUMNS = [
    "question",
    "slot",
    "model",
    "input_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "output_tokens",
    "cost_usd",
    "seconds",
    "status",
]
_REFUSED = ("over budget", "over spend limit")  # statuses of calls that were never sent


@dataclass
class RlmStats:
    """Sub-calls of one execution: ``table`` has one row per call, and every total is a sum of its rows (the
    one source of both). ``input_tokens`` are the prompt tokens the server processed; prompt-cache reads and
    writes are counted apart, as the provider bills them."""

    seconds: float = 0.0  # wall time spent inside rlm_call / rlm_batch
    unpriced: set[str] = field(default_factory=set)
    rows: list[dict[str, Any]] = field(default_factory=list, repr=False)

    def _sum(self, column: str) -> Any:
        return sum(row.get(column) or 0 for row in self.rows)

    @property
    def calls(self) -> int:
        """Calls sent (answered or failed)."""
        return sum(1 for row in self.rows if row["status"] not in _REFUSED)

    @property
    def refused(self) -> int:
        """Calls past the call budget or a spend limit: never sent."""
        return len(self.rows) - self.calls

    @property
    def errors(self) -> int:
        return sum(1 for row in self.rows if row["status"] not in ("ok", *_REFUSED))

    @property
    def input_tokens(self) -> int:
        return int(self._sum("input_tokens"))

    @property
    def cache_read_tokens(self) -> int:
        return int(self._sum("cache_read_tokens"))

    @property
    def cache_write_tokens(self) -> int:
        return int(self._sum("cache_write_tokens"))

    @property
    def output_tokens(self) -> int:
        return int(self._sum("output_tokens"))

    @property
    def cost_usd(self) -> float:
        return float(self._sum("cost_usd"))

    @property
    def table(self) -> pd.DataFrame:
        """One row per sub-call: question, slot, model, tokens (cache apart), cost, seconds, status."""
        import pandas as pd

        return pd.DataFrame(self.rows, columns=_COLUMNS)

    def __repr__(self) -> str:
        cached = ""
        if self.cache_read_tokens or self.cache_write_tokens:
            cached = f" (+{self.cache_read_tokens} cache read, {self.cache_write_tokens} cache write)"
        text = (
            f"rlm: {self.calls} calls ({self.refused} over budget, {self.errors} failed), "
            f"{self.input_tokens} in{cached} / {self.output_tokens} out tokens, ${self.cost_usd:.4f}, "
            f"{self.seconds:.2f}s"
        )
        if self.unpriced:
            text += f" (no price known for {', '.join(sorted(self.unpriced))}: counted as $0)"
        return text

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))


class Rlm:
    """Sub-model calls for the REPL body: ``call``, ``batch``, ``stats``, ``start_execution``."""

    def __init__(self, router: ModelRouter, config: Any = None) -> None:
        self.router = router
        self.settings = AriesRlm(config=config if config is not None else router.settings.config)
        self._lock = threading.Lock()
        self._used = 0
        self._current = RlmStats()
        self._previous = RlmStats()

    def start_execution(self) -> None:
        """Begin a new top-level execution: reset the call count (before each cell and each agent Repl step)."""
        with self._lock:
            if self._current.rows:
                self._previous = self._current
            self._current = RlmStats()
            self._used = 0

    def stats(self) -> RlmStats:
        """This execution's sub-calls, or, when it has made none yet, those of the last execution that did."""
        with self._lock:
            current = self._current
            return current if current.rows else self._previous

    def call(self, question: str, context: str = "") -> str:
        """One plain completion of ``question`` about ``context``; the answer as a string."""
        _check_pair(question, context, 0)
        client = self._client()
        start = time.perf_counter()
        try:
            return self._one(client, question, context)
        finally:
            self._add_seconds(time.perf_counter() - start)

    def batch(self, pairs: Iterable[tuple[str, str]]) -> list[str]:
        """Answers to ``[(question, context), ...]`` in input order, at most ``concurrency`` in flight.

        A call refused by the budget gives the budget string; one that failed at the provider gives
        ``"[rlm error: ...]"`` so the other answers are kept.
        """
        items = list(pairs)
        for index, pair in enumerate(items):
            if not (isinstance(pair, tuple | list) and len(pair) == 2):
                raise TypeError(
                    f"rlm_batch item {index} is {pair!r}; each item must be a (question, context) pair."
                )
            _check_pair(pair[0], pair[1], index)
        if not items:
            return []
        client = self._client()
        start = time.perf_counter()
        # The kernel's main thread already runs an event loop, so the batch gets a private loop in a worker.
        runner = _BatchRunner(self, client, items)
        pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="rlm-batch")
        try:
            return pool.submit(runner.run).result()
        except KeyboardInterrupt:
            runner.cancel()  # queued calls are dropped; those already in flight end in the background
            raise
        finally:
            pool.shutdown(wait=False)
            self._add_seconds(time.perf_counter() - start)

    def _client(self) -> SlotClient:
        """The first of bulk, cheap, primary that has a key; bulk itself when none has (to report its key)."""
        clients: list[SlotClient] = []
        for slot in _SLOT_ORDER:
            try:
                clients.append(self.router.client(slot))
            except ConfigurationError:
                continue
        for client in clients:
            if client.has_credentials():
                return client
        if not clients:
            raise ConfigurationError(
                "No model is configured for rlm sub-calls: set one with %aries model bulk <shortname>."
            )
        return clients[0]

    def _reserve(self, question: str) -> bool:
        with self._lock:
            if self._used >= self.settings.max_calls:
                self._current.rows.append({"question": question[:80], "status": "over budget"})
                return False
            self._used += 1
            return True

    def _request(self, client: SlotClient, question: str, context: str) -> ModelRequest:
        prompt = f"<context>\n{context}\n</context>\n\n{question}" if context else question
        limit = self.settings.max_tokens or client.default_max_tokens(4096)
        return ModelRequest([Message("user", prompt)], system=self.settings.system, max_tokens=limit)

    def _one(self, client: SlotClient, question: str, context: str) -> str:
        if not self._reserve(question):
            return BUDGET_EXHAUSTED.format(limit=self.settings.max_calls)
        try:
            completion = client.complete(self._request(client, question, context))
        except BudgetExceeded:
            self._refuse(question, "over spend limit")
            raise
        except ModelError as exc:
            self._record(client, question, None, str(exc))
            raise
        self._record(client, question, completion, "ok")
        return completion.message.content

    async def _aone(self, client: SlotClient, question: str, context: str) -> str:
        if not self._reserve(question):
            return BUDGET_EXHAUSTED.format(limit=self.settings.max_calls)
        try:
            completion = await client.acomplete(self._request(client, question, context))
        except BudgetExceeded as exc:
            self._refuse(question, "over spend limit")
            return f"[rlm refused: {exc}]"
        except ConfigurationError:
            raise  # no call could succeed: say so once instead of in every answer
        except ModelError as exc:
            self._record(client, question, None, str(exc))
            return f"[rlm error: {exc}]"
        self._record(client, question, completion, "ok")
        return completion.message.content

    def _refuse(self, question: str, status: str) -> None:
        """Note a reserved call that was not sent after all (a spend limit), as a refusal."""
        with self._lock:
            self._current.rows.append({"question": question[:80], "status": status})

    def _record(self, client: SlotClient, question: str, completion: Completion | None, status: str) -> None:
        with self._lock:
            stats = self._current
            row: dict[str, Any] = {
                "question": question[:80],
                "slot": client.slot,
                "model": client.model,
                "status": status,
            }
            if completion is not None:
                usage = completion.usage
                row.update(
                    input_tokens=usage.input_tokens,
                    cache_read_tokens=usage.cache_read_tokens,
                    cache_write_tokens=usage.cache_write_tokens,
                    output_tokens=usage.output_tokens,
                    cost_usd=usage.cost_usd,
                    seconds=round(completion.seconds, 3),
                )
                if not client.priced:
                    stats.unpriced.add(client.model)
            stats.rows.append(row)

    def _add_seconds(self, seconds: float) -> None:
        with self._lock:
            self._current.seconds += seconds


class _BatchRunner:
    """One rlm_batch on its own event loop (run in a worker thread), cancellable from the caller's thread."""

    def __init__(self, rlm: Rlm, client: SlotClient, items: list[tuple[str, str]]) -> None:
        self.rlm, self.client, self.items = rlm, client, items
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[list[str]] | None = None

    def run(self) -> list[str]:
        workers = max(1, self.rlm.settings.concurrency)
        with asyncio.Runner() as runner:
            self._loop = runner.get_loop()
            # acomplete runs each call in the loop's executor: size it to the semaphore, not to the CPU count.
            self._loop.set_default_executor(concurrent.futures.ThreadPoolExecutor(workers, "rlm-call"))
            return runner.run(self._main())

    async def _main(self) -> list[str]:
        self._task = asyncio.current_task()
        semaphore = asyncio.Semaphore(max(1, self.rlm.settings.concurrency))

        async def limited(question: str, context: str) -> str:
            async with semaphore:
                return await self.rlm._aone(self.client, question, context)

        return list(await asyncio.gather(*(limited(q, c) for q, c in self.items)))

    def cancel(self) -> None:
        if self._loop is not None and self._task is not None:
            self._loop.call_soon_threadsafe(self._task.cancel)


def _check_pair(question: Any, context: Any, index: int) -> None:
    if not isinstance(question, str) or not isinstance(context, str):
        raise TypeError(
            f"rlm question and context must be strings (item {index}: got {type(question).__name__}, "
            f"{type(context).__name__}); pass str(value) or a slice such as codebase.get_context(...)."
        )
