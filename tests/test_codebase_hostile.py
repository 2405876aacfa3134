"""Hostile repositories: one bad file is reported in ``skipped()`` with its reason and never stops the rest.

Each case builds its repository in ``tmp_path``, indexes it with one worker and waits with a generous bound, so a
hang fails the test instead of stalling the run. Then the good file is indexed, the bad one is listed with its
reason, and ``top_files``/``search``/``reindex`` still answer.
"""

from __future__ import annotations

import logging
import marshal
import os
import secrets
import socket
import sqlite3
import stat
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from traitlets.config import Config

from aries_kernel.codebase import Codebase, extract, index_key, store
from aries_kernel.codebase.bounded import MAX_BYTES as CONFIG_MAX_BYTES
from aries_kernel.codebase.files import MAX_DEPTH, gitignore_spec, walk
from aries_kernel.codebase.index_key import KEY_BYTES, IndexKey
from aries_kernel.codebase.resolve import load_tsconfigs, parse_jsonc, strip_jsonc
from aries_kernel.codebase.store import SCHEMA_VERSION, IndexStore, UnsafePath, ensure_aries_dir
from aries_kernel.rootfs import RefusedPathError, read_regular
from tests.fs_support import write

# Far beyond what any case needs; only reached if something hangs.
_BOUND = 120
GOOD = "def good_function():\n    return 1\n"


def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    write(root, "good.py", GOOD)
    return root


def indexed(root: Path, **settings_: object) -> Codebase:
    codebase = Codebase(root, config=Config({"AriesCodebase": {"workers": 1, **settings_}}))
    codebase.wait_ready(timeout=_BOUND)
    return codebase


def reasons(codebase: Codebase) -> dict[str, str]:
    table = codebase.skipped()
    return dict(zip(table["file"], table["reason"], strict=True))


def assert_answers(codebase: Codebase) -> None:
    """The rest of the repository is indexed and every operation answers."""
    assert "good.py" in set(codebase.list_files()["file"])
    assert not codebase.top_files().empty
    assert "good.py" in set(codebase.search("good_function")["file"])
    assert codebase.reindex().empty  # nothing changed, and nothing raises
    assert codebase.status().startswith("ready")


# .gitignore


def test_invalid_gitignore_lines_are_reported_and_only_they_ignored(tmp_path: Path) -> None:
    root = repo(tmp_path)
    write(root, ".gitignore", "!\n*.gen.py\nfoo\\\n\\\na*a*a*a*b\nsecret/\n")
    write(root, "x.gen.py", "GENERATED = 1\n")
    write(root, "secret/s.py", "S = 1\n")
    write(root, "foo", "not source\n")
    codebase = indexed(root)
    table = codebase.skipped()
    bad = table[table["file"] == ".gitignore"]["reason"].tolist()
    assert [r.split(" ", 2)[1] for r in bad] == ["1", "3", "4", "5"]
    assert all(r.endswith("line ignored") for r in bad)
    assert "'!'" in bad[0] and "Invalid git pattern" in bad[0]
    assert "matching could hang" in bad[3]
    # The valid lines still apply.
    assert set(codebase.list_files()["file"]) == {"good.py"}
    assert_answers(codebase)


def test_agent_file_listing_reuses_the_tolerant_gitignore(tmp_path: Path) -> None:
    from aries_kernel.agent.tools import iter_files

    root = repo(tmp_path)
    write(root, ".gitignore", "!\nignored.py\nend\\\n")
    write(root, "ignored.py", "X = 1\n")
    names = {p.name for p in iter_files(root, root)}
    assert "good.py" in names and "ignored.py" not in names


def test_aries_magic_indexes_past_an_invalid_gitignore(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from IPython.core.interactiveshell import InteractiveShell

    from aries_kernel.context import get_context

    root = repo(tmp_path)
    write(root, ".gitignore", "!\nend\\\n")
    monkeypatch.chdir(root)
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "aries_kernel")
    saved = shell.user_ns.get("codebase"), get_context(shell).built("codebase")
    try:
        codebase = shell.run_line_magic("aries", f"index {root}")
        assert isinstance(codebase, Codebase)
        assert "ready: 1 files" in shell.run_line_magic("aries", "status")
        assert codebase.skipped()["file"].tolist() == [".gitignore", ".gitignore"]
        assert shell.run_line_magic("aries", "index").empty
    finally:
        shell.user_ns["codebase"] = saved[0]
        if saved[1] is not None:
            get_context(shell).set_codebase(saved[1])


def test_gitignore_spec_keeps_valid_lines_in_order() -> None:
    spec, bad = gitignore_spec(["*.log", "!", "!keep.log", "trailing\\"])
    assert [n for n, _ in bad] == [2, 4]
    assert spec.match_file("a.log") and not spec.match_file("keep.log")


# names, depth and file kinds


def test_file_and_folder_names_that_are_not_utf8(tmp_path: Path) -> None:
    root = repo(tmp_path)
    base = os.fsencode(root)
    with open(base + b"/bad\xff.py", "wb") as handle:
        handle.write(b"def hidden():\n    pass\n")
    os.mkdir(base + b"/dir\xfe")
    with open(base + b"/dir\xfe/inner.py", "wb") as handle:
        handle.write(b"X = 1\n")
    codebase = indexed(root)
    found = reasons(codebase)
    assert found["bad\\xff.py"] == found["dir\\xfe"] == "name is not valid UTF-8; rename it to index it"
    assert set(codebase.list_files()["file"]) == {"good.py"}
    assert_answers(codebase)
    codebase.skipped().to_json()  # the table is plain, encodable text
    assert indexed(root).last_run["mode"] == "warm"  # index.db stored and reloads


def _deep_tree(root: Path, levels: int) -> Path:
    os.makedirs(root, exist_ok=True)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(levels):
            os.mkdir("d", dir_fd=fd)
            child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        with open(os.open("deep.py", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w") as handle:
            handle.write("DEEP = 1\n")
    finally:
        os.close(fd)
    return root


def _remove_deep_tree(top: Path) -> None:
    # shutil.rmtree recurses once per level; remove from the bottom up instead.
    path = top
    while (path / "d").is_dir():
        path = path / "d"
    (path / "deep.py").unlink(missing_ok=True)
    while path != top.parent:
        path.rmdir()
        path = path.parent


def test_a_folder_tree_1100_levels_deep(tmp_path: Path) -> None:
    root = repo(tmp_path)
    _deep_tree(root / "d", 1099)
    try:
        codebase = indexed(root)
        deep = {f: r for f, r in reasons(codebase).items() if f.startswith("d/")}
        assert len(deep) == 1
        ((folder, reason),) = deep.items()
        assert folder.count("/") == MAX_DEPTH and reason.startswith(f"folder nested deeper than {MAX_DEPTH}")
        assert_answers(codebase)
        assert codebase.reindex(folder + "/d/deep.py").empty  # a named path beyond the depth is not indexed
    finally:
        _remove_deep_tree(root / "d")


def test_only_regular_files_are_read(tmp_path: Path) -> None:
    root = repo(tmp_path)
    outside = write(tmp_path, "outside/secret.py", "OUTSIDE = 1\n")
    os.mkfifo(root / "x.py")
    os.mkfifo(root / "tsconfig.json")
    os.mkfifo(root / "sub.md")  # not source: not even reported
    os.symlink("/dev/zero", root / "zero.py")
    os.symlink(outside, root / "out.py")
    os.symlink(outside.parent, root / "outdir")
    os.symlink("good.py", root / "alias.py")  # a link inside the root is fine
    here = os.getcwd()
    os.chdir(root)  # an AF_UNIX path is limited to about 100 bytes
    try:
        with socket.socket(socket.AF_UNIX) as server:
            server.bind("sock.js")
            if os.geteuid() == 0:
                os.mknod("null.py", 0o644 | stat.S_IFCHR, os.makedev(1, 3))
            codebase = indexed(root)
    finally:
        os.chdir(here)
    found = reasons(codebase)
    assert found["x.py"] == "not a regular file (FIFO); not read"
    assert found["tsconfig.json"] == "not a regular file (FIFO); not read"
    assert found["sock.js"] == "not a regular file (socket); not read"
    assert found["zero.py"] == "symlink to outside the repository (/dev/zero); not followed"
    assert (
        found["out.py"].startswith("symlink to outside the repository (")
        and "not followed" in found["out.py"]
    )
    assert found["outdir"].startswith("symlink to outside the repository (")
    if os.geteuid() == 0:
        assert found["null.py"] == "not a regular file (character device); not read"
    assert "sub.md" not in found
    assert set(codebase.list_files()["file"]) == {"good.py", "alias.py"}
    assert_answers(codebase)
    assert codebase.reindex(["x.py", "zero.py", "out.py"]).empty


def test_the_reader_never_leaves_the_root_nor_blocks(tmp_path: Path) -> None:
    root = repo(tmp_path)
    write(tmp_path, "outside.py", "OUT = 1\n")
    os.symlink("../outside.py", root / "up.py")
    os.symlink(tmp_path, root / "parent")
    os.mkfifo(root / "pipe.py")
    write(root, "big.py", "x" * 1000)
    assert read_regular(root, "big.py", 10, walked=True)[0] == b"x" * 11  # at most limit + 1 bytes
    assert read_regular(root, "good.py", 1000, walked=True) == (GOOD.encode(), "good.py")
    with pytest.raises(RefusedPathError, match="leads outside the project root"):
        read_regular(root, "up.py", 1000, walked=True)
    with pytest.raises(RefusedPathError, match="symlinked folder"):
        read_regular(root, "parent/outside.py", 1000, walked=True)
    with pytest.raises(RefusedPathError, match="FIFO"):
        read_regular(root, "pipe.py", 1000, walked=True)
    with pytest.raises(RefusedPathError, match="climbs out with '..'"):
        read_regular(root, "../outside.py", 1000, walked=True)
    record = extract.extract_file(str(root), "big.py", "python", 10)
    assert record["status"] == "skipped" and record["reason"].startswith("too large")


def test_a_file_growing_past_the_limit_after_the_walk_is_read_bounded(tmp_path: Path) -> None:
    root = repo(tmp_path)
    write(root, "grows.py", "A = 1\n")
    codebase = indexed(root, max_file_size=1000)
    write(root, "grows.py", "A = 1\n" * 10_000)
    assert codebase.reindex()["change"].tolist() == ["modified"]
    assert reasons(codebase)["grows.py"].startswith("too large")


# tsconfig


def test_tsconfig_nested_100000_deep_and_too_large_are_reported(tmp_path: Path) -> None:
    root = repo(tmp_path)
    write(root, "web/tsconfig.json", '{"compilerOptions": ' + "[" * 100_000 + "]" * 100_000 + "}")
    write(root, "big/tsconfig.json", '{"a": "' + "x" * CONFIG_MAX_BYTES + '"}')
    write(root, "web/a.ts", "export const a = 1;\n")
    codebase = indexed(root)
    found = reasons(codebase)
    assert found["web/tsconfig.json"].startswith(
        "tsconfig not parsed (brackets nested 100001 deep, over the limit of 64)"
    )
    assert found["big/tsconfig.json"].startswith("tsconfig unreadable (too large")
    assert "web/a.ts" in set(codebase.list_files()["file"])
    assert_answers(codebase)


def test_jsonc_stripping_keeps_strings_and_drops_comments_and_trailing_commas() -> None:
    text = (
        '{\n  // a comment, with "quotes"\n  "a": "http://x/*y*/, ]", /* block */ "b": [1, 2, /* c */ ],\n}'
    )
    assert parse_jsonc(text) == {"a": "http://x/*y*/, ]", "b": [1, 2]}
    assert parse_jsonc('{"a": "\\"//", "b": 1,}') == {"a": '"//', "b": 1}
    # Unterminated strings and comments end the scan (the hostile inputs that made the old regex quadratic).
    assert strip_jsonc('{"a": 1} /* ' + "/* " * 10_000) == '{"a": 1} '
    with pytest.raises(ValueError):
        parse_jsonc('{"a": "' + '\\" ' * 10_000)
    configs, problems = load_tsconfigs({"tsconfig.json": "[" * 100_000}, lambda rel: None)
    assert configs == {} and "brackets nested 100000 deep" in problems[0][1]


# extraction


def test_parse_failures_recursion_and_memory_errors_skip_one_file(monkeypatch: pytest.MonkeyPatch) -> None:
    # What a worker process answers for a file whose extraction raises (see test_codebase_bounds for the index).
    real = extract._extract
    failures = {
        "deep.py": RecursionError("maximum recursion depth"),
        "huge.js": MemoryError(),
        "odd.ts": ValueError("bad"),
    }

    def failing(rel: str, *args: object) -> object:
        if rel in failures:
            raise failures[rel]
        return real(rel, *args)

    monkeypatch.setattr(extract, "_extract", failing)
    found = {
        rel: extract.extract_source(rel, language, b"x = 1\n")
        for rel, language in (("deep.py", "python"), ("huge.js", "javascript"), ("odd.ts", "typescript"))
    }
    assert found["deep.py"]["reason"] == "not parsed: RecursionError (nested too deeply or too big)"
    assert found["huge.js"]["reason"] == "not parsed: MemoryError (nested too deeply or too big)"
    assert found["odd.ts"]["reason"] == "not parsed: ValueError: bad"
    assert {r["status"] for r in found.values()} == {"skipped"}
    assert extract.extract_source("good.py", "python", GOOD.encode())["status"] == "indexed"


def test_deeply_nested_source_is_indexed_or_reported(tmp_path: Path) -> None:
    root = repo(tmp_path)
    write(root, "nest.py", "x = " + "(" * 50_000 + "1" + ")" * 50_000 + "\n")
    write(root, "nest.js", "let y = " + "[" * 50_000 + "]" * 50_000 + ";\n")
    codebase = indexed(root)
    files = set(codebase.list_files()["file"]) | set(reasons(codebase))
    assert {"nest.py", "nest.js"} <= files
    assert_answers(codebase)


def test_pep263_declared_encodings_are_decoded(tmp_path: Path) -> None:
    root = repo(tmp_path)
    write(
        root,
        "latin.py",
        "# -*- coding: latin-1 -*-\ndef café():\n    return 'é'\n\n\nclass Zed:\n    pass\n".encode(
            "latin-1"
        ),
    )
    write(
        root,
        "win.py",
        "#!/usr/bin/env python\n# coding=cp1252\nPRICE = '€ 5'\ndef euro():\n    pass\n".encode("cp1252"),
    )
    write(root, "rot.py", b"# coding: rot13\nk = 1\n")
    write(root, "undeclared.py", "# caf\xe9\nx = 1\n".encode("latin-1"))
    codebase = indexed(root)
    symbols = codebase.symbol_table(hashes=False)
    lines = dict(zip(symbols["name"], symbols["line"], strict=True))
    assert lines["café"] == 2 and lines["Zed"] == 6 and lines["euro"] == 4 and lines["PRICE"] == 3
    assert "'é'" in codebase.source("latin.py") and "€" in codebase.source("win.py")
    assert "win.py" in set(codebase.search("euro")["file"])
    found = reasons(codebase)
    assert found["rot.py"].startswith("not decodable")
    assert found["undeclared.py"].startswith("not UTF-8 text (byte 0xe9 at line 1)")
    assert {"latin.py", "win.py"} <= set(codebase.list_files()["file"])
    assert_answers(codebase)
    assert codebase.find_symbol("Zed")["line"].tolist() == [6]


# .aries/index.db


def _foreign_db(path: Path, schema: str, rows: list[tuple[object, ...]] = ()) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    try:
        with conn:
            conn.executescript(schema)
            for row in rows:
                conn.execute(f"INSERT INTO files VALUES ({', '.join('?' * len(row))})", row)
    finally:
        conn.close()


_OURS = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);"
    "CREATE TABLE files (path TEXT PRIMARY KEY, size INTEGER, mtime_ns INTEGER, hash TEXT, record BLOB);"
    f"INSERT INTO meta VALUES ('schema_version', '{SCHEMA_VERSION}');"
)


def _signed(key: IndexKey, path: str, size: int, mtime_ns: int, digest: str, body: bytes) -> tuple:
    """A row as the store writes it under ``key``: the MAC, then the record's bytes."""
    return (path, size, mtime_ns, digest, key.tag((path, size, mtime_ns, digest), body) + body)


@pytest.mark.parametrize(
    ("case", "why"),
    [
        ("other schema", "table files has columns"),
        ("extra trigger", "unexpected trigger"),
        ("unsigned record", "the record for 'good.py' was not written by this user's aries-kernel"),
        ("garbage record", "undecodable record for 'good.py'"),
        ("wrong record shape", "malformed record for 'good.py'"),
        ("null size", "malformed row for 'good.py'"),
        ("not a database", "file is not a database"),
    ],
)
def test_a_bad_index_db_is_named_moved_aside_and_rebuilt(tmp_path: Path, case: str, why: str) -> None:
    root = repo(tmp_path)
    db = root / ".aries" / "index.db"
    shape = {"file": "good.py", "hash": "h", "symbols": "nope"}
    if case == "other schema":
        _foreign_db(db, "CREATE TABLE files (id INTEGER, name TEXT);", [(1, "x")])
    elif case == "extra trigger":
        _foreign_db(db, _OURS + "CREATE TRIGGER t AFTER INSERT ON files BEGIN DELETE FROM meta; END;")
    elif case == "unsigned record":
        _foreign_db(db, _OURS, [("good.py", len(GOOD), 1, "h", marshal.dumps(shape))])
    elif case == "garbage record":  # signed with the user's key: a damaged index of ours
        _foreign_db(db, _OURS, [_signed(index_key.index_key(), "good.py", len(GOOD), 1, "h", b"\xffgarbage")])
    elif case == "wrong record shape":
        body = marshal.dumps(shape)
        _foreign_db(db, _OURS, [_signed(index_key.index_key(), "good.py", len(GOOD), 1, "h", body)])
    elif case == "null size":
        _foreign_db(db, _OURS, [("good.py", None, 1, "h", marshal.dumps(shape))])
    else:
        write(root, ".aries/index.db", b"this is not a database" * 100)
    codebase = indexed(root)
    notice = reasons(codebase)[".aries/index.db"]
    assert (
        "index.db was not a usable index" in notice
        and why in notice
        and "moved aside to index.db.broken-" in notice
    )
    aside = [p for p in (root / ".aries").iterdir() if p.name.startswith("index.db.broken-")]
    assert len(aside) == 1 and aside[0].name in notice
    assert_answers(codebase)
    again = indexed(root)  # a new Codebase on the same root works from the fresh index
    assert again.last_run["mode"] == "warm" and ".aries/index.db" not in reasons(again)
    assert_answers(again)


def _counting_loads(monkeypatch: pytest.MonkeyPatch, forbidden: bytes | None = None) -> list[bytes]:
    """Patch the store's marshal.loads to record every blob it is given (failing on ``forbidden``)."""
    seen: list[bytes] = []

    def loads(blob: bytes) -> object:
        assert forbidden is None or forbidden not in blob, "an unauthenticated record was unmarshalled"
        seen.append(blob)
        return marshal.loads(blob)

    monkeypatch.setattr(store, "marshal", SimpleNamespace(dumps=marshal.dumps, loads=loads))
    return seen


def test_a_committed_index_signed_with_another_key_is_never_unmarshalled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What a hostile repository can commit: our exact schema and version, rows whose records are well-formed
    # marshal data (here, a record that would plant a symbol), MACs made with a key that is not the user's.
    root = repo(tmp_path)
    stat_ = (root / "good.py").stat()
    record = extract.extract_file(str(root), "good.py", "python", 1 << 20)
    planted = {**record, "symbols": (("PLANTED_BY_REPO", "function", 1, 2, "def x()", "", None, None),)}
    body = marshal.dumps(planted)
    other = IndexKey(secrets.token_bytes(KEY_BYTES), persistent=True)
    row = _signed(other, "good.py", stat_.st_size, stat_.st_mtime_ns, record["hash"], body)
    _foreign_db(root / ".aries" / "index.db", _OURS, [row])
    seen = _counting_loads(monkeypatch, forbidden=body)
    codebase = indexed(root)
    notice = reasons(codebase)[".aries/index.db"]
    assert "index.db was not a usable index" in notice and "its MAC does not verify" in notice
    assert "'good.py'" in notice and "moved aside to index.db.broken-" in notice
    assert codebase.last_run["parsed"] == 1 and "PLANTED_BY_REPO" not in set(codebase.symbol_table()["name"])
    assert_answers(codebase)
    (aside,) = [p for p in (root / ".aries").iterdir() if p.name.startswith("index.db.broken-")]
    assert aside.name in notice
    assert seen == []
    # The rebuilt index is ours: a warm reopen decodes it from the store and parses nothing.
    again = indexed(root)
    assert again.last_run["mode"] == "warm" and again.last_run["parsed"] == 0
    assert again.last_run["reused"] == 1 and len(seen) == 1 and ".aries/index.db" not in reasons(again)
    assert_answers(again)


def test_the_key_file_is_created_private_once_and_a_symlinked_one_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(index_key, "_keys", {})
    key_file = tmp_path / "home" / ".aries" / "index.key"
    monkeypatch.setenv("ARIES_INDEX_KEY", str(key_file))
    key = index_key.index_key()
    assert key.persistent and key_file.read_bytes() == key.secret and len(key.secret) == KEY_BYTES
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert [p.name for p in key_file.parent.iterdir()] == ["index.key"]  # the temporary file is gone
    monkeypatch.setattr(index_key, "_keys", {})  # a later process reads the same key
    assert index_key.index_key() == key
    linked = tmp_path / "linked.key"
    os.symlink(key_file, linked)
    monkeypatch.setenv("ARIES_INDEX_KEY", str(linked))
    assert not index_key.index_key().persistent  # never read through a link


def test_an_unwritable_home_falls_back_to_a_process_key_and_still_indexes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    home = write(tmp_path, "home", "a file, so nothing can be created under it\n")
    monkeypatch.setenv("ARIES_INDEX_KEY", str(home / ".aries" / "index.key"))
    monkeypatch.setattr(index_key, "_keys", {})
    root = repo(tmp_path)
    with caplog.at_level(logging.WARNING, logger=index_key.__name__):
        codebase = indexed(root)
        assert_answers(codebase)
        again = indexed(root)  # the same process keeps its key: the index is reused
    assert again.last_run["mode"] == "warm" and again.last_run["parsed"] == 0
    warnings = [r for r in caplog.records if r.name == index_key.__name__]
    assert len(warnings) == 1 and "using a key for this process only" in warnings[0].getMessage()
    monkeypatch.setattr(index_key, "_keys", {})  # a restart: that key is gone
    restarted = indexed(root)
    assert restarted.last_run["parsed"] == 1 and ".aries/index.db" not in reasons(restarted)
    assert not [p for p in (root / ".aries").iterdir() if p.name.startswith("index.db.broken-")]
    assert_answers(restarted)


def test_a_symlinked_index_db_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    root = repo(tmp_path)
    other = tmp_path / "someone_elses.db"
    _foreign_db(other, _OURS, [("keep.py", 1, 1, "h", b"x")])
    before = other.read_bytes()
    (root / ".aries").mkdir()
    os.symlink(other, root / ".aries" / "index.db")
    codebase = indexed(root)
    reason = reasons(codebase)[".aries/index.db"]
    assert (
        reason.startswith("not used: ") and "index.db is a symlink" in reason and "kept in memory" in reason
    )
    assert_answers(codebase)
    assert other.read_bytes() == before
    assert os.path.islink(root / ".aries" / "index.db")


def test_a_symlinked_journal_is_refused(tmp_path: Path) -> None:
    root = repo(tmp_path)
    (root / ".aries").mkdir()
    os.symlink(tmp_path / "elsewhere", root / ".aries" / "index.db-journal")
    codebase = indexed(root)
    assert "index.db-journal is a symlink" in reasons(codebase)[".aries/index.db"]
    assert not (tmp_path / "elsewhere").exists() and not (root / ".aries" / "index.db").exists()
    assert_answers(codebase)


def test_a_symlinked_aries_folder_is_refused(tmp_path: Path) -> None:
    root = repo(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, root / ".aries")
    with pytest.raises(UnsafePath, match=r"\.aries is a symlink"):
        ensure_aries_dir(root)
    codebase = indexed(root)
    assert ".aries is a symlink" in reasons(codebase)[".aries/index.db"]
    assert_answers(codebase)
    assert list(outside.iterdir()) == []


def test_a_symlinked_aries_gitignore_is_not_written_through(tmp_path: Path) -> None:
    root = repo(tmp_path)
    (root / ".aries").mkdir()
    os.symlink(tmp_path / "target", root / ".aries" / ".gitignore")
    with pytest.raises(UnsafePath, match="gitignore is a symlink"):
        ensure_aries_dir(root)
    assert not (tmp_path / "target").exists()


def test_a_write_the_index_refuses_is_logged_not_raised(tmp_path: Path) -> None:
    root = repo(tmp_path)
    store = IndexStore(ensure_aries_dir(root) / "index.db")
    try:
        store.save([("bad\udcff.py", 1, 1, {"hash": ""})])  # sqlite refuses the surrogate: logged, not raised
        assert store.load() == {}
    finally:
        store.close()


# secrets


def test_keys_in_source_files_do_not_reach_index_db(tmp_path: Path) -> None:
    # Assembled at run time so this file itself holds no key-shaped string.
    keys = {
        "anthropic": "sk-ant-" + "api03-" + "Q7x" * 30,
        "github": "ghp" + "_" + "aB3" * 12,
        "aws": "AKIA" + "IOSF0DNN7EXAMPLQ",
    }
    root = repo(tmp_path)
    write(
        root,
        "settings.py",
        f'ANTHROPIC_KEY = "{keys["anthropic"]}"\n'
        f'def connect(token="{keys["github"]}", region="eu"):\n    return token\n'
        f"AWS_ID = '{keys['aws']}'\n",
    )
    write(root, "client.ts", f'export const gh = "{keys["github"]}";\nexport function call() {{}}\n')
    codebase = indexed(root)
    symbols = codebase.symbol_table()
    signatures = " ".join(symbols["signature"])
    assert "[REDACTED:anthropic]" in signatures and "[REDACTED:github]" in signatures
    assert {"ANTHROPIC_KEY", "connect", "AWS_ID", "gh", "call"} <= set(symbols["name"])
    codebase._store.close()  # flush everything to the file before reading its bytes
    data = b"".join(p.read_bytes() for p in (root / ".aries").iterdir() if p.name.startswith("index.db"))
    assert b"settings.py" in data
    for key in keys.values():
        assert key.encode() not in data
        assert key.encode()[-24:] not in data  # nor a fragment, such as a "used name" cut out of the key


# property: the file reader


_DECLARATIONS = st.sampled_from(
    [
        b"",
        b"# -*- coding: latin-1 -*-\n",
        b"# coding: cp1252\n",
        b"# coding=utf-8\n",
        b"# coding: utf-16\n",
        b"# coding: rot13\n",
        b"# coding: nonsense\n",
        b"\xef\xbb\xbf",
        b"\xef\xbb\xbf# coding: latin-1\n",
        b"#!/bin/sh\n# vim: set fileencoding=koi8-r :\n",
        b"# coding: zlib\n",
        b"# coding: idna\n",
    ]
)
_NAMES = st.binary(min_size=1, max_size=60).filter(
    lambda b: b"/" not in b and b"\0" not in b and b not in (b".", b"..")
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    declaration=_DECLARATIONS,
    body=st.one_of(
        st.binary(max_size=300), st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass"))
    ),
    name=_NAMES,
    suffix=st.sampled_from([b".py", b".js", b".ts", b".tsx", b".pyi"]),
    max_bytes=st.sampled_from([16, 4096]),
)
def test_the_file_reader_never_raises(
    declaration: bytes, body: bytes, name: bytes, suffix: bytes, max_bytes: int
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        filename = name + suffix
        with open(os.fsencode(folder) + b"/" + filename, "wb") as handle:
            handle.write(declaration + body)
        rel = os.fsdecode(filename)
        language = {".py": "python", ".pyi": "python", ".js": "javascript", ".ts": "typescript"}.get(
            os.fsdecode(suffix), "tsx"
        )
        record = extract.extract_file(folder, rel, language, max_bytes)
        assert record["status"] in {"indexed", "partial", "skipped"}
        assert record["file"] == rel
        if record["status"] != "indexed":
            assert record["reason"]
        found = walk(Path(folder))
        assert len(found.sources) + len(found.problems) == 1
        for problem in found.problems:
            assert problem.reason and problem.rel.encode("utf-8")
        for source in found.sources:
            source.rel.encode("utf-8")
