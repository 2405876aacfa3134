"""Keep ``%aries why is it slow?`` a prompt: IPython would read a line ending in ``?`` as a help request.

:func:`keep_question_marks` is an input transformer (for ``shell.input_transformers_cleanup``) that rewrites
such a line into the explicit ``run_line_magic`` call before IPython's help transformer sees it. It imports
nothing heavy, so the kernel can install it at start.
"""

from __future__ import annotations

import re

__all__ = ["install_question_marks", "keep_question_marks"]

_QUESTION_LINE = re.compile(r"^(\s*)%aries\s+(\S.*\?)\s*$")


def keep_question_marks(lines: list[str]) -> list[str]:
    """Rewrite ``%aries <text>?`` lines into ``get_ipython().run_line_magic('aries', '<text>?')``.

    ``run_line_magic`` still expands ``{var}`` as the ``%`` form does; ``%aries?`` (help on the magic) is left
    alone because it has no text after the magic's name.
    """
    rewritten = []
    for line in lines:
        match = _QUESTION_LINE.match(line)
        if match:
            indent, text = match.groups()
            line = f"{indent}get_ipython().run_line_magic('aries', {text!r})\n"
        rewritten.append(line)
    return rewritten


def install_question_marks(shell: object) -> None:
    """Add :func:`keep_question_marks` to ``shell``'s cleanup transformers, once."""
    transformers = shell.input_transformers_cleanup  # type: ignore[attr-defined]
    if keep_question_marks not in transformers:
        transformers.append(keep_question_marks)
