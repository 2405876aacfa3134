"""The Aries kernel for real: the Jupyter protocol, the REPL body in the namespace, install, console, USR1."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jupyter_kernel_test
from jupyter_kernel_test.msgspec_v5 import validate_message

from tests.kernel_harness import JUPYTER_DATA, run_cell, start_kernel, stop_kernel

JUPYTER = str(Path(sys.executable).with_name("jupyter"))


class AriesKernelProtocolTests(jupyter_kernel_test.KernelTests):
    """The standard kernel conformance suite, run against ``aries``."""

    kernel_name = "aries"
    language_name = "python"
    file_extension = ".py"
    code_hello_world = "print('hello, world')"
    code_stderr = "import sys; print('test', file=sys.stderr)"
    completion_samples = [{"text": "zi", "matches": {"zip"}}]
    complete_code_samples = ["1", "print('hello, world')", "def f(x):\n  return x*2\n\n"]
    incomplete_code_samples = ["print('''hello", "def f(x):\n  x*2"]
    invalid_code_samples = ["import = 7q"]
    code_page_something = "zip?"
    code_generate_error = "raise ValueError('boom')"
    code_execute_result = [
        {"code": "1+2+3", "result": "6"},
        {"code": "[n*n for n in range(3)]", "result": "[0, 1, 4]"},
    ]
    code_display_data = [
        {
            "code": "from IPython.display import HTML, display; display(HTML('<b>aries</b>'))",
            "mime": "text/html",
        },
        {
            "code": "from IPython.display import Math, display; display(Math('\\\\frac{1}{2}'))",
            "mime": "text/latex",
        },
    ]
    code_history_pattern = "1?2*"
    supported_history_operations = ("tail", "range", "search")
    code_inspect_sample = "zip"
    code_clear_output = "from IPython.display import clear_output; clear_output()"

    @classmethod
    def setUpClass(cls) -> None:
        # The kernel this class starts inherits the environment (and the working directory, this checkout): give
        # it an empty root of its own, so it writes no .aries here and its background indexing has nothing to
        # say in the middle of a test's cell; put the environment back after.
        cls._saved_env = {
            name: os.environ.get(name) for name in ("ARIES_VAULT", "ARIES_LOG_DIR", "ARIES_ROOT")
        }
        os.environ["ARIES_VAULT"] = str(JUPYTER_DATA / "vault")
        os.environ["ARIES_LOG_DIR"] = str(JUPYTER_DATA / "logs")
        root = JUPYTER_DATA / "protocol-root"
        root.mkdir(exist_ok=True)
        os.environ["ARIES_ROOT"] = str(root)
        super().setUpClass()

    def flush_channels(self) -> None:
        """Drain both channels up to a request's own idle status, not up to a 0.1 s lull as the base class does.

        A request a test sent without waiting for its iopub messages (a completion, an inspection) has its idle
        status published after its reply; on a loaded machine that came after the base class's lull, and the
        next test read it as the first message of its own request (a CI run: 'idle' != 'busy'). The kernel
        handles shell requests one at a time, so every earlier request's messages precede this one's idle."""
        msg_id = self.kc.kernel_info()
        while True:
            msg = self.kc.get_iopub_msg(timeout=30)
            validate_message(msg)
            if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "status":
                if msg["content"]["execution_state"] == "idle":
                    break
        while True:
            reply = self.kc.get_shell_msg(timeout=30)
            validate_message(reply)
            if reply["parent_header"].get("msg_id") == msg_id:
                break

    @classmethod
    def tearDownClass(cls) -> None:
        super().tearDownClass()
        for name, value in cls._saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def test_a_history_range_of_this_session_gives_its_cells(aries_kernel: tuple) -> None:
    _, kc = aries_kernel
    first = run_cell(kc, "ranged = 'first'")
    run_cell(kc, "ranged += ' second'")
    assert first.error is None
    count = kc.execute_interactive("pass", timeout=30)["content"]["execution_count"]
    msg_id = kc.history(
        hist_access_type="range", session=0, start=count - 2, stop=count, raw=True, output=False
    )
    reply = kc.get_shell_msg(timeout=30)
    assert reply["parent_header"]["msg_id"] == msg_id and reply["content"]["status"] == "ok"
    assert [entry[2] for entry in reply["content"]["history"]] == ["ranged = 'first'", "ranged += ' second'"]
    # Each entry names this session by its number, as a tail request does (IPython itself says 0).
    msg_id = kc.history(hist_access_type="tail", n=1, raw=True, output=False)
    tail = kc.get_shell_msg(timeout=30)
    assert tail["parent_header"]["msg_id"] == msg_id
    number = tail["content"]["history"][0][0]
    assert number > 0 and {entry[0] for entry in reply["content"]["history"]} == {number}


def test_kernel_info_names_the_implementation(aries_kernel: tuple) -> None:
    _, kc = aries_kernel
    info = kc.kernel_info(reply=True, timeout=30)["content"]
    assert info["implementation"] == "aries-kernel"
    assert info["language_info"]["name"] == "python"
    assert "codebase" in info["banner"]


def test_body_names_are_in_the_namespace(aries_kernel: tuple) -> None:
    _, kc = aries_kernel
    out = run_cell(kc, "sorted({'codebase', 'vault', 'rlm_call', 'rlm_batch', 'rlm_stats'} & set(globals()))")
    assert out.error is None, out.error
    assert out.result == "['codebase', 'rlm_batch', 'rlm_call', 'rlm_stats', 'vault']"
    help_out = run_cell(kc, "%aries help")
    assert "%aries status" in (help_out.result or "")


def test_top_files_returns_a_dataframe(aries_kernel: tuple) -> None:
    _, kc = aries_kernel
    out = run_cell(kc, "top = codebase.top_files(5); type(top).__name__, list(top.columns)[:3], len(top) > 0")
    assert out.error is None, out.error
    assert out.result == "('DataFrame', ['file', 'role', 'pagerank'], True)"


def test_load_ext_in_plain_ipykernel(small_repo: Path) -> None:
    km, kc = start_kernel(small_repo, kernel_name="python3")
    try:
        out = run_cell(
            kc, "%load_ext aries_kernel\n'codebase' in dir() and 'vault' in dir() and callable(rlm_call)"
        )
        assert out.error is None, out.error
        assert out.result == "True"
        frame = run_cell(kc, "type(codebase.list_files()).__name__")
        assert frame.result == "'DataFrame'", frame.error
        assert "%aries status" in (run_cell(kc, "%aries help").result or "")
    finally:
        stop_kernel(km, kc)


def test_install_and_uninstall_kernelspec(tmp_path: Path) -> None:
    # A unique name, so a kernelspec installed on this machine cannot answer for the one under test.
    name = f"aries-test-{os.getpid()}"
    env = dict(os.environ, JUPYTER_PATH=str(tmp_path / "share" / "jupyter"))
    cli = [sys.executable, "-m", "aries_kernel"]
    subprocess.run([*cli, "install", "--prefix", str(tmp_path), "--name", name], check=True, env=env)
    listing = subprocess.run(
        [JUPYTER, "kernelspec", "list"], env=env, capture_output=True, text=True, check=True
    )
    installed = tmp_path / "share" / "jupyter" / "kernels" / name
    assert str(installed) in listing.stdout
    assert (installed / "logo-64x64.png").exists()
    assert sys.executable in (installed / "kernel.json").read_text()
    removed = subprocess.run([*cli, "uninstall", "--name", name], env=env, capture_output=True, text=True)
    assert removed.returncode == 0, removed.stderr
    assert not installed.exists()
    again = subprocess.run([*cli, "uninstall", "--name", name], env=env, capture_output=True, text=True)
    assert again.returncode != 0 and f"No kernelspec named {name!r}" in again.stderr


def test_console_runs_lines_from_stdin(small_repo: Path, tmp_path: Path) -> None:
    """``aries-kernel console`` reads cells from a pipe; it waits for IOPub before the first, so none hangs."""
    env = dict(os.environ, ARIES_VAULT=str(tmp_path / "vault"), ARIES_LOG_DIR=str(tmp_path / "logs"))
    lines = "x = 6 * 7\nx\nprint('files', len(codebase.list_files()) > 0)\n"
    done = subprocess.run(
        [str(Path(sys.executable).with_name("aries-kernel")), "console", "--simple-prompt"],
        input=lines,
        cwd=small_repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,  # a run takes about 2 s; the bound only keeps a hang from stalling the suite
    )
    assert "Out[2]: 42" in done.stdout, done.stdout + done.stderr
    assert "files True" in done.stdout, done.stdout + done.stderr


def test_wait_for_iopub_sees_the_kernel(aries_kernel: tuple) -> None:
    """The console's readiness probe returns once IOPub carries a reply, leaving both queues empty."""
    from queue import Empty

    from aries_kernel.console import wait_for_iopub

    _, kc = aries_kernel
    wait_for_iopub(kc, timeout=60)
    for get in (kc.get_iopub_msg, kc.get_shell_msg):
        try:
            message = get(timeout=0.2)
        except Empty:
            continue
        raise AssertionError(f"left in a queue: {message['header']['msg_type']}")


def test_usr1_dumps_every_thread_stack(small_repo: Path, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    km, kc = start_kernel(small_repo, env={"ARIES_LOG_DIR": str(logs)})
    try:
        pid = int(run_cell(kc, "import os; os.getpid()").result or "0")
        os.kill(pid, signal.SIGUSR1)
        dump = logs / f"stack-dump-{pid}.txt"
        for _ in range(100):
            if dump.exists() and "File" in dump.read_text():
                break
            time.sleep(0.1)
        text = dump.read_text()
        assert "Thread 0x" in text and "File" in text
        assert run_cell(kc, "1 + 1").result == "2"  # the kernel survived the signal
    finally:
        stop_kernel(km, kc)


CHURN = """
import threading
def _deep(n):
    return _deep(n - 1) if n else 0
def _churn():
    while not _stop_churn.is_set():
        _deep(200)
_stop_churn = threading.Event()
threading.Thread(target=_churn, daemon=True).start()
"""


def test_usr1_dumps_while_other_threads_run_and_the_kernel_answers_after_each(
    small_repo: Path, tmp_path: Path
) -> None:
    """A dump must not read a running thread's frames as they change: faulthandler's C handler did, and a dump
    taken while a thread was busy could stop halfway and leave the kernel hung for good."""
    logs = tmp_path / "logs"
    km, kc = start_kernel(small_repo, env={"ARIES_LOG_DIR": str(logs)})
    try:
        pid = int(run_cell(kc, "import os; os.getpid()").result or "0")
        assert run_cell(kc, CHURN).error is None  # a thread pushing and popping 200 frames, over and over
        dump = logs / f"stack-dump-{pid}.txt"
        for count in range(1, 21):
            os.kill(pid, signal.SIGUSR1)
            deadline = time.monotonic() + 60  # a dump that never comes fails here
            while not (dump.exists() and dump.read_text().count("--- kill -USR1 at") == count):
                assert time.monotonic() < deadline, f"dump {count} was not written"
                time.sleep(0.05)
            assert run_cell(kc, "1 + 1", timeout=60).result == "2", f"the kernel answers after dump {count}"
            # Each dump has the main thread, whose stack starts at the kernel's entry point.
            assert dump.read_text().count("in _run_module_as_main") == count
        assert "in _deep" in dump.read_text(), "the busy thread's stack is in the dumps"
        run_cell(kc, "_stop_churn.set()")
    finally:
        stop_kernel(km, kc)


def test_codebase_reports_how_far_indexing_is(aries_kernel: tuple) -> None:
    _, kc = aries_kernel
    out = run_cell(kc, "codebase.status()")
    assert out.error is None, out.error
    assert out.result and ("ready" in out.result or "indexing" in out.result)
