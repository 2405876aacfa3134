"""Code-action mode: the agent acts by writing fenced Python blocks instead of calling tools.

For a model without tool calling (a local server whose chat template has none), and for any model that is asked
to work this way (``c.AriesAgent.actions = "code"``). The request carries no tool schemas; the system prompt
says how to act. Each ```` ```python ```` block of a reply runs as one Repl step in the kernel: the same tool,
permission mode, Repl guard and approvals, rlm budget and session records as a Repl tool call. The outputs go
back in one user message, and a reply without a block ends the run. It is the seed's REPL-first idea in its
purest form: the notebook's namespace is the tool set.
"""

from __future__ import annotations

import re

from aries_kernel.models import types as mt

__all__ = ["CALL_PREFIX", "INSTRUCTIONS", "calls_in", "is_code_call", "python_blocks", "results_message"]

CALL_PREFIX = "code_"  # ids of the Repl calls made from a reply's blocks (they never go on the wire)
_FENCE = re.compile(r"^\s*```+\s*([\w+-]*)")
_PYTHON = ("", "python", "python3", "py")  # an unlabelled block counts as Python; other languages are text

INSTRUCTIONS = """\
# How you act: code blocks

You have no tool calls here. To act, write Python in fenced blocks:

```python
print(codebase.search("parse_config"))
```

Each block runs, in order, in the user's live Python kernel (its variables persist between blocks and turns;
`codebase`, `vault`, `rlm_call` and `rlm_batch` are defined there), and you are sent what it printed and the
value of its last line. Read files with `open(...)`, change them by writing them, run commands with
`subprocess`: edits and commands are asked of the user first when the permission mode says so. Write a block
when you need a fact or must do something; when you are done, answer in plain text with no code block, which
ends your turn."""


def python_blocks(text: str) -> list[str]:
    """The code of each fenced Python block of ``text``, in order; an unclosed last block counts (a reply cut
    at max_tokens may still hold a whole statement, and the error says so if not)."""
    blocks: list[str] = []
    label: str | None = None  # the open block's language, None outside a block
    lines: list[str] = []
    for line in text.splitlines():
        fence = _FENCE.match(line)
        if label is None:
            if fence:
                label, lines = fence.group(1).lower(), []
        elif fence and not fence.group(1):
            if label in _PYTHON and "\n".join(lines).strip():
                blocks.append("\n".join(lines))
            label = None
        else:
            lines.append(line)
    if label in _PYTHON and "\n".join(lines).strip():
        blocks.append("\n".join(lines))
    return blocks


def calls_in(message: mt.Message, turn: int) -> list[mt.ToolCall]:
    """One Repl call per Python block of ``message``'s text, in order (none: the reply ends the run)."""
    return [
        mt.ToolCall(f"{CALL_PREFIX}{turn}_{index}", "Repl", {"code": code})
        for index, code in enumerate(python_blocks(message.content), 1)
    ]


def is_code_call(call: mt.ToolCall) -> bool:
    """Whether ``call`` was made from a code block (its result goes back as text, not as a tool result)."""
    return call.id.startswith(CALL_PREFIX)


def results_message(results: list[tuple[str, bool]]) -> mt.Message:
    """The outputs of a reply's blocks, ``(output, is_error)`` each, as the user message the model reads next."""
    parts = []
    for number, (output, is_error) in enumerate(results, 1):
        label = "failed" if is_error else "output"
        parts.append(f"[block {number} {label}]\n{output.strip() or '(no output)'}")
    return mt.Message("user", "\n\n".join(parts))
