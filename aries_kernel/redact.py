"""Secrets kept off disk: redaction of common key formats, and an environment without the provider keys.

Everything aries-kernel writes that could hold text from outside (tool output, session files, compaction
summaries, vault notes, the code index) goes through :func:`redact` first. It replaces

- the values of the provider key variables (``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``, ... and any variable
  whose name ends in ``_API_KEY``, ``_TOKEN`` or ``_SECRET``) as they are set in this process, and
- strings in the well-known formats of Anthropic, OpenAI, GitHub, AWS, Slack, Google and private-key blocks,

with ``[REDACTED:<kind>]``. The patterns are a small fixed set rather than a general entropy detector
(detect-secrets, for example, works on files and lines and flags high-entropy strings, which in source code
means hashes and test data): here a false positive would corrupt the user's code in the index and transcripts.

:func:`scrubbed_env` is the environment handed to subprocesses the agent starts: a copy of ``os.environ``
without the key variables, unless the user allowed them by name. :func:`withheld_keys` takes them out of this
process's own ``os.environ`` for a block (an agent Repl step) and puts them back after; meanwhile
:func:`environ_value` (what the model router reads keys with) and :func:`redact` still know them.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager

__all__ = [
    "KEY_VARIABLES",
    "environ_value",
    "is_key_variable",
    "redact",
    "scrubbed_env",
    "withheld_keys",
]

# The provider key variables aries-kernel knows by name (models/shortnames.py), plus the usual cloud ones.
KEY_VARIABLES = frozenset(
    {
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "GOOGLE_API_KEY",
        "GEMINI_API_KEY",
        "DEEPSEEK_API_KEY",
        "MOONSHOT_API_KEY",
        "GROQ_API_KEY",
        "OPENROUTER_API_KEY",
        "ARIES_CUSTOM_API_KEY",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "HF_TOKEN",
        "SLACK_BOT_TOKEN",
    }
)
_KEY_SUFFIXES = ("_API_KEY", "_TOKEN", "_SECRET", "_SECRET_KEY", "_ACCESS_KEY")
_MIN_VALUE_CHARS = 8  # shorter values ("1", "true") are not secrets, and replacing them would garble text

_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    (
        "private-key",
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----[\s\S]{0,20000}?"
            r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
        ),
    ),
    # Each pattern starts with a literal and checks the word boundary before it with a lookbehind: the same
    # matches as a leading \b, but the regex engine can jump to the literal (20-40x faster on source code,
    # which the indexer redacts whole).
    ("anthropic", re.compile(r"sk-ant-(?<!\wsk-ant-)[A-Za-z0-9_\-]{20,}")),
    ("openai", re.compile(r"sk-(?<!\wsk-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}")),
    ("github", re.compile(r"g(?<!\wg)(?:h[pousr]_[A-Za-z0-9]{36,}|ithub_pat_[A-Za-z0-9_]{22,})")),
    ("aws-access-key", re.compile(r"A(?<!\wA)(?:KIA|SIA|GPA|IDA|ROA|NPA)[A-Z0-9]{16}\b")),
    (
        "aws-secret",
        re.compile(r"(?i)(aws_secret_access_key\s*[=:]\s*[\"']?)[A-Za-z0-9/+=]{40}"),
    ),
    ("slack", re.compile(r"xox(?<!\wxox)[abposr]-[A-Za-z0-9\-]{10,}")),
    ("slack-webhook", re.compile(r"https://hooks\.slack\.com/services/[A-Za-z0-9/_\-]{20,}")),
    ("google", re.compile(r"AIza(?<!\wAIza)[0-9A-Za-z_\-]{35}")),
]


def is_key_variable(name: str) -> bool:
    """Whether the environment variable ``name`` holds a credential (by name)."""
    upper = name.upper()
    return upper in KEY_VARIABLES or upper.endswith(_KEY_SUFFIXES)


def _secret_values(environ: Mapping[str, str]) -> list[str]:
    values = {
        value
        for name, value in [*environ.items(), *_WITHHELD.items()]
        if is_key_variable(name) and len(value.strip()) >= _MIN_VALUE_CHARS
    }
    return sorted(values, key=len, reverse=True)  # longest first, so a key containing another goes whole


def redact(text: str, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with key values and known key formats replaced by ``[REDACTED:<kind>]``."""
    if not text:
        return text
    for value in _secret_values(os.environ if environ is None else environ):
        if value in text:
            text = text.replace(value, "[REDACTED:env]")
    for kind, pattern in _PATTERNS:
        if kind == "aws-secret":
            text = pattern.sub(lambda match: f"{match.group(1)}[REDACTED:aws-secret]", text)
        else:
            text = pattern.sub(f"[REDACTED:{kind}]", text)
    return text


def scrubbed_env(allow: Iterable[str] = (), environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of the environment without credential variables, except those named in ``allow``."""
    allowed = {name.upper() for name in allow}
    source = os.environ if environ is None else environ
    return {
        name: value
        for name, value in source.items()
        if not is_key_variable(name) or name.upper() in allowed
    }


# Key variables taken out of os.environ by withheld_keys, by name, until the block that took them ends.
_WITHHELD: dict[str, str] = {}
_WITHHELD_LOCK = threading.Lock()


def environ_value(name: str, default: str = "") -> str:
    """The environment variable ``name``, including a key withheld from ``os.environ`` for a Repl step."""
    return os.environ.get(name) or _WITHHELD.get(name, default)


@contextmanager
def withheld_keys(allow: Iterable[str] = ()) -> Iterator[list[str]]:
    """Remove the credential variables (except those in ``allow``) from ``os.environ`` for the block, so code
    run in this process and the processes it starts do not see them; yields their names and restores them
    (their original values) when the block ends."""
    allowed = {name.upper() for name in allow}
    with _WITHHELD_LOCK:
        names = [name for name in os.environ if is_key_variable(name) and name.upper() not in allowed]
        for name in names:
            _WITHHELD[name] = os.environ.pop(name)
    try:
        yield names
    finally:
        with _WITHHELD_LOCK:
            for name in names:
                os.environ[name] = _WITHHELD.pop(name)
