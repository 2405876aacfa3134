"""Skip by evidence, not by name: packages named build, coverage or dist are indexed with their edges; a real
virtualenv, a real setuptools build and a tsconfig's outDir are skipped and listed in ``skipped()`` with their rule;
the index, Grep, Glob and the agent's change detection skip the same folders."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from traitlets.config import Config

from aries_kernel.agent.settings import AriesAgent
from aries_kernel.agent.tools import TOOLS, ToolEnv, run_tool
from aries_kernel.codebase import Codebase
from aries_kernel.codebase.changes import ChangeWatch
from aries_kernel.codebase.files import indexable, skip_rule, walk
from tests.fs_support import write


def _index(root: Path) -> Codebase:
    codebase = Codebase(root, config=Config({"AriesCodebase": {"workers": 1, "persist": False}}))
    codebase.wait_ready()
    return codebase


def _skipped(codebase: Codebase) -> dict[str, str]:
    table = codebase.skipped()
    return dict(zip(table["file"], table["reason"], strict=True))


def _deps(codebase: Codebase, rel: str) -> set[str]:
    return set(codebase.show_dependencies(rel)["file"])


def test_packages_named_like_build_output_are_indexed_with_their_edges(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    write(root, "pyproject.toml", "[project]\nname = 'tool'\n")
    # coverage.py's layout: the package itself is coverage/.
    write(root, "coverage/__init__.py", "from coverage.control import Coverage\n")
    write(root, "coverage/control.py", "class Coverage:\n    pass\n")
    # pypa/build's layout: src/build/.
    write(root, "src/build/__init__.py", "from build.env import make\n")
    write(root, "src/build/env.py", "def make():\n    return 1\n")
    # A package named dist, and a top-level build package next to the build config (it has an __init__.py).
    write(root, "dist/__init__.py", "")
    write(root, "dist/pack.py", "import coverage\n")
    write(root, "build/__init__.py", "")
    write(root, "build/lib/__init__.py", "")  # setuptools' name, inside a package: still source
    write(root, "build/lib/steps.py", "from dist import pack\n")
    write(root, "venv/__init__.py", "")  # the standard library's venv package is a folder named venv
    write(root, "venv/create.py", "from build.lib import steps\n")
    write(root, "app.py", "import coverage\nfrom dist import pack\nfrom venv import create\nimport build\n")
    codebase = _index(root)
    files = set(codebase.list_files()["file"])
    assert {
        "coverage/control.py",
        "src/build/env.py",
        "dist/pack.py",
        "build/lib/steps.py",
        "venv/create.py",
    } <= files
    assert _deps(codebase, "app.py") == {
        "coverage/__init__.py",
        "dist/pack.py",
        "venv/create.py",
        "build/__init__.py",
    }
    assert _deps(codebase, "coverage/__init__.py") == {"coverage/control.py"}
    assert _deps(codebase, "src/build/__init__.py") == {"src/build/env.py"}
    assert _deps(codebase, "venv/create.py") == {"build/lib/steps.py"}
    assert _deps(codebase, "build/lib/steps.py") == {"dist/pack.py"}
    assert _skipped(codebase) == {}


def _setuptools_build(root: Path) -> None:
    write(
        root,
        "setup.py",
        "from setuptools import setup\nsetup(name='mypkg', version='1', packages=['mypkg'])\n",
    )
    write(root, "mypkg/__init__.py", "from mypkg.core import run\n")
    write(root, "mypkg/core.py", "def run():\n    return 1\n")
    subprocess.run(
        [sys.executable, "setup.py", "-q", "build"], cwd=root, check=True, capture_output=True, text=True
    )
    assert (root / "build/lib/mypkg/core.py").is_file()  # a real build output, a copy of the source


@pytest.mark.parametrize("gitignore", [True, False], ids=["gitignored", "by-evidence"])
def test_a_real_virtualenv_and_a_real_build_are_skipped_and_listed(tmp_path: Path, gitignore: bool) -> None:
    root = tmp_path / "repo"
    _setuptools_build(root)
    if gitignore:
        write(root, ".gitignore", "# build output\n*.egg-info/\nbuild/\n")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "tools-env")], check=True)
    write(root, "tools-env/lib/extra.py", "E = 1\n")  # a source file inside the virtualenv: not indexed
    codebase = _index(root)
    assert set(codebase.list_files()["file"]) == {"setup.py", "mypkg/__init__.py", "mypkg/core.py"}
    skipped = _skipped(codebase)
    assert skipped["tools-env"] == "folder skipped: virtualenv (pyvenv.cfg)"
    if gitignore:
        assert skipped["build"] == "folder skipped: ignored by .gitignore line 3 ('build/')"
    else:
        assert (
            skipped["build"]
            == "folder skipped: build output (setuptools' build folder next to its build config)"
        )
    assert set(skipped) == {"tools-env", "build"}  # one row per folder, none per file in it
    assert not indexable(root, "build/lib/mypkg/core.py") and not indexable(root, "tools-env/lib/extra.py")
    assert (
        skip_rule(root, "build/lib/mypkg") == f"{skipped['build'].removeprefix('folder skipped: ')}, in build"
    )


def test_a_tsconfig_outdir_is_build_output(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    write(root, "web/tsconfig.json", '{\n  // built by tsc\n  "compilerOptions": {"outDir": "./out",},\n}\n')
    write(root, "web/src/main.ts", "export const x = 1;\n")
    write(root, "web/out/main.js", "export const x = 1;\n")
    write(root, "web/dist/keep.js", "export const kept = 1;\n")  # dist is not the outDir: source here
    codebase = _index(root)
    assert set(codebase.list_files()["file"]) == {"web/src/main.ts", "web/dist/keep.js"}
    assert _skipped(codebase) == {"web/out": "folder skipped: build output (outDir of web/tsconfig.json)"}


def test_a_folder_tagged_cachedir_is_build_output(tmp_path: Path) -> None:
    # What `cargo build` leaves: target/ with a CACHEDIR.TAG, and generated sources deep inside it.
    root = tmp_path / "repo"
    write(root, "Cargo.toml", '[package]\nname = "demo"\nversion = "0.1.0"\n')
    write(root, "src/main.rs", "mod util;\nfn main() { util::run(); }\n")
    write(root, "src/util.rs", "pub fn run() {}\n")
    write(root, "target/CACHEDIR.TAG", "Signature: 8a477f597d28d172789f06886806bc55\n# created by cargo\n")
    write(root, "target/debug/build/demo-1/out/generated.rs", "pub fn generated() {}\n")
    codebase = _index(root)
    assert set(codebase.list_files()["file"]) == {"src/main.rs", "src/util.rs"}
    assert _skipped(codebase) == {"target": "folder skipped: cache or build output (CACHEDIR.TAG)"}
    assert skip_rule(root, "target") == "cache or build output (CACHEDIR.TAG)"


def test_index_grep_glob_and_change_detection_skip_the_same_folders(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    _setuptools_build(root)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / ".venv")], check=True)
    write(root, ".venv/lib/inside.py", "def needle():\n    pass\n")
    write(root, "node_modules/dep/needle.js", "function needle() {}\n")
    write(root, "coverage/__init__.py", "def needle():\n    pass\n")
    write(root, "sub/.gitignore", "gen/\n")
    write(root, "sub/gen/needle.py", "def needle():\n    pass\n")
    write(root, "sub/needle.py", "def needle():\n    pass\n")
    write(root, "mypkg/needle.py", "def needle():\n    pass\n")
    indexed = {s.rel for s in walk(root).sources}
    env = ToolEnv(root, AriesAgent())
    grep, error = run_tool(TOOLS["Grep"], env, {"pattern": "def needle"})
    assert not error
    grepped = {line.split(":", 1)[0] for line in grep.splitlines()}
    glob, error = run_tool(TOOLS["Glob"], env, {"pattern": "**/*.py"})
    assert not error
    with ChangeWatch(root) as changes:
        changes.changed()
        watched = {rel for rel in changes.files() if rel.endswith(".py")}
    assert set(glob.splitlines()) == indexed == watched
    assert (
        grepped
        == {"coverage/__init__.py", "sub/needle.py", "mypkg/needle.py"}
        == {rel for rel in indexed if rel.endswith("needle.py") or rel.startswith("coverage/")}
    )
