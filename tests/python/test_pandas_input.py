"""pandas frames as a new user has them, against a real gpujoind.

Reproduces a report: ``pd.read_csv`` gives int64 columns, and
``lookup_frame("sensors", events, on="sensor_id")`` on a uint32 index raised
KeyDtypeError although every ID fits; ``build_index(name, dataframe)`` was
refused. Integer keys of any dtype are now checked by value (never
reinterpreted) and ``build_index(name, frame, key="id")`` takes a DataFrame.
"""
import io

import numpy as np
import pytest

import gpujoin
from gpujoin import NO_MATCH
from gpujoin import keys as K

pd = pytest.importorskip("pandas")

SENSORS_CSV = """sensor_id,kind,threshold,active
17,temp,21.5,true
4242,door,0.0,false
99,,7.25,true
"""

EVENTS_CSV = """sensor_id,reading
99,1.5
8,2.0
17,3.5
4242,4.0
17,5.0
"""

INTEGER_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                  "Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64"]


# ---------------------------------------------------------------- conversion, no server


@pytest.mark.parametrize("dtype", INTEGER_DTYPES)
@pytest.mark.parametrize("key_type", ["uint32", "uint64"])
def test_every_integer_dtype_is_sent_by_value(dtype, key_type):
    s = pd.Series([0, 5, 100, 127], dtype=dtype)
    w = K.to_wire(s, key_type)
    assert w.dtype == np.dtype("<u4" if key_type == "uint32" else "<u8")
    assert w.tolist() == [0, 5, 100, 127]
    if dtype[0] != "I" and dtype[0] != "U":  # numpy dtypes: the array itself too
        assert K.to_wire(s.to_numpy(), key_type).tolist() == [0, 5, 100, 127]


@pytest.mark.parametrize("keys,key_type,message", [
    (np.array([1, 2, 3, -1, -2], np.int64), "uint32",
     r"keys\[3\]: -1 does not fit a uint32 index key \(it is negative; 0 to 4294967295\)$"),
    (np.array([7, 1 << 32, 1 << 40], np.int64), "uint32",
     r"keys\[1\]: 4294967296 does not fit a uint32 index key \(0 to 4294967295\)$"),
    (np.array([5, 1 << 63], np.uint64), "uint32", r"keys\[1\]: 9223372036854775808 does not fit"),
    (pd.Series([4, -8], dtype="Int64"), "uint64",
     r"keys\[1\]: -8 does not fit a uint64 index key \(it is negative"),
    (pd.Series([3, -1], dtype="int8"), "uint32", r"keys\[1\]: -1 does not fit a uint32"),
    ([1, 2, 1 << 32], "uint32", r"keys\[2\]: 4294967296 does not fit a uint32 index key"),
    ([1, -3], "uint64", r"keys\[1\]: -3 does not fit a uint64 index key"),
])
def test_a_value_that_does_not_fit_names_the_first_one_and_its_row(keys, key_type, message):
    with pytest.raises(gpujoin.KeyValueError, match=message) as e:
        K.to_wire(keys, key_type)
    assert isinstance(e.value, ValueError) and e.value.code.name == "INVALID_ARGUMENT"


@pytest.mark.parametrize("keys", [pd.Series([1.0, 2.0]), pd.Series([True, False]),
                                  np.array([1.5]), pd.Series(["1", "2"], dtype=object).to_numpy()])
def test_floats_bools_and_strings_stay_dtype_errors(keys):
    with pytest.raises(gpujoin.KeyDtypeError):
        K.to_wire(keys, "uint32")


def test_a_nullable_null_key_cannot_be_looked_up():
    with pytest.raises(gpujoin.KeyDtypeError, match=r"keys\[2\]: a null key \(masked or NA\)"):
        K.to_wire(pd.Series([1, 2, None], dtype="Int64"), "uint32")
    # In a build, a null row is an invalid row, as a masked row is.
    keys, valid = K.split_masked_keys(pd.Series([7, None, 9], dtype="UInt32"))
    assert keys.tolist() == [7, 0, 9] and valid.tolist() == [True, False, True]


def test_values_and_left_rows_take_any_integer_dtype_checked():
    assert K.u32_column(np.array([0, 4294967295], np.int64), "values").tolist() == [0, 4294967295]
    with pytest.raises(gpujoin.KeyValueError, match=r"values\[1\]: 4294967296 does not fit uint32"):
        K.u32_column(np.array([0, 1 << 32], np.int64), "values")


# ---------------------------------------------------------------- against a server


def test_read_csv_frames_look_up_a_uint32_and_a_uint64_index(client):
    events = pd.read_csv(io.StringIO(EVENTS_CSV))
    assert events["sensor_id"].dtype == np.int64
    client.build_index("pd_sensors32", np.array([17, 4242, 99], np.uint32),
                       payload={"kind": ["temp", "door", None]}, replace=True)
    client.build_index("pd_sensors64", np.array([17, 4242, 99], np.uint64), replace=True)
    out = client.lookup_frame("pd_sensors32", events, on="sensor_id", select=["kind"])
    assert out["sensor_id"].tolist() == [99, 8, 17, 4242, 17]
    assert out["reading"].tolist() == [1.5, 2.0, 3.5, 4.0, 5.0]
    assert out["found"].tolist() == [True, False, True, True, True]
    assert out["value"].tolist() == [2, pd.NA, 0, 1, 0]
    assert out["kind"].tolist() == [None, None, "temp", "door", "temp"]
    out64 = client.lookup_frame("pd_sensors64", events, on="sensor_id")
    assert out64["value"].tolist() == [2, pd.NA, 0, 1, 0]
    # join_frame takes the same int64 column.
    j = client.join_frame("pd_sensors32", events, on="sensor_id", kind="inner")
    assert j["sensor_id"].tolist() == [99, 17, 4242, 17]
    assert j["right_row"].tolist() == [2, 0, 1, 0]


@pytest.mark.parametrize("dtype", INTEGER_DTYPES)
def test_lookup_takes_every_integer_dtype(client, dtype):
    client.build_index("pd_dtypes", np.array([3, 100, 7], np.uint32), replace=True)
    r = client.lookup("pd_dtypes", pd.Series([7, 3, 5, 100], dtype=dtype))
    assert r.values.tolist() == [2, 0, NO_MATCH, 1]


def test_keys_that_do_not_fit_are_refused_before_anything_is_sent(client):
    client.build_index("pd_fit", np.array([1, 2], np.uint32), replace=True)
    frame = pd.read_csv(io.StringIO("sensor_id\n1\n2\n-1\n4294967296\n"))
    with pytest.raises(gpujoin.KeyValueError,
                       match=r"keys\[2\]: -1 does not fit a uint32 index key"):
        client.lookup_frame("pd_fit", frame, on="sensor_id")
    with pytest.raises(gpujoin.KeyValueError, match=r"keys\[3\]: 4294967296 does not fit"):
        client.join("pd_fit", np.array([0, 1, 1, 1 << 32], np.int64), kind="left")
    with pytest.raises(gpujoin.KeyDtypeError, match=r"keys\[1\]: a null key"):
        client.lookup("pd_fit", pd.Series([1, None], dtype="Int64"))
    assert client.describe("pd_fit").mutation_sequence == 0


def test_build_index_from_a_frame(client):
    frame = pd.DataFrame({
        "id": np.array([17, 4242, 99], np.int64),
        "count": np.array([5, -2, 1 << 40], np.int64),
        "threshold": [21.5, 0.0, 7.25],
        "label": ["temp", None, "lock"],
        "active": [True, False, True],
        "blob": [b"\x00\x01", b"", None],
        "maybe": pd.Series([1, None, 3], dtype="Int64"),
    })
    info = client.build_index("pd_frame", frame, key="id", key_type="uint32", replace=True)
    assert info.key_type == "uint32" and info.rows == 3
    assert {c.name: c.type for c in info.payload} == {
        "count": "int64", "threshold": "float64", "label": "string", "active": "bool",
        "blob": "binary", "maybe": "int64"}
    events = pd.read_csv(io.StringIO(EVENTS_CSV))
    out = client.lookup_frame("pd_frame", events, on="sensor_id",
                              select=["count", "threshold", "label", "active", "blob", "maybe"])
    assert out["found"].tolist() == [True, False, True, True, True]
    assert out["count"].tolist() == [1 << 40, pd.NA, 5, -2, 5]
    assert out["threshold"].tolist()[2:] == [21.5, 0.0, 21.5] and out["threshold"][0] == 7.25
    assert out["label"].tolist() == ["lock", None, "temp", None, "temp"]
    assert out["active"].tolist() == [True, pd.NA, True, False, True]
    assert out["blob"].tolist() == [None, None, b"\x00\x01", b"", b"\x00\x01"]
    assert out["maybe"].tolist() == [3, pd.NA, 1, pd.NA, 1]
    # Without key_type, an int64 key column infers uint64 keys, as an int64 array does.
    assert client.build_index("pd_frame64", frame, key="id", replace=True).key_type == "uint64"


def test_build_index_from_read_csv_with_payload_types(client):
    sensors = pd.read_csv(io.StringIO(SENSORS_CSV))
    info = client.build_index("pd_csv", sensors, key="sensor_id", key_type="uint32",
                              payload_types={"threshold": "float32"}, replace=True)
    assert [(c.name, c.type) for c in info.payload] == [
        ("kind", "string"), ("threshold", "float32"), ("active", "bool")]
    r = client.lookup("pd_csv", [99, 17], select=["kind", "threshold", "active"])
    assert r.values.tolist() == [2, 0]
    assert r.columns["kind"].tolist() == [None, "temp"]
    assert r.columns["threshold"].tolist() == [7.25, 21.5]
    assert r.columns["active"].tolist() == [True, True]


def test_build_index_from_a_frame_with_nullable_keys_skips_null_rows(client):
    frame = pd.DataFrame({"id": pd.Series([5, None, 6], dtype="UInt32"), "v": [1.0, 2.0, 3.0]})
    info = client.build_index("pd_nullkeys", frame, key="id", replace=True)
    assert info.key_type == "uint32"
    r = client.lookup("pd_nullkeys", [5, 6, 0], select=["v"])
    assert r.values.tolist() == [0, 2, NO_MATCH]
    assert r.columns["v"].tolist()[:2] == [1.0, 3.0]


def test_build_index_from_a_frame_with_a_key_schema(client):
    frame = pd.DataFrame({"a": ["acme", "acme", "zeta"], "b": np.array([1, 2, 1], np.int64),
                          "qty": [10, 20, 30]})
    info = client.build_index("pd_schema", frame, key=["a", "b"], replace=True)
    assert info.key_type == "columns"
    assert [tuple(c) for c in info.key_columns] == [("a", "string"), ("b", "int64")]
    assert [c.name for c in info.payload] == ["qty"]
    left = pd.DataFrame({"a": ["zeta", "acme", "acme"], "b": [1, 2, 9]})
    out = client.lookup_frame("pd_schema", left, on=["a", "b"], select=["qty"])
    assert out["value"].tolist() == [2, 1, pd.NA]
    assert out["qty"].tolist() == [30, 20, pd.NA]
    # A list of one name is a key schema of one column too.
    one = client.build_index("pd_schema1", frame[["b", "qty"]], key=["b"], replace=True)
    assert one.key_type == "columns" and [tuple(c) for c in one.key_columns] == [("b", "int64")]


def test_build_index_from_a_frame_refuses_bad_input_naming_it(client):
    frame = pd.DataFrame({"id": [1, 2], "when": pd.to_datetime(["2024-01-01", "2024-01-02"])})
    with pytest.raises(gpujoin.KeyValueError,
                       match=r"key: the DataFrame has no column 'sensor_id' \(its columns: 'id', "
                             r"'when'\)$"):
        client.build_index("pd_bad", frame, key="sensor_id")
    with pytest.raises(gpujoin.KeyDtypeError,
                       match=r"payload column 'when' of the DataFrame: dtype datetime64\[ns\] has "
                             "no payload type"):
        client.build_index("pd_bad", frame, key="id")
    with pytest.raises(gpujoin.InvalidArgument, match="payload and key= exclude each other"):
        client.build_index("pd_bad", frame[["id"]], key="id", payload={"x": [1, 2]})
    with pytest.raises(gpujoin.InvalidArgument, match=r"names columns of a DataFrame .* ndarray"):
        client.build_index("pd_bad", np.array([1, 2], np.uint32), key="id")
    with pytest.raises(gpujoin.KeyValueError, match=r"keys\[1\]: -2 does not fit a uint32 index"):
        client.build_index("pd_bad", pd.DataFrame({"id": [1, -2]}), key="id", key_type="uint32")
    with pytest.raises(gpujoin.NotFound):
        client.describe("pd_bad")


def test_upsert_and_delete_take_int64_keys(client):
    client.build_index("pd_stock", np.array([1, 2, 3], np.uint32), payload={"qty": [5, 0, 7]},
                       replace=True)
    m = client.upsert("pd_stock", pd.Series([2, 4], dtype="int64"), payload={"qty": [9, 1]})
    assert (m.inserted_keys, m.updated_keys) == (1, 1)
    m = client.delete("pd_stock", np.array([1, 8], np.int64))
    assert (m.deleted_keys, m.not_found_keys) == (1, 1)
    r = client.lookup("pd_stock", np.array([1, 2, 4], np.int16), select=["qty"])
    assert r.values.tolist() == [NO_MATCH, 3, 4]
    assert r.columns["qty"].tolist()[1:] == [9, 1]
    with pytest.raises(gpujoin.KeyValueError, match=r"delete_keys\[1\]: 4294967296 does not fit"):
        client.delete("pd_stock", np.array([2, 1 << 32], np.int64))
    with pytest.raises(gpujoin.KeyValueError, match=r"upsert_keys\[0\]: -4 does not fit"):
        client.upsert("pd_stock", pd.Series([-4], dtype="Int64"), payload={"qty": [1]})
    assert client.lookup("pd_stock", [2]).values.tolist() == [3]
