"""gpujoin.keys: which key arrays and sequences are sent, and as what bytes.

Reproduces a report: a numpy int64 array sent as packed uint32 keys
gave wrong answers with no error; here it is checked by value before
anything is sent (every key fits, or KeyValueError names the first that does not).
"""
import numpy as np
import pytest

import gpujoin
from gpujoin import keys as K


def test_uint32_array_is_sent_as_little_endian_words():
    a = np.array([1, 0x01020304, 0xFFFFFFFE], np.uint32)
    w = K.to_wire(a, "uint32")
    assert w.dtype == np.dtype("<u4")
    assert w.tobytes() == b"\x01\0\0\0\x04\x03\x02\x01\xfe\xff\xff\xff"


@pytest.mark.parametrize("key_type,dtype", [("uint32", ">u4"), ("uint64", ">u8"), ("uint64", ">u4")])
def test_big_endian_arrays_are_converted_by_value(key_type, dtype):
    a = np.array([1, 7, 0x01020304], dtype)
    w = K.to_wire(a, key_type)
    assert w.dtype.byteorder in "<="
    assert w.tolist() == [1, 7, 0x01020304]
    width = 4 if key_type == "uint32" else 8
    assert w.tobytes()[width * 2:width * 2 + 4] == b"\x04\x03\x02\x01"


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.int8, np.int16, np.int32])
def test_narrower_integer_arrays_are_widened(dtype):
    assert K.to_wire(np.array([0, 5, 100], dtype), "uint32").tolist() == [0, 5, 100]
    assert K.to_wire(np.array([0, 5, 100], dtype), "uint64").dtype == np.dtype("<u8")


@pytest.mark.parametrize("dtype", [np.int64, np.uint64, ">i8"])
def test_wider_arrays_into_uint32_are_checked_by_value(dtype):
    w = K.to_wire(np.array([1, 2, 0xFFFFFFFF], dtype), "uint32")
    assert w.dtype == np.dtype("<u4") and w.tolist() == [1, 2, 0xFFFFFFFF]
    with pytest.raises(gpujoin.KeyValueError) as e:
        K.to_wire(np.array([1, 1 << 32, 3, 1 << 33], dtype), "uint32")
    assert isinstance(e.value, ValueError) and isinstance(e.value, gpujoin.InvalidArgument)
    assert e.value.code.name == "INVALID_ARGUMENT"
    assert e.value.message == "keys[1]: 4294967296 does not fit a uint32 index key (0 to 4294967295)"


def test_negative_values_are_refused_naming_the_row():
    with pytest.raises(gpujoin.KeyValueError,
                       match=r"keys\[2\]: -4 does not fit a uint32 index key \(it is negative"):
        K.to_wire(np.array([3, 0, -4, -5], np.int32), "uint32")
    with pytest.raises(gpujoin.KeyValueError, match=r"view\(numpy.uint64\)") as e:
        K.to_wire(np.array([3, -1], np.int64), "uint64")
    assert isinstance(e.value, ValueError)
    # The explicit reinterpretation is sent as the bit patterns.
    w = K.to_wire(np.array([3, -1], np.int64).view(np.uint64), "uint64")
    assert w.tolist() == [3, 0xFFFFFFFFFFFFFFFF]


def test_non_negative_int64_goes_into_a_uint64_index():
    assert K.to_wire(np.array([5, 1 << 40], np.int64), "uint64").tolist() == [5, 1 << 40]


@pytest.mark.parametrize("bad", [np.array([1.0, 2.0]), np.array([True, False]),
                                 np.array(["1", "2"]), np.zeros((2, 2), np.uint32)])
def test_non_integer_or_multidimensional_arrays_raise(bad):
    with pytest.raises(gpujoin.KeyDtypeError):
        K.to_wire(bad, "uint32")


def test_masked_keys_cannot_be_queried():
    with pytest.raises(gpujoin.KeyDtypeError, match="masked"):
        K.to_wire(np.ma.MaskedArray(np.array([1, 2], np.uint32), mask=[0, 1]), "uint32")


def test_sequences_are_checked_by_value():
    assert K.to_wire([1, 2, 0xFFFFFFFF], "uint32").tolist() == [1, 2, 0xFFFFFFFF]
    assert K.to_wire(range(3), "uint32").tolist() == [0, 1, 2]
    assert K.to_wire([0xFFFFFFFFFFFFFFFF, 1], "uint64").tolist() == [0xFFFFFFFFFFFFFFFF, 1]
    assert K.to_wire([], "uint32").tolist() == []
    with pytest.raises(gpujoin.KeyValueError, match=r"keys\[1\]: 4294967296 does not fit"):
        K.to_wire([1, 1 << 32], "uint32")
    with pytest.raises(gpujoin.KeyValueError, match="negative"):
        K.to_wire([1, -1], "uint64")
    with pytest.raises(gpujoin.KeyValueError):
        K.to_wire([1 << 64], "uint64")
    with pytest.raises(gpujoin.KeyDtypeError):
        K.to_wire([1.5, 2], "uint32")


def test_build_infers_the_key_type():
    assert K.infer_key_type(np.array([1], np.uint32)) == "uint32"
    assert K.infer_key_type(np.array([1], np.int32)) == "uint32"
    assert K.infer_key_type(np.array([1], np.uint64)) == "uint64"
    assert K.infer_key_type(np.array([1], np.int64)) == "uint64"
    assert K.infer_key_type([1, 2]) == "uint32"
    assert K.infer_key_type([1, 1 << 32]) == "uint64"
    with pytest.raises(gpujoin.KeyDtypeError):
        K.infer_key_type(np.array([1.0]))
