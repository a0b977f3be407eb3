"""gpujoin.dask against a real gpujoind and a dask.distributed LocalCluster of
two worker processes: results equal the single-client lookup_frame/join_frame
of the whole frame (values, dtypes, index, order), partitions and divisions
are kept, each worker process makes one Client, and server errors reach
compute() as gpujoin exceptions."""
import os
import threading

import numpy as np
import pytest

pd = pytest.importorskip("pandas")
dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")

import gpujoin  # noqa: E402
import gpujoin.dask as gd  # noqa: E402

#: Client options of every connector call: the tests' call deadline, also on the workers.
OPTIONS = {"timeout": 30.0}
N_KEYS = 3000  # index keys 0 .. N_KEYS-1
LOOKUP_SELECT = ["qty", "price", "label"]


@pytest.fixture(scope="module")
def dask_client():
    """A LocalCluster of 2 worker processes (2 threads each) and its client. The
    workers import gpujoin from the directories this process imports it from
    (the package and the generated stubs), passed down in PYTHONPATH."""
    dirs = [os.path.dirname(p) for p in gpujoin.__path__]
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(dirs + ([saved] if saved else []))
    try:
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=2, processes=True,
                                           dashboard_address=None, silence_logs=40)
    finally:
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved
    with cluster, distributed.Client(cluster) as c:
        yield c


@pytest.fixture(scope="module")
def payload():
    """The lookup index's payload, by source row (= key)."""
    rng = np.random.default_rng(7)
    return {"qty": rng.integers(-10**12, 10**12, N_KEYS, dtype=np.int64),
            "price": rng.normal(size=N_KEYS),
            "label": [None if k % 7 == 0 else f"k{k}" for k in range(N_KEYS)]}


@pytest.fixture(scope="module")
def lookup_index(server, payload):
    with gpujoin.Client(server.address, timeout=30) as c:
        c.build_index("dask_lookup", np.arange(N_KEYS, dtype=np.uint32), payload=payload,
                      replace=True)
    return "dask_lookup"


def _frame(n, key_range, seed):
    """n rows of int64 keys in [0, key_range) (repeats; those >= N_KEYS missing),
    a float column, and a sorted index with gaps (named 'row')."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"key": rng.integers(0, key_range, n, dtype=np.int64),
                         "x": rng.normal(size=n)},
                        index=pd.Index(np.arange(n, dtype=np.int64) * 3 + 5, name="row"))


def test_lookup_equals_single_client_lookup_frame(dask_client, server, lookup_index, payload):
    frame = _frame(10_000, 4000, seed=1)
    ddf = dd.from_pandas(frame, npartitions=4)
    out = gd.lookup(ddf, lookup_index, on="key", select=LOOKUP_SELECT, address=server.address,
                    **OPTIONS)
    assert out.npartitions == 4 and out.divisions == ddf.divisions
    want_dtypes = {"key": np.dtype("int64"), "x": np.dtype("float64"), "value": "UInt32",
                   "found": np.dtype("bool"), "qty": "Int64", "price": "Float64",
                   "label": np.dtype("O")}
    assert out.dtypes.to_dict() == {k: pd.api.types.pandas_dtype(v)
                                    for k, v in want_dtypes.items()}
    got = out.compute()
    with gpujoin.Client(server.address) as c:
        want = c.lookup_frame(lookup_index, frame, on="key", select=LOOKUP_SELECT)
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    # And against the index itself: key k is source row k.
    found = frame.key.to_numpy() < N_KEYS
    assert 0 < found.sum() < len(frame)
    assert (got.found.to_numpy() == found).all()
    keys = frame.key.to_numpy()[found]
    assert (got.value[found].to_numpy(dtype=np.int64) == keys).all()
    assert (got.qty[found].to_numpy(dtype=np.int64) == payload["qty"][keys]).all()
    assert (got.price[found].to_numpy(dtype=np.float64) == payload["price"][keys]).all()
    assert got.label[found].tolist() == [payload["label"][k] for k in keys]
    assert got.qty[~found].isna().all() and got.label[~found].isna().all()
    # Each output partition is its input partition's rows, in order.
    for i in range(4):
        part = out.partitions[i].compute()
        assert part.index.equals(ddf.partitions[i].compute().index)


def test_join_keep_all_equals_single_client_join_frame(dask_client, server):
    rng = np.random.default_rng(3)
    counts = rng.integers(0, 4, 500)  # matches per key 0..499; keys 500.. are missing
    keys = np.repeat(np.arange(500, dtype=np.uint32), counts)
    rng.shuffle(keys)
    tag = np.array([f"r{i}" for i in range(len(keys))], dtype=object)
    tag[::5] = None
    with gpujoin.Client(server.address) as c:
        c.build_index("dask_join", keys, payload={"src": np.arange(len(keys), dtype=np.int64),
                                                  "tag": tag},
                      duplicates="keep_all", replace=True)
        frame = _frame(10_000, 600, seed=2)
        ddf = dd.from_pandas(frame, npartitions=4)
        for how in ("inner", "left", "semi", "anti"):
            out = gd.join(ddf, "dask_join", on="key", how=how, select=["src", "tag"],
                          address=server.address, **OPTIONS)
            assert out.npartitions == 4 and out.divisions == ddf.divisions
            got = out.compute()
            want = c.join_frame("dask_join", frame, on="key", kind=how, select=["src", "tag"],
                                keep_index=True).astype({"src": "Int64"})
            pd.testing.assert_frame_equal(got, want, check_exact=True)
            assert got.dtypes.to_dict() == out.dtypes.to_dict()

    # The inner join against the index itself: each left row repeated once per
    # source row of its key, in source-row order, keeping its index label.
    got = gd.join(ddf, "dask_join", on="key", how="inner", select=["src"],
                  address=server.address, **OPTIONS).compute()
    per_row = np.where(frame.key < 500, counts[np.minimum(frame.key, 499)], 0)
    assert len(got) == per_row.sum() > len(frame) // 2
    assert got.index.equals(frame.index.repeat(per_row))
    assert (got.x.to_numpy() == np.repeat(frame.x.to_numpy(), per_row)).all()
    src = got.src.to_numpy(dtype=np.int64)
    assert (keys[src] == got.key.to_numpy()).all()
    assert (got.right_row.to_numpy(dtype=np.int64) == src).all()
    rows = np.repeat(np.arange(len(frame)), per_row)
    assert (np.diff(src)[rows[1:] == rows[:-1]] > 0).all()  # source-row order per left row


def test_one_client_per_worker_process(dask_client, server, lookup_index):
    ddf = dd.from_pandas(_frame(2000, 4000, seed=4), npartitions=8)
    for _ in range(2):
        gd.lookup(ddf, lookup_index, on="key", address=server.address, **OPTIONS).compute()
    pids = dask_client.run(os.getpid)
    assert len(set(pids.values())) == 2 and os.getpid() not in pids.values()
    made = dask_client.run(gd.clients_made)
    # Every test of this module uses one address and one set of options: at most
    # one Client per worker process, however many tasks and threads it ran.
    assert all(m == h and m <= 1 for m, h in made.values()), made
    assert sum(m for m, _ in made.values()) >= 1, made


def test_worker_client_is_shared_by_threads_and_keyed_by_options(server):
    got = []
    threads = [threading.Thread(target=lambda: got.append(
        gd.worker_client(server.address, timeout=12.5, options=[("grpc.lb_policy_name",
                                                                   "pick_first")])))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 8 and all(c is got[0] for c in got)
    assert gd.worker_client(server.address, timeout=12.5,
                            options=(("grpc.lb_policy_name", "pick_first"),)) is got[0]
    other = gd.worker_client(server.address, timeout=13.0)
    assert other is not got[0]
    assert other.server_info().max_message_bytes > 0
    with pytest.raises(TypeError, match="hashable"):
        gd.worker_client(server.address, options=[("x", {1, 2})])


def test_errors_reach_the_caller(dask_client, server, lookup_index):
    frame = _frame(100, 4000, seed=5)
    ddf = dd.from_pandas(frame, npartitions=2)
    with pytest.raises(gpujoin.NotFound, match='"dask_missing"'):
        gd.lookup(ddf, "dask_missing", on="key", address=server.address, **OPTIONS)
    with pytest.raises(gpujoin.InvalidArgument, match="no payload column 'nope'"):
        gd.lookup(ddf, lookup_index, on="key", select=["nope"], address=server.address)
    with pytest.raises(gpujoin.KeyValueError, match="no column 'k'"):
        gd.join(ddf, lookup_index, on="k", address=server.address)
    with pytest.raises(gpujoin.InvalidArgument, match="how must be one of .* got 'outer'"):
        gd.join(ddf, lookup_index, on="key", how="outer", address=server.address)
    with pytest.raises(TypeError, match="dask.dataframe.DataFrame"):
        gd.lookup(frame, lookup_index, on="key", address=server.address)

    # The index dropped after the graph was made: the workers' NotFound, with its message.
    with gpujoin.Client(server.address) as c:
        c.build_index("dask_dropped", np.arange(10, dtype=np.uint32), replace=True)
        out = gd.lookup(ddf, "dask_dropped", on="key", address=server.address, **OPTIONS)
        c.drop("dask_dropped")
    with pytest.raises(gpujoin.NotFound, match='"dask_dropped"') as e:
        out.compute()
    assert e.value.code.name == "NOT_FOUND"


def test_empty_partitions(dask_client, server, lookup_index):
    frame = _frame(1000, 4000, seed=6)
    ddf = dd.from_pandas(frame, npartitions=4)
    cut = frame.index[600]
    tail = ddf.map_partitions(lambda p: p[p.index >= cut])  # partitions 0 and 1 become empty
    kept = frame[frame.index >= cut]
    assert tail.npartitions == 4
    out = gd.lookup(tail, lookup_index, on="key", select=LOOKUP_SELECT, address=server.address,
                    **OPTIONS)
    first = out.partitions[0].compute()
    assert len(first) == 0 and first.dtypes.to_dict() == out.dtypes.to_dict()
    with gpujoin.Client(server.address) as c:
        want = c.lookup_frame(lookup_index, kept, on="key", select=LOOKUP_SELECT)
    pd.testing.assert_frame_equal(out.compute(), want, check_exact=True)
    joined = gd.join(tail, lookup_index, on="key", how="left", select=["qty"],
                     address=server.address, **OPTIONS)
    first = joined.partitions[1].compute()
    assert len(first) == 0 and first.dtypes.to_dict() == joined.dtypes.to_dict()
    got = joined.compute()
    assert got.index.equals(kept.index) and got.qty.dtype == "Int64"
    assert (got.right_row.isna().to_numpy() == (kept.key >= N_KEYS).to_numpy()).all()


def test_lookup_through_a_router_of_two_shards(dask_client, cluster, payload):
    """The connector against gpujoin-router over two shards: the same frame as
    a single client on the router gets, the index spread over both shards."""
    from conftest import wait_serving
    shards, router = cluster(2)
    with gpujoin.Client(router.address) as c:
        wait_serving(c)
        keys = np.arange(N_KEYS, dtype=np.uint32)
        c.build_index("dask_routed", keys, payload={k: payload[k] for k in ("qty", "label")})
        held = []
        for s in shards:
            with gpujoin.Client(s.address) as direct:
                held.append(direct.describe("dask_routed").rows)
        assert sum(held) == N_KEYS and min(held) > 0
        frame = _frame(5_000, 4000, seed=3)
        ddf = dd.from_pandas(frame, npartitions=3)
        got = gd.lookup(ddf, "dask_routed", on="key", select=["qty", "label"],
                        address=router.address, **OPTIONS).compute()
        want = c.lookup_frame("dask_routed", frame, on="key", select=["qty", "label"])
    pd.testing.assert_frame_equal(got, want, check_exact=True, check_dtype=False)
    found = frame.key.to_numpy() < N_KEYS
    assert (got.found.to_numpy() == found).all()
    assert (got.qty[found].to_numpy(dtype=np.int64) ==
            payload["qty"][frame.key.to_numpy()[found]]).all()

