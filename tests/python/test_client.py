"""gpujoin.Client against a real gpujoind (CPU backend): every call, compared
with numpy models of the answers.

Each test uses index names of its own, so the tests share one server.
"""
import grpc
import numpy as np
import pytest

import gpujoin
from gpujoin import NO_MATCH
from gpujoin._proto import pb, pb_grpc
from conftest import suite_backend


def distinct_keys(rng, n, high=0xFFFFFFFF, dtype=np.uint32):
    """n distinct keys below `high` (the reserved all-ones key excluded), in random order."""
    keys = np.unique(rng.integers(0, high, size=n + n // 4 + 16, dtype=dtype))[:n]
    rng.shuffle(keys)
    assert len(keys) == n
    return keys


def lookup_model(build, queries):
    """(values, found) of a lowest_row index whose values are the build rows."""
    first = {}
    for row, k in enumerate(build.tolist()):
        first.setdefault(k, row)
    values = np.array([first.get(k, NO_MATCH) for k in queries.tolist()], np.uint32)
    return values, values != NO_MATCH


# ---------------------------------------------------------------- control calls

def test_server_info_and_message_limits(client):
    info = client.server_info()
    assert info.backend == suite_backend() and info.serving
    assert info.max_message_bytes > 4 << 20  # gRPC's default receive limit, which the client lifts
    assert info.max_inflight_batches_per_stream >= 1 and info.max_result_bytes > 0
    assert info.max_pending_response_bytes > 0 and info.pending_response_bytes == 0


def test_health(client):
    assert client.health() == "SERVING"
    assert client.health("") == "SERVING"
    with pytest.raises(gpujoin.NotFound):  # grpc's health service: an unknown name is NOT_FOUND
        client.health("no.such.Service")


def test_build_describe_list_drop(client):
    keys = np.array([17, 4242, 99, 17], np.uint32)
    info = client.build_index("t_ctl", keys, capacity=1024)
    assert (info.name, info.version, info.capacity, info.rows) == ("t_ctl", 1, 1024, 4)
    assert info.key_type == "uint32" and info.duplicates == "lowest_row"
    assert info.statistics.unique_keys == 3 and info.statistics.duplicate_rows == 1
    assert client.describe("t_ctl") == info
    assert client.info("t_ctl").version == 1
    assert "t_ctl" in [i.name for i in client.list()]
    with pytest.raises(gpujoin.AlreadyExists) as e:
        client.build_index("t_ctl", keys)
    assert e.value.code == grpc.StatusCode.ALREADY_EXISTS and "t_ctl" in e.value.message
    again = client.build_index("t_ctl", keys[:2], replace=True, load_factor=0.25)
    assert again.version == 2 and again.rows == 2 and again.capacity >= 8
    dropped = client.drop("t_ctl")
    assert dropped.dropped_version == 2 and dropped.freed_bytes > 0
    with pytest.raises(gpujoin.NotFound, match="t_ctl"):
        client.describe("t_ctl")
    with pytest.raises(gpujoin.NotFound):
        client.drop("t_ctl")


def test_server_errors_carry_code_and_message(client):
    with pytest.raises(gpujoin.InvalidArgument) as e:
        client.build_index("bad name!", [1])
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert e.value.message.startswith("spec.name:") and "position 3" in e.value.message
    assert str(e.value).startswith("INVALID_ARGUMENT: spec.name")
    with pytest.raises(gpujoin.InvalidArgument, match="power of two"):
        client.build_index("t_err", [1], capacity=1000)
    with pytest.raises(gpujoin.NotFound):
        client.lookup("t_no_such_index", [1])


# ---------------------------------------------------------------- lookup

def test_lookup_against_a_model_over_many_batches(client):
    rng = np.random.default_rng(1)
    build = rng.integers(0, 5000, size=3000, dtype=np.uint32)  # duplicates: the lowest row wins
    client.build_index("t_lookup", build, replace=True)
    queries = rng.integers(0, 6000, size=10_001, dtype=np.uint32)
    r = client.lookup("t_lookup", queries, probes=True, match_counts=True, batch_rows=977)
    values, found = lookup_model(build, queries)
    assert r.values.dtype == np.uint32 and r.found.dtype == bool
    np.testing.assert_array_equal(r.values, values)
    np.testing.assert_array_equal(r.found, found)
    np.testing.assert_array_equal(r.match_counts, found.astype(np.uint32))
    assert (r.probes[found] >= 1).all()
    assert r.statistics.found == found.sum() and r.statistics.missing == (~found).sum()
    assert r.statistics.total_probes == r.probes.sum()
    assert r.index_version == client.describe("t_lookup").version
    # Plain sequences, one batch, and no keys at all.
    assert client.lookup("t_lookup", queries[:5].tolist()).values.tolist() == values[:5].tolist()
    empty = client.lookup("t_lookup", [])
    assert len(empty) == 0 and empty.values.dtype == np.uint32


def test_lookup_refuses_keys_of_the_wrong_dtype(client):
    client.build_index("t_dtype32", np.array([1, 2, 3], np.uint32), replace=True)
    client.build_index("t_dtype64", np.array([1, 2, 1 << 40], np.uint64), replace=True)
    # An int64 array sent as packed uint32 keys gave wrong answers silently: it is
    # checked by value, sent when every key fits and refused naming the first that does not.
    assert client.lookup("t_dtype32", np.array([1, 3], np.int64)).values.tolist() == [0, 2]
    assert client.lookup("t_dtype32", np.array([2], np.uint64)).values.tolist() == [1]
    with pytest.raises(gpujoin.KeyValueError, match=r"keys\[1\]: 4294967297 does not fit a uint32"):
        client.lookup("t_dtype32", np.array([1, (1 << 32) + 1], np.int64))
    with pytest.raises(gpujoin.KeyValueError, match=r"keys\[0\]: 18446744073709551615 does not fit"):
        client.lookup("t_dtype32", np.array([(1 << 64) - 1], np.uint64))
    with pytest.raises(gpujoin.KeyValueError, match="negative"):
        client.lookup("t_dtype32", np.array([1, -2], np.int32))
    with pytest.raises(gpujoin.KeyValueError, match="negative"):
        client.join("t_dtype64", np.array([-1], np.int64))
    with pytest.raises(TypeError):
        client.lookup("t_dtype32", np.array([1.0]))
    with pytest.raises(gpujoin.KeyValueError, match="does not fit"):
        client.lookup("t_dtype32", [1 << 32])
    # Narrower arrays are widened to the index's keys.
    assert client.lookup("t_dtype64", np.array([1, 2], np.uint32)).found.all()
    assert client.lookup("t_dtype32", np.array([3], np.uint8)).values.tolist() == [2]


def test_byte_order_is_converted(client):
    build = np.array([0x01020304, 0x04030201, 7], np.uint32)
    client.build_index("t_endian", build.astype(">u4"), replace=True)
    little = client.lookup("t_endian", np.array([0x01020304, 0x04030201, 7, 8], np.uint32))
    big = client.lookup("t_endian", np.array([0x01020304, 0x04030201, 7, 8], ">u4"))
    assert little.values.tolist() == [0, 1, 2, NO_MATCH]
    np.testing.assert_array_equal(big.values, little.values)
    wide = client.build_index("t_endian64", np.array([1 << 33, 5], ">u8"), replace=True)
    assert wide.key_type == "uint64"
    assert client.lookup("t_endian64", np.array([5, 1 << 33], ">i8")).values.tolist() == [1, 0]


def test_uint64_keys_differing_above_bit_31(client):
    low = np.arange(1000, dtype=np.uint64)
    build = np.concatenate([low, low | (np.uint64(1) << np.uint64(40))])
    info = client.build_index("t_u64", build, replace=True)
    assert info.key_type == "uint64" and info.statistics.unique_keys == 2000
    r = client.lookup("t_u64", build[::-1])
    np.testing.assert_array_equal(r.values, np.arange(2000)[::-1].astype(np.uint32))
    # int64 keys as bit patterns: an explicit view.
    signed = np.array([-5, 7, -1 << 40], np.int64)
    client.build_index("t_i64", signed.view(np.uint64), replace=True)
    assert client.lookup("t_i64", signed[::-1].view(np.uint64)).values.tolist() == [2, 1, 0]


def test_million_row_lookup_in_one_batch(client):
    """A 1M-row lookup failed on gRPC's default 4 MiB receive limit.
    One batch of 2^20 keys answers 5 MiB; the client takes the server's limit."""
    n = 1 << 20
    keys = np.arange(n, dtype=np.uint32) * 3
    client.build_index("t_million", keys, replace=True)
    r = client.lookup("t_million", keys[::-1].copy(), batch_rows=n)
    np.testing.assert_array_equal(r.values, np.arange(n, dtype=np.uint32)[::-1])
    assert r.found.all()
    # A plain channel with gRPC's defaults fails on the same answer.
    with grpc.insecure_channel(client.target) as ch:
        stub = pb_grpc.GpuJoinStub(ch)
        req = pb.LookupRequest(index="t_million", keys=pb.U32Column(packed=keys.tobytes()))
        with pytest.raises(grpc.RpcError) as e:
            list(stub.Lookup(iter([req])))
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    # The default batches split the same lookup, with the same answer.
    np.testing.assert_array_equal(client.lookup("t_million", keys[::-1].copy()).values, r.values)
    client.drop("t_million")


# ---------------------------------------------------------------- build options

def test_build_values_validity_and_masked_keys(client):
    keys = np.array([10, 11, 12, 13], np.uint32)
    client.build_index("t_vals", keys, values=np.array([7, 8, 9, 0xFFFFFFFF], np.uint32),
                       replace=True)
    r = client.lookup("t_vals", keys)
    assert r.values.tolist() == [7, 8, 9, 0xFFFFFFFF] and r.found.all()
    info = client.build_index("t_valid", keys, valid=[True, False, True, True], first_value=100,
                              replace=True, chunk_rows=3)
    assert info.batch_mode and info.statistics.invalid_rows == 1
    assert client.lookup("t_valid", keys).values.tolist() == [100, NO_MATCH, 102, 103]
    masked = np.ma.MaskedArray(keys, mask=[0, 0, 1, 0])
    client.build_index("t_valid", masked, replace=True)
    assert client.lookup("t_valid", keys).found.tolist() == [True, True, False, True]
    with pytest.raises(gpujoin.InvalidArgument, match="exclude"):
        client.build_index("t_valid", masked, values=[1, 2, 3, 4], replace=True)
    with pytest.raises(gpujoin.InvalidArgument, match="rows, but keys has 4"):
        client.build_index("t_valid", keys, values=[1, 2], replace=True)


def test_build_in_many_chunks_with_payload(client):
    rng = np.random.default_rng(2)
    n = 5000
    keys = distinct_keys(rng, n)
    price = np.ma.MaskedArray(rng.random(n), mask=rng.random(n) < 0.2)
    labels = [None if i % 7 == 0 else f"item-{i}-é" for i in range(n)]
    flags = [None if i % 5 == 0 else bool(i % 2) for i in range(n)]
    counts = rng.integers(-1 << 40, 1 << 40, size=n)
    info = client.build_index("t_payload", keys, payload={
        "price": price, "label": labels, "flag": flags, "count": counts,
        "small": rng.integers(0, 100, size=n).astype(np.uint16)},
        payload_types={"price": "float32"}, chunk_rows=333, replace=True)
    assert [(p.name, p.type) for p in info.payload] == [
        ("price", "float32"), ("label", "string"), ("flag", "bool"), ("count", "int64"),
        ("small", "uint32")]
    assert info.payload[0].null_count == price.mask.sum()
    assert info.payload[1].null_count == sum(v is None for v in labels)
    order = rng.permutation(n)
    queries = np.concatenate([keys[order], np.array([0xFFFFFFFE], np.uint32)])
    present = (keys != 0xFFFFFFFE).all()
    r = client.lookup("t_payload", queries, select=["label", "price", "flag", "count"],
                      batch_rows=700)
    assert list(r.columns) == ["label", "price", "flag", "count"]
    label = r.columns["label"]
    assert label.dtype == object and label[:n].tolist() == [labels[i] for i in order]
    assert label[n] is None or not present
    p = r.columns["price"]
    assert isinstance(p, np.ma.MaskedArray) and p.dtype == np.float32
    np.testing.assert_array_equal(p.mask[:n], price.mask[order])
    np.testing.assert_allclose(p[:n].compressed(), price[order].compressed().astype(np.float32))
    f = r.columns["flag"]
    assert [None if m else bool(v) for v, m in zip(f.data[:n], f.mask[:n])] == [flags[i] for i in order]
    c = r.columns["count"]
    assert c.dtype == np.int64 and c[:n].tolist() == counts[order].tolist()
    assert c.mask[n] if isinstance(c, np.ma.MaskedArray) else not present
    with pytest.raises(gpujoin.InvalidArgument, match="no payload column 'zz'"):
        client.lookup("t_payload", queries, select=["zz"])
    empty = client.lookup("t_payload", [], select=["label", "price"])
    assert empty.columns["price"].dtype == np.float32 and len(empty.columns["label"]) == 0


# ---------------------------------------------------------------- join

def join_model(build, groups, left, kind):
    """Pairs of a join of `left` keys with an index whose key k has rows groups[k] (source order)."""
    lrows, rrows = [], []
    for i, k in enumerate(left.tolist()):
        rows = groups.get(k, [])
        if kind == "inner":
            pairs = rows
        elif kind == "left":
            pairs = rows or [NO_MATCH]
        elif kind == "semi":
            pairs = rows[:1]
        else:
            pairs = [] if rows else [NO_MATCH]
        lrows += [i] * len(pairs)
        rrows += pairs
    return np.array(lrows, np.uint32), np.array(rrows, np.uint32)


@pytest.mark.parametrize("kind", ["inner", "left", "semi", "anti"])
def test_join_kinds_on_a_keep_all_index(client, kind):
    rng = np.random.default_rng(3)
    build = rng.integers(0, 400, size=1200, dtype=np.uint32)  # groups of about 3 rows
    tag = [f"r{i}" for i in range(len(build))]
    name = "t_keepall"
    info = client.build_index(name, build, duplicates="keep_all", payload={"tag": tag},
                              replace=True, chunk_rows=250)
    assert info.duplicates == "keep_all" and info.statistics.max_group_rows > 1
    groups = {}
    for row, k in enumerate(build.tolist()):
        groups.setdefault(k, []).append(row)
    left = rng.integers(0, 500, size=3001, dtype=np.uint32)
    j = client.join(name, left, kind=kind, select=["tag"], batch_rows=256, found=True)
    want_l, want_r = join_model(build, groups, left, kind)
    np.testing.assert_array_equal(j.left_rows, want_l)
    np.testing.assert_array_equal(j.right_rows, want_r)
    assert j.count == len(want_l) and not j.overflow
    want_tags = [None if r == NO_MATCH else tag[r] for r in want_r.tolist()]
    assert j.columns["tag"].tolist() == want_tags
    np.testing.assert_array_equal(j.found, np.array([k in groups for k in left.tolist()]))
    counted = client.join(name, left, kind=kind, count_only=True, batch_rows=256)
    assert counted.count == len(want_l) and len(counted) == 0
    # A lookup on the same index: the first match and the group sizes.
    r = client.lookup(name, left, match_counts=True, select=["tag"])
    sizes = np.array([len(groups.get(k, [])) for k in left.tolist()], np.uint32)
    np.testing.assert_array_equal(r.match_counts, sizes)
    np.testing.assert_array_equal(r.values[sizes > 0],
                                  [groups[k][0] for k in left[sizes > 0].tolist()])


def test_join_on_a_lowest_row_index_with_explicit_left_rows_and_capacity(client):
    client.build_index("t_join1", np.array([99, 1, 17, 5], np.uint32), replace=True)
    j = client.join("t_join1", [99, 4, 17], left_rows=[100, 101, 102], probes=True)
    assert j.left_rows.tolist() == [100, 102] and j.right_rows.tolist() == [0, 2]
    assert len(j.probes) == 3
    cut = client.join("t_join1", [17, 17, 17, 99], capacity=1, batch_rows=2)
    assert cut.left_rows.tolist() == [0, 2] and cut.count == 4 and cut.overflow
    with pytest.raises(gpujoin.InvalidArgument, match="kind"):
        client.join("t_join1", [1], kind="full")
    assert len(client.join("t_join1", np.zeros(0, np.uint32))) == 0


def count_messages(client, monkeypatch):
    """Records every Join response message the client reads."""
    seen = []
    stream = client._stream

    def recording(name, requests, finishes=lambda r: True, timeout=None):
        for r in stream(name, requests, finishes, timeout):
            if name == "Join":
                seen.append(r.more)
            yield r

    monkeypatch.setattr(client, "_stream", recording)
    return seen


def test_join_answer_continued_over_messages(small_message_server, monkeypatch):
    """A batch of 200000 pairs (1.6 MB of pairs, plus a string column) does not
    fit the server's 1 MiB messages: the answer comes in parts (`more`), which
    the client reassembles into the single-message result."""
    n = 200_000
    with gpujoin.Client(small_message_server.address) as c:
        keys = np.arange(n, dtype=np.uint32)
        names = [f"k{i}" if i % 3 else None for i in range(n)]
        c.build_index("t_cont", keys, payload={"name": names}, replace=True)
        seen = count_messages(c, monkeypatch)
        left = keys[::-1].copy()
        j = c.join("t_cont", left, select=["name"], batch_rows=n, kind="left")
        assert len(seen) > 2 and all(seen[:-1]) and not seen[-1]
        np.testing.assert_array_equal(j.left_rows, np.arange(n, dtype=np.uint32))
        np.testing.assert_array_equal(j.right_rows, left)
        assert j.columns["name"].tolist() == [names[k] for k in left.tolist()]
        assert j.count == n and not j.overflow


def test_keep_all_join_cut_by_the_result_limit_is_resent_in_halves(small_message_server,
                                                                   monkeypatch):
    """--max-result-bytes=8M holds about a million pairs: a batch of 4096 left
    rows matching 400 rows each (1.4M pairs) is cut by the server and re-sent
    as halves; the pairs are complete and in order."""
    with gpujoin.Client(small_message_server.address) as c:
        build = np.repeat(np.arange(10, dtype=np.uint32), 400)
        c.build_index("t_cut", build, duplicates="keep_all", replace=True)
        streams = []
        stream = c._stream
        monkeypatch.setattr(c, "_stream", lambda name, *a, **k: streams.append(name) or
                            stream(name, *a, **k))
        left = np.tile(np.arange(12, dtype=np.uint32), 342)[:4096]
        j = c.join("t_cut", left, batch_rows=4096)
        groups = {k: list(range(k * 400, k * 400 + 400)) for k in range(10)}
        want_l, want_r = join_model(build, groups, left, "inner")
        assert j.count == len(want_l) > (8 << 20) // 8
        assert streams == ["Join", "Join"]  # the whole batch, then its two halves
        np.testing.assert_array_equal(j.left_rows, want_l)
        np.testing.assert_array_equal(j.right_rows, want_r)


# ---------------------------------------------------------------- aggregate and hash

@pytest.mark.parametrize("op", ["count", "sum", "min", "max", "mean"])
def test_aggregate_against_numpy(client, op):
    rng = np.random.default_rng(4)
    n, groups = 20_000, 37
    keys = rng.integers(0, groups + 3, size=n, dtype=np.uint32)  # some keys >= groups: ignored
    values = rng.random(n).astype(np.float32)
    mask = rng.random(n) < 0.8
    r = client.aggregate(op, keys, None if op == "count" else values, groups=groups, mask=mask,
                         contributing_rows=True, batch_rows=3001)
    assert r.rows == n
    sel = mask & (keys < groups)
    want_rows = np.bincount(keys[sel], minlength=groups)[:groups]
    np.testing.assert_array_equal(r.contributing_rows, want_rows)
    if op == "count":
        np.testing.assert_array_equal(r.counts, want_rows)
        return
    fn = {"sum": np.sum, "min": np.min, "max": np.max, "mean": np.mean}[op]
    want = np.array([fn(values[sel & (keys == g)].astype(np.float64)) if want_rows[g] else np.nan
                     for g in range(groups)])
    np.testing.assert_allclose(r.values, want, rtol=1e-4, equal_nan=True)


def test_aggregate_errors_are_typed(client):
    with pytest.raises(gpujoin.InvalidArgument) as e:
        client.aggregate("sum", [0, 1], [1.0, 2.0], groups=0)
    assert e.value.batch == 0 and e.value.message == "groups: must be at least 1"
    with pytest.raises(gpujoin.ResourceExhausted, match="--max-aggregate-groups"):
        client.aggregate("count", [0], groups=1 << 30)
    with pytest.raises(gpujoin.InvalidArgument, match="required"):
        client.aggregate("sum", [0], groups=1)
    masked = client.aggregate("sum", [0, 0, 1], np.ma.MaskedArray([1.0, 2.0, 4.0], mask=[0, 1, 0]),
                              groups=2)
    assert masked.values.tolist() == [1.0, 4.0]


def test_hash_batches_nulls_and_widths(client):
    rng = np.random.default_rng(5)
    n = 1000
    ints = rng.integers(0, 1 << 60, size=n, dtype=np.uint64)
    text = [None if i % 10 == 0 else f"s{i}" for i in range(n)]
    whole = client.hash(ints, text)
    split = client.hash(ints, text, batch_rows=77)
    assert isinstance(whole, np.ma.MaskedArray) and whole.dtype == np.uint64
    np.testing.assert_array_equal(whole.mask, [v is None for v in text])
    np.testing.assert_array_equal(whole.filled(0), split.filled(0))
    assert (whole.data[whole.mask] == 0).all()
    # The same column sent by hand through the generated stub.
    with grpc.insecure_channel(client.target) as ch:
        (h,) = pb_grpc.GpuJoinStub(ch).Hash(iter([pb.HashRequest(bits=64, columns=[
            pb.HashColumn(type=pb.COLUMN_TYPE_UINT64, data=ints.astype("<u8").tobytes(),
                          length=n)])]))
    np.testing.assert_array_equal(client.hash(ints), np.frombuffer(h.hashes, "<u8"))
    h32 = client.hash(np.arange(5, dtype=np.int32), bits=32)
    assert h32.dtype == np.uint32 and len(set(h32.tolist())) == 5
    with pytest.raises(TypeError):
        client.hash(np.array([1 + 2j]))


# ---------------------------------------------------------------- pandas

def test_pandas_frames(client):
    pd = pytest.importorskip("pandas")
    client.build_index("t_pd", np.array([7, 8, 9], np.uint32), payload={
        "price": np.ma.MaskedArray([2.5, 0.0, 4.0], mask=[0, 1, 0]), "label": ["tea", "", "jam"]},
        replace=True)
    f = client.lookup_frame("t_pd", np.array([9, 5, 8], np.uint32), select=["label", "price"])
    assert list(f.columns) == ["key", "value", "found", "label", "price"]
    assert f["value"].tolist()[0] == 2 and pd.isna(f["value"][1])
    assert f["label"].tolist() == ["jam", None, ""]
    assert f["price"].isna().tolist() == [False, True, True]
    left = pd.DataFrame({"id": np.array([8, 1, 7], np.uint32), "qty": [1, 2, 3]})
    joined = client.join_frame("t_pd", left, on="id", kind="left", select=["label"])
    assert joined["id"].tolist() == [8, 1, 7] and joined["qty"].tolist() == [1, 2, 3]
    assert joined["label"].tolist() == ["", None, "tea"]
    assert pd.isna(joined["right_row"][1]) and joined["right_row"][2] == 0
    on = client.lookup_frame("t_pd", left, on="id")
    assert on["found"].tolist() == [True, False, True] and on["qty"].tolist() == [1, 2, 3]
    # keep_index: each pair keeps its left row's label (repeated labels included;
    # the columns are set by position, not aligned on the index).
    client.build_index("t_pd_all", np.array([8, 7, 8], np.uint32), payload={"n": [10, 20, 30]},
                       duplicates="keep_all", replace=True)
    labelled = pd.DataFrame({"id": [8, 1, 7, 8]}, index=["a", "b", "b", "c"])
    kept = client.join_frame("t_pd_all", labelled, on="id", select=["n"], keep_index=True)
    assert kept.index.tolist() == ["a", "a", "b", "c", "c"]
    assert kept["n"].tolist() == [10, 30, 20, 10, 30]
    assert kept["right_row"].tolist() == [0, 2, 1, 0, 2]
    assert client.join_frame("t_pd_all", labelled, on="id").index.tolist() == [0, 1, 2, 3, 4]
    agg = client.aggregate("sum", np.array([0, 1, 1], np.uint32), [1.0, 2.0, 3.0],
                           groups=2).to_pandas()
    assert agg["sum"].tolist() == [1.0, 5.0]


# ---------------------------------------------------------------- TLS and token

def test_tls_and_token(secure_server):
    root = secure_server.root
    with gpujoin.Client(secure_server.address, root_certificates=root, server_name="localhost",
                        token=secure_server.token) as c:
        c.build_index("t_tls", [1, 2, 3], replace=True)
        assert c.lookup("t_tls", [3]).values.tolist() == [2]
    with gpujoin.Client(secure_server.address, root_certificates=open(root, "rb").read()) as c:
        assert c.health() == "SERVING"  # open for probes, without the token
        with pytest.raises(gpujoin.Unauthenticated) as e:
            c.list()
        assert e.value.code == grpc.StatusCode.UNAUTHENTICATED
    with gpujoin.Client(secure_server.address, root_certificates=root, token="wrong") as c:
        with pytest.raises(gpujoin.Unauthenticated):
            c.lookup("t_tls", [1])
    with gpujoin.Client(secure_server.address, token=secure_server.token, timeout=5) as c:
        with pytest.raises(gpujoin.Unavailable):  # plaintext to a TLS port: no connection
            c.server_info()


def test_join_across_a_rebuild_is_aborted(server, monkeypatch):
    """A join whose batches ran on two versions of the index (rebuilt between
    them) raises Aborted rather than mixing their pairs. With one batch in
    flight, the third batch is sent only after the second answer is read,
    which is after the rebuild: it runs on version 2, the first on version 1."""
    with gpujoin.Client(server.address, max_inflight=1) as c:
        c.build_index("t_rebuild", np.arange(100, dtype=np.uint32), replace=True)
        stream = c._stream

        def rebuild_after_first(name, requests, finishes=lambda r: True, timeout=None):
            for i, r in enumerate(stream(name, requests, finishes, timeout)):
                yield r
                if i == 0:
                    c.build_index("t_rebuild", np.arange(100, dtype=np.uint32)[::-1].copy(),
                                  replace=True)

        monkeypatch.setattr(c, "_stream", rebuild_after_first)
        with pytest.raises(gpujoin.Aborted, match=r"versions \[1, 2\]"):
            c.join("t_rebuild", np.arange(100, dtype=np.uint32), batch_rows=10)


def test_mutual_tls(mtls_server):
    d = mtls_server.certs
    with gpujoin.Client(mtls_server.address, root_certificates=d / "ca.pem",
                        private_key=d / "client.key", certificate_chain=d / "client.pem") as c:
        c.build_index("t_mtls", [4, 5], replace=True)
        assert c.lookup("t_mtls", [5]).values.tolist() == [1]
    for key, chain in [(None, None), (d / "rogue.key", d / "rogue.pem")]:
        # The handshake refuses a client without a certificate of the CA.
        with gpujoin.Client(mtls_server.address, root_certificates=d / "ca.pem", private_key=key,
                            certificate_chain=chain, timeout=5) as c:
            with pytest.raises(gpujoin.Unavailable):
                c.server_info()
    with pytest.raises(gpujoin.InvalidArgument, match="go together"):
        gpujoin.Client(mtls_server.address, private_key=d / "client.key")


def test_lookup_stream_is_lazy_and_in_order(client):
    rng = np.random.default_rng(6)
    build = distinct_keys(rng, 2000)
    client.build_index("t_lstream", build, payload={"v": np.arange(2000, dtype=np.int64)},
                       replace=True)
    sizes = [5, 0, 300, 1, 1000] * 8
    batches = [rng.choice(build, size=k) if k % 2 else rng.integers(0, 1 << 32, size=k,
                                                                     dtype=np.uint32)
               for k in sizes]
    produced = []

    def source():
        for b in batches:
            produced.append(len(b))
            yield b

    c = gpujoin.Client(client.target, max_inflight=2)
    results = []
    for r in c.lookup_stream("t_lstream", source(), select=["v"], match_counts=True):
        # At most the window (2) and the one batch waiting for it are ahead of the answers.
        assert len(produced) <= len(results) + 1 + 2 + 1
        results.append(r)
    assert [len(r) for r in results] == sizes
    whole = client.lookup("t_lstream", np.concatenate(batches), select=["v"], match_counts=True)
    np.testing.assert_array_equal(np.concatenate([r.values for r in results]), whole.values)
    np.testing.assert_array_equal(np.concatenate([r.found for r in results]), whole.found)
    got_v = np.ma.concatenate([np.ma.MaskedArray(r.columns["v"]) for r in results])
    np.testing.assert_array_equal(np.ma.getmaskarray(got_v), np.ma.getmaskarray(whole.columns["v"]))
    assert got_v.compressed().tolist() == whole.columns["v"].compressed().tolist()
    # A bad batch fails the stream after the answers before it.
    seen = []
    with pytest.raises(gpujoin.KeyDtypeError, match=r"batches\[2\]"):
        for r in c.lookup_stream("t_lstream", iter([build[:3], build[3:5],
                                                    build[:2].astype(np.float64)])):
            seen.append(len(r))
    assert seen == [3, 2]
    c.close()


def test_default_batches_fit_the_servers_result_limit(pytestconfig):
    """With --max-result-bytes=1M (messages stay 256 MiB), a Client whose
    default batch is 2^20 rows sizes its batches to the result limit: a lookup
    with probes and match counts (13 bytes a row) is not refused."""
    from conftest import Gpujoind
    s = Gpujoind(pytestconfig.getoption("--gpujoind"), "--max-result-bytes=1M")
    try:
        with gpujoin.Client(s.address, batch_rows=1 << 20) as c:
            keys = np.arange(300_000, dtype=np.uint32)
            c.build_index("t_result_limit", keys)
            r = c.lookup("t_result_limit", keys, probes=True, match_counts=True)
            assert r.found.all() and (r.match_counts == 1).all()
            with pytest.raises(gpujoin.ResourceExhausted, match="max-result-bytes"):
                c.lookup("t_result_limit", keys, probes=True, batch_rows=300_000)
    finally:
        s.stop()


@pytest.mark.parametrize("bits", [32, 64])
def test_hash_known_answers(client, bits):
    """docs/hashing.md's pinned examples, through the Python client: every type
    in its own width (int8, int16, float16 and bool are not widened)."""
    want = {  # input -> (hash32, hash64)
        "u32_0": (0x08d6d969, 0x3aefa6fd5cf2deb4), "u32_42": (0x454235d1, 0xd756d7b62fc50bf1),
        "i64_-1": (0xc182c6d9, 0x85d136adb773c6c9), "f32_-0": (0x08d6d969, 0x3aefa6fd5cf2deb4),
        "bin_abc": (0x32d153ff, 0x44bc2cf5ad770999), "pair": (0x312371b9, 0xdf65db6222acac39),
        "str_abc": (0x32d153ff, 0x44bc2cf5ad770999), "i8_-1": (0x96bcd8cc, 0x95634172a60b7544),
        "i16_1": (0xd8c40016, 0xdd8f621dbf7f57f1), "bool_t": (0x3892f731, 0x8a4127811b21e730),
        "u8_1": (0x3892f731, 0x8a4127811b21e730), "f16_-0": (0xb5aa6af5, 0x9aaba41ffa2da101)}
    pick = 0 if bits == 32 else 1
    got = {
        "u32_0": client.hash(np.array([0], np.uint32), bits=bits)[0],
        "u32_42": client.hash(np.array([42], np.uint32), bits=bits)[0],
        "i64_-1": client.hash(np.array([-1], np.int64), bits=bits)[0],
        "f32_-0": client.hash(np.array([-0.0], np.float32), bits=bits)[0],
        "bin_abc": client.hash([b"abc"], bits=bits)[0],
        "pair": client.hash(np.array([1], np.uint32), ["x"], bits=bits)[0],
        "str_abc": client.hash(np.array(["abc"]), bits=bits)[0],
        "i8_-1": client.hash(np.array([-1], np.int8), bits=bits)[0],
        "i16_1": client.hash(np.array([1], ">i2"), bits=bits)[0],  # big-endian converted
        "bool_t": client.hash([True], bits=bits)[0],
        "u8_1": client.hash(np.ma.MaskedArray(np.array([1, 9], np.uint8), mask=[0, 1]),
                            bits=bits)[0],
        "f16_-0": client.hash(np.array([-0.0], np.float16), bits=bits)[0],
    }
    assert {k: int(v) for k, v in got.items()} == {k: v[pick] for k, v in want.items()}


def test_deadlines_are_typed(client):
    keys = np.arange(1 << 20, dtype=np.uint32)
    client.build_index("t_deadline", keys[:1000], replace=True)
    with pytest.raises(gpujoin.DeadlineExceeded) as e:
        client.lookup("t_deadline", keys, timeout=0.001)
    assert e.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
    # The client stays usable.
    assert client.lookup("t_deadline", keys[:3]).values.tolist() == [0, 1, 2]


typed_aggregate = pytest.mark.skipif(
    not gpujoin.client._HAS_TYPED_AGGREGATE,
    reason="proto/ has no AggregateRequest.typed_values (typed aggregation not in this API)")


@typed_aggregate
@pytest.mark.parametrize("dtype", [np.int64, np.uint64, np.int32, np.uint32, np.int16, np.float64])
@pytest.mark.parametrize("op", ["sum", "min", "max", "mean"])
def test_typed_aggregate_against_exact_models(client, dtype, op):
    rng = np.random.default_rng(7)
    n, groups = 5000, 23  # group 22 gets no rows
    keys = rng.integers(0, groups - 1, size=n, dtype=np.uint32)
    if np.dtype(dtype).kind == "f":
        values = rng.random(n) * 1e6
    else:
        info = np.iinfo(dtype)
        lo, hi = max(info.min, -(1 << 40)), min(info.max, 1 << 40)
        values = rng.integers(lo, hi, size=n, endpoint=True).astype(dtype)
    mask = rng.random(n) < 0.9
    r = client.aggregate(op, keys, values, groups=groups, mask=mask, contributing_rows=True,
                         batch_rows=777)
    rows = np.bincount(keys[mask], minlength=groups)
    np.testing.assert_array_equal(r.contributing_rows, rows)
    assert r.contributing_rows.dtype == np.uint64
    py = [[int(v) if np.dtype(dtype).kind != "f" else float(v)
           for v in values[mask & (keys == g)].tolist()] for g in range(groups)]
    if op == "sum":
        want = [sum(p) for p in py]
    elif op == "min":
        want = [min(p) if p else None for p in py]
    elif op == "max":
        want = [max(p) if p else None for p in py]
    else:
        want = [sum(p) / len(p) if p else None for p in py]
    got = r.values
    if op in ("min", "max") and np.dtype(dtype).kind != "f":
        assert isinstance(got, np.ma.MaskedArray) and got.mask.tolist() == [w is None for w in want]
        assert got.dtype == np.dtype(dtype) or np.dtype(dtype).itemsize < 4
        got = [None if m else int(v) for v, m in zip(got.data, got.mask)]
        assert got == want
        return
    got = np.ma.filled(got, np.nan).tolist() if isinstance(got, np.ma.MaskedArray) else got.tolist()
    for g, (a, b) in enumerate(zip(got, want)):
        if b is None:
            assert a != a, (g, a)  # empty mean: NaN
        elif op == "sum" and np.dtype(dtype).kind != "f":
            assert a == b, (g, a, b)  # integer sums are exact
        else:
            assert a == pytest.approx(b, rel=1e-9), (g, a, b)
    if op in ("sum", "mean") and np.dtype(dtype).kind != "f":
        assert not r.overflow.any()


@typed_aggregate
def test_typed_sum_overflow_is_flagged(client):
    keys = np.array([0, 1, 1, 2], np.uint32)
    big = np.array([1 << 62, 1 << 62, 1 << 62, 5], np.int64)
    r = client.aggregate("sum", keys, big, groups=3, batch_rows=2)
    assert r.overflow.tolist() == [False, True, False]
    assert int(r.values[0]) == 1 << 62 and int(r.values[2]) == 5
    assert int(r.values[1]) == -(1 << 63)  # the low 64 bits of 2^63
    m = client.aggregate("mean", keys, big, groups=3)
    assert m.overflow.tolist() == [False, True, False] and np.isnan(m.values[1])
    f = client.aggregate("sum", keys, np.array([1, 2, 3, 4], np.float32), groups=3)
    assert f.values.dtype == np.float32 and f.overflow is None  # float32 keeps its own path


@pytest.mark.parametrize("kind", ["inner", "left", "semi", "anti"])
def test_join_stream_matches_join(client, kind):
    rng = np.random.default_rng(8)
    build = rng.integers(0, 300, size=900, dtype=np.uint32)
    client.build_index("t_jstream", build, duplicates="keep_all", replace=True,
                       payload={"row": np.arange(900, dtype=np.int64)})
    sizes = [7, 0, 500, 1, 300] * 4
    batches = [rng.integers(0, 400, size=k, dtype=np.uint32) for k in sizes]
    produced = []

    def source():
        for b in batches:
            produced.append(len(b))
            yield b

    c = gpujoin.Client(client.target, max_inflight=2)
    results = []
    for r in c.join_stream("t_jstream", source(), kind=kind, select=["row"], found=True):
        assert len(produced) <= len(results) + 1 + 2 + 1  # window 2, one waiting, this one
        results.append(r)
    c.close()
    whole = client.join("t_jstream", np.concatenate(batches), kind=kind, select=["row"],
                        found=True)
    np.testing.assert_array_equal(np.concatenate([r.left_rows for r in results]), whole.left_rows)
    np.testing.assert_array_equal(np.concatenate([r.right_rows for r in results]),
                                  whole.right_rows)
    np.testing.assert_array_equal(np.concatenate([r.found for r in results]), whole.found)
    assert [len(r.found) for r in results] == sizes
    assert sum(r.count for r in results) == whole.count
    got = np.ma.concatenate([np.ma.MaskedArray(r.columns["row"]) for r in results])
    want = np.ma.MaskedArray(whole.columns["row"])
    np.testing.assert_array_equal(np.ma.getmaskarray(got), np.ma.getmaskarray(want))
    assert got.compressed().tolist() == want.compressed().tolist()


def test_join_stream_resends_a_batch_cut_by_the_result_limit(small_message_server, monkeypatch):
    with gpujoin.Client(small_message_server.address) as c:
        build = np.repeat(np.arange(10, dtype=np.uint32), 400)
        c.build_index("t_jscut", build, duplicates="keep_all", replace=True)
        left = np.tile(np.arange(12, dtype=np.uint32), 342)[:4096]
        streams = []
        stream = c._stream
        monkeypatch.setattr(c, "_stream", lambda name, *a, **k: streams.append(name) or
                            stream(name, *a, **k))
        parts = list(c.join_stream("t_jscut", [left[:10], left[10:]]))
        assert streams == ["Join", "Join"]  # the batches, then the second one's two halves
        monkeypatch.undo()
        whole = c.join("t_jscut", left)
        assert whole.count > (8 << 20) // 8  # the second batch alone does not fit 8 MiB
        np.testing.assert_array_equal(np.concatenate([p.left_rows for p in parts]),
                                      whole.left_rows)
        np.testing.assert_array_equal(np.concatenate([p.right_rows for p in parts]),
                                      whole.right_rows)
        assert not any(p.overflow for p in parts)
