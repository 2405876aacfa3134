"""Every parser of repository input is bounded in depth, size and time, and a parser crash costs one file.

Each case is a repository with one hostile file next to good ones: the hostile file is one ``skipped()`` row
naming it and saying why, and the rest of the index completes and answers. Indexing waits with a generous bound
(``_BOUND``), so code that would take minutes fails the test instead of stalling the run; no test asserts a
duration. Crashes and hangs come from a worker that fails on purpose (``tests/parse_worker_faults.py``), also
in a real kernel, which goes on answering.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from aries_kernel.codebase import Codebase, indexer, parse_workers
from aries_kernel.codebase.bounded import MAX_BYTES as CONFIG_MAX_BYTES
from aries_kernel.codebase.bounded import MAX_NESTING, load_json, load_toml, nesting
from aries_kernel.codebase.files import GITIGNORE_MAX_PATTERNS
from tests.fs_support import write
from tests.kernel_harness import run_cell, start_kernel, stop_kernel
from tests.test_codebase_hostile import indexed, reasons

_BOUND = 120
GOOD = "def good_function():\n    return 1\n"
_FAULTY_WORKER = [sys.executable, "-m", "tests.parse_worker_faults"]


def assert_answers(codebase: Codebase) -> None:
    assert "good.py" in set(codebase.list_files()["file"])
    assert "good.py" in set(codebase.search("good_function")["file"])
    assert not codebase.top_files().empty


def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    write(root, "good.py", GOOD)
    return root


# -- manifests and configs: the file is one row, its information ignored, the index goes on ----------------------


def test_a_cargo_toml_nested_500_deep_is_one_row_and_the_index_completes(tmp_path: Path) -> None:
    root = repo(tmp_path)
    write(root, "Cargo.toml", '[package]\nname = "deep"\n[lib]\nx = ' + "[" * 500 + "]" * 500 + "\n")
    write(root, "src/lib.rs", "pub fn kept() {}\n")
    codebase = indexed(root)
    assert reasons(codebase)["Cargo.toml"] == (
        f"Cargo.toml not parsed (brackets nested 500 deep, over the limit of {MAX_NESTING}); "
        "the crates it names are not resolved"
    )
    assert "src/lib.rs" in set(codebase.list_files()["file"])
    assert_answers(codebase)


def test_a_package_json_whose_exports_nest_900_deep_is_one_row(tmp_path: Path) -> None:
    # 900 levels parse as JSON; resolving a `*` pattern through them used to overflow the stack of the graph build.
    root = repo(tmp_path)
    exports = '{"import":' * 900 + '"./src/*.js"' + "}" * 900
    write(root, "package.json", '{"name": "p", "exports": {"./*": ' + exports + "}}")
    write(root, "src/x.js", "export const x = 1;\n")
    write(root, "a.js", 'import "p/x";\n')
    codebase = indexed(root)
    assert reasons(codebase)["package.json"].startswith("package.json not parsed (brackets nested 902 deep")
    assert {"a.js", "src/x.js"} <= set(codebase.list_files()["file"])
    assert_answers(codebase)


def test_a_tsconfig_whose_paths_nest_900_deep_is_one_row(tmp_path: Path) -> None:
    root = repo(tmp_path)
    write(root, "tsconfig.json", '{"compilerOptions": {"paths": {"a/*": [' + "[" * 900 + "]" * 900 + "]}}}")
    write(root, "a.ts", 'import "a/x";\n')
    codebase = indexed(root)
    assert reasons(codebase)["tsconfig.json"] == (
        f"tsconfig not parsed (brackets nested 904 deep, over the limit of {MAX_NESTING}); "
        "its paths/baseUrl are ignored"
    )
    assert_answers(codebase)


def test_a_go_mod_of_a_million_blank_lines_is_read_in_linear_time(tmp_path: Path) -> None:
    # `^\s*module` ran across every blank line and backtracked: quadratic, half an hour for this file.
    root = repo(tmp_path)
    write(root, "go.mod", "\n" * 1_000_000)
    write(root, "sub/go.mod", "\n" * 500_000 + "module example.com/sub\n")
    write(root, "sub/a.go", 'package sub\n\nimport "example.com/sub/b"\n')
    write(root, "sub/b/b.go", "package b\n")
    codebase = indexed(root)
    assert reasons(codebase)["go.mod"].startswith("go.mod declares no module path")
    edges = codebase.edges()
    assert ("sub/a.go", "sub/b/b.go") in set(zip(edges["source"], edges["target"], strict=True))
    assert_answers(codebase)


def test_manifests_over_the_size_limit_are_named_with_what_is_lost(tmp_path: Path) -> None:
    root = repo(tmp_path)
    write(root, "go.mod", "module example.com/big\n" + "// padding\n" * (CONFIG_MAX_BYTES // 10))
    write(root, "crate/Cargo.toml", '[package]\nname = "big"\n' + "#" * CONFIG_MAX_BYTES + "\n")
    codebase = indexed(root)
    found = reasons(codebase)
    assert found["go.mod"] == (
        f"go.mod unreadable (too large: over the limit of {CONFIG_MAX_BYTES:,} bytes); "
        "imports of its packages are not resolved"
    )
    assert found["crate/Cargo.toml"] == (
        f"Cargo.toml unreadable (too large: over the limit of {CONFIG_MAX_BYTES:,} bytes); "
        "the crates it names are not resolved"
    )
    assert_answers(codebase)


def test_a_gitignore_with_too_many_patterns_is_one_row_and_its_rules_ignored(tmp_path: Path) -> None:
    # Every path beneath a .gitignore is matched against each of its patterns.
    root = repo(tmp_path)
    patterns = GITIGNORE_MAX_PATTERNS + 1
    write(
        root,
        ".gitignore",
        "# comment\n\n" + "".join(f"x{i}*y*z/**/w\n" for i in range(patterns - 1)) + "*.py\n",
    )
    codebase = indexed(root)
    assert reasons(codebase)[".gitignore"] == (
        f"{patterns:,} patterns, over the limit of {GITIGNORE_MAX_PATTERNS:,}; its rules are ignored"
    )
    assert_answers(codebase)  # *.py would have ignored good.py


def test_bounded_readers_refuse_depth_and_size_and_skip_strings() -> None:
    assert nesting('{"a": "[[[[", "b": [[1]]}') == 3
    assert nesting('a = """ [[[ """\nb = [[1]]  # [[[[', toml=True) == 2
    assert nesting("x = '[[[['\ny = { z = [1] }", toml=True) == 2
    assert load_toml('a = """ [[[ """\nb = [[1]]') == {"a": " [[[ ", "b": [[1]]}
    assert load_json("[" * MAX_NESTING + "]" * MAX_NESTING) is not None
    with pytest.raises(ValueError, match=f"nested {MAX_NESTING + 1} deep"):
        load_json("[" * (MAX_NESTING + 1) + "]" * (MAX_NESTING + 1))
    with pytest.raises(ValueError, match="too large: 1,048,578 bytes, over the limit of 1,048,576"):
        load_json('"' + "x" * (1 << 20) + '"')
    # An unterminated string runs to the end: each quote is scanned once (no quadratic rescans).
    assert nesting('{"a": "' + '\\" ' * 100_000) == 1
    assert nesting('"""' + '"a' * 100_000, toml=True) == 0


# -- source files: linear extraction, a time budget, a crash contained --------------------------------------------


def test_5000_nested_java_classes_and_rust_modules_index_with_their_parents(tmp_path: Path) -> None:
    # A walk up Node.parent from every definition was cubic in the nesting: 14 s at 1,000 classes, 139 s at 2,000.
    root = repo(tmp_path)
    depth = 5000
    java = "".join(f"class C{i} {{\n  void m{i}() {{}}\n" for i in range(depth)) + "}\n" * depth
    write(root, "Deep.java", java)
    rust = "".join(f"mod m{i} {{\nstruct S{i};\nimpl S{i} {{ fn f{i}() {{}} }}\n" for i in range(depth))
    write(root, "src/lib.rs", rust + "use self::x;\n" + "}\n" * depth)
    codebase = indexed(root)
    symbols = codebase.symbol_table(hashes=False)
    parents = dict(zip(symbols["name"], symbols["parent"], strict=False))
    assert (parents["C0"], parents["C1"], parents[f"m{depth - 1}"]) == ("", "C0", f"C{depth - 1}")
    assert (parents["S0"], parents[f"f{depth - 1}"]) == ("", f"S{depth - 1}")
    assert len(symbols) == 4 * depth + 1  # and good_function
    assert not {"Deep.java", "src/lib.rs"} & set(reasons(codebase))
    assert_answers(codebase)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_parser_crash_loses_that_file_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    monkeypatch.setattr(parse_workers, "WORKER_COMMAND", _FAULTY_WORKER)
    monkeypatch.setattr(indexer, "POOL_MIN_BYTES", 0)  # with 2 workers: both used
    root = repo(tmp_path)
    write(root, "crash.py", "x = 1\n")
    write(root, "pkg/abort.py", "y = 2\n")
    for i in range(6):
        write(root, f"m{i}.py", f"def f{i}():\n    return {i}\n")
    codebase = indexed(root, workers=workers)
    found = reasons(codebase)
    assert found["crash.py"] == "the parser crashed (SIGSEGV); the file is not indexed"
    assert found["pkg/abort.py"] == "the parser crashed (SIGABRT); the file is not indexed"
    assert {f"m{i}.py" for i in range(6)} <= set(codebase.list_files()["file"])
    assert set(found) == {"crash.py", "pkg/abort.py"}
    assert_answers(codebase)
    # The crash is remembered: the next start does not parse the file again until it changes.
    monkeypatch.setattr(indexer, "parse_files", None)
    assert reasons(indexed(root, workers=workers))["crash.py"].startswith("the parser crashed")


def test_a_worker_may_not_take_the_machines_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # tree-sitter does not check its allocations: a 50 MB one-line Go list took 18.5 GB, then crashed (SIGSEGV).
    monkeypatch.setattr(parse_workers, "WORKER_COMMAND", _FAULTY_WORKER)
    root = repo(tmp_path)
    write(root, "hog.py", "def hog():\n    pass\n")  # aborts if a 2 GiB allocation is granted
    codebase = indexed(root)
    assert reasons(codebase) == {}
    assert "hog" in set(codebase.symbol_table(hashes=False)["name"])
    assert 2 << 30 > parse_workers.MEMORY_BASE + parse_workers.MEMORY_PER_BYTE * (
        1 << 20
    )  # the default size limit


def test_a_one_line_go_list_that_exhausts_the_parser_loses_that_file_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The reported crash: a 50 MB one-line Go list took 18.5 GB (tree-sitter needs ~195 bytes per byte of it),
    # then tree-sitter crashed on an allocation it does not check. Here a 2 MB one under a worker bound of 128 MB.
    tight = (
        "from aries_kernel.codebase import parse_workers as p; "
        "p.MEMORY_BASE, p.MEMORY_PER_BYTE = 128 << 20, 0; p.main()"
    )
    monkeypatch.setattr(parse_workers, "WORKER_COMMAND", [sys.executable, "-c", tight])
    root = repo(tmp_path)
    write(root, "big.go", "package a; var x = []int{" + "1," * 1_000_000 + "}")
    write(root, "small.go", "package a\n\nfunc Small() {}\n")
    codebase = indexed(root, max_file_size=1 << 22)
    assert reasons(codebase) == {"big.go": "the parser crashed (SIGSEGV); the file is not indexed"}
    assert "small.go" in set(codebase.list_files()["file"])
    assert_answers(codebase)


def test_a_parse_past_the_time_budget_is_killed_and_the_file_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(parse_workers, "WORKER_COMMAND", _FAULTY_WORKER)
    root = repo(tmp_path)
    write(root, "hang.py", "z = 3\n")
    write(root, "after.py", "def after():\n    pass\n")
    codebase = indexed(root, parse_timeout=1.0)
    assert reasons(codebase) == {"hang.py": "parse took longer than 1 s"}
    assert "after.py" in set(codebase.list_files()["file"])
    assert_answers(codebase)
    # Not remembered: with a worker that finishes, the next start parses it.
    monkeypatch.undo()
    assert "hang.py" in set(indexed(root).list_files()["file"])


def test_a_parser_crash_in_a_real_kernel_loses_the_file_and_the_kernel_answers(tmp_path: Path) -> None:
    root = repo(tmp_path)
    other = tmp_path / "other"
    write(other, "crash.py", "x = 1\n")
    write(other, "kept.py", "def kept():\n    return 2\n")
    km, kc = start_kernel(root)
    try:
        code = (
            "from aries_kernel.codebase import parse_workers\n"
            f"parse_workers.WORKER_COMMAND = {_FAULTY_WORKER!r}\n"
            f"other = %aries index {other}\n"
            "sorted(other.skipped()['reason']), sorted(other.list_files()['file'])"
        )
        pid = run_cell(kc, "import os; os.getpid()").result
        cell = run_cell(kc, code)
        assert cell.error is None, cell.error
        assert cell.result == "(['the parser crashed (SIGSEGV); the file is not indexed'], ['kept.py'])"
        after = run_cell(kc, f"os.getpid() == {pid}, codebase.find_symbol('kept')['file'].tolist()")
        assert after.error is None and after.result == "(True, ['kept.py'])"  # the same kernel process
    finally:
        stop_kernel(km, kc)
