"""Warm start from the stored graph: nothing parsed or resolved, the same graph and rankings as a cold index, a
damaged stored graph rebuilt, and edits after a warm start giving what a cold index of the edited tree gives."""

from __future__ import annotations

import marshal
import os
import sqlite3
import struct
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from traitlets.config import Config

from aries_kernel.codebase import Codebase, indexer, judgment, queries
from aries_kernel.codebase.definitions import SYMBOL_COLUMNS, Definitions
from aries_kernel.codebase.graph import FileGraph
from aries_kernel.codebase.index_key import TAG_BYTES
from aries_kernel.codebase.ranking import Rankings
from aries_kernel.codebase.resolve import Resolver
from aries_kernel.codebase.snapshot import decode, encode
from aries_kernel.codebase.store import IndexStore, Pending

PY_FILES, JS_FILES = 90, 30


def generate(root: Path) -> Path:
    """A mixed repository whose files import each other and use each other's names."""
    package = root / "pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("from .m0 import func_0\n")
    for i in range(PY_FILES):
        a, b = (i * 7 + 3) % PY_FILES, (i * 11 + 5) % PY_FILES
        (package / f"m{i}.py").write_text(
            f"import os\nfrom pkg import m{a}\nfrom .m{b} import func_{b}\n\n\n"
            f"class Thing{i}:\n    def method(self):\n        return func_{a}(os.sep)\n\n\n"
            f"def func_{i}(value):\n    return Thing{b}, shared_{i % 5}, value\n\n\nshared_{i % 5} = {i}\n"
        )
    web = root / "web"
    web.mkdir()
    for i in range(JS_FILES):
        a = (i * 5 + 1) % JS_FILES
        (web / f"a{i}.js").write_text(
            f"import {{ helper{a} }} from './a{a}.js';\nexport function helper{i}() {{ return helper{a}(); }}\n"
        )
        (web / f"t{i}.ts").write_text(
            f"import type {{ Shape{a} }} from './t{a}';\nimport {{ helper{i} }} from './a{i}.js';\n"
            f"export interface Shape{i} {{ size: number }}\nexport const use{i} = (s: Shape{a}) => helper{i}();\n"
        )
    return root


def fresh(root: Path) -> Codebase:
    """A cold index that neither reads nor writes .aries/index.db."""
    codebase = Codebase(root, config=Config({"AriesCodebase": {"persist": False}}))
    codebase.wait_ready()
    return codebase


def opened(root: Path) -> Codebase:
    codebase = Codebase(root)
    codebase.wait_ready()
    return codebase


def assert_same_as(codebase: Codebase, expected: dict[str, Any]) -> None:
    """The same graph and communities; scores equal but for float rounding (the edges' order differs)."""
    found = graph_of(codebase)
    assert [found[k] for k in ("nodes", "edges", "communities", "roles")] == [
        expected[k] for k in ("nodes", "edges", "communities", "roles")
    ]
    assert found["pagerank"] == pytest.approx(expected["pagerank"], abs=1e-12)
    for scores, wanted in zip(found["hits"], expected["hits"], strict=True):
        assert scores == pytest.approx(wanted, abs=1e-12)


def graph_of(codebase: Codebase) -> dict[str, Any]:
    """Everything the graph holds and everything ranked over it."""
    return {
        "nodes": sorted(codebase._graph.node_of),
        "edges": sorted(codebase._graph.edge_rows()),
        "pagerank": codebase._rankings.pagerank(),
        "hits": codebase._rankings.hits(),
        "communities": codebase._rankings.communities(),
        "roles": codebase.file_roles(),
    }


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return generate(tmp_path / "repo")


def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts of parsing, of graph computation, of ranking and of file headers read, from here on."""
    counts = {"parse": 0, "resolve": 0, "weigh": 0, "rank": 0, "header": 0}

    def counting(name: str, function: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            counts[name] += 1
            return function(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(indexer, "parse_files", counting("parse", indexer.parse_files))
    monkeypatch.setattr(Resolver, "resolve", counting("resolve", Resolver.resolve))
    monkeypatch.setattr(FileGraph, "_reference_targets", counting("weigh", FileGraph._reference_targets))
    monkeypatch.setattr(queries, "read_header", counting("header", queries.read_header))
    for score in ("_pagerank", "_hits", "_communities"):
        monkeypatch.setattr(Rankings, score, counting("rank", getattr(Rankings, score)))
    return counts


def test_warm_start_parses_and_resolves_nothing_and_gives_the_cold_graph(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cold = opened(repo)
    assert cold.last_run["mode"] == "cold" and cold.last_run["graph"] == "built"
    expected = graph_of(cold)
    assert len(expected["nodes"]) == 1 + PY_FILES + 2 * JS_FILES
    kinds = {row[2] for row in expected["edges"]}
    assert kinds == {"import", "reference"} and any(row[4] for row in expected["edges"])  # type-only too
    counts = counted(monkeypatch)
    warm = opened(repo)
    assert warm.last_run == {**warm.last_run, "mode": "warm", "parsed": 0, "graph": "loaded"}
    assert graph_of(warm) == expected
    # Nothing parsed, resolved, weighed, ranked or read: what the cold index computed was stored with it.
    assert counts == {"parse": 0, "resolve": 0, "weigh": 0, "rank": 0, "header": 0}
    assert set(expected["roles"].values()) == {"source"} and len(expected["roles"]) == len(expected["nodes"])
    assert graph_of(fresh(repo)) == expected
    # Definition names and kinds are shared across records loaded from the store: one string per distinct one.
    first, second = warm._records["pkg/m1.py"]["symbols"], warm._records["pkg/m2.py"]["symbols"]
    assert [s[1] for s in first] == [s[1] for s in second] == ["class", "method", "function", "variable"]
    assert all(a[1] is b[1] for a, b in zip(first, second, strict=True))
    assert first[1][0] is second[1][0]  # the method's name


def _flip_a_byte(blob: bytes) -> bytes:
    return blob[:-5] + bytes([blob[-5] ^ 1]) + blob[-4:]


def _edge_out_of_range(blob: bytes) -> bytes:
    snapshot = decode(blob)
    source = snapshot.arrays["source"].copy()
    source[0] = len(snapshot.files) + 3
    snapshot.arrays = {**snapshot.arrays, "source": source}
    return b"".join(encode(snapshot))


def _unknown_definition(blob: bytes) -> bytes:
    snapshot = decode(blob)
    defined = snapshot.arrays["defined"].copy()
    defined[0] = len(snapshot.vocabulary)
    snapshot.arrays = {**snapshot.arrays, "defined": defined}
    return b"".join(encode(snapshot))


@pytest.mark.parametrize(
    ("damage", "signed"),
    [
        (_flip_a_byte, False),  # tampered: the MAC no longer verifies
        (lambda blob: blob[: len(blob) // 2], True),  # truncated, yet signed with the user's key
        (lambda blob: b"\x00" * 64, True),
        (_edge_out_of_range, True),
        (_unknown_definition, True),
    ],
)
def test_a_damaged_stored_graph_is_rebuilt(repo: Path, damage: Any, signed: bool) -> None:
    expected = graph_of(opened(repo))
    path = repo / ".aries" / "index.db"
    store = IndexStore(path)
    try:
        found = store.load_blob("graph")
        assert found is not None
        blob = found[1]
        if signed:
            store.save_blob("graph", damage(blob))
        else:
            with store._lock, store._conn:
                store._conn.execute("UPDATE graph SET blob = ?", (_flip_a_byte(blob),))
            assert store.load_blob("graph") is None
    finally:
        store.close()
    rebuilt = opened(repo)
    assert rebuilt.last_run == {**rebuilt.last_run, "mode": "warm", "parsed": 0, "graph": "built"}
    assert graph_of(rebuilt) == expected
    again = opened(repo)  # the rebuilt graph was stored in place of the damaged one
    assert again.last_run["graph"] == "loaded" and graph_of(again) == expected


def _forge_rankings_tag(store: IndexStore, found: Any) -> None:
    with store._conn:
        store._conn.execute("UPDATE graph SET tag = ? WHERE name = 'rankings'", (b"0" * 32,))


@pytest.mark.parametrize(
    "damage",
    [
        lambda store, found: store.save_blob("rankings", marshal.dumps(("not the graph's MAC", {}))),
        lambda store, found: store.save_blob("rankings", marshal.dumps((found[0], {"pagerank": (1.0,)}))),
        lambda store, found: store.save_blob("rankings", b"\xff not marshal"),
        _forge_rankings_tag,
    ],
)
def test_stored_rankings_of_another_graph_or_damaged_are_recomputed(
    repo: Path, monkeypatch: pytest.MonkeyPatch, damage: Any
) -> None:
    expected = graph_of(opened(repo))
    store = IndexStore(repo / ".aries" / "index.db")
    try:
        damage(store, store.load_blob("graph"))
    finally:
        store.close()
    counts = counted(monkeypatch)
    warm = opened(repo)
    assert warm.last_run["graph"] == "loaded"
    assert graph_of(warm) == expected and counts["rank"] == 3
    counts["rank"] = 0
    assert graph_of(opened(repo)) == expected and counts["rank"] == 0  # stored again, right this time


def edit(repo: Path) -> None:
    """Edits that move names between files and change the file set and the imports."""
    (repo / "pkg" / "m3.py").write_text(
        "from pkg import m40\n\n\ndef func_3(value):\n    return brand_new(value), func_40\n\n\n"
        "def func_7():\n    return 7\n"
    )
    (repo / "pkg" / "m8.py").unlink()
    (repo / "pkg" / "extra.py").write_text(
        "from .m3 import func_3\n\n\ndef brand_new(x):\n    return func_3(x)\n"
    )
    (repo / "web" / "t2.ts").write_text("import { helper9 } from './a9.js';\nexport type Shape2 = number;\n")


def test_edits_after_a_warm_start_update_the_graph_as_a_cold_index_does(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened(repo)
    warm = opened(repo)
    assert warm.last_run["graph"] == "loaded"
    warm.top_files()  # rankings cached before the edit, as in real use
    edit(repo)
    changes = warm.reindex(["pkg/m3.py", "pkg/m8.py", "pkg/extra.py", "web/t2.ts"])
    assert dict(zip(changes["file"], changes["change"], strict=True)) == {
        "pkg/extra.py": "added",
        "pkg/m3.py": "modified",
        "pkg/m8.py": "deleted",
        "web/t2.ts": "modified",
    }
    expected = graph_of(fresh(repo))
    assert any(row[:2] == ("pkg/m3.py", "pkg/extra.py") for row in expected["edges"])  # brand_new moved in
    assert_same_as(warm, expected)
    # The next start finds the stored graph older than the records: it applies just those four changes.
    counts = counted(monkeypatch)
    restarted = opened(repo)
    assert restarted.last_run == {**restarted.last_run, "parsed": 0, "graph": "built"}
    assert counts["parse"] == 0 and 0 < counts["weigh"] < PY_FILES
    assert_same_as(restarted, expected)
    assert opened(repo).last_run["graph"] == "loaded"


def test_a_record_that_no_longer_verifies_is_found_when_read_and_its_file_parsed_again(repo: Path) -> None:
    # A warm start reads records only when they are used; one tampered with after the first row (which the
    # start checks) is found then: never unmarshalled, its file parsed again, the answers those of a cold index.
    opened(repo)
    expected = fresh(repo)
    db = repo / ".aries" / "index.db"
    rel = "pkg/m7.py"
    with closing(sqlite3.connect(db)) as conn, conn:
        (blob,) = conn.execute("SELECT record FROM files WHERE path = ?", (rel,)).fetchone()
        planted = marshal.loads(blob[TAG_BYTES:])
        planted["symbols"] = (("PLANTED", "function", 1, 2, "def PLANTED()", "", None, None),)
        conn.execute(
            "UPDATE files SET record = ? WHERE path = ?", (blob[:TAG_BYTES] + marshal.dumps(planted), rel)
        )
    warm = opened(repo)
    assert warm.last_run["parsed"] == 0 and warm.last_run["graph"] == "loaded"
    assert ".aries/index.db" not in set(warm.skipped()["file"])
    assert graph_of(warm) == graph_of(expected)
    table = warm.symbol_table()
    assert "PLANTED" not in set(table["name"])
    assert table.equals(expected.symbol_table())
    # The record parsed again was stored: the next start reads it from the store.
    again = opened(repo)
    assert again._records[rel] == expected._records[rel] and again.last_run["parsed"] == 0


def test_a_bad_record_whose_file_changed_since_is_reindexed_by_the_next_reindex(repo: Path) -> None:
    opened(repo)
    rel = "pkg/m3.py"
    with closing(sqlite3.connect(repo / ".aries" / "index.db")) as conn, conn:
        conn.execute("UPDATE files SET record = ? WHERE path = ?", (b"\0" * 64, rel))
    # The file changes without a new size or mtime, so the walk keeps its stored record, which does not verify
    # when read: the record parsed then holds the new content, and the graph catches up on the next reindex.
    path = repo / rel
    stat = path.stat()
    path.write_text(path.read_text().replace("def func_3(value)", "def func_x(value)"))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    warm = opened(repo)
    assert warm.last_run["parsed"] == 0 and warm.last_run["graph"] == "loaded"
    assert "func_x" in {s[0] for s in warm._records[rel]["symbols"]}
    assert list(warm.reindex()["file"]) == [rel]
    assert graph_of(warm) == graph_of(fresh(repo))


GO_FILES = {
    "go.mod": "module example.com/shop\n",
    "cart/cart.go": 'package cart\n\nimport "example.com/shop/money"\n\nfunc Total() money.Amount { return 0 }\n',
    "money/money.go": "package money\n\ntype Amount int\n",
    "cmd/main.go": 'package main\n\nimport "example.com/shop/cart"\n\nfunc main() { cart.Total() }\n',
}


def test_editing_go_mod_between_starts_gives_the_edges_of_a_cold_index(tmp_path: Path) -> None:
    root = tmp_path / "shop"
    for rel, text in GO_FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    first = opened(root)
    imports = {(s, t) for s, t, kind, _, _ in first._graph.edge_rows() if kind == "import"}
    assert imports == {("cart/cart.go", "money/money.go"), ("cmd/main.go", "cart/cart.go")}
    (root / "go.mod").write_text("module example.com/renamed\n")  # the imports name another module now
    warm = opened(root)
    assert warm.last_run["mode"] == "warm" and warm.last_run["parsed"] == 0
    assert warm.last_run["graph"] == "built"  # the stored graph was made under the old go.mod
    cold = fresh(root)
    assert sorted(warm._graph.edge_rows()) == sorted(cold._graph.edge_rows())
    assert not any(kind == "import" for _, _, kind, _, _ in warm._graph.edge_rows())


def judgment_answers(codebase: Codebase) -> list[Any]:
    """The first calls of the three judgment operations that read the index's hashes, profiles and conventions."""
    function = "def f(value):\n    copy = value\n    return Thing1, shared_1, copy\n"
    return [
        codebase.detect_duplication(function, threshold=0.2),
        codebase.find_similar_patterns(
            "class Copy:\n    def method(self):\n        return 1\n", mode="shape"
        ),
        codebase.find_convention("imports"),
    ]


def test_judgment_calls_after_a_warm_start_parse_nothing(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cold = opened(repo)
    expected = judgment_answers(cold)  # the conventions of the files scanned are stored for the next kernel
    similar = expected[0]["similarity"]
    assert len(similar) >= PY_FILES and ((0.2 < similar) & (similar < 1)).any()
    assert len(expected[1]) and len(expected[2])
    counts = counted(monkeypatch)
    trees: list[str] = []
    original = judgment.JudgmentMixin._tree

    def parse_here(self: judgment.JudgmentMixin, text: str, language: str) -> Any:
        trees.append(text)
        return original(self, text, language)

    monkeypatch.setattr(judgment.JudgmentMixin, "_tree", parse_here)
    warm = opened(repo)
    found = judgment_answers(warm)
    assert warm.last_run["mode"] == "warm" and counts["parse"] == 0 and trees == []
    for got, wanted in zip(found, expected, strict=True):
        pd.testing.assert_frame_equal(got, wanted)


def test_the_definitions_after_a_warm_start_are_read_from_the_records_without_keeping_them(
    repo: Path,
) -> None:
    # symbol_table(), find_symbol, search and the judgment calls read every definition, a batch of records at a
    # time: a warm start's pending records stay pending (read again when a query needs one), and each answer is
    # a cold index's.
    expected = fresh(repo)
    opened(repo)
    warm = opened(repo)
    assert warm.last_run["mode"] == "warm"
    pending = {rel for rel, value in warm._records._data.items() if type(value) is Pending}
    assert len(pending) >= PY_FILES + 2 * JS_FILES
    table = warm.symbol_table()
    # Row for row what the records hold, in their order (not only what a cold index's table says).
    held = [
        (s[0], s[1], rel, s[2], s[3], s[4], record["language"], s[6] or "", s[7] or "", s[5])
        for rel, record in expected._records.items()
        if record["status"] != "skipped"
        for s in record["symbols"]
    ]
    assert list(table.itertuples(index=False, name=None)) == held
    assert list(table.columns) == list(SYMBOL_COLUMNS)
    pd.testing.assert_frame_equal(table, expected.symbol_table())
    snippet = "def func_1(value):\n    return Thing1, shared_1, value\n"
    calls = {
        "detect_duplication": lambda cb: cb.detect_duplication(snippet, threshold=0.5),
        "shape": lambda cb: cb.find_similar_patterns(snippet, mode="shape", limit=500),
        "name": lambda cb: cb.find_similar_patterns("func thing", limit=500),
        "signature": lambda cb: cb.find_similar_patterns("def func_*(value)", mode="signature", limit=500),
        "kind": lambda cb: cb.find_similar_patterns("function helper*", mode="signature", limit=500),
        "find_symbol": lambda cb: cb.find_symbol("Thing7.method"),
        "find_symbol substring": lambda cb: cb.find_symbol("HELPER1"),
        "search": lambda cb: cb.search("helper", limit=None),
        "suggest_location": lambda cb: cb.suggest_location("thing method helper"),
    }
    for label, call in calls.items():
        answer = call(warm)
        assert len(answer), label
        pd.testing.assert_frame_equal(answer, call(expected), obj=label)
    dup = calls["detect_duplication"](warm)
    assert len(dup) >= PY_FILES and set(dup["kind"]) == {"structural"}
    assert set(calls["signature"](warm)["signature"]) == {f"def func_{i}(value)" for i in range(PY_FILES)}
    assert calls["find_symbol"](warm)[["file", "signature"]].values.tolist() == [
        ["pkg/m7.py", "def method(self)"]
    ]
    still = {rel for rel, value in warm._records._data.items() if type(value) is Pending}
    assert still == pending
    # The table is the caller's: changing it changes neither the next answer nor the records.
    table.loc[:, "name"] = "changed"
    assert "changed" not in set(warm.symbol_table()["name"])
    assert warm._records["pkg/m3.py"]["symbols"] == expected._records["pkg/m3.py"]["symbols"]


def test_a_definition_whose_file_changed_since_the_table_was_built_shows_no_stale_signature(
    repo: Path,
) -> None:
    # Definitions find a signature by the definition's place in its record; a record replaced since (a reindex)
    # that no longer holds the same name on the same line gives "" rather than another definition's signature.
    codebase = fresh(repo)
    definitions = Definitions.of(codebase._records)
    rows = np.flatnonzero(definitions.file == "pkg/m4.py")
    before = definitions.frame(rows, ["name", "signature"])
    assert "def func_4(value)" in set(before["signature"])
    (repo / "pkg/m4.py").write_text("\n\ndef renamed(value):\n    return value\n")
    codebase.reindex()
    after = definitions.frame(rows, ["name", "signature"])
    assert list(after["name"]) == list(before["name"])
    assert set(after["signature"]) == {""}


def test_listings_after_a_warm_start_read_the_records_without_keeping_them(repo: Path) -> None:
    # The first warm start after a cold index that answered nothing computes the file roles; it and the
    # listings read every record once, and keep none.
    expected = fresh(repo)
    opened(repo)
    warm = opened(repo)
    pending = {rel for rel, value in warm._records._data.items() if type(value) is Pending}
    assert len(pending) >= PY_FILES + 2 * JS_FILES
    assert warm.file_roles() == expected.file_roles()
    for listing in ("list_files", "skipped"):
        pd.testing.assert_frame_equal(getattr(warm, listing)(), getattr(expected, listing)(), obj=listing)
    assert {rel for rel, value in warm._records._data.items() if type(value) is Pending} == pending


def _name_and_shape_answers(codebase: Codebase) -> list[pd.DataFrame]:
    # Answers that read no signature, so that they need no record.
    snippet = "def func_1(value):\n    return Thing1, shared_1, value\n"
    return [
        codebase.detect_duplication(snippet, threshold=0.5),
        codebase.find_similar_patterns(snippet, mode="shape", limit=500),
        codebase.find_similar_patterns("func thing", limit=500),
    ]


def test_a_warm_start_loads_the_stored_definitions_and_reads_no_record_for_them(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = fresh(repo)
    opened(repo)
    opened(repo).find_symbol("func_1")  # the first warm start reads the records and stores the definitions
    wanted = _name_and_shape_answers(expected)
    warm = opened(repo)
    pending = {rel for rel, value in warm._records._data.items() if type(value) is Pending}
    monkeypatch.setattr(Definitions, "of", lambda records: pytest.fail("read the records again"))
    for found, answer in zip(_name_and_shape_answers(warm), wanted, strict=True):
        pd.testing.assert_frame_equal(found, answer)
    assert {rel for rel, value in warm._records._data.items() if type(value) is Pending} == pending
    monkeypatch.undo()
    pd.testing.assert_frame_equal(warm.find_symbol("Thing7.method"), expected.find_symbol("Thing7.method"))
    pd.testing.assert_frame_equal(warm.symbol_table(), expected.symbol_table())


def test_stored_definitions_of_another_graph_or_malformed_ones_are_read_again(
    repo: Path, caplog: pytest.LogCaptureFixture
) -> None:
    opened(repo)
    opened(repo).find_symbol("func_1")
    # An edit after they were stored: the graph is not the stored one, so they are not used.
    (repo / "pkg/m4.py").write_text("def renamed_4(value):\n    return value\n")
    edited = opened(repo)
    assert set(edited.find_symbol("renamed_4")["file"]) == {"pkg/m4.py"}
    assert edited.find_symbol("func_4").empty or "pkg/m4.py" not in set(edited.find_symbol("func_4")["file"])
    pd.testing.assert_frame_equal(edited.symbol_table(), fresh(repo).symbol_table())
    # Verified (written with the index's key) yet not what this code writes: a warning, then read again.
    warm = opened(repo)
    assert warm._store is not None and warm._graph_tag is not None
    warm._store.save_blob("definitions", marshal.dumps((warm._graph_tag, ("not", "definitions"))))
    again = opened(repo)
    with caplog.at_level("WARNING"):
        table = again.symbol_table()
    assert "stored definitions" in caplog.text and "do not load" in caplog.text
    pd.testing.assert_frame_equal(table, fresh(repo).symbol_table())
    # ...and stored again, well formed this time.
    pd.testing.assert_frame_equal(opened(repo).symbol_table(), table)


def _blob(header: Any, columns: bytes = b"") -> bytes:
    body = marshal.dumps(header)
    return struct.pack("<Q", len(body)) + body + b"\0" * (-len(body) % 8) + columns


_ONE_ROW = (
    b"tag",
    ("f.py",),
    ("python",),
    np.array([1], dtype=np.int64).tobytes(),
    ("a",),
    ("function",),
    ("",),
)


@pytest.mark.parametrize(
    "blob",
    [
        b"",
        b"\xff" * 8,  # a header longer than the blob
        _blob(("not", "definitions")),
        _blob(_ONE_ROW),  # no columns
        _blob(_ONE_ROW, b"\0" * (3 * 8 + 2 * 32 + 1)),  # one byte too many
        _blob((*_ONE_ROW[:4], (1,), *_ONE_ROW[5:]), b"\0" * (3 * 8 + 2 * 32)),  # a name that is not a string
        _blob((*_ONE_ROW[:3], np.array([2], dtype=np.int64).tobytes(), *_ONE_ROW[4:]), b"\0" * 88),
    ],
)
def test_malformed_stored_definitions_raise_value_error(blob: bytes) -> None:
    with pytest.raises(ValueError):
        Definitions.from_blob(None, blob, b"tag")  # type: ignore[arg-type]


def test_stored_definitions_read_back_as_they_were(repo: Path) -> None:
    codebase = fresh(repo)
    definitions = Definitions.of(codebase._records)
    blob = b"".join(definitions.blob(b"graph"))
    back = Definitions.from_blob(codebase._records, blob, b"graph")
    assert back is not None
    pd.testing.assert_frame_equal(back.frame(), definitions.frame())
    assert len(back) == len(definitions) > PY_FILES
    assert Definitions.from_blob(codebase._records, blob, b"another graph") is None
    one_row = _blob(_ONE_ROW, np.array([3, 4, 0], dtype=np.int64).tobytes() + b"s" * 32 + b"e" * 32)
    single = Definitions.from_blob(codebase._records, one_row, b"tag")
    assert single is not None
    assert single.frame(columns=["name", "file", "line", "end_line", "shape_hash"]).values.tolist() == [
        ["a", "f.py", 3, 4, "s" * 32]
    ]


def test_a_definitions_blob_planted_without_the_key_is_refused(repo: Path) -> None:
    # A blob written into index.db by anyone but the index (no key, so no valid MAC) is not loaded: the table is
    # read from the records, and a name the planted blob holds is not found.
    opened(repo)
    warm = opened(repo)
    warm.find_symbol("func_1")
    assert warm._graph_tag is not None
    forged = Definitions.of(warm._records)
    planted = Definitions(**{**forged.__dict__, "name": np.full(len(forged), "PLANTED", dtype=object)})
    with closing(sqlite3.connect(repo / ".aries" / "index.db")) as conn, conn:
        conn.execute(
            "UPDATE graph SET blob = ? WHERE name = 'definitions'", (b"".join(planted.blob(warm._graph_tag)),)
        )
    again = opened(repo)
    assert again.find_symbol("PLANTED").empty
    assert list(again.find_symbol("func_1")["file"]) == ["pkg/m1.py"]
