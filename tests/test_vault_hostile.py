"""Hostile notes, files and indexes (issue 10): the vault opens, answers and reports the bad note; nothing hangs.

Each case plants one bad thing next to a good note, then opens the vault, asks ``query_ranked`` and ``read``, and
checks ``vault.skipped`` names the file and what was wrong. Hangs are bounded by the code's own limits (a FIFO is
never opened for reading, reads stop at the note size limit), not by timers.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aries_kernel.codebase.store import UnsafePath
from aries_kernel.vault import HashEmbedder, NoteError, Vault, open_vault
from aries_kernel.vault.notes import (
    MAX_FRONT_MATTER_BYTES,
    MAX_NOTE_BYTES,
    atomic_write,
    move_file,
    parse_note,
    parse_text,
    read_note_bytes,
)

GOOD = "Parsers tolerate hostile input"
GOOD_BODY = "The vault keeps answering when one note is hostile: parsing errors are reported."

_LAUGHS = "---\nl0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 9)}]\n" for n in range(1, 10)
)

# Every test here runs on SQLite and on PostgreSQL (tests/pg_support.py).
pytestmark = pytest.mark.usefixtures("backend")
_DEEP_BLOCK = "".join(f"{' ' * n}k{n}:\n" for n in range(300))

# name -> (front matter text, what the reason must say, whether the note still loads with its body)
FRONT_MATTER = {
    "month 13": ("created: 2024-13-45", "'created: 2024-13-45' is not a valid date", True),
    "february 30": ("created: 2024-02-30", "'created: 2024-02-30' is not a valid date", True),
    "nan": ("created: .nan", "'created: nan' is not a valid date", True),
    "infinite": ("created: -.inf", "not a valid date", True),
    "offset out of range": ("created: 2024-01-01T00:00:00+99:00", "not a valid date", True),
    "flow nested 20000 deep": ("a: " + "[" * 20000 + "]" * 20000, "more than 64 levels deep", False),
    "block nested 300 deep": (_DEEP_BLOCK, "nested more than 64 levels deep", False),
    "billion laughs": (_LAUGHS.removeprefix("---\n") + "type: *l9", "alias bomb", False),
    "recursive alias": ("a: &a [*a]", "recursive alias", False),
    "not a mapping": ("- just\n- a list", "must be a mapping", False),
    "scalar": ("just words", "must be a mapping", False),
    "broken yaml": ("type: [unclosed", "broken YAML front matter", False),
    "python tag": ("a: !!python/object/apply:os.system [echo hi]", "broken YAML front matter", False),
    "bad int tag": ("a: !!int 'abc'", "broken YAML front matter", False),
    "empty float tag": ("a: !!float ''", "broken YAML front matter", False),
    "unhashable key": ("? [a, b]\n: 1", "broken YAML front matter", False),
    "oversized": ("a: '" + "x" * (MAX_FRONT_MATTER_BYTES + 10) + "'", "-byte limit", False),
}


def make(tmp_path: Path, root: Path | None = None) -> Vault:
    return open_vault(root, path=tmp_path / "vault", embedder=HashEmbedder())


def close(*vaults: Vault) -> None:
    for vault in vaults:
        for store in vault.stores:
            store.index.close()


def plant_good(tmp_path: Path) -> Path:
    notes = tmp_path / "vault" / "notes"
    notes.mkdir(parents=True, exist_ok=True)
    (notes / f"{GOOD}.md").write_text(f"---\ntype: insight\n---\n{GOOD_BODY}\n")
    return notes


def answers(vault: Vault) -> None:
    """The vault still works: the good note ranks for its words and reads back."""
    assert GOOD in list(vault.query_ranked("hostile parsing errors")["title"])
    assert GOOD_BODY in vault.read(GOOD)


def reported(vault: Vault, path: str) -> dict[str, str]:
    rows = vault.skipped[vault.skipped["path"] == path]
    assert len(rows) == 1, vault.skipped.to_dict("records")
    return {"status": rows.iloc[0]["status"], "reason": rows.iloc[0]["reason"]}


def files_outside(tmp_path: Path, inside: tuple[str, ...]) -> set[str]:
    found = set()
    for dirpath, dirnames, filenames in os.walk(tmp_path):
        for name in dirnames + filenames:
            rel = (Path(dirpath) / name).relative_to(tmp_path).as_posix()
            if not rel.startswith(inside):
                found.add(rel)
    return found


# -- front matter ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", list(FRONT_MATTER))
def test_hostile_front_matter_is_reported_and_the_vault_answers(tmp_path: Path, case: str) -> None:
    front, says, loads = FRONT_MATTER[case]
    notes = plant_good(tmp_path)
    (notes / "Hostile.md").write_text(f"---\n{front}\n---\nThe hostile note's own body survives.\n")
    vault = make(tmp_path)
    answers(vault)
    report = reported(vault, "notes/Hostile.md")
    assert report["reason"].startswith("notes/Hostile.md:")  # the error names the file
    assert says in report["reason"]
    if loads:
        assert report["status"] == "indexed"
        assert "own body survives" in vault.read("Hostile")
        assert list(vault.query_ranked("hostile body survives")["title"])[0] == "Hostile"
    else:
        assert report["status"] == "skipped"
        assert "Hostile" not in vault.titles()
    close(vault)


def test_a_bad_created_falls_back_to_the_file_time_and_survives_an_update(tmp_path: Path) -> None:
    notes = plant_good(tmp_path)
    path = notes / "Dated badly.md"
    path.write_text("---\ncreated: 2024-02-30\ntype: insight\n---\nSome words about dates.\n")
    vault = make(tmp_path)
    row = vault.stores[0].find("Dated badly")
    assert row is not None and row["created"] == pytest.approx(path.stat().st_mtime, abs=1)
    assert vault.add("Dated badly", "Some new words about dates.").action == "updated"
    text = path.read_text()
    assert "2024-02-30" in text and "new words" in text  # the user's value is kept, not replaced
    close(vault)


def test_note_parser_caps_alias_expansion_without_expanding(tmp_path: Path) -> None:
    # 9 ** 10 values if expanded: refused from the node graph alone, so this returns at once.
    with pytest.raises(NoteError, match="x.md: front matter refused: aliases expand"):
        parse_text(_LAUGHS + "---\nbody\n", "x.md")
    meta, body = parse_text("---\nbase: &b {k: 1}\nother: *b\n---\nbody\n", "x.md")
    assert meta == {"base": {"k": 1}, "other": {"k": 1}} and body == "body\n"  # small aliases are fine


# -- files that are not regular files -------------------------------------------------------------------------


def _symlink_to_dev_zero(notes: Path, outside: Path) -> str:
    (notes / "zero.md").symlink_to("/dev/zero")
    return "notes/zero.md"


def _fifo(notes: Path, outside: Path) -> str:
    os.mkfifo(notes / "x.md")
    return "notes/x.md"


def _symlink_out(notes: Path, outside: Path) -> str:
    (notes / "escape.md").symlink_to(outside / "secret.md")
    return "notes/escape.md"


def _relative_symlink_out(notes: Path, outside: Path) -> str:
    (notes / "climb.md").symlink_to("../../outside/secret.md")
    return "notes/climb.md"


def _folder_symlink_out(notes: Path, outside: Path) -> str:
    (notes / "linked").symlink_to(outside, target_is_directory=True)
    return "notes/linked"


def _char_device(notes: Path, outside: Path) -> str:
    try:
        os.mknod(notes / "null.md", stat.S_IFCHR | 0o600, os.makedev(1, 5))  # /dev/zero's numbers
    except PermissionError:
        pytest.skip("creating a device file needs CAP_MKNOD")
    return "notes/null.md"


SPECIAL: dict[str, tuple[Callable[[Path, Path], str], str]] = {
    "symlink to /dev/zero": (_symlink_to_dev_zero, "symbolic link, not followed"),
    "FIFO named x.md": (_fifo, "FIFO"),
    "symlink out of the vault": (_symlink_out, "symbolic link, not followed"),
    "relative symlink out": (_relative_symlink_out, "symbolic link, not followed"),
    "folder symlink out": (_folder_symlink_out, "symbolic link, not followed"),
    "character device": (_char_device, "character device"),
}


@pytest.mark.parametrize("case", list(SPECIAL))
def test_only_regular_files_inside_the_vault_are_read(tmp_path: Path, case: str) -> None:
    plant, says = SPECIAL[case]
    notes = plant_good(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("Outside words: zebra quartz platypus.\n")
    rel = plant(notes, outside)
    vault = make(tmp_path)  # a FIFO or /dev/zero read here would block or never end
    answers(vault)
    report = reported(vault, rel)
    assert (
        report["status"] == "skipped" and report["reason"].startswith(f"{rel}:") and says in report["reason"]
    )
    assert vault.titles() == [GOOD]  # nothing from outside was indexed
    assert not vault.query_ranked("zebra quartz platypus")["snippet"].str.contains("zebra").any()
    vault.sync()  # and a second look still does not block
    assert rel in set(vault.skipped["path"])
    close(vault)


def test_reads_are_bounded_and_checked_on_the_open_file(tmp_path: Path) -> None:
    notes = plant_good(tmp_path)
    with open(notes / "Sparse.md", "wb") as handle:  # 2 GiB on paper, nothing on disk
        handle.truncate(2 * 1024**3)
    os.mkfifo(notes / "pipe.md")
    vault = make(tmp_path)
    answers(vault)
    assert "over the 1,048,576-byte note limit" in reported(vault, "notes/Sparse.md")["reason"]
    with pytest.raises(NoteError, match="notes/pipe.md: a FIFO"):
        read_note_bytes(tmp_path / "vault", "notes/pipe.md")
    with pytest.raises(NoteError, match="plain path"):
        read_note_bytes(tmp_path / "vault", "notes/../../outside.md")
    raw, info = read_note_bytes(tmp_path / "vault", f"notes/{GOOD}.md")
    assert GOOD_BODY.encode() in raw and info.st_size == len(raw) <= MAX_NOTE_BYTES
    close(vault)


def test_a_folder_tree_1100_levels_deep_is_walked_without_recursion(tmp_path: Path) -> None:
    notes = plant_good(tmp_path)
    chain = [notes]
    try:
        for _ in range(1100):  # Path.mkdir(parents=True) itself recurses too deep for this
            chain.append(chain[-1] / "d")
            chain[-1].mkdir()
        (chain[-1] / "Bottom of the tree.md").write_text("A note at the bottom of a very deep folder tree.\n")
        vault = make(tmp_path)
        answers(vault)
        assert "Bottom of the tree" in vault.titles()
        close(vault)
    finally:
        # pytest's own clean-up of old temp folders (shutil.rmtree) recurses per level: leave no deep tree.
        (chain[-1] / "Bottom of the tree.md").unlink(missing_ok=True)
        for folder in reversed(chain[1:]):
            if folder.exists():
                folder.rmdir()


# -- titles and confinement -----------------------------------------------------------------------------------


def test_hostile_titles_never_touch_anything_outside_the_vault(tmp_path: Path) -> None:
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "keep.md").write_text("outside\n")
    vault = make(tmp_path, root=tmp_path / "repo")
    before = files_outside(tmp_path, ("vault", "repo"))
    titles = [
        "../../outside/escaped",
        "/etc/passwd",
        "/tmp/absolute note",
        "..\\..\\windows\\style",
        "C:\\Users\\x",
        "nul\x00byte/../../x",
        ".. /../ x",
        "a/./../../b",
        "é" * 300,  # over the file-name limit in bytes
    ]
    for n, title in enumerate(titles):
        for where in ("global", "project"):
            result = vault.add(title, f"Hostile title number {n} in {where}.", where=where)
            assert "/" not in result.title and "\\" not in result.title and "\x00" not in result.title
            assert result.path == f"inbox/{result.title}.md"
            assert f"number {n} in {where}" in vault.read(result.title, where=where)
            assert (vault._store(where).root / result.path).is_file()
            assert len((result.title + ".md").encode()) <= 255
    with pytest.raises(NoteError, match="empty once path characters are removed"):
        vault.add("../..", "nothing left")
    with pytest.raises(KeyError):
        vault.read("../../outside/keep")
    assert files_outside(tmp_path, ("vault", "repo")) == before
    assert (tmp_path / "outside" / "keep.md").read_text() == "outside\n"
    close(vault)


def test_a_folder_swapped_for_a_symlink_does_not_redirect_writes(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    vault = make(tmp_path)
    vault.add("First note", "Written into the real inbox.")
    inbox = tmp_path / "vault" / "inbox"
    (inbox / "First note.md").rename(tmp_path / "moved.md")
    inbox.rmdir()
    inbox.symlink_to(outside, target_is_directory=True)
    with pytest.raises(NoteError, match="outside the vault"):
        vault.add("Second note", "Would land outside through the symlink.")
    # below the path check, the write itself walks folder handles with O_NOFOLLOW: a swap after the check fails
    with pytest.raises(NoteError, match="'inbox' is not a plain folder"):
        atomic_write(tmp_path / "vault", "inbox/Third note.md", "text")
    (tmp_path / "vault" / "notes").mkdir()
    (tmp_path / "vault" / "notes" / "x.md").write_text("x\n")
    with pytest.raises(NoteError, match="not a plain folder"):
        move_file(tmp_path / "vault", "notes/x.md", "inbox/x.md")
    assert list(outside.iterdir()) == []
    close(vault)


@pytest.mark.sqlite_only  # about the SQLite file at .aries/index.db; a server database is not a file
def test_symlinked_project_brain_or_index_is_refused_or_moved_aside(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    repo = tmp_path / "repo"
    (repo / ".aries").mkdir(parents=True)
    (repo / ".aries" / "memory").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(UnsafePath, match="memory is a symlink"):
        make(tmp_path, root=repo)
    assert list(elsewhere.iterdir()) == []
    # the global index symlinked to another program's SQLite file: the link is moved aside, the file untouched
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE notes (x)")
    conn.execute("INSERT INTO notes VALUES ('precious')")
    conn.commit()
    conn.close()
    plant_good(tmp_path)
    (tmp_path / "vault" / ".aries").mkdir(exist_ok=True)
    (tmp_path / "vault" / ".aries" / "index.db").unlink()
    (tmp_path / "vault" / ".aries" / "index.db").symlink_to(other)
    before = other.read_bytes()
    vault = make(tmp_path)
    answers(vault)
    index = vault.stores[0].index
    assert not (tmp_path / "vault" / ".aries" / "index.db").is_symlink()
    assert index.corrupt_copy is not None and index.corrupt_copy.is_symlink()
    assert other.read_bytes() == before
    close(vault)


@pytest.mark.sqlite_only  # about the SQLite file at .aries/index.db; a server database is not a file
def test_an_index_of_another_schema_is_named_kept_and_rebuilt(tmp_path: Path) -> None:
    plant_good(tmp_path)
    db = tmp_path / "vault" / ".aries" / "index.db"
    db.parent.mkdir(parents=True)
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE notes (something_else TEXT)")
    conn.commit()
    conn.close()
    vault = make(tmp_path)
    answers(vault)
    index = vault.stores[0].index
    assert index.corrupt_copy is not None and index.corrupt_copy.exists()
    recovered = vault.audit(limit=50).query("action == 'recover'")["detail"].tolist()
    assert recovered and "index.db" in recovered[0] and index.corrupt_copy.name in recovered[0]
    close(vault)


# -- secrets --------------------------------------------------------------------------------------------------

KEY = "sk-ant-api03-" + "Zq7" * 30 + "AA"


def _stored_bytes(vault: Vault) -> bytes:
    db = vault.stores[0].index.db_path
    return b"".join(Path(str(db) + s).read_bytes() for s in ("", "-wal") if Path(str(db) + s).exists())


def test_a_planted_key_never_reaches_the_note_file_or_the_index(tmp_path: Path) -> None:
    vault = make(tmp_path)
    result = vault.add("Deploy credentials", f"The deploy uses key {KEY} for the provider.")
    first = vault.add(f"Key in the title {KEY}", "A careless title.")
    updated = vault.add("Deploy credentials", f"Rotated: the deploy now uses {KEY}, the same key.")
    assert updated.action == "updated"
    # and a note written by hand with a key in it: indexed redacted
    (tmp_path / "vault" / "notes").mkdir(parents=True)
    (tmp_path / "vault" / "notes" / "Hand written.md").write_text(
        f"---\ndescription: {KEY}\n---\nuses {KEY}\n"
    )
    vault.sync()
    vault.query_ranked("deploy provider key")  # also fills the embeddings cache
    marker = KEY[len("sk-ant-api03-") :].encode()
    on_disk = b"".join(p.read_bytes() for p in (tmp_path / "vault" / "inbox").iterdir())
    assert marker not in on_disk and b"[REDACTED:anthropic]" in on_disk
    assert KEY not in first.title and KEY not in "".join(os.listdir(tmp_path / "vault" / "inbox"))
    assert marker not in _stored_bytes(vault)
    assert "[REDACTED:anthropic]" in vault.read(result.title)
    assert KEY not in vault.read("Hand written")
    close(vault)


# -- the index vanishing under writers ------------------------------------------------------------------------


def _delete(db: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)


def _delete_main_only(db: Path) -> None:
    db.unlink()  # its -wal and -shm stay behind: a new file beside them reads as "malformed"


def _truncate(db: Path) -> None:
    with open(db, "r+b") as handle:
        handle.truncate(0)


def _replace_with_garbage(db: Path) -> None:
    tmp = db.with_name("garbage.tmp")
    tmp.write_bytes(b"not a database at all " * 200)
    tmp.replace(db)


VANISH = {
    "deleted": _delete,
    "main file deleted": _delete_main_only,
    "truncated": _truncate,
    "replaced by garbage": _replace_with_garbage,
}


@pytest.mark.sqlite_only  # about the SQLite file at .aries/index.db; a server database is not a file
@pytest.mark.parametrize("how", list(VANISH))
def test_index_vanishing_under_four_writers_loses_no_add(tmp_path: Path, how: str) -> None:
    vault = make(tmp_path)
    db = vault.stores[0].index.db_path
    returned: list[str] = []
    errors: list[str] = []
    lock = threading.Lock()
    enough = threading.Event()

    def writer(tag: str, target: Vault, count: int) -> None:
        for i in range(count):
            try:
                result = target.add(
                    f"Writer {tag} fact {i}", f"Writer {tag} records fact {i} on topic {i * 7919 % 1009}."
                )
            except Exception as exc:  # noqa: BLE001 - every failure is a finding
                with lock:
                    errors.append(f"{tag} {i}: {exc!r}")
                continue
            with lock:
                returned.append(result.title)
                if len(returned) >= 40:
                    enough.set()

    threads = [threading.Thread(target=writer, args=(tag, vault, 60)) for tag in "ABCD"]
    for thread in threads:
        thread.start()
    enough.wait()
    VANISH[how](db)
    late = make(tmp_path)  # a writer that starts after the index vanished
    late_thread = threading.Thread(target=writer, args=("L", late, 40))
    late_thread.start()
    for thread in [*threads, late_thread]:
        thread.join()
    assert errors == []
    assert len(returned) == 4 * 60 + 40
    inbox = {p.stem for p in (tmp_path / "vault" / "inbox").glob("*.md")}
    assert set(returned) <= inbox
    for live in (vault, late):
        titles = set(live.titles())
        assert [t for t in returned if t not in titles] == []
    assert vault.stores[0].index.recoveries >= 1 or late.stores[0].index.recoveries >= 1
    after = make(tmp_path)
    assert set(returned) <= set(after.titles())
    assert list(after.query_ranked("Writer C records fact 7")["title"])[0] == "Writer C fact 7"
    assert (after.audit(limit=1000)["action"] == "recover").any()
    close(vault, late, after)


@pytest.mark.sqlite_only  # about the SQLite file at .aries/index.db; a server database is not a file
def test_index_deleted_between_calls_is_rebuilt_on_the_next_one(tmp_path: Path) -> None:
    vault = make(tmp_path)
    vault.add("Before the deletion", "This note was added before the index vanished.")
    _delete(vault.stores[0].index.db_path)
    assert vault.titles() == ["Before the deletion"]  # a read notices and rebuilds from the files
    assert vault.add("After the deletion", "And the next write goes to the new index.").action == "created"
    assert sorted(make(tmp_path).titles()) == ["After the deletion", "Before the deletion"]
    assert "was deleted while in use" in vault.audit(limit=10).query("action == 'recover'")["detail"].iloc[0]
    close(vault)


# -- property tests of the note parser ------------------------------------------------------------------------

_yaml_bits = st.sampled_from(
    ["created: ", "type: ", "- ", "? ", ": ", "&a ", "*a ", "!!binary ", "!!timestamp ", "!!float ", "[", "]",
     "{", "}", ",", "'", '"', "\n", "  ", "2024-02-30", "2024-13-45", ".nan", ".inf", "1e999", "~", "|", ">",
     "#", "%YAML 1.1", "---", "...", "\t", "\\x00", "é", "\x85", "\ufeff"]
)  # fmt: skip
_front = st.one_of(st.text(max_size=200), st.lists(_yaml_bits, max_size=40).map("".join))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(front=_front, body=st.text(max_size=200))
def test_parse_text_raises_only_note_errors_that_name_the_file(front: str, body: str) -> None:
    try:
        meta, rest = parse_text(f"---\n{front}\n---\n{body}", "notes/prop.md")
    except NoteError as exc:
        assert str(exc).startswith("notes/prop.md")
        assert any(w in str(exc) for w in ("front matter", "YAML", "never ends", "-byte limit"))
    else:
        assert isinstance(meta, dict) and isinstance(rest, str)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.one_of(st.binary(max_size=400), _front.map(lambda f: f"---\n{f}\n---\nbody".encode())))
def test_parse_note_on_random_bytes_returns_a_note_or_names_the_file(tmp_path: Path, raw: bytes) -> None:
    path = tmp_path / "Random.md"
    path.write_bytes(raw)
    try:
        note = parse_note(tmp_path, path)
    except NoteError as exc:
        assert str(exc).startswith("Random.md:")
    else:
        assert note.title == "Random" and isinstance(note.body, str) and note.created == note.created
        assert all(p.startswith("Random.md:") for p in note.problems)
