"""The one open-beneath layer (aries_kernel/rootfs.py) that the agent's file tools and the code index share."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from aries_kernel import rootfs
from aries_kernel.rootfs import FailedPathError, MissingPathError, OutsideRootError, RefusedPathError


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """real/a.py, a folder link to it, a file link through that folder link, and a link out of the root."""
    root = tmp_path / "root"
    (root / "real").mkdir(parents=True)
    (root / "real" / "a.py").write_text("A = 1\n")
    (tmp_path / "secret.py").write_text("SECRET = 1\n")
    os.symlink("real", root / "linkdir")
    os.symlink("linkdir/a.py", root / "alias.py")
    os.symlink("../secret.py", root / "out.py")
    return root


def test_a_typed_path_follows_folder_links_inside_the_root_and_a_walked_one_does_not(root: Path) -> None:
    assert rootfs.read_regular(root, "linkdir/a.py", 100) == (b"A = 1\n", "real/a.py")
    with pytest.raises(RefusedPathError, match="passes through the symlinked folder linkdir"):
        rootfs.read_regular(root, "linkdir/a.py", 100, walked=True)
    # A file link is followed in both, even when its own target goes through a folder link.
    assert rootfs.read_regular(root, "alias.py", 100, walked=True) == (b"A = 1\n", "real/a.py")
    for walked in (False, True):
        with pytest.raises(OutsideRootError, match=r"through a symlink \(out.py -> ../secret.py\)"):
            rootfs.read_regular(root, "out.py", 100, walked=walked)


def test_a_walked_path_is_the_name_it_is(root: Path) -> None:
    (root / "back\\slash.py").write_text("B = 1\n")  # a legal POSIX name, which a typed path refuses
    assert rootfs.read_regular(root, "back\\slash.py", 100, walked=True)[0] == b"B = 1\n"
    with pytest.raises(RefusedPathError, match="backslash"):
        rootfs.read_regular(root, "back\\slash.py", 100)


def test_reads_stop_at_limit_plus_one_byte(root: Path) -> None:
    (root / "big.py").write_bytes(b"x" * 5000)
    assert rootfs.read_regular(root, "big.py", 10)[0] == b"x" * 11
    assert rootfs.read_regular(root, "big.py", 5000)[0] == b"x" * 5000


def test_refusals_are_told_apart_from_what_the_system_failed(root: Path) -> None:
    """The index caches a refusal but reads again what failed (errno kept), so the two must not mix."""
    os.mkfifo(root / "pipe.py")
    with pytest.raises(RefusedPathError, match=r"not a regular file \(a FIFO\)") as fifo:
        rootfs.read_regular(root, "pipe.py", 100, walked=True)
    assert not isinstance(fifo.value, FailedPathError) and fifo.value.errno is None
    with pytest.raises(MissingPathError) as missing:
        rootfs.read_regular(root, "real/none.py", 100, walked=True)
    assert missing.value.errno == errno.ENOENT and str(missing.value) == "real/none.py does not exist."
    with pytest.raises(FailedPathError) as not_folder:
        rootfs.read_regular(root, "real/a.py/x", 100, walked=True)
    assert not_folder.value.errno == errno.ENOTDIR and "real/a.py is a file, not a folder" in str(
        not_folder.value
    )
    assert all(isinstance(error, OSError) for error in (fifo.value, missing.value, not_folder.value))


def test_walk_folders_enters_only_what_is_asked_and_never_a_symlink(root: Path) -> None:
    (root / "real" / "sub").mkdir()
    (root / "skipped").mkdir()
    seen = {}
    for folder in rootfs.walk_folders(root):
        seen[folder.rel] = (folder.depth, [entry.name for entry in folder.entries], folder.error)
        folder.enter.extend(
            entry.name
            for entry in folder.entries
            if entry.name != "skipped" and (entry.is_dir(follow_symlinks=True) or entry.name == "gone")
        )
        if folder.rel == "real":
            folder.enter.append("gone")  # asked for, but not there: reported, not raised
    assert set(seen) == {"", "linkdir", "real", "real/sub", "real/gone"}
    link_error = seen["linkdir"][2]  # a link asked for is not entered (O_NOFOLLOW | O_DIRECTORY)
    assert link_error is not None and link_error.errno in (errno.ELOOP, errno.ENOTDIR)
    assert seen["real/gone"][2] is not None and seen["real/gone"][2].errno == errno.ENOENT
    assert seen["real"] == (1, ["a.py", "sub"], None) and seen["real/sub"] == (2, [], None)
