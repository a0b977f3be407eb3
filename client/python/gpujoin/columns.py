"""Typed columns (payload, gathered results, hash inputs) between numpy and the
wire's Arrow layout (proto ``Column`` / ``HashColumn``).

Inputs: a numpy array (its dtype gives the type), a numpy masked array (masked
rows are null), a pandas Series (NA is null), or a sequence whose non-null
entries are all str (string), bytes (binary), bool, int (int64) or float
(float64); None and pandas.NA entries are null. Types by dtype: uint8/16/32 -> uint32,
int8/16/32 -> int32, uint64, int64, float16/32 -> float32, float64, bool,
numpy str ('U') -> string, numpy bytes ('S') -> binary. An explicit type name
converts the values, refusing integers that do not fit it.

Outputs: numeric and bool columns are numpy arrays, or numpy masked arrays
when a row is null; string and binary columns are object arrays of str/bytes
with None for nulls.
"""
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from .errors import InvalidArgument, KeyDtypeError, KeyValueError

# Column type names, their proto enum values and their numpy dtypes.
TYPE_NUMBERS = {"uint32": 1, "int32": 2, "uint64": 3, "int64": 4, "float32": 5, "float64": 6,
                "binary": 7, "bool": 8, "string": 9}
TYPE_NAMES = {v: k for k, v in TYPE_NUMBERS.items()}
FIXED_DTYPES = {"uint32": np.dtype("<u4"), "int32": np.dtype("<i4"), "uint64": np.dtype("<u8"),
                "int64": np.dtype("<i8"), "float32": np.dtype("<f4"), "float64": np.dtype("<f8")}
VARIABLE = ("string", "binary")
# Hash takes the payload types and Arrow's narrow types (hash only: payload
# columns refuse them), each sent in its own width.
HASH_ONLY_TYPES = {"int8": (np.dtype("<i1"), 10), "uint8": (np.dtype("<u1"), 11),
                   "int16": (np.dtype("<i2"), 12), "uint16": (np.dtype("<u2"), 13),
                   "float16": (np.dtype("<f2"), 14)}


def _bitmap(valid: np.ndarray) -> bytes:
    return np.packbits(valid.astype(bool, copy=False), bitorder="little").tobytes()


def _unbitmap(data: bytes, length: int) -> np.ndarray:
    return np.unpackbits(np.frombuffer(data, np.uint8), count=length, bitorder="little").astype(bool)


def is_pandas(obj: Any) -> bool:
    """True for a pandas Series or Index (recognised without importing pandas)."""
    return hasattr(obj, "isna") and hasattr(obj, "to_numpy") and not isinstance(obj, np.ndarray)


def numbers_and_nulls(obj: Any) -> Tuple[Any, Optional[np.ndarray]]:
    """(values, null) of a numeric input: a pandas Series as a numpy array with
    its NA rows (a nullable dtype's NA, a float column's NaN) marked in `null`
    (and filled with 0), a masked array as its data with its masked rows; any
    other input as it is, with `null` None. `null` is None when no row is null."""
    null: Optional[np.ndarray] = None
    if is_pandas(obj):
        null = np.asarray(obj.isna(), dtype=bool)
        dt = obj.dtype
        if hasattr(dt, "numpy_dtype") and dt.numpy_dtype.kind in "iuf":  # Int64, Float64, ...
            obj = obj.to_numpy(dtype=dt.numpy_dtype, na_value=0)
        else:
            obj = obj.to_numpy()
    if isinstance(obj, np.ma.MaskedArray):
        m = np.ma.getmaskarray(obj)
        null = m if null is None else (null | m)
        obj = np.ma.getdata(obj)
    if null is not None and not null.any():
        null = None
    return obj, null


def _dtype_type(dt: np.dtype) -> Optional[str]:
    if dt.kind == "b":
        return "bool"
    if dt.kind == "u":
        return "uint64" if dt.itemsize == 8 else "uint32"
    if dt.kind == "i":
        return "int64" if dt.itemsize == 8 else "int32"
    if dt.kind == "f":
        return "float64" if dt.itemsize == 8 else ("float32" if dt.itemsize <= 4 else None)
    if dt.kind == "U":
        return "string"
    if dt.kind == "S":
        return "binary"
    return None


def _objects_type(values: Sequence[Any], what: str) -> str:
    kinds = set()
    for v in values:
        if v is None:
            continue
        if isinstance(v, (bool, np.bool_)):
            kinds.add("bool")
        elif isinstance(v, str):
            kinds.add("string")
        elif isinstance(v, (bytes, bytearray, memoryview)):
            kinds.add("binary")
        elif isinstance(v, (int, np.integer)):
            kinds.add("int64")
        elif isinstance(v, (float, np.floating)):
            kinds.add("float64")
        else:
            raise KeyDtypeError(f"{what}: cannot send a {type(v).__name__} value")
    if kinds == {"int64", "float64"}:
        return "float64"
    if len(kinds) > 1:
        raise KeyDtypeError(f"{what}: mixed value types {sorted(kinds)}; give the column a type")
    if not kinds:
        raise KeyDtypeError(f"{what}: every value is None; give the column a type")
    return kinds.pop()


def first_out_of_range(a: np.ndarray, lo: int, hi: int) -> Optional[int]:
    """The first row of the integer array `a` (any width, signedness or byte
    order) whose value is outside [lo, hi], or None. Exact: the bounds are
    compared in `a`'s own dtype, never through float."""
    if not a.size:
        return None
    info = np.iinfo(a.dtype)
    if lo > info.max or hi < info.min:
        return 0
    bad = np.zeros(a.shape, bool)
    if lo > info.min:
        bad |= a < a.dtype.type(lo)
    if hi < info.max:
        bad |= a > a.dtype.type(hi)
    rows = np.flatnonzero(bad)
    return int(rows[0]) if rows.size else None


def _checked_cast(data: np.ndarray, type_name: str, what: str) -> np.ndarray:
    target = FIXED_DTYPES[type_name]
    if data.dtype.kind == "b" and target.kind in "iuf":
        return data.astype(target)
    if data.dtype.kind in "iu" and target.kind in "iu":
        info = np.iinfo(target)
        row = first_out_of_range(data, int(info.min), int(info.max))
        if row is not None:
            raise KeyValueError(f"{what}: row {row}: {int(data[row])} does not fit in {type_name}")
    elif data.dtype.kind == "f" and target.kind in "iu":
        raise KeyDtypeError(f"{what}: float values cannot be sent as {type_name}")
    elif data.dtype.kind not in "iufb":
        raise KeyDtypeError(f"{what}: dtype {data.dtype} cannot be sent as {type_name}")
    return np.ascontiguousarray(data.astype(target, copy=False))


class EncodedColumn:
    """One column converted for the wire; chunk() cuts a row range of it into a message."""

    def __init__(self, name: str, type_name: str, length: int, data: Any,
                 valid: Optional[np.ndarray], offsets: Optional[np.ndarray] = None):
        self.name = name
        self.type_name = type_name
        self.length = length
        self._data = data          # fixed: typed LE array; bool: bool array; variable: bytes blob
        self._valid = valid        # bool per row, or None (no nulls)
        self._offsets = offsets    # variable: int64, length + 1

    @property
    def row_bytes(self) -> float:
        """Mean wire bytes per row (to size chunks)."""
        if self.type_name in VARIABLE:
            return 4 + (len(self._data) / self.length if self.length else 0)
        if self.type_name == "bool":
            return 0.25
        return self._data.dtype.itemsize + (0.125 if self._valid is not None else 0)

    def cumulative_bytes(self) -> np.ndarray:
        """Wire bytes of rows [0, i) for i in 0..length (length + 1 values):
        values, offsets and validity, to cut batches within a message limit."""
        rows = np.arange(self.length + 1, dtype=np.float64)
        if self.type_name not in VARIABLE:
            return self.row_bytes * rows
        return self._offsets.astype(np.float64) + (4.125 if self._valid is not None else 4) * rows

    def parts(self, start: int, stop: int) -> Tuple[bytes, bytes, bytes]:
        """(data, offsets, validity) bytes of rows [start, stop)."""
        validity = b""
        if self._valid is not None:
            v = self._valid[start:stop]
            if not v.all():
                validity = _bitmap(v)
        if self.type_name in VARIABLE:
            lo, hi = int(self._offsets[start]), int(self._offsets[stop])
            if hi - lo > 0x7FFFFFFF:
                raise InvalidArgument(f"column {self.name!r}: rows [{start}, {stop}) hold "
                                      f"{hi - lo} bytes, more than int32 offsets address")
            offsets = (self._offsets[start:stop + 1] - lo).astype("<i4").tobytes()
            return self._data[lo:hi], offsets, validity
        if self.type_name == "bool":
            return _bitmap(self._data[start:stop]), b"", validity
        return self._data[start:stop].tobytes(), b"", validity

    def chunk(self, pb, start: int, stop: int):
        """A proto Column of rows [start, stop)."""
        data, offsets, validity = self.parts(start, stop)
        return pb.Column(name=self.name, type=TYPE_NUMBERS[self.type_name], length=stop - start,
                         data=data, offsets=offsets, validity=validity)

    def hash_chunk(self, pb, start: int, stop: int):
        """A proto HashColumn of rows [start, stop)."""
        data, offsets, validity = self.parts(start, stop)
        number = (HASH_ONLY_TYPES[self.type_name][1] if self.type_name in HASH_ONLY_TYPES
                  else TYPE_NUMBERS[self.type_name])
        return pb.HashColumn(type=number, data=data, offsets=offsets, validity=validity,
                             offset=0, length=stop - start)


def _is_null(v: Any) -> bool:
    """None, or pandas.NA (recognised without importing pandas)."""
    return v is None or type(v).__name__ == "NAType"


def encode_column(name: str, obj: Any, type_name: Optional[str] = None,
                  what: Optional[str] = None) -> EncodedColumn:
    """Converts one input column (see the module doc) for the wire; errors name
    it as `what` (default "column 'NAME'")."""
    what = what or f"column {name!r}"
    if type_name is not None and type_name not in TYPE_NUMBERS:
        raise InvalidArgument(f"{what}: type {type_name!r} is not one of {sorted(TYPE_NUMBERS)}")
    valid: Optional[np.ndarray] = None
    if is_pandas(obj):
        na = np.asarray(obj.isna(), dtype=bool)
        dt = obj.dtype
        if hasattr(dt, "numpy_dtype") and dt.numpy_dtype.kind in "iufb":  # nullable Int64, boolean, ...
            fill = False if dt.numpy_dtype.kind == "b" else 0
            obj = obj.to_numpy(dtype=dt.numpy_dtype, na_value=fill)
        elif getattr(dt, "kind", "O") in "iufb":
            obj = obj.to_numpy()
        else:
            obj = [None if n else v for v, n in zip(obj.to_numpy(dtype=object), na)]
        if na.any():
            valid = ~na
    if isinstance(obj, np.ma.MaskedArray):
        mask = np.ma.getmaskarray(obj)
        if mask.any():
            valid = ~mask
        obj = np.ma.getdata(obj)
    if isinstance(obj, np.ndarray) and obj.dtype.kind != "O":
        if obj.ndim != 1:
            raise InvalidArgument(f"{what}: a one-dimensional array is needed, got shape {obj.shape}")
        inferred = _dtype_type(obj.dtype)
        t = type_name or inferred
        if t is None:
            raise KeyDtypeError(f"{what}: dtype {obj.dtype} has no column type")
        if t in VARIABLE:
            if obj.dtype.kind in "US":
                values = obj.tolist()  # str / bytes rows ('S' drops trailing NULs, as numpy does)
            else:
                raise KeyDtypeError(f"{what}: dtype {obj.dtype} cannot be sent as {t}")
            return _encode_variable(name, t, values, valid, what)
        if t == "bool":
            if obj.dtype.kind != "b":
                raise KeyDtypeError(f"{what}: dtype {obj.dtype} cannot be sent as bool")
            return EncodedColumn(name, t, len(obj), np.ascontiguousarray(obj), valid)
        data = _checked_cast(obj, t, what)
        if valid is not None:
            data = data.copy()
            data[~valid] = 0
        return EncodedColumn(name, t, len(data), data, valid)
    values = obj if isinstance(obj, list) else list(obj)
    nulls = np.fromiter(map(_is_null, values), bool, len(values))
    if nulls.any():
        valid = ~nulls if valid is None else (valid & ~nulls)
        values = [None if n else v for v, n in zip(values, nulls.tolist())]
    t = type_name or _objects_type(values, what)
    if t in VARIABLE:
        return _encode_variable(name, t, values, valid, what)
    fill = False if t == "bool" else 0
    filled = [fill if v is None else v for v in values]
    if t == "bool":
        return EncodedColumn(name, t, len(values), np.array(filled, dtype=bool), valid)
    try:
        arr = np.array(filled)
    except (OverflowError, ValueError) as e:
        raise KeyValueError(f"{what}: {e}")
    if arr.dtype.kind == "O":
        arr = np.array(filled, dtype=np.uint64) if t == "uint64" else arr
    return EncodedColumn(name, t, len(values), _checked_cast(arr, t, what), valid)


def encode_hash_column(name: str, obj: Any) -> EncodedColumn:
    """Converts one Hash input: as encode_column, except that 8- and 16-bit
    integer and float16 arrays keep their own type (hashed as those bytes)."""
    data, valid = obj, None
    if isinstance(obj, np.ma.MaskedArray):
        mask = np.ma.getmaskarray(obj)
        data, valid = np.ma.getdata(obj), (~mask if mask.any() else None)
    if isinstance(data, np.ndarray) and data.dtype.kind in "iuf" and data.dtype.itemsize < 4:
        t = {("i", 1): "int8", ("u", 1): "uint8", ("i", 2): "int16", ("u", 2): "uint16",
             ("f", 2): "float16"}[(data.dtype.kind, data.dtype.itemsize)]
        if data.ndim != 1:
            raise InvalidArgument(f"column {name!r}: a one-dimensional array is needed, got "
                                  f"shape {data.shape}")
        le = np.ascontiguousarray(data.astype(HASH_ONLY_TYPES[t][0], copy=False))
        if valid is not None:
            le = le.copy()
            le[~valid] = 0
        return EncodedColumn(name, t, len(le), le, valid)
    return encode_column(name, obj)


def _encode_variable(name: str, t: str, values: List[Any], valid: Optional[np.ndarray],
                     what: str) -> EncodedColumn:
    if valid is not None:
        values = [v if ok else None for v, ok in zip(values, valid.tolist())]
    try:  # the common case, one pass: str rows of a string column, bytes rows of a binary one
        if t == "string":
            encoded = [b"" if v is None else v.encode("utf-8") for v in values]
        else:
            encoded = [b"" if v is None else _as_bytes(v) for v in values]
    except (AttributeError, TypeError):
        encoded = _encode_rows(what, t, values)
    offsets = np.zeros(len(encoded) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, encoded), np.int64, len(encoded)), out=offsets[1:])
    return EncodedColumn(name, t, len(encoded), b"".join(encoded), valid, offsets)


def _as_bytes(v: Any) -> bytes:
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v)
    raise TypeError(type(v).__name__)


def _encode_rows(what: str, t: str, values: List[Any]) -> List[bytes]:
    """Row by row, for mixed rows: str as UTF-8, bytes (checked as UTF-8 for a
    string column), anything else an error naming the row."""
    encoded = []
    for i, v in enumerate(values):
        if v is None:
            encoded.append(b"")
        elif isinstance(v, str):
            encoded.append(v.encode("utf-8"))
        elif isinstance(v, (bytes, bytearray, memoryview)):
            if t == "string":
                try:
                    bytes(v).decode("utf-8")
                except UnicodeDecodeError:
                    raise InvalidArgument(f"{what}: row {i} is not valid UTF-8; send "
                                          "bytes that are not text as a binary column")
            encoded.append(bytes(v))
        else:
            raise KeyDtypeError(f"{what}: row {i} is a {type(v).__name__}, not {t}")
    return encoded


class ColumnBuilder:
    """Collects the parts of one result column (proto Columns) and joins them."""

    def __init__(self, name: str, type_name: str):
        self.name = name
        self.type_name = type_name
        self._data: List[np.ndarray] = []
        self._valid: List[Optional[np.ndarray]] = []

    def add(self, col, field: str = "columns") -> int:
        """Appends a decoded proto Column; returns its rows."""
        n = int(col.length)
        t = TYPE_NAMES.get(col.type)
        if t != self.type_name:
            raise InvalidArgument(f"server sent {field} {self.name!r} as {t}, not {self.type_name}")
        if t in FIXED_DTYPES:
            data = np.frombuffer(col.data, FIXED_DTYPES[t], count=n)
        elif t == "bool":
            data = _unbitmap(col.data, n)
        else:
            offs = np.frombuffer(col.offsets, "<i4", count=n + 1) if n else np.zeros(1, "<i4")
            blob = col.data
            if t == "string":
                data = np.array([blob[offs[i]:offs[i + 1]].decode("utf-8") for i in range(n)],
                                dtype=object)
            else:
                data = np.array([blob[offs[i]:offs[i + 1]] for i in range(n)], dtype=object)
            if n == 0:
                data = np.zeros(0, dtype=object)
        self._data.append(data)
        self._valid.append(_unbitmap(col.validity, n) if col.validity else None)
        return n

    def finish(self):
        """The whole column: see the module doc for its form."""
        if self.type_name in FIXED_DTYPES:
            empty = np.zeros(0, FIXED_DTYPES[self.type_name].newbyteorder("="))
        elif self.type_name == "bool":
            empty = np.zeros(0, bool)
        else:
            empty = np.zeros(0, dtype=object)
        data = np.concatenate([empty] + self._data) if self._data else empty
        if self.type_name in FIXED_DTYPES:
            data = data.astype(FIXED_DTYPES[self.type_name].newbyteorder("="), copy=False)
        if not any(v is not None for v in self._valid):
            return data
        valid = np.concatenate(
            [v if v is not None else np.ones(len(d), bool) for d, v in zip(self._data, self._valid)])
        if self.type_name in VARIABLE:
            data[~valid] = None
            return data
        return np.ma.MaskedArray(data, mask=~valid)


def empty_column(type_name: str):
    """A zero-row result column of a type."""
    return ColumnBuilder("", type_name).finish()


def cut_by_bytes(cumulative: np.ndarray, max_rows: int, max_bytes: float,
                 too_big) -> List[Tuple[int, int]]:
    """[start, stop) ranges covering the rows whose wire bytes `cumulative`
    gives (rows + 1 running totals), each of at most `max_rows` rows and
    `max_bytes` bytes. `too_big(start)` gives the exception to raise when row
    `start` alone needs more than `max_bytes`."""
    n = len(cumulative) - 1
    ranges = []
    start = 0
    while start < n:
        fits = int(np.searchsorted(cumulative, cumulative[start] + max_bytes, side="right")) - 1
        stop = min(n, start + max_rows, fits)
        if stop <= start:
            raise too_big(start)
        ranges.append((start, stop))
        start = stop
    return ranges
