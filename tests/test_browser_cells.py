"""Issue 24 in a real browser: the agent's Repl steps become cells of the live notebook through aries-kernel's
JupyterLab extension, as installed from the wheel (.ci/run builds the wheel, installs it into fresh venvs with
the newest JupyterLab and the oldest the package declares, and runs this file in each: ``ARIES_TEST_WHEEL_ENV``).

A scripted run with three Repl steps inserts three tagged code cells below the prompt cell, with no "file
changed" dialog and the user's cell below untouched; one undo removes the 20 cells of another run at once;
removing the cells of turns 1 on (as a rewind offers) takes the three out in one step, which one undo restores;
the "ask" button of a run's record inserts its steps (and its answer as markdown) too, after a reload of the
page, where the saved agent cells are still marked and, re-run, reproduce the variables. For 20 steps, the time
from the run's record appearing (the run has ended) to its cells appearing is printed, and the time from the
model's last reply (the agent's own end-of-run work included)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from jupyter_core.paths import jupyter_path
from playwright.sync_api import Browser, Page, sync_playwright

from tests.browser_support import (
    CHROMIUM,
    CHROMIUM_ARGS,
    Lab,
    Notebook,
    copy_tracked,
    environment_for_kernels,
    start_lab,
)
from tests.loopback import Reply, ScriptedModelServer, echo_responder

pytestmark = [pytest.mark.browser, pytest.mark.kernel]

REPO = Path(__file__).resolve().parents[1]
BOOK = "notebooks/steps-as-cells.ipynb"
THREE = "set a, b and c"
TWENTY = "set twenty names"
ASKED = "set d"
USER_CELL = "print('c is', c)"  # the user's cell, below the agent's: it reads what they define
AGENT_CELL = ".jp-Cell.aries-agent-cell"
WHERE = "import aries_kernel; print(aries_kernel.__file__)"  # the notebook's last cell: which package runs
WHEEL_ENV = "ARIES_TEST_WHEEL_ENV"
CONSOLE: list[str] = []  # the browser console's messages, every page of the module


class Script:
    """The scripted model: the runs come in the order of ``steps``; each gets its Repl steps in one reply, then
    a closing line, whose time is noted (the run ends right after it). The prompts cannot tell the runs apart:
    each request's notebook context holds every cell of the notebook."""

    steps = {
        THREE: ["a = 1", "b = a + 1", "c = a + b"],
        TWENTY: [f"n{number} = {number}" for number in range(20)],
        ASKED: ["d = 4"],
    }

    def __init__(self) -> None:
        self.runs = list(self.steps)
        self.closed_at: dict[str, float] = {}

    def __call__(self, body: dict[str, Any]) -> Reply:
        if not body.get("tools"):
            return echo_responder(body)
        task = self.runs[0]
        last = body["messages"][-1]
        blocks = last["content"] if isinstance(last["content"], list) else []
        if any(isinstance(block, dict) and block.get("type") == "tool_result" for block in blocks):
            self.closed_at[self.runs.pop(0)] = time.time()
            return Reply(text=f"Done: {task}.")
        return Reply(tool_calls=[("Repl", {"code": code}) for code in self.steps[task]])


@pytest.fixture(scope="module")
def script() -> Script:
    return Script()


@pytest.fixture(scope="module")
def model(script: Script) -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        server.responder = script
        yield server


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = copy_tracked(REPO, tmp_path_factory.mktemp("browser-cells") / "project")
    book = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell("%aries config steps_as_cells=always"),
            nbformat.v4.new_code_cell(f"%aries --yes {THREE}"),
            nbformat.v4.new_code_cell(USER_CELL),
            nbformat.v4.new_code_cell(f"%aries --yes {TWENTY}"),
            nbformat.v4.new_code_cell("%aries config steps_as_cells=ask"),
            nbformat.v4.new_code_cell(f"%aries --yes {ASKED}"),
            nbformat.v4.new_code_cell("%aries cells --remove 1"),
            nbformat.v4.new_code_cell(WHERE),
        ],
        metadata={"kernelspec": {"name": "aries", "display_name": "Aries", "language": "python"}},
    )
    nbformat.write(book, root / BOOK)
    return root


def _load_builder() -> Any:
    """labextension/make_labextension.py, the extension's one build step (setup.py's too)."""
    spec = importlib.util.spec_from_file_location(
        "make_labextension", REPO / "labextension" / "make_labextension.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Installed:
    """The JupyterLab under test: its interpreter (which runs the kernel too), its version, the folder the
    kernel imports aries_kernel from, and the extension's installed bundle."""

    def __init__(self, python: str, bundle: Path) -> None:
        self.python, self.bundle = python, bundle
        found = subprocess.run(
            [
                python,
                "-c",
                "import aries_kernel, jupyterlab; print(aries_kernel.__file__); print(jupyterlab.__version__)",
            ],
            capture_output=True,
            text=True,
            check=True,
            cwd="/",  # not the checkout, which would shadow an installed package
        )
        module, self.version = found.stdout.split()
        self.package = Path(module).parent

    def required_versions(self) -> set[str]:
        """The version ranges the bundle asks of JupyterLab's shared packages (from its remote entry)."""
        load = json.loads((self.bundle / "package.json").read_text())["jupyterlab"]["_build"]["load"]
        return set(re.findall(r'requiredVersion:"([^"]+)"', (self.bundle / load).read_text()))


@pytest.fixture(scope="module")
def installed() -> Installed:
    """The installed wheel's environment where .ci/run names one (``ARIES_TEST_WHEEL_ENV``: a fresh venv with the
    wheel and a JupyterLab, the newest or the oldest the package declares), else this environment, into which the
    extension is built from labextension/ when none is installed (an editable install, a clean clone)."""
    wheel_env = os.environ.get(WHEEL_ENV)
    if wheel_env:
        bundle = Path(wheel_env) / "share" / "jupyter" / "labextensions" / "aries-kernel"
        assert (bundle / "package.json").exists(), (
            f"the wheel installed into {wheel_env} put no labextension there"
        )
        lab = Installed(str(Path(wheel_env) / "bin" / "python"), bundle)
        assert not lab.package.is_relative_to(REPO), f"{wheel_env} imports the checkout, not the wheel"
        print(f"JupyterLab {lab.version}, aries-kernel from the wheel installed at {lab.package}")
        return lab
    shipped = [Path(folder) / "aries-kernel" for folder in jupyter_path("labextensions")]
    bundle = next((folder for folder in shipped if (folder / "package.json").exists()), None)
    if bundle is None:
        # An editable install carries no extension: build it from labextension/ into this environment, as the
        # wheel would install it.
        builder = _load_builder()
        try:
            builder.build()
        except builder.NoNodeError as exc:
            pytest.fail(str(exc))
        bundle = builder.install(Path(sys.prefix))
    return Installed(sys.executable, bundle)


@pytest.fixture(scope="module")
def lab(
    project: Path, model: ScriptedModelServer, installed: Installed, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Lab]:
    home = tmp_path_factory.mktemp("lab-home-cells")
    running = start_lab(project, home, environment_for_kernels(model.anthropic_url, home), installed.python)
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (`apt-get install -y chromium`)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Browser, lab: Lab) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        page.on("console", lambda message: CONSOLE.append(message.text))
        yield page
    finally:
        context.close()
        lab.shut_down_kernels()


def cell_sources(book: Notebook) -> list[str]:
    """The source of each cell in the live notebook, in order, as its editor shows it."""
    return [text.strip() for text in book.panel.locator(".jp-Cell .jp-InputArea-editor").all_inner_texts()]


def watch_agent_cells(book: Notebook, count: int) -> None:
    """Note in the page the wall-clock times (ms) at which a run's record first shows its closing line (the run
    has ended) and at which ``count`` agent cells are first in the notebook."""
    book.page.evaluate(
        """(arg) => {
            window.__ariesEndedAt = null;
            window.__ariesCellsAt = null;
            const check = () => {
                const now = Date.now();
                const footers = [...document.querySelectorAll('.aries-transcript')].filter(
                    node => node.textContent.includes(arg.footer));
                if (window.__ariesEndedAt === null && footers.length > 0) {
                    window.__ariesEndedAt = now;
                }
                if (window.__ariesCellsAt === null && document.querySelectorAll(arg.selector).length >= arg.count) {
                    window.__ariesCellsAt = now;
                }
            };
            new MutationObserver(check).observe(document.body, {subtree: true, childList: true, attributes: true});
        }""",
        {"selector": AGENT_CELL, "count": count, "footer": f"Done: {TWENTY}."},
    )


def test_a_runs_steps_become_tagged_cells_below_its_prompt_and_one_undo_removes_them(
    lab: Lab, page: Page, tmp_path: Path, script: Script, installed: Installed
) -> None:
    book = Notebook(page, lab, BOOK, tmp_path)
    book.open()
    book.run_cell(0)
    book.wait_cell_done(0)

    book.run_cell(1)
    book.wait_cell_done(1)
    book.wait(
        f"() => document.querySelectorAll({AGENT_CELL!r}).length === 3", "three agent cells", timeout=30
    )
    sources = cell_sources(book)
    assert sources[:6] == [
        "%aries config steps_as_cells=always",
        f"%aries --yes {THREE}",
        "a = 1",
        "b = a + 1",
        "c = a + b",
        USER_CELL,
    ]
    assert page.locator(".jp-Dialog").count() == 0  # no "file changed on disk": nothing was written to it
    # The bundle asks for the JupyterLab range package.json declares, which this JupyterLab satisfies: the
    # module federation would warn of an unsatisfied range in the console (and use the host's copy regardless).
    ours = installed.required_versions()
    unsatisfied = [text for text in CONSOLE if "atisf" in text and any(f"{r})" in text for r in ours)]
    assert not unsatisfied and "^4.1.0" in ours, (ours, unsatisfied)
    book.screenshot("three-steps-inserted")

    # Saved, the cells carry their tags; the user's cell is as it was.
    book.save()
    saved = book.saved_book()["cells"]
    tags = [cell["metadata"].get("aries") for cell in saved[2:5]]
    assert [(tag["turn"], tag["step"]) for tag in tags] == [(1, 1), (1, 2), (1, 3)]
    assert "".join(saved[5]["source"]) == USER_CELL and "aries" not in saved[5]["metadata"]

    # Twenty steps: the time from the run's last model reply to the cells in the page.
    watch_agent_cells(book, 23)
    book.run_cell(6)  # the twenty-steps prompt, below the three cells and the user's cell
    book.wait_cell_done(6)
    book.wait("() => window.__ariesCellsAt !== null", "twenty more agent cells", timeout=30)
    ended, appeared = page.evaluate("() => [window.__ariesEndedAt, window.__ariesCellsAt]")
    print(
        f"20 steps: the run's record shown to its cells shown {(appeared - ended) / 1000:.3f} s; the last model "
        f"reply to the cells shown {appeared / 1000 - script.closed_at[TWENTY]:.3f} s"
    )

    # One undo (command mode, z) takes the twenty cells out at once; the three stay.
    book.code_cell(6).locator(".jp-InputArea-prompt").click()
    page.keyboard.press("Escape")
    page.keyboard.press("z")
    book.wait(f"() => document.querySelectorAll({AGENT_CELL!r}).length === 3", "the undo of one insert", 30)
    assert cell_sources(book)[2:7] == ["a = 1", "b = a + 1", "c = a + b", USER_CELL, f"%aries --yes {TWENTY}"]
    book.screenshot("undone")

    # Removing the cells of turns 1 on (as a rewind offers) takes the three out in one step, which undo restores.
    remove = cell_sources(book).index("%aries cells --remove 1")
    book.run_cell(remove)
    book.wait(
        f"() => document.querySelectorAll({AGENT_CELL!r}).length === 0", "the agent's cells removed", 30
    )
    book.wait_idle()
    assert cell_sources(book)[2] == USER_CELL
    book.code_cell(2).locator(".jp-InputArea-prompt").click()
    page.keyboard.press("Escape")
    page.keyboard.press("z")
    book.wait(f"() => document.querySelectorAll({AGENT_CELL!r}).length === 3", "the removal undone", 30)


def test_the_ask_button_of_a_runs_record_inserts_its_steps_after_a_reload(
    lab: Lab, page: Page, tmp_path: Path, installed: Installed
) -> None:
    book = Notebook(page, lab, BOOK, tmp_path)
    book.open()
    prompts = cell_sources(book)
    asked = prompts.index(f"%aries --yes {ASKED}")
    code_index = asked  # every cell of this notebook is a code cell
    book.run_cell(code_index - 1)  # steps_as_cells=ask
    book.wait_cell_done(code_index - 1)
    book.run_cell(code_index)
    book.wait_cell_done(code_index)
    button = book.code_cell(code_index).get_by_role("button", name="Insert steps as cells (1)")
    book.wait_visible(button, "the Insert steps as cells button", timeout=30)
    book.save()
    page.reload()
    book.open()
    # The saved cells of the first test, tagged and marked (the marks come once the notebook's model is ready,
    # which a loaded machine reaches after the first cell shows).
    book.wait(f"() => document.querySelectorAll({AGENT_CELL!r}).length === 3", "three agent cells", timeout=30)
    for index in (2, 3, 4, 5):  # re-run in the fresh kernel, the agent's cells give the user's cell its c
        book.run_cell(index)
        book.wait_cell_done(index)
    assert book.output_text(5).strip() == "c is 3"
    button = book.code_cell(code_index).get_by_role("button", name="Insert steps as cells (1)")
    book.wait_visible(button, "the button again after a reload", timeout=60)
    book.code_cell(code_index).get_by_label("and the answer as a markdown cell").check()
    button.click()
    book.wait(
        "(panel, arg) => [...panel.querySelectorAll('.jp-Cell')].slice(arg.index + 1, arg.index + 3)"
        ".every(cell => cell.classList.contains('aries-agent-cell'))",
        "the step and the answer inserted below the record",
        timeout=30,
        index=code_index,
    )
    assert cell_sources(book)[code_index + 1] == "d = 4"
    answer = book.panel.locator(".jp-Cell").nth(code_index + 2)
    assert "jp-MarkdownCell" in (answer.get_attribute("class") or "")
    # A new markdown cell renders a moment after it is inserted (and only once in view): wait for it.
    answer.scroll_into_view_if_needed()
    rendered = answer.locator(".jp-RenderedMarkdown").get_by_text(f"Done: {ASKED}.")
    book.wait_visible(rendered, "the answer rendered as markdown", timeout=30)
    assert page.locator(".jp-Dialog").count() == 0

    where = cell_sources(book).index(WHERE) - 1  # a code cell's index: the answer above it is markdown
    book.run_cell(where)
    book.wait_cell_done(where)
    assert Path(book.output_text(where).strip()).parent == installed.package, (
        "the kernel runs the package tested"
    )
