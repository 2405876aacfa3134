"""``codebase.stats()`` after a warm start: the counts stored with the graph's scores, no record read."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from traitlets.config import Config

from aries_kernel.codebase import Codebase

# Rows that say how this index was made, not what it holds.
RUN_ROWS = {"index mode", "index seconds", "files parsed", "files from index.db"}


def _held(codebase: Codebase) -> pd.DataFrame:
    frame = codebase.stats()
    return frame[~frame["metric"].isin(RUN_ROWS)].reset_index(drop=True)


def _values(frame: pd.DataFrame) -> dict[str, object]:
    return dict(zip(frame["metric"], frame["value"], strict=True))


def _started(root: Path) -> Codebase:
    # A file over max_file_size is a skipped record: the counts must not take it for an indexed one.
    codebase = Codebase(root, config=Config({"AriesCodebase": {"max_file_size": 4000}}))
    codebase.wait_ready()
    return codebase


def test_a_warm_start_answers_stats_from_the_stored_counts_and_they_follow_a_change(small_repo: Path) -> None:
    (small_repo / "big.py").write_text("x = 1\n" * 1000)
    (small_repo / "extra.py").write_text("def one():\n    return 1\n")
    cold = _held(_started(small_repo))
    assert _values(cold)["skipped"] == 1, cold

    warm = _started(small_repo)
    # The counts came with the graph's scores: stats() needs no record.
    assert warm._table_at_hand("counts") is not None
    pd.testing.assert_frame_equal(_held(warm), cold)

    (small_repo / "extra.py").write_text("def one():\n    return 1\n\n\ndef two():\n    return 2\n")
    warm.reindex(["extra.py"])
    assert _values(_held(warm))["symbols"] == _values(cold)["symbols"] + 1
    pd.testing.assert_frame_equal(_held(_started(small_repo)), _held(warm))
