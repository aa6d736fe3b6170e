"""Arrow arrays to numpy and back without pandas, and ``pyarrow.compute`` called without importing it:
the building blocks of reading canonical files as columns (``sim.trace.columns``).

Why not pyarrow's own conversions: ``to_numpy``, ``pa.array`` and ``pa.scalar`` import pandas, and
importing ``pyarrow.compute`` wraps ~290 functions; either is a large share of a streamed run's time.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np


def arrow_and_compute():
    import pyarrow as pa

    return pa, compute()


@lru_cache(maxsize=1)
def compute() -> Compute:
    return Compute()


class Compute:
    """The ``pyarrow.compute`` functions the column readers call, called as those do (same kernels, same
    options) through ``pyarrow._compute.call_function``: importing ``pyarrow.compute`` itself wraps and
    documents each of its ~290 functions, ~0.07 s CPU, a thirtieth of a streamed 10k run. Arrays'
    own ``is_valid``, ``filter`` and ``cast`` import it too: called here instead. A Python value
    among the arguments becomes an Arrow scalar built from its bytes (``pa.scalar`` imports pandas,
    ~0.3 s)."""

    def __init__(self) -> None:
        import pyarrow as pa
        import pyarrow._compute as c

        self.pa, self.c, self._call = pa, c, c.call_function
        self.types = {str: pa.string(), bool: pa.bool_(), int: pa.int64(), float: pa.float64()}

    def call(self, name: str, args: list, options=None):
        return self._call(name, [self.scalar(v) for v in args], options)

    def scalar(self, value, t=None):
        """``value`` as Arrow (of type ``t``, else its own: str, bool, int, float); Arrow data as it is."""
        pa = self.pa
        if isinstance(value, pa.Array | pa.ChunkedArray | pa.Scalar):
            return value if t is None or value.type == t else self.cast(value, t)
        t = t if t is not None else self.types.get(type(value))
        if type(value) is str and t == pa.string():
            return string_set((value,))[0]
        if type(value) is bool and t == pa.bool_():
            return bool_array(np.array([value]))[0]
        dtype = _DTYPES.get(str(t))
        if type(value) in (int, float) and dtype is not None:
            data = np.array([value], dtype=dtype)
            return pa.Array.from_buffers(t, 1, [None, pa.py_buffer(data)])[0]
        return pa.scalar(value, type=t)  # none of those: as pyarrow.compute would

    def fill_null(self, a, fill):
        return self.call("coalesce", [a, self.scalar(fill, a.type)])

    def cast(self, a, target_type):
        return self._call("cast", [a], self.c.CastOptions.safe(self.pa.types.lib.ensure_type(target_type)))

    def take(self, a, indices):
        return self.call("take", [a, indices], self.c.TakeOptions(boundscheck=True))

    def filter(self, a, mask):
        return self.call("filter", [a, mask], self.c.FilterOptions("drop"))

    def is_valid(self, a):
        return self.call("is_valid", [a])

    def index_in(self, a, value_set):
        return self.call("index_in", [a], self.c.SetLookupOptions(value_set))

    def match_substring_regex(self, a, pattern: str):
        return self.call("match_substring_regex", [a], self.c.MatchSubstringOptions(pattern))

    def count_substring_regex(self, a, pattern: str):
        return self.call("count_substring_regex", [a], self.c.MatchSubstringOptions(pattern))

    def replace_substring(self, a, pattern: str, replacement: str):
        return self.call("replace_substring", [a], self.c.ReplaceSubstringOptions(pattern, replacement))

    def binary_join_element_wise(self, *strings):
        return self.call("binary_join_element_wise", list(strings))

    def and_(self, x, y):
        return self.call("and", [x, y])

    def __getattr__(self, name: str):  # the others take no options: any, all, equal, if_else, ...
        call = self.call

        def function(*args):
            return call(name, list(args))

        setattr(self, name, function)
        return function


_DTYPES = {"int64": np.int64, "int32": np.int32, "int8": np.int8, "double": np.float64, "uint32": np.uint32}


def numpy_of(a) -> np.ndarray:
    """An Arrow array's values as numpy, read from its data buffer (numbers, booleans; nulls must have
    been filled): pyarrow's own ``to_numpy`` imports pandas, a tenth of a streamed run's time."""
    dtype = _DTYPES.get(str(a.type))
    n, at = len(a), a.offset
    if a.null_count == 0 and dtype is not None:
        data = a.buffers()[1]
        return np.frombuffer(data, dtype, count=n + at)[at:] if data is not None else np.zeros(0, dtype)
    if a.null_count == 0 and str(a.type) == "bool":
        data = a.buffers()[1]
        if data is None:
            return np.zeros(0, bool)
        bits = np.frombuffer(data, np.uint8)
        return np.unpackbits(bits, count=n + at, bitorder="little")[at:].view(bool)
    return np.asarray(a.to_numpy(zero_copy_only=False))


def numpy_filled(a, fill) -> np.ndarray:
    """A column of numbers or booleans as numpy, ``fill`` where null."""
    if not a.null_count:
        return numpy_of(a)
    if a.null_count == len(a):
        dtype = _DTYPES.get(str(a.type), bool if str(a.type) == "bool" else None)
        return np.full(len(a), fill, dtype=dtype) if dtype is not None else np.full(len(a), fill)
    if str(a.type) in _DTYPES or str(a.type) == "bool":  # the values under a null are unspecified
        return np.where(valid_mask(a), numpy_of(_values(a)), fill)
    _, pc = arrow_and_compute()
    return numpy_of(pc.fill_null(a, fill))


def _values(a):
    """``a`` without its validity bitmap (its values, whatever lies under a null)."""
    pa, _ = arrow_and_compute()
    return pa.Array.from_buffers(a.type, len(a), [None, *a.buffers()[1:]], 0, a.offset)


def bool_array(v: np.ndarray):
    """A numpy boolean array as an Arrow one (built from its bits: ``pa.array`` imports pandas)."""
    pa, _ = arrow_and_compute()
    bits = np.packbits(np.asarray(v, dtype=bool), bitorder="little")
    return pa.Array.from_buffers(pa.bool_(), len(v), [None, pa.py_buffer(bits)])


def string_array(values: list[str]):
    """A list of strings as an Arrow string array, built from their bytes (``pa.array`` imports pandas)."""
    pa, _ = arrow_and_compute()
    data = [v.encode() for v in values]
    offsets = np.zeros(len(data) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in data], out=offsets[1:])
    if offsets[-1] >= 2**31:
        raise OverflowError("text past 2 GiB")  # Arrow's offsets: the fast path declines the batch
    return pa.Array.from_buffers(
        pa.string(), len(data), [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(b"".join(data))]
    )


def int32_array(v: np.ndarray):
    """Integers (offsets) as an Arrow int32 array, from their bytes."""
    pa, _ = arrow_and_compute()
    return pa.Array.from_buffers(pa.int32(), len(v), [None, pa.py_buffer(np.ascontiguousarray(v, np.int32))])


_VALUE_SETS: dict = {}


def string_set(values: tuple[str, ...]):
    """A tuple of strings as an Arrow array (``pc.index_in``'s value set), built from its bytes once."""
    got = _VALUE_SETS.get(values)
    if got is None:
        pa, _ = arrow_and_compute()
        data = [v.encode() for v in values]
        offsets = np.concatenate([[0], np.cumsum([len(b) for b in data])]).astype(np.int32)
        got = _VALUE_SETS[values] = pa.Array.from_buffers(
            pa.string(), len(values), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(data))]
        )
    return got


def codes_of(a, values: tuple[str, ...]) -> np.ndarray:
    """Each string's position in ``values`` (-1: null or none of them), as numpy: ``pc.index_in``. An
    enumeration read as a dictionary is looked up once per distinct value (``index_in`` of the
    dictionary array itself decodes every row first: a tenth of the checks)."""
    pa, pc = arrow_and_compute()
    if not pa.types.is_dictionary(a.type):
        return numpy_filled(pc.index_in(a, value_set=string_set(values)), -1)
    if not len(a.dictionary):
        return np.full(len(a), -1, dtype=np.int64)
    per_value = numpy_filled(pc.index_in(a.dictionary, value_set=string_set(values)), -1)
    codes = per_value[numpy_filled(a.indices, 0)]
    return np.where(valid_mask(a), codes, -1) if a.null_count else codes


def list_items(lists) -> tuple[Any, np.ndarray]:
    """A list column's items (exactly the rows' spans of its child) and each row's span length."""
    off = numpy_of(lists.offsets).astype(np.int64)
    return lists.values.slice(int(off[0]), int(off[-1] - off[0])), np.diff(off)


def valid_mask(a) -> np.ndarray:
    nulls = a.null_count
    if nulls == 0 or nulls == len(a):  # the common cases, without a bitmap turned into bools
        return np.full(len(a), nulls == 0, dtype=bool)
    return numpy_of(compute().is_valid(a))


def read_only(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a
