"""Key columns: dtype checks and conversion to the wire's little-endian words.

An index has uint32 or uint64 keys. Integer keys of any integer dtype are
sent when every value fits the index's key word, so the same numbers reach
the server: they are checked by value, never reinterpreted, wrapped or
truncated.

* numpy arrays of int8/16/32/64 and uint8/16/32/64, pandas Series of those
  dtypes (``pd.read_csv`` gives int64) and of the nullable ``Int64``,
  ``UInt32``, ... dtypes, and numpy object arrays of Python ints are taken
  whatever their width: an int64 column into a uint32 index is sent when
  every value is in [0, 2^32 - 1]. A value that does not fit (negative, or
  above 2^32 - 1 for a uint32 index) is a KeyValueError naming the first
  one and its row, e.g. ``keys[3]: -1 does not fit a uint32 index key (it
  is negative; 0 to 4294967295)``. Narrower arrays are widened (uint32 into
  a uint64 index). int64 keys meant as bit patterns of a uint64 index are
  sent with ``keys.view(numpy.uint64)``, an explicit reinterpretation;
* a null key (a masked row, a pandas NA) is a KeyDtypeError for lookups,
  joins and mutations; in a build its row is not inserted (an invalid row,
  as ``valid``);
* bool, float, string and object arrays of anything but ints are
  KeyDtypeErrors;
* big-endian arrays are converted to little-endian.

The all-ones word (0xffffffff, 0xffffffffffffffff) is sent as any other key:
the server treats it as the reserved empty key (docs/api.md).

Plain Python sequences (lists, tuples, ranges) are checked by value: every
value must be an integer in [0, 2^32 - 1] (uint32) or [0, 2^64 - 1] (uint64).

An index with a *key schema* (key type "columns") has 1 to 8 typed key
columns (KeyColumnSpec: "string", "binary", "int32", "int64", "uint32" or
"uint64"); a row's key is its values across them, and a null in any of them
never matches. Its keys are given as

* one column of str or bytes values (a list, a numpy object, 'U' or 'S'
  array, a pandas Series of strings, StringDtype included), for a schema of
  one column;
* a mapping name -> column or a pandas DataFrame, its columns matched to the
  key columns by name;
* a list or tuple of columns (numpy arrays or pandas Series), matched to the
  key columns by position.

Each column is converted as a payload column of the key column's type
(gpujoin.columns: None, pandas.NA and masked rows are null; integers are
checked by value, never reinterpreted; str values of a binary column are
sent as their UTF-8 bytes, bytes values of a string column must be UTF-8).
"""
from typing import Any, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from . import columns as _columns
from .errors import KeyDtypeError, KeyValueError

UINT32 = "uint32"
UINT64 = "uint64"
#: The key type of an index with a key schema.
COLUMNS = "columns"
KEY_TYPES = (UINT32, UINT64)
#: The column types a key column may have.
KEY_COLUMN_TYPES = ("int32", "int64", "uint32", "uint64", "string", "binary")
#: Most key columns in a key schema.
MAX_KEY_COLUMNS = 8
_WIRE = {UINT32: np.dtype("<u4"), UINT64: np.dtype("<u8")}
_MAX = {UINT32: 0xFFFFFFFF, UINT64: 0xFFFFFFFFFFFFFFFF}


def is_array(obj: Any) -> bool:
    """True for numpy arrays (and anything exposing a typed array, such as a pandas Series)."""
    return isinstance(obj, np.ndarray) or (hasattr(obj, "dtype") and hasattr(obj, "__array__"))


def infer_key_type(obj: Any) -> str:
    """The key type a build infers from its keys: from the dtype of an array
    (64-bit integers: uint64; narrower: uint32; a pandas nullable dtype by its
    numpy dtype), from the values of a sequence (uint64 when one exceeds
    2^32 - 1)."""
    a, _ = integer_values(obj, "keys")
    if is_array(obj) and getattr(obj.dtype, "kind", "O") in "ui":
        return UINT64 if a.dtype.itemsize == 8 else UINT32
    return UINT64 if a.size and int(a.max()) > _MAX[UINT32] else UINT32


def _objects_array(items: Sequence[Any], what: str) -> np.ndarray:
    """Python ints (of a list or an object array) as an int64 array, or uint64
    where one passes 2^63 - 1 and none is negative; a value neither holds (below
    -2^63, or past 2^64 - 1, or a negative one beside one past 2^63 - 1) fits no
    key, and KeyValueError names the first."""
    for i, v in enumerate(items):
        if not isinstance(v, (int, np.integer)) or isinstance(v, (bool, np.bool_)):
            raise KeyDtypeError(f"{what}[{i}]: {v!r} is not an integer")
    values = [int(v) for v in items]
    if all(-(1 << 63) <= v < (1 << 63) for v in values):
        return np.array(values, np.int64)
    for i, v in enumerate(values):
        if not 0 <= v <= _MAX[UINT64]:
            raise KeyValueError(f"{what}[{i}]: {v} does not fit an index key (0 to {_MAX[UINT64]})")
    return np.array(values, np.uint64)


def _sequence_array(obj: Any, what: str) -> np.ndarray:
    items = obj if isinstance(obj, (list, tuple)) else list(obj)
    try:
        a = np.asarray(items)
    except (TypeError, ValueError) as e:
        raise KeyDtypeError(f"{what}: cannot read {type(obj).__name__} as integers ({e})")
    if a.dtype.kind == "f" and all(isinstance(v, (int, np.integer)) for v in items):
        a = np.array(items, dtype=object)  # ints above 2^63 mixed with others: numpy chose float
    if a.size == 0:
        return np.zeros(0, np.uint64)
    if a.dtype.kind == "O" and a.ndim == 1:
        return _objects_array(items, what)
    if a.dtype.kind not in "ui" or a.ndim != 1:
        raise KeyDtypeError(f"{what}: a sequence of integers is needed, got {a.dtype} of shape {a.shape}")
    return a


def integer_values(obj: Any, what: str = "keys") -> Tuple[np.ndarray, Optional[np.ndarray]]:
    """(values, null) of one column of integer keys, not yet checked against a
    key type: a numpy integer array of any width and byte order; a pandas Series
    (a nullable Int64/UInt32/... dtype included) or masked array as its numpy
    values, its NA or masked rows set in `null` (None when no row is null) and
    filled with 0; a numpy object array or a Python sequence by value (Python
    ints). KeyDtypeError for anything else (bool, float, str)."""
    if not is_array(obj):
        return _sequence_array(obj, what), None
    values, null = _columns.numbers_and_nulls(obj)
    a = np.asarray(values)
    if a.ndim != 1:
        raise KeyDtypeError(f"{what}: a one-dimensional array is needed, got shape {a.shape}")
    if a.dtype.kind == "O":
        items = a.tolist() if null is None else [0 if n else v for v, n in zip(a.tolist(), null)]
        a = _objects_array(items, what) if items else np.zeros(0, np.uint64)
    if a.dtype.kind not in "ui":
        raise KeyDtypeError(f"{what}: dtype {a.dtype} cannot be sent as integer keys "
                            "(integer arrays only)")
    return a, null


def _fit(a: np.ndarray, key_type: str, what: str, noun: str) -> np.ndarray:
    """Integer array `a` as the little-endian words of `key_type`, every value
    checked to fit (never wrapped or truncated); KeyValueError names the
    first row that does not."""
    row = _columns.first_out_of_range(a, 0, _MAX[key_type])
    if row is not None:
        v = int(a[row])
        why = "it is negative; " if v < 0 else ""
        hint = (" (int64 keys meant as bit patterns: pass keys.view(numpy.uint64))"
                if v < 0 and key_type == UINT64 and a.dtype == np.int64 else "")
        raise KeyValueError(f"{what}[{row}]: {v} does not fit {noun} ({why}0 to "
                            f"{_MAX[key_type]}){hint}")
    return np.ascontiguousarray(a.astype(_WIRE[key_type], copy=False))


def to_wire(obj: Any, key_type: str, what: str = "keys") -> np.ndarray:
    """`obj` as a contiguous little-endian array of the index's key word
    ('<u4' for uint32, '<u8' for uint64), checked as the module says. A null
    key (a masked row, a pandas NA) is a KeyDtypeError: it cannot be looked
    up, joined or mutated."""
    if key_type not in KEY_TYPES:
        raise ValueError(f"key_type must be one of {KEY_TYPES}, got {key_type!r}")
    a, null = integer_values(obj, what)
    if null is not None:
        row = int(np.flatnonzero(null)[0])
        raise KeyDtypeError(f"{what}[{row}]: a null key (masked or NA) cannot be looked up, "
                            "joined or mutated")
    return _fit(a, key_type, what, f"a {key_type} index key")


def u32_column(obj: Any, what: str) -> np.ndarray:
    """A uint32 column other than keys (values, left rows, group keys): the same checks."""
    a, null = integer_values(obj, what)
    if null is not None:
        row = int(np.flatnonzero(null)[0])
        raise KeyDtypeError(f"{what}[{row}]: a null (masked or NA) value cannot be sent as uint32")
    return _fit(a, UINT32, what, "uint32")


def split_masked_keys(obj: Any) -> Tuple[Any, Optional[np.ndarray]]:
    """(keys, valid) of a build's keys: the null rows of a masked array or of a
    pandas Series with a nullable dtype become the validity (they are not
    inserted); anything else has no validity."""
    if isinstance(obj, np.ma.MaskedArray) or _columns.is_pandas(obj):
        a, null = integer_values(obj)
        return a, (None if null is None else ~null)
    return obj, None


# ---------------------------------------------------------------- key schemas


class KeyColumnSpec(NamedTuple):
    """One column of a key schema (build_index's ``key_columns``,
    ``IndexInfo.key_columns``): a name and a type of KEY_COLUMN_TYPES. A plain
    ``(name, type)`` tuple is the same."""
    name: str
    type: str


def _type_name(t: Any, what: str) -> str:
    """A key column type from its name, str (string), bytes (binary), int (int64)
    or a numpy integer dtype."""
    if isinstance(t, str) and t in KEY_COLUMN_TYPES:
        return t
    if t is str:
        return "string"
    if t is bytes:
        return "binary"
    if t is int:
        return "int64"
    try:
        dt = np.dtype(t)
    except TypeError:
        dt = None
    name = {("i", 4): "int32", ("i", 8): "int64", ("u", 4): "uint32", ("u", 8): "uint64"}.get(
        (dt.kind, dt.itemsize)) if dt is not None else None
    if name is None:
        raise KeyDtypeError(f"{what}: {t!r} cannot be a key column type (one of "
                            f"{', '.join(KEY_COLUMN_TYPES)})")
    return name


def key_schema(spec: Any) -> List[KeyColumnSpec]:
    """The key schema `spec` declares: a mapping name -> type or a sequence of
    (name, type) pairs, in key column order; a type is a name of
    KEY_COLUMN_TYPES, str, bytes, int or a numpy 32- or 64-bit integer dtype.
    KeyValueError for no columns, more than MAX_KEY_COLUMNS or a name given
    twice; KeyDtypeError for a type that cannot be a key."""
    pairs = list(spec.items()) if isinstance(spec, Mapping) else list(spec)
    if not 1 <= len(pairs) <= MAX_KEY_COLUMNS:
        raise KeyValueError(f"key_columns: {len(pairs)} key columns; a key has 1 to "
                            f"{MAX_KEY_COLUMNS}")
    schema = []
    for i, pair in enumerate(pairs):
        try:
            name, t = pair
        except (TypeError, ValueError):
            raise KeyDtypeError(f"key_columns[{i}]: {pair!r} is not a (name, type) pair") from None
        if not isinstance(name, str) or not name:
            raise KeyValueError(f"key_columns[{i}]: the name must be a non-empty str, got {name!r}")
        schema.append(KeyColumnSpec(name, _type_name(t, f"key_columns[{i}] ({name!r})")))
    _check_unique(schema, "key_columns")
    return schema


def _check_unique(schema: Sequence[KeyColumnSpec], what: str) -> None:
    seen = {}
    for i, s in enumerate(schema):
        if s.name in seen:
            raise KeyValueError(f"{what}[{i}]: key column {s.name!r} is declared twice (also "
                                f"{what}[{seen[s.name]}])")
        seen[s.name] = i


def describe_schema(schema: Sequence[KeyColumnSpec]) -> str:
    """"tenant string, order_id int64"."""
    return ", ".join(f"{s.name} {s.type}" for s in schema)


def is_frame(obj: Any) -> bool:
    """True for a pandas DataFrame (recognised without importing pandas)."""
    return hasattr(obj, "columns") and hasattr(obj, "iloc")


def _is_column_list(obj: Any) -> bool:
    return isinstance(obj, (list, tuple)) and len(obj) > 0 and all(
        is_array(c) and getattr(c, "ndim", 0) == 1 for c in obj)


def _first_value(obj: Any) -> Any:
    """The first non-null value of a column of objects (None if every row is null)."""
    for v in obj:
        if v is not None and type(v).__name__ != "NAType" and not (isinstance(v, float) and v != v):
            return v
    return None


def _holds_text(obj: Any) -> bool:
    """True for one column of str or bytes values."""
    if isinstance(obj, (str, bytes)):
        return False
    dt = getattr(obj, "dtype", None)
    if dt is not None:
        if getattr(dt, "name", "") == "string":  # pandas StringDtype
            return True
        kind = getattr(dt, "kind", "")
        if kind in "US" and isinstance(dt, np.dtype):
            return True
        if kind != "O":
            return False
    if isinstance(obj, np.ndarray) and obj.ndim != 1:
        return False
    # Only containers are looked into: a generator's first rows would be consumed.
    if not (isinstance(obj, (list, tuple, np.ndarray)) or hasattr(obj, "isna")):
        return False
    return isinstance(_first_value(obj), (str, bytes, bytearray, memoryview))


def is_key_columns(obj: Any) -> bool:
    """True for keys that need a key schema (see the module doc): a mapping or
    DataFrame of columns, a list of columns, or one column of str or bytes."""
    return isinstance(obj, Mapping) or is_frame(obj) or _is_column_list(obj) or _holds_text(obj)


def key_input_columns(obj: Any) -> Tuple[bool, List[Tuple[str, Any]]]:
    """(named, [(name, column)]) of key input: a mapping's or DataFrame's
    columns by name (named True); a list of columns, each named after its
    Series name or "key0", "key1", ...; one column named after its Series name
    or "key"."""
    if isinstance(obj, Mapping):
        return True, [(str(k), v) for k, v in obj.items()]
    if is_frame(obj):
        return True, [(str(k), obj[k]) for k in obj.columns]
    cols = list(obj) if _is_column_list(obj) else [obj]
    out = []
    for i, c in enumerate(cols):
        name = getattr(c, "name", None)
        if not isinstance(name, str) or not name:
            name = "key" if len(cols) == 1 and c is obj else f"key{i}"
        out.append((name, c))
    return False, out


def frame_keys(frame: Any, on: Union[str, Sequence[str]], what: str = "on") -> Any:
    """The keys of a DataFrame's (or a mapping name -> column's) columns `on`
    (a name, or a list of names in key column order): one column, or a list of
    columns (matched by position). KeyValueError naming a missing column and
    listing the frame's."""
    names = [on] if isinstance(on, str) else list(on)
    if not names:
        raise KeyValueError(f"{what}: no columns named; name the key column(s)")
    columns = list(frame.columns) if is_frame(frame) else list(frame)
    missing = [n for n in names if n not in columns]
    if missing:
        raise KeyValueError(f"{what}: the DataFrame has no column {missing[0]!r} (its columns: "
                            f"{', '.join(map(repr, columns))})")
    if len(names) == 1:
        return frame[names[0]]
    return [frame[n] for n in names]


class KeyColumns:
    """Key columns converted for the wire: one gpujoin.columns.EncodedColumn per
    key column, in the schema's order, all of one length. ``k[start:stop]`` is
    a view of those rows; ``messages(pb)`` makes their proto Columns."""

    def __init__(self, columns: Sequence["_columns.EncodedColumn"], start: int = 0,
                 stop: Optional[int] = None):
        self.columns = list(columns)
        self._start = start
        self._stop = self.columns[0].length if stop is None else stop
        self._cumulative: Optional[np.ndarray] = None

    def __len__(self) -> int:
        return self._stop - self._start

    def __getitem__(self, rows: slice) -> "KeyColumns":
        start, stop, _ = rows.indices(len(self))
        view = KeyColumns(self.columns, self._start + start, self._start + max(start, stop))
        view._cumulative = self._cumulative
        return view

    def cumulative_bytes(self) -> np.ndarray:
        """Wire bytes of rows [0, i) of this view, for i in 0..len(self)."""
        if self._cumulative is None:
            self._cumulative = sum(c.cumulative_bytes() for c in self.columns)
        c = self._cumulative[self._start:self._stop + 1]
        return c - c[0]

    @property
    def nbytes(self) -> int:
        """Wire bytes of the rows (values, offsets, validity)."""
        return int(np.ceil(self.cumulative_bytes()[-1]))

    def messages(self, pb) -> List[Any]:
        """The proto Columns of the rows, one per key column."""
        return [c.chunk(pb, self._start, self._stop) for c in self.columns]


WireKeys = Union[np.ndarray, KeyColumns]


def _encode_key_column(name: str, col: Any, t: Optional[str],
                       what: str) -> "_columns.EncodedColumn":
    e = _columns.encode_column(name, col, t, what=what)
    if e.type_name not in KEY_COLUMN_TYPES:
        raise KeyDtypeError(f"{what}: {e.type_name} values cannot be a key column (one of "
                            f"{', '.join(KEY_COLUMN_TYPES)})")
    return e


def _check_lengths(encoded: Sequence["_columns.EncodedColumn"], what: str) -> KeyColumns:
    first = encoded[0]
    for i, e in enumerate(encoded[1:], 1):
        if e.length != first.length:
            raise KeyValueError(f"{what}: key column {i} ({e.name!r}) has {e.length} rows but key "
                                f"column 0 ({first.name!r}) has {first.length} (every key column "
                                "has one row per key)")
    return KeyColumns(encoded)


def build_key_columns(obj: Any, spec: Any = None,
                      what: str = "keys") -> Tuple[List[KeyColumnSpec], KeyColumns]:
    """(schema, key columns) of a build: the schema `spec` declares (key_schema)
    with `obj` matched to it (encode_key_columns), or without `spec` the schema
    the input gives (its column names, see key_input_columns, and the types of
    their values: str -> string, bytes -> binary, Python int -> int64, numpy
    integers by dtype)."""
    if spec is not None:
        schema = key_schema(spec)
        return schema, encode_key_columns(obj, schema, what)
    _, cols = key_input_columns(obj)
    if len(cols) > MAX_KEY_COLUMNS:
        raise KeyValueError(f"{what}: {len(cols)} key columns; a key has 1 to {MAX_KEY_COLUMNS}")
    encoded = [_encode_key_column(n, c, None, f"{what} column {n!r}") for n, c in cols]
    schema = [KeyColumnSpec(e.name, e.type_name) for e in encoded]
    _check_unique(schema, f"{what} columns")
    return schema, _check_lengths(encoded, what)


def encode_key_columns(obj: Any, schema: Sequence[KeyColumnSpec], what: str = "keys",
                       index: Optional[str] = None) -> KeyColumns:
    """`obj` (see the module doc) as the key columns of `schema`, each converted
    to its key column's type. KeyValueError when the columns do not match the
    schema (count, names) or their lengths differ; KeyDtypeError (or
    KeyValueError for a value that does not fit) naming the column otherwise."""
    schema = [KeyColumnSpec(*s) for s in schema]
    of = f"index {index!r}" if index is not None else "the index"
    named, cols = key_input_columns(obj)
    if named:
        names = [n for n, _ in cols]
        wanted = [s.name for s in schema]
        missing = [n for n in wanted if n not in names]
        extra = [n for n in names if n not in wanted]
        if missing or extra:
            parts = ([f"no column {', '.join(map(repr, missing))}"] if missing else []) + \
                    ([f"unknown column {', '.join(map(repr, extra))}"] if extra else [])
            raise KeyValueError(f"{what}: {'; '.join(parts)}: the key columns of {of} are "
                                f"({describe_schema(schema)})")
        by_name = dict(cols)
        cols = [(s.name, by_name[s.name]) for s in schema]
    elif len(cols) != len(schema):
        raise KeyValueError(f"{what}: {len(cols)} key column{'s' if len(cols) != 1 else ''}, but "
                            f"{of} has a key of {len(schema)} ({describe_schema(schema)}); pass "
                            "a mapping name -> column, a DataFrame or a list of columns in that "
                            "order")
    encoded = [_encode_key_column(s.name, c, s.type,
                                  f"{what} column {s.name!r} (key column {i} of {of}, {s.type})")
               for i, (s, (_, c)) in enumerate(zip(schema, cols))]
    return _check_lengths(encoded, what)


def query_keys(obj: Any, info: Any, what: str = "keys") -> WireKeys:
    """The keys of a lookup or join of the index `info` (an IndexInfo) for the
    wire: its key columns (encode_key_columns), or its integer words (to_wire).
    Key-schema keys for an integer index are a KeyDtypeError."""
    if info.key_type == COLUMNS:
        return encode_key_columns(obj, info.key_columns, what, info.name)
    if is_key_columns(obj):
        raise KeyDtypeError(f"{what}: index {info.name!r} has {info.key_type} keys; string, bytes "
                            "and composite keys need an index with key columns "
                            "(build_index(..., key_columns=...))")
    return to_wire(obj, info.key_type, what)


def row_bytes(keys: WireKeys) -> int:
    """Wire bytes per key: the word's width, or the key columns' mean (at least 1)."""
    if isinstance(keys, np.ndarray):
        return keys.dtype.itemsize
    return max(1, int(np.ceil(keys.nbytes / len(keys)))) if len(keys) else 1


def batch_ranges(keys: WireKeys, max_rows: int, max_bytes: int, what: str = "keys",
                 row_extra: float = 0) -> List[Tuple[int, int]]:
    """[start, stop) row ranges covering `keys`, each of at most `max_rows` rows
    and `max_bytes` wire bytes: its keys' and `row_extra` bytes per row (the
    other columns sent beside them). KeyValueError when one row alone needs
    more than `max_bytes`."""
    n = len(keys)
    if isinstance(keys, np.ndarray):
        rows = max(1, min(max_rows, int(max_bytes // (keys.dtype.itemsize + row_extra))))
        return [(s, min(n, s + rows)) for s in range(0, n, rows)]
    cumulative = keys.cumulative_bytes() + row_extra * np.arange(n + 1)
    return _columns.cut_by_bytes(cumulative, max_rows, max_bytes, lambda start: KeyValueError(
        f"{what}: row {start}'s key takes "
        f"{cumulative[start + 1] - cumulative[start] - row_extra:.0f} "
        f"bytes on the wire, more than a message to the server carries ({max_bytes} bytes)"))
