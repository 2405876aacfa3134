"""JupyterLab on loopback and a headless system Chromium driven by Playwright, for the browser tests.

:func:`start_lab` runs ``jupyter lab`` on a free 127.0.0.1 port with a one-off token and private Jupyter
config, data, runtime, settings and workspace folders (nothing of the user's leaks in), and the Aries kernelspec
written into that data folder. :class:`Notebook` drives one notebook tab the way a person does (menus, clicks,
keys) and takes a screenshot at each step. Every wait has a bound and fails with an assertion that says what it
waited for (and a screenshot of the page at that moment).
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from playwright.sync_api import Locator, Page
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from aries_kernel.kernelspec import KERNEL_NAME, write_kernelspec
from aries_kernel.redact import scrubbed_env
from tests.net_support import free_port

__all__ = [
    "CHROMIUM",
    "CHROMIUM_ARGS",
    "Lab",
    "Notebook",
    "copy_tracked",
    "environment_for_kernels",
    "start_lab",
    "wait_until",
]

CHROMIUM = Path("/usr/bin/chromium")  # Debian's; Playwright's own browser download cannot work here
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
_STARTUP_SECONDS = 90  # JupyterLab's first start on a loaded 2-core machine takes about 10 s
_STDERR_OUTPUT = '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'
_PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"  # the notebook tab in front
# JavaScript expressions over `panel`: its kernel is idle (the toolbar's indicator); a prompt shows a count.
_IDLE = (
    "panel !== null && panel.querySelector('.jp-Notebook-ExecutionIndicator[data-status=\"idle\"]') !== null"
)
_COUNTED = r"/^\[\d+\]:$/"

# User settings that keep the page quiet and whole: no news toast over the notebook, and every cell kept in the
# DOM (JupyterLab 4 otherwise renders only the cells near the viewport), so the checks see the whole notebook.
_LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}


def copy_tracked(repo: Path, target: Path) -> Path:
    """Copy the files git tracks in ``repo`` (as they are in the work tree) into a new repository ``target``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=repo, check=True, capture_output=True, text=True
    ).stdout
    for name in filter(None, listed.split("\0")):
        source = repo / name
        if source.is_file():  # a tracked file deleted in the work tree is not part of what we test
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    # A real repository, so the kernel's root discovery finds it by its .git folder as it would for a user.
    subprocess.run(["git", "init", "-q", str(target)], check=True)
    return target


def wait_until(predicate: Callable[[], object], what: str, timeout: float = 60) -> None:
    """Poll ``predicate`` until it is true, or fail saying ``what`` was not reached within ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not {what} within {timeout:.0f} s")
        time.sleep(0.2)


@dataclass
class Lab:
    """A running JupyterLab server."""

    url: str
    token: str
    root: Path
    process: subprocess.Popen[bytes]
    log: Path

    def api(self, method: str, path: str) -> Any:
        """Call the server's REST API (``/api/...``) with the token; the decoded JSON answer, or None."""
        request = urllib.request.Request(
            f"{self.url}{path}", method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            body = response.read()
        return json.loads(body) if body else None

    def page_url(self, path: str) -> str:
        """The /lab/tree URL of ``path`` (relative to the root), logged in by the token; ``reset`` starts from
        an empty workspace, so the tabs of an earlier page are not reopened (nor their kernels restarted)."""
        return f"{self.url}/lab/tree/{path}?reset&token={self.token}"

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def shut_down_kernels(self) -> None:
        """End every session and its kernel (what closing the notebooks and shutting their kernels does)."""
        for session in self.api("GET", "/api/sessions"):
            self.api("DELETE", f"/api/sessions/{session['id']}")

    def stop(self) -> None:
        """Shut the server down (it shuts its kernels down first); kill it if it does not exit."""
        if self.process.poll() is None:
            try:
                self.api("POST", "/api/shutdown")
                self.process.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait(timeout=30)


def start_lab(root: Path, home: Path, env: dict[str, str], python: str = sys.executable) -> Lab:
    """Start JupyterLab serving ``root``, its private folders under ``home``, kernels inheriting ``env``.

    ``env`` is added to the current environment with credentials and ``ARIES_ROOT`` removed, so the kernels see
    only the keys the test gives them and find their project root themselves. ``python`` runs JupyterLab and
    the Aries kernel (another environment's interpreter: the installed wheel, another JupyterLab).
    """
    folders = {
        name: home / name for name in ("config", "data", "runtime", "settings", "workspaces", "ipython")
    }
    for folder in folders.values():
        folder.mkdir(parents=True, exist_ok=True)
    write_kernelspec(folders["data"] / "kernels" / KERNEL_NAME, python=python)
    for name, values in _LAB_SETTINGS.items():
        (folders["settings"] / name).parent.mkdir(parents=True, exist_ok=True)
        (folders["settings"] / name).write_text(json.dumps(values))
    full_env = {name: value for name, value in scrubbed_env().items() if name != "ARIES_ROOT"}
    full_env.update(
        JUPYTER_CONFIG_DIR=str(folders["config"]),
        JUPYTER_DATA_DIR=str(folders["data"]),
        JUPYTER_PATH=str(folders["data"]),
        JUPYTER_RUNTIME_DIR=str(folders["runtime"]),
        JUPYTERLAB_SETTINGS_DIR=str(folders["settings"]),
        JUPYTERLAB_WORKSPACES_DIR=str(folders["workspaces"]),
        IPYTHONDIR=str(folders["ipython"]),
        **env,
    )
    port, token = free_port(), secrets.token_hex(16)
    log = home / "jupyterlab.log"
    with log.open("wb") as sink:  # the child keeps its own descriptor; ours closes here
        process = subprocess.Popen(
            [
                python,
                "-m",
                "jupyterlab",
                "--ip=127.0.0.1",
                f"--port={port}",
                "--ServerApp.port_retries=0",
                f"--IdentityProvider.token={token}",
                "--ServerApp.open_browser=False",
                "--allow-root",  # CI runs as root
                "--ServerApp.terminals_enabled=False",
                "--LabApp.extension_manager=readonly",  # no extension listing from the package index
                f"--ServerApp.root_dir={root}",
                "--LabApp.news_url=None",
                "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            ],
            env=full_env,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    lab = Lab(f"http://127.0.0.1:{port}", token, root, process, log)
    deadline = time.monotonic() + _STARTUP_SECONDS
    while True:
        if process.poll() is not None:
            raise AssertionError(f"JupyterLab exited with {process.returncode}:\n{lab.log_tail()}")
        try:
            lab.api("GET", "/api/status")
            break
        except OSError:
            if time.monotonic() > deadline:
                lab.stop()
                raise AssertionError(
                    f"JupyterLab did not answer within {_STARTUP_SECONDS} s:\n{lab.log_tail()}"
                ) from None
            time.sleep(0.2)
    specs = lab.api("GET", "/api/kernelspecs")["kernelspecs"]
    if KERNEL_NAME not in specs:
        lab.stop()
        raise AssertionError(f"JupyterLab does not list the {KERNEL_NAME!r} kernel: {sorted(specs)}")
    return lab


@dataclass
class Notebook:
    """One notebook open in a browser page, with a numbered screenshot for each step in ``shots``.

    Everything is looked up inside the notebook's own panel (the visible one), never in the whole page.
    """

    page: Page
    lab: Lab
    path: str  # relative to the lab root, e.g. notebooks/01-quick-start.ipynb
    shots: Path
    taken: list[Path] = field(default_factory=list)

    @property
    def panel(self) -> Locator:
        return self.page.locator(_PANEL)

    # ----------------------------------------------------------------------------------------------- waiting
    def wait(self, condition: str, what: str, timeout: float = 120, **arg: Any) -> None:
        """Wait until the JavaScript ``condition`` is true, or fail saying ``what``. The condition is a function
        of one object: ``arg`` plus ``panel``, the notebook's panel element (null until it is shown)."""
        script = f"(arg) => {{ const panel = document.querySelector({json.dumps(_PANEL)}); return ({condition})(panel, arg); }}"
        try:
            self.page.wait_for_function(script, arg=arg, timeout=timeout * 1000, polling=200)
        except PlaywrightTimeout:
            shot = self.screenshot("timeout")
            raise AssertionError(f"{self.path}: not {what} within {timeout:.0f} s (see {shot})") from None

    def wait_visible(self, locator: Locator, what: str, timeout: float = 120) -> Locator:
        """Wait until ``locator`` is visible, or fail saying ``what``."""
        try:
            locator.wait_for(state="visible", timeout=timeout * 1000)
        except PlaywrightTimeout:
            shot = self.screenshot("timeout")
            raise AssertionError(
                f"{self.path}: {what} not shown within {timeout:.0f} s (see {shot})"
            ) from None
        return locator

    def screenshot(self, step: str) -> Path:
        """Save a screenshot of the page as ``<notebook>-NN-<step>.png``."""
        name = f"{Path(self.path).stem}-{len(self.taken) + 1:02d}-{step}.png"
        target = self.shots / name
        self.page.screenshot(path=str(target))
        self.taken.append(target)
        return target

    # -------------------------------------------------------------------------------------------- the page
    def open(self) -> None:
        """Load the notebook's page and wait until its kernel is up and idle."""
        self.page.goto(self.lab.page_url(self.path))
        self.wait_visible(self.panel.locator(".jp-Cell").first, "the notebook's cells")
        wait_until(lambda: self.kernel_state() == "idle", f"{self.path}: a kernel started and idle", 180)
        self.wait_idle()

    def kernel(self) -> dict[str, Any] | None:
        """The server's record of this notebook's kernel (name, execution_state), or None."""
        for session in self.lab.api("GET", "/api/sessions"):
            if session["path"] == self.path and session.get("kernel"):
                return dict(session["kernel"])
        return None

    def kernel_state(self) -> str | None:
        kernel = self.kernel()
        return kernel["execution_state"] if kernel else None

    def wait_idle(self, timeout: float = 180) -> None:
        """Wait until the notebook's toolbar shows its kernel idle."""
        self.wait(f"(panel) => {_IDLE}", "the kernel idle", timeout)

    def menu(self, *labels: str) -> None:
        """Open the menu bar's ``labels[0]`` and click the items after it (``menu("Run", "Run All Cells")``)."""
        self.page.locator(".lm-MenuBar-itemLabel", has_text=labels[0]).first.click()
        for label in labels[1:]:
            item = self.page.locator(".lm-Menu:not(.lm-mod-hidden) .lm-Menu-item", has_text=label).first
            self.wait_visible(item, f"the menu item {label!r}", timeout=20).click()

    def run_all(self, timeout: float = 300) -> None:
        """Run > Run All Cells, then wait until the run has ended (see :meth:`wait_executed`)."""
        self.menu("Run", "Run All Cells")
        self.wait_executed(timeout)

    def wait_executed(self, timeout: float = 300) -> None:
        """Wait until the kernel is idle with no cell queued or running, and either every code cell shows an
        execution count (``[n]:``) or an error stopped the run (Run All leaves the cells after it unrun)."""
        self.wait(
            f"""(panel, arg) => {{
                if (!({_IDLE})) return false;
                const prompts = [...panel.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')]
                    .map(p => p.textContent.trim());
                if (prompts.length === 0 || prompts.some(p => p === '[*]:')) return false;
                const failed = [...panel.querySelectorAll(arg.stderr)].some(o => o.textContent.includes('Traceback'));
                return failed || prompts.every(p => {_COUNTED}.test(p));
            }}""",
            "every cell run (an execution count on each, kernel idle)",
            timeout,
            stderr=_STDERR_OUTPUT,
        )

    def unrun_cells(self) -> list[int]:
        """Indexes of the code cells without an execution count."""
        prompts = self.panel.locator(".jp-CodeCell .jp-InputArea-prompt").all_inner_texts()
        return [i for i, text in enumerate(prompts) if not re.fullmatch(r"\[\d+\]:", text.strip())]

    def prompt(self, index: int) -> str:
        """The input prompt of code cell ``index`` (``[3]:`` once it ran third)."""
        return self.code_cell(index).locator(".jp-InputArea-prompt").inner_text().strip()

    def code_cell(self, index: int) -> Locator:
        return self.panel.locator(".jp-CodeCell").nth(index)

    def run_cell(self, index: int) -> Locator:
        """Put the cursor in code cell ``index`` and press Shift+Enter; the cell's locator."""
        cell = self.code_cell(index)
        cell.locator(".jp-InputArea-editor").click()
        self.page.keyboard.press("Shift+Enter")
        return cell

    def wait_cell_done(self, index: int, timeout: float = 120) -> None:
        """Wait until code cell ``index`` shows an execution count and the kernel is idle."""
        self.wait(
            f"""(panel, arg) => {{
                const cell = panel && panel.querySelectorAll('.jp-CodeCell')[arg.index];
                const prompt = cell && cell.querySelector('.jp-InputArea-prompt');
                return ({_IDLE}) && prompt !== null && {_COUNTED}.test(prompt.textContent.trim());
            }}""",
            f"code cell {index} finished",
            timeout,
            index=index,
        )

    def save(self) -> None:
        """Ctrl+S in command mode, then wait until the file on disk is rewritten and the tab is clean."""
        file = self.lab.root / self.path
        before = file.stat().st_mtime_ns
        self.panel.locator(".jp-InputArea-prompt").first.click()  # focus in the notebook, not in an output
        self.page.keyboard.press("Escape")
        self.page.keyboard.press("Control+s")
        wait_until(lambda: file.stat().st_mtime_ns != before, f"{self.path} written by the save", 30)
        self.wait(
            "() => document.querySelector('.lm-TabBar-tab.lm-mod-current.jp-mod-dirty') === null",
            "saved (the tab still shows unsaved changes)",
            timeout=30,
        )

    def error_outputs(self) -> list[str]:
        """The text of every output that shows a Python error (a traceback rendered as stderr)."""
        texts = self.panel.locator(_STDERR_OUTPUT).all_inner_texts()
        return [text for text in texts if "Traceback" in text or "Error" in text.split("\n", 1)[0]]

    def output_text(self, index: int) -> str:
        """The visible text of code cell ``index``'s outputs (without their prompts), one output a line."""
        return "\n".join(self.code_cell(index).locator(".jp-OutputArea-output").all_inner_texts())

    def saved_book(self) -> dict[str, Any]:
        """The notebook as saved on disk."""
        return dict(json.loads((self.lab.root / self.path).read_text(encoding="utf-8")))


def environment_for_kernels(model_url: str, scratch: Path) -> dict[str, str]:
    """What the kernels of the browser tests need: the loopback model server, a private vault and log folder."""
    return {
        "ANTHROPIC_BASE_URL": model_url,
        "ANTHROPIC_API_KEY": "test-key",
        "ARIES_VAULT": str(scratch / "vault"),
        "ARIES_LOG_DIR": str(scratch / "logs"),
    }
