"""Code from an outside agent (the ``repl`` tool of ``aries-kernel mcp --kernel``), run inside this kernel.

:func:`run` is what the MCP server's execute request calls. It runs the code as an ``%aries`` Repl step runs
the agent's: in the user namespace (:func:`~aries_kernel.agent.repl.run_code`), under the Repl guard
(:func:`~aries_kernel.agent.guard.guarded`) weighed by the permission mode, with the provider keys withheld,
as untrusted code to the settings' owner (:mod:`~aries_kernel.settings_owner`): it cannot change the
permission, key, endpoint or spend settings, now or through what it leaves running. The mode is the one the server was started with, else the kernel's own
(``c.AriesAgent.permission_mode``). Nobody can be asked from here, so an effect the mode would ask about is
refused with the way to allow it. The request's output shows a note of what ran, :data:`RUNS` keeps the
kernel's record (``%aries status`` sums it up under "Outside agents"); the result is printed (redacted, cut to
``tool_output_chars``) for the server to read. A note the code writes records the MCP client as its origin.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

from aries_kernel.agent.guard import Verdict, guarded
from aries_kernel.agent.permissions import decide, effective_mode, refusal
from aries_kernel.agent.repl import run_code, truncate
from aries_kernel.redact import redact, withheld_keys
from aries_kernel.vault.provenance import Provenance, acting

__all__ = ["RUNS", "note_in_cell", "run"]

# What outside agents ran in this kernel, oldest first: time, code, permission mode, what the guard refused.
RUNS: list[dict[str, Any]] = []
_numbers = itertools.count(1)
_noted = 0  # RUNS[:_noted] have been told to the user in a cell of theirs


def run(shell: Any, code: str, mode: str | None = None, who: str = "an MCP client") -> None:
    """Run ``code`` from ``who`` in ``shell``'s namespace under the Repl guard; print the result text."""
    from IPython.display import display

    from aries_kernel.context import get_context

    context = get_context(shell)
    settings, owner = context.agent_settings, context.settings_owner
    owner.settle("user")  # the mode this step weighs by is the one the user last set
    mode = effective_mode(settings, mode or None)
    display(
        {
            "text/plain": f"[Aries] {who} ran (permission mode {mode}):\n{code}",
            "text/markdown": f"**[Aries] {who} ran** (permission mode `{mode}`):\n\n```python\n{code}\n```",
        },
        raw=True,
    )

    def ask(effect: str, summary: str) -> Verdict:
        decision = decide(mode, effect)
        if decision == "allow":
            return Verdict(True, f"permission mode {mode}")
        if decision == "refuse":
            return Verdict(False, refusal(mode, effect))
        return Verdict(
            False,
            f"permission mode {mode} asks before {'file edits' if effect == 'edit' else 'commands'}, and an "
            "outside agent's step cannot be asked about; the user allows them by starting the server with "
            "`aries-kernel mcp --mode acceptEdits` (edits) or `--mode bypassPermissions` (everything)",
        )

    with (
        owner.untrusted(who),
        withheld_keys(settings.pass_env_keys),
        guarded(context.root, ask) as report,
        acting(Provenance("mcp")),  # a vault.add in the client's code is the MCP client's, not the user's
    ):
        result = run_code(shell, code, 10_000 + next(_numbers))
    text = result.as_text()
    if report.refused:
        text += "\n[Refused by the Repl guard: " + "; ".join(report.refused) + "]"
    RUNS.append({"at": time.time(), "who": who, "mode": mode, "code": code, "refused": list(report.refused)})
    print(truncate(redact(text), settings.tool_output_chars))


def note_in_cell(cell: str) -> None:
    """At the start of a user's cell, say what outside agents ran since the last such note.

    Their own output went to the outside agent's request, which a notebook does not show; this is how the human
    in JupyterLab learns of it. An outside agent's own step (which calls :func:`run`) gets no note.
    """
    global _noted
    if len(RUNS) <= _noted or __name__ in cell:
        return
    from IPython.display import display

    steps, _noted = RUNS[_noted:], len(RUNS)
    lines = []
    for step in steps:
        code = step["code"].strip()
        first = code.splitlines()[0][:100] if code else ""
        more = " ..." if len(code) > len(first) else ""
        refused = f"; refused: {'; '.join(step['refused'])}" if step["refused"] else ""
        lines.append(f"- {step['who']} (mode {step['mode']}): {first}{more}{refused}")
    text = (
        f"[Aries] Since your last cell, outside agents ran {len(steps)} step(s) in this kernel:\n"
        + "\n".join(lines)
    )
    display({"text/plain": redact(text)}, raw=True)
