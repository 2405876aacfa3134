"""One owner of the vault's SQL: every statement is built in ``aries_kernel/vault/db/``, none in ``Vault``
(vault.py), ``NoteStore`` (store.py) or any other vault module, which call the named operations of
:class:`~aries_kernel.vault.db.VaultIndex` instead. Read from the source (its syntax tree), so a statement
added back outside the family fails here whatever the tests that run it do."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import aries_kernel.vault as vault_pkg

VAULT = Path(vault_pkg.__file__).parent
# Building or running a statement: SQLAlchemy's constructors, and what is called on a statement or connection.
_BUILDERS = {
    "select",
    "text",
    "insert",
    "update",
    "delete",
    "union",
    "literal",
    "bindparam",
    "and_",
    "or_",
    "not_",
}
_ON_STATEMENTS = {
    "execute",
    "exec_driver_sql",
    "scalar",
    "scalars",
    "scalar_subquery",
    "mappings",
    "select_from",
    "returning",
    "on_conflict_do_update",
    "on_conflict_do_nothing",
    "with_only_columns",
}


def statements_built(source: str) -> list[str]:
    """What in ``source`` imports SQLAlchemy or the tables, or builds or runs a statement (``line: what``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import):
            found += [f"{line}: import {a.name}" for a in node.names if a.name.split(".")[0] == "sqlalchemy"]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            names = {a.name for a in node.names}
            if module.split(".")[0] == "sqlalchemy" or module.endswith(".schema") or "schema" in names:
                found.append(f"{line}: from {module} import {', '.join(sorted(names))}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _BUILDERS:
            found.append(f"{line}: {node.func.id}(...)")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in _ON_STATEMENTS:
                found.append(f"{line}: .{node.func.attr}(...)")
        elif isinstance(node, ast.Attribute) and node.attr in {"c", "dialect"}:
            found.append(f"{line}: .{node.attr}")  # a table's columns, or a branch on the backend
    return found


def test_the_check_sees_a_statement_built_as_the_vault_built_them() -> None:
    """The check is not vacuous: the shapes of the statements vault.py and store.py used to build are found."""
    before = (
        "from sqlalchemy import func, select\n"
        "from aries_kernel.vault.schema import notes\n"
        "def note_counts(store):\n"
        "    return store.index.rows(select(func.count()).select_from(notes))\n"
        "def find(conn, key):\n"
        "    return conn.execute(select(notes.c.id).where(notes.c.key == key)).first()\n"
        "def purge(conn):\n"
        "    if conn.dialect.name == 'sqlite':\n"
        "        conn.exec_driver_sql('PRAGMA secure_delete = ON')\n"
    )
    found = statements_built(before)
    assert any("import func, select" in f for f in found)
    assert any("aries_kernel.vault.schema" in f for f in found)
    assert {
        "select(...)",
        ".select_from(...)",
        ".execute(...)",
        ".c",
        ".dialect",
        ".exec_driver_sql(...)",
    } <= {f.split(": ", 1)[1] for f in found}


@pytest.mark.parametrize("name", sorted(p.name for p in VAULT.glob("*.py")))
def test_no_vault_module_outside_db_builds_a_statement(name: str) -> None:
    found = statements_built((VAULT / name).read_text(encoding="utf-8"))
    assert not found, (
        f"aries_kernel/vault/{name} builds SQL; add a named operation to aries_kernel/vault/db/: {found}"
    )


def test_vault_and_store_are_checked() -> None:
    checked = {p.name for p in VAULT.glob("*.py")}
    assert {"vault.py", "store.py"} <= checked
    assert (VAULT / "db" / "index.py").is_file()  # where the statements live instead
