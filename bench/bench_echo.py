"""Precision and recall of the echo detector on a labelled set of (note title, response) pairs.

    python bench/bench_echo.py [--data bench/data/echo_pairs.jsonl] [--errors]

The data file holds one JSON object a line: ``title``, ``response``, ``echo`` (the label: does the response
make use of the note?), ``kind`` ("positive" or "hard_negative": a response that shares common words with the
title but is about something else) and ``split``: "dev" (the pairs the detector's word lists and rules were
tuned on), "test" (its errors were looked at while tuning, so it is not held out) and "holdout" (written
after the detector was frozen). The detector's term weights are measured against every title in the file,
as they would be against a vault. Prints a table per split and overall (target: precision at least 0.95);
``--errors`` lists the misjudged pairs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aries_kernel.agent.echo import EchoDetector

DATA = Path(__file__).parent / "data" / "echo_pairs.jsonl"


def load(path: Path) -> pd.DataFrame:
    """The labelled pairs as a DataFrame; a malformed line is named by its number."""
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise SystemExit(f"{path}:{number}: not valid JSON ({exc})") from exc
    return pd.DataFrame(rows)


def scores(frame: pd.DataFrame) -> dict[str, float | int]:
    """Counts and precision/recall of the ``predicted`` column against the ``echo`` labels."""
    tp = int((frame.predicted & frame.echo).sum())
    fp = int((frame.predicted & ~frame.echo).sum())
    fn = int((~frame.predicted & frame.echo).sum())
    return {
        "pairs": len(frame),
        "positives": int(frame.echo.sum()),
        "hard negatives": int((frame.kind == "hard_negative").sum()),
        "true echoes": tp,
        "false echoes": fp,
        "missed echoes": fn,
        "precision": round(tp / (tp + fp), 3) if tp + fp else float("nan"),
        "recall": round(tp / (tp + fn), 3) if tp + fn else float("nan"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--errors", action="store_true", help="list the pairs the detector got wrong")
    args = parser.parse_args()
    frame = load(args.data)
    frame["echo"] = frame["echo"].astype(bool)
    detector = EchoDetector(frame["title"].unique())
    verdicts = [detector.evidence(t, r) for t, r in zip(frame["title"], frame["response"], strict=False)]
    frame["predicted"] = [v.echoed for v in verdicts]
    frame["reason"] = [v.reason for v in verdicts]
    table = pd.DataFrame({name: scores(part) for name, part in [*frame.groupby("split"), ("all", frame)]}).T
    counts = [c for c in table.columns if c not in ("precision", "recall")]
    table[counts] = table[counts].astype(int)  # the transpose made every column float
    pd.set_option("display.width", 160)
    print(table.to_string())
    precision = table.loc["all", "precision"]
    print(f"\nprecision {precision:.3f} (target >= 0.95), recall {table.loc['all', 'recall']:.3f}")
    if args.errors:
        wrong = frame[frame.predicted != frame.echo]
        for row in wrong.itertuples():
            label = "FALSE ECHO" if row.predicted else "MISSED"
            print(f"\n[{label}, {row.split}] {row.title}\n  response: {row.response}\n  reason: {row.reason}")


if __name__ == "__main__":
    main()
