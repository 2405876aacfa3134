"""Import edges of the fixture repositories, checked by hand and matched exactly."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from traitlets.config import Config

from aries_kernel.codebase import Codebase, indexer

FIXTURES = Path(__file__).parent / "fixtures" / "codebase"


def build(tmp_path: Path, name: str, **settings: object) -> Codebase:
    root = tmp_path / name
    shutil.copytree(FIXTURES / name, root)
    codebase = Codebase(root, config=Config({"AriesCodebase": settings}))
    codebase.wait_ready()
    return codebase


def import_edges(codebase: Codebase) -> set[tuple[str, str, bool]]:
    frame = codebase.edges("import")
    return {(r.source, r.target, bool(r.type_only)) for r in frame.itertuples()}


PYTHON_EDGES = {
    # package __init__ re-export, and `from . import x`
    ("app/__init__.py", "app/core.py", False),
    ("app/__init__.py", "app/utils.py", False),
    # absolute `from app.models import`, and a relative import of a name re-exported by a subpackage
    ("app/core.py", "app/models.py", False),
    ("app/core.py", "app/helpers/__init__.py", False),
    # `from . import utils`, and an import inside a function body
    ("app/models.py", "app/utils.py", False),
    ("app/models.py", "app/helpers/text.py", False),
    # conditional import under `if TYPE_CHECKING:` (the try/except json import is external: no edge)
    ("app/utils.py", "app/core.py", False),
    ("app/helpers/__init__.py", "app/helpers/text.py", False),
    # `from ..models import User`
    ("app/helpers/text.py", "app/models.py", False),
    # `import app.helpers.text`; `from app import core, VERSION` -> the submodule and the package
    ("app/cli.py", "app/helpers/text.py", False),
    ("app/cli.py", "app/core.py", False),
    ("app/cli.py", "app/__init__.py", False),
    ("main.py", "app/__init__.py", False),
    ("main.py", "app/cli.py", False),
}

TYPESCRIPT_EDGES = {
    ("src/index.ts", "src/app.tsx", False),  # default import, extension resolution
    ("src/index.ts", "src/lib/helpers.ts", False),  # paths "@lib/*"
    ("src/index.ts", "src/config/index.ts", True),  # `import type` through paths "@config"
    ("src/index.ts", "src/shared/version.ts", False),  # baseUrl
    ("src/app.tsx", "src/components/index.ts", False),  # folder index file
    ("src/app.tsx", "src/types.ts", True),  # every specifier `type`-qualified
    ("src/components/index.ts", "src/components/Button.tsx", False),  # export { } from
    ("src/components/index.ts", "src/components/Input.tsx", False),  # export * from
    ("src/components/Button.tsx", "src/types.ts", True),
    ("src/components/Button.tsx", "src/config/index.ts", False),  # type-only and value import: not type-only
    ("src/components/Button.tsx", "src/lib/helpers.ts", False),
    ("src/components/Input.tsx", "src/components/Button.tsx", False),  # "./Button.js" names the .tsx source
    ("src/lib/helpers.ts", "src/lib/util.ts", False),  # dynamic import()
}

JAVASCRIPT_EDGES = {
    ("index.js", "lib/server.js", False),  # require without extension
    ("index.js", "lib/log.js", False),  # require with extension
    ("index.js", "plugins/loader.mjs", False),  # dynamic import()
    ("lib/server.js", "utils/index.js", False),  # require of a folder
    ("plugins/loader.mjs", "lib/log.js", False),  # ESM import
    ("plugins/loader.mjs", "plugins/format.mjs", False),  # export ... from
    ("esm/app.mjs", "lib/server.js", False),
    ("esm/app.mjs", "esm/side-effect.cjs", False),  # side-effect import
    ("esm/side-effect.cjs", "utils/index.js", False),
    ("components/Widget.jsx", "plugins/format.mjs", False),
}


@pytest.mark.parametrize(
    ("name", "expected"),
    [("pyproj", PYTHON_EDGES), ("tsproj", TYPESCRIPT_EDGES), ("jsmix", JAVASCRIPT_EDGES)],
)
def test_import_edges_match_hand_checked_list(tmp_path: Path, name: str, expected: set) -> None:
    codebase = build(tmp_path, name)
    assert import_edges(codebase) == expected


def test_process_pool_gives_the_same_graph(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(indexer, "POOL_MIN_BYTES", 0)
    pooled = build(tmp_path / "pool", "pyproj", workers=2)
    serial = build(tmp_path / "serial", "pyproj", workers=1)
    assert import_edges(pooled) == PYTHON_EDGES
    assert pooled.edges().equals(serial.edges())
    assert pooled.symbol_table().equals(serial.symbol_table())


def test_reference_edges_point_at_definitions(tmp_path: Path) -> None:
    codebase = build(tmp_path, "pyproj")
    refs = codebase.edges("reference")
    pairs = set(zip(refs["source"], refs["target"], strict=False))
    # core.py uses User (models.py) and fmt (helpers/text.py): both defined elsewhere.
    assert ("app/core.py", "app/models.py") in pairs
    assert ("app/core.py", "app/helpers/text.py") in pairs
    assert (refs["weight"] > 0).all()
    assert not (refs["source"] == refs["target"]).any()


def test_tsconfig_extends_and_jsconfig(tmp_path: Path) -> None:
    root = tmp_path / "ext"
    (root / "configs").mkdir(parents=True)
    (root / "configs" / "base.json").write_text(
        '{"compilerOptions": {"baseUrl": "../src", "paths": {"~/*": ["./*"]}}}'
    )
    (root / "tsconfig.json").write_text('{"extends": "./configs/base.json", /* no options of its own */}')
    (root / "src" / "deep").mkdir(parents=True)
    (root / "src" / "deep" / "thing.ts").write_text("export const thing = 1;\n")
    (root / "src" / "main.ts").write_text(
        'import { thing } from "~/deep/thing";\nimport x from "deep/thing";\n'
    )
    (root / "web").mkdir()
    (root / "web" / "jsconfig.json").write_text('{"compilerOptions": {"baseUrl": "."}}')
    (root / "web" / "lib.js").write_text("module.exports = 1;\n")
    (root / "web" / "app.js").write_text('const lib = require("lib");\n')
    codebase = Codebase(root)
    assert import_edges(codebase) == {
        ("src/main.ts", "src/deep/thing.ts", False),  # paths from the extended config, baseUrl relative to it
        ("web/app.js", "web/lib.js", False),  # the nearest jsconfig's baseUrl
    }


def test_broken_tsconfig_is_reported_not_fatal(tmp_path: Path) -> None:
    root = tmp_path / "broken"
    root.mkdir()
    (root / "tsconfig.json").write_text('{"compilerOptions": {"baseUrl": ')
    (root / "a.ts").write_text('import { b } from "./b";\n')
    (root / "b.ts").write_text("export const b = 1;\n")
    codebase = Codebase(root)
    assert import_edges(codebase) == {("a.ts", "b.ts", False)}
    assert codebase.skipped()["file"].tolist() == ["tsconfig.json"]
    assert "tsconfig not parsed" in codebase.skipped()["reason"][0]
