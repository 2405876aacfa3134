"""The redactor's cost on 10 MB of tool output, against references measured in the same run.

The text is what Read and Grep hand the model: real Python source (this virtualenv's site-packages, in sorted
order, so every run reads the same bytes) up to ``--mb`` megabytes, with a line of planted credentials (every
format :func:`aries_kernel.redact.redact` knows) every 100 KB, and the same text without them (what most
tool output is: no credential at all). Timed, best of ``--repeat``, on both:

- ``redact``: the redactor as it is (one pass per rule);
- ``previous``: the nine patterns the redactor had before passwords, assignments and the newer key formats were
  added, applied as it applied them (copied here as the reference);
- ``one re pass``: a single literal-anchored search of Python's ``re`` over the same text (the OpenAI key
  pattern), the floor any regex redactor pays;
- ``combined``: every current rule as one alternation of named groups, the alternative to one pass per rule.

Prints each time, MB/s and the ratios of ``redact`` to the references, and checks that no planted credential
is left in the output.

    .venv/bin/python bench/bench_redact.py [--mb 10] [--repeat 5]
"""

from __future__ import annotations

import argparse
import re
import sys
import sysconfig
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from aries_kernel import redact as redaction  # noqa: E402

# The redactor's patterns before this round (aries_kernel/redact.py at commit 14befc0), the reference.
PREVIOUS = [
    (
        "private-key",
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----[\s\S]{0,20000}?"
            r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
        ),
    ),
    ("anthropic", re.compile(r"sk-ant-(?<!\wsk-ant-)[A-Za-z0-9_\-]{20,}")),
    ("openai", re.compile(r"sk-(?<!\wsk-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}")),
    ("github", re.compile(r"g(?<!\wg)(?:h[pousr]_[A-Za-z0-9]{36,}|ithub_pat_[A-Za-z0-9_]{22,})")),
    ("aws-access-key", re.compile(r"A(?<!\wA)(?:KIA|SIA|GPA|IDA|ROA|NPA)[A-Z0-9]{16}\b")),
    ("aws-secret", re.compile(r"(?i)(aws_secret_access_key\s*[=:]\s*[\"']?)[A-Za-z0-9/+=]{40}")),
    ("slack", re.compile(r"xox(?<!\wxox)[abposr]-[A-Za-z0-9\-]{10,}")),
    ("slack-webhook", re.compile(r"https://hooks\.slack\.com/services/[A-Za-z0-9/_\-]{20,}")),
    ("google", re.compile(r"AIza(?<!\wAIza)[0-9A-Za-z_\-]{35}")),
]

# One credential of each format, built from parts so this file holds none.
PLANTED = [
    "sk-ant-" + "api03-" + "A" * 30,
    "sk-" + "proj-" + "B" * 30,
    "sk_" + "live_" + "C" * 24,
    "ghp_" + "D" * 36,
    "glpat-" + "E" * 20,
    "npm_" + "F" * 36,
    "hf_" + "G" * 34,
    "AKIA" + "H" * 16,
    "xoxb-" + "1" * 12,
    "AIza" + "J" * 35,
    "eyJ" + "K" * 20 + ".eyJ" + "L" * 20 + "." + "M" * 20,
]
PLANTED_LINE = (
    " ".join(PLANTED)
    + " postgresql://alice:pw-N0PQ@db/x?password=pw-R5TU DB_PASSWORD=pw-V6WX"
    + ' {"api_token": "pw-Y7Z8"} host=db password=\'pw-a b\'\n'
)
PLANTED_PASSWORDS = ["pw-N0PQ", "pw-R5TU", "pw-V6WX", "pw-Y7Z8", "pw-a b"]


def tool_output(megabytes: float) -> str:
    """Site-packages source up to ``megabytes``, a planted line every 100 KB."""
    limit = int(megabytes * 1_000_000)
    parts: list[str] = []
    size = next_plant = 0
    for path in sorted(Path(sysconfig.get_paths()["purelib"]).rglob("*.py")):
        if size >= limit:
            break
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        parts.append(text)
        size += len(text)
        if size >= next_plant:
            parts.append(PLANTED_LINE)
            size += len(PLANTED_LINE)
            next_plant += 100_000
    return "".join(parts)[:limit]


def previous(text: str) -> str:
    for kind, pattern in PREVIOUS:
        if kind == "aws-secret":
            text = pattern.sub(lambda match: f"{match.group(1)}[REDACTED:aws-secret]", text)
        else:
            text = pattern.sub(f"[REDACTED:{kind}]", text)
    return text


ONE_PASS = re.compile(r"sk-(?<!\wsk-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}")
COMBINED = re.compile(
    "|".join(
        f"(?P<k{i}>{pattern.pattern.replace('(?P<s>', f'(?P<s{i}>')})"
        for i, (_, pattern) in enumerate(redaction._PATTERNS)
    )
)


def combined(text: str) -> str:
    def replace(match: re.Match[str]) -> str:
        rule = str(match.lastgroup)[1:]
        kind = redaction._PATTERNS[int(rule)][0]
        if match.group(f"s{rule}") if f"s{rule}" in COMBINED.groupindex else None:
            start, end = match.span(f"s{rule}")
            return (
                match.string[match.start() : start] + f"[REDACTED:{kind}]" + match.string[end : match.end()]
            )
        return f"[REDACTED:{kind}]"

    return COMBINED.sub(replace, text)


def best(work: Callable[[str], str], text: str, repeat: int) -> tuple[float, str]:
    """The fastest of ``repeat`` runs of ``work(text)`` in seconds, and its output."""
    seconds, out = float("inf"), text
    for _ in range(repeat):
        begin = time.perf_counter()
        out = work(text)
        seconds = min(seconds, time.perf_counter() - begin)
    return seconds, out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mb", type=float, default=10.0, help="Megabytes of tool output (default 10).")
    parser.add_argument(
        "--repeat", type=int, default=5, help="Runs of each, the best one counts (default 5)."
    )
    args = parser.parse_args()
    planted = tool_output(args.mb)
    for text in (planted, planted.replace(PLANTED_LINE, "")):
        plants = text.count(PLANTED_LINE)
        print(
            f"\n{len(text) / 1e6:.1f} MB of site-packages source, {plants} planted lines; best of {args.repeat}"
        )
        results = {
            "redact": best(lambda t: redaction.redact(t, environ={}), text, args.repeat),
            "previous": best(previous, text, args.repeat),
            "one re pass": best(lambda t: ONE_PASS.sub("[REDACTED:openai]", t), text, args.repeat),
            "combined": best(combined, text, args.repeat),
        }
        left = [s for s in PLANTED + PLANTED_PASSWORDS if s in results["redact"][1]]
        assert not left, f"redact left planted credentials: {left}"
        for name, (seconds, _) in results.items():
            print(f"{name:<12} {seconds * 1000:8.1f} ms  {len(text) / 1e6 / seconds:7.1f} MB/s")
        mine = results["redact"][0]
        print(
            f"redact / previous = {mine / results['previous'][0]:.2f}x, redact / one re pass = "
            f"{mine / results['one re pass'][0]:.1f}x, combined / redact = {results['combined'][0] / mine:.2f}x"
        )


if __name__ == "__main__":
    main()
