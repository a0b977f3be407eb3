"""String and composite keys (indexes with a key schema) through gpujoin.Client,
against a real gpujoind; and gpujoin.keys' conversion and checks of key
columns before anything is sent.

The answers are compared with a plain Python dict model of the index: a key
is the tuple of a row's values across the key columns, a row with a None in
any of them is never inserted and never matches, the lowest row of a key
wins (lowest_row) or every row is kept in row order (keep_all).
"""
import random

import numpy as np
import pytest

import gpujoin
from gpujoin import NO_MATCH
from gpujoin import keys as K

pd = pytest.importorskip("pandas")

ORDERS = [("tenant", "string"), ("order_id", "int64")]


# ------------------------------------------------------------------ the model


class Model:
    """The index as a dict: key tuple -> its rows, in row order."""

    def __init__(self, rows):
        self.groups = {}
        for i, key in enumerate(rows):
            if None not in key:
                self.groups.setdefault(key, []).append(i)

    def lookup(self, key):
        rows = self.groups.get(key) if None not in key else None
        return (rows[0], len(rows)) if rows else (NO_MATCH, 0)

    def join(self, left, kind):
        """(left_rows, right_rows) of a join of `left` (key tuples)."""
        pairs = []
        for i, key in enumerate(left):
            rows = self.groups.get(key, []) if None not in key else []
            if kind == "inner":
                pairs += [(i, r) for r in rows]
            elif kind == "left":
                pairs += [(i, r) for r in rows] or [(i, NO_MATCH)]
            elif kind == "semi":
                pairs += [(i, rows[0])] if rows else []
            elif kind == "anti":
                pairs += [] if rows else [(i, NO_MATCH)]
        return [p[0] for p in pairs], [p[1] for p in pairs]


def rows_of(columns):
    """Key tuples of columns given as lists."""
    return list(zip(*columns))


def check_lookup(client, index, keys, tuples, model, **kwargs):
    r = client.lookup(index, keys, match_counts=True, **kwargs)
    want = [model.lookup(t) for t in tuples]
    assert r.values.tolist() == [w[0] for w in want]
    assert r.found.tolist() == [w[0] != NO_MATCH for w in want]
    assert r.match_counts.tolist() == [w[1] for w in want]
    return r


def check_joins(client, index, keys, tuples, model, **kwargs):
    for kind in ("inner", "left", "semi", "anti"):
        j = client.join(index, keys, kind=kind, **kwargs)
        left, right = model.join(tuples, kind)
        assert j.left_rows.tolist() == left, kind
        assert j.right_rows.tolist() == right, kind
        assert j.count == len(left)


# ------------------------------------------------------------------ key inputs, no server


@pytest.mark.parametrize("keys", [
    ["a", "b"], ("a", None), [None, b"x"], np.array(["a", "b"]), np.array([b"a", b"b"]),
    np.array(["a", None], dtype=object), pd.Series(["a", "b"]),
    pd.Series(["a", None], dtype="string"), pd.array(["a", pd.NA], dtype="string"),
    {"k": [1, 2]}, pd.DataFrame({"k": [1]}), [np.array([1, 2]), np.array(["a", "b"])]])
def test_string_bytes_and_composite_inputs_are_key_columns(keys):
    assert K.is_key_columns(keys)


@pytest.mark.parametrize("keys", [
    [1, 2], np.array([1, 2], np.uint32), range(3), pd.Series([1, 2]), [], np.zeros(0, np.uint64),
    (k for k in ["a"])])  # a generator is never read ahead: it goes the integer way
def test_integer_inputs_keep_the_integer_path(keys):
    assert not K.is_key_columns(keys)


def test_key_schema_forms():
    want = [K.KeyColumnSpec("tenant", "string"), K.KeyColumnSpec("order_id", "int64")]
    assert K.key_schema(ORDERS) == want
    assert K.key_schema({"tenant": str, "order_id": np.int64}) == want
    assert K.key_schema([("b", bytes), ("n", int), ("u", np.uint32)]) == [
        ("b", "binary"), ("n", "int64"), ("u", "uint32")]


@pytest.mark.parametrize("spec,error,match", [
    ([], gpujoin.KeyValueError, r"0 key columns; a key has 1 to 8"),
    ([(f"c{i}", "int32") for i in range(9)], gpujoin.KeyValueError, "9 key columns"),
    ([("a", "string"), ("a", "int64")], gpujoin.KeyValueError,
     r"key_columns\[1\]: key column 'a' is declared twice \(also key_columns\[0\]\)"),
    ([("x", "float64")], gpujoin.KeyDtypeError, r"key_columns\[0\] \('x'\): 'float64' cannot"),
    ([("x", "bool")], gpujoin.KeyDtypeError, "cannot be a key column type"),
    (["tenant"], gpujoin.KeyDtypeError, "not a \\(name, type\\) pair"),
    ([("", "string")], gpujoin.KeyValueError, "non-empty str")])
def test_key_schema_errors(spec, error, match):
    with pytest.raises(error, match=match):
        K.key_schema(spec)


def test_mismatched_key_columns_are_refused_naming_columns_and_sizes():
    schema = K.key_schema(ORDERS)
    with pytest.raises(gpujoin.KeyValueError, match=r"keys: 1 key column, but index 'o' has a "
                       r"key of 2 \(tenant string, order_id int64\)"):
        K.encode_key_columns(["a"], schema, index="o")
    with pytest.raises(gpujoin.KeyValueError, match=r"keys: 3 key columns, but"):
        K.encode_key_columns([np.array(["a"]), np.array([1]), np.array([2])], schema)
    with pytest.raises(ValueError, match=r"key column 1 \('order_id'\) has 3 rows but key column "
                       r"0 \('tenant'\) has 2"):
        K.encode_key_columns({"tenant": ["a", "b"], "order_id": [1, 2, 3]}, schema)
    with pytest.raises(gpujoin.KeyValueError, match=r"no column 'order_id'; unknown column "
                       r"'orderid': the key columns of the index are \(tenant string, order_id"):
        K.encode_key_columns({"tenant": ["a"], "orderid": [1]}, schema)
    with pytest.raises(TypeError, match=r"keys column 'tenant' \(key column 0 of index 'o', "
                       r"string\): dtype int64 cannot be sent as string"):
        K.encode_key_columns({"tenant": np.array([1]), "order_id": [1]}, schema, index="o")
    with pytest.raises(gpujoin.KeyDtypeError, match=r"keys column 'order_id' .*: dtype <U1 "
                       r"cannot be sent as int64"):
        K.encode_key_columns({"tenant": ["a"], "order_id": np.array(["1"])}, schema)
    with pytest.raises(gpujoin.KeyValueError, match=r"column 'k' .*: -1 does not fit in uint32"):
        K.encode_key_columns({"k": np.array([5, -1])}, [("k", "uint32")])
    with pytest.raises(gpujoin.InvalidArgument, match=r"keys column 'k' .*: row 1 is not valid "
                       r"UTF-8"):
        K.encode_key_columns([b"ok", b"\xc3"], [("k", "string")])


def test_inferred_schemas():
    schema, cols = K.build_key_columns(pd.DataFrame({"t": ["a", None], "n": np.array([1, 2],
                                                                                  np.uint32)}))
    assert schema == [("t", "string"), ("n", "uint32")] and len(cols) == 2
    assert K.build_key_columns([b"x"])[0] == [("key", "binary")]
    assert K.build_key_columns(pd.Series(["x"], name="sku"))[0] == [("sku", "string")]
    assert K.build_key_columns([np.array(["a"]), np.array([7])])[0] == [
        ("key0", "string"), ("key1", "int64")]
    with pytest.raises(gpujoin.KeyDtypeError, match=r"keys column 'f': float64 values cannot be "
                       "a key column"):
        K.build_key_columns({"f": [1.5]})
    with pytest.raises(gpujoin.KeyValueError, match="9 key columns"):
        K.build_key_columns({f"c{i}": [1] for i in range(9)})


def test_batches_of_key_columns_are_cut_by_bytes():
    keys = K.build_key_columns(["a" * 100, "b", "c" * 100, "d", "e"])[1]
    # Each row: its bytes and a 4-byte offset.
    assert K.batch_ranges(keys, 10, 110) == [(0, 2), (2, 4), (4, 5)]
    assert K.batch_ranges(keys, 1, 1000) == [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)]
    assert K.batch_ranges(keys[1:4], 10, 110) == [(0, 2), (2, 3)]  # a view counts from its row 0
    with pytest.raises(gpujoin.KeyValueError, match=r"keys: row 0's key takes 104 bytes on the "
                       r"wire, more than a message to the server carries \(50 bytes\)"):
        K.batch_ranges(keys, 10, 50)


# ------------------------------------------------------------------ against gpujoind


STRINGS = ["", "abc", "abd", "abc\x00", "abc\x00d", "a\x00b", "\x00", "é", "e\u0301", "日本語",
           "😀", "x" * 70000 + "a", "x" * 70000 + "b", "A", "a"]


@pytest.mark.parametrize("form", ["list", "object", "series", "string_dtype"])
def test_string_keys(client, form):
    make = {"list": list, "object": lambda v: np.array(v, dtype=object), "series": pd.Series,
            "string_dtype": lambda v: pd.Series(v, dtype="string")}[form]
    info = client.build_index("py_keys_str", make(STRINGS), replace=True,
                              payload={"pos": np.arange(len(STRINGS), dtype=np.int64),
                                       "s": STRINGS})
    assert info.key_type == "columns"
    assert info.key_columns == [("key", "string")] and info.rows == len(STRINGS)
    assert info.statistics.unique_keys == len(STRINGS)
    probe = STRINGS[::-1] + ["ab", "abc\x00\x00", "x" * 70001, "\x00\x00", "E", "日本"]
    model = Model([(s,) for s in STRINGS])
    r = check_lookup(client, "py_keys_str", make(probe), [(s,) for s in probe], model,
                     select=["pos", "s"])
    n = len(STRINGS)
    assert r.columns["pos"][:n].tolist() == list(range(n))[::-1]
    assert r.columns["s"][:n].tolist() == probe[:n]  # gathered strings come back exactly
    assert r.columns["s"][n:].tolist() == [None] * (len(probe) - n)


def test_numpy_fixed_width_string_and_bytes_arrays(client):
    # numpy 'U' and 'S' arrays (their values have no trailing NULs).
    client.build_index("py_keys_u", np.array(["b", "a", "ü"]), replace=True)
    assert client.lookup("py_keys_u", np.array(["ü", "a", "c"])).values.tolist() == [
        2, 1, NO_MATCH]
    info = client.build_index("py_keys_s", np.array([b"b", b"\xff"]), replace=True)
    assert info.key_columns == [("key", "binary")]
    assert client.lookup("py_keys_s", np.array([b"\xff", b"a"])).values.tolist() == [1, NO_MATCH]


def test_bytes_keys(client):
    keys = [b"", b"\x00", b"\x00\x00", b"\xff\xfe", b"abc", b"abd", b"\xc3",
            bytes(range(256)) * 300]
    info = client.build_index("py_keys_bin", keys, payload={"b": keys}, replace=True)
    assert info.key_columns == [("key", "binary")]
    probe = keys[::-1] + [b"ab", b"\x00\x00\x00", bytearray(b"abc")]
    r = client.lookup("py_keys_bin", probe, select=["b"])
    assert r.values.tolist() == list(range(len(keys)))[::-1] + [NO_MATCH, NO_MATCH, 4]
    assert r.columns["b"].tolist() == keys[::-1] + [None, None, b"abc"]
    # str values of a binary key column are sent as their UTF-8 bytes.
    assert client.lookup("py_keys_bin", ["abc"]).values.tolist() == [4]


def test_composite_keys_with_pairs_swapped(client):
    tenants = ["acme", "acme", "zeta", "zeta", "", "acme"]
    ids = [1, 2, 1, 2, -(1 << 63), (1 << 63) - 1]
    info = client.build_index("py_keys_orders", {"tenant": tenants, "order_id": ids},
                              key_columns=ORDERS, payload={"v": [10, 20, 30, 40, 50, 60]},
                              replace=True)
    assert info.key_columns == [("tenant", "string"), ("order_id", "int64")]
    assert info.statistics.unique_keys == 6
    # The same strings and numbers, paired differently, are other keys.
    q = {"order_id": np.array([2, 1, 1, 2, 3, -(1 << 63), (1 << 63) - 1, 1], np.int64),
         "tenant": ["zeta", "zeta", "acme", "acme", "acme", "", "acme", ""]}
    r = client.lookup("py_keys_orders", q, select=["v"])
    assert r.values.tolist() == [3, 2, 0, 1, NO_MATCH, 4, 5, NO_MATCH]
    assert np.ma.filled(r.columns["v"], -1).tolist() == [40, 30, 10, 20, -1, 50, 60, -1]
    # Positional columns and a DataFrame give the same answers.
    same = client.lookup("py_keys_orders", [pd.Series(q["tenant"]), q["order_id"]])
    assert same.values.tolist() == r.values.tolist()
    same = client.lookup("py_keys_orders", pd.DataFrame(q))
    assert same.values.tolist() == r.values.tolist()


def test_composite_key_of_integer_columns_is_checked_by_value(client):
    client.build_index("py_keys_ints", {"a": np.array([1, 2], np.uint32),
                                        "b": np.array([1 << 40, 7], np.uint64)}, replace=True)
    assert client.describe("py_keys_ints").key_columns == [("a", "uint32"), ("b", "uint64")]
    # int64 arrays into uint32/uint64 key columns are converted by value, never reinterpreted.
    r = client.lookup("py_keys_ints", {"a": np.array([2, 1], np.int64),
                                       "b": np.array([7, 1 << 40], np.int64)})
    assert r.values.tolist() == [1, 0]
    with pytest.raises(gpujoin.KeyValueError, match=r"keys column 'a' .*-1 does not fit"):
        client.lookup("py_keys_ints", {"a": np.array([-1]), "b": [7]})


def test_nulls_in_each_key_column_never_match(client):
    tenants = ["a", None, "b", "c", pd.NA]
    ids = pd.array([1, 2, None, 3, 4], dtype="Int64")
    info = client.build_index("py_keys_nulls", {"tenant": tenants, "order_id": ids},
                              key_columns=ORDERS, payload={"v": ["r0", "r1", "r2", "r3", "r4"]},
                              replace=True)
    assert info.statistics.invalid_rows == 3 and info.statistics.unique_keys == 2
    q = pd.DataFrame({"tenant": pd.array(["a", None, "b", "c", "c"], dtype="string"),
                      "order_id": pd.array([1, 2, None, None, 3], dtype="Int64")})
    r = client.lookup("py_keys_nulls", q, select=["v"], probes=True)
    assert r.values.tolist() == [0, NO_MATCH, NO_MATCH, NO_MATCH, 3]
    assert r.probes.tolist()[1:4] == [0, 0, 0]  # a null examines no slot
    assert r.columns["v"].tolist() == ["r0", None, None, None, "r3"]
    model = Model(rows_of([["a", None, "b", "c", None], [1, 2, None, 3, 4]]))
    tuples = rows_of([["a", None, "b", "c", "c"], [1, 2, None, None, 3]])
    check_joins(client, "py_keys_nulls", q, tuples, model)
    # Masked arrays are nulls too.
    m = {"tenant": ["a", "c"], "order_id": np.ma.MaskedArray([1, 3], mask=[True, False])}
    assert client.lookup("py_keys_nulls", m).values.tolist() == [NO_MATCH, 3]


@pytest.mark.parametrize("duplicates", ["lowest_row", "keep_all"])
def test_every_join_kind_gathers_payload(client, duplicates):
    tenants = ["a", "b", "a", "a", "c", "b"]
    ids = [1, 1, 1, 2, 1, 1]
    client.build_index("py_keys_join", {"tenant": tenants, "order_id": ids}, key_columns=ORDERS,
                       duplicates=duplicates, payload={"p": [f"row{i}" for i in range(6)]},
                       replace=True)
    model = Model(rows_of([tenants, ids]))
    if duplicates == "lowest_row":
        model.groups = {k: v[:1] for k, v in model.groups.items()}
    left = {"tenant": ["a", "z", "b", "a", None, "c"], "order_id": [1, 1, 1, 2, 1, 2]}
    tuples = rows_of([left["tenant"], left["order_id"]])
    check_joins(client, "py_keys_join", left, tuples, model)
    for kind in ("inner", "left", "semi", "anti"):
        j = client.join("py_keys_join", left, kind=kind, select=["p"])
        _, right = model.join(tuples, kind)
        assert j.columns["p"].tolist() == [None if r == NO_MATCH else f"row{r}" for r in right]


def test_lookup_frame_and_join_frame_on_several_columns(client):
    client.build_index("py_keys_frame", {"tenant": ["a", "b", "a"], "order_id": [1, 1, 2]},
                       key_columns=ORDERS, payload={"v": [1.5, 2.5, 3.5]},
                       duplicates="keep_all", replace=True)
    left = pd.DataFrame({"t": ["b", "a", "q", None], "id": [1, 2, 1, 1], "x": [7, 8, 9, 10]},
                        index=[10, 11, 12, 13])
    f = client.lookup_frame("py_keys_frame", left, on=["t", "id"], select=["v"])
    assert list(f.index) == [10, 11, 12, 13] and list(f.x) == [7, 8, 9, 10]
    assert f.found.tolist() == [True, True, False, False]
    assert f.v.tolist()[:2] == [2.5, 3.5] and f.v.isna().tolist() == [False, False, True, True]
    j = client.join_frame("py_keys_frame", left, on=["t", "id"], kind="left", select=["v"])
    assert j.x.tolist() == [7, 8, 9, 10] and j.right_row.isna().tolist() == [False, False, True,
                                                                            True]
    # Without on: the key columns appear by name; one string column as `key`.
    f = client.lookup_frame("py_keys_frame", {"tenant": ["a"], "order_id": [2]})
    assert f.columns.tolist()[:3] == ["tenant", "order_id", "value"] and f.value[0] == 2
    client.build_index("py_keys_frame1", ["x", "y"], replace=True)
    f = client.lookup_frame("py_keys_frame1", ["y", "z"])
    assert f.key.tolist() == ["y", "z"] and f.found.tolist() == [True, False]
    s = pd.DataFrame({"sku": pd.array(["y", None, "x"], dtype="string")})
    assert client.join_frame("py_keys_frame1", s, on="sku").sku.tolist() == ["y", "x"]
    assert client.join_frame("py_keys_frame1", s, on=["sku"], kind="anti").sku.isna().all()
    with pytest.raises(gpujoin.KeyValueError, match=r"on: the DataFrame has no column 'tid'"):
        client.lookup_frame("py_keys_frame", left, on=["tid", "id"])


def test_streams_of_string_keys(client):
    client.build_index("py_keys_stream", ["a", "b", "c", "a"], duplicates="keep_all", replace=True)
    out = list(client.lookup_stream("py_keys_stream", [["a", "x"], np.array(["c"]), []]))
    assert [o.values.tolist() for o in out] == [[0, NO_MATCH], [2], []]
    out = list(client.join_stream("py_keys_stream", [["a", "x"], ["b", "a"]], kind="left"))
    assert [(o.left_rows.tolist(), o.right_rows.tolist()) for o in out] == [
        ([0, 0, 1], [0, 3, NO_MATCH]), ([2, 3, 3], [1, 0, 3])]


def test_batch_mode_values_and_count_only(client):
    info = client.build_index("py_keys_bm", ["a", "b", "c"], valid=[True, False, True],
                              first_value=100, replace=True)
    assert info.batch_mode and info.statistics.invalid_rows == 1
    assert client.lookup("py_keys_bm", ["a", "b", "c"]).values.tolist() == [100, NO_MATCH, 102]
    client.build_index("py_keys_vals", ["a", None, "c"], values=[7, 8, 9], replace=True)
    assert client.lookup("py_keys_vals", ["c", "a"]).values.tolist() == [9, 7]
    j = client.join("py_keys_vals", ["a", "a", "q"], count_only=True, found=True)
    assert j.count == 2 and len(j) == 0 and j.found.tolist() == [True, True, False]


def test_large_keys_are_batched_within_the_message_limit(small_message_server):
    # 1 MiB messages: ~3 MiB of keys are cut into several chunks and batches,
    # and a 700 KB key travels alone.
    rng = random.Random(5)
    keys = ["".join(rng.choice("ab") for _ in range(1000)) + str(i) for i in range(3000)]
    keys.append("z" * 700_000)
    with gpujoin.Client(small_message_server.address) as c:
        info = c.build_index("py_keys_big", keys, payload={"i": np.arange(len(keys))},
                             replace=True)
        assert info.rows == len(keys)
        probe = keys[::-1] + ["nope"]
        r = c.lookup("py_keys_big", probe, select=["i"])
        assert r.values.tolist() == list(range(len(keys)))[::-1] + [NO_MATCH]
        j = c.join("py_keys_big", probe, kind="left")
        assert j.right_rows.tolist() == r.values.tolist()
        with pytest.raises(gpujoin.KeyValueError, match=r"keys: row 1's key takes 2000004 bytes "
                           "on the wire, more than a message to the server carries"):
            c.lookup("py_keys_big", ["a", "y" * 2_000_000])


def test_errors(client):
    client.build_index("py_keys_err", {"tenant": ["a"], "order_id": [1]}, key_columns=ORDERS,
                       replace=True)
    client.build_index("py_keys_int", np.array([1, 2], np.uint32), replace=True)
    with pytest.raises(gpujoin.KeyValueError, match=r"keys: 1 key column, but index "
                       r"'py_keys_err' has a key of 2 \(tenant string, order_id int64\)"):
        client.lookup("py_keys_err", ["a"])
    with pytest.raises(gpujoin.KeyValueError, match=r"key column 1 \('order_id'\) has 1 rows but "
                       r"key column 0 \('tenant'\) has 2"):
        client.join("py_keys_err", {"tenant": ["a", "b"], "order_id": [1]})
    with pytest.raises(gpujoin.KeyDtypeError, match=r"keys column 'tenant' \(key column 0 of "
                       r"index 'py_keys_err', string\): dtype int64 cannot be sent as string"):
        client.lookup("py_keys_err", [np.array([1]), np.array([1])])
    with pytest.raises(gpujoin.KeyDtypeError, match=r"batches\[1\]: index 'py_keys_int' has "
                       "uint32 keys; string, bytes and composite keys need an index with key "
                       "columns"):
        list(client.lookup_stream("py_keys_int", [[1], ["a"]]))
    with pytest.raises(gpujoin.KeyDtypeError, match="uint32 keys; string"):
        client.join("py_keys_int", {"k": [1]})
    with pytest.raises(gpujoin.InvalidArgument, match="key_type 'uint32' and key_columns exclude"):
        client.build_index("py_keys_x", ["a"], key_type="uint32", key_columns=[("k", "string")])
    with pytest.raises(gpujoin.KeyDtypeError, match=r"keys column 'order_id' \(key column 1 of "
                       r"the index, int64\): float values cannot be sent as int64"):
        client.build_index("py_keys_x", {"tenant": ["a"], "order_id": [1.5]}, key_columns=ORDERS)
    with pytest.raises(gpujoin.InvalidArgument, match="values: 1 rows, but keys "
                       "has 2"):
        client.build_index("py_keys_x", ["a", "b"], values=[1])
    # The server's own checks surface as today (here: a name it refuses).
    with pytest.raises(gpujoin.InvalidArgument, match=r"key_columns\[0\]"):
        client.build_index("py_keys_x", ["a"], key_columns=[("bad name", "string")])
    with pytest.raises(gpujoin.NotFound):
        client.describe("py_keys_x")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("seed", range(8))
def test_random_keys_against_a_dict_model(client, seed):
    """Random string / composite keys with duplicates and nulls; lookups and
    every join kind compared with the dict model, over several batches."""
    rng = random.Random(seed)
    composite = seed % 2 == 1
    duplicates = "keep_all" if seed % 3 == 0 else "lowest_row"
    alphabet = ["", "a", "b", "ab", "ba", "a\x00", "é", "\x00", "aa", "日"]

    def string():
        if rng.random() < 0.1:
            return None
        return "".join(rng.choice(alphabet) for _ in range(rng.randrange(3)))

    def number():
        return None if rng.random() < 0.1 else rng.choice([0, 1, -1, 2, 1 << 40, -(1 << 62)])

    def columns(n):
        if composite:
            return {"s": [string() for _ in range(n)], "n": [number() for _ in range(n)]}
        return {"s": [string() for _ in range(n)]}

    build = columns(rng.randrange(1, 400))
    spec = [("s", "string"), ("n", "int64")] if composite else [("s", "string")]
    names = [s for s, _ in spec]
    build_rows = rows_of([build[c] for c in names])
    info = client.build_index("py_keys_rand", build, key_columns=spec, duplicates=duplicates,
                              payload={"row": np.arange(len(build_rows), dtype=np.int64)},
                              replace=True)
    model = Model(build_rows)
    if duplicates == "lowest_row":
        model.groups = {k: v[:1] for k, v in model.groups.items()}
    assert info.statistics.invalid_rows == sum(None in k for k in build_rows)
    assert info.statistics.unique_keys == len(model.groups)
    left = columns(rng.randrange(0, 500))
    tuples = rows_of([left[c] for c in names])
    batch_rows = rng.choice([None, 7, 64])
    keys = left if composite else left["s"]
    r = check_lookup(client, "py_keys_rand", keys, tuples, model, select=["row"],
                     batch_rows=batch_rows)
    assert np.ma.filled(r.columns["row"], -1).tolist() == [
        -1 if v == NO_MATCH else v for v in r.values.tolist()]
    check_joins(client, "py_keys_rand", keys, tuples, model, batch_rows=batch_rows)
