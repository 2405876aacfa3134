"""Warm start from .aries/index.db and incremental reindex, compared with fresh full builds."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pandas as pd
import pytest
from traitlets.config import Config

from aries_kernel.codebase import Codebase, judgment

FIXTURES = Path(__file__).parent / "fixtures" / "codebase"


def fresh(root: Path) -> Codebase:
    """A full build that ignores any stored index."""
    codebase = Codebase(root, config=Config({"AriesCodebase": {"persist": False}}))
    codebase.wait_ready()
    return codebase


def assert_same_graph(a: Codebase, b: Codebase) -> None:
    pd.testing.assert_frame_equal(a.edges(), b.edges())
    pd.testing.assert_frame_equal(a.symbol_table(), b.symbol_table())
    pd.testing.assert_frame_equal(a.list_files(), b.list_files())


@pytest.fixture
def mixed_repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(FIXTURES / "pyproj", root)
    shutil.copytree(FIXTURES / "tsproj", root / "web")
    return root


def test_warm_start_reads_index_db_without_parsing(mixed_repo: Path) -> None:
    cold = Codebase(mixed_repo)
    cold.wait_ready()
    assert cold.last_run["mode"] == "cold" and cold.last_run["parsed"] == len(cold.list_files())
    warm = Codebase(mixed_repo)
    warm.wait_ready()
    assert warm.last_run == {**warm.last_run, "mode": "warm", "parsed": 0, "reused": len(cold.list_files())}
    assert_same_graph(warm, cold)
    # Touching a file without changing it is recognized by its content hash: still nothing parsed.
    path = mixed_repo / "app" / "core.py"
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 5_000_000_000))
    touched = Codebase(mixed_repo)
    touched.wait_ready()
    assert touched.last_run["parsed"] == 0
    # A changed file is the only one parsed on the next start.
    path.write_text(path.read_text() + "\n\ndef extra():\n    return Engine\n")
    changed = Codebase(mixed_repo)
    changed.wait_ready()
    assert changed.last_run["parsed"] == 1
    assert "extra" in set(changed.find_symbol("extra")["name"])


COPY = """

def renamed_copy(rows, where):
    acc = 0
    for row in rows:
        if row:
            acc += row
    return acc, where
"""


def test_hashes_and_profiles_come_with_the_index_and_follow_a_reindex(
    mixed_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cold = Codebase(mixed_repo)
    cold.wait_ready()
    symbols = cold.symbol_table(hashes=False)
    functions = symbols["kind"].isin(["function", "method", "class"])
    assert functions.any() and symbols.loc[functions, "shape_hash"].str.len().gt(0).all()
    assert symbols.loc[functions, "exact_hash"].str.len().gt(0).all()
    snippet = COPY.replace("renamed_copy", "original").replace("acc", "total")
    before = cold.detect_duplication(snippet, threshold=0.5)
    assert "renamed_copy" not in set(before["name"])
    # One edited file: its record, hashes and profiles are replaced, and nothing else is parsed here.
    path = mixed_repo / "app" / "core.py"
    path.write_text(path.read_text() + COPY)
    parsed: list[str] = []
    original = judgment.JudgmentMixin._tree
    monkeypatch.setattr(
        judgment.JudgmentMixin,
        "_tree",
        lambda self, text, lg: parsed.append(text) or original(self, text, lg),
    )
    assert cold.reindex(["app/core.py"])["change"].tolist() == ["modified"]
    after = cold.detect_duplication(snippet, threshold=0.5)
    assert parsed == []
    copy = after[after["name"] == "renamed_copy"]
    assert copy["kind"].tolist() == ["structural"] and copy["similarity"].tolist() == [1.0]
    assert (copy["file"] == "app/core.py").all()
    pd.testing.assert_frame_equal(after, fresh(mixed_repo).detect_duplication(snippet, threshold=0.5))
    # A deleted file's stored profiles go with it.
    digest = cold._records.digest("app/core.py")
    assert cold._judgment_data("profiles", ["app/core.py"])
    path.unlink()
    cold.reindex(["app/core.py"])
    assert cold._store is not None and cold._store.judgment("profiles", {"app/core.py": digest}) == {}


def test_kernels_indexing_one_repository_at_once_share_the_index_safely(mixed_repo: Path) -> None:
    # Two notebooks on one project: each kernel opens .aries/index.db, and neither may break the other's.
    codebases = [Codebase(mixed_repo) for _ in range(4)]
    for codebase in codebases:
        codebase.index_in_background()
    for codebase in codebases:
        codebase.wait_ready()
        assert_same_graph(codebase, codebases[0])
    assert Codebase(mixed_repo).symbol_table(hashes=False)["name"].tolist()  # the shared index still loads


def test_reindex_after_edit_add_delete_equals_full_build(mixed_repo: Path) -> None:
    codebase = Codebase(mixed_repo)
    codebase.wait_ready()
    codebase.top_files()  # fill the ranking caches, which must be invalidated
    # edit: a new definition other files already use, and a dropped import
    (mixed_repo / "app" / "core.py").write_text(
        "from .helpers import fmt\n\n\nclass Engine:\n    def greet(self, user):\n        return fmt(user)\n\n\n"
        "def clean(value):\n    return value\n"
    )
    # add: a module that an existing import now resolves to, and a TS file that imports through paths
    (mixed_repo / "app" / "settings.py").write_text("from app.core import Engine\n\nVERSION = 2\n")
    (mixed_repo / "web" / "src" / "extra.ts").write_text(
        'import { helper } from "@lib/helpers";\nexport const x = helper("x");\n'
    )
    # delete: a module others import
    (mixed_repo / "app" / "helpers" / "text.py").unlink()
    changes = codebase.reindex()
    assert dict(zip(changes["file"], changes["change"], strict=False)) == {
        "app/core.py": "modified",
        "app/settings.py": "added",
        "web/src/extra.ts": "added",
        "app/helpers/text.py": "deleted",
    }
    assert_same_graph(codebase, fresh(mixed_repo))
    pd.testing.assert_frame_equal(codebase.top_files(50), fresh(mixed_repo).top_files(50))
    # Named paths take the fast route and reach the same graph; nothing changed means no change rows.
    (mixed_repo / "app" / "helpers" / "text.py").write_text("def fmt(value):\n    return value\n")
    (mixed_repo / "web" / "src" / "types.ts").write_text("export interface Props { label: number }\n")
    changes = codebase.reindex(["app/helpers/text.py", mixed_repo / "web" / "src" / "types.ts"])
    assert list(changes["change"]) == ["added", "modified"]
    assert_same_graph(codebase, fresh(mixed_repo))
    assert codebase.reindex().empty
    # The stored index follows: a new instance starts warm with the same graph.
    warm = Codebase(mixed_repo)
    warm.wait_ready()
    assert warm.last_run["parsed"] == 0
    assert_same_graph(warm, codebase)


def test_reindex_follows_tsconfig_changes(tmp_path: Path) -> None:
    root = tmp_path / "ts"
    shutil.copytree(FIXTURES / "tsproj", root)
    codebase = Codebase(root)
    codebase.wait_ready()
    config = root / "tsconfig.json"
    config.write_text('{"compilerOptions": {"baseUrl": "src"}}\n')
    codebase.reindex()
    assert_same_graph(codebase, fresh(root))
    imports = codebase.edges("import")
    assert "src/lib/helpers.ts" not in set(imports[imports["source"] == "src/index.ts"]["target"])


def test_file_turning_binary_leaves_the_graph(tmp_path: Path) -> None:
    root = tmp_path / "py"
    shutil.copytree(FIXTURES / "pyproj", root)
    codebase = Codebase(root)
    codebase.wait_ready()
    (root / "app" / "utils.py").write_bytes(b"\0\1\2binary now")
    changes = codebase.reindex(["app/utils.py"])
    assert list(changes["change"]) == ["modified"]
    assert "app/utils.py" in set(codebase.skipped()["file"])
    assert_same_graph(codebase, fresh(root))


def test_random_edit_sequences_match_full_builds(mixed_repo: Path) -> None:
    """Seeded rounds of edits, additions and deletions: after each, reindex equals a fresh build."""
    import random

    rng = random.Random(7)
    codebase = Codebase(mixed_repo)
    codebase.wait_ready()
    names = ["Engine", "User", "fmt", "clean", "helper", "Props", "Settings", "settings", "VERSION", "shout"]
    for round_number in range(6):
        files = sorted(codebase.list_files()["file"])
        for rel in rng.sample(files, 2):
            path = mixed_repo / rel
            if rng.random() < 0.3:
                path.unlink()
                continue
            name = rng.choice(names)
            if rel.endswith(".py"):
                path.write_text(
                    path.read_text() + f"\n\ndef {name}_{round_number}():\n    return {rng.choice(names)}\n"
                    f"\n{name} = {round_number}\n"
                )
            else:
                path.write_text(path.read_text() + f"\nexport const {name} = {round_number};\n")
        new = (
            mixed_repo
            / ("app" if round_number % 2 else "web/src")
            / f"added_{round_number}.{'py' if round_number % 2 else 'ts'}"
        )
        if new.suffix == ".py":
            new.write_text(
                f"from app.core import Engine\nfrom . import models\n\n{rng.choice(names)} = Engine\n"
            )
        else:
            new.write_text(
                f'import {{ helper }} from "@lib/helpers";\nimport type {{ Props }} from "./types";\n'
                f"export function {rng.choice(names)}(p: Props) {{ return helper(String(p)); }}\n"
            )
        codebase.top_files()
        codebase.reindex()
        assert_same_graph(codebase, fresh(mixed_repo))
        pd.testing.assert_frame_equal(codebase.top_files(100), fresh(mixed_repo).top_files(100))
