"""Bad input and skip rules: indexing completes, every problem file is listed with its reason."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from traitlets.config import Config

from aries_kernel.codebase import Codebase, extract
from tests.fs_support import write


@pytest.fixture
def bad_repo(tmp_path: Path) -> Path:
    root = tmp_path / "bad"
    write(root, "good.py", "def fine():\n    return 1\n")
    write(root, "latin1.py", "# caf\xe9\nx = 1\n".encode("latin-1"))
    write(root, "blob.py", b"\x7fELF\x02\x01\x01\x00\x00\x00" + bytes(range(256)) * 4)
    write(root, "broken.py", "def ok():\n    return 2\n\ndef broken(:\n    pass\n\nclass After:\n    pass\n")
    write(root, "dist_min.js", "var a=1;" * 700_000)  # about 5.6 MB on one line
    os.symlink("loop_a.py", root / "loop_b.py")
    os.symlink("loop_b.py", root / "loop_a.py")
    os.symlink(".", root / "self_dir")
    locked = write(root, "locked.py", "SECRET = 1\n")
    locked.chmod(0)
    return root


def test_bad_files_are_listed_and_nothing_crashes(bad_repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if os.geteuid() == 0:
        # root reads a chmod 000 file anyway; simulate the permission error the owner of the file would get.
        real = extract.read_source

        def read_source(root: str, rel: str, max_bytes: int) -> bytes:
            if rel.endswith("locked.py"):
                raise PermissionError(13, "Permission denied", rel)
            return real(root, rel, max_bytes)

        monkeypatch.setattr(extract, "read_source", read_source)
    codebase = Codebase(bad_repo, config=Config({"AriesCodebase": {"workers": 1}}))
    codebase.wait_ready()
    reasons = dict(zip(codebase.skipped()["file"], codebase.skipped()["reason"], strict=False))
    statuses = dict(zip(codebase.skipped()["file"], codebase.skipped()["status"], strict=False))
    assert set(reasons) == {
        "latin1.py",
        "blob.py",
        "broken.py",
        "dist_min.js",
        "loop_a.py",
        "loop_b.py",
        "self_dir",
        "locked.py",
    }
    assert reasons["latin1.py"].startswith("not UTF-8 text (byte 0xe9 at line 1)")
    assert reasons["blob.py"].startswith("binary file")
    assert reasons["broken.py"].startswith("syntax error at line 4")
    assert statuses["broken.py"] == "partial"
    assert reasons["dist_min.js"].startswith("too large: 5,600,000 bytes")
    assert reasons["loop_a.py"] == reasons["loop_b.py"] == reasons["self_dir"] == "symlink loop"
    assert reasons["locked.py"] == "unreadable: permission denied"
    assert {s for f, s in statuses.items() if f != "broken.py"} == {"skipped"}
    # The partly indexed file keeps what parsed; the others are not graph nodes.
    assert set(codebase.list_files()["file"]) == {"good.py", "broken.py"}
    assert {"ok", "After"} <= set(codebase.find_symbol("ok")["name"]) | set(
        codebase.find_symbol("After")["name"]
    )
    stats = dict(zip(codebase.stats()["metric"], codebase.stats()["value"], strict=False))
    assert stats["skipped"] == 7 and stats["partly indexed"] == 1
    # A warm start from index.db reports the same problems.
    again = Codebase(bad_repo, config=Config({"AriesCodebase": {"workers": 1}}))
    again.wait_ready()
    assert again.skipped().equals(codebase.skipped())


def test_skip_rules_and_gitignore(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    write(root, "src/keep.py", "KEEP = 1\n")
    write(root, ".git/hooks/hook.py", "x = 1\n")
    write(root, "node_modules/lib/index.js", "module.exports = 1;\n")
    write(root, "build/out.py", "x = 1\n")
    write(root, "env_named_anything/pyvenv.cfg", "home = /usr\n")
    write(root, "env_named_anything/lib/site.py", "x = 1\n")
    write(root, ".aries/memory/note.py", "x = 1\n")
    write(root, ".gitignore", "generated/\n*.gen.py\n")
    write(root, "generated/models.py", "x = 1\n")
    write(root, "src/schema.gen.py", "x = 1\n")
    write(root, "src/sub/.gitignore", "local_*.py\n")
    write(root, "src/sub/local_scratch.py", "x = 1\n")
    write(root, "src/sub/shared.py", "SHARED = 1\n")
    write(root, "README.md", "# not code\n")
    codebase = Codebase(root, config=Config({"AriesCodebase": {"ignore": ["src/sub/shared.py"]}}))
    codebase.wait_ready()
    # build/ is not skipped by its name: nothing says it is build output (see tests/test_codebase_skips.py).
    assert list(codebase.list_files()["file"]) == ["build/out.py", "src/keep.py"]
    # Every folder skipped is listed, with its rule (ignored files are not: only folders).
    assert dict(zip(codebase.skipped()["file"], codebase.skipped()["reason"], strict=True)) == {
        ".git": "folder skipped: version-control data (.git)",
        "env_named_anything": "folder skipped: virtualenv (pyvenv.cfg)",
        "generated": "folder skipped: ignored by .gitignore line 1 ('generated/')",
        "node_modules": "folder skipped: installed npm packages (node_modules)",
    }


def test_aries_folder_gitignore_keeps_only_memory(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    write(root, "a.py", "A = 1\n")
    Codebase(root).wait_ready()
    assert (root / ".aries" / "index.db").is_file()
    assert subprocess.run(["git", "init", "-q", str(root)], check=False).returncode == 0
    write(root, ".aries/memory/notes/idea.md", "an idea\n")
    write(root, ".aries/sessions/s1.json", "{}\n")
    ignored = subprocess.run(
        [
            "git",
            "-C",
            str(root),
            "check-ignore",
            ".aries/index.db",
            ".aries/sessions/s1.json",
            ".aries/memory/notes/idea.md",
        ],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    assert ignored == [".aries/index.db", ".aries/sessions/s1.json"]


def test_corrupt_index_is_rebuilt(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    write(root, "a.py", "def alpha():\n    return 1\n")
    write(root, ".aries/index.db", b"this is not a database" * 100)
    codebase = Codebase(root)
    codebase.wait_ready()
    assert list(codebase.find_symbol("alpha")["file"]) == ["a.py"]
    assert codebase.last_run["parsed"] == 1


def test_missing_root_and_unknown_file_give_clear_errors(tmp_path: Path) -> None:
    from aries_kernel.codebase import CodebaseError

    with pytest.raises(CodebaseError, match="is not a folder"):
        Codebase(tmp_path / "nope")
    write(tmp_path / "repo", "a.py", "A = 1\n")
    codebase = Codebase(tmp_path / "repo")
    with pytest.raises(CodebaseError, match="not an indexed file"):
        codebase.show_dependents("missing.py")
    with pytest.raises(ValueError, match="Unknown edge kind"):
        codebase.edges("calls")


def test_unreadable_file_is_retried_once_readable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "repo"
    write(root, "a.py", "A = 1\n")
    write(root, "locked.py", "def opened():\n    return 1\n")
    real = extract.read_source
    # Simulated, so the test means the same as root and as a normal user: chmod does not bind root.
    blocked = {"locked.py"}

    def read_source(root: str, rel: str, max_bytes: int) -> bytes:
        if Path(rel).name in blocked:
            raise PermissionError(13, "Permission denied", rel)
        return real(root, rel, max_bytes)

    monkeypatch.setattr(extract, "read_source", read_source)
    codebase = Codebase(root, config=Config({"AriesCodebase": {"workers": 1}}))
    codebase.wait_ready()
    assert codebase.skipped()["file"].tolist() == ["locked.py"]
    assert codebase.reindex().empty  # still unreadable: no change to report
    blocked.clear()  # permissions fixed; the mtime did not move
    assert codebase.reindex()["change"].tolist() == ["modified"]
    assert codebase.skipped().empty and codebase.find_symbol("opened")["file"].tolist() == ["locked.py"]
    # Nothing unreadable was cached: a fresh start reads it again.
    again = Codebase(root, config=Config({"AriesCodebase": {"workers": 1}}))
    again.wait_ready()
    assert again.skipped().empty


def test_failed_index_is_reported_and_reindex_recovers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aries_kernel.codebase import CodebaseError, core

    write(tmp_path / "repo", "a.py", "A = 1\n")
    real_walk = core.walk

    def failing_walk(*args: object, **kwargs: object) -> object:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(core, "walk", failing_walk)
    codebase = Codebase(tmp_path / "repo")
    with pytest.raises(CodebaseError, match="Input/output error"):
        codebase.list_files()
    assert codebase.status().startswith("failed: ")
    monkeypatch.setattr(core, "walk", real_walk)
    assert codebase.reindex()["file"].tolist() == ["a.py"]
    assert codebase.list_files()["file"].tolist() == ["a.py"]
