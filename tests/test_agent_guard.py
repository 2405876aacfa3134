"""The Repl guard: file writes confined to the root and weighed as edits, processes weighed as commands.

First the guard alone (:func:`aries_kernel.agent.guard.guarded` with a recording ``ask``), then scripted agent
sessions whose Repl code tries to escape: a write outside the root, ``!`` lines, ``subprocess`` and
``os.system``, each asked for or refused as the permission mode says.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from aries_kernel.agent.events import ApprovalRequested, ToolCallFinished
from aries_kernel.agent.guard import Verdict, guarded, in_step
from aries_kernel.agent.settings import AriesAgent
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
