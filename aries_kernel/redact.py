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
without the key variables, unless the user allowed them by name.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

__all__ = ["KEY_VARIABLES", "is_key_variable", "redact", "scrubbed_env"]

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
    ("anthropic", re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{20,}")),
    ("openai", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}")),
    ("github", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})")),
    ("aws-access-key", re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[A-Z0-9]{16}\b")),
    (
        "aws-secret",
        re.compile(r"(?i)(aws_secret_access_key\s*[=:]\s*[\"']?)[A-Za-z0-9/+=]{40}"),
    ),
    ("slack", re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}")),
    ("slack-webhook", re.compile(r"https://hooks\.slack\.com/services/[A-Za-z0-9/_\-]{20,}")),
    ("google", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}")),
]


def is_key_variable(name: str) -> bool:
    """Whether the environment variable ``name`` holds a credential (by name)."""
    upper = name.upper()
    return upper in KEY_VARIABLES or upper.endswith(_KEY_SUFFIXES)


def _secret_values(environ: Mapping[str, str]) -> list[str]:
    values = {
        value
        for name, value in environ.items()
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
            text = pattern.sub(lambda match: f"{match.group(1)}[REDACTED:{kind}]", text)
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
