"""The Repl guard: file writes confined to the root and weighed as edits, processes weighed as commands.

First the guard alone (:func:`aries_kernel.agent.guard.guarded` with a recording ``ask``), then scripted agent
sessions whose Repl code tries to escape: a write outside the root, ``!`` lines, ``subprocess`` and
``os.system``, each asked for or refused as the permission mode says.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import subprocess
import threading
from pathlib import Path
from urllib.parse import quote

import pytest

from aries_kernel.agent.events import ApprovalRequested, ToolCallFinished
from aries_kernel.agent.guard import Verdict, guarded, in_step
from aries_kernel.agent.settings import AriesAgent
from tests.fs_support import snapshot
from tests.kernel_harness import run_cell, start_kernel, stop_kernel
from tests.loopback import Reply, ScriptedModelServer
from tests.test_agent_loop import make_agent, run_all


class Recorder:
    """An ``ask`` that records every question and answers with ``allow``."""

    def __init__(self, allow: bool = True) -> None:
        self.allow = allow
        self.asked: list[tuple[str, str]] = []

    def __call__(self, effect: str, summary: str) -> Verdict:
        self.asked.append((effect, summary))
        return Verdict(self.allow, "" if self.allow else "the user denied")


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    monkeypatch.chdir(path)
    return path.resolve()


def test_writes_inside_are_asked_once_and_outside_refused_in_any_case(root: Path) -> None:
    outside = root.parent / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_text("keep\n")
    (root / "escape").symlink_to(outside)
    ask = Recorder()
    with guarded(root, ask) as report:
        with open("made.txt", "w") as handle:
            handle.write("one\n")
        with open("made.txt", "a") as handle:  # the same file again: not asked twice
            handle.write("two\n")
        for attempt in (
            lambda: open(outside / "new.txt", "w"),
            lambda: (outside / "victim.txt").write_text("lost\n"),
            lambda: open("escape/victim.txt", "a"),  # through a symlink inside the root
            lambda: open("../outside/victim.txt", "r+"),
            lambda: os.remove(outside / "victim.txt"),
            lambda: os.rename("made.txt", outside / "moved.txt"),
            lambda: os.link(outside / "victim.txt", "hardlink.txt"),  # would let a write inside land outside
            lambda: shutil.rmtree(outside),
            lambda: os.truncate(outside / "victim.txt", 0),
            lambda: os.chmod(outside / "victim.txt", 0o600),
            lambda: os.mkdir(outside / "sub"),
        ):
            with pytest.raises(
                PermissionError, match="Refused by aries-kernel's Repl guard: .* outside the project"
            ):
                attempt()
        with open(os.devnull, "w") as handle:  # the null device is not a file of anyone's
            handle.write("x")
    assert (outside / "victim.txt").read_text() == "keep\n" and sorted(os.listdir(outside)) == ["victim.txt"]
    assert (root / "made.txt").read_text() == "one\ntwo\n" and not (root / "hardlink.txt").exists()
    assert ask.asked == [("edit", "create made.txt")]  # refusals outside the root are not questions
    assert report.allowed == ["create made.txt"] and len(report.refused) == 11
    # after the step nothing is watched
    assert not in_step()
    (outside / "after.txt").write_text("free\n")


def test_a_relative_os_open_for_writing_is_refused_as_its_dir_fd_is_unseen(root: Path) -> None:
    outside = root.parent / "dirfd-target"
    slash = os.open("/", os.O_RDONLY)
    ask = Recorder()
    try:
        with guarded(root, ask):
            with pytest.raises(PermissionError, match="relative to a dir_fd the guard cannot see"):
                os.open(str(outside)[1:], os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=slash)
            fd = os.open(str(root / "absolute.txt"), os.O_WRONLY | os.O_CREAT, 0o644)  # absolute: an edit
            os.close(fd)
    finally:
        os.close(slash)
    assert not outside.exists() and (root / "absolute.txt").exists()
    assert ask.asked == [("edit", "create absolute.txt")]


def test_one_approved_action_covers_what_it_does_inside(root: Path) -> None:
    tree = root / "build"
    (tree / "deep").mkdir(parents=True)
    for name in ("a.o", "b.o", "deep/c.o"):
        (tree / name).write_text("x")
    ask = Recorder()
    with guarded(root, ask):
        shutil.rmtree("build")
        subprocess.run(["true"], check=True, stdout=subprocess.DEVNULL)
        os.makedirs("pkg/sub", exist_ok=True)
        os.makedirs("pkg/sub", exist_ok=True)  # exists: nothing changes, nothing asked
    assert not tree.exists() and (root / "pkg" / "sub").is_dir()
    assert ask.asked == [
        ("edit", "delete the tree build"),
        ("command", "run `true`"),
        ("edit", "create folder pkg"),
        ("edit", "create folder pkg/sub"),
    ]


def test_every_way_to_start_a_process_is_a_command(root: Path) -> None:
    ask = Recorder(allow=False)
    with guarded(root, ask) as report:
        for attempt in (
            lambda: subprocess.run(["touch", "by_run"]),
            lambda: subprocess.check_output("touch by_shell", shell=True),
            lambda: os.system("touch by_system"),
            lambda: os.posix_spawn("/usr/bin/touch", ["touch", "by_spawn"], dict(os.environ)),
            lambda: os.spawnv(os.P_WAIT, "/usr/bin/touch", ["touch", "by_spawnv"]),
            lambda: os.popen("touch by_popen"),
            os.fork,
        ):
            with pytest.raises(PermissionError, match=r"Repl guard: .*\(the user denied\)"):
                attempt()
    assert sorted(os.listdir(root)) == []
    kinds = [effect for effect, _ in ask.asked]
    assert kinds == ["command"] * 7 and len(report.refused) == 7
    summaries = [summary for _, summary in ask.asked]
    assert summaries[:3] == [
        "run `touch by_run`",
        "run `touch by_shell`",
        "run `touch by_system` (os.system)",
    ]
    assert summaries[3] == "run `touch by_spawn` (os.posix_spawn)"
    assert summaries[4] == summaries[6] == "fork the kernel process (os.fork)"


def test_an_allowed_fork_does_not_carry_the_guard_into_the_child(root: Path) -> None:
    ask = Recorder()
    with guarded(root, ask):
        status = os.system("touch by_system")  # the shell it starts writes unwatched (it was allowed)
        pid = os.fork()
        if pid == 0:  # the child: its writes are its own (the fork was the action allowed)
            try:
                Path("by_child").write_text("x")
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
    assert status == 0 and (root / "by_system").exists() and (root / "by_child").exists()
    assert [effect for effect, _ in ask.asked] == ["command", "command"]


def test_other_threads_and_aries_own_stores_are_not_watched(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aries_kernel.vault import open_vault

    monkeypatch.setenv("ARIES_VAULT", str(tmp_path / "vault"))
    config = AriesAgent().config
    config.AriesVault.embedder = "hash"
    config.AriesVault.project_brain = False
    vault = open_vault(root, config=config)
    written: list[bool] = []
    ask = Recorder(allow=False)
    try:
        with guarded(root, ask):
            vault.add("Retries back off", "Exponential backoff with jitter.")  # the global vault, outside
            worker = threading.Thread(
                target=lambda: written.append(bool((tmp_path / "by_thread").write_text("x")))
            )
            worker.start()
            worker.join()
    finally:
        for store in vault.stores:
            store.index.close()
    assert ask.asked == [] and written == [True]
    assert any(path.suffix == ".md" for path in (tmp_path / "vault").rglob("*"))


# ------------------------------------------------------------------------------------- scripted sessions

ESCAPES = """\
import os, subprocess
from pathlib import Path
outcome = {{}}
def attempt(name, action):
    try:
        action()
        outcome[name] = "ran"
    except PermissionError as exc:
        outcome[name] = str(exc)
attempt("outside", lambda: Path({outside!r}).write_text("escaped"))
attempt("inside", lambda: Path("inside.txt").write_text("ok"))
attempt("subprocess", lambda: subprocess.run(["touch", "by_subprocess"], check=True))
attempt("system", lambda: os.system("touch by_system"))
try:
    !touch by_bang
    outcome["bang"] = "ran"
except PermissionError as exc:
    outcome["bang"] = str(exc)
"""


def _approver(answer: bool, asked: list[ApprovalRequested]):  # type: ignore[no-untyped-def]
    def approve(request: ApprovalRequested) -> None:
        asked.append(request)
        if answer:
            request.approve()
        else:
            request.deny()

    return approve


def test_default_mode_asks_for_each_escape_and_a_denial_stops_it(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    agent, primary, _ = make_agent(
        root, Reply(tool_calls=[("Repl", {"code": ESCAPES.format(outside=str(outside))})]), Reply(text="ok")
    )
    asked: list[ApprovalRequested] = []
    events = run_all(agent, "escape", approver=_approver(False, asked))
    outcome = agent.shell.user_ns["outcome"]
    assert "outside the project root" in outcome["outside"] and not outside.exists()
    for name in ("inside", "subprocess", "system", "bang"):
        assert outcome[name].startswith("Refused by aries-kernel's Repl guard: "), name
        assert outcome[name].endswith("(permission mode default; the user denied)."), name
    assert sorted(os.listdir(root)) == [".aries"]  # nothing was created but the session
    assert [(request.name, request.effect, request.summary) for request in asked] == [
        ("Repl", "edit", "create inside.txt"),
        ("Repl", "command", "run `touch by_subprocess`"),
        ("Repl", "command", "run `touch by_system` (os.system)"),
        ("Repl", "command", "run `touch by_bang` (a ! shell line)"),
    ]
    result = next(event for event in events if isinstance(event, ToolCallFinished))
    assert "[Refused by the Repl guard: " in result.output  # told even when the code swallows the error
    session = agent.session
    assert session is not None
    guard_records = [a for a in session.approvals if a.get("summary")]
    assert [(a["approved"], a["by"]) for a in guard_records] == [(False, "user")] * 4


def test_no_approver_means_nobody_answered_and_nothing_runs(root: Path, tmp_path: Path) -> None:
    code = "import subprocess\nsubprocess.run(['touch', 'by_subprocess'])"
    agent, primary, _ = make_agent(root, Reply(tool_calls=[("Repl", {"code": code})]), Reply(text="ok"))
    run_all(agent, "run it")
    result = [m for m in primary.requests[1].messages if m.role == "tool"][-1]
    assert (
        "PermissionError: Refused by aries-kernel's Repl guard: run `touch by_subprocess`" in result.content
    )
    assert "nobody answered the approval request" in result.content
    assert not (root / "by_subprocess").exists()


@pytest.mark.parametrize(
    ("mode", "asked_effects", "ran"),
    [
        ("default", ["edit", "command", "command", "command"], True),
        ("acceptEdits", ["command", "command", "command"], True),
        ("plan", [], False),
        ("bypassPermissions", [], True),
    ],
)
def test_the_repl_escapes_follow_the_permission_mode(
    root: Path, tmp_path: Path, mode: str, asked_effects: list[str], ran: bool
) -> None:
    outside = tmp_path / "outside.txt"
    agent, _, _ = make_agent(
        root,
        Reply(tool_calls=[("Repl", {"code": ESCAPES.format(outside=str(outside))})]),
        Reply(text="ok"),
        settings=AriesAgent(permission_mode=mode),
    )
    asked: list[ApprovalRequested] = []
    run_all(agent, "escape", approver=_approver(True, asked))
    outcome = agent.shell.user_ns["outcome"]
    assert "outside the project root" in outcome["outside"] and not outside.exists()  # in every mode
    assert [request.effect for request in asked] == asked_effects
    for name, made in (("inside", "inside.txt"), ("subprocess", "by_subprocess"), ("system", "by_system")):
        assert (root / made).exists() == ran, name
        assert (outcome[name] == "ran") == ran, outcome[name]
    assert (root / "by_bang").exists() == ran
    if not ran:
        assert "permission mode plan: this run is read-only" in outcome["inside"]
        assert "so commands are refused" in outcome["subprocess"]


@pytest.mark.kernel
def test_in_a_real_kernel_the_guard_asks_on_stdin(small_repo: Path, server: ScriptedModelServer) -> None:
    code = (
        "!touch by_bang\n"
        "import os\n"
        "print('key seen:', os.environ.get('ANTHROPIC_API_KEY'))\n"
        "try:\n"
        "    open('denied.txt', 'w').close()\n"
        "except PermissionError as exc:\n"
        "    print(exc)\n"
    )
    server.script(Reply(tool_calls=[("Repl", {"code": code})]), Reply(text="Done."))
    env = {"ANTHROPIC_BASE_URL": server.anthropic_url, "ANTHROPIC_API_KEY": "sk-ant-" + "k" * 30}
    km, kc = start_kernel(small_repo, env=env)
    try:
        cell = run_cell(kc, "%aries go", timeout=180, stdin_reply=["y", "n"])
    finally:
        stop_kernel(km, kc)
    assert cell.error is None, cell.error
    assert cell.prompts == [
        "Allow run `touch by_bang` (a ! shell line)? [y/N/a(ll this run)] ",
        "Allow create denied.txt? [y/N/a(ll this run)] ",
    ]
    assert (small_repo / "by_bang").exists() and not (small_repo / "denied.txt").exists()
    (result,) = [
        block
        for m in server.requests[1].body["messages"]
        if isinstance(m["content"], list)
        for block in m["content"]
        if block.get("type") == "tool_result"
    ]
    text = result["content"] if isinstance(result["content"], str) else result["content"][0]["text"]
    assert "key seen: None" in text
    assert (
        "Refused by aries-kernel's Repl guard: create denied.txt (permission mode default; the user denied)"
        in text
    )


# ----------------------------------------------------------------------------- SQLite, mkfifo and mknod


def _wal_database(path: Path) -> None:
    database = sqlite3.connect(path)
    database.execute("PRAGMA journal_mode=wal")
    database.execute("CREATE TABLE notes(title)")
    database.execute("INSERT INTO notes VALUES ('kept')")
    database.commit()
    database.close()  # the last connection checkpoints: only the database file is left


def test_sqlite_mkfifo_and_mknod_outside_the_root_are_refused_however_named(root: Path) -> None:
    outside = root.parent / "outside"
    outside.mkdir()
    _wal_database(outside / "wal.db")
    rollback = sqlite3.connect(outside / "rollback.db")
    rollback.execute("CREATE TABLE t(x)")
    rollback.commit()
    rollback.close()
    (root / "escape").symlink_to(outside)
    before = snapshot(outside)
    out = str(outside)
    slash = os.open("/", os.O_RDONLY)
    ask = Recorder()
    memory: sqlite3.Connection | None = None
    try:
        with guarded(root, ask) as report:
            memory = sqlite3.connect(":memory:")
            for attempt in (
                lambda: sqlite3.connect(f"file:{out}/uri.db?mode=rwc", uri=True),
                lambda: sqlite3.connect(f"file:{out}/plain-uri.db"),  # this SQLite reads every file: as a URI
                lambda: sqlite3.connect("file:" + quote(f"{out}/escaped.db", safe="")),  # %2F for each /
                lambda: sqlite3.connect(f"file://localhost{out}/authority.db"),
                lambda: sqlite3.connect("file:../outside/relative.db?vfs=unix-none"),
                lambda: sqlite3.connect("file:../outside/repeated.db?mode=ro&mode=rwc"),  # the last mode wins
                lambda: sqlite3.connect("file:../outside/nul.db%00.ignored"),  # %00 ends the path
                lambda: sqlite3.connect(f"file:{out}/wal.db?mode=ro"),  # read-only still writes -wal, -shm
                lambda: sqlite3.connect(f"file:{out}/wal.db?mode=ro&immutable=0&immutable=1"),
                lambda: sqlite3.connect("escape/through-link.db"),  # a symlink in the root pointing out
                lambda: sqlite3.connect("file:escape/through-link.db"),
                lambda: sqlite3.Connection(":memory:"),  # not by sqlite3.connect: no authorizer, refused
                lambda: os.mkfifo(f"{out}/fifo"),
                lambda: os.mkfifo(out[1:] + "/fifo-at", dir_fd=slash),
                lambda: os.mknod(f"{out}/node", stat.S_IFREG | 0o600),
                lambda: os.mknod("escape/node-fifo", stat.S_IFIFO | 0o600),
            ):
                with pytest.raises(PermissionError, match="Refused by aries-kernel's Repl guard: "):
                    attempt()
            for statement, parameters in (
                (f"ATTACH DATABASE '{out}/attach.db' AS other", ()),
                (f"ATTACH 'file:{out}/attach-uri.db?mode=rwc' AS other", ()),
                ("ATTACH 'file:escape/attach-link.db' AS other", ()),
                ("ATTACH ? AS other", (f"{out}/attach-parameter.db",)),
                (f"ATTACH '{out}' || '/attach-expression.db' AS other", ()),
                (f"VACUUM INTO '{out}/vacuum.db'", ()),
                ("VACUUM INTO ?", (f"{out}/vacuum-parameter.db",)),
            ):
                with pytest.raises(sqlite3.DatabaseError, match="not authorized|authorization denied"):
                    memory.execute(statement, parameters)
            # Reads outside are not writes: a rollback-journal database, or a WAL one opened immutable.
            sqlite3.connect(f"file:{out}/rollback.db?mode=ro").execute("SELECT * FROM t").close()
            found = sqlite3.connect(f"file:{out}/wal.db?mode=ro&immutable=1").execute(
                "SELECT title FROM notes"
            )
            assert found.fetchall() == [("kept",)]
    finally:
        os.close(slash)
        if memory is not None:
            memory.close()
    assert snapshot(outside) == before and sorted(os.listdir(outside)) == ["rollback.db", "wal.db"]
    assert ask.asked == []  # outside the root is refused, never asked
    assert len(report.refused) == 23
    assert (
        f"attach database {out}/attach.db ({out}/attach.db is outside the project root" in report.refused[16]
    )
    assert report.refused[19].startswith("attach a database named by a parameter or an expression")
    assert f"create a named pipe {out}/fifo-at" in report.refused[13]


def test_sqlite_inside_the_root_works_and_files_it_makes_are_edits(root: Path) -> None:
    ask = Recorder()
    with guarded(root, ask):
        memory = sqlite3.connect(":memory:")
        memory.execute("CREATE TABLE t(x)")
        memory.execute("INSERT INTO t VALUES (42)")
        memory.commit()
        memory.execute("ATTACH ':memory:' AS scratch")  # in memory: nothing to weigh
        assert memory.execute("SELECT x FROM t").fetchall() == [(42,)]
        store = sqlite3.connect("index.db")  # a vault-like store: WAL, written, then read back read-only
        store.execute("PRAGMA journal_mode=wal")
        store.execute("CREATE TABLE notes(title)")
        store.execute("INSERT INTO notes VALUES ('kept')")
        store.commit()
        reader = sqlite3.connect("file:index.db?mode=ro")
        assert reader.execute("SELECT title FROM notes").fetchall() == [("kept",)]
        memory.execute("VACUUM INTO 'copy.db'")
        memory.execute("ATTACH 'file:index.db?mode=ro' AS notes")  # WAL: read-only still writes its -shm
        os.mkfifo("pipe")
        for each in (memory, store, reader):
            each.close()
    assert sqlite3.connect(root / "copy.db").execute("SELECT x FROM t").fetchall() == [(42,)]
    assert stat.S_ISFIFO(os.stat(root / "pipe").st_mode)
    assert ask.asked == [
        ("edit", "open database index.db"),
        ("edit", "attach database copy.db"),
        ("edit", "attach database index.db"),
        ("edit", "create a named pipe pipe"),
    ]
    denied = Recorder(allow=False)
    with guarded(root, denied) as report:
        memory = sqlite3.connect(":memory:")
        with pytest.raises(sqlite3.DatabaseError, match="not authorized"):
            memory.execute("ATTACH 'other.db' AS other")
        with pytest.raises(PermissionError, match=r"create a file node node \(the user denied\)"):
            os.mknod("node", stat.S_IFREG | 0o600)
        memory.close()
    assert not (root / "other.db").exists() and not (root / "node").exists()
    assert report.refused == [
        "attach database other.db (the user denied)",
        "create a file node node (the user denied)",
    ]
    # The wrappers stay what they wrap: the same arguments, dir_fd support, nothing weighed outside a step.
    assert os.mkfifo in os.supports_dir_fd and os.mknod in os.supports_dir_fd
    os.mkfifo(root.parent / "after-the-step")
    assert stat.S_ISFIFO(os.stat(root.parent / "after-the-step").st_mode)


SQLITE_ESCAPES = """\
import json, os, sqlite3, stat
outcome = {}
def attempt(name, action):
    try:
        action()
        outcome[name] = "ran"
    except (PermissionError, sqlite3.DatabaseError) as exc:
        outcome[name] = f"{type(exc).__name__}: {exc}"
memory = sqlite3.connect(":memory:")
attempt("uri", lambda: sqlite3.connect("file:OUTSIDE/uri.db?mode=rwc", uri=True))
attempt("attach", lambda: memory.execute("ATTACH DATABASE 'OUTSIDE/attach.db' AS other"))
attempt("vacuum", lambda: memory.execute("VACUUM INTO 'OUTSIDE/vacuum.db'"))
attempt("mkfifo", lambda: os.mkfifo("OUTSIDE/fifo"))
attempt("mknod", lambda: os.mknod("OUTSIDE/node", stat.S_IFREG | 0o600))
memory.execute("CREATE TABLE t(x)")
memory.execute("INSERT INTO t VALUES (42)")
outcome["memory"] = memory.execute("SELECT x FROM t").fetchone()[0]
def in_root():
    store = sqlite3.connect("MODE.db")
    store.execute("PRAGMA journal_mode=wal")
    store.execute("CREATE TABLE notes(title)")
    store.execute("INSERT INTO notes VALUES ('kept')")
    store.commit()
    return sqlite3.connect("file:MODE.db?mode=ro").execute("SELECT title FROM notes").fetchone()[0]
try:
    outcome["in root"] = in_root()
except PermissionError as exc:
    outcome["in root"] = str(exc)
print("outcome:", json.dumps(outcome))
"""


@pytest.mark.kernel
def test_in_a_real_kernel_sqlite_mkfifo_and_mknod_escapes_are_refused_in_every_mode(
    small_repo: Path, tmp_path: Path, server: ScriptedModelServer
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    km, kc = start_kernel(small_repo, env=server.kernel_env())
    outcomes: dict[str, dict[str, object]] = {}
    prompts: dict[str, list[str]] = {}
    try:
        for mode in ("default", "acceptEdits", "plan", "bypassPermissions"):
            code = SQLITE_ESCAPES.replace("OUTSIDE", str(outside)).replace("MODE", mode)
            server.script(Reply(tool_calls=[("Repl", {"code": code})]), Reply(text="Done."))
            cell = run_cell(kc, f"%aries --mode {mode} go", timeout=180, stdin_reply="y")
            assert cell.error is None, cell.error
            prompts[mode] = cell.prompts
            shown = run_cell(kc, "import json; print(json.dumps(outcome))")
            outcomes[mode] = json.loads(shown.stdout)
    finally:
        stop_kernel(km, kc)
    assert os.listdir(outside) == []  # nothing written outside, in any mode
    for mode, outcome in outcomes.items():
        for name in ("uri", "mkfifo", "mknod"):
            assert "outside the project root" in str(outcome[name]), (mode, name, outcome[name])
        assert outcome["attach"] == "DatabaseError: not authorized", mode  # the authorizer denied it
        assert outcome["vacuum"] == "DatabaseError: authorization denied", mode
        assert outcome["memory"] == 42, mode
        # in-root SQLite work: asked in default (answered yes), refused in plan, allowed in the others
        if mode == "plan":
            assert "permission mode plan: this run is read-only" in str(outcome["in root"])
            assert not (small_repo / f"{mode}.db").exists()
        else:
            assert outcome["in root"] == "kept", (mode, outcome["in root"])
    assert prompts["default"] == ["Allow open database default.db? [y/N/a(ll this run)] "]
    assert prompts["acceptEdits"] == prompts["plan"] == prompts["bypassPermissions"] == []
    results = [
        str(block["content"])
        for request in server.requests
        for message in request.body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    assert results  # each Repl result says what the guard refused and why, even what sqlite3 reported vaguely
    for name in ("attach.db", "vacuum.db"):
        refusal = f"attach database {outside / name} ({outside / name} is outside the project root"
        assert all(refusal in result for result in results), name
