"""The agent's change detection (codebase.changes.ChangeWatch): inotify events, the walk it falls back to, and the
skip policy it shares with the index, Grep and Glob."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from aries_kernel.codebase.changes import ChangeWatch
from tests.fs_support import write


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    write(root, "pkg/__init__.py", "")
    write(root, "pkg/core.py", "X = 1\n")
    write(root, "README.md", "# readme\n")
    write(root, ".gitignore", "*.log\nscratch/\n")
    write(root, "env/pyvenv.cfg", "home = /usr/bin\n")
    write(root, "env/lib/site.py", "S = 1\n")
    write(root, "node_modules/x/index.js", "module.exports = 1;\n")
    return root


def _bash(root: Path, command: str) -> None:
    subprocess.run(["bash", "-c", command], cwd=root, check=True)


@pytest.mark.parametrize("watch", [True, False], ids=["inotify", "walk"])
def test_sees_what_a_subprocess_changed_and_nothing_skipped(tree: Path, watch: bool) -> None:
    with ChangeWatch(tree, watch=watch) as changes:
        assert changes.changed() == []  # the first look records the tree
        if watch and changes.mode != "inotify":
            pytest.skip(f"no inotify here: {changes.reason}")
        assert changes.changed() == []
        _bash(
            tree,
            "echo 'Y = 2' >> pkg/core.py; echo 'N = 1' > pkg/new.py; rm README.md;"
            " mkdir -p deep/er && echo 'D = 1' > deep/er/d.py;"
            " echo x > run.log; mkdir scratch && echo 1 > scratch/s.py;"
            " echo 1 > env/lib/more.py; echo 1 > node_modules/x/more.js",
        )
        assert changes.changed() == ["README.md", "deep/er/d.py", "pkg/core.py", "pkg/new.py"]
        assert changes.changed() == []
        _bash(tree, "echo 'E = 1' > deep/er/e.py; rm -r pkg")
        assert changes.changed() == ["deep/er/e.py", "pkg/__init__.py", "pkg/core.py", "pkg/new.py"]
        assert changes.mode == ("inotify" if watch else "walk")
        # Only the baseline walked the tree when the watcher ran.
        assert changes.walks == (1 if watch else 5)


def test_a_policy_file_or_an_overflow_makes_it_walk(tree: Path) -> None:
    with ChangeWatch(tree) as changes:
        changes.changed()
        if changes.mode != "inotify":
            pytest.skip(f"no inotify here: {changes.reason}")
        _bash(tree, "echo 'build/' >> .gitignore; mkdir build && echo 1 > build/b.py; echo 1 > run.log")
        assert changes.changed() == [".gitignore"]  # build/ is ignored now, run.log was already
        assert changes.walks == 2 and changes.last_walk == ".gitignore changed what is skipped"
        _bash(tree, "rm env/pyvenv.cfg")  # the virtualenv's evidence is gone: it is a plain folder now
        assert changes.changed() == ["env/lib/site.py"]
        assert changes.walks == 3


def test_fallback_walk_when_watching_is_off(tree: Path) -> None:
    with ChangeWatch(tree, watch=False) as changes:
        assert changes.changed() == [] and changes.mode == "walk"
        assert changes.reason == "watching is turned off"
        os.utime(tree / "pkg/core.py", ns=(1, 1))
        assert changes.changed() == ["pkg/core.py"]


def _inotify_fds() -> set[int]:
    """This process's open inotify handles (other threads of the test process open and close other files)."""
    found = set()
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}") == "anon_inode:inotify":
                found.add(int(name))
        except OSError:  # closed since the listing
            pass
    return found


def test_close_releases_the_inotify_handle(tree: Path) -> None:
    before = _inotify_fds()
    changes = ChangeWatch(tree)
    changes.changed()
    assert changes.mode == "inotify", changes.reason
    (handle,) = _inotify_fds() - before
    changes.close()
    assert handle not in _inotify_fds()
    # Closed, it walks at the next look and watches again.
    write(tree, "pkg/later.py", "L = 1\n")
    assert changes.changed() == ["pkg/later.py"]
    changes.close()
