"""The static hidden-state check: which names each code cell uses that no earlier cell defines.

A notebook that works in the kernel that ran it may fail in a fresh one: a cell uses a name that a deleted cell
defined, or one a later cell defines (the cells ran out of order). Nothing is executed here. Each code cell, in
file order, goes through IPython's input transforms (``%magic`` and ``!cmd`` lines become calls, so they parse;
``%%time`` and ``%%capture`` cells are read as their body, other ``%%`` cells are not Python and are skipped)
and then :mod:`ast`, and the names it needs from before it are those it reads before anything earlier in the
notebook, or earlier in the cell, binds them.

What binds a name: assignment (augmented and annotated ones included), ``for`` and ``with`` targets, imports,
``def`` and ``class``, ``except ... as`` (until the handler ends), the walrus, ``match`` captures; ``del``
unbinds it. Comprehension variables stay inside their comprehension. ``from m import *`` binds names that are
unknown without importing ``m``: names that may come from it are not reported, and the cell is named.

Names read inside a function body are needed when the function is *used*, not when it is defined: a use of its
name (a call, or passing it on) needs, at that point, the global names its body reads, and binds the names it
declares ``global`` and assigns; a class's methods count the same way at each use of the class, its body at once.
A lambda assigned to a name counts like a function; any other lambda, a comprehension or a generator expression,
as read where it stands. A function no cell uses is not checked. Builtins and the names a fresh kernel starts with
(IPython's ``In``/``Out``/``_``..., the Aries REPL body) are never reported.
"""

from __future__ import annotations

import ast
import builtins
import re
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "MAX_CELL_CHARS",
    "CellNames",
    "Finding",
    "analyse_cells",
    "fresh_names",
    "hidden_frame",
    "hidden_state",
    "missing_names",
]

# A cell longer than this is not parsed (a generated 1 MB cell would hold the kernel's thread for seconds).
MAX_CELL_CHARS = 200_000

# Names every IPython kernel starts with, and the history names it makes as cells run.
_IPYTHON_NAMES = frozenset(
    {
        "In",
        "Out",
        "get_ipython",
        "exit",
        "quit",
        "display",
        "_",
        "__",
        "___",
        "_i",
        "_ii",
        "_iii",
        "_ih",
        "_oh",
        "_dh",
    }
)
_HISTORY = re.compile(r"_i{0,3}\d+|__\w+__")
# Cell magics whose body is Python run in the user's namespace.
_PYTHON_CELL_MAGICS = ("%%time", "%%capture")


def fresh_names(shell: Any = None) -> frozenset[str]:
    """Names a fresh kernel has before any cell runs: builtins, IPython's own, and what ``shell`` hides from
    ``%who`` (IPython's names and the Aries REPL body)."""
    hidden = getattr(shell, "user_ns_hidden", None) or {}
    return (
        frozenset(dir(builtins))
        | _IPYTHON_NAMES
        | frozenset(name for name in hidden if isinstance(name, str))
    )


@dataclass(frozen=True)
class _Deferred:
    """What using a function (or class) needs and binds: the global names its body reads, those it assigns."""

    needs: frozenset[str]
    binds: frozenset[str]


@dataclass
class CellNames:
    """The static reading of one code cell."""

    needs: list[str] = field(default_factory=list)  # names read before the notebook or the cell bound them
    binds: set[str] = field(default_factory=set)  # names the cell binds (directly or through a use)
    star: list[str] = field(default_factory=list)  # modules of its ``from m import *``
    note: str = ""  # why the cell was not read ("" when it was)
    after_star: bool = False  # a star import before it (or in it) may define what it needs


# ------------------------------------------------------------------------------------ scopes of function bodies


def _target_names(node: ast.AST) -> Iterator[str]:
    """The names an assignment target binds (``a``, ``a, *b``, ``[a, (b, c)]``); attributes bind none."""
    if isinstance(node, ast.Name):
        yield node.id
    elif isinstance(node, ast.Starred):
        yield from _target_names(node.value)
    elif isinstance(node, (ast.Tuple, ast.List)):
        for element in node.elts:
            yield from _target_names(element)


def _import_names(node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    for alias in node.names:
        if alias.name != "*":
            yield alias.asname or alias.name.split(".")[0]


class _Scope(ast.NodeVisitor):
    """The names one function, lambda, class or comprehension scope reads and binds, and its inner scopes.

    ``kind`` is "function", "class" or "comprehension". Walrus targets in a comprehension belong to the nearest
    enclosing scope that is not one, which the visitor of that scope records as its own binding.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.reads: set[str] = set()
        self.binds: set[str] = set()
        self.globals: set[str] = set()
        self.nonlocals: set[str] = set()
        self.inner: list[_Scope] = []
        self.walrus: set[str] = set()  # comprehension only: walrus targets handed to the enclosing scope

    # Nodes that open a scope: what they evaluate here, and the scope they open.
    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for expression in [*node.decorator_list, *_defaults(node.args), *_annotations(node)]:
            self.visit(expression)
        self.binds.add(node.name)
        self.inner.append(_function_scope(node.args, node.body))

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        for expression in _defaults(node.args):
            self.visit(expression)
        self.inner.append(_function_scope(node.args, [node.body]))

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for expression in [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]:
            self.visit(expression)
        self.binds.add(node.name)
        self.inner.append(_class_scope(node.body))

    def _comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp) -> None:
        self.visit(node.generators[0].iter)  # the first iterable is evaluated in the enclosing scope
        scope = _comprehension_scope(node)
        self.inner.append(scope)
        self._take_walrus(scope.walrus)

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = _comprehension

    def _take_walrus(self, names: set[str]) -> None:
        if self.kind == "comprehension":
            self.walrus |= names
        else:
            self.binds |= names

    # Statements and expressions that bind.
    def visit_Name(self, node: ast.Name) -> None:
        (self.reads if isinstance(node.ctx, ast.Load) else self.binds).add(node.id)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        self._take_walrus({node.target.id})

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.target, ast.Name):
            self.reads.add(node.target.id)
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import | ast.ImportFrom) -> None:
        self.binds.update(_import_names(node))

    visit_ImportFrom = visit_Import

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self.binds.add(node.name)
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        self.globals.update(node.names)

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        self.nonlocals.update(node.names)

    def visit_MatchAs(self, node: ast.MatchAs) -> None:
        if node.name:
            self.binds.add(node.name)
        self.generic_visit(node)

    def visit_MatchStar(self, node: ast.MatchStar) -> None:
        if node.name:
            self.binds.add(node.name)

    def visit_MatchMapping(self, node: ast.MatchMapping) -> None:
        if node.rest:
            self.binds.add(node.rest)
        self.generic_visit(node)

    def free(self) -> _Deferred:
        """The global names this scope and its inner ones read, and the globals they assign."""
        local = self.binds - self.globals - self.nonlocals
        needs = {name for name in self.reads if name not in local and name not in self.nonlocals}
        binds = self.binds & self.globals
        for scope in self.inner:
            deferred = scope.free()
            # A class body's names are not visible to its methods; every other scope sees its parents' locals.
            needs |= deferred.needs - (set() if self.kind == "class" else local)
            binds |= deferred.binds
        return _Deferred(frozenset(needs), frozenset(binds))


def _defaults(args: ast.arguments) -> list[ast.expr]:
    return [*args.defaults, *(d for d in args.kw_defaults if d is not None)]


def _annotations(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.expr]:
    args = node.args
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
    found = [arg.annotation for arg in every if arg is not None and arg.annotation is not None]
    return found + ([node.returns] if node.returns is not None else [])


def _function_scope(args: ast.arguments, body: Sequence[ast.AST]) -> _Scope:
    scope = _Scope("function")
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
    scope.binds.update(arg.arg for arg in every if arg is not None)
    for statement in body:
        scope.visit(statement)
    return scope


def _class_scope(body: Sequence[ast.AST]) -> _Scope:
    scope = _Scope("class")
    for statement in body:
        scope.visit(statement)
    return scope


def _comprehension_scope(node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp) -> _Scope:
    scope = _Scope("comprehension")
    for number, generator in enumerate(node.generators):
        if number:
            scope.visit(generator.iter)
        scope.binds.update(_target_names(generator.target))
        for condition in generator.ifs:
            scope.visit(condition)
    for part in (node.key, node.value) if isinstance(node, ast.DictComp) else (node.elt,):
        scope.visit(part)
    return scope


# ------------------------------------------------------------------------------------- the top level, in order


class _TopLevel(ast.NodeVisitor):
    """Walks one cell's top level in execution order against the notebook's state so far."""

    def __init__(self, state: _State, cell: CellNames) -> None:
        self.state = state
        self.cell = cell

    def read(self, name: str) -> None:
        state = self.state
        if name in state.bound:
            state.use(name, self.read, self.bind)
        elif name not in state.fresh and not _HISTORY.fullmatch(name) and name not in self.cell.needs:
            self.cell.needs.append(name)

    def bind(self, name: str) -> None:
        self.state.bound.add(name)
        self.state.deferred.pop(name, None)
        self.cell.binds.add(name)

    def bind_target(self, target: ast.AST) -> None:
        if isinstance(target, ast.Name):
            self.bind(target.id)
        elif isinstance(target, ast.Starred):
            self.bind_target(target.value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self.bind_target(element)
        else:  # an attribute or subscript target reads its object and index
            self.visit(target)

    def run_scope(self, scope: _Scope) -> None:
        """A scope evaluated where it stands (a comprehension, a lambda not kept in a name, a class body)."""
        deferred = scope.free()
        for name in sorted(deferred.needs):
            self.read(name)
        for name in sorted(deferred.binds | scope.walrus):
            self.bind(name)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self.read(node.id)
        elif isinstance(node.ctx, ast.Store):
            self.bind(node.id)
        else:  # del x: x must exist, and is gone after
            self.read(node.id)
            self.state.bound.discard(node.id)
            self.state.deferred.pop(node.id, None)

    def visit_Call(self, node: ast.Call) -> None:
        code = _timed_code(node)
        if code is None:
            self.generic_visit(node)
            return
        module, _ = _python(code, lambda text: text)  # `%time x = f()` runs its statement in the namespace
        for statement in module.body if module is not None else []:
            self.visit(statement)

    def visit_Assign(self, node: ast.Assign) -> None:
        if (
            isinstance(node.value, ast.Lambda)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            self._define(node.targets[0].id, node.value)
            return
        self.visit(node.value)
        for target in node.targets:
            self.bind_target(target)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.visit(node.annotation)
        if node.value is not None:
            self.visit(node.value)
            self.bind_target(node.target)
        elif not isinstance(node.target, ast.Name):
            self.visit(node.target)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.target, ast.Name):
            self.read(node.target.id)
            self.visit(node.value)
            self.bind(node.target.id)
        else:
            self.visit(node.target)
            self.visit(node.value)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        self.bind(node.target.id)

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self.visit(node.iter)
        self.bind_target(node.target)
        for statement in [*node.body, *node.orelse]:
            self.visit(statement)

    visit_AsyncFor = visit_For

    def visit_With(self, node: ast.With | ast.AsyncWith) -> None:
        for item in node.items:
            self.visit(item.context_expr)
            if item.optional_vars is not None:
                self.bind_target(item.optional_vars)
        for statement in node.body:
            self.visit(statement)

    visit_AsyncWith = visit_With

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.type is not None:
            self.visit(node.type)
        if node.name:
            self.bind(node.name)
        for statement in node.body:
            self.visit(statement)
        if node.name:  # Python deletes the name when the handler ends
            self.state.bound.discard(node.name)

    def visit_Import(self, node: ast.Import) -> None:
        for name in _import_names(node):
            self.bind(name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if any(alias.name == "*" for alias in node.names):
            module = "." * node.level + (node.module or "")
            self.cell.star.append(module)
            self.state.star = True
        for name in _import_names(node):
            self.bind(name)

    def visit_MatchAs(self, node: ast.MatchAs) -> None:
        if node.pattern is not None:
            self.visit(node.pattern)
        if node.name:
            self.bind(node.name)

    def visit_MatchStar(self, node: ast.MatchStar) -> None:
        if node.name:
            self.bind(node.name)

    def visit_MatchMapping(self, node: ast.MatchMapping) -> None:
        for key in node.keys:
            self.visit(key)
        for pattern in node.patterns:
            self.visit(pattern)
        if node.rest:
            self.bind(node.rest)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for expression in [*node.decorator_list, *_defaults(node.args), *_annotations(node)]:
            self.visit(expression)
        self._define(node.name, node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def _define(self, name: str, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        if isinstance(node, ast.Lambda):
            for expression in _defaults(node.args):
                self.visit(expression)
            scope = _function_scope(node.args, [node.body])
        else:
            scope = _function_scope(node.args, node.body)
        self.bind(name)
        self.state.deferred[name] = scope.free()

    def visit_Lambda(self, node: ast.Lambda) -> None:
        for expression in _defaults(node.args):
            self.visit(expression)
        self.run_scope(_function_scope(node.args, [node.body]))

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for expression in [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]:
            self.visit(expression)
        body = _class_scope(node.body)
        now = body.reads - (body.binds - body.globals)  # the class body runs now; its methods when used
        methods = []
        for scope in body.inner:
            if scope.kind == "comprehension":
                now |= scope.free().needs
            else:
                methods.append(scope.free())
        for name in sorted(now):
            self.read(name)
        self.bind(node.name)
        self.state.deferred[node.name] = _Deferred(
            frozenset().union(*(m.needs for m in methods)),
            frozenset(body.binds & body.globals).union(*(m.binds for m in methods)),
        )

    def _comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp) -> None:
        self.visit(node.generators[0].iter)
        self.run_scope(_comprehension_scope(node))

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = _comprehension


@dataclass
class _State:
    """The notebook as far as it has been read: names bound, functions and classes by name, star imports."""

    fresh: frozenset[str]
    bound: set[str] = field(default_factory=set)
    deferred: dict[str, _Deferred] = field(default_factory=dict)
    star: bool = False
    _using: set[str] = field(default_factory=set)

    def use(self, name: str, read: Callable[[str], None], bind: Callable[[str], None]) -> None:
        """A use of a bound name: a function's (or class's) body needs its globals now and binds its own."""
        deferred = self.deferred.get(name)
        if deferred is None or name in self._using:  # not a function, or a recursive use
            return
        self._using.add(name)
        try:
            for needed in sorted(deferred.needs):
                read(needed)
            for bound in sorted(deferred.binds):
                bind(bound)
        finally:
            self._using.discard(name)


def _python(source: str, transform: Callable[[str], str]) -> tuple[ast.Module | None, str]:
    """The cell as a module (after IPython's transforms), or None and why it is not read."""
    if len(source) > MAX_CELL_CHARS:
        return None, f"{len(source):,} characters, over the {MAX_CELL_CHARS:,} the check reads"
    if source.lstrip().startswith("%%"):
        first, _, body = source.lstrip().partition("\n")
        magic, *words = first.split()
        if magic not in _PYTHON_CELL_MAGICS:
            return None, f"a {magic} cell (not Python)"
        # %%time and %%capture run their body in the namespace; `%%capture out` then binds out.
        names = [word for word in words if word.isidentifier()][:1] if magic == "%%capture" else []
        source = body + "".join(f"\n{name} = None" for name in names)
    try:
        code = transform(source)
        with warnings.catch_warnings():
            warnings.simplefilter(
                "ignore"
            )  # invalid escape sequences and the like are not this check's business
            return ast.parse(code), ""
    except (SyntaxError, ValueError) as exc:  # ValueError: NUL bytes
        return None, f"not valid Python ({type(exc).__name__}: {exc})"
    except (RecursionError, MemoryError):
        return None, "nested too deeply to parse"


def _timed_code(node: ast.Call) -> str | None:
    """The statement of ``get_ipython().run_line_magic('time', '<statement>')`` (what ``%time`` becomes)."""
    function = node.func
    if (
        isinstance(function, ast.Attribute)
        and function.attr == "run_line_magic"
        and len(node.args) == 2
        and all(isinstance(arg, ast.Constant) and isinstance(arg.value, str) for arg in node.args)
        and node.args[0].value == "time"  # type: ignore[attr-defined]
    ):
        return str(node.args[1].value)  # type: ignore[attr-defined]
    return None


def _ipython_transform(source: str) -> str:
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager().transform_cell(source)


def analyse_cells(
    sources: Iterable[str], fresh: frozenset[str], transform: Callable[[str], str] | None = None
) -> list[CellNames]:
    """Read each cell's source in order: the names it needs from before it, and those it binds.

    ``fresh`` are the names a fresh kernel has (see :func:`fresh_names`); ``transform`` turns IPython syntax into
    Python (default: IPython's own transforms, as ``shell.transform_cell`` applies them).
    """
    state = _State(fresh)
    cells = []
    for source in sources:
        cell = CellNames()
        module, cell.note = _python(source, transform or _ipython_transform)
        if module is not None:
            visitor = _TopLevel(state, cell)
            for statement in module.body:
                visitor.visit(statement)
        cell.after_star = state.star
        cells.append(cell)
    return cells


def missing_names(cells: Sequence[CellNames]) -> list[list[tuple[str, int | None]]]:
    """Per cell, the names it needs that no earlier cell defines, each with the position of the first later
    cell that binds it (None: no cell does); a name an earlier star import may define, and no cell binds, is left
    out."""
    missing = []
    for position, cell in enumerate(cells):
        names = []
        for name in cell.needs:
            later = next((p for p in range(position + 1, len(cells)) if name in cells[p].binds), None)
            if later is None and cell.after_star:
                continue
            names.append((name, later))
        missing.append(names)
    return missing


@dataclass(frozen=True)
class Finding:
    """A name a code cell uses that no earlier cell defines."""

    cell: int  # the cell's index in the file (markdown cells counted)
    id: str
    name: str
    live: bool  # the running kernel has it: the cell works there and fails in a fresh kernel
    defined_by: str  # "cell 7 (later)", or "no cell"


def hidden_state(
    cells: Sequence[Any],
    namespace: Mapping[str, Any],
    fresh: frozenset[str],
    transform: Callable[[str], str] | None = None,
) -> tuple[list[Finding], list[str]]:
    """The findings for the code cells ``cells`` (each with ``index``, ``id``, ``source``) against the live
    ``namespace``, and notes on the cells not read (too large, not Python) and on star imports."""
    analysed = analyse_cells((cell.source for cell in cells), fresh, transform)
    findings, notes = [], []
    for cell, names, missing in zip(cells, analysed, missing_names(analysed), strict=True):
        if names.note:
            notes.append(f"cell {cell.index} is not checked: {names.note}")
        for module in names.star:
            notes.append(
                f"cell {cell.index} has `from {module} import *`: names it may define are not reported"
            )
        for name, later in missing:
            where = f"cell {cells[later].index} (later)" if later is not None else "no cell"
            findings.append(Finding(cell.index, cell.id, name, name in namespace, where))
    return findings, notes


def hidden_frame(findings: Sequence[Finding]) -> Any:
    """The findings as a DataFrame, one row per cell and name (empty with its columns when there are none)."""
    import pandas as pd

    columns = ["cell", "id", "name", "live", "defined_by"]
    return pd.DataFrame([[getattr(f, c) for c in columns] for f in findings], columns=columns)
