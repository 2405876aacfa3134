"""Issue 9 in a real browser: JupyterLab 4 and Debian's Chromium, driven by Playwright as a person would.

The keyless notebooks are opened from their own folder and run all; ``%aries`` runs against the loopback model
server with Approve, Deny and Stop clicked in its panel; the saved notebook shows its runs again after a reload
with a fresh kernel. Each step leaves a screenshot in the test's output folder (printed at the start).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbconvert import HTMLExporter
from playwright.sync_api import Browser, Page, sync_playwright

from tests.browser_support import (
    CHROMIUM,
    CHROMIUM_ARGS,
    Lab,
    Notebook,
    copy_tracked,
    environment_for_kernels,
    start_lab,
    wait_until,
)
from tests.loopback import Reply, ScriptedModelServer, echo_responder

pytestmark = [pytest.mark.browser, pytest.mark.kernel]

REPO = Path(__file__).resolve().parents[1]
KEYLESS = ["01-quick-start.ipynb", "02-codebase-tour.ipynb", "03-memory-walkthrough.ipynb"]
AGENT_NOTEBOOK = "notebooks/agent-in-the-browser.ipynb"

# The three agent runs, told apart by their prompts; the model's side of each is scripted in `_respond`.
APPROVE = "set VALUE to 2 in sandbox/approve.txt"
DENY = "set VALUE to 3 in sandbox/deny.txt"
SLOW = "think about this slowly"
APPROVED_REPLY = "Set VALUE to 2 as asked."
DENIED_REPLY = "Understood, sandbox/deny.txt stays as it is."
SLOW_SECONDS = (
    120.0  # far longer than the test takes to click Stop; the run must end by Stop, not by the reply
)
ORIGINAL = "VALUE = 1\n"
# Issue 28: a Repl step that prints five ticks, says so with a file in the kernel's folder, then sleeps.
TICK = "print five ticks, then wait"
TICKING = (
    "import time\nfor i in range(5): print(f'tick {i}')\nopen('ticked', 'w').close()\n"
    "for _ in range(600): time.sleep(0.1)"
)
# Issue 23: a notebook whose cell raises, then `%aries fix`; a secret sits in another variable.
FIX_NOTEBOOK = "notebooks/fix-in-the-browser.ipynb"
SECRET = "sk-ant-api03-" + "Q7" * 24
FIX_CELLS = [
    "import pandas as pd\nsales = pd.DataFrame({'region': ['north', 'south'], 'revenue_q2': [10.5, 7.25]})",
    f"anthropic_key = {SECRET!r}",
    "sales['revenue_q3'].sum()",
    "%aries fix",
]
FIX_REPLY = "The frame has revenue_q2, not revenue_q3."
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content or [] if isinstance(block, dict))


def _tool_results(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    blocks = content if isinstance(content, list) else []
    return [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]


def _respond(body: dict[str, Any]) -> Reply:
    """The scripted model: an Edit for each edit prompt, a closing line once its result comes back, and a
    reply that takes ``SLOW_SECONDS`` to start for the slow prompt. Other calls (no tools: memory, summaries)
    get the loopback's echo, so they cannot take a reply meant for the agent."""
    if not body.get("tools"):
        return echo_responder(body)
    messages = body["messages"]
    answered = bool(_tool_results(messages[-1]))
    prompt = next((_text(m) for m in reversed(messages) if m["role"] == "user" and _text(m)), "")
    # The prompt message opens with the notebook's context, which quotes the notebook's other cells (the other
    # prompts among them): what the user asked is what follows it.
    prompt = prompt.rpartition("</notebook_context>")[2]
    if prompt.lstrip().startswith("Fix the error"):
        return Reply(text=FIX_REPLY)
    if SLOW in prompt:
        return Reply(text="Too late.", delay=SLOW_SECONDS)
    if TICK in prompt:
        return Reply(text="Ticked.") if answered else Reply(tool_calls=[("Repl", {"code": TICKING})])
    for task, path, new, closing in (
        (APPROVE, "sandbox/approve.txt", "VALUE = 2", APPROVED_REPLY),
        (DENY, "sandbox/deny.txt", "VALUE = 3", DENIED_REPLY),
    ):
        if task in prompt:
            if answered:
                return Reply(text=closing)
            return Reply(
                tool_calls=[("Edit", {"file_path": path, "old_string": "VALUE = 1", "new_string": new})]
            )
    return echo_responder(body)


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        server.responder = _respond
        yield server


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of this repository (its tracked files, in a fresh git repository), with two files for the agent
    to edit and a notebook of agent runs in notebooks/."""
    root = copy_tracked(REPO, tmp_path_factory.mktemp("browser") / "project")
    (root / "sandbox").mkdir()
    for name in ("approve.txt", "deny.txt"):
        (root / "sandbox" / name).write_text(ORIGINAL)
    book = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(f"%aries {prompt}") for prompt in (APPROVE, DENY, SLOW)]
        + [nbformat.v4.new_code_cell(source) for source in ("1+1", f"%aries --yes {TICK}")]
        + [nbformat.v4.new_code_cell(f"%aries {line}") for line in ("checkpoints", "model")],
        metadata={"kernelspec": {"name": "aries", "display_name": "Aries", "language": "python"}},
    )
    nbformat.write(book, root / AGENT_NOTEBOOK)
    fix = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(source) for source in FIX_CELLS],
        metadata={"kernelspec": {"name": "aries", "display_name": "Aries", "language": "python"}},
    )
    nbformat.write(fix, root / FIX_NOTEBOOK)
    return root


@pytest.fixture(scope="module")
def lab(project: Path, model: ScriptedModelServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    home = tmp_path_factory.mktemp("lab-home")
    running = start_lab(project, home, environment_for_kernels(model.anthropic_url, home))
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail(
            f"{CHROMIUM} is missing: install Debian's chromium (`apt-get install -y chromium`; .ci/run does)"
        )
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("screenshots")
    print(f"browser screenshots: {folder}")
    return folder


@pytest.fixture
def page(browser: Browser, lab: Lab) -> Iterator[Page]:
    """A fresh browser context and page; afterwards the notebooks' kernels are shut down (2 cores)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        yield context.new_page()
    finally:
        context.close()
        lab.shut_down_kernels()


@pytest.mark.parametrize("name", KEYLESS)
def test_a_keyless_notebook_runs_all_from_its_own_folder(
    name: str, lab: Lab, page: Page, shots: Path
) -> None:
    book = Notebook(page, lab, f"notebooks/{name}", shots)
    book.open()
    assert (book.kernel() or {}).get("name") == "aries"
    book.screenshot("opened")
    book.run_all()
    book.screenshot("ran")
    assert not book.error_outputs(), book.error_outputs()
    assert not book.unrun_cells(), f"code cells not run: {book.unrun_cells()}"
    # Started in notebooks/, the kernel found the repository root: its index is there, not in notebooks/.
    assert (lab.root / ".aries" / "index.db").exists() and not (lab.root / "notebooks" / ".aries").exists()
    table = book.panel.locator("table.dataframe").first
    book.wait_visible(table, "a rendered DataFrame table", timeout=10)
    table.scroll_into_view_if_needed()
    book.screenshot("table")
    book.save()
    saved = book.saved_book()
    errors = [o for c in saved["cells"] for o in c.get("outputs", []) if o["output_type"] == "error"]
    assert not errors, errors
    assert all(c["execution_count"] for c in saved["cells"] if c["cell_type"] == "code")


def test_agent_runs_are_approved_denied_stopped_and_kept_after_a_reload(
    lab: Lab, page: Page, shots: Path, model: ScriptedModelServer, project: Path
) -> None:
    book = Notebook(page, lab, AGENT_NOTEBOOK, shots)
    book.open()

    # Approve: the Edit card asks with its diff in view; after the click the file has changed.
    cell = book.run_cell(0)
    approve = book.wait_visible(
        cell.get_by_role("button", name="Approve", exact=True), "the Approve button of the Edit call"
    )
    book.wait_visible(cell.get_by_role("button", name="Deny", exact=True), "the Deny button", timeout=5)
    book.wait_visible(
        cell.get_by_role("button", name="Allow for this run", exact=True), "the Allow for this run button", 5
    )
    book.wait_visible(cell.get_by_text("+VALUE = 2").first, "the Edit's diff while it waits", timeout=5)
    book.screenshot("approval-asked")
    approve.click()
    book.wait_cell_done(0)
    assert (project / "sandbox" / "approve.txt").read_text() == "VALUE = 2\n"
    book.wait_visible(cell.get_by_text(APPROVED_REPLY).first, "the model's closing reply", timeout=10)
    book.screenshot("approved")
    # Rewind, from the bar below the record: what it did joins the record, which the saved notebook keeps.
    rewind = cell.get_by_role("button", name="Rewind turn 1")
    book.wait_visible(rewind, "the Rewind button of the approved run", timeout=10).click()
    book.wait_visible(cell.get_by_text("Rewound to before turn 1").first, "the rewind's result", timeout=30)
    assert (project / "sandbox" / "approve.txt").read_text() == ORIGINAL
    book.screenshot("rewound")

    # Deny: the file stays as it was and the model hears no.
    cell = book.run_cell(1)
    deny = book.wait_visible(cell.get_by_role("button", name="Deny", exact=True), "the Deny button")
    book.screenshot("deny-asked")
    deny.click()
    book.wait_cell_done(1)
    assert (project / "sandbox" / "deny.txt").read_text() == ORIGINAL
    answers = [
        result
        for request in model.requests
        if request.body.get("tools") and DENY in json.dumps(request.body["messages"])
        for result in _tool_results(request.body["messages"][-1])
    ]
    assert answers and answers[-1].get("is_error"), answers  # the model was told the call was refused
    book.wait_visible(cell.get_by_text(DENIED_REPLY).first, "the model's reply to the denial", timeout=10)
    book.screenshot("denied")

    # Stop while the model has not answered: the run ends as interrupted, the kernel lives on.
    cell = book.run_cell(2)
    wait_until(
        lambda: any(SLOW in _text(r.body["messages"][-1]) for r in model.requests if r.body.get("tools")),
        "the slow prompt's request at the model server",
    )
    # Not exact: the button's name starts with its icon's glyph.
    stop = book.wait_visible(cell.get_by_role("button", name="Stop"), "the Stop button", timeout=30)
    book.screenshot("waiting")
    stop.click()
    book.wait_cell_done(2, timeout=60)
    assert "interrupted" in book.output_text(2).lower()
    book.screenshot("stopped")
    book.run_cell(3)
    book.wait_cell_done(3, timeout=60)
    assert book.output_text(3).strip() == "2"
    assert book.prompt(3) == "[4]:", "the kernel was restarted, not interrupted"

    # Stop in the middle of a Repl step: its card keeps what the step printed before it stopped.
    ticked = project / "notebooks" / "ticked"  # the kernel runs in the notebook's folder
    cell = book.run_cell(4)
    wait_until(ticked.exists, "the Repl step's ticks printed")
    book.wait_visible(cell.get_by_role("button", name="Stop"), "the Stop button", timeout=30).click()
    book.wait_cell_done(4, timeout=60)
    book.wait_visible(cell.get_by_text("tick 4").first, "the stopped card's output", timeout=10)
    assert "Repl interrupted" in book.output_text(4), book.output_text(4)
    book.screenshot("stopped-mid-step")

    # %aries checkpoints: integer turns, blank for the rewind, no pandas index beside the checkpoint number.
    cell = book.run_cell(5)
    book.wait_cell_done(5)
    table = book.wait_visible(cell.locator("table").first, "the checkpoints table", timeout=10)
    listed = book.output_text(5)
    assert "NaN" not in listed and "rewind" in listed, listed
    assert table.locator("tbody th").count() == 0, "no index column"
    turns = table.locator("tbody tr td:nth-child(2)").all_inner_texts()
    assert turns and all(turn.strip().isdigit() or not turn.strip() for turn in turns), turns
    table.scroll_into_view_if_needed()
    book.screenshot("checkpoints")

    # %aries model fits the notebook: no output wider than its area, no model name broken over lines.
    cell = book.run_cell(6)
    book.wait_cell_done(6)
    slots = book.wait_visible(cell.locator(".aries-slots").first, "the model slots", timeout=10)
    fit = slots.evaluate(
        """(list) => {
            const area = list.closest('.jp-OutputArea-output').getBoundingClientRect();
            const fields = [...list.querySelectorAll('span[style*="nowrap"]')];
            return {
                overflow: list.scrollWidth - list.clientWidth,
                outside: fields.filter(f => f.getBoundingClientRect().right > area.right + 1).length,
                broken: fields.filter(f => f.getClientRects().length > 1 || f.offsetHeight > 30).length,
                fields: fields.length,
            };
        }"""
    )
    assert fit["fields"] >= 16 and fit["overflow"] <= 0 and not fit["outside"] and not fit["broken"], fit
    slots.scroll_into_view_if_needed()
    book.screenshot("model-slots")

    # Saved, the kernel gone, the page reloaded: each run is still there as its static record.
    book.save()
    saved = book.saved_book()["cells"]
    html = ["".join(o.get("data", {}).get("text/html", "")) for o in saved[0]["outputs"] if "data" in o]
    assert any(APPROVED_REPLY in part and "VALUE = 2" in part for part in html), saved[0]["outputs"]
    assert any("Rewound to before turn 1" in part for part in html), "the rewind's result is saved"
    # The first run's Rewind bar stepped aside when the next cell ran: no widget view is saved anywhere.
    widget_views = [
        o for c in saved for o in c.get("outputs", []) if WIDGET_VIEW in o.get("data", {})
    ]
    assert not widget_views, widget_views
    lab.shut_down_kernels()
    book.open()
    cell = book.code_cell(0)
    book.wait_visible(cell.get_by_text(APPROVED_REPLY).first, "the transcript after the reload", timeout=30)
    book.wait_visible(cell.get_by_text("-VALUE = 1").first, "the diff after the reload", timeout=5)
    book.wait_visible(cell.get_by_text("+VALUE = 2").first, "the diff after the reload", timeout=5)
    assert "interrupted" in book.output_text(2).lower()
    # A widget view with no model behind it is what shows "Error displaying widget"; the record has none.
    views = book.panel.locator(f'.jp-OutputArea-output[data-mime-type="{WIDGET_VIEW}"]')
    assert views.count() == 0
    shown = book.panel.inner_text()
    assert "Error displaying widget" not in shown and "Loading widget" not in shown
    book.wait_visible(cell.get_by_text("Rewound to before turn 1").first, "the rewind after the reload", 5)
    book.wait_visible(book.code_cell(4).get_by_text("tick 4").first, "the stopped card's output", timeout=5)
    book.screenshot("reloaded")
    book.code_cell(2).scroll_into_view_if_needed()
    book.screenshot("reloaded-stopped-run")

    # nbconvert's HTML (its lab template sets pre in a proportional font): the record's code is monospace.
    exported, _ = HTMLExporter().from_notebook_node(nbformat.read(project / AGENT_NOTEBOOK, as_version=4))
    (shots / "agent-runs.html").write_text(exported)
    viewer = page.context.new_page()
    viewer.goto((shots / "agent-runs.html").as_uri())
    fonts = viewer.locator(".aries-transcript pre").evaluate_all(
        "(blocks) => blocks.map(b => getComputedStyle(b).fontFamily)"
    )
    assert fonts and all("mono" in font.lower() for font in fonts), fonts
    viewer.screenshot(path=str(shots / "agent-runs-nbconvert.png"), full_page=True)


def test_aries_fix_sends_the_failing_cell_its_traceback_and_the_frame_but_no_secret(
    lab: Lab, page: Page, shots: Path, model: ScriptedModelServer
) -> None:
    book = Notebook(page, lab, FIX_NOTEBOOK, shots)
    book.open()
    for index in range(3):
        book.run_cell(index)
        book.wait_cell_done(index)
    assert any("KeyError" in text for text in book.error_outputs())
    model.reset_counts()
    book.run_cell(3)
    book.wait_cell_done(3)
    book.wait_visible(book.panel.get_by_text(FIX_REPLY).first, "the model's answer on the panel")
    book.screenshot("fixed")
    (request,) = [r for r in model.requests if r.body.get("tools")]
    sent = json.dumps(request.body)
    assert "Fix the error that In[3]" in sent  # the failing cell by its execution count...
    assert "sales['revenue_q3'].sum()" in sent and "KeyError" in sent  # ...its code and its traceback
    assert "revenue_q2" in sent and "region" in sent  # the DataFrame's columns, from the live kernel
    assert SECRET not in sent and SECRET[-12:] not in sent  # the key in another variable stays out
