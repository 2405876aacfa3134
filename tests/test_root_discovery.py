"""The project root is found from the working directory (as git finds a repository), unless one is configured."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config

from aries_kernel.context import AriesContext, discover_root


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """``tmp/home/work/repo/notebooks/deep``, nothing marked yet; ``tmp/home`` plays the user's home."""
    deep = tmp_path / "home" / "work" / "repo" / "notebooks" / "deep"
    deep.mkdir(parents=True)
    return tmp_path


def _home(tree: Path) -> Path:
    return tree / "home"


def _repo(tree: Path) -> Path:
    return tree / "home" / "work" / "repo"


def test_a_git_folder_above_the_working_directory_is_the_root(tree: Path) -> None:
    (_repo(tree) / ".git").mkdir()
    found = discover_root(_repo(tree) / "notebooks", home=_home(tree))
    assert found.path == _repo(tree)
    assert found.reason == (
        f"found .git in {_repo(tree)}, 1 level up from the working directory {_repo(tree) / 'notebooks'}"
    )
    two = discover_root(_repo(tree) / "notebooks" / "deep", home=_home(tree))
    assert two.path == _repo(tree) and "2 levels up from the working directory" in two.reason
    here = discover_root(_repo(tree), home=_home(tree))
    assert (
        here.path == _repo(tree)
        and here.reason == f"found .git in {_repo(tree)}, the working directory {_repo(tree)}"
    )


def test_the_nearest_of_nested_repositories_wins(tree: Path) -> None:
    (_repo(tree) / ".git").mkdir()
    inner = _repo(tree) / "notebooks"
    (inner / ".git").mkdir()
    assert discover_root(inner / "deep", home=_home(tree)).path == inner


def test_a_git_file_marks_a_worktree_or_submodule(tree: Path) -> None:
    (_repo(tree) / ".git").mkdir()
    submodule = _repo(tree) / "notebooks"
    (submodule / ".git").write_text("gitdir: ../.git/modules/notebooks\n")
    found = discover_root(submodule / "deep", home=_home(tree))
    assert found.path == submodule and found.reason.startswith(f"found .git in {submodule}, 1 level up")


@pytest.mark.parametrize("marker", ["pyproject.toml", "package.json", ".aries/memory"])
def test_a_project_marker_is_the_root_when_there_is_no_git(tree: Path, marker: str) -> None:
    target = _repo(tree) / marker
    target.mkdir(parents=True) if marker == ".aries/memory" else target.write_text("{}\n")
    found = discover_root(_repo(tree) / "notebooks" / "deep", home=_home(tree))
    assert found.path == _repo(tree) and found.reason.startswith(
        f"found {marker} in {_repo(tree)}, 2 levels up"
    )


def test_git_beats_a_nearer_project_marker(tree: Path) -> None:
    # A monorepo: the repository root has .git, a package inside it has its own pyproject.toml.
    (_repo(tree) / ".git").mkdir()
    (_repo(tree) / "notebooks" / "pyproject.toml").write_text("[project]\n")
    assert discover_root(_repo(tree) / "notebooks" / "deep", home=_home(tree)).path == _repo(tree)


def test_no_marker_at_all_means_the_working_directory(tree: Path) -> None:
    start = _repo(tree) / "notebooks"
    # An .aries/ with only an index is what any kernel leaves where it ran (e.g. in /tmp): not a marker.
    (_repo(tree) / ".aries").mkdir()
    (_repo(tree) / ".aries" / "index.db").write_bytes(b"")
    found = discover_root(start, home=_home(tree))
    assert found.path == start
    assert found.reason == (
        f"no .git, pyproject.toml, package.json or .aries/memory in {start} or above it (below {_home(tree)}); "
        "using the working directory"
    )


def test_the_walk_stops_below_home(tree: Path) -> None:
    # A dotfiles repository in home and the global ~/.aries vault folder are not project roots.
    (_home(tree) / ".git").mkdir()
    (_home(tree) / ".aries").mkdir()
    start = _repo(tree) / "notebooks"
    assert discover_root(start, home=_home(tree)).path == start
    # Working in home itself (or outside it) walks as git does.
    assert discover_root(_home(tree), home=_home(tree)).path == _home(tree)
    assert discover_root(start, home=tree / "elsewhere").path == _home(tree)


def _context(monkeypatch: pytest.MonkeyPatch, cwd: Path, config: Config | None = None) -> AriesContext:
    monkeypatch.chdir(cwd)
    return AriesContext(SimpleNamespace(config=config or Config()))


def test_the_context_discovers_the_root_from_its_working_directory(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ARIES_ROOT", raising=False)
    (_repo(tree) / ".git").mkdir()
    (_repo(tree) / "notebooks" / "mod.py").write_text("def run():\n    return 1\n")
    context = _context(monkeypatch, _repo(tree) / "notebooks")
    assert context.root == _repo(tree)
    assert context.root_reason.startswith(f"found .git in {_repo(tree)}, 1 level up")
    codebase = context.codebase
    codebase.wait_ready()
    assert codebase.root == _repo(tree) and codebase.list_files()["file"].tolist() == ["notebooks/mod.py"]
    assert codebase.status().splitlines()[1] == f"root: {context.root_reason}"


def test_a_configured_root_wins_over_discovery_and_aries_root_over_it(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ARIES_ROOT", raising=False)
    (_repo(tree) / ".git").mkdir()
    other = tree / "other"
    other.mkdir()
    config = Config()
    config.AriesSettings.root = str(other)
    context = _context(monkeypatch, _repo(tree) / "notebooks", config)
    assert (context.root, context.root_reason) == (other, "set by c.AriesSettings.root")
    monkeypatch.setenv("ARIES_ROOT", str(_repo(tree)))  # the settings rule: the variable, else the setting
    context = _context(monkeypatch, _repo(tree) / "notebooks", config)
    assert (context.root, context.root_reason) == (_repo(tree), "set by $ARIES_ROOT")


def test_aries_root_wins_over_discovery(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (_repo(tree) / ".git").mkdir()
    other = tree / "other"
    other.mkdir()
    monkeypatch.setenv("ARIES_ROOT", str(other))
    context = _context(monkeypatch, _repo(tree) / "notebooks")
    assert (context.root, context.root_reason) == (other, "set by $ARIES_ROOT")
    explicit = AriesContext(None, root=_repo(tree))
    assert (explicit.root, explicit.root_reason) == (_repo(tree), "given explicitly")


def test_aries_status_says_which_root_and_why(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ARIES_ROOT", raising=False)
    (_repo(tree) / ".git").mkdir()
    monkeypatch.chdir(tree)  # loading the extension starts indexing its root: not this repository
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "aries_kernel")
    context = _context(monkeypatch, _repo(tree) / "notebooks", ip.config)
    context.shell = ip
    monkeypatch.setattr(ip, "_aries_context", context)  # restored after the test: other tests share the shell
    status = ip.run_line_magic("aries", "status")
    assert f"{_repo(tree)}: not started yet" in status
    assert f"root: found .git in {_repo(tree)}, 1 level up from the working directory" in status
    context.codebase.wait_ready()
    status = ip.run_line_magic("aries", "status")
    assert f"{_repo(tree)}: ready: 0 files" in status and f"root: found .git in {_repo(tree)}" in status
