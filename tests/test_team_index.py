"""One index per commit for a team (aries_kernel/codebase/team_index.py): the second member's kernel starts from
the first member's index of the same commit, tagged under the team key, and parses only what differs in its own
work tree; another commit, a forged, truncated or older copy, or a missing key is refused with a message."""

from __future__ import annotations

import secrets
import shutil
import sqlite3
import subprocess
import threading
from pathlib import Path

import pytest

from aries_kernel.codebase import Codebase, extract, queries
from aries_kernel.codebase.store import SCHEMA_VERSION, IndexStore, schema_of
from aries_kernel.codebase.team_index import head_commit, publish
from aries_kernel.codebase.team_settings import team_index
from tests.kernel_harness import run_cell, start_kernel, stop_kernel
from tests.loopback import Reply, ScriptedModelServer

FIXTURE = Path(__file__).parent / "fixtures" / "codebase" / "pyproj"


def git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


@pytest.fixture
def team(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The team's shared folder and key, in the environment; returns the folder."""
    key = tmp_path / "team.key"
    key.write_bytes(secrets.token_bytes(32))
    monkeypatch.setenv("ARIES_TEAM_INDEX_DIR", str(tmp_path / "shared"))
    monkeypatch.setenv("ARIES_TEAM_KEY_FILE", str(key))
    return tmp_path / "shared"


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    """A repository with one commit (the Python fixture project, and a package of 30 modules importing it)."""
    root = tmp_path / "origin"
    shutil.copytree(FIXTURE, root)
    for i in range(30):
        (root / "pkg").mkdir(exist_ok=True)
        (root / "pkg" / f"m{i}.py").write_text(
            f"from pkg import m{(i + 1) % 30}\n\ndef f{i}(x):\n    return x + {i}\n"
        )
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "first")
    return root


def member(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, origin: Path) -> Path:
    """``name``'s clone of ``origin`` (a folder of the same name, elsewhere) and their own index key."""
    monkeypatch.setenv("ARIES_INDEX_KEY", str(tmp_path / f"{name}.key"))
    clone = tmp_path / name / "repo"
    clone.parent.mkdir()
    subprocess.run(["git", "clone", "-q", str(origin), str(clone)], check=True)
    return clone


def indexed(root: Path) -> Codebase:
    """``root`` indexed, with the team copy written when there is one to write (the step after ready)."""
    codebase = Codebase(root)
    codebase.wait_ready()
    thread = codebase._thread
    assert thread is not None
    thread.join(60)  # publishing runs on the index thread after ready
    return codebase


def test_the_second_member_starts_from_the_first_members_index_and_parses_only_what_they_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, team: Path, origin: Path
) -> None:
    alice = member(tmp_path, monkeypatch, "alice", origin)
    first = indexed(alice)
    commit = head_commit(alice)
    assert commit is not None and (team / f"{commit}.index.db").is_file()
    assert first.last_run["mode"] == "cold" and "wrote the team index" in first.status(), first.status()
    files = first.last_run["parsed"]

    bob = member(tmp_path, monkeypatch, "bob", origin)
    (bob / "pkg" / "m3.py").write_text("from pkg import m4\n\ndef f3(x, y):\n    return x * y\n")
    reads: list[str] = []
    read_source = extract.read_source

    def reading(root: str, rel: str, cap: int) -> bytes:
        reads.append(rel)
        return read_source(root, rel, cap)

    monkeypatch.setattr(extract, "read_source", reading)
    second = indexed(bob)
    monkeypatch.setattr(extract, "read_source", read_source)
    assert "started from the team index of commit" in second.status(), second.status()
    assert set(reads) == {"pkg/m3.py"}, "git vouches for the rest: only the changed file is read (and parsed)"
    assert second.last_run["parsed"] == 1 and second.last_run["reused"] == files - 1, second.last_run
    assert "f3" in second.find_symbol("f3").to_string() and "x * y" in (bob / "pkg" / "m3.py").read_text()

    # The same index a cold start of Bob's tree gives, under Bob's own key (a fresh one: nothing reused).
    monkeypatch.setenv("ARIES_INDEX_KEY", str(tmp_path / "bob-again.key"))
    monkeypatch.delenv("ARIES_TEAM_INDEX_DIR")
    shutil.rmtree(bob / ".aries")
    cold = indexed(bob)
    assert cold.last_run["parsed"] == files
    assert second.top_files(50).equals(cold.top_files(50))
    assert second._graph.edge_count() == cold._graph.edge_count()
    # Bob's start stored the graph with only his file's uses merged in: who uses each name is as a build has it.
    merged, built = second._graph.users(), cold._graph.users()
    assert merged.files == built.files and not merged.changed
    assert all(merged.of(name) == built.of(name) for name in {*merged.vocabulary, *built.vocabulary})


def test_a_forged_truncated_or_older_copy_is_refused_with_a_message_and_the_kernel_indexes_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, team: Path, origin: Path
) -> None:
    alice = member(tmp_path, monkeypatch, "alice", origin)
    files = indexed(alice).last_run["parsed"]
    commit = head_commit(alice)
    copy = team / f"{commit}.index.db"
    pristine = copy.read_bytes()

    def bob_with(damage: str) -> Codebase:
        copy.write_bytes(pristine)
        conn = sqlite3.connect(copy)
        with conn:
            if damage == "forged":  # one record rewritten by someone without the team key
                path, blob = conn.execute("SELECT path, record FROM files LIMIT 1").fetchone()
                conn.execute("UPDATE files SET record = ? WHERE path = ?", (blob[:-1] + b"X", path))
            elif damage == "older":
                conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
        conn.close()
        if damage == "truncated":
            copy.write_bytes(pristine[: len(pristine) // 3])
        bob = tmp_path / f"bob-{damage}" / "repo"
        monkeypatch.setenv("ARIES_INDEX_KEY", str(tmp_path / f"bob-{damage}.key"))
        subprocess.run(["git", "clone", "-q", str(origin), str(bob)], check=True)
        return indexed(bob)

    forged = bob_with("forged")
    assert "is not used: the files row of" in forged.status() and "does not verify" in forged.status()
    assert forged.last_run["parsed"] == files
    truncated = bob_with("truncated")
    assert "is not used: not an index" in truncated.status(), truncated.status()
    assert truncated.last_run["parsed"] == files
    older = bob_with("older")
    assert "is not used: schema version 1, this aries-kernel reads" in older.status()
    assert older.last_run["parsed"] == files
    # ... and the older copy is replaced by this schema's, which the next member can use.
    assert "wrote the team index" in older.status() and schema_of(copy) == SCHEMA_VERSION


def test_another_commit_a_missing_key_and_a_dirty_publisher(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, team: Path, origin: Path
) -> None:
    alice = member(tmp_path, monkeypatch, "alice", origin)
    (alice / "pkg" / "m1.py").write_text("def secret_work_in_progress():\n    pass\n")
    (alice / "notes.py").write_text("PRIVATE = 1\n")
    first = indexed(alice)
    assert "2 changed files left out" in first.status(), first.status()
    copy = team / f"{head_commit(alice)}.index.db"
    shared = {row[0] for row in sqlite3.connect(copy).execute("SELECT path FROM files")}
    assert "pkg/m1.py" not in shared and "notes.py" not in shared and "pkg/m2.py" in shared
    assert sqlite3.connect(copy).execute("SELECT COUNT(*) FROM graph").fetchone() == (0,)

    # Bob is a commit ahead: there is no copy of his commit, so he indexes alone (and gives it to the team).
    bob = member(tmp_path, monkeypatch, "bob", origin)
    (bob / "pkg" / "m5.py").write_text("def f5(x):\n    return x\n")
    git(bob, "commit", "-q", "-am", "second")
    second = indexed(bob)
    assert f"no team index of commit {head_commit(bob)[:12]} yet" in second.status()  # type: ignore[index]
    assert "wrote the team index" in second.status()

    monkeypatch.delenv("ARIES_TEAM_KEY_FILE")
    carol = member(tmp_path, monkeypatch, "carol", origin)
    third = indexed(carol)
    assert "is set but no team key" in third.status() and third.last_run["mode"] == "cold"


def test_two_members_publishing_one_commit_at_once_leave_one_whole_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, team: Path, origin: Path
) -> None:
    monkeypatch.setenv("ARIES_INDEX_KEY", str(tmp_path / "alice.key"))
    codebase = Codebase(origin)
    codebase.wait_ready()
    assert codebase._thread is not None
    codebase._thread.join(60)
    copy = team / f"{head_commit(origin)}.index.db"
    copy.unlink()
    shared, _ = team_index(codebase.settings)
    assert shared is not None
    notes: list[str] = []
    store = IndexStore(origin / ".aries" / "index.db")
    threads = [
        threading.Thread(target=lambda: notes.append(publish(store, origin, shared))) for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sum("wrote the team index" in note for note in notes) == 1, notes
    assert all("wrote" in note or "exists" in note or "another member first" in note for note in notes), notes
    assert schema_of(copy) == SCHEMA_VERSION and not list(team.glob(".*"))  # no temporary file left


def test_the_first_answer_reads_the_headers_and_records_of_the_files_it_shows_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, team: Path, origin: Path
) -> None:
    indexed(member(tmp_path, monkeypatch, "alice", origin))
    bob = member(tmp_path, monkeypatch, "bob", origin)
    (bob / "pkg" / "m3.py").write_text("from pkg import m4\n\ndef f3(x, y):\n    return x * y\n")
    headers: list[str] = []
    read_header = queries.read_header

    def reading(root: str, rel: str) -> str:
        headers.append(rel)
        return read_header(root, rel)

    second = Codebase(bob)
    second.wait_ready()
    monkeypatch.setattr(queries, "read_header", reading)
    shown = list(second.top_files(5)["file"])
    ranked = list(second.top_files(None, roles="all")["file"])  # every role: every header is read
    last = ranked.index(shown[-1])
    assert len(shown) == 5 and headers[: last + 1] == ranked[: last + 1], (shown, headers[:10])
    assert len(headers) == last + 1 + len(ranked), "the files below the last one shown were not read for it"
    assert second.top_files(5).equals(second.top_files(None).head(5))


def test_a_shared_copy_that_is_a_symlink_or_far_too_large_is_refused_and_the_kernel_indexes_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, team: Path, origin: Path
) -> None:
    alice = member(tmp_path, monkeypatch, "alice", origin)
    files = indexed(alice).last_run["parsed"]
    copy = team / f"{head_commit(alice)}.index.db"
    outside = tmp_path / "elsewhere.index.db"  # a whole, verifying copy, but outside the team folder
    copy.rename(outside)
    copy.symlink_to(outside)
    linked = indexed(member(tmp_path, monkeypatch, "bob", origin))
    assert f"the team index {copy} is not used: it is a symlink" in linked.status(), linked.status()
    assert linked.last_run["parsed"] == files

    copy.unlink()
    outside.rename(copy)
    with copy.open(
        "r+b"
    ) as handle:  # still a readable index, with a gigabyte after it (sparse: no disk used)
        handle.truncate(1 << 30)
    huge = indexed(member(tmp_path, monkeypatch, "carol", origin))
    assert (
        "is not used: it is 1,073,741,824 bytes, more than an index of this repository can be"
        in huge.status()
    )
    assert huge.last_run["parsed"] == files and huge.last_run["mode"] == "cold"


# An agent's Repl step: a forged copy of HEAD's index under a key of its own, a record given a planted symbol, and
# the environment and the config pointed at it.
FORGE = """
import marshal, os, secrets, sqlite3
from aries_kernel.codebase.index_key import IndexKey
from aries_kernel.codebase.store import IndexStore
from aries_kernel.codebase.team_index import head_commit
root = codebase.root
evil = root / ".aries" / "evil"
evil.mkdir()
(evil / "key").write_bytes(secrets.token_bytes(32))
key = IndexKey((evil / "key").read_bytes(), persistent=True)
copy = evil / f"{head_commit(root)}.index.db"
target = IndexStore(copy, key)
IndexStore(root / ".aries" / "index.db").copy_to(target)
target.close()
conn = sqlite3.connect(copy)
for path, size, mtime, digest, blob in conn.execute("SELECT * FROM files").fetchall():
    record = marshal.loads(blob[32:])
    if record["symbols"]:
        record["symbols"] += (("planted_by_the_agent", *record["symbols"][0][1:]),)
        body = marshal.dumps(record)
        with conn:
            conn.execute("UPDATE files SET record = ? WHERE path = ?", (key.tag((path, size, mtime, digest), body) + body, path))
            conn.execute("DELETE FROM graph")
        break
conn.close()
os.environ["ARIES_TEAM_INDEX_DIR"] = str(evil)
os.environ["ARIES_TEAM_KEY_FILE"] = str(evil / "key")
get_ipython().config.AriesCodebase.team_index_dir = str(evil)
get_ipython().config.AriesCodebase.team_key_file = str(evil / "key")
print("forged", path)
"""

# The kernel's next codebase, built as the kernel builds one (from its context), and one built by hand, each
# with an empty .aries/index.db (as in a fresh clone), so that each looks for a team copy.
NEXT_INDEX = """
import sqlite3
from aries_kernel.codebase import Codebase
from aries_kernel.context import get_context

def emptied():
    own = sqlite3.connect(old.root / ".aries" / "index.db")
    with own:
        for table in ("files", "graph", "judgment"):
            own.execute(f"DELETE FROM {table}")
    own.close()

context = get_context(get_ipython())
old = context.codebase
old._thread.join()
old._store.close()  # its lazy reads would put rows back
context.reset("codebase")
emptied()
kernels = context.codebase
kernels.wait_ready()
emptied()
by_hand = Codebase(kernels.root)
by_hand.wait_ready()
print("KERNEL", kernels.status().replace(chr(10), " | "), len(kernels.find_symbol("planted_by_the_agent")))
print("BYHAND", by_hand.status().replace(chr(10), " | "), len(by_hand.find_symbol("planted_by_the_agent")))
"""


@pytest.mark.kernel
def test_an_agent_step_cannot_point_the_kernels_next_index_at_a_forged_copy(
    tmp_path: Path, origin: Path, server: ScriptedModelServer
) -> None:
    key = tmp_path / "team.key"
    key.write_bytes(secrets.token_bytes(32))
    bob = tmp_path / "bob" / "repo"
    subprocess.run(["git", "clone", "-q", str(origin), str(bob)], check=True)
    env = server.kernel_env(
        ARIES_TEAM_INDEX_DIR=str(tmp_path / "shared"),
        ARIES_TEAM_KEY_FILE=str(key),
        ARIES_INDEX_KEY=str(tmp_path / "bob.key"),
    )
    km, kc = start_kernel(bob, env=env)
    try:
        ready = run_cell(kc, "codebase.wait_ready(); print(codebase.status())", timeout=120)
        assert ready.error is None and "no team index of commit" in ready.stdout, ready
        server.script(Reply(tool_calls=[("Repl", {"code": FORGE})]), Reply(text="Done."))
        step = run_cell(kc, "%aries --yes index this repository", timeout=180)
        assert step.error is None and "Done." in step.stdout, step
        shown = run_cell(kc, NEXT_INDEX, timeout=180)
        assert shown.error is None, shown
    finally:
        stop_kernel(km, kc)
    lines = dict(line.split(" ", 1) for line in shown.stdout.splitlines() if line[:6] in ("KERNEL", "BYHAND"))
    # A codebase that reads the settings when it indexes takes the step's copy: the forgery works when it can.
    assert "started from the team index" in lines["BYHAND"] and lines["BYHAND"].endswith(" 1"), lines
    # The kernel's own uses the folder and key of its start: it starts from the team's copy (Bob's first index
    # wrote it), with no planted symbol; the step's copy is not looked at.
    assert "started from the team index" in lines["KERNEL"] and lines["KERNEL"].endswith(" 0"), lines
    assert "evil" not in lines["KERNEL"], lines
