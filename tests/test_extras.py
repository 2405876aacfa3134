"""The optional parts (the ``console`` and ``mcp`` extras): a command that needs one that is missing says which
extra to install, and exits; the kernel itself imports neither."""

from __future__ import annotations

import subprocess
import sys

import pytest

from aries_kernel import cli
from aries_kernel.extras import EXTRAS, MissingExtraError, require


@pytest.mark.parametrize(("command", "extra"), [(["console"], "console"), (["mcp"], "mcp")])
def test_a_command_without_its_extra_names_the_extra(
    command: list[str], extra: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, EXTRAS[extra], None)  # as if it were not installed
    with pytest.raises(SystemExit) as stopped:
        cli.main(command)
    message = str(stopped.value.code)
    assert f"aries-kernel {command[0]} needs aries-kernel's {extra!r} extra" in message
    assert f"pip install 'aries-kernel[{extra}]'" in message


def test_a_broken_extra_keeps_its_own_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the extra's own absence is reworded: a module it lacks is its own problem, said as it is."""
    import importlib

    def broken(name: str) -> None:
        raise ModuleNotFoundError(
            "No module named 'jupyter_console_dependency'", name="jupyter_console_dependency"
        )

    monkeypatch.setattr(importlib, "import_module", broken)
    with pytest.raises(ModuleNotFoundError) as raised:
        require("console", "aries-kernel console")
    assert not isinstance(raised.value, MissingExtraError)


def test_the_kernel_and_its_body_load_without_either_extra() -> None:
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('mcp', 'jupyter_console'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import aries_kernel.kernel, aries_kernel.agent.loop, aries_kernel.agent.mcp_tools, aries_kernel.magics.aries\n"
        "print('loaded')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, cwd="/")
    assert done.returncode == 0 and done.stdout.strip() == "loaded", done.stderr
