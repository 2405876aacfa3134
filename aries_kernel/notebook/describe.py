"""Describe the user's variables for the agent without trusting them.

A user object's ``__repr__``, ``__len__``, ``__iter__`` or property is arbitrary code: it may sleep for a minute,
raise, recurse forever, return 100 MB, or change the object (a generator consumed, a lazy frame collected). A
time bound on arbitrary Python in the kernel's main thread cannot be kept reliably (an async exception does not
reach C code that loops, and one raised mid-``__repr__`` may leave the object half-changed), so this module never
runs user code at all. Values are described only through code it trusts, and everything else by its type:

- built-in scalars (``None``, bool, int, float, complex, str, bytes), ``datetime``, ``Decimal`` and paths by their
  ``repr``, strings and bytes sliced first, big ints by their size; numpy and pandas scalars likewise;
- lists, tuples, dicts and sets (subclasses included, read through the built-in type's own C slots, so an
  overridden ``__len__`` or ``__iter__`` is not called): length and a sample of items, each described the same
  way, to a fixed depth, with a cycle seen as ``<cycle>``;
- numpy arrays: shape and dtype (and a few values of an exact ``ndarray``); pandas DataFrames: shape and the first
  columns with their dtypes and a few values; Series and Index likewise, through pandas' own classes only;
- functions, methods and classes: a signature built here (defaults described as values are, never ``repr``-ed)
  and the first line of the docstring; modules by name;
- any other object: its type, and the public attributes of its instance ``__dict__`` when the type's
  ``__dict__`` is the plain C descriptor (no property is read). A lazy or remote frame (polars LazyFrame, dask,
  Spark) is such an object: it is never collected.

Every description is cut to its :class:`Limits`. A variable whose name says it holds a credential (``*KEY*``,
``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``), or whose description :func:`aries_kernel.redact.redact` would change,
is listed by name and type only.
"""

from __future__ import annotations

import datetime
import decimal
import fractions
import inspect
import itertools
import pathlib
import re
import sys
import types
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from aries_kernel.redact import redact

__all__ = [
    "BRIEF",
    "FULL",
    "Limits",
    "describe",
    "describe_variable",
    "is_secret_name",
    "type_name",
    "user_variables",
]


@dataclass(frozen=True)
class Limits:
    """How much of a value a description shows."""

    chars: int = 240  # the whole description
    text: int = 60  # characters of a string shown
    items: int = 3  # items of a container, values of a column
    columns: int = 8  # columns of a DataFrame
    depth: int = 2  # containers inside containers
    digits: int = 6  # significant digits of a float (0: all of them, as repr shows)


BRIEF = Limits()  # a line of the context section
FULL = Limits(chars=6000, text=1000, items=10, columns=100, depth=3, digits=0)  # one variable, on request

_SECRET_NAME = re.compile(r"key|token|secret|passw(or)?d|credential", re.IGNORECASE)
# IPython's and ipykernel's own names, besides the underscore ones and shell.user_ns_hidden.
_SHELL_NAMES = frozenset({"In", "Out", "exit", "quit", "get_ipython", "open"})
_SCALARS = (
    bool,
    float,
    complex,
    type(None),
    type(Ellipsis),
    datetime.datetime,
    datetime.date,
    datetime.time,
    datetime.timedelta,
    decimal.Decimal,
    fractions.Fraction,
    uuid.UUID,
    range,
    slice,
    pathlib.PurePosixPath,
    pathlib.PureWindowsPath,
    pathlib.PosixPath,
    pathlib.WindowsPath,
)
_INT_DIGITS = 40  # ints with more decimal digits are described by size (str() of a huge int is quadratic)
_CELL_TEXT = 40  # characters of a value inside a DataFrame row
_TRUSTED_MODULES = ("numpy", "pandas")

_type_module = type.__dict__["__module__"].__get__
_type_qualname = type.__dict__["__qualname__"].__get__
_type_mro = type.__dict__["__mro__"].__get__
_class_dict = type.__dict__["__dict__"].__get__
_module_dict = vars(types.ModuleType)["__dict__"].__get__


def is_secret_name(name: str) -> bool:
    """Whether a variable's name says it holds a credential (key, token, secret, password)."""
    return bool(_SECRET_NAME.search(name))


def type_name(value: Any) -> str:
    """The type of ``value`` as ``module.Class`` (builtins bare; numpy and pandas by their package), read from
    the type object's C slots so that a metaclass cannot run code."""
    cls = type(value)
    module = _type_module(cls)
    qualname = _type_qualname(cls)
    if type(module) is not str or type(qualname) is not str:
        return "<unnamed type>"
    if module == "builtins":
        return qualname
    package = module.partition(".")[0]
    return f"{package if package in _TRUSTED_MODULES else module}.{qualname}"


def user_variables(shell: Any, skip: tuple[str, ...] = ()) -> list[tuple[str, Any]]:
    """The user's variables in ``shell.user_ns``, newest first: no private or IPython names, nothing IPython or
    Aries hid (``user_ns_hidden``, the REPL body) unless the user rebound it, nothing in ``skip``."""
    from aries_kernel.pillars import BODY_NAMES

    hidden = getattr(shell, "user_ns_hidden", {}) or {}
    found = []
    for name, value in list(shell.user_ns.items()):
        if type(name) is not str or name.startswith("_") or name in _SHELL_NAMES or name in BODY_NAMES:
            continue
        if name in skip or (name in hidden and hidden[name] is value):
            continue
        found.append((name, value))
    found.reverse()
    return found


def describe_variable(name: str, value: Any, limits: Limits = BRIEF, values: bool = True) -> str:
    """``name: type`` and, with ``values``, what the value is; a secret is withheld with the reason."""
    kind = type_name(value)
    if not values:
        return f"{name}: {kind}"
    if is_secret_name(name):
        return f"{name}: {kind} (value withheld: the name says it holds a secret)"
    text = describe(value, limits)
    if redact(text) != text:
        return f"{name}: {kind} (value withheld: it looks like a key or password)"
    return f"{name}: {text}"


def describe(value: Any, limits: Limits = BRIEF) -> str:
    """What ``value`` is, within ``limits``, without running any of its code (see the module docstring)."""
    try:
        return _cut(_describe(value, limits, limits.depth, set()), limits.chars)
    except Exception as exc:  # numpy's or pandas' own code on an odd value: the type still says something
        return f"{type_name(value)} (not described: {type(exc).__name__})"


def _imported(name: str) -> Any:
    """The module ``name`` if it has been imported completely (not one a thread is importing now), else None:
    a value of its types can exist only once it has."""
    module = sys.modules.get(name)
    if module is None or getattr(getattr(module, "__spec__", None), "_initializing", False):
        return None
    return module


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(limit - 16, 0)] + f"... [{len(text):,} chars]"


def _describe(value: Any, limits: Limits, depth: int, seen: set[int]) -> str:
    kind = type_name(value)
    scalar = _scalar(value, limits)
    if scalar is not None:
        return scalar
    if id(value) in seen:
        return f"<cycle: {kind}>"
    seen = seen | {id(value)}
    for describer in (_container, _array_like, _callable):
        text = describer(value, kind, limits, depth, seen)
        if text is not None:
            return text
    return _instance(value, kind, limits, depth, seen)


def _is(value: Any, cls: type | tuple[type, ...]) -> bool:
    """``isinstance`` by the real type only: ``isinstance`` itself reads ``value.__class__``, which an object
    may make a property."""
    return issubclass(type(value), cls)


def _one_of(cls: type, types_: tuple[type, ...]) -> bool:
    """``cls in types_`` by identity (``in`` would call a metaclass's ``__eq__``)."""
    return any(cls is item for item in types_)


def _scalar(value: Any, limits: Limits) -> str | None:
    """The repr of a value whose type's repr is trusted and bounded, else None. Subclasses of str, bytes, int
    and float (enums, numpy's str_) are read through the built-in type's own slots, their type named."""
    cls = type(value)
    text_chars = limits.text
    named = "" if _one_of(cls, (str, bytes, bytearray, int, bool, float)) else f"{type_name(value)} "
    if _is(value, str):
        text = str.__str__(value)
        shown = repr(text[:text_chars])
        if len(text) <= text_chars:
            return f"{named}{shown}"
        return f"{named or 'str '}of {len(text):,} chars: {shown[:-1]}...{shown[-1]}"
    if _is(value, (bytes, bytearray)):
        data = bytes(memoryview(value)[:text_chars])
        size = memoryview(value).nbytes
        return (
            f"{named}{data!r}"
            if size <= text_chars
            else f"{named or cls.__name__ + ' '}of {size:,}: {data!r}..."
        )
    if _is(value, int):
        number = int.__index__(value)
        if number.bit_length() > _INT_DIGITS * 3.33:
            return f"{named or 'int '}of {number.bit_length():,} bits"
        return f"{named}{number!r}" if cls is not bool else repr(value)
    if _is(value, float):
        real = float.__float__(value)
        text = format(real, f".{limits.digits}g") if limits.digits else repr(real)
        return f"{named}{text if any(c in text for c in '.en') else text + '.0'}"  # 2.0, not 2
    if _one_of(cls, _SCALARS):
        return repr(value)
    numpy = _imported("numpy")
    if numpy is not None and _is(value, numpy.generic) and _type_module(cls).startswith("numpy"):
        if _is(value, (numpy.void, numpy.object_)):
            return None
        if _is(value, numpy.datetime64):
            return f"{type_name(value)}({value!r})"
        return _scalar(value.item(), limits) or repr(value.item())
    pandas = _imported("pandas")
    if pandas is not None and _one_of(
        cls, (pandas.Timestamp, pandas.Timedelta, pandas.Period, type(pandas.NaT))
    ):
        return repr(value)
    return None


def _container(value: Any, kind: str, limits: Limits, depth: int, seen: set[int]) -> str | None:
    base = next((base for base in (dict, list, tuple, set, frozenset) if _is(value, base)), None)
    if base is None:
        return None
    size = base.__len__(value)
    if depth <= 0 or size == 0:
        return f"{kind} of {size:,}" if size else f"{kind} (empty)"
    items: Iterator[Any]
    if base is dict:
        items = itertools.islice(dict.items(value), limits.items)
        shown = [
            f"{_describe(key, limits, 0, seen)}: {_describe(item, limits, depth - 1, seen)}"
            for key, item in items
        ]
        body = "{" + ", ".join(shown)
        close = "}"
    else:
        items = itertools.islice(base.__iter__(value), limits.items)
        shown = [_describe(item, limits, depth - 1, seen) for item in items]
        body, close = ("(", ")") if base is tuple else ("[", "]")
        body += ", ".join(shown)
    more = ", ..." if size > len(shown) else ""
    return f"{kind} of {size:,}: {body}{more}{close}"


def _array_like(value: Any, kind: str, limits: Limits, depth: int, seen: set[int]) -> str | None:
    numpy = _imported("numpy")
    if numpy is not None and _is(value, numpy.ndarray):
        shape = "×".join(f"{n:,}" for n in numpy.ndarray.shape.__get__(value)) or "scalar"
        dtype = numpy.ndarray.dtype.__get__(value)
        text = f"{kind} {shape} {dtype}"
        if type(value) is numpy.ndarray and value.size and depth > 0:
            sample = [_describe(item, limits, 0, seen) for item in value.flat[: limits.items].tolist()]
            text += f": [{', '.join(sample)}{', ...' if value.size > len(sample) else ''}]"
        return text
    pandas = _imported("pandas")
    if pandas is None or not _type_module(type(value)).startswith("pandas"):
        return None
    if _is(value, pandas.DataFrame):
        return _frame(value, kind, limits, seen)
    if _is(value, pandas.Series):
        name = "" if value.name is None else f" {_describe(value.name, limits, 0, seen)}"
        shown = _values(value.iloc[: limits.items].tolist(), limits, seen)
        more = ", ..." if len(value) > limits.items else ""
        return f"{kind}{name} of {len(value):,} {value.dtype}: [{shown}{more}]"
    if _is(value, pandas.Index):
        shown = _values(value[: limits.items].tolist(), limits, seen)
        more = ", ..." if len(value) > limits.items else ""
        return f"{kind} of {len(value):,} {value.dtype}: [{shown}{more}]"
    return None


def _frame(frame: Any, kind: str, limits: Limits, seen: set[int]) -> str:
    rows, width = frame.shape
    head = frame.iloc[: limits.items, : limits.columns]
    columns = []
    for position in range(head.shape[1]):
        label = _describe(head.columns[position], limits, 0, seen)
        column = head.iloc[:, position]
        columns.append(f"{label} {column.dtype} [{_values(column.tolist(), limits, seen)}]")
    more = f"; and {width - len(columns):,} more columns" if width > len(columns) else ""
    return f"{kind} {rows:,} rows × {width:,} columns: " + ", ".join(columns) + more


def _values(items: list[Any], limits: Limits, seen: set[int]) -> str:
    small = Limits(_CELL_TEXT, min(limits.text, _CELL_TEXT), limits.items, depth=0, digits=limits.digits)
    return ", ".join(_cut(_describe(item, small, 0, seen), _CELL_TEXT) for item in items)


def _callable(value: Any, kind: str, limits: Limits, depth: int, seen: set[int]) -> str | None:
    if _is(value, types.ModuleType):
        name = _module_dict(value).get("__name__")
        return f"module {name if type(name) is str else '?'}"
    if _is(value, type):
        init = next((d["__init__"] for d in map(_class_dict, _type_mro(value)) if "__init__" in d), None)
        signature = _signature(init, skip_first=True) if type(init) is types.FunctionType else "(...)"
        doc = _class_dict(value).get("__doc__")
        return f"class {_type_qualname(value)}{signature}{_first_line(doc)}"
    function = value.__func__ if _is(value, types.MethodType) else value
    if _is(function, types.FunctionType):
        name = function.__qualname__ if type(function.__qualname__) is str else "?"
        signature = _signature(function, skip_first=function is not value)
        return f"{'method' if function is not value else 'function'} {name}{signature}{_first_line(function.__doc__)}"
    if _is(value, types.BuiltinFunctionType):
        return f"built-in {value.__name__}{_first_line(value.__doc__)}"
    return None


def _signature(function: types.FunctionType, skip_first: bool) -> str:
    """``(a, b=1, *args, key=<Foo>, **kw)`` from the code object: defaults described, never repr-ed."""
    code = function.__code__
    positional = code.co_varnames[: code.co_posonlyargcount + code.co_argcount]
    keyword_only = code.co_varnames[len(positional) : len(positional) + code.co_kwonlyargcount]
    defaults = function.__defaults__ if type(function.__defaults__) is tuple else ()
    kwdefaults = function.__kwdefaults__ if type(function.__kwdefaults__) is dict else {}
    brief = Limits(chars=60, text=20, items=2, depth=1)  # a default inside: <Type> unless a plain value
    parts = []
    first_default = len(positional) - len(defaults)
    for index, name in enumerate(positional):
        default = f"={_default(defaults[index - first_default], brief)}" if index >= first_default else ""
        parts.append(name + default)
    rest = len(positional) + len(keyword_only)
    if code.co_flags & inspect.CO_VARARGS:
        parts.append("*" + code.co_varnames[rest])
        rest += 1
    elif keyword_only:
        parts.append("*")
    for name in keyword_only:
        parts.append(name + (f"={_default(kwdefaults[name], brief)}" if name in kwdefaults else ""))
    if code.co_flags & inspect.CO_VARKEYWORDS:
        parts.append("**" + code.co_varnames[rest])
    if skip_first and positional:
        parts.pop(0)
    return "(" + ", ".join(parts) + ")"


def _default(value: Any, limits: Limits) -> str:
    return _cut(_describe(value, limits, 0, set()), limits.chars)


def _first_line(doc: Any) -> str:
    if type(doc) is not str or not doc.strip():
        return ""
    return ": " + _cut(doc.strip().splitlines()[0], 100)


def _instance(value: Any, kind: str, limits: Limits, depth: int, seen: set[int]) -> str:
    """Another object: its type, and the public attributes of a plain instance ``__dict__``; inside a
    container or another object, ``<type>``."""
    nested = depth < limits.depth
    attributes = _instance_dict(value) if depth > 0 else {}
    public = [name for name in attributes if type(name) is str and not name.startswith("_")]
    if not public:
        return f"<{kind}>" if nested else f"{kind} object (repr not called)"
    shown = [
        f"{name}={_describe(attributes[name], limits, depth - 1, seen)}"
        for name in public[: limits.items + 2]
    ]
    more = f", and {len(public) - len(shown)} more" if len(public) > len(shown) else ""
    return f"{kind} object (repr not called) with {', '.join(shown)}{more}"


def _instance_dict(value: Any) -> dict[str, Any]:
    """The instance ``__dict__`` when the type's ``__dict__`` attribute is the plain C descriptor, else {}."""
    for base in _type_mro(type(value)):
        entry = _class_dict(base).get("__dict__")
        if entry is None:
            continue
        if type(entry) is not types.GetSetDescriptorType:
            return {}
        found = entry.__get__(value)
        return found if type(found) is dict else {}
    return {}
