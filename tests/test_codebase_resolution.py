"""Resolution and definition gaps closed by each language's own rules, on small repositories built here: TypeScript's
extension substitution and ``.d.ts`` files, package.json ``imports``, ``exports`` self-reference and folder
packages, Python's plain folders and ``__future__``, member names as code refers to them, local classes, and
TypeScript syntax newer than the grammar."""

from __future__ import annotations

import json
from pathlib import Path

from aries_kernel.codebase import Codebase
from aries_kernel.codebase.extract import extract_source


def make(tmp_path: Path, files: dict[str, str]) -> Codebase:
    root = tmp_path / "repo"
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    codebase = Codebase(root)
    codebase.wait_ready()
    return codebase


def import_edges(codebase: Codebase) -> set[tuple[str, str, bool]]:
    frame = codebase.edges("import")
    return {(r.source, r.target, bool(r.type_only)) for r in frame.itertuples()}


def test_typescript_resolves_js_specifiers_to_sources_and_declarations(tmp_path: Path) -> None:
    codebase = make(
        tmp_path,
        {
            "src/index.ts": (
                'import a from "./only-dts.js";\n'  # only only-dts.d.ts exists
                'import b from "./types";\n'  # types.d.ts
                'import c from "./both.js";\n'  # both.js and both.d.ts: TypeScript reads the declarations
                'import d from "./esm.mjs";\n'  # esm.d.mts
                'import e from "./common.cjs";\n'  # common.d.cts
                'import f from "./source.js";\n'  # source.ts and its emitted source.js: the .ts
                'import g from "./decls";\n'  # decls/index.d.ts
                'import h from "./view.jsx";\n'  # view.tsx
            ),
            "src/only-dts.d.ts": "export declare const a: number;\n",
            "src/types.d.ts": "export type T = 1;\n",
            "src/both.js": "export const c = 1;\n",
            "src/both.d.ts": "export declare const c: number;\n",
            "src/esm.d.mts": "export declare const d: number;\n",
            "src/common.d.cts": "export declare const e: number;\n",
            "src/source.ts": "export const f = 1;\n",
            "src/source.js": "export const f = 1;\n",
            "src/decls/index.d.ts": "export declare const g: number;\n",
            "src/view.tsx": "export const h = 1;\n",
            # A JavaScript importer loads the file it names, and takes JavaScript first for a bare path.
            "src/run.js": 'import c from "./both.js";\nconst f = require("./source");\n',
        },
    )
    assert import_edges(codebase) == {
        ("src/index.ts", "src/only-dts.d.ts", False),
        ("src/index.ts", "src/types.d.ts", False),
        ("src/index.ts", "src/both.d.ts", False),
        ("src/index.ts", "src/esm.d.mts", False),
        ("src/index.ts", "src/common.d.cts", False),
        ("src/index.ts", "src/source.ts", False),
        ("src/index.ts", "src/decls/index.d.ts", False),
        ("src/index.ts", "src/view.tsx", False),
        ("src/run.js", "src/both.js", False),
        ("src/run.js", "src/source.js", False),
    }


def test_package_json_imports_subpaths(tmp_path: Path) -> None:
    imports = {
        "#client": "./src/client/types.d.ts",
        "#compiler": {"types": "./src/compiler/private.d.ts", "default": "./src/compiler/index.js"},
        "#shared/*": "./src/shared/*.js",
        "#shared/internal/*": None,  # excluded, though the file exists
        "#cond": {
            "node": {"import": "./src/node.js", "require": "./src/node.cjs"},
            "default": "./src/web.js",
        },
        "#built": {"import": "./dist/built.js", "default": "./src/built-src.js"},  # dist/ is not in the repo
        "#ts/*": "./src/ts/*",
        "#ext": "some-external-package",
    }
    codebase = make(
        tmp_path,
        {
            "package.json": json.dumps({"name": "pkg", "type": "module", "imports": imports}),
            "src/main.js": (
                'import { b } from "#compiler";\n'
                'import { u } from "#shared/util";\n'
                'import "#shared/internal/secret";\n'
                'import n from "#cond";\n'
                'import m from "#built";\n'
                'import "#ext";\n'
                'import "#missing";\n'
            ),
            "src/main.ts": (
                'import type { X } from "#compiler";\nimport type { C } from "#client";\nimport { t } from "#ts/thing.js";\n'
            ),
            "src/client/types.d.ts": "export type C = 1;\n",
            "src/compiler/private.d.ts": "export type X = 1;\n",
            "src/compiler/index.js": "export const b = 1;\n",
            "src/shared/util.js": "export const u = 1;\n",
            "src/shared/internal/secret.js": "export {};\n",
            "src/node.js": "export default 1;\n",
            "src/node.cjs": "module.exports = 1;\n",
            "src/web.js": "export default 1;\n",
            "src/built-src.js": "export default 1;\n",
            "src/ts/thing.ts": "export const t = 1;\n",
            # A nested package answers its own `#` names (svelte's layout: packages/*/package.json).
            "packages/inner/package.json": json.dumps(
                {"name": "inner", "imports": {"#client": "./client.js"}}
            ),
            "packages/inner/a.js": 'import "#client";\n',
            "packages/inner/client.js": "export {};\n",
        },
    )
    assert import_edges(codebase) == {
        ("src/main.js", "src/compiler/index.js", False),  # "types" is TypeScript's condition only
        ("src/main.js", "src/shared/util.js", False),
        ("src/main.js", "src/node.js", False),  # nested conditions, in their written order
        ("src/main.js", "src/built-src.js", False),  # the built target is not indexed: the next condition
        ("src/main.ts", "src/compiler/private.d.ts", True),
        ("src/main.ts", "src/client/types.d.ts", True),
        ("src/main.ts", "src/ts/thing.ts", False),  # pattern target, then extension substitution
        ("packages/inner/a.js", "packages/inner/client.js", False),
    }


def test_package_self_reference_through_exports(tmp_path: Path) -> None:
    exports = {
        ".": {"types": "./dist/index.d.ts", "import": "./src/index.js"},
        "./sub": "./src/sub.js",
        "./feature/*": {"import": "./src/features/*.js", "types": "./src/features/*.d.ts"},
        "./feature/private/*": None,
        "./package.json": "./package.json",
    }
    codebase = make(
        tmp_path,
        {
            "packages/my-pkg/package.json": json.dumps({"name": "@scope/my-pkg", "exports": exports}),
            "packages/my-pkg/src/index.js": "export const x = 1;\n",
            "packages/my-pkg/src/sub.js": "export const s = 1;\n",
            "packages/my-pkg/src/features/a.js": "export const a = 1;\n",
            "packages/my-pkg/src/features/a.d.ts": "export declare const a: number;\n",
            "packages/my-pkg/src/features/private/b.js": "export {};\n",
            "packages/my-pkg/test/a.test.js": (
                'import x from "@scope/my-pkg";\n'
                'import s from "@scope/my-pkg/sub";\n'
                'import { a } from "@scope/my-pkg/feature/a";\n'
                'import "@scope/my-pkg/feature/private/b";\n'
                'import "@scope/my-pkg/not-exported";\n'
                'import "@scope/other";\n'
            ),
            # TypeScript: "import" comes first in the object; its .js target has declarations beside it.
            "packages/my-pkg/test/b.test.ts": 'import { a } from "@scope/my-pkg/feature/a";\n',
            # `exports` as a string is the "." entry; without `exports` a package cannot name itself.
            "packages/solo/package.json": json.dumps({"name": "solo", "exports": "./main.js"}),
            "packages/solo/main.js": 'import "solo";\nimport "solo/main.js";\n',
            "packages/solo/other.js": 'import "solo";\n',
            "packages/noexp/package.json": json.dumps({"name": "noexp", "main": "./main.js"}),
            "packages/noexp/main.js": "export {};\n",
            "packages/noexp/use.js": 'import "noexp";\n',
            # Outside the package its name is another package's: external.
            "tools/use.js": 'import "@scope/my-pkg";\n',
        },
    )
    assert import_edges(codebase) == {
        ("packages/my-pkg/test/a.test.js", "packages/my-pkg/src/index.js", False),
        ("packages/my-pkg/test/a.test.js", "packages/my-pkg/src/sub.js", False),
        ("packages/my-pkg/test/a.test.js", "packages/my-pkg/src/features/a.js", False),
        ("packages/my-pkg/test/b.test.ts", "packages/my-pkg/src/features/a.d.ts", False),
        ("packages/solo/other.js", "packages/solo/main.js", False),
    }


def test_folder_resolved_through_its_package_json(tmp_path: Path) -> None:
    codebase = make(
        tmp_path,
        {
            "lib/package.json": json.dumps({"main": "./main.js", "types": "./types/index.d.ts"}),
            "lib/main.js": "module.exports = 1;\n",
            "lib/index.js": "module.exports = 2;\n",
            "lib/types/index.d.ts": "export declare const x: number;\n",
            "missing-main/package.json": json.dumps({"main": "build/out.js"}),  # not built: index.js
            "missing-main/index.js": "module.exports = 3;\n",
            "main-folder/package.json": json.dumps({"main": "./src"}),
            "main-folder/src/index.js": "module.exports = 4;\n",
            "typings/package.json": json.dumps({"typings": "./decl.d.ts", "main": "./impl.js"}),
            "typings/decl.d.ts": "export declare const y: number;\n",
            "typings/impl.js": "module.exports = 5;\n",
            # `exports` serves package names only; a relative path to the folder does not read it.
            "exp/package.json": json.dumps({"exports": {".": "./e.js"}}),
            "exp/e.js": "export {};\n",
            "exp/index.js": "export {};\n",
            "bad/package.json": '{"main": ',
            "bad/index.js": "export {};\n",
            "a.js": (
                'require("./lib");\nrequire("./missing-main");\nrequire("./main-folder");\n'
                'require("./typings");\nrequire("./exp");\nrequire("./bad");\n'
            ),
            "b.ts": 'import "./lib";\nimport "./typings";\n',
        },
    )
    assert import_edges(codebase) == {
        ("a.js", "lib/main.js", False),
        ("a.js", "missing-main/index.js", False),
        ("a.js", "main-folder/src/index.js", False),
        ("a.js", "typings/impl.js", False),
        ("a.js", "exp/index.js", False),
        ("a.js", "bad/index.js", False),
        ("b.ts", "lib/types/index.d.ts", False),
        ("b.ts", "typings/decl.d.ts", False),
    }
    skipped = codebase.skipped()
    reasons = dict(zip(skipped["file"], skipped["reason"], strict=True))
    assert list(reasons) == ["bad/package.json"]
    assert reasons["bad/package.json"].startswith("package.json not parsed")


def test_python_plain_folder_is_a_module_root_only_beneath_itself(tmp_path: Path) -> None:
    codebase = make(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/util.py": "",
            "pkg/core.py": (
                "import gc\nimport helpers\nimport settings\nimport six\nimport lib1\nimport setup_helpers\n"
                "import tools.dtrace.gc\nfrom pkg import util\n"
            ),
            "setup_helpers.py": "",
            # A folder that holds a regular package is on sys.path for everyone (site-packages-like).
            "vendor/six.py": "",
            "vendor/lib1/__init__.py": "",
            # Scripts run from their folder: siblings and namespace folders beneath resolve by path.
            "tools/dtrace/gc.py": "",
            "tools/dtrace/helpers.py": "",
            "tools/dtrace/run.py": "import gc\nimport helpers\nimport sub.x\nimport pkg\n",
            "tools/dtrace/sub/x.py": "",
            # pytest puts the test folder (conftest's, or a test file's own) first on sys.path.
            "tests/conftest.py": "",
            "tests/helpers.py": "",
            "tests/test_b.py": "import helpers\nimport pkg.util\n",
            "tests/unit/test_a.py": "import helpers\nimport gc\n",
            "examples/demo/main.py": "import settings\nimport pkg\n",
            "examples/demo/settings.py": "",
        },
    )
    assert import_edges(codebase) == {
        ("pkg/core.py", "vendor/six.py", False),
        ("pkg/core.py", "vendor/lib1/__init__.py", False),
        ("pkg/core.py", "setup_helpers.py", False),
        ("pkg/core.py", "tools/dtrace/gc.py", False),  # by its full path from the root
        ("pkg/core.py", "pkg/util.py", False),
        ("tools/dtrace/run.py", "tools/dtrace/gc.py", False),
        ("tools/dtrace/run.py", "tools/dtrace/helpers.py", False),
        ("tools/dtrace/run.py", "tools/dtrace/sub/x.py", False),
        ("tools/dtrace/run.py", "pkg/__init__.py", False),
        ("tests/test_b.py", "tests/helpers.py", False),
        ("tests/test_b.py", "pkg/util.py", False),
        ("tests/unit/test_a.py", "tests/helpers.py", False),
        ("examples/demo/main.py", "examples/demo/settings.py", False),
        ("examples/demo/main.py", "pkg/__init__.py", False),
    }


def test_future_import_is_an_import_of_future_py(tmp_path: Path) -> None:
    # The standard library's layout: __future__.py is a top-level module like any other.
    codebase = make(
        tmp_path,
        {
            "__future__.py": "annotations = None\n",
            "os.py": "",
            "json/__init__.py": "",
            "json/decoder.py": "from __future__ import annotations, division as d\nimport os\n",
            "app.py": "from __future__ import (annotations)\n",
        },
    )
    assert import_edges(codebase) == {
        ("json/decoder.py", "__future__.py", False),
        ("json/decoder.py", "os.py", False),
        ("app.py", "__future__.py", False),
    }
    record = extract_source("x.py", "python", b"from __future__ import annotations\n")
    assert record["imports"] == (("__future__", ("annotations",), 0, False, 1),)


def test_member_names_are_stored_as_code_refers_to_them(tmp_path: Path) -> None:
    codebase = make(
        tmp_path,
        {
            "schema.ts": (
                "export class Schema {\n"
                '  "~standard"() { return 1 }\n'
                "  [ Symbol.iterator ]() {}\n"
                '  ["quoted"]() {}\n'
                "  #secret() {}\n"
                "  get 'x-y'() { return 1 }\n"
                "}\n"
            ),
        },
    )
    table = codebase.symbol_table(hashes=False)
    assert sorted(zip(table["name"], table["parent"], strict=True)) == [
        ("#secret", "Schema"),
        ("Schema", ""),
        ("[Symbol.iterator]", "Schema"),
        ("quoted", "Schema"),
        ("x-y", "Schema"),
        ("~standard", "Schema"),
    ]
    found = codebase.find_symbol("~standard")
    assert found[["name", "parent", "score"]].values.tolist() == [["~standard", "Schema", 1.0]]
    assert codebase.find_symbol("Schema.~standard")["line"].tolist() == [2]
    # A computed name is found by the member it names.
    assert codebase.find_symbol("iterator")["name"].tolist() == ["[Symbol.iterator]"]


def test_classes_local_to_a_function_are_dropped_with_their_methods(tmp_path: Path) -> None:
    codebase = make(
        tmp_path,
        {
            "mod.py": (
                "def factory():\n"
                "    class Local:\n"
                "        def method(self): ...\n"
                "        class Deeper:\n"
                "            def deep(self): ...\n"
                "    return Local\n"
                "\n"
                "class Outer:\n"
                "    class Inner:\n"
                "        def inner_method(self): ...\n"
                "    def method(self):\n"
                "        class InMethod:\n"
                "            def hidden(self): ...\n"
            ),
            "mod.js": (
                "function make() {\n  class L { m() {} }\n  return L;\n}\n"
                "export class K { run() { return class { x() {} }; } }\n"
            ),
        },
    )
    table = codebase.symbol_table(hashes=False)
    assert sorted(zip(table["file"], table["name"], table["kind"], table["parent"], strict=True)) == [
        ("mod.js", "K", "class", ""),
        ("mod.js", "make", "function", ""),
        ("mod.js", "run", "method", "K"),
        ("mod.py", "Inner", "class", "Outer"),
        ("mod.py", "Outer", "class", ""),
        ("mod.py", "factory", "function", ""),
        ("mod.py", "inner_method", "method", "Inner"),
        ("mod.py", "method", "method", "Outer"),
    ]


NEWER_TSX = (
    "export const C = <T,>(p: P<T>) => <div>{p.x}</div>\n"
    "interface Q<in T> { f(t: T): void }\n"  # the tsx grammar loses what follows this
    "export class Ref<in out A> { get(): A { return this.a } }\n"
    "export function after() {}\n"
)


def test_newer_typescript_syntax_keeps_its_declarations(tmp_path: Path) -> None:
    codebase = make(
        tmp_path,
        {
            "view.tsx": NEWER_TSX,
            "types.ts": (
                "export type * from './a';\n"
                "export type * as ns from './b';\n"
                "export * from './c';\n"
                "// a comment with <in T> stays as written\n"
                "export interface Box<out T> { v: T }\n"
                "export function f<const T extends readonly unknown[]>(x: T): T { return x }\n"
            ),
            "a.ts": "export type A = 1;\n",
            "b.ts": "export type B = 1;\n",
            "c.ts": "export const c = 1;\n",
        },
    )
    table = codebase.symbol_table(hashes=False)
    names = {file: sorted(table[table["file"] == file]["name"]) for file in ("view.tsx", "types.ts")}
    assert names == {"view.tsx": ["C", "Q", "Ref", "after", "get"], "types.ts": ["Box", "f"]}
    signatures = dict(zip(table["name"], table["signature"], strict=True))
    assert signatures["Q"] == "interface Q<in T>"  # from the file's own text
    assert signatures["Ref"] == "class Ref<in out A>"
    assert import_edges(codebase) == {
        ("types.ts", "a.ts", True),  # `export type *` stays type-only
        ("types.ts", "b.ts", True),
        ("types.ts", "c.ts", False),
    }
    # Still marked partial (the grammar did reject the file), with the reason saying what was recovered.
    skipped = codebase.skipped()
    reasons = dict(zip(skipped["file"], skipped["reason"], strict=True))
    assert sorted(reasons) == ["types.ts", "view.tsx"]
    assert reasons["view.tsx"] == (
        "syntax error at line 2, column 16: syntax newer than the grammar (variance annotations, "
        "`export type *` or a re-export's import attributes); indexed with it masked"
    )


def test_declaration_file_re_exports_resolve_like_imports(tmp_path: Path) -> None:
    # A package's emitted declarations: index.d.ts re-exports the others by their emitted .js names.
    index = (
        'export * from "./add.js";\n'
        'export { x } from "./y.js";\n'
        'export type { T } from "./types.js";\n'
        'export * as ns from "./ns.js";\n'
        # Import attributes on a re-export are newer than the grammars, which reject the statement.
        'export { default as data } from "./data.json" with { type: "json" };\n'
        'export type { U } from "./u.js" with { "resolution-mode": "import" };\n'
        "export interface Options {\n    strict: boolean;\n}\n"
    )
    codebase = make(
        tmp_path,
        {
            "dts/lib/index.d.ts": index,
            "dts/lib/add.d.ts": "export declare function add(a: number, b: number): number;\n",
            "dts/lib/y.d.ts": "export declare const x: number;\n",
            "dts/lib/types.d.ts": "export type T = 1;\n",
            "dts/lib/ns.d.ts": "export declare const n: number;\n",
            "dts/lib/data.json": "{}\n",
            "dts/lib/u.d.ts": "export type U = 2;\n",
            # JavaScript's grammar rejects the attributes on a re-export as well.
            "src/index.js": 'export { a } from "./a.js" with { type: "js" };\nexport * from "./b.js" assert { x: "y" };\n',
            "src/a.js": "export const a = 1;\n",
            "src/b.js": "export const b = 1;\n",
        },
    )
    assert import_edges(codebase) == {
        ("dts/lib/index.d.ts", "dts/lib/add.d.ts", False),
        ("dts/lib/index.d.ts", "dts/lib/y.d.ts", False),
        ("dts/lib/index.d.ts", "dts/lib/types.d.ts", True),
        ("dts/lib/index.d.ts", "dts/lib/ns.d.ts", False),
        ("dts/lib/index.d.ts", "dts/lib/u.d.ts", True),
        ("src/index.js", "src/a.js", False),
        ("src/index.js", "src/b.js", False),
    }
    table = codebase.symbol_table(hashes=False)
    assert list(table[table["file"] == "dts/lib/index.d.ts"]["name"]) == ["Options"]  # the rest still parses


def test_masking_changes_no_valid_code_and_keeps_real_errors() -> None:
    # Nothing rejected: nothing masked, the file is indexed as it is.
    valid = b"const out = 1;\nfunction f<out>(x: out) { return x < out }\nconst s = '<in T>';\n"
    assert extract_source("v.ts", "typescript", valid)["status"] == "indexed"
    # A real error elsewhere stays reported as what it is; the variance annotation is still recovered.
    broken = b"interface Q<in T> { v: T }\nconst = ;\nexport function after() {}\n"
    record = extract_source("b.ts", "typescript", broken)
    assert record["status"] == "partial"
    assert record["reason"] == "syntax error at line 2, column 1: indexed what parsed"
    assert [s[0] for s in record["symbols"]] == ["Q", "after"]
