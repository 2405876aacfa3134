"""Aries settings from the Jupyter config files that the kernel process does not read by itself.

ipykernel reads ``ipython_kernel_config.py`` only from the IPython profile and the working directory, while the
README, like Jupyter's own convention, also names ``jupyter_config.py`` and the Jupyter config folders
(``~/.jupyter``, ``<env>/etc/jupyter``, ``/etc/jupyter``: ``jupyter --paths``). :func:`merge_config_files`
reads ``jupyter_config`` and ``ipython_kernel_config`` (``.json`` and ``.py``) from each of those folders and
adds their ``Aries*`` sections to the shell's config *under* what it already holds: a setting the kernel read
itself, or one set at run time, wins. A file that fails to load is logged and skipped; the kernel starts.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

__all__ = ["config_files", "merge_config_files"]

log = logging.getLogger(__name__)

_NAMES = ("jupyter_config", "ipython_kernel_config")


def config_files() -> list[Path]:
    """The Jupyter config files that exist, lowest priority first (system, environment, then the user's)."""
    from jupyter_core.paths import jupyter_config_path

    found = []
    for folder in reversed(jupyter_config_path()):  # jupyter_config_path lists the highest priority first
        for name in _NAMES:
            for suffix in (".json", ".py"):  # as traitlets does: the .py file over the .json one
                path = Path(folder) / f"{name}{suffix}"
                if path.is_file():
                    found.append(path)
    return found


def merge_config_files(config: Any) -> list[Path]:
    """Add the ``Aries*`` settings of :func:`config_files` to ``config`` where it has none; the files read."""
    from traitlets.config import Config
    from traitlets.config.loader import JSONFileConfigLoader, PyFileConfigLoader

    merged = Config()
    read = []
    for path in config_files():
        loader_class = PyFileConfigLoader if path.suffix == ".py" else JSONFileConfigLoader
        try:
            merged.merge(loader_class(path.name, str(path.parent)).load_config())
        except Exception as exc:  # a broken user file must not stop the kernel; say which and why
            log.warning("Could not read %s for Aries settings: %s: %s", path, type(exc).__name__, exc)
            continue
        read.append(path)
    for section, values in merged.items():
        if not (section.startswith("Aries") and isinstance(values, Config)):
            continue
        target = config[section]
        for key, value in values.items():
            if key not in target:
                target[key] = value
    return read
