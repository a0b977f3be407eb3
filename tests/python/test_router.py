"""gpujoin-router in front of 1, 2 and 3 gpujoind shards ($GPUJOIN_TEST_BACKEND, loopback;
docs/operations.md "Sharding"): builds and lookups through the router answer
exactly what one gpujoind holding the whole index answers (uint32, uint64 and
string keys, lowest_row and keep_all, payload with nulls, duplicates across
chunks, keys that all land on one shard), IndexInfo is merged, and every
failure is a precise error naming the shard, never a partial answer: a shard
that is down, one that serves another version of the index, shards given in
the wrong order (their --shard refuses the keys), Query plans the router
cannot split over its shards. Join, Aggregate and Mutate: test_router_ops.py."""
import re
import signal

import numpy as np
import pytest

import gpujoin
from conftest import wait_serving


def values(col):
    if isinstance(col, np.ma.MaskedArray):
        mask = np.ma.getmaskarray(col).tolist()
        return [None if m else v for v, m in zip(np.ma.getdata(col).tolist(), mask)]
    return list(col.tolist()) if hasattr(col, "tolist") else list(col)


def same_lookup(a, b, context):
    assert a.values.tolist() == b.values.tolist(), context
    assert a.found.tolist() == b.found.tolist(), context
    if a.match_counts is not None or b.match_counts is not None:
        assert a.match_counts.tolist() == b.match_counts.tolist(), context
    assert sorted(a.columns) == sorted(b.columns), context
    for name in a.columns:
        assert values(a.columns[name]) == values(b.columns[name]), f"{context}: column {name}"
    assert (a.statistics.found, a.statistics.missing) == (b.statistics.found, b.statistics.missing)


def random_input(rng, key_type, rows):
    if key_type == "string":
        keys = [f"sku-{int(k)}" for k in rng.integers(0, rows // 2, rows)]
        probe = [f"sku-{int(k)}" for k in rng.integers(0, rows, 3 * rows)]
        return keys, probe, {"key_columns": [("sku", "string")]}
    top = 2**32 - 2 if key_type == "uint32" else 2**64 - 2
    pool = rng.integers(0, top, rows // 2, dtype=np.uint64)
    if key_type == "uint32":
        pool = pool.astype(np.uint32)
    keys = rng.choice(pool, rows)
    probe = np.concatenate([rng.choice(pool, 2 * rows), rng.integers(0, top, rows, dtype=np.uint64)
                            .astype(pool.dtype)])
    return keys, probe, {}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("shards", [1, 2, 3])
def test_builds_and_lookups_equal_one_server(cluster, start_gpujoind, shards):
    rng = np.random.default_rng(shards)
    (_, router) = cluster(shards)
    whole = start_gpujoind()
    with gpujoin.Client(router.address) as r, gpujoin.Client(whole.address) as w:
        wait_serving(r)
        for key_type in ("uint32", "uint64", "string"):
            for duplicates in ("lowest_row", "keep_all"):
                context = f"{shards} shards, {key_type} keys, {duplicates}"
                rows = 3000
                keys, probe, extra = random_input(rng, key_type, rows)
                n = np.arange(rows, dtype=np.int64)
                payload = {"n": n,
                           "label": [None if i % 7 == 0 else f"l{i % 5}" for i in range(rows)],
                           "f": [None if i % 11 == 0 else i * 0.5 for i in range(rows)]}
                name = f"r_{key_type}_{duplicates}"
                kw = dict(payload=payload, duplicates=duplicates, chunk_rows=700, replace=True)
                if key_type == "string":
                    kw["key_columns"] = [("sku", "string")]
                elif key_type == "uint64":
                    kw["key_type"] = "uint64"
                info_r = r.build_index(name, keys, **kw)
                info_w = w.build_index(name, keys, **kw)
                assert info_r.rows == info_w.rows == rows, context
                assert info_r.statistics.unique_keys == info_w.statistics.unique_keys, context
                assert info_r.statistics.duplicate_rows == info_w.statistics.duplicate_rows
                assert [p.name for p in info_r.payload] == ["n", "label", "f"], context
                assert [p.null_count for p in info_r.payload] == \
                    [p.null_count for p in info_w.payload], context
                described = r.describe(name)
                assert described.rows == rows and described.version == info_r.version, context
                for batch_rows in (None, 257):
                    a = r.lookup(name, probe, select=["n", "label", "f"], match_counts=True,
                                 batch_rows=batch_rows)
                    b = w.lookup(name, probe, select=["n", "label", "f"], match_counts=True,
                                 batch_rows=batch_rows)
                    same_lookup(a, b, f"{context}, batches of {batch_rows}")
                # Empty and one-row batches.
                one = probe[:1]
                same_lookup(r.lookup(name, one, select=["label"]),
                            w.lookup(name, one, select=["label"]), f"{context}, one row")
        listed = {i.name: i for i in r.list()}
        assert set(listed) >= {"r_uint32_lowest_row", "r_string_keep_all"}
        r.drop("r_uint32_lowest_row")
        with pytest.raises(gpujoin.NotFound):
            r.describe("r_uint32_lowest_row")


def test_keys_that_all_land_on_one_shard(cluster, start_gpujoind):
    (shards, router) = cluster(3)
    with gpujoin.Client(router.address) as r:
        wait_serving(r)
        keys = np.array([42, 42, 42], np.uint32)
        info = r.build_index("one", keys, payload={"v": [1, 2, 3]})
        assert info.rows == 3 and info.statistics.unique_keys == 1
        holders = []
        for s in shards:
            with gpujoin.Client(s.address) as c:
                holders.append(c.describe("one").rows)
        assert sorted(holders) == [0, 0, 3]
        got = r.lookup("one", np.array([42, 7, 42], np.uint32), select=["v"])
        assert got.found.tolist() == [True, False, True]
        assert values(got.columns["v"]) == [1, None, 1]   # the lowest global row wins


def test_shards_in_the_wrong_order_refuse_the_keys(cluster):
    (_, router) = cluster(2, order=[1, 0])
    with gpujoin.Client(router.address) as r:
        wait_serving(r)
        with pytest.raises(gpujoin.Error) as e:
            r.build_index("wrong", np.arange(100, dtype=np.uint32))
        assert e.value.code.name == "FAILED_PRECONDITION"
        assert "belongs to shard" in str(e.value) and "--shard" in str(e.value)
        assert re.search(r"shard \d \(127\.0\.0\.1:\d+\)", str(e.value)), str(e.value)


@pytest.mark.parametrize("n", [1, 2])
def test_a_shard_down_fails_the_call_naming_it(cluster, n):
    (shards, router) = cluster(n)
    with gpujoin.Client(router.address) as r:
        wait_serving(r)
        keys = np.arange(1000, dtype=np.uint32)
        r.build_index("down", keys)
        assert r.lookup("down", keys).found.all()
        last = n - 1
        shards[last].stop(signal.SIGKILL)
        with pytest.raises(gpujoin.Error) as e:
            r.lookup("down", keys)
        assert e.value.code.name == "UNAVAILABLE", e.value
        assert f"shard {last} ({shards[last].address})" in str(e.value)
        wait_serving(r, want=False)
        with pytest.raises(gpujoin.Error) as e:
            r.describe("down")
        assert f"shard {last} ({shards[last].address})" in str(e.value)


def test_a_shard_serving_another_version_aborts(cluster):
    (shards, router) = cluster(2)
    with gpujoin.Client(router.address) as r:
        wait_serving(r)
        keys = np.arange(200, dtype=np.uint32)
        r.build_index("ver", keys)
        # Rebuilt on shard 0 alone (with its own keys): its version moves on.
        with gpujoin.Client(shards[0].address) as s0:
            mine = []
            for k in keys:   # a shard refuses a batch holding another shard's key
                try:
                    if s0.lookup("ver", keys[k:k + 1]).found[0]:
                        mine.append(k)
                except gpujoin.FailedPrecondition:
                    pass
            assert 0 < len(mine) < len(keys)
            s0.build_index("ver", np.array(mine, np.uint32), replace=True)
        with pytest.raises(gpujoin.Error) as e:
            r.lookup("ver", keys)
        assert e.value.code.name == "ABORTED"
        assert "serves version" in str(e.value)
        with pytest.raises(gpujoin.Error) as e:
            r.describe("ver")
        assert e.value.code.name == "ABORTED"


def test_hash_through_the_router_equals_a_shard(cluster):
    (shards, router) = cluster(2)
    data = np.arange(1000, dtype=np.int64) * 7919
    with gpujoin.Client(router.address) as r, gpujoin.Client(shards[0].address) as s0:
        wait_serving(r)
        for _ in range(3):   # the shards take turns
            a, b = r.hash(data), s0.hash(data)
            assert np.asarray(a.hashes if hasattr(a, "hashes") else a).tolist() == \
                np.asarray(b.hashes if hasattr(b, "hashes") else b).tolist()


def test_snapshots_through_the_router(pytestconfig, start_gpujoind, tmp_path):
    from conftest import Router
    import os
    dirs = [tmp_path / f"shard{i}" for i in range(2)]
    for d in dirs:
        d.mkdir()
    shards = [start_gpujoind(f"--shard={i}/2", f"--data-dir={dirs[i]}") for i in range(2)]
    binary = os.path.join(os.path.dirname(pytestconfig.getoption("--gpujoind")), "gpujoin-router")
    router = Router(binary, [s.address for s in shards])
    try:
        with gpujoin.Client(router.address) as r:
            wait_serving(r)
            keys = np.arange(500, dtype=np.uint32)
            r.build_index("snap", keys, payload={"v": keys.astype(np.int64)}, wait_durable=True)
            saved = r.save_index("snap", "snap-copy.bak")
            assert saved.file == "snap-copy.bak" and saved.bytes > 0
            files = {f.file: f for f in r.list_files()}
            assert "snap-copy.bak" in files and "snap.gjsnap" in files
            assert files["snap-copy.bak"].bytes == saved.bytes
            r.drop("snap")
            info = r.load_index("snap", "snap-copy.bak")
            assert info.rows == 500
            got = r.lookup("snap", keys, select=["v"])
            assert got.found.all() and values(got.columns["v"]) == keys.tolist()
            assert r.delete_file("snap-copy.bak") == saved.bytes
            assert "snap-copy.bak" not in {f.file for f in r.list_files()}
    finally:
        router.stop()


def test_malformed_key_columns_are_refused_by_the_router(cluster):
    """The router checks a request's columns before it hashes them: offsets
    past the data, decreasing or huge lengths are INVALID_ARGUMENT for the
    batch, and the router serves on."""
    import struct
    from gpujoin._proto import pb
    from query_support import Connection
    (_, router) = cluster(2)
    with gpujoin.Client(router.address) as r:
        wait_serving(r)
        r.build_index("bad", ["a", "b"], key_columns=[("k", "string")])
        conn = Connection(router.address)
        try:
            cases = [
                pb.Column(name="k", type=pb.COLUMN_TYPE_STRING, length=2, data=b"abcde",
                          offsets=struct.pack("<3i", 0, 0x7fffffff, 5)),
                pb.Column(name="k", type=pb.COLUMN_TYPE_STRING, length=2, data=b"abcde",
                          offsets=struct.pack("<3i", -4, 2, 5)),
                pb.Column(name="k", type=pb.COLUMN_TYPE_INT64, length=2**62, data=b""),
            ]
            for i, column in enumerate(cases):
                (answer,) = conn.stub.Lookup(iter([pb.LookupRequest(
                    index="bad", batch_id=i, key_columns=[column])]), timeout=30)
                assert answer.HasField("error"), i
                assert answer.error.code == 3 and "key_columns[0]" in answer.error.message, \
                    answer.error
        finally:
            conn.close()
        assert r.lookup("bad", ["b", "z"]).found.tolist() == [True, False]


def test_rpcs_the_router_does_not_serve_say_so(cluster):
    """A Query plan the router cannot split over its shards (lookups by
    different keys: no shard holds both keys of a row) is UNIMPLEMENTED naming
    the step, and the router serves on (Join, Aggregate and Mutate:
    test_router_ops.py)."""
    (_, router) = cluster(2)
    with gpujoin.Client(router.address) as r:
        wait_serving(r)
        r.build_index("un", np.arange(10, dtype=np.uint32), payload={"v": np.arange(10) * 3})
        r.build_index("un2", np.arange(10, dtype=np.uint32))
        data = {"a": np.arange(5, dtype=np.uint32), "b": np.arange(5, 10, dtype=np.uint32)}
        with pytest.raises(gpujoin.Error) as e:
            r.query(data).lookup("un", key="a", select=["v"]).lookup("un2", key="b").run()
        assert e.value.code.name == "UNIMPLEMENTED", e.value
        assert "steps[1]" in e.value.message and "gpujoin-router" in e.value.message, e.value
        # A plan whose lookups share one key is served.
        out = r.query(data).lookup("un", key="a", select=["v"]).lookup("un2", key="a").run()
        assert out["a"].tolist() == [0, 1, 2, 3, 4] and values(out["v"]) == [0, 3, 6, 9, 12]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("key_type", ["uint32", "uint64", "string"])
def test_batch_builds_through_the_router_equal_one_server(cluster, start_gpujoind, key_type):
    """A batch-mode build (keys with nulls: masked-out rows, row_base per
    chunk) through the router: every row keeps its global row ID, masked rows
    are invalid rows on their shard with their payload rows in place, and the
    index describes itself as a batch build, as on one server."""
    rng = np.random.default_rng(7)
    (_, router) = cluster(3)
    whole = start_gpujoind()
    n = 1200
    if key_type == "string":
        raw = [f"k{int(v)}" for v in rng.integers(0, 400, n)]
        keys = np.ma.masked_array(np.array(raw, dtype=object), mask=rng.random(n) < 0.2)
        probe = [f"k{v}" for v in range(450)]
    else:
        dtype = np.uint32 if key_type == "uint32" else np.uint64
        keys = np.ma.masked_array(rng.integers(0, 400, n).astype(dtype), mask=rng.random(n) < 0.2)
        probe = np.arange(450, dtype=dtype)
    payload = {"p": np.ma.masked_array(np.arange(n, dtype=np.int64), mask=rng.random(n) < 0.1)}
    with gpujoin.Client(router.address) as r, gpujoin.Client(whole.address) as w:
        wait_serving(r)
        for c in (r, w):
            if key_type == "string":
                c.build_index("bm", {"sku": keys}, payload=payload, first_value=5, chunk_rows=101)
            else:
                c.build_index("bm", keys, payload=payload, first_value=5, chunk_rows=101)
        a, b = r.describe("bm"), w.describe("bm")
        assert (a.batch_mode, a.explicit_values, a.rows) == (b.batch_mode, b.explicit_values, b.rows)
        assert a.statistics.invalid_rows == b.statistics.invalid_rows
        assert a.statistics.unique_keys == b.statistics.unique_keys
        q = {"sku": probe} if key_type == "string" else probe
        same_lookup(r.lookup("bm", q, select=["p"]), w.lookup("bm", q, select=["p"]), key_type)
