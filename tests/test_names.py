"""One name, one thing: no two modules of the package define a class of the same name (two SlotUsage, two
Session, two TextDelta and two ToolCallStarted once meant different things, and the agent loop imported both
of a pair)."""

from __future__ import annotations

import ast
from collections import defaultdict

from tests.package_sources import package_trees


def test_every_class_name_of_the_package_is_defined_once() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for rel, tree in package_trees():
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                where[node.name].append(f"{rel}:{node.lineno}")
    twins = {name: places for name, places in where.items() if len(places) > 1}
    assert not twins, twins
