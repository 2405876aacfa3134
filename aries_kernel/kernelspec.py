"""Install and remove the ``aries`` kernelspec (``aries-kernel install [--user | --sys-prefix | --prefix DIR]``)."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from importlib import resources
from pathlib import Path

from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

__all__ = ["KERNEL_NAME", "install_kernelspec", "uninstall_kernelspec", "write_kernelspec"]

KERNEL_NAME = "aries"


def write_kernelspec(destination: Path, python: str = sys.executable) -> Path:
    """Write kernel.json and the logos into ``destination``, launching the kernel with ``python``."""
    source = resources.files("aries_kernel.kernelspec_data") / KERNEL_NAME
    destination.mkdir(parents=True, exist_ok=True)
    for item in source.iterdir():
        if item.name.endswith(".png") or item.name.endswith(".svg"):
            (destination / item.name).write_bytes(item.read_bytes())
    spec = json.loads((source / "kernel.json").read_text(encoding="utf-8"))
    # The shipped file says "python"; an installed spec must name this environment's interpreter exactly.
    spec["argv"][0] = python
    (destination / "kernel.json").write_text(json.dumps(spec, indent=2) + "\n", encoding="utf-8")
    return destination


def install_kernelspec(user: bool = False, prefix: str | None = None, name: str = KERNEL_NAME) -> str:
    """Install the kernelspec for the user, into ``prefix`` (``sys.prefix`` for --sys-prefix), or system-wide.

    Returns the directory it was installed in.
    """
    with tempfile.TemporaryDirectory() as tmp:
        staged = write_kernelspec(Path(tmp) / name)
        return KernelSpecManager().install_kernel_spec(str(staged), name, user=user, prefix=prefix)


def uninstall_kernelspec(name: str = KERNEL_NAME) -> str:
    """Remove the installed kernelspec ``name``; returns the directory removed. Raises KeyError if absent."""
    manager = KernelSpecManager()
    try:
        path = manager.get_kernel_spec(name).resource_dir
    except NoSuchKernel as exc:
        raise KeyError(f"No kernelspec named {name!r} is installed (see `jupyter kernelspec list`).") from exc
    shutil.rmtree(path)
    return path
