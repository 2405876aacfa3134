"""Secrets kept off disk: redaction of common key formats, and an environment without the provider keys.

Everything aries-kernel writes that could hold text from outside (tool output, session files, compaction
summaries, vault notes, the code index) goes through :func:`redact` first. It replaces

- the values of the provider key variables (``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``, ... and any variable
  whose name ends in ``_API_KEY``, ``_TOKEN`` or ``_SECRET``) as they are set in this process,
- strings in the well-known formats of Anthropic, OpenAI, Stripe (secret, restricted and webhook keys; not the
  publishable ``pk_`` ones), GitHub, GitLab, npm, PyPI, Hugging Face, AWS, Slack, Google, JSON Web Tokens and
  private-key blocks,
- passwords in URLs of any scheme (``scheme://user:pw@host``, ``?password=``, ``?token=``, ...) and libpq
  key=value strings (``password='a b'``), and
- the values of credentials by name: ``*PASSWORD``, ``*SECRET``, ``*TOKEN`` (and ``*_KEY``) in env output
  (``DB_PASSWORD=x``, ``export X_TOKEN="x"``) and in JSON or dict fields (``"db_password": "x"``),

with ``[REDACTED:<kind>]``. The patterns are a small fixed set rather than a general entropy detector
(detect-secrets, for example, works on files and lines and flags high-entropy strings, which in source code
means hashes and test data): here a false positive would corrupt the user's code in the index and transcripts.
So a keyword argument (``f(password=password)``), a template (``{token}``, ``${TOKEN}``, ``<your key>``) and
an upper-case name in code (``TOKEN = ...``, with spaces) are left alone. :func:`mask_url` is the display form
of a database URL or connection string: its passwords as ``***``.

:func:`scrubbed_env` is the environment handed to subprocesses the agent starts: a copy of ``os.environ``
without the key variables, unless the user allowed them by name. :func:`withheld_keys` hides them from
``os.environ`` for a block (an agent Repl step) and puts them back after; meanwhile :func:`environ_value` (what
the model router reads keys with) and :func:`redact` still know them.

What sees what while a block runs: code in the block's context (the step's code, the functions it calls, the
asyncio tasks it starts) finds no withheld key in ``os.environ``, ``os.getenv`` or ``os.environb``, and
neither does any process started while a block runs, from any thread: the process's C environment, which a
child inherits and a C library's ``getenv`` reads, is one per process, so the keys leave it for the block
(the one process-wide change, put back when the last block holding a key ends). Every other thread (the
indexer, warm-up, MCP and rlm threads, a thread of the user's) still finds the keys in ``os.environ``; so does
a thread the block itself starts (a new thread starts outside the block's context), which is one of the
ways out the README lists for the Repl guard.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable, Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = [
    "KEY_VARIABLES",
    "environ_value",
    "is_key_variable",
    "mask_url",
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

# A value that is a placeholder, not a secret: {var}, ${VAR}, $VAR, <your key>, %s, "...", code ((?P<...>, `x`),
# or text already redacted ([REDACTED:...]) or masked (***).
_NOT_PLACEHOLDER = r"(?![{$<%\[*(`]|\.\.\.)"
# A KEY=value value: quoted, or bare up to the end of the word (a bare value followed by "," or ")" is a keyword
# argument in code, ``f(password=password)``, and is left alone).
_ASSIGNED = (
    r'"' + _NOT_PLACEHOLDER + r'[^"\n]+"'
    r"|'" + _NOT_PLACEHOLDER + r"(?:[^'\\\n]|\\.)+'"
    r"|" + _NOT_PLACEHOLDER + r"[^\s'\"`,()\[\]{}]+(?=[\s;&|]|$)"
)
# Names of variables and fields that hold a credential: *PASSWORD, *PASSWD, *SECRET, *TOKEN (and *_KEY of each).
_SECRET_NAME = r"(?:(?:ssl)?password|passwd|secret|token)(?:_?key)?"
_SECRET_NAMES = [
    word + key for word in ("password", "passwd", "secret", "token") for key in ("", "_key", "key")
]
# The same as lookbehinds at the "=" of an upper-case KEY=value (not preceded by a lower-case letter: fooTOKEN=)
# and at the closing quote of a field name: anchored on a rarer character than the name's first letter.
_ENV_NAME_BEFORE = "|".join(f"(?<![a-z]{name.upper()}=)(?<={name.upper()}=)" for name in _SECRET_NAMES)
_FIELD_NAME_BEFORE = "|".join(f"(?<={name}[\"']:)" for name in _SECRET_NAMES)

# (kind, pattern): the whole match is replaced, or only its group ``s`` when it has one (a quoted value keeps its
# quotes). Each pattern starts with a literal (or a rarer character than the name it looks for, checked behind
# it) and checks the word boundary before it with a lookbehind: the same matches as a leading \b, but the regex
# engine can jump to the literal (20-40x faster on source code, which the indexer redacts whole). One pass per
# rule: Python's re finds no literal to jump to in an alternation of named groups, and one combined pattern was
# 5-30x slower (bench/bench_redact.py).
_RULES: tuple[tuple[str, str], ...] = (
    (
        "private-key",
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----[\s\S]{0,20000}?"
        r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----",
    ),
    ("anthropic", r"sk-ant-(?<!\wsk-ant-)[A-Za-z0-9_\-]{20,}"),
    ("openai", r"sk-(?<!\wsk-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"),
    # Stripe's secret and restricted keys, live and test (publishable pk_ keys are meant to be public).
    ("stripe", r"sk_(?<!\wsk_)(?:live|test)_[A-Za-z0-9]{16,}"),
    ("stripe", r"rk_(?<!\wrk_)(?:live|test)_[A-Za-z0-9]{16,}"),
    ("stripe", r"whsec_(?<!\wwhsec_)[A-Za-z0-9]{24,}"),
    ("github", r"g(?<!\wg)(?:h[pousr]_[A-Za-z0-9]{36,}|ithub_pat_[A-Za-z0-9_]{22,})"),
    ("gitlab", r"glpat-(?<!\wglpat-)[A-Za-z0-9_\-]{20,}"),
    ("npm", r"npm_(?<!\wnpm_)[A-Za-z0-9]{36}(?![A-Za-z0-9])"),
    ("pypi", r"pypi-(?<!\wpypi-)AgEIcHlwaS5vcmc[A-Za-z0-9_\-]{50,}"),
    ("huggingface", r"hf_(?<!\whf_)[A-Za-z0-9]{30,}(?![A-Za-z0-9_])"),
    ("aws-access-key", r"A(?<!\wA)(?:KIA|SIA|GPA|IDA|ROA|NPA)[A-Z0-9]{16}\b"),
    ("aws-secret", r"aws_secret_access_key\s*[=:]\s*[\"']?(?P<s>[A-Za-z0-9/+=]{40})"),
    ("aws-secret", r"AWS_SECRET_ACCESS_KEY\s*[=:]\s*[\"']?(?P<s>[A-Za-z0-9/+=]{40})"),
    ("slack", r"xox(?<!\wxox)[abposr]-[A-Za-z0-9\-]{10,}"),
    ("slack-webhook", r"https://hooks\.slack\.com/services/[A-Za-z0-9/_\-]{20,}"),
    ("google", r"AIza(?<!\wAIza)[0-9A-Za-z_\-]{35}"),
    # A JSON Web Token: base64url of '{"' (eyJ) for the header and the payload, then the signature.
    ("jwt", r"eyJ(?<!\weyJ)[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*"),
    # Passwords in URLs of any scheme: the userinfo (scheme://user:pw@host) and password-like query parameters.
    ("password", r"://[^\s/@:]*:(?P<s>" + _NOT_PLACEHOLDER + r"[^\s/@]+)@"),
    ("secret", r"[?&][\w.\-]*?(?i:" + _SECRET_NAME + r")=(?P<s>" + _NOT_PLACEHOLDER + r"[^&\s#'\"<>]+)"),
    # KEY=value lines of env output, .env files and `export` (upper-case names, as environment variables are).
    ("secret", r"=(?<=[DTNY]=)(?:" + _ENV_NAME_BEFORE + r")(?P<s>" + _ASSIGNED + r")"),
    # password= in libpq key=value strings (password='a b'), INI files and command lines.
    ("password", r"password=(?<![\w.\-]password=)(?P<s>" + _ASSIGNED + r")"),
    ("password", r"passwd=(?<![\w.\-]passwd=)(?P<s>" + _ASSIGNED + r")"),
    ("password", r"sslpassword=(?<![\w.\-]sslpassword=)(?P<s>" + _ASSIGNED + r")"),
    # JSON and Python dict fields: "db_password": "...", 'access_token': '...' (the colon right after the name).
    (
        "secret",
        r":(?<=[\"']:)(?i:" + _FIELD_NAME_BEFORE + r")\s*(?P<s>"
        r'"' + _NOT_PLACEHOLDER + r'[^"\n]+"|' + r"'" + _NOT_PLACEHOLDER + r"[^'\n]+')",
    ),
)
_PATTERNS = tuple((kind, re.compile(pattern)) for kind, pattern in _RULES)

# What mask_url hides: a URL's userinfo password, password= and sslpassword= in its query, and password= pairs
# of a libpq key=value string (quoted with backslash escapes, or bare up to the next space).
_URL_PASSWORD = re.compile(
    r"://[^\s/@:]*:(?P<userinfo>[^\s/@]+)@"
    r"|[?&](?:ssl)?password=(?P<query>[^&\s]+)"
    r"|(?<![\w.\-])(?:ssl)?password\s*=\s*(?P<pair>'(?:[^'\\]|\\.)*'?|(?:[^\s'\\]|\\.)+)"
)


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
    # Every rule's matches on the same text, then one rebuild: a pass that only finds is cheap, while each sub()
    # that replaced something would copy the whole text again. Where matches overlap, the leftmost one wins
    # (at the same start, the earlier rule): a private-key block whole, GITHUB_TOKEN=<key> as the assignment.
    found = sorted(
        (match.start(), rule, match.end(), _replacement(kind, match))
        for rule, (kind, pattern) in enumerate(_PATTERNS)
        for match in pattern.finditer(text)
    )
    if not found:
        return text
    parts, done = [], 0
    for start, _, end, replacement in found:
        if start >= done:
            parts += [text[done:start], replacement]
            done = end
    parts.append(text[done:])
    return "".join(parts)


def _replacement(kind: str, match: re.Match[str]) -> str:
    """``[REDACTED:<kind>]`` for one match of a rule: in place of the whole match, or of its group ``s``."""
    tag = f"[REDACTED:{kind}]"
    if "s" not in match.re.groupindex:
        return tag
    secret = match.group("s")
    if len(secret) > 1 and secret[0] in "\"'" and secret[-1] == secret[0]:
        tag = secret[0] + tag + secret[0]  # a quoted value keeps its quotes
    start, end = match.span("s")
    return match.string[match.start() : start] + tag + match.string[end : match.end()]


def mask_url(text: str) -> str:
    """``text`` (a database URL, a libpq ``key=value`` string, or a message holding one) with every password
    shown as ``***``: the userinfo one (``scheme://user:pw@host``), ``password=`` and ``sslpassword=`` in the
    query string, and ``password=`` pairs (``password='a b'`` quoted)."""

    def mask(match: re.Match[str]) -> str:
        group = match.lastgroup
        assert group is not None
        secret = match.group(group)
        shown = "'***'" if group == "pair" and secret.startswith("'") else "***"
        start, end = match.span(group)
        return match.string[match.start() : start] + shown + match.string[end : match.end()]

    return _URL_PASSWORD.sub(mask, text)


def scrubbed_env(allow: Iterable[str] = (), environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of the environment without credential variables, except those named in ``allow``."""
    allowed = {name.upper() for name in allow}
    source = os.environ if environ is None else environ
    return {
        name: value for name, value in source.items() if not is_key_variable(name) or name.upper() in allowed
    }


# Process-wide, as the environment is: the keys withheld by running blocks (their values when the first block
# withholding each took it) and how many blocks withhold each; the C environment lacks a key while any does.
_WITHHELD: dict[str, str] = {}
_HOLDERS: dict[str, int] = {}
_BLOCKS = 0  # blocks running: os.environ has the view below as its storage while any does
_WITHHELD_LOCK = threading.Lock()
# The encoded names os.environ hides in this context: one set per block, so the block's own write shows again.
_HIDDEN: ContextVar[set[bytes] | frozenset[bytes]] = ContextVar("aries_withheld_keys", default=frozenset())


class _BlockView(MutableMapping[bytes, bytes]):
    """``os.environ``'s storage while a block withholds keys: the same entries (one dict, shared with every
    thread), without the names the current context hides. On POSIX the storage holds names and values as
    bytes (``os.fsencode``), and ``os.environb`` shares it."""

    def __init__(self, data: dict[bytes, bytes]) -> None:
        self.data = data

    def __getitem__(self, key: bytes) -> bytes:
        if key in _HIDDEN.get():
            raise KeyError(key)
        return self.data[key]

    def __setitem__(self, key: bytes, value: bytes) -> None:
        hidden = _HIDDEN.get()
        if key in hidden:
            hidden.discard(key)  # type: ignore[union-attr]  # only a block's own set holds names
        self.data[key] = value

    def __delitem__(self, key: bytes) -> None:
        if key in _HIDDEN.get():
            raise KeyError(key)
        del self.data[key]

    def __iter__(self) -> Iterator[bytes]:
        hidden = _HIDDEN.get()
        return iter([key for key in list(self.data) if key not in hidden])

    def __len__(self) -> int:
        hidden = _HIDDEN.get()
        return sum(1 for key in list(self.data) if key not in hidden)

    def copy(self) -> dict[bytes, bytes]:
        return dict(self.items())


def environ_value(name: str, default: str = "") -> str:
    """The environment variable ``name``, including a key withheld from ``os.environ`` for a Repl step."""
    return os.environ.get(name) or _WITHHELD.get(name, default)


@contextmanager
def withheld_keys(allow: Iterable[str] = ()) -> Iterator[list[str]]:
    """Hide the credential variables (except those in ``allow``) from ``os.environ`` in the block's context and
    from the processes started meanwhile; yields their names and puts them back (their values when the block
    began) when it ends. Other threads keep seeing them (the module's docstring says what sees what)."""
    global _BLOCKS
    allowed = {name.upper() for name in allow}
    with _WITHHELD_LOCK:
        names = [name for name in os.environ if is_key_variable(name) and name.upper() not in allowed]
        if not _BLOCKS:
            _view(install=True)
        _BLOCKS += 1
        for name in names:
            if name not in _HOLDERS:
                _WITHHELD[name] = os.environ[name]
                os.unsetenv(name)
            _HOLDERS[name] = _HOLDERS.get(name, 0) + 1
        token = _HIDDEN.set({*_HIDDEN.get(), *map(os.fsencode, names)})
    try:
        yield names
    finally:
        _HIDDEN.reset(token)
        with _WITHHELD_LOCK:
            for name in names:
                _HOLDERS[name] -= 1
                if not _HOLDERS[name]:
                    del _HOLDERS[name]
                    os.environ[name] = _WITHHELD.pop(name)  # the C environment and os.environ, as they were
            _BLOCKS -= 1
            if not _BLOCKS:
                _view(install=False)


def _view(*, install: bool) -> None:
    """Put :class:`_BlockView` in as the storage of ``os.environ`` (and ``os.environb``, which shares it), or
    take it out again, leaving the entries in place."""
    current = os.environ._data  # type: ignore[attr-defined]
    if install == isinstance(current, _BlockView):
        return
    data = _BlockView(current) if install else current.data
    os.environ._data = data  # type: ignore[attr-defined]
    os.environb._data = data  # type: ignore[attr-defined]
