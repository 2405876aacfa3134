"""How soon ``%aries`` reaches the model in a fresh kernel, against a bare SDK call from a fresh process.

Run: ``.venv/bin/python bench/bench_first_request.py [--runs N] [--root PATH]``.

Both sides talk to the same loopback model server (``tests/loopback.py``), which sends the same streamed reply.

- Aries: a fresh Aries kernel is started in a copy of the test repository (or ``--root``) and asked
  ``%aries <prompt>`` right after its first reply (pause 0), and again in another fresh kernel after a pause a
  user spends typing. The clock starts as the execute request is sent; "first request" is the moment the server
  receives the model request, "first text" the first iopub message that shows the reply's text (a stdout
  stream in a console-like client, a widget update when the client speaks the widget protocol).
- SDK: a fresh Python process imports the anthropic SDK and streams one message; its clock starts at the first
  line of the script (interpreter start-up excluded).

The server runs in this process and CLOCK_MONOTONIC is system-wide, so the server's arrival times and the
subprocess's clock readings are on one time line. Both sides run with bytecode caches
(bench_kernel_start.kernel_env); the load before and after is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_kernel_start import kernel_env, load  # noqa: E402

from tests.kernel_harness import start_kernel, stop_kernel  # noqa: E402
from tests.loopback import Reply, ScriptedModelServer  # noqa: E402

REPLY = "Zebra crossing ahead: the loopback model answers."
MARK = REPLY[:3]  # the first streamed chunk (the server sends three characters per delta)
FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "codebase" / "pyproj"

SDK_SCRIPT = """
import time
start = time.monotonic()
import anthropic, json, sys
client = anthropic.Anthropic(base_url=sys.argv[1], api_key="k", max_retries=0)
first_text = None
with client.messages.stream(model="claude-sonnet-4-5", max_tokens=100,
                            messages=[{"role": "user", "content": "hello"}]) as stream:
    for text in stream.text_stream:
        if first_text is None:
            first_text = time.monotonic()
print(json.dumps({"start": start, "first_text": first_text}))
"""


def sdk_once(server: ScriptedModelServer) -> tuple[float, float]:
    """(first request, first text) seconds of a bare SDK call in a fresh process."""
    server.reset_counts()
    out = subprocess.run(
        [sys.executable, "-c", SDK_SCRIPT, server.anthropic_url],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **kernel_env()},
    )
    times = json.loads(out.stdout.strip().splitlines()[-1])
    (request,) = [r for r in server.requests if r.path.endswith("/v1/messages")]
    return request.received - times["start"], times["first_text"] - times["start"]


def shows_text(msg: dict[str, Any]) -> bool:
    content = msg["content"]
    if msg["msg_type"] == "stream":
        return MARK in content.get("text", "")
    if msg["msg_type"] == "comm_msg":
        return MARK in str(content.get("data", {}).get("state", {}).get("value", ""))
    return False


def aries_once(server: ScriptedModelServer, root: Path, pause: float, widgets: bool) -> tuple[float, float]:
    """(first request, first text) seconds of ``%aries`` in a fresh kernel, asked ``pause`` s after ready."""
    server.reset_counts()
    km, kc = start_kernel(
        root,
        env=kernel_env(
            ANTHROPIC_BASE_URL=server.anthropic_url,
            ANTHROPIC_API_KEY="bench-key",
            ARIES_ROOT=str(root),  # a copy under /tmp must not be taken for part of a repository above it
        ),
    )
    try:
        if widgets:
            kc.comm_info(target_name="jupyter.widget")  # what JupyterLab asks as it connects
            kc.get_shell_msg(timeout=30)
        time.sleep(pause)
        start = time.monotonic()
        msg_id = kc.execute("%aries say hello")
        first_text = None
        while True:
            msg = kc.get_iopub_msg(timeout=120)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if first_text is None and shows_text(msg):
                first_text = time.monotonic()
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                break
        kc.get_shell_msg(timeout=60)
        requests = [r for r in server.requests if r.path.endswith("/v1/messages")]
        assert requests and first_text is not None, "the run reached the model and showed its text"
        return requests[0].received - start, first_text - start
    finally:
        stop_kernel(km, kc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="fresh kernels (and processes) per row")
    parser.add_argument("--pause", type=float, default=3.0, help="seconds a user spends typing the prompt")
    parser.add_argument("--root", type=Path, default=None, help="repository the kernel starts in")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="aries-bench-first-"))
    root = args.root or scratch / "repo"
    if args.root is None:
        shutil.copytree(FIXTURE, root)
    try:
        with ScriptedModelServer() as server:
            server.responder = lambda body: Reply(text=REPLY)
            sdk_once(server)  # the bytecode caches of both sides, and the file cache
            aries_once(server, root, 0.0, False)
            print(f"load before: {load()}")
            rows: list[tuple[str, list[tuple[float, float]]]] = [
                ("bare anthropic SDK, fresh process", [sdk_once(server) for _ in range(args.runs)])
            ]
            for label, pause, widgets in (
                ("%aries, text client, asked at once", 0.0, False),
                ("%aries, widget client, asked at once", 0.0, True),
                (f"%aries, text client, asked after {args.pause:g} s", args.pause, False),
            ):
                rows.append((label, [aries_once(server, root, pause, widgets) for _ in range(args.runs)]))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    sdk_request = statistics.median(r for r, _ in rows[0][1])
    sdk_text = statistics.median(t for _, t in rows[0][1])
    print(
        f"First request and first text, median of {args.runs} (root: {root if args.root else 'fixture copy'})"
    )
    print(f"  {'':<40} {'request s':>9} {'text s':>8} {'x SDK req':>9} {'x SDK text':>10}")
    for label, samples in rows:
        request = statistics.median(r for r, _ in samples)
        text = statistics.median(t for _, t in samples)
        print(
            f"  {label:<40} {request:>9.3f} {text:>8.3f} {request / sdk_request:>9.2f} {text / sdk_text:>10.2f}"
        )
    print(f"load after: {load()}")


if __name__ == "__main__":
    main()
