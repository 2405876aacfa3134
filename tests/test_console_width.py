"""In a real jupyter console (``aries-kernel console``) on a terminal, DataFrames use the terminal's width and follow a resize."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pexpect  # IPython's own dependency on POSIX

from tests.kernel_harness import JUPYTER_DATA, start_kernel, stop_kernel  # noqa: F401  (JUPYTER_DATA: the test kernelspec)

ARIES_CLI = str(Path(sys.executable).with_name("aries-kernel"))
# 14 columns of 10 characters and a space, about 155 characters wide: pandas wraps it at its default width (80)
FRAME = "pd.DataFrame({f'column_{i:02d}': [i * 1000] for i in range(14)})"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _cell(console: pexpect.spawn, code: str, number: int) -> list[str]:
    """Type ``code`` at the ``In [number]`` prompt (already shown) and return the lines printed until the next."""
    console.sendline(code)
    console.expect_exact(f"In [{number + 1}]:")
    text = _ANSI.sub("", console.before)
    return [line.rstrip() for line in text.replace("\r", "").split("\n")]


def test_dataframes_use_the_terminal_width(small_repo: Path, tmp_path: Path) -> None:
    env = dict(os.environ, ARIES_VAULT=str(tmp_path / "vault"), ARIES_LOG_DIR=str(tmp_path / "logs"))
    env.pop("COLUMNS", None)  # the width must come from the terminal itself
    console = pexpect.spawn(
        ARIES_CLI,  # `aries-kernel console`: jupyter console that waits for IOPub before the first cell
        ["console", "--simple-prompt"],
        cwd=str(small_repo),
        env=env,
        dimensions=(40, 200),
        encoding="utf-8",
        timeout=120,  # a cell takes well under a second; the bound only keeps a hang from stalling the suite
    )
    try:
        console.expect_exact("In [1]:")
        wide = _cell(console, f"import pandas as pd; {FRAME}", 1)
        header = [line for line in wide if "column_00" in line]
        assert len(header) == 1 and "column_13" in header[0], wide
        assert not any(line.endswith("\\") for line in wide), wide  # pandas' mark of a wrapped frame
        console.setwinsize(40, 100)
        narrow = _cell(console, FRAME, 2)
        assert max(len(line) for line in narrow) <= 100, narrow
        assert not any("column_00" in line and "column_13" in line for line in narrow), narrow
        assert any(line.endswith("\\") for line in narrow), narrow
        # A frontend that renders widgets (JupyterLab) shows HTML: its text width is left as the user set it.
        _cell(
            console, "get_ipython().kernel.frontend_has_widgets = True; pd.set_option('display.width', 60)", 3
        )
        lab = _cell(console, FRAME, 4)
        assert max(len(line) for line in lab if "column_" in line) < 80, lab  # not the terminal's 100
    finally:
        console.sendline("exit")
        console.expect(pexpect.EOF)
        console.close()


def test_the_console_tells_a_kernel_without_a_terminal_its_width(small_repo: Path, tmp_path: Path) -> None:
    # A module path of 49 characters makes codebase.top_files(5) 107 characters wide: whole at 200, cut at 100.
    long_module = "formatting_of_the_long_report_rows"
    (small_repo / "app" / "helpers" / f"{long_module}.py").write_text("def width():\n    return 200\n")
    for name in ("core", "cli", "models", "utils"):
        path = small_repo / "app" / f"{name}.py"
        path.write_text(f"from app.helpers.{long_module} import width\n" + path.read_text())
    # The kernel is started apart, its stdout a pipe: only the console can say how wide its terminal is.
    km, kc = start_kernel(small_repo, env={"COLUMNS": ""})  # "": no width from the environment either
    env = dict(os.environ, ARIES_VAULT=str(tmp_path / "vault"), ARIES_LOG_DIR=str(tmp_path / "logs"))
    env.pop("COLUMNS", None)
    console = pexpect.spawn(
        ARIES_CLI,
        ["console", "--simple-prompt", "--existing", km.connection_file],
        cwd=str(small_repo),
        env=env,
        dimensions=(40, 200),
        encoding="utf-8",
        timeout=120,  # indexing the fixture takes seconds; the bound only keeps a hang from stalling the suite
    )
    try:
        console.expect_exact("In [1]:")
        # pandas' own choice when it is imported outside a cell (the kernel's warm-up thread imports it): fit
        # the frame to shutil.get_terminal_size(), which in a kernel read 80 whatever the terminal.
        _cell(console, "import pandas as pd, shutil; pd.set_option('display.max_columns', 0)", 1)
        wide = _cell(console, "codebase.top_files(5)", 2)
        header = [line for line in wide if line.lstrip().startswith("file")]
        assert len(header) == 1 and header[0].split() == [
            "file",
            "role",
            "pagerank",
            "in_degree",
            "out_degree",
            "symbols",
            "loc",
        ], wide
        assert any(f"app/helpers/{long_module}.py" in line for line in wide), wide
        assert not any("[5 rows x 7 columns]" in line for line in wide), wide
        console.setwinsize(40, 100)
        narrow = _cell(console, "print(shutil.get_terminal_size().columns); codebase.top_files(5)", 3)
        assert "100" in narrow, narrow
        assert max(len(line) for line in narrow) <= 100, narrow
        assert any("..." in line for line in narrow if line.lstrip().startswith("file")), narrow
        assert any("[5 rows x 7 columns]" in line for line in narrow), narrow
    finally:
        console.sendline("exit")
        console.expect(pexpect.EOF)
        console.close()
        stop_kernel(km, kc)
