"""Typed gpujoin.v1.Column values for the Query tests, written and read here
from docs/api.md ("Payload columns": Arrow's layout) rather than through the
gpujoin package, so the tests check the wire format independently of the
client library.

Values are Python objects, None for a null: int for the integer types, float
for FLOAT32/FLOAT64 (FLOAT32 values already rounded to binary32), bool for
BOOL and bytes for STRING/BINARY.
"""
import math
import struct

from gpujoin._proto import pb

#: struct format, smallest and largest value of each integer column type.
INT_TYPES = {
    pb.COLUMN_TYPE_INT32: ("<i", -2**31, 2**31 - 1),
    pb.COLUMN_TYPE_INT64: ("<q", -2**63, 2**63 - 1),
    pb.COLUMN_TYPE_UINT32: ("<I", 0, 2**32 - 1),
    pb.COLUMN_TYPE_UINT64: ("<Q", 0, 2**64 - 1),
}
FLOAT_TYPES = {pb.COLUMN_TYPE_FLOAT32: "<f", pb.COLUMN_TYPE_FLOAT64: "<d"}
STRING_TYPES = (pb.COLUMN_TYPE_STRING, pb.COLUMN_TYPE_BINARY)
SIGNED = (pb.COLUMN_TYPE_INT32, pb.COLUMN_TYPE_INT64)


def type_name(t):
    return pb.ColumnType.Name(t)


def kind_of(t):
    """The literal kind a column type compares with: int, float, string or bool."""
    if t in INT_TYPES:
        return "int"
    if t in FLOAT_TYPES:
        return "float"
    if t in STRING_TYPES:
        return "string"
    if t == pb.COLUMN_TYPE_BOOL:
        return "bool"
    raise ValueError(f"no kind for {type_name(t)}")


def f32(x):
    """x rounded to binary32, as a Python float."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def bitmap(bits):
    out = bytearray((len(bits) + 7) // 8)
    for i, b in enumerate(bits):
        if b:
            out[i // 8] |= 1 << (i % 8)
    return bytes(out)


def read_bit(data, i):
    return (data[i // 8] >> (i % 8)) & 1


def encode(name, t, values):
    """A Column named `name` of type `t` holding `values` (None = null)."""
    n = len(values)
    col = pb.Column(name=name, type=t, length=n)
    if any(v is None for v in values):
        col.validity = bitmap([v is not None for v in values])
        col.null_count = sum(v is None for v in values)  # ignored in requests
    if t in INT_TYPES:
        fmt = INT_TYPES[t][0]
        col.data = b"".join(struct.pack(fmt, 0 if v is None else v) for v in values)
    elif t in FLOAT_TYPES:
        fmt = FLOAT_TYPES[t]
        col.data = b"".join(struct.pack(fmt, 0.0 if v is None else v) for v in values)
    elif t == pb.COLUMN_TYPE_BOOL:
        col.data = bitmap([bool(v) for v in values])
    elif t in STRING_TYPES:
        data, offsets = b"", [0]
        for v in values:
            data += v or b""
            offsets.append(len(data))
        col.data = data
        col.offsets = struct.pack(f"<{n + 1}i", *offsets)
    else:
        raise ValueError(f"cannot encode {type_name(t)}")
    return col


def decode(col):
    """The values of a result Column; raises AssertionError where its buffers
    do not have the sizes docs/api.md gives or null_count disagrees with the
    validity bitmap."""
    n, t = col.length, col.type
    where = f"result column {col.name!r} ({type_name(t)}, {n} rows)"
    valid = [True] * n
    if col.validity:
        assert len(col.validity) == (n + 7) // 8, f"{where}: validity of {len(col.validity)} bytes"
        valid = [bool(read_bit(col.validity, i)) for i in range(n)]
    assert col.null_count == valid.count(False), \
        f"{where}: null_count {col.null_count}, but the validity bitmap has {valid.count(False)} nulls"
    if t in INT_TYPES or t in FLOAT_TYPES:
        fmt = INT_TYPES[t][0] if t in INT_TYPES else FLOAT_TYPES[t]
        width = struct.calcsize(fmt)
        assert len(col.data) == n * width, f"{where}: data of {len(col.data)} bytes"
        values = [struct.unpack_from(fmt, col.data, i * width)[0] for i in range(n)]
    elif t == pb.COLUMN_TYPE_BOOL:
        assert len(col.data) == (n + 7) // 8, f"{where}: data of {len(col.data)} bytes"
        values = [bool(read_bit(col.data, i)) for i in range(n)]
    elif t in STRING_TYPES:
        assert len(col.offsets) == 4 * (n + 1), f"{where}: offsets of {len(col.offsets)} bytes"
        offsets = struct.unpack(f"<{n + 1}i", col.offsets)
        assert all(a <= b for a, b in zip(offsets, offsets[1:])) and offsets[-1] <= len(col.data), \
            f"{where}: offsets {offsets} into {len(col.data)} bytes"
        values = [bytes(col.data[offsets[i]:offsets[i + 1]]) for i in range(n)]
    else:
        raise AssertionError(f"{where}: not a result column type")
    return [v if ok else None for v, ok in zip(values, valid)]


def same_value(a, b):
    """Exact equality, with NaN equal to NaN and -0.0 equal to 0.0."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b and type(a) is type(b)
