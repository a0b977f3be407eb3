"""gpujoin.columns: payload inputs to the wire's Arrow layout and result columns
back, across chunk boundaries (bitmaps continue mid-byte, offsets are rebased)."""
import numpy as np
import pytest

import gpujoin
from gpujoin import columns as C
from gpujoin._proto import pb


def roundtrip(obj, type_name=None, cuts=(0, 3, 11)):
    """Encodes obj, cuts it into chunks at `cuts`, decodes the chunks in order."""
    e = C.encode_column("c", obj, type_name)
    bounds = [c for c in cuts if c < e.length] + [e.length]
    b = C.ColumnBuilder("c", e.type_name)
    for lo, hi in zip(bounds, bounds[1:]):
        msg = pb.Column()
        msg.ParseFromString(e.chunk(pb, lo, hi).SerializeToString())
        assert b.add(msg) == hi - lo
    return e.type_name, b.finish()


@pytest.mark.parametrize("dtype,type_name", [(np.uint32, "uint32"), (np.int32, "int32"),
                                             (np.uint64, "uint64"), (np.int64, "int64"),
                                             (np.float32, "float32"), (np.float64, "float64"),
                                             (np.uint16, "uint32"), (np.int8, "int32")])
def test_fixed_width_by_dtype(dtype, type_name):
    a = (np.arange(20) * 3).astype(dtype)
    t, out = roundtrip(a)
    assert t == type_name
    assert not isinstance(out, np.ma.MaskedArray)
    assert out.tolist() == a.tolist()


def test_big_endian_payload_is_converted():
    t, out = roundtrip(np.arange(13, dtype=">f8") / 4)
    assert t == "float64" and out.tolist() == (np.arange(13) / 4).tolist()


def test_masked_array_gives_nulls():
    a = np.ma.MaskedArray(np.arange(17, dtype=np.int64) - 8, mask=[i % 3 == 0 for i in range(17)])
    t, out = roundtrip(a)
    assert t == "int64" and isinstance(out, np.ma.MaskedArray)
    assert out.mask.tolist() == a.mask.tolist()
    assert out.compressed().tolist() == a.compressed().tolist()


def test_sequences_with_none():
    strings = ["tea", None, "", "jäm", "x" * 100] * 3
    t, out = roundtrip(strings)
    assert t == "string" and out.tolist() == strings
    blobs = [b"\x00\xff", None, b""] * 5
    t, out = roundtrip(blobs)
    assert t == "binary" and out.tolist() == blobs
    flags = [True, None, False, True, True, False, None, True, False, True, True, False, True]
    t, out = roundtrip(flags)
    assert t == "bool"
    assert [None if m else bool(v) for v, m in zip(out.data, out.mask)] == flags
    t, out = roundtrip([1, None, 3])
    assert t == "int64" and out.mask.tolist() == [False, True, False]


def test_numpy_strings_and_explicit_types():
    t, out = roundtrip(np.array(["a", "bc", "def"]))
    assert t == "string" and out.tolist() == ["a", "bc", "def"]
    t, out = roundtrip([1, 2, 3], "float32")
    assert t == "float32" and out.dtype == np.float32
    t, out = roundtrip(["a", "b"], "binary")
    assert t == "binary" and out.tolist() == [b"a", b"b"]
    with pytest.raises(gpujoin.KeyValueError, match="does not fit in uint32"):
        C.encode_column("c", np.array([-1, 2]), "uint32")
    with pytest.raises(gpujoin.KeyDtypeError):
        C.encode_column("c", np.array([1.5]), "int32")
    with pytest.raises(gpujoin.KeyDtypeError, match="mixed"):
        C.encode_column("c", [1, "a"])
    with pytest.raises(gpujoin.InvalidArgument, match="UTF-8"):
        C.encode_column("c", [b"\xff"], "string")
    # Rows of both kinds take the row-by-row path: UTF-8 bytes in a string column.
    t, out = roundtrip([b"ab", "c\u00e9", None, bytearray(b"d")], "string")
    assert t == "string" and out.tolist() == ["ab", "c\u00e9", None, "d"]
    with pytest.raises(gpujoin.KeyDtypeError, match="row 1 is a int"):
        C.encode_column("c", ["a", 5], "string")


def test_pandas_nullable_series():
    pd = pytest.importorskip("pandas")
    t, out = roundtrip(pd.Series([1, None, 3], dtype="Int32"))
    assert t == "int32" and out.mask.tolist() == [False, True, False] and out[2] == 3
    t, out = roundtrip(pd.Series(["a", None, "c"]))
    assert t == "string" and out.tolist() == ["a", None, "c"]
    t, out = roundtrip(pd.Series([1.5, float("nan")]))
    assert t == "float64" and out.mask.tolist() == [False, True]


def test_empty_columns_keep_their_type():
    for t in C.TYPE_NUMBERS:
        out = C.empty_column(t)
        assert len(out) == 0
