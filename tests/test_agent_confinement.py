"""Confinement of the agent's file tools, bounded Grep and Glob, and WebFetch's address rules (issue 10).

The race tests swap a path between a regular file (or folder) and a symlink to the outside as fast as another
process can, for a few seconds of workload, while Write and Edit run in a loop: not one write may land outside.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import http.server
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from aries_kernel.agent import tools
from aries_kernel.agent.settings import AriesAgent
from aries_kernel.agent.tools import TOOLS, ToolEnv, run_tool
from tests.fs_support import snapshot

SECRET = "outside secret 7f3a"
SWAP_SECONDS = 3.0  # the length of the swapping workload, not a limit on anything
MAX_ATTEMPTS = 1_000_000  # a bound on the race loop in case one of the two states is never met

# Swaps a path as fast as it can until a stop file appears, and prints the swap count. "flip": the path becomes a
# symlink to the outside file, then a regular file, each by an atomic rename (so the symlink comes back however
# often a tool replaces it). "exchange": renameat2(RENAME_EXCHANGE) of two names, for folders.
SWAPPER = r"""
import ctypes, ctypes.util, os, sys, time
mode, a, b, stop = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
swaps = 0
while not os.path.exists(stop):
    if mode == "exchange":
        swaps += libc.renameat2(AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), RENAME_EXCHANGE) == 0
        continue
    os.symlink(b, a + ".link")
    os.replace(a + ".link", a)
    with open(a + ".file", "w") as handle:
        handle.write("inside old\n")
    os.replace(a + ".file", a)
    swaps += 2
print(swaps)
"""


def _can_exchange() -> bool:
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    return hasattr(libc, "renameat2")


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """A root with a file, and beside it an outside folder holding a secret, linked into the root every way."""
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    (root / "pkg").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET + "\n")
    (root / "pkg" / "core.py").write_text("def run():\n    return 42\n")
    (root / "link_file.txt").symlink_to(outside / "secret.txt")  # absolute target
    (root / "link_rel.txt").symlink_to("../outside/secret.txt")  # relative target
    (root / "link_dir").symlink_to(outside)
    (root / "pkg" / "deep_link").symlink_to("../../outside")
    return root, outside


def call(env: ToolEnv, name: str, /, **arguments: object) -> tuple[str, bool]:
    return run_tool(TOOLS[name], env, dict(arguments))


# ------------------------------------------------------------------------------------------------ the races


def _race(mode: str, outside: Path, a: Path, b: Path, attempt: object) -> tuple[int, int, int]:
    """Run ``attempt()`` in a loop while another process swaps ``a`` (see SWAPPER); (swaps, successes,
    refusals).

    The loop runs for SWAP_SECONDS and on until both outcomes were met (so a loaded machine, where the swapper
    starts late, still tests both states).
    """
    before = snapshot(outside)
    stop = outside.parent / "stop-swapping"
    stop.unlink(missing_ok=True)  # left by an earlier race in the same test
    swapper = subprocess.Popen(
        [sys.executable, "-c", SWAPPER, mode, str(a), str(b), str(stop)],
        stdout=subprocess.PIPE,
        text=True,
    )
    successes = refusals = 0
    end = time.monotonic() + SWAP_SECONDS
    try:
        while successes + refusals < MAX_ATTEMPTS and (
            time.monotonic() < end or not (successes and refusals)
        ):
            _, is_error = attempt()  # type: ignore[operator]
            if is_error:
                refusals += 1
            else:
                successes += 1
    finally:
        stop.touch()
        output, _ = swapper.communicate()
    assert snapshot(outside) == before, "a write landed outside the root"
    return int(output.strip() or 0), successes, refusals


def test_write_and_edit_never_land_outside_while_a_file_is_swapped_with_a_symlink(
    layout: tuple[Path, Path],
) -> None:
    root, outside = layout
    env = ToolEnv(root, AriesAgent())
    target = root / "target.txt"
    target.write_text("inside old\n")
    victim = outside / "victim.txt"
    victim.write_text("outside old\n")

    def write() -> tuple[str, bool]:
        return call(env, "Write", file_path="target.txt", content="written old\n")

    swaps, written, refused = _race("flip", outside, target, victim, write)
    assert swaps > 0 and written > 0 and refused > 0, (swaps, written, refused)

    def edit() -> tuple[str, bool]:
        return call(env, "Edit", file_path="target.txt", old_string="old", new_string="old!")

    swaps, edited, refused = _race("flip", outside, target, victim, edit)
    assert swaps > 0 and edited > 0 and refused > 0, (swaps, edited, refused)
    assert victim.read_text() == "outside old\n"


@pytest.mark.skipif(not _can_exchange(), reason="renameat2 is not in this libc")
def test_writes_below_a_folder_swapped_with_a_symlink_never_land_outside(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    env = ToolEnv(root, AriesAgent())
    (root / "work").mkdir()
    (root / "work" / "notes.txt").write_text("inside old\n")
    (outside / "notes.txt").write_text("outside old\n")
    (root / "work_swap").symlink_to(outside)
    flip = iter(range(10**9))

    def write_or_edit() -> tuple[str, bool]:
        if next(flip) % 2:
            return call(env, "Edit", file_path="work/notes.txt", old_string="old", new_string="old")
        return call(env, "Write", file_path="work/notes.txt", content="inside old\n")

    swaps, done, refused = _race("exchange", outside, root / "work", root / "work_swap", write_or_edit)
    assert swaps > 0 and done > 0 and refused > 0, (swaps, done, refused)
    assert sorted(p.name for p in outside.iterdir()) == ["notes.txt", "secret.txt"]


# --------------------------------------------------------------------------------------- escapes, one by one

ESCAPES = [
    "../outside/secret.txt",
    "pkg/../../outside/secret.txt",
    "link_file.txt",
    "link_rel.txt",
    "link_dir/secret.txt",
    "pkg/deep_link/secret.txt",
    "~/../../outside/secret.txt",
    "pkg\\..\\..\\outside\\secret.txt",
    "pkg/core.py\0.txt",
]


@pytest.mark.parametrize("path", ESCAPES)
def test_read_write_edit_and_notebook_edit_refuse_every_way_out(layout: tuple[Path, Path], path: str) -> None:
    root, outside = layout
    env = ToolEnv(root, AriesAgent())
    before = snapshot(outside)
    paths = [path, str(outside / "secret.txt")]
    for each in paths:
        output, is_error = call(env, "Read", file_path=each)
        assert is_error and SECRET not in output
        assert call(env, "Write", file_path=each, content="pwned")[1]
        assert call(env, "Edit", file_path=each, old_string="outside", new_string="pwned")[1]
        notebook = each.replace("secret.txt", "new.ipynb")
        assert call(env, "NotebookEdit", notebook_path=notebook, cell_index=0, edit_mode="insert")[1]
    assert snapshot(outside) == before


def test_refusals_say_what_was_wrong(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    env = ToolEnv(root, AriesAgent())
    said = {path: call(env, "Read", file_path=path)[0] for path in ESCAPES}
    assert "climbs out with '..'" in said["../outside/secret.txt"]
    assert f"through a symlink (link_file.txt -> {outside / 'secret.txt'})" in said["link_file.txt"]
    assert "through a symlink (link_rel.txt -> ../outside/secret.txt)" in said["link_rel.txt"]
    assert "contains a backslash" in said["pkg\\..\\..\\outside\\secret.txt"]
    assert "contains a NUL byte" in said["pkg/core.py\0.txt"]
    assert "outside the project root" in call(env, "Read", file_path=str(outside / "secret.txt"))[0]


def test_symlinks_inside_the_root_are_followed_safely(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    env = ToolEnv(root, AriesAgent())
    (root / "alias.py").symlink_to("pkg/core.py")
    (root / "pkg_abs").symlink_to(root / "pkg")
    assert call(env, "Read", file_path="alias.py")[0].startswith("     1\tdef run():")
    output, is_error = call(env, "Write", file_path="alias.py", content="x = 1\n")
    assert not is_error and output == "Overwrote pkg/core.py (1 lines)."
    assert (root / "alias.py").is_symlink() and (root / "pkg" / "core.py").read_text() == "x = 1\n"
    output, is_error = call(env, "Write", file_path="pkg_abs/new.py", content="y = 2\n")
    assert not is_error and (root / "pkg" / "new.py").read_text() == "y = 2\n"
    (root / "loop").symlink_to("loop")
    output, is_error = call(env, "Read", file_path="loop")
    assert is_error and "too many levels of symlinks" in output


def test_write_is_atomic_and_keeps_the_permission_bits(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    env = ToolEnv(root, AriesAgent())
    script = root / "run.sh"
    script.write_text("echo 1\n")
    script.chmod(0o750)
    assert not call(env, "Write", file_path="run.sh", content="echo 2\n")[1]
    assert script.stat().st_mode & 0o777 == 0o750 and script.read_text() == "echo 2\n"
    assert not [p for p in root.iterdir() if p.name.endswith(".aries-tmp")]
    output, is_error = call(env, "Write", file_path="pkg", content="x")
    assert is_error and "pkg is a folder" in output
    output, is_error = call(env, "Write", file_path="run.sh/inner.txt", content="x")
    assert is_error and "run.sh is a file, not a folder" in output


def test_special_files_are_refused_without_blocking(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    env = ToolEnv(root, AriesAgent())
    os.mkfifo(root / "pipe.py")
    output, is_error = call(env, "Read", file_path="pipe.py")
    assert is_error and "not a regular file (a FIFO)" in output
    assert "pipe.py" not in call(env, "Grep", pattern=".")[0]
    assert "pipe.py" not in call(env, "Glob", pattern="**/*")[0]


def test_grep_and_glob_never_follow_a_symlink_out(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    env = ToolEnv(root, AriesAgent())
    (outside / "deep").mkdir()
    (outside / "deep" / "more.py").write_text(SECRET + "\n")
    for pattern in (".", "secret", "outside"):
        output, _ = call(env, "Grep", pattern=pattern)
        assert SECRET not in output
    output, is_error = call(env, "Grep", pattern=".", path="link_dir")
    assert is_error and "through a symlink" in output
    listing, _ = call(env, "Glob", pattern="**/*")
    assert set(listing.splitlines()) == {"pkg/core.py"}
    assert call(env, "Glob", pattern=f"{root}/pkg/*.py", path="elsewhere") == ("pkg/core.py", False)
    for pattern in (
        "../*",
        "../outside/*",
        "../**/*",
        "pkg/../../outside/*",
        str(outside / "*"),
        "link_dir/*",
    ):
        output, _ = call(env, "Glob", pattern=pattern)
        assert "secret" not in output, (pattern, output)
    assert "has a '..' part" in call(env, "Glob", pattern="../*")[0]
    assert "outside the project root" in call(env, "Glob", pattern=str(outside / "*"))[0]
    assert "through a symlink" in call(env, "Glob", pattern="*", path="pkg/deep_link")[0]


def test_grep_prints_nothing_that_read_refuses(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    env = ToolEnv(root, AriesAgent())
    (root / "latin.py").write_bytes(b"name = '\xe9t\xe9'\n")
    (root / "alias.py").symlink_to("pkg/core.py")
    (root / "data.bin").write_bytes(b"\0\1\2 return\n")
    output, _ = call(env, "Grep", pattern="=|return|def")
    shown = [line.split(":", 1)[0] for line in output.splitlines() if not line.startswith("[")]
    assert shown == ["pkg/core.py", "pkg/core.py"]
    for path in shown:
        assert not call(env, "Read", file_path=path)[1]
    assert "[1 file(s) not UTF-8 not searched]" in output


# ----------------------------------------------------------------------------------------- bounded patterns


def test_a_glob_of_16000_brackets_is_refused_and_999_are_matched_linearly(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    env = ToolEnv(root, AriesAgent())
    output, is_error = call(env, "Glob", pattern="[" * 16_000)
    assert is_error and "16,000 characters long; at most 1,000" in output
    output, is_error = call(env, "Glob", pattern="[" * 999)
    assert not is_error and output.startswith("No file matches")
    output, is_error = call(env, "Grep", pattern="def", glob="[" * 16_000)
    assert is_error and "at most 1,000" in output


def test_catastrophic_patterns_stop_at_the_search_timeout(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    env = ToolEnv(root, AriesAgent(search_timeout=0.3))
    (root / "long.txt").write_text("a" * 50_000 + "!\n")
    output, is_error = call(env, "Grep", pattern="(a+)+$")
    assert is_error and "ran past its 0.3-second limit" in output and "(a+)+" in output
    (root / ("a" * 200 + ".txt")).write_text("x")
    output, is_error = call(env, "Glob", pattern="*a" * 120 + "b")
    assert is_error or output.startswith("No file matches")  # either finished or stopped by its own budget


def test_grep_caps_the_matches_it_counts(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    env = ToolEnv(root, AriesAgent())
    (root / "many.txt").write_text("hit\n" * 20_000)
    output, _ = call(env, "Grep", pattern="hit")
    lines = output.splitlines()
    assert len([line for line in lines if line.startswith("many.txt:")]) == 200
    assert "[... 9800 more matches]" in lines and "[stopped counting at 10,000 matches]" in lines


def test_grep_and_glob_say_where_a_deep_tree_was_cut(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    env = ToolEnv(root, AriesAgent())
    deep = root.joinpath(*["d"] * 70)
    deep.mkdir(parents=True)
    (deep / "bottom.py").write_text("def run(): pass\n")
    (root / "d" / "top.py").write_text("def run(): pass\n")
    output, _ = call(env, "Grep", pattern="def run")
    assert "d/top.py:1: def run(): pass" in output and "bottom.py" not in output
    assert output.endswith("[folders more than 64 levels deep were not searched]")
    assert call(env, "Glob", pattern="**/*.py")[0].endswith(
        "[folders more than 64 levels deep were not searched]"
    )


def test_project_save_refuses_a_symlinked_aries_folder(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    (root / ".aries").symlink_to(outside)
    output, is_error = call(ToolEnv(root, AriesAgent()), "ProjectSave", title="x", content="y")
    assert is_error and "Refused: .aries is a symlink" in output


# ------------------------------------------------------------------------------------------------ WebFetch


class _Pages(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: list[str] = []

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.seen.append(self.path)
        try:
            if self.path == "/page":
                self._send(b"<p>hello</p>", "text/html")
            elif self.path.startswith("/redirect"):
                self.send_response(302)
                self.send_header("Location", self.path.split("?to=", 1)[1])
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif self.path == "/big":
                self._send(b"x" * 300_000, "text/plain")
            elif self.path == "/drip":  # a byte every 50 ms, 400 of them at most: 20 s unless cut
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", "400")
                self.end_headers()
                for _ in range(400):
                    self.wfile.write(b"d")
                    self.wfile.flush()
                    time.sleep(0.05)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped reading at its cap

    def _send(self, body: bytes, kind: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _QuietServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that hung up at its cap


@pytest.fixture
def pages() -> Iterator[str]:
    _Pages.seen = []
    server = _QuietServer(("127.0.0.1", 0), _Pages)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


def test_web_fetch_refuses_non_public_addresses_before_connecting(pages: str, tmp_path: Path) -> None:
    env = ToolEnv(tmp_path, AriesAgent())
    port = pages.rsplit(":", 1)[1]
    for url in (
        f"{pages}/page",
        f"http://localhost:{port}/page",
        f"http://[::1]:{port}/",
        f"http://[::ffff:127.0.0.1]:{port}/",
        "http://10.1.2.3/",
        "http://172.16.0.1/",
        "http://192.168.1.1/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[fe80::1]/",
        "http://[fc00::1]/",
        "http://0.0.0.0/",
    ):
        output, is_error = call(env, "WebFetch", url=url)
        assert is_error and "Refused:" in output and "web_allow_private" in output, (url, output)
    assert _Pages.seen == []  # nothing reached the server
    env.settings.web_allow_private = True
    output, is_error = call(env, "WebFetch", url=f"{pages}/page")
    assert not is_error and output.endswith("hello") and _Pages.seen == ["/page"]


def test_web_fetch_checks_every_redirect(pages: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = ToolEnv(tmp_path, AriesAgent())
    # Treat 127.0.0.1 as a public host for this test, so a redirect from it to 127.0.0.2 shows the re-check.
    real = tools._public_address
    monkeypatch.setattr(
        tools, "_public_address", lambda address: str(address) == "127.0.0.1" or real(address)
    )
    port = pages.rsplit(":", 1)[1]
    output, is_error = call(env, "WebFetch", url=f"{pages}/redirect?to=http://127.0.0.2:{port}/page")
    assert is_error and "Refused: 127.0.0.2 resolves to 127.0.0.2" in output
    assert _Pages.seen == [f"/redirect?to=http://127.0.0.2:{port}/page"]
    output, is_error = call(env, "WebFetch", url=f"{pages}/redirect?to=/page")
    assert not is_error and output.endswith("hello")
    output, is_error = call(env, "WebFetch", url=f"{pages}/redirect?to=file:///etc/passwd")
    assert is_error and "is not an http(s) URL" in output


def test_web_fetch_stops_at_its_size_and_time_caps(pages: str, tmp_path: Path) -> None:
    env = ToolEnv(tmp_path, AriesAgent(web_allow_private=True, web_max_bytes=10_000, web_timeout=0.5))
    output, is_error = call(env, "WebFetch", url=f"{pages}/big")
    assert not is_error and "[cut: the page is longer than web_max_bytes (10,000 bytes)]" in output
    assert output.splitlines()[1] == "x" * 10_000
    output, is_error = call(env, "WebFetch", url=f"{pages}/drip")
    assert (not is_error and "stopped at the web_timeout limit" in output) or (
        is_error and "ReadTimeout" in output
    ), output
