"""Key columns: dtype checks and conversion to the wire's little-endian words.

An index has uint32 or uint64 keys. An array is sent only when every value
keeps its meaning in the index's word, so the same numbers reach the server:

* unsigned arrays no wider than the key word are widened (uint8/16/32 into a
  uint64 index); a wider one (uint64 into a uint32 index) is a KeyDtypeError;
* signed arrays no wider than the key word are sent when no value is negative
  (KeyValueError names the first negative row); a wider one (int64 into a
  uint32 index) is a KeyDtypeError, whatever its values: it is never
  reinterpreted. int64 keys meant as bit patterns of a uint64 index are sent
  with ``keys.view(numpy.uint64)``, an explicit reinterpretation;
* bool, float, string and object arrays are KeyDtypeErrors;
* big-endian arrays are converted to little-endian.

Plain Python sequences (lists, tuples, ranges) are checked by value: every
value must be an integer in [0, 2^32 - 1] (uint32) or [0, 2^64 - 1] (uint64).
"""
from typing import Any, Optional, Tuple

import numpy as np

from .errors import KeyDtypeError, KeyValueError

UINT32 = "uint32"
UINT64 = "uint64"
KEY_TYPES = (UINT32, UINT64)
_WIRE = {UINT32: np.dtype("<u4"), UINT64: np.dtype("<u8")}
_MAX = {UINT32: 0xFFFFFFFF, UINT64: 0xFFFFFFFFFFFFFFFF}


def _first_negative(a: np.ndarray) -> Optional[int]:
    neg = np.flatnonzero(a < 0)
    return int(neg[0]) if neg.size else None


def is_array(obj: Any) -> bool:
    """True for numpy arrays (and anything exposing a typed array, such as a pandas Series)."""
    return isinstance(obj, np.ndarray) or (hasattr(obj, "dtype") and hasattr(obj, "__array__"))


def infer_key_type(obj: Any) -> str:
    """The key type a build infers from its keys: from the dtype of an array
    (64-bit integers: uint64; narrower: uint32), from the values of a sequence
    (uint64 when one exceeds 2^32 - 1)."""
    if is_array(obj):
        dt = np.asarray(obj).dtype
        if dt.kind in "ui":
            return UINT64 if dt.itemsize == 8 else UINT32
        raise KeyDtypeError(f"keys: dtype {dt} is not an integer type (uint32 or uint64 keys)")
    a = _sequence_array(obj, "keys")
    return UINT64 if a.size and int(a.max()) > _MAX[UINT32] else UINT32


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
    if a.dtype.kind == "O":
        # Python ints beyond int64: let numpy check them against uint64.
        try:
            a = np.array(a.tolist(), dtype=np.uint64)
        except (OverflowError, TypeError, ValueError) as e:
            raise KeyValueError(f"{what}: values must be integers in [0, 2^64 - 1] ({e})")
    if a.dtype.kind not in "ui" or a.ndim != 1:
        raise KeyDtypeError(f"{what}: a sequence of integers is needed, got {a.dtype} of shape {a.shape}")
    return a


def to_wire(obj: Any, key_type: str, what: str = "keys") -> np.ndarray:
    """`obj` as a contiguous little-endian array of the index's key word
    ('<u4' for uint32, '<u8' for uint64), checked as the module says."""
    if key_type not in KEY_TYPES:
        raise ValueError(f"key_type must be one of {KEY_TYPES}, got {key_type!r}")
    width = _WIRE[key_type].itemsize
    if is_array(obj):
        if isinstance(obj, np.ma.MaskedArray) and np.ma.getmask(obj) is not np.ma.nomask \
                and np.ma.getmaskarray(obj).any():
            raise KeyDtypeError(f"{what}: masked (null) keys cannot be looked up or joined")
        a = np.asarray(obj)
        if a.ndim != 1:
            raise KeyDtypeError(f"{what}: a one-dimensional array is needed, got shape {a.shape}")
        dt = a.dtype
        if dt.kind not in "ui":
            raise KeyDtypeError(f"{what}: dtype {dt} cannot be sent as {key_type} keys "
                                "(integer arrays only)")
        if dt.itemsize > width:
            raise KeyDtypeError(
                f"{what}: an array of dtype {dt.name} cannot be sent to an index with {key_type} keys "
                f"({dt.itemsize}-byte values into {width}-byte keys would be reinterpreted or "
                f"truncated); convert it explicitly, e.g. keys.astype(numpy.{key_type}) after "
                "checking the range")
        if dt.kind == "i":
            neg = _first_negative(a)
            if neg is not None:
                hint = (" (int64 keys meant as bit patterns: pass keys.view(numpy.uint64))"
                        if key_type == UINT64 else "")
                raise KeyValueError(f"{what}[{neg}]: {int(a[neg])} is negative; {key_type} keys "
                                    f"are non-negative{hint}")
        return np.ascontiguousarray(a.astype(_WIRE[key_type], copy=False))
    a = _sequence_array(obj, what)
    if a.size:
        lo, hi = int(a.min()), int(a.max())
        if lo < 0:
            raise KeyValueError(f"{what}[{_first_negative(a)}]: {lo} is negative; {key_type} keys "
                                "are non-negative")
        if hi > _MAX[key_type]:
            row = int(np.flatnonzero(a == a.max())[0])
            raise KeyValueError(f"{what}[{row}]: {hi} does not fit in {key_type} keys (at most "
                                f"{_MAX[key_type]})")
    return np.ascontiguousarray(a.astype(_WIRE[key_type]))


def u32_column(obj: Any, what: str) -> np.ndarray:
    """A uint32 column other than keys (values, left rows, group keys): the same checks."""
    return to_wire(obj, UINT32, what)


def split_masked_keys(obj: Any) -> Tuple[Any, Optional[np.ndarray]]:
    """(keys, valid) of a build's keys: a masked array's mask becomes the validity
    (masked rows are not inserted); anything else has no validity."""
    if isinstance(obj, np.ma.MaskedArray):
        mask = np.ma.getmaskarray(obj)
        if mask.any():
            return np.ma.getdata(obj), ~mask
        return np.ma.getdata(obj), None
    return obj, None
