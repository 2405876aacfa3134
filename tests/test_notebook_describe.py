"""The variable describer never runs a user object's code: slow, raising, huge, cyclic and secret values."""

from __future__ import annotations

import importlib.machinery
import sys
import threading
import types
from typing import Any

import numpy as np
import pandas as pd
import pytest

from aries_kernel.notebook.describe import (
    BRIEF,
    FULL,
    describe,
    describe_variable,
    type_name,
    user_variables,
)
from aries_kernel.notebook.executed import error_message

_NEVER = threading.Event()  # set by any user code the describer should not have run


class SlowRepr:
    def __repr__(self) -> str:
        _NEVER.set()
        threading.Event().wait(60)  # a minute, were it called
        return "slow"


class HugeRepr:
    def __repr__(self) -> str:
        _NEVER.set()
        return "x" * 100_000_000


class RaisingProperty:
    def __init__(self) -> None:
        self.size = 3

    @property
    def boom(self) -> int:
        _NEVER.set()
        raise RuntimeError("a property that raises")


class LyingClass:
    """Its ``__class__`` is a property: ``isinstance`` would read it."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        _NEVER.set()
        raise RuntimeError("__class__ read")


class SlowList(list[int]):
    def __len__(self) -> int:
        _NEVER.set()
        threading.Event().wait(60)
        return 0

    def __iter__(self) -> Any:
        _NEVER.set()
        raise RuntimeError("iterated")


PROBE = SlowRepr()  # a default value whose repr must not be called


@pytest.fixture(autouse=True)
def no_user_code() -> Any:
    _NEVER.clear()
    yield
    assert not _NEVER.is_set(), "the describer ran a user object's code"


def test_a_dataframe_of_10000_columns_is_cut_to_its_first_columns() -> None:
    frame = pd.DataFrame(np.zeros((3, 10_000)), columns=[f"c{i}" for i in range(10_000)])
    text = describe(frame)
    assert text.startswith("pandas.DataFrame 3 rows × 10,000 columns: 'c0' float64 [0.0, 0.0, 0.0]")
    assert len(text) <= BRIEF.chars
    full = describe(frame, FULL)
    assert "'c99' float64" in full and "'c100'" not in full and "9,900 more columns" in full


def test_dataframe_series_and_arrays_by_shape_dtype_and_a_few_values() -> None:
    sales = pd.DataFrame({"region": ["north", "south"], "revenue_q1": [1.5, 2.5]})
    assert describe(sales) == (
        "pandas.DataFrame 2 rows × 2 columns: 'region' "
        f"{sales['region'].dtype} ['north', 'south'], 'revenue_q1' float64 [1.5, 2.5]"
    )
    assert describe(sales["revenue_q1"]).startswith("pandas.Series 'revenue_q1' of 2 float64: [1.5, 2.5]")
    assert describe(np.arange(12).reshape(3, 4)) == "numpy.ndarray 3×4 int64: [0, 1, 2, ...]"
    objects = np.array([SlowRepr(), 1], dtype=object)
    assert describe(objects) == "numpy.ndarray 2 object: [<tests.test_notebook_describe.SlowRepr>, 1]"


def test_a_slow_or_huge_repr_is_never_called_and_the_object_is_described_by_type() -> None:
    assert describe(SlowRepr()) == "tests.test_notebook_describe.SlowRepr object (repr not called)"
    assert describe(HugeRepr()) == "tests.test_notebook_describe.HugeRepr object (repr not called)"
    assert describe([HugeRepr(), SlowRepr()]) == (
        "list of 2: [<tests.test_notebook_describe.HugeRepr>, <tests.test_notebook_describe.SlowRepr>]"
    )


def test_a_raising_property_an_overridden_len_and_a_lying_class_are_not_touched() -> None:
    assert describe(RaisingProperty()) == (
        "tests.test_notebook_describe.RaisingProperty object (repr not called) with size=3"
    )
    assert describe(SlowList([1, 2, 3])) == "tests.test_notebook_describe.SlowList of 3: [1, 2, 3]"
    assert type_name(LyingClass()) == "tests.test_notebook_describe.LyingClass"
    assert "repr not called" in describe(LyingClass())


def test_cycles_are_named_not_followed() -> None:
    loop: list[Any] = [1]
    loop.append(loop)
    assert describe(loop) == "list of 2: [1, <cycle: list>]"
    table: dict[str, Any] = {"a": 1}
    table["self"] = table
    assert describe(table) == "dict of 2: {'a': 1, 'self': <cycle: dict>}"
    node = RaisingProperty()
    node.me = node  # type: ignore[attr-defined]
    assert "me=<cycle: tests.test_notebook_describe.RaisingProperty>" in describe(node)


def test_big_values_are_cut_before_they_are_formatted() -> None:
    text = "y" * 100_000_000
    assert describe(text) == f"str of 100,000,000 chars: '{'y' * BRIEF.text}...'"
    assert describe(10**100_000) == "int of 332,193 bits"
    assert describe(bytes(50_000_000)).startswith("bytes of 50,000,000: b'\\x00")


def test_generators_are_not_iterated() -> None:
    numbers = (n for n in range(3))
    assert describe(numbers) == "generator object (repr not called)"
    assert next(numbers) == 0


def test_functions_and_classes_by_signature_and_docstring_defaults_not_repr_ed() -> None:
    def scale(frame: Any, factor: float = 2.0, *rest: Any, probe: Any = PROBE, **options: Any) -> None:
        """Scale a frame.

        More text."""

    assert describe(scale) == (
        "function test_functions_and_classes_by_signature_and_docstring_defaults_not_repr_ed.<locals>.scale"
        "(frame, factor=2.0, *rest, probe=<tests.test_notebook_describe.SlowRepr>, **options): Scale a frame."
    )
    assert describe(RaisingProperty) == "class RaisingProperty()"
    assert describe(pd).startswith("module pandas")


def test_secrets_are_listed_by_name_and_type_only() -> None:
    planted = "sk-ant-api03-" + "Q" * 40
    assert (
        describe_variable("config", planted)
        == "config: str (value withheld: it looks like a key or password)"
    )
    assert describe_variable("settings", {"anthropic": planted}) == (
        "settings: dict (value withheld: it looks like a key or password)"
    )
    assert describe_variable("db_password", "hunter2") == (
        "db_password: str (value withheld: the name says it holds a secret)"
    )
    assert describe_variable("sales", 3, values=False) == "sales: int"


def test_user_variables_leave_out_the_body_private_and_ipython_names() -> None:
    class Shell:
        user_ns: dict[str, Any] = {
            "In": [],
            "Out": {},
            "_": 1,
            "_i1": "x",
            "exit": object(),
            "codebase": object(),
            "sales": 1,
            "hidden": 2,
            "rebound": 3,
        }
        user_ns_hidden = {"hidden": 2, "rebound": "the old value"}

    assert [name for name, _ in user_variables(Shell())] == ["rebound", "sales"]


def test_error_messages_are_read_without_running_the_exceptions_code() -> None:
    class Loud(Exception):
        def __str__(self) -> str:
            _NEVER.set()
            return "loud"

    assert error_message(KeyError("revenue_q3")) == "'revenue_q3'"
    assert (
        error_message(ValueError(SlowRepr()))
        == "tests.test_notebook_describe.SlowRepr object (repr not called)"
    )
    assert error_message(Loud("quiet", 2)) == "'quiet', 2"


def test_a_module_a_thread_is_still_importing_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """The warm-up thread may be importing numpy while a cell ends: its half-made module has no types yet."""
    half = types.ModuleType("numpy")
    half.__spec__ = importlib.machinery.ModuleSpec("numpy", None)
    half.__spec__._initializing = True  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "numpy", half)
    assert describe([1, "a"]) == "list of 2: [1, 'a']"
    assert describe(np.arange(3)) == "numpy.ndarray object (repr not called)"
