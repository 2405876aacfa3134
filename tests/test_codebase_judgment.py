"""Judgment operations of `codebase` on fixture repositories with known answers.

Fixtures (tests/fixtures/codebase/judgment/): `pyshop`, a snake_case Python package whose reports module
holds a planted renamed copy of `compute_invoice_total` (`summarize_sales`); `tsapp`, a camelCase TypeScript
app; `jsmix`, CommonJS JavaScript with a renamed copy of `cartTotal` (`orderSum`); `pyasync`, asyncio
and httpx. Each is copied to a temporary directory so the index written under `.aries/` never lands in the
source tree.
"""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tree_sitter import Node

from aries_kernel.codebase import Codebase, CodebaseError, judgment, shapes
from aries_kernel.codebase.languages import parse
from aries_kernel.codebase.shapes import ShapeProfile, exact_hash, naming_style, shape_hash, split_identifier

FIXTURES = Path(__file__).parent / "fixtures" / "codebase" / "judgment"
# Every language the index profiles: the judgment fixtures and the Go, Rust and Java projects.
PROFILED = [FIXTURES / n for n in ("pyshop", "tsapp", "jsmix", "pyasync")] + [
    FIXTURES.parent / n for n in ("goproj", "rustproj", "javaproj", "tsproj")
]

RENAMED_INVOICE_TOTAL = '''
def tally(rows: list[dict], where: str) -> float:
    """Renamed copy: same statements, different names and messages."""
    acc = 0.0
    for row in rows:
        if row["quantity"] <= 0:
            continue
        acc += row["price"] * row["quantity"]
    pct = tax_rate_for(where)
    gross = apply_tax(acc, pct)
    logger.info("tally %s", gross)
    return round(gross, 3)
'''

UNRELATED = '''
def greet(name: str) -> str:
    """Say hello."""
    if not name:
        raise ValueError("name is empty")
    return "hello " + name.title()
'''

SNAKE_TS = """
export async function load_user_orders(user_id: number): Promise<unknown[]> {
  const order_list = await getJson(`/api/orders/${user_id}`);
  return order_list as unknown[];
}
"""

CAMEL_TS = """
/** Orders of one user. */
export async function loadUserOrders(userId: number): Promise<unknown[]> {
  const orderList = await getJson(`/api/orders/${userId}`);
  return orderList as unknown[];
}
"""


def _open(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[Codebase]:
    root = tmp_path_factory.mktemp(name) / name
    shutil.copytree(FIXTURES / name, root)
    codebase = Codebase(root)
    codebase.wait_ready()
    yield codebase
    close = getattr(codebase, "close", None)
    if close is not None:
        close()


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Codebase]:
    yield from _open(tmp_path_factory, "pyshop")


@pytest.fixture(scope="module")
def tsapp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Codebase]:
    yield from _open(tmp_path_factory, "tsapp")


@pytest.fixture(scope="module")
def pyasync(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Codebase]:
    yield from _open(tmp_path_factory, "pyasync")


@pytest.fixture(scope="module")
def jsmix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Codebase]:
    yield from _open(tmp_path_factory, "jsmix")


def _definition(path: Path, header: str) -> str:
    """The text of one top-level definition of a fixture file, from its header to the next blank-line gap."""
    text = path.read_text()
    start = text.index(header)
    end = text.find("\n\n\n", start)
    return text[start : end if end != -1 else len(text)]


def _rows(frame: pd.DataFrame, **match: object) -> pd.DataFrame:
    mask = pd.Series(True, index=frame.index)
    for column, value in match.items():
        mask &= frame[column] == value
    return frame[mask]


# ---------------------------------------------------------------------------------- detect_duplication


def test_planted_copy_is_an_exact_duplicate(shop: Codebase) -> None:
    original = _definition(FIXTURES / "pyshop/shop/billing/invoice.py", "def compute_invoice_total")
    pasted = textwrap.indent(original, "        ")  # pasted into a class body: indentation must not matter

    found = shop.detect_duplication(pasted)

    exact = _rows(found, kind="exact")
    assert exact[["file", "name"]].values.tolist() == [["shop/billing/invoice.py", "compute_invoice_total"]]
    assert exact["similarity"].tolist() == [1.0]
    # The planted renamed copy in reports is found too, but only as a structural duplicate.
    renamed = _rows(found, name="summarize_sales")
    assert renamed[["file", "kind", "similarity"]].values.tolist() == [
        ["shop/reports/summary.py", "structural", 1.0]
    ]
    assert list(found.columns) == ["file", "name", "line", "end_line", "kind", "similarity", "snippet_name"]


def test_copy_with_renamed_variables_is_structural_not_exact(shop: Codebase) -> None:
    found = shop.detect_duplication(RENAMED_INVOICE_TOTAL)

    assert set(found["kind"]) == {"structural"}
    assert set(found["name"]) == {"compute_invoice_total", "summarize_sales"}
    assert (found["similarity"] == 1.0).all()
    invoice = _rows(found, name="compute_invoice_total").iloc[0]
    assert (invoice["line"], invoice["end_line"]) == (11, 21)


def test_unrelated_function_is_not_a_duplicate(shop: Codebase) -> None:
    assert shop.detect_duplication(UNRELATED).empty


def test_near_copy_passes_a_lower_threshold_only(shop: Codebase) -> None:
    # One statement fewer than the original: no longer the same shape, still very similar.
    trimmed = RENAMED_INVOICE_TOTAL.replace('    logger.info("tally %s", gross)\n', "")
    strict = shop.detect_duplication(trimmed, threshold=1.0)
    loose = shop.detect_duplication(trimmed, threshold=0.6)
    assert strict.empty
    assert set(loose["name"]) == {"compute_invoice_total", "summarize_sales"}
    assert loose["similarity"].between(0.6, 0.999).all()


def test_javascript_duplicates(jsmix: Codebase) -> None:
    original = _definition(FIXTURES / "jsmix/lib/cartTotals.js", "function cartTotal")
    found = jsmix.detect_duplication(original)
    assert _rows(found, kind="exact")["name"].tolist() == ["cartTotal"]
    assert _rows(found, kind="structural")[["file", "name"]].values.tolist() == [
        ["lib/priceMath.js", "orderSum"]
    ]


def test_detect_duplication_rejects_bad_input(shop: Codebase) -> None:
    with pytest.raises(ValueError, match="threshold"):
        shop.detect_duplication(UNRELATED, threshold=1.5)
    with pytest.raises(ValueError, match="empty"):
        shop.detect_duplication("   \n")


# ---------------------------------------------------------------------------------- is_consistent_with


def _naming(report: pd.DataFrame) -> pd.DataFrame:
    return report[report["criterion"] == "naming"]


def test_snake_case_snippet_deviates_from_camel_case_repository(tsapp: Codebase) -> None:
    snake = tsapp.is_consistent_with(SNAKE_TS, "typescript")
    camel = tsapp.is_consistent_with(CAMEL_TS, "typescript")

    snake_naming = _naming(snake)
    assert set(snake_naming["finding"].str.split(":").str[0]) == {
        "function names",
        "variable names",
        "parameter names",
    }
    assert (snake_naming["deviation"] == 1.0).all()
    assert snake_naming["expected"].str.startswith("camelCase").all()
    assert snake_naming["finding"].str.contains("snake_case where the reference uses camelCase").all()

    assert not _naming(camel).empty
    assert (_naming(camel)["deviation"] == 0.0).all()
    assert snake.attrs["deviation"] > camel.attrs["deviation"]
    assert snake.iloc[0]["criterion"] == "overall"
    assert snake.iloc[0]["deviation"] == snake.attrs["deviation"]
    assert 0.0 <= camel.attrs["deviation"] <= snake.attrs["deviation"] <= 1.0


def test_reference_may_be_a_file_or_a_list_of_files(tsapp: Codebase) -> None:
    one = tsapp.is_consistent_with(SNAKE_TS, "src/users/userService.ts", criteria="naming")
    several = tsapp.is_consistent_with(
        SNAKE_TS, ["src/users/userService.ts", "src/users/userFormat.ts"], criteria=["naming"]
    )
    for report in (one, several):
        assert set(report["criterion"]) == {"overall", "naming"}
        assert report.attrs["deviation"] == 1.0
    with pytest.raises(CodebaseError, match="src/missing.ts is not an indexed file"):
        tsapp.is_consistent_with(SNAKE_TS, "src/missing.ts")
    with pytest.raises(ValueError, match="Unknown criteria"):
        tsapp.is_consistent_with(SNAKE_TS, "typescript", criteria="colour")


def test_javascript_naming_and_module_system(jsmix: Codebase) -> None:
    snake = "import { round_price } from './priceMath';\nfunction cart_total(cart_items) {\n  return 0;\n}\n"
    report = jsmix.is_consistent_with(snake, "javascript")
    assert (_naming(report)["deviation"] == 1.0).all()
    form = report[report["finding"].str.startswith("import form")].iloc[0]
    assert form["expected"].startswith("CommonJS require") and form["deviation"] == 1.0
    assert report[report["finding"].str.startswith("type annotations")].empty  # not a typed language


def test_camel_case_snippet_deviates_from_snake_case_python(shop: Codebase) -> None:
    report = shop.is_consistent_with(
        "def loadOrders(userId):\n    return userId\n", "python", criteria="naming"
    )
    assert (_naming(report)["deviation"] == 1.0).all()
    assert _naming(report)["expected"].str.startswith("snake_case").all()
    fitting = shop.is_consistent_with(
        "def load_orders(user_id):\n    return user_id\n", "python", criteria="naming"
    )
    assert fitting.attrs["deviation"] == 0.0


def test_structure_and_import_findings(shop: Codebase, tsapp: Codebase) -> None:
    bare = "import os\n\ndef list_orders(folder):\n    return os.listdir(folder)\n"
    report = shop.is_consistent_with(bare, "python", criteria=["structure", "imports"]).set_index("finding")
    docstrings = report.filter(like="docstrings:", axis=0)
    assert docstrings["expected"].iloc[0] == "documented (100% of 15)"  # all 17 functions but two __init__
    assert docstrings["deviation"].iloc[0] == 1.0
    assert report.filter(like="type annotations:", axis=0)["deviation"].iloc[0] == 1.0

    commonjs = 'const { getJson } = require("../net/httpClient");\n'
    imports = tsapp.is_consistent_with(commonjs, "typescript", criteria="imports")
    form = imports[imports["finding"].str.startswith("import form")].iloc[0]
    assert form["deviation"] == 1.0
    assert form["expected"].startswith("ESM import")


# ---------------------------------------------------------------------------------- suggest_location


@pytest.mark.parametrize(
    ("description", "home"),
    [
        ("compute the VAT tax rate for a country", "shop/billing/tax.py"),
        ("evict old records from the in-memory cache", "shop/storage/cache.py"),
    ],
)
def test_suggest_location_names_the_module_community(shop: Codebase, description: str, home: str) -> None:
    communities = shop.communities()
    expected = communities.loc[communities["file"] == home, "community"].iloc[0]

    suggestions = shop.suggest_location(description)

    best = suggestions.iloc[0]
    assert best["community"] == expected
    assert home in best["files"].split(", ")
    assert home in best["rationale"]
    assert 0.0 < best["confidence"] <= 1.0
    assert suggestions["confidence"].is_monotonic_decreasing or len(suggestions) == 1
    assert list(suggestions.columns) == ["community", "label", "files", "confidence", "score", "rationale"]


def test_suggest_location_needs_words(shop: Codebase) -> None:
    with pytest.raises(ValueError, match="no searchable words"):
        shop.suggest_location("!!! ???")


# ---------------------------------------------------------------------------------- find_similar_patterns


def test_similar_by_name_tokens(shop: Codebase) -> None:
    found = shop.find_similar_patterns("loadUserConfig", mode="name")
    assert found.iloc[0][["name", "file", "score"]].tolist() == ["load_user_config", "shop/config.py", 1.0]
    assert found["score"].is_monotonic_decreasing
    assert "load_defaults" in set(found["name"])  # shares "load"


def test_similar_by_signature(shop: Codebase, tsapp: Codebase) -> None:
    errors = shop.find_similar_patterns("class *Error", mode="signature")
    assert set(errors["name"]) == {"ShopError", "NotFoundError", "PaymentError", "ConfigError"}
    assert set(errors["kind"]) == {"class"}
    loaders = shop.find_similar_patterns("def load_*", mode="signature")
    assert set(loaders["name"]) == {"load_user_config", "load_defaults"}
    asynchronous = tsapp.find_similar_patterns("async function", mode="signature")
    assert set(asynchronous["name"]) == {
        "getJson",
        "postJson",
        "fetchUserProfile",
        "saveUserProfile",
        "startApp",
    }
    with_params = tsapp.find_similar_patterns("function *(displayName: string)", mode="signature")
    assert set(with_params["name"]) == {"formatUserName", "userInitials"}  # an arrow function counts too


def test_similar_by_shape(shop: Codebase) -> None:
    found = shop.find_similar_patterns(RENAMED_INVOICE_TOTAL, mode="shape")
    top = found.head(2)
    assert set(top["name"]) == {"compute_invoice_total", "summarize_sales"}
    assert (top["score"] == 1.0).all() and top["same_shape"].all()
    assert (found.iloc[2:]["score"] < 0.75).all()


def test_unknown_mode_is_rejected(shop: Codebase) -> None:
    with pytest.raises(ValueError, match="Unknown mode"):
        shop.find_similar_patterns("load", mode="fuzzy")


# ---------------------------------------------------------------------------------- find_convention


def test_logging_convention(shop: Codebase) -> None:
    modules_with_logger = [
        p
        for p in (FIXTURES / "pyshop").rglob("*.py")
        if "logger = logging.getLogger(__name__)" in p.read_text()
    ]
    found = shop.find_convention("logging")
    top = found.iloc[0]
    assert top["pattern"] == "logger = logging.getLogger(__name__)"
    assert top["files"] == len(modules_with_logger)
    assert top["example"].endswith("logger = logging.getLogger(__name__)")
    assert found["pattern"].str.contains(r"logger\.info\(\.\.\.\) with %-style args").any()


def test_error_handling_convention(shop: Codebase) -> None:
    found = shop.find_convention("errors", limit=20)
    assert found.equals(shop.find_convention("error handling", limit=20))
    patterns = set(found["pattern"])
    assert "class *(ShopError) — custom exception" in patterns
    assert {"raise NotFoundError(...)", "raise PaymentError(...)"} <= patterns
    chained = _rows(found, pattern="raise ShopError(...) from <err>")
    assert chained["example"].str.startswith("shop/web/handlers.py:").all() and len(chained) == 1
    with pytest.raises(ValueError, match="Unknown convention topic"):
        shop.find_convention("gardening")


def test_typescript_conventions(tsapp: Codebase) -> None:
    errors = set(tsapp.find_convention("error handling", limit=20)["pattern"])
    assert {"throw new ApiError(...)", "class * extends AppError — custom error"} <= errors
    http = tsapp.find_convention("http")
    assert http.iloc[0]["pattern"] == "fetch(...)" and http.iloc[0]["count"] == 2
    imports = tsapp.find_convention("imports")
    assert imports.iloc[0]["pattern"] == "import { named } from '<relative>'"
    asynchronous = set(tsapp.find_convention("async")["pattern"])
    assert {"async function", "await <call>"} <= asynchronous


def test_python_async_and_http_conventions(pyasync: Codebase) -> None:
    asynchronous = pyasync.find_convention("async", limit=10).set_index("pattern")
    assert asynchronous.loc["async def", "count"] == 4
    assert asynchronous.loc["async with", "files"] == 2
    assert asynchronous.loc["await asyncio.gather(...)", "count"] == 1
    assert "asyncio.gather(...)" not in asynchronous.index  # counted once, with its await
    assert asynchronous.index[0] in {"async def", "async with", "await <call>"}  # the patterns in both files
    http = pyasync.find_convention("api calls").set_index("pattern")
    assert http.loc["httpx.AsyncClient(...)", "files"] == 2
    assert {"client.get(...)", "client.post(...)"} <= set(http.index)


# ---------------------------------------------------------------------------------- from the index, unparsed

SNIPPETS = {
    "python": (RENAMED_INVOICE_TOTAL, UNRELATED, "class Report:\n    def total(self):\n        return 0\n"),
    "typescript": (SNAKE_TS, CAMEL_TS, "class Store {\n  get(key: string) { return key; }\n}\n"),
    "javascript": ("function sum(rows) {\n  let t = 0;\n  for (const r of rows) t += r;\n  return t;\n}\n",),
    "go": ("func Sum(xs []int) int {\n\tt := 0\n\tfor _, x := range xs {\n\t\tt += x\n\t}\n\treturn t\n}\n",),
    "rust": ("fn sum(xs: &[i32]) -> i32 {\n    let mut t = 0;\n    for x in xs { t += x; }\n    t\n}\n",),
    "java": ("class Box {\n  int size() {\n    return items.size();\n  }\n}\n",),
}


def _answers(codebase: Codebase) -> dict[str, pd.DataFrame]:
    """The three operations' answers for every snippet of the repository's languages, and every topic."""
    languages = set(codebase.list_files()["language"].str.replace("tsx", "typescript"))
    out: dict[str, pd.DataFrame] = {}
    for language in sorted(languages & set(SNIPPETS)):
        for i, snippet in enumerate(SNIPPETS[language]):
            out[f"dup {language} {i}"] = codebase.detect_duplication(
                snippet, threshold=0.1, language=language
            )
            out[f"shape {language} {i}"] = codebase.find_similar_patterns(
                snippet, mode="shape", limit=50, language=language
            )
        out[f"statements {language}"] = codebase.find_similar_patterns(
            "x = 1", mode="shape", language=language
        )
    for topic in ("error handling", "logging", "imports", "async", "api calls"):
        out[topic] = codebase.find_convention(topic, limit=50)
    return out


def _parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files the judgment operations parse in this process, from here on."""
    parsed: list[str] = []
    original = judgment.JudgmentMixin._tree

    def counting(self: judgment.JudgmentMixin, text: str, language: str) -> object:
        parsed.append(text)
        return original(self, text, language)

    monkeypatch.setattr(judgment.JudgmentMixin, "_tree", counting)
    return parsed


@pytest.mark.parametrize("fixture", PROFILED, ids=lambda p: p.name)
def test_answers_from_the_stored_profiles_are_those_of_parsing_every_file(
    fixture: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / fixture.name
    shutil.copytree(fixture, root)
    codebase = Codebase(root)
    codebase.wait_ready()
    parsed = _parses(monkeypatch)
    stored = _answers(codebase)
    # The profiles came from the index's own parse; only the conventions were scanned (once, then stored).
    scanned = len(parsed)
    assert scanned == len(codebase.top_files(limit=40))
    assert _answers(codebase).keys() == stored.keys() and len(parsed) == scanned
    # What the operations compute when the index holds nothing for them: every file parsed here.
    monkeypatch.setattr(Codebase, "_judgment_data", lambda self, kind, files: {})
    unstored = Codebase(root)
    unstored.wait_ready()
    computed = _answers(unstored)
    assert len(parsed) > scanned
    assert computed.keys() == stored.keys()
    for name, frame in stored.items():
        pd.testing.assert_frame_equal(frame, computed[name], obj=name)
    assert any(len(frame) for name, frame in stored.items() if name.startswith("dup"))


def test_every_hashed_definition_has_the_profile_a_parse_gives(tmp_path: Path) -> None:
    for fixture in PROFILED:
        root = tmp_path / fixture.name
        shutil.copytree(fixture, root)
        codebase = Codebase(root)
        codebase.wait_ready()
        symbols = codebase.symbol_table()
        symbols = symbols[symbols["shape_hash"] != ""]
        files = sorted(set(symbols["file"]))
        stored = codebase._judgment_data("profiles", files)
        assert set(stored) == set(files), fixture.name
        for file, rows in symbols.groupby("file"):
            language = codebase.language_of(file)
            tree = parse(codebase.source(file).encode(), language)
            for kind, kinds in (("function", ("function", "method")), ("class", ("class",))):
                expected = judgment._definition_shapes(tree, language, kind)
                found = judgment._decoded(stored[file], kind)
                assert found is not None
                for line in rows.loc[rows["kind"].isin(kinds), "line"]:
                    row = found.rows(np.array([line]))[0]
                    assert (row >= 0) == (line in expected), (file, line)
                    if row >= 0:
                        start, end = found.offsets[row], found.offsets[row + 1]
                        got = dict(zip(found.codes[start:end], found.counts[start:end], strict=True))
                        want = dict(zip(expected[line].codes, expected[line].counts, strict=True))
                        assert got == want and found.totals[row] == expected[line].total, (file, line)


def test_the_shape_walk_reads_each_node_by_its_kind_as_by_its_type() -> None:
    """The walk takes a node's token from its kind id, one lookup a file shares across its definitions; it gives
    what reading each node's namedness and type gives, aliased nodes (TypeScript's property_identifier) too."""

    def by_type(node: Node) -> list[str]:
        own = [node.type] if node.is_named and node.type not in shapes._NOISE_TYPES else []
        inner = [token for child in node.children for token in by_type(child)]
        return own + (["(", *inner, ")"] if node.children else [])

    from aries_kernel.codebase.languages import language_for_path

    checked = 0
    for fixture in PROFILED:
        for path in sorted(fixture.rglob("*")):
            language = language_for_path(path.name)
            if language is None or not path.is_file() or path.suffix == ".ipynb":
                continue
            root = parse(path.read_bytes(), language).root_node
            known: dict[int, str | None] = {}
            nodes = [root, *(n for n in judgment._walk(root) if n.type in shapes.DEFINITION_TYPES)]
            for node in nodes:
                assert shapes._walk_types(node, known) == by_type(node), (path, node.start_point)
                checked += 1
    assert checked > 100


# ---------------------------------------------------------------------------------- shapes (no index needed)


def _first_definition(source: str, language: str = "python") -> Node:
    tree = parse(source.encode(), language)
    return tree.root_node.named_children[0]


def test_shape_hash_ignores_names_literals_and_comments() -> None:
    original = _first_definition("def f(a, b):\n    return a + b * 2\n")
    renamed = _first_definition("def g(x, y):\n    # scaled sum\n    return x - y * 7\n")
    longer = _first_definition("def f(a, b):\n    c = a\n    return a + b * 2\n")
    assert shape_hash(original) == shape_hash(renamed)
    assert shape_hash(original) != shape_hash(longer)
    assert ShapeProfile.of(original).similarities([ShapeProfile.of(renamed), None]).tolist() == [1.0, 0.0]
    assert 0.5 < ShapeProfile.of(original).similarities([ShapeProfile.of(longer)])[0] < 1.0


def test_exact_hash_normalizes_whitespace_but_keeps_relative_indentation() -> None:
    top = b"def f(x):\n    if x:\n        return 1\n    return 2"
    nested = b"def f(x):  \n        if x:\n\n            return  1\n        return 2\n"
    moved = b"def f(x):\n    if x:\n        return 1\n        return 2"  # a different Python program
    assert exact_hash(top) == exact_hash(nested)
    assert exact_hash(top) != exact_hash(moved)


@pytest.mark.parametrize(
    ("name", "tokens", "style"),
    [
        ("load_user_config", ["load", "user", "config"], "snake_case"),
        ("loadUserConfig", ["load", "user", "config"], "camelCase"),
        ("HTTPErrorHandler", ["http", "error", "handler"], "PascalCase"),
        ("MAX_RETRIES", ["max", "retries"], "UPPER_CASE"),
        ("_private", ["private"], None),
        ("load_userConfig", ["load", "user", "config"], "mixed"),
    ],
)
def test_identifier_tokens_and_naming_style(name: str, tokens: list[str], style: str | None) -> None:
    assert split_identifier(name) == tokens
    assert naming_style(name) == style


def test_bad_snippets_and_references(shop: Codebase) -> None:
    broken = RENAMED_INVOICE_TOTAL.replace("return round(gross, 3)", "return round(gross,")  # unclosed call
    assert set(shop.detect_duplication(broken, threshold=0.6)["name"]) == {
        "compute_invoice_total",
        "summarize_sales",
    }
    with pytest.raises(ValueError, match="no javascript files"):
        shop.is_consistent_with("function f() {}", "javascript")
    with pytest.raises(ValueError, match="Unknown language"):
        shop.detect_duplication(UNRELATED, language="cobol")
    with pytest.raises(ValueError, match="limit"):
        shop.find_convention("logging", limit=0)


# ---------------------------------------------------------------------------------- first call after a cold index


@pytest.mark.parametrize("fixture", PROFILED, ids=lambda p: p.name)
def test_error_handling_after_a_cold_index_parses_and_reads_no_file(
    fixture: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index's workers scanned every file for error handling from the tree they parsed: the first
    find_convention neither parses a file nor reads one, and answers as a scan of every file does."""
    root = tmp_path / fixture.name
    shutil.copytree(fixture, root)
    codebase = Codebase(root)
    codebase.wait_ready()
    assert codebase.last_run["mode"] == "cold"
    parsed = _parses(monkeypatch)
    read: list[str] = []
    original = Codebase.source
    monkeypatch.setattr(
        Codebase, "source", lambda self, file, typed=False: read.append(file) or original(self, file, typed)
    )
    found = codebase.find_convention("error handling", limit=50)
    assert parsed == [] and read == []
    monkeypatch.setattr(Codebase, "_judgment_data", lambda self, kind, files: {})
    scanned = Codebase(root)
    scanned.wait_ready()
    pd.testing.assert_frame_equal(found, scanned.find_convention("error handling", limit=50))
    assert parsed and read  # which the stored hits saved


def test_duplication_after_a_cold_index_reads_no_file_header(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Which language a snippet is in comes from the records: the first detect_duplication and shape search after
    a cold index do not read every file's header for the roles they do not use."""
    from aries_kernel.codebase import queries

    root = tmp_path / "pyshop"
    shutil.copytree(FIXTURES / "pyshop", root)
    codebase = Codebase(root)
    codebase.wait_ready()
    headers: list[str] = []
    original = queries.read_header
    monkeypatch.setattr(queries, "read_header", lambda root, rel: headers.append(rel) or original(root, rel))
    assert len(codebase.detect_duplication(RENAMED_INVOICE_TOTAL, threshold=0.5))
    assert len(codebase.find_similar_patterns(RENAMED_INVOICE_TOTAL, mode="shape"))
    assert headers == []


def test_python_error_handling_found_by_keyword_is_what_the_query_finds(tmp_path: Path) -> None:
    """The workers find Python's error-handling nodes from their keywords; every rule's answer is the one a query
    over every node gives, keywords in strings, comments and names included."""
    from aries_kernel.codebase.conventions import INDEXED_TOPICS, scan_topics

    text = textwrap.dedent(
        '''
        """raise ValueError in a docstring; class Fake(Exception) too"""
        class ParseError(ValueError):
            class Inner(KeyError):
                pass
        class Plain: pass
        def f(raised, classes, excepted):
            # raise nothing here
            try:
                raise ParseError("x") from None
            except (KeyError, ValueError) as err:
                raise
            except Exception:
                raise RuntimeError
            except:
                pass
            if err != nil:
                return "if err != nil"
            raise_ = "raise"
        '''
    )
    sources = [text] + [p.read_text() for p in sorted((FIXTURES / "pyshop").rglob("*.py"))]
    for source in sources:
        tree = parse(source.encode(), "python")
        by_keyword = scan_topics(tree, source, "python", INDEXED_TOPICS)["error handling"]
        by_query = scan_topics(tree, source, "python", ("error handling", "logging"))["error handling"]
        assert by_keyword == by_query
    found = scan_topics(parse(text.encode(), "python"), text, "python", INDEXED_TOPICS)["error handling"]
    assert [line for _, line, _ in found] == [3, 4, 10, 11, 12, 13, 14, 15, 17]
