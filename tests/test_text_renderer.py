"""The plain-text renderer of ``%aries``: streamed text is flushed in batches, lines and the end at once."""

from __future__ import annotations

import io

import pytest

from aries_kernel.agent import render
from aries_kernel.agent.events import TextDelta, ToolCallStarted
from aries_kernel.agent.render import TEXT_FLUSH_SECONDS, TextRenderer


class CountingOut(io.StringIO):
    """A stream that counts its flushes: each is one IOPub message in a kernel."""

    def __init__(self) -> None:
        super().__init__()
        self.flushes: list[str] = []

    def flush(self) -> None:
        self.flushes.append(self.getvalue())


def test_streamed_text_is_flushed_once_per_interval_and_a_line_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr(render.time, "monotonic", lambda: clock[0])
    out = CountingOut()
    renderer = TextRenderer(out=out)
    for _ in range(500):  # a fast model: 500 tokens within one interval
        renderer(TextDelta("tok "))
    assert len(out.flushes) == 1  # the first token, then nothing until the interval has passed
    clock[0] += TEXT_FLUSH_SECONDS
    renderer(TextDelta("more"))
    assert len(out.flushes) == 2 and out.flushes[-1].endswith("tok more")
    renderer(TextDelta(" unflushed"))
    assert len(out.flushes) == 2
    renderer(ToolCallStarted(id="t1", name="Repl", arguments={"code": "1"}))  # a line goes out at once
    assert len(out.flushes) >= 3 and out.flushes[-1].endswith("> Repl(code=1)\n")
    assert " unflushed\n" in out.flushes[-1]
