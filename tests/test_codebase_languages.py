"""Go, Rust and Java in `codebase`: import edges checked by hand and matched exactly, definitions with their
signatures, the structural and judgment operations on them, and a repository holding all six languages."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest
from traitlets.config import Config

from aries_kernel.codebase import Codebase
from tests.test_codebase_imports import JAVASCRIPT_EDGES, PYTHON_EDGES, TYPESCRIPT_EDGES

FIXTURES = Path(__file__).parent / "fixtures" / "codebase"

GO_EDGES = {
    # an import names a package (a folder): every non-test file of it, whatever the import's alias
    ("main.go", "api/handler.go"),
    ("main.go", "api/routes.go"),
    ("main.go", "internal/store/memory.go"),
    ("main.go", "internal/store/store.go"),
    ("api/handler.go", "internal/store/memory.go"),
    ("api/handler.go", "internal/store/store.go"),
    ("api/handler.go", "pkg/money/money.go"),
    ("api/routes.go", "pkg/money/money.go"),  # `import m "..."`
    # a _test.go file's imports count; no file imports a package's tests (store_test.go gets no edge)
    ("api/handler_test.go", "internal/testutil/testutil.go"),
    ("internal/store/store_test.go", "internal/store/memory.go"),  # package store_test, the external test
    ("internal/store/store_test.go", "internal/store/store.go"),
    ("internal/testutil/testutil.go", "internal/store/memory.go"),
    ("internal/testutil/testutil.go", "internal/store/store.go"),
    ("internal/store/store.go", "pkg/money/money.go"),
    # vendor/ of the importer's module; "errors", "sync", "net/http", "fmt", "testing" are the standard library
    ("internal/store/memory.go", "vendor/github.com/acme/color/color.go"),
    # a nested module (tools/go.mod) owns its folder; the parent module's packages resolve from it too
    ("tools/gen/gen.go", "pkg/money/money.go"),
    ("tools/gen/gen.go", "tools/lib/lib.go"),
}

RUST_EDGES = {
    # `mod x;` in a crate root: x.rs or x/mod.rs beside it; `pub use model::Item` is the local module
    ("crates/core/src/lib.rs", "crates/core/src/model.rs"),
    ("crates/core/src/lib.rs", "crates/core/src/storage/mod.rs"),
    ("crates/core/src/lib.rs", "crates/core/src/util.rs"),
    (
        "crates/core/src/model.rs",
        "crates/core/src/util.rs",
    ),  # use crate::util::slug (`use super::*` in tests: itself)
    # mod.rs: `pub mod disk; pub mod memory;` beside it, `use super::model::Item` climbs to the crate root
    ("crates/core/src/storage/mod.rs", "crates/core/src/storage/disk.rs"),
    ("crates/core/src/storage/mod.rs", "crates/core/src/storage/memory.rs"),
    ("crates/core/src/storage/mod.rs", "crates/core/src/model.rs"),
    # memory.rs (not mod.rs): `mod index;` is memory/index.rs; `use self::index::Index`; `use super::disk::Disk`
    ("crates/core/src/storage/memory.rs", "crates/core/src/storage/memory/index.rs"),
    ("crates/core/src/storage/memory.rs", "crates/core/src/storage/disk.rs"),
    ("crates/core/src/storage/memory.rs", "crates/core/src/model.rs"),  # use crate::model::{Item, Priced}
    ("crates/core/src/storage/memory/index.rs", "crates/core/src/storage/memory.rs"),  # use super::Memory
    ("crates/core/src/storage/memory/index.rs", "crates/core/src/util.rs"),  # use crate::util
    # use crate::{model::Item, util::{self, slug}}; `use std::fs` gives nothing
    ("crates/core/src/storage/disk.rs", "crates/core/src/model.rs"),
    ("crates/core/src/storage/disk.rs", "crates/core/src/util.rs"),
    # `mod case;` inside inline `pub mod text {}` of util.rs: util/text/case.rs; `use super::super::model::Item`
    # inside it climbs out of the inline module first
    ("crates/core/src/util.rs", "crates/core/src/util/text/case.rs"),
    ("crates/core/src/util.rs", "crates/core/src/model.rs"),
    ("crates/core/src/util/text/case.rs", "crates/core/src/util.rs"),
    # between workspace crates: `shop-core = { workspace = true }` is the crate shop_core; serde is outside
    ("crates/app/src/main.rs", "crates/app/src/cli.rs"),
    ("crates/app/src/main.rs", "crates/core/src/storage/memory.rs"),
    ("crates/app/src/main.rs", "crates/core/src/lib.rs"),  # use shop_core::Item: a re-export of the root
    ("crates/app/src/cli.rs", "crates/core/src/model.rs"),
    # an integration test is a crate root of its own: `mod common;` is tests/common/mod.rs
    ("crates/app/tests/smoke.rs", "crates/app/tests/common/mod.rs"),
    ("crates/app/tests/smoke.rs", "crates/core/src/lib.rs"),
    ("crates/app/tests/common/mod.rs", "crates/core/src/storage/disk.rs"),
}

_MAIN = "src/main/java/com/acme/shop"
_TEST = "src/test/java/com/acme/shop"
JAVA_EDGES = {
    (f"{_MAIN}/App.java", f"{_MAIN}/model/Item.java"),  # import of a class
    (f"{_MAIN}/App.java", f"{_MAIN}/model/Order.java"),  # import of a nested class: Order.Line
    (f"{_MAIN}/App.java", f"{_MAIN}/util/Strings.java"),  # import com.acme.shop.util.*; and a static import
    (f"{_MAIN}/App.java", f"{_MAIN}/util/Money.java"),
    (f"{_MAIN}/model/Order.java", f"{_MAIN}/util/Money.java"),  # import static ...Money.*: the class
    (f"{_MAIN}/util/Money.java", f"{_MAIN}/model/Item.java"),
    # a package is both halves: src/main and src/test; JUnit is outside the repository
    (f"{_TEST}/AppTest.java", f"{_MAIN}/model/Item.java"),
    (f"{_TEST}/AppTest.java", f"{_MAIN}/model/Order.java"),
    (f"{_TEST}/AppTest.java", f"{_TEST}/model/ItemFixtures.java"),
    (f"{_TEST}/model/ItemFixtures.java", f"{_MAIN}/util/Strings.java"),
    # another module's source root
    ("admin/src/main/java/com/acme/admin/Admin.java", f"{_MAIN}/model/Item.java"),
    ("admin/src/main/java/com/acme/admin/Admin.java", f"{_MAIN}/App.java"),
}


def build(tmp_path: Path, name: str) -> Codebase:
    root = tmp_path / name
    shutil.copytree(FIXTURES / name, root)
    codebase = Codebase(root, config=Config({"AriesCodebase": {"workers": 1}}))
    codebase.wait_ready()
    return codebase


def import_edges(codebase: Codebase) -> set[tuple[str, str]]:
    frame = codebase.edges("import")
    assert not frame["type_only"].any()
    return set(zip(frame["source"], frame["target"], strict=True))


@pytest.fixture(scope="module")
def go(tmp_path_factory: pytest.TempPathFactory) -> Codebase:
    return build(tmp_path_factory.mktemp("go"), "goproj")


@pytest.fixture(scope="module")
def rust(tmp_path_factory: pytest.TempPathFactory) -> Codebase:
    return build(tmp_path_factory.mktemp("rust"), "rustproj")


@pytest.fixture(scope="module")
def java(tmp_path_factory: pytest.TempPathFactory) -> Codebase:
    return build(tmp_path_factory.mktemp("java"), "javaproj")


def symbols_of(codebase: Codebase, file: str) -> list[tuple[str, str, int, str, str]]:
    table = codebase.symbol_table()
    rows = table[table["file"] == file].sort_values(["line", "name"])
    return [(r.name, r.kind, r.line, r.signature, r.parent) for r in rows.itertuples()]


def test_go_import_edges(go: Codebase) -> None:
    assert import_edges(go) == GO_EDGES
    assert go.skipped().empty
    assert set(go.list_files()["language"]) == {"go"}


def test_rust_import_edges(rust: Codebase) -> None:
    assert import_edges(rust) == RUST_EDGES
    assert rust.skipped().empty


def test_java_import_edges(java: Codebase) -> None:
    assert import_edges(java) == JAVA_EDGES
    assert java.skipped().empty


def test_go_definitions(go: Codebase) -> None:
    assert symbols_of(go, "pkg/money/money.go") == [
        ("Cents", "type", 4, "type Cents int64", ""),
        ("Zero", "constant", 6, "const Zero Cents = 0", ""),
        ("Amount", "struct", 8, "type Amount struct", ""),
        ("Formatter", "interface", 13, "type Formatter interface", ""),
        ("Format", "method", 14, "Format(a Amount) string", "Formatter"),
        ("New", "function", 17, "func New(value Cents, currency string) Amount", ""),
        ("Add", "method", 21, "func (a Amount) Add(b Amount) Amount", "Amount"),
        ("Reset", "method", 25, "func (a *Amount) Reset()", "Amount"),
        ("DefaultCurrency", "variable", 29, 'var DefaultCurrency = "EUR"', ""),
    ]
    # a method on an unexported type in another file of the package
    assert (
        "Get",
        "method",
        16,
        "func (s *memory) Get(id string) (a Amount, ok bool)",
        "memory",
    ) in symbols_of(go, "internal/store/memory.go")


def test_rust_definitions(rust: Codebase) -> None:
    assert symbols_of(rust, "crates/core/src/model.rs") == [
        ("Item", "struct", 5, "pub struct Item", ""),
        ("Category", "enum", 10, "pub enum Category", ""),
        ("Priced", "trait", 15, "pub trait Priced", ""),
        ("price", "method", 16, "fn price(&self) -> u32", "Priced"),
        ("label", "method", 17, "fn label(&self) -> String", "Priced"),
        ("new", "method", 23, "pub fn new(name: &str, cents: u32) -> Self", "Item"),
        ("price", "method", 29, "fn price(&self) -> u32", "Item"),
        ("MAX_CENTS", "constant", 34, "pub const MAX_CENTS: u32 = 1_000_000", ""),
        ("Catalog", "type", 36, "pub type Catalog = Vec<Item>", ""),
        ("item", "macro", 38, "macro_rules! item", ""),
        ("cheapest", "function", 44, "pub fn cheapest(items: &[Item]) -> Option<&Item>", ""),
        # `fn key` inside cheapest's body is local and left out; the test module's function is kept
        ("builds", "function", 56, "fn builds()", ""),
    ]


def test_java_definitions(java: Codebase) -> None:
    assert symbols_of(java, f"{_MAIN}/model/Order.java") == [
        ("Order", "class", 9, "public class Order", ""),
        ("MAX_LINES", "constant", 10, "public static final int MAX_LINES = 50", "Order"),
        ("Order", "method", 13, "public Order()", "Order"),
        ("toString", "method", 15, "public String toString()", "Order"),  # @Override left out
        ("total", "method", 20, "public long total()", "Order"),
        ("Line", "class", 28, "public static class Line", "Order"),
        ("Line", "method", 31, "public Line(Item item)", "Line"),
        ("cents", "method", 35, "public long cents()", "Line"),
        ("Status", "enum", 40, "public enum Status", "Order"),
        ("Visitor", "interface", 42, "interface Visitor", "Order"),
        ("visit", "method", 43, "void visit(Line line)", "Visitor"),
    ]
    # the local class and the anonymous class inside main() are left out, with their methods
    assert symbols_of(java, f"{_MAIN}/App.java") == [
        ("App", "class", 10, "public class App", ""),
        ("main", "method", 11, "public static void main(String[] args)", "App"),
    ]
    admin = symbols_of(java, "admin/src/main/java/com/acme/admin/Admin.java")
    assert (
        "NAME",
        "constant",
        7,
        'String NAME = "admin"',
        "Admin",
    ) in admin  # interface fields are constants


def test_find_symbol_top_files_and_dependents(go: Codebase, rust: Codebase, java: Codebase) -> None:
    found = go.find_symbol("Amount.Add")
    assert found[["kind", "file", "line"]].values.tolist() == [["method", "pkg/money/money.go", 21]]
    assert rust.find_symbol("Item.new")["file"].tolist() == ["crates/core/src/model.rs"]
    assert java.find_symbol("Line.cents")["signature"].tolist() == ["public long cents()"]

    ranked = go.top_files(limit=None)["file"].tolist()
    assert ranked.index("pkg/money/money.go") < ranked.index("main.go")
    assert "api/handler_test.go" not in ranked  # a test, listed only on request
    first = go.show_dependents("pkg/money/money.go")
    first = set(first[first["distance"] == 1]["file"])
    assert {"api/handler.go", "api/routes.go", "internal/store/store.go", "tools/gen/gen.go"} <= first

    deps = rust.show_dependencies("crates/app/src/main.rs")
    assert {"crates/app/src/cli.rs", "crates/core/src/storage/memory.rs", "crates/core/src/lib.rs"} <= set(
        deps["file"]
    )
    dependents = java.show_dependents(f"{_MAIN}/model/Item.java")
    assert {f"{_MAIN}/App.java", f"{_MAIN}/util/Money.java"} <= set(dependents["file"])


def test_reference_edges_stay_within_a_language(go: Codebase, tmp_path: Path) -> None:
    refs = go.edges("reference")
    # memory.go names Amount (money.go is imported by store.go, not memory.go, but the name is money's)
    assert ("internal/store/memory.go", "pkg/money/money.go") in set(
        zip(refs["source"], refs["target"], strict=True)
    )
    root = tmp_path / "two"
    (root / "g").mkdir(parents=True)
    (root / "g" / "a.go").write_text("package g\n\nfunc ParseWidget() {}\n")
    (root / "r.rs").write_text("pub fn run() { parse_widget(); ParseWidget(); }\n")
    (root / "J.java").write_text("class J { void m() { ParseWidget(); } }\n")
    mixed = Codebase(root, config=Config({"AriesCodebase": {"persist": False}}))
    assert mixed.edges("reference").empty


def test_manifest_edits_are_picked_up(tmp_path: Path) -> None:
    codebase = build(tmp_path, "goproj")
    root = codebase.root
    (root / "go.mod").write_text("module example.com/renamed\n")
    codebase.reindex()
    # only the nested module (tools/go.mod) and vendor/ still resolve
    assert import_edges(codebase) == {
        ("internal/store/memory.go", "vendor/github.com/acme/color/color.go"),
        ("tools/gen/gen.go", "tools/lib/lib.go"),
    }
    (root / "go.mod").write_text("module example.com/shop\n")
    codebase.reindex(["go.mod"])
    assert import_edges(codebase) == GO_EDGES


def test_broken_manifests_are_reported(tmp_path: Path) -> None:
    root = tmp_path / "broken"
    (root / "src").mkdir(parents=True)
    (root / "Cargo.toml").write_text('[package]\nname = "x\n')
    (root / "src" / "lib.rs").write_text("mod a;\n")
    (root / "src" / "a.rs").write_text("pub fn a() {}\n")
    (root / "go.mod").write_text("go 1.22\n")
    (root / "main.go").write_text('package main\n\nimport "example.com/x/y"\n')
    codebase = Codebase(root, config=Config({"AriesCodebase": {"persist": False}}))
    # mod declarations need no manifest; the crate root is found by its file name
    assert import_edges(codebase) == {("src/lib.rs", "src/a.rs")}
    reasons = dict(zip(codebase.skipped()["file"], codebase.skipped()["reason"], strict=True))
    assert set(reasons) == {"Cargo.toml", "go.mod"}
    assert reasons["Cargo.toml"].startswith("Cargo.toml not parsed")
    assert "no module path" in reasons["go.mod"]


def test_syntax_errors_keep_what_parsed(tmp_path: Path) -> None:
    root = tmp_path / "partial"
    root.mkdir()
    (root / "a.go").write_text("package a\n\nfunc Good() {}\n\nfunc Bad( {\n")
    (root / "b.rs").write_text("pub fn good() {}\nfn bad( {\n")
    (root / "C.java").write_text("class C { void good() {} void bad( }\n")
    codebase = Codebase(root, config=Config({"AriesCodebase": {"persist": False}}))
    files = codebase.list_files().set_index("file")
    assert set(files["status"]) == {"partial"}
    names = set(codebase.symbol_table()["name"])
    assert {"Good", "good"} <= names


def test_judgment_operations_on_go_rust_java(go: Codebase, rust: Codebase, java: Codebase) -> None:
    by_name = go.find_similar_patterns("new amount", mode="name")
    assert "New" in set(by_name["name"])
    by_signature = rust.find_similar_patterns("fn cheapest*", mode="signature")
    assert by_signature["name"].tolist() == ["cheapest"]
    source = (go.root / "pkg/money/money.go").read_text().splitlines()
    add = "\n".join(source[20:23])  # func (a Amount) Add ... }
    duplicates = go.detect_duplication(add)
    exact = duplicates[duplicates["kind"] == "exact"]
    assert exact[["file", "name", "line"]].values.tolist() == [["pkg/money/money.go", "Add", 21]]
    renamed = add.replace("Add", "Plus").replace("b Amount", "other Amount").replace("b.Value", "other.Value")
    shaped = go.find_similar_patterns(renamed, mode="shape", language="go")
    assert shaped.iloc[0][["name", "score"]].tolist() == ["Add", 1.0]
    java_method = "public long cents() {\n    return item.getCents();\n}\n"
    assert "cents" in set(java.detect_duplication(java_method, language="java")["name"])

    style = go.is_consistent_with("func do_thing(x int) int {\n\treturn x\n}\n", "go")
    assert style.attrs["deviation"] > 0
    naming = style[style["criterion"] == "naming"]
    assert naming["finding"].str.contains("snake_case").any()
    for codebase in (go, rust, java):
        for topic in ("error handling", "logging", "imports", "async", "api calls"):
            assert isinstance(codebase.find_convention(topic), pd.DataFrame)
        assert not codebase.suggest_location("money amount storage items").empty
    imports = go.find_convention("imports")
    assert len(imports) and imports["count"].sum() > 0


def test_all_six_languages_in_one_repository(tmp_path: Path) -> None:
    root = tmp_path / "mixed"
    shutil.copytree(FIXTURES / "pyproj", root)
    parts = {"web": "jsmix", "ts": "tsproj", "go": "goproj", "rust": "rustproj", "java": "javaproj"}
    for folder, fixture in parts.items():
        shutil.copytree(FIXTURES / fixture, root / folder)
    codebase = Codebase(root, config=Config({"AriesCodebase": {"workers": 2}}))
    edges = import_edges_typed(codebase)
    expected = {(s, t, ty) for s, t, ty in PYTHON_EDGES}

    def under(folder: str, pairs: set[tuple[str, str]]) -> set[tuple[str, str, bool]]:
        return {(f"{folder}/{s}", f"{folder}/{t}", False) for s, t in pairs}

    expected |= {(f"web/{s}", f"web/{t}", ty) for s, t, ty in JAVASCRIPT_EDGES}
    expected |= {(f"ts/{s}", f"ts/{t}", ty) for s, t, ty in TYPESCRIPT_EDGES}
    expected |= under("go", GO_EDGES) | under("rust", RUST_EDGES) | under("java", JAVA_EDGES)
    assert edges == expected
    languages = set(codebase.list_files()["language"])
    assert languages >= {"python", "javascript", "typescript", "go", "rust", "java"}
    # names link files of one language family only
    lang = dict(zip(codebase.list_files()["file"], codebase.list_files()["language"], strict=True))
    family = {"typescript": "js", "tsx": "js", "javascript": "js"}
    for source, target in zip(*codebase.edges("reference")[["source", "target"]].values.T, strict=True):
        assert family.get(lang[source], lang[source]) == family.get(lang[target], lang[target])
    assert codebase.find_symbol("Amount")["file"].tolist() == ["go/pkg/money/money.go"]


def import_edges_typed(codebase: Codebase) -> set[tuple[str, str, bool]]:
    frame = codebase.edges("import")
    return {(r.source, r.target, bool(r.type_only)) for r in frame.itertuples()}
