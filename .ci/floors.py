"""Print ``name==X.Y.*`` for each package named on the command line, X.Y being its ``>=`` floor in
pyproject.toml (the dependencies and the test extra): the oldest releases .ci/run tests the kernel on."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]
floors = {}
for requirement in [*project["dependencies"], *project["optional-dependencies"]["test"]]:
    match = re.fullmatch(r"([A-Za-z0-9_.-]+)>=([0-9.]+)(,.*)?", requirement.strip())
    if match:
        floors[match.group(1).lower()] = match.group(2)
missing = [name for name in sys.argv[1:] if name.lower() not in floors]
if missing:
    sys.exit(f"pyproject.toml declares no >= floor for {', '.join(missing)}")
# A floor of one number (">=8") is that major's first minor release: "8.0.*", not "8.*" (any 8.x, the newest).
print(" ".join(f"{name}=={'.'.join((floors[name.lower()].split('.') + ['0'])[:2])}.*" for name in sys.argv[1:]))
