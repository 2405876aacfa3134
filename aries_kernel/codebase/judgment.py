"""Judgment operations of `codebase`: similar patterns, duplication, consistency, placement and conventions."""

from __future__ import annotations

__all__ = ["JudgmentMixin"]


class JudgmentMixin:
    """Operations called before writing new code; mixed into `Codebase`, which supplies the index."""
