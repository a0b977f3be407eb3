"""Join, Aggregate and Mutate through gpujoin-router in front of 1, 2 and 3
gpujoind shards ($GPUJOIN_TEST_BACKEND, loopback; docs/operations.md "Sharding"): every
answer equals what one gpujoind holding the whole index (built from the same
input) answers.

Join: uint32, uint64 and string keys (a null string key among the left rows),
lowest_row and keep_all indexes with keys duplicated across build chunks, every
kind, payload with nulls and a string column, explicit left rows, a capacity
below the pair count (the same count, overflow and stable prefix), count_only,
found per left row, statistics (found and missing: probe counts differ, as the
shards' tables do), join_stream, a request of several left batches, and answers
continued over small messages. Aggregate: every op over float32 and typed
values with masks and nulls, several batches, keys past the groups, the
contributing rows, integer overflow, and bad requests refused alike. Mutate:
random upsert/delete batches applied to both, the counts and the index after
each equal; upserts without values (a row-ID index built through the router)
are UNIMPLEMENTED and change nothing. Errors: an unknown index is NOT_FOUND, a
shard that is down fails the call UNAVAILABLE naming it.
"""
import os
import signal

import grpc
import numpy as np
import pytest

import gpujoin
from gpujoin import columns as gcolumns
from gpujoin._proto import pb
from gpujoin.errors import from_batch_error, from_rpc_error
from conftest import Gpujoind, Router, wait_serving
from query_support import Connection
from test_router import random_input, same_lookup, values

KINDS = ["inner", "left", "semi", "anti"]
COUNTS = ("upsert_rows", "inserted_keys", "updated_keys", "deleted_keys", "not_found_keys",
          "deleted_rows")


# The fixtures of conftest.py, but every process a test started is stopped at
# once (SIGTERM to all, then a wait): a gpujoind takes about a second to stop,
# and a test here runs up to five processes.

@pytest.fixture()
def processes():
    started = []
    yield started
    for p in started:
        if p.proc.poll() is None:
            p.proc.send_signal(signal.SIGTERM)
    for p in started:
        p.proc.wait(30)


@pytest.fixture()
def start_gpujoind(pytestconfig, processes):
    binary = pytestconfig.getoption("--gpujoind")
    if not binary or not os.access(binary, os.X_OK):
        pytest.fail(f"--gpujoind must name the gpujoind binary (got {binary!r})")

    def start(*flags):
        s = Gpujoind(binary, *flags)
        processes.append(s)
        if s.address is None:
            pytest.fail("gpujoind exited:\n" + "".join(s.log))
        return s

    return start


@pytest.fixture()
def cluster(pytestconfig, start_gpujoind, processes):
    """cluster(n, router_flags=(), shard_flags=()): n shards (--shard i/n) and a router over them."""
    binary = os.path.join(os.path.dirname(pytestconfig.getoption("--gpujoind")), "gpujoin-router")
    if not os.access(binary, os.X_OK):
        pytest.fail(f"gpujoin-router is not beside gpujoind ({binary})")

    def start(n, router_flags=(), shard_flags=()):
        shards = [start_gpujoind(f"--shard={i}/{n}", *shard_flags) for i in range(n)]
        router = Router(binary, [s.address for s in shards], *router_flags)
        processes.append(router)
        return shards, router

    return start


def same_join(a, b, context):
    """Two JoinResults agree: pairs, count, overflow, columns, found and the
    found/missing statistics (probe counts differ with the tables)."""
    assert a.left_rows.tolist() == b.left_rows.tolist(), f"{context}: left_rows"
    assert a.right_rows.tolist() == b.right_rows.tolist(), f"{context}: right_rows"
    assert (a.count, a.overflow) == (b.count, b.overflow), f"{context}: count, overflow"
    assert sorted(a.columns) == sorted(b.columns), context
    for name in a.columns:
        assert values(a.columns[name]) == values(b.columns[name]), f"{context}: column {name}"
    assert (a.found is None) == (b.found is None), context
    if a.found is not None:
        assert a.found.tolist() == b.found.tolist(), f"{context}: found"
    assert (a.statistics.found, a.statistics.missing) == \
        (b.statistics.found, b.statistics.missing), f"{context}: statistics"


def build_both(r, w, name, keys, key_type, **kw):
    """Builds `name` through the router and on the whole server alike; their IndexInfos."""
    kw = dict(kw, replace=True)
    if key_type == "string":
        kw["key_columns"] = [("sku", "string")]
    elif key_type == "uint64":
        kw["key_type"] = "uint64"
    info_r = r.build_index(name, keys, **kw)
    info_w = w.build_index(name, keys, **kw)
    assert info_r.rows == info_w.rows == len(keys), name
    assert info_r.statistics.max_group_rows == info_w.statistics.max_group_rows, name
    return info_r, info_w


def payload_of(rows, offset=0):
    return {"n": np.arange(offset, offset + rows, dtype=np.int64),
            "label": [None if i % 7 == 0 else f"l{i % 5}-{'x' * (i % 3)}"
                      for i in range(offset, offset + rows)],
            "f": [None if i % 11 == 0 else i * 0.5 for i in range(offset, offset + rows)]}


def raw_error(method, requests):
    """The gpujoin.Error of a raw stream call: the first batch's in-band error,
    else the call's status; None when every batch was answered."""
    try:
        for b, r in enumerate(method(iter(requests), timeout=30)):
            if r.HasField("error"):
                return from_batch_error(r.error, b)
    except grpc.RpcError as e:
        return from_rpc_error(e)
    return None


def u32(a):
    return pb.U32Column(packed=np.asarray(a, "<u4").tobytes())


def f32(a):
    return pb.F32Column(packed=np.asarray(a, "<f4").tobytes())


# ---------------------------------------------------------------- Join

@pytest.mark.timeout(120)
@pytest.mark.parametrize("shards", [1, 2, 3])
def test_joins_equal_one_server(cluster, start_gpujoind, shards):
    rng = np.random.default_rng(100 + shards)
    (_, router) = cluster(shards)
    whole = start_gpujoind()
    with gpujoin.Client(router.address) as r, gpujoin.Client(whole.address) as w:
        wait_serving(r)
        for key_type in ("uint32", "uint64", "string"):
            for duplicates in ("lowest_row", "keep_all"):
                rows = 1200
                keys, probe, _ = random_input(rng, key_type, rows)
                # About a third of the left keys miss; a null string key matches nothing.
                probe = [probe[i] for i in rng.permutation(len(probe))[:1000]]
                if key_type == "string":
                    probe = [None if i % 97 == 5 else k for i, k in enumerate(probe)]
                else:
                    probe = np.array(probe, dtype=np.asarray(keys).dtype)
                name = f"j_{key_type}_{duplicates}"
                info, _ = build_both(r, w, name, keys, key_type, payload=payload_of(rows),
                                     duplicates=duplicates, chunk_rows=300)
                assert info.duplicates == duplicates
                if duplicates == "keep_all":
                    assert info.statistics.max_group_rows > 1, name
                select = ["n", "label", "f"]
                for kind in KINDS:
                    context = f"{shards} shards, {name}, {kind}"
                    for batch_rows in (None, 129):
                        a = r.join(name, probe, kind=kind, select=select, found=True,
                                   batch_rows=batch_rows)
                        b = w.join(name, probe, kind=kind, select=select, found=True,
                                   batch_rows=batch_rows)
                        same_join(a, b, f"{context}, batches of {batch_rows}")
                        if kind in ("left", "anti"):
                            assert a.count >= len(probe) - int(a.found.sum()), context
                    # Explicit left rows, not in order.
                    left_rows = (rng.permutation(len(probe)) * 3 + 1000).astype(np.uint32)
                    same_join(r.join(name, probe, kind=kind, select=["label"], left_rows=left_rows,
                                     found=True),
                              w.join(name, probe, kind=kind, select=["label"], left_rows=left_rows,
                                     found=True), f"{context}, explicit left rows")
                    # count_only: the count, no pairs.
                    a = r.join(name, probe, kind=kind, count_only=True, found=True)
                    b = w.join(name, probe, kind=kind, count_only=True, found=True)
                    assert len(a) == 0 and a.count == b.count > 0, context
                    assert a.found.tolist() == b.found.tolist(), context
                    # A capacity below the pairs of one batch: the stable prefix.
                    whole_count = b.count
                    cap = max(1, whole_count // 3)
                    a = r.join(name, probe, kind=kind, select=select, capacity=cap,
                               batch_rows=len(probe), found=True)
                    b = w.join(name, probe, kind=kind, select=select, capacity=cap,
                               batch_rows=len(probe), found=True)
                    same_join(a, b, f"{context}, capacity {cap}")
                    assert a.overflow and a.count == whole_count and len(a) == cap, context


@pytest.mark.timeout(60)
@pytest.mark.parametrize("shards", [2, 3])
def test_join_stream_equals_one_server(cluster, start_gpujoind, shards):
    rng = np.random.default_rng(7)
    (_, router) = cluster(shards)
    whole = start_gpujoind()
    with gpujoin.Client(router.address) as r, gpujoin.Client(whole.address) as w:
        wait_serving(r)
        build = rng.integers(0, 300, size=900, dtype=np.uint32)
        build_both(r, w, "js", build, "uint32", duplicates="keep_all", chunk_rows=200,
                   payload=payload_of(len(build)))
        sizes = [7, 0, 500, 1, 300, 64]
        batches = [rng.integers(0, 400, size=k, dtype=np.uint32) for k in sizes]
        for kind in KINDS:
            a = list(r.join_stream("js", iter(batches), kind=kind, select=["n", "label"],
                                   found=True))
            b = list(w.join_stream("js", iter(batches), kind=kind, select=["n", "label"],
                                   found=True))
            assert len(a) == len(b) == len(sizes), kind
            for i, (x, y) in enumerate(zip(a, b)):
                same_join(x, y, f"{shards} shards, {kind}, stream batch {i}")
                assert len(x.found) == sizes[i]
            # The left rows number the keys across the batches.
            first = sum(sizes[:4])
            if kind in ("inner", "left"):
                assert a[4].left_rows.min() >= first, kind


def join_parts(responses):
    """[(batch_id, {batch: JoinBatchResult}, messages)] of a raw Join stream, each
    request's continued parts appended (pairs and found; no columns selected)."""
    out, whole, messages = [], None, 0
    for resp in responses:
        assert not resp.HasField("error"), resp.error
        messages += 1
        whole = whole if whole is not None else {}
        for part in resp.results:
            b = whole.setdefault(part.batch, pb.JoinBatchResult())
            if part.first_pair == 0:
                b.CopyFrom(part)
            else:
                b.left_rows += part.left_rows
                b.right_rows += part.right_rows
        if not resp.more:
            out.append((resp.batch_id, whole, messages))
            whole, messages = None, 0
    return out


@pytest.mark.timeout(60)
def test_a_request_of_several_left_batches_equals_one_server(cluster, start_gpujoind):
    """One JoinRequest holding three LeftBatches (first_left_row, explicit
    left_rows, a capacity of 1), raw: every batch's result is what one server
    answers (pairs, count, capacity, overflow, found, found/missing)."""
    rng = np.random.default_rng(11)
    (_, router) = cluster(3)
    whole = start_gpujoind()
    with gpujoin.Client(router.address) as r, gpujoin.Client(whole.address) as w:
        wait_serving(r)
        build = rng.integers(0, 200, size=600, dtype=np.uint32)
        build_both(r, w, "multi", build, "uint32", duplicates="keep_all", chunk_rows=150)
    left = [rng.integers(0, 260, size=k, dtype=np.uint32) for k in (40, 33, 25)]
    request = pb.JoinRequest(index="multi", batch_id=9, kind=pb.JOIN_KIND_INNER, batches=[
        pb.LeftBatch(keys=u32(left[0]), first_left_row=100, capacity=1000, want_found=True),
        pb.LeftBatch(keys=u32(left[1]), left_rows=u32(rng.permutation(33) + 7), capacity=1000,
                     want_found=True),
        pb.LeftBatch(keys=u32(left[2]), capacity=1, want_found=True)])
    got = {}
    for who, address in (("router", router.address), ("whole", whole.address)):
        conn = Connection(address)
        try:
            got[who] = join_parts(conn.stub.Join(iter([request]), timeout=30))
        finally:
            conn.close()
    ((bid_r, a, _),), ((bid_w, b, _),) = got["router"], got["whole"]
    assert bid_r == bid_w == 9
    assert sorted(a) == sorted(b) == [0, 1, 2]
    for i in range(3):
        x, y = a[i], b[i]
        assert x.left_rows == y.left_rows and x.right_rows == y.right_rows, f"batch {i}"
        assert (x.count, x.capacity, x.overflow) == (y.count, y.capacity, y.overflow), f"batch {i}"
        assert x.found == y.found, f"batch {i}"
        assert (x.statistics.found, x.statistics.missing) == \
            (y.statistics.found, y.statistics.missing), f"batch {i}"
    assert a[2].overflow and len(a[2].left_rows) == 4 and a[2].count > 1


@pytest.mark.timeout(90)
@pytest.mark.parametrize("small", ["router", "router and shards"])
def test_join_answers_continue_over_small_messages(cluster, start_gpujoind, small, monkeypatch):
    """A join answer of about 1 MB through a router limited to 64 KiB
    messages (the shards keeping their default 256 MiB, or limited alike): it
    comes in many parts (`more`), each within the limit the router advertises
    (the client's receive limit), and reassembles into what one server answers."""
    limit = 65536
    shard_flags = [f"--max-message-bytes={limit}"] if small == "router and shards" else []
    (_, router) = cluster(2, router_flags=[f"--max-message-bytes={limit}"],
                          shard_flags=shard_flags)
    whole = start_gpujoind()
    with gpujoin.Client(router.address) as r, gpujoin.Client(whole.address) as w:
        wait_serving(r)
        assert r.server_info().max_message_bytes == limit
        rng = np.random.default_rng(5)
        build = np.repeat(np.arange(500, dtype=np.uint32), 8)
        rng.shuffle(build)
        tag = [None if i % 13 == 0 else f"tag-{i:06d}" for i in range(len(build))]
        build_both(r, w, "cont", build, "uint32", duplicates="keep_all", chunk_rows=1000,
                   payload={"tag": tag})
        left = rng.integers(0, 600, size=4000, dtype=np.uint32)
        seen = []
        stream = r._stream

        def recording(name, requests, finishes=lambda m: True, timeout=None):
            for m in stream(name, requests, finishes, timeout):
                if name == "Join":
                    seen.append(m.more)
                yield m

        monkeypatch.setattr(r, "_stream", recording)
        for kind in ("inner", "left"):
            seen.clear()
            a = r.join("cont", left, kind=kind, select=["tag"], batch_rows=len(left),
                       found=True)
            b = w.join("cont", left, kind=kind, select=["tag"], batch_rows=len(left),
                       found=True)
            assert a.count > 25000, kind
            same_join(a, b, f"{small} limited, {kind}")
            assert len(seen) >= 5 and all(seen[:-1]) and not seen[-1], (kind, len(seen))


# ---------------------------------------------------------------- Aggregate

def same_aggregate(a, b, op, kind, context):
    """Two AggregateResults agree: counts and contributing rows exactly, integer
    results exactly, float sums/means within 1e-5 (float32) / 1e-12 (float64),
    min/max exactly (NaN, or masked, for the same empty groups)."""
    assert a.rows == b.rows, context
    if a.contributing_rows is not None or b.contributing_rows is not None:
        np.testing.assert_array_equal(a.contributing_rows, b.contributing_rows, err_msg=context)
        assert a.contributing_rows.dtype == b.contributing_rows.dtype, context
    if op == "count":
        np.testing.assert_array_equal(a.counts, b.counts, err_msg=context)
        return
    assert a.values.dtype == b.values.dtype, context
    ma, mb = np.ma.getmaskarray(a.values), np.ma.getmaskarray(b.values)
    np.testing.assert_array_equal(ma, mb, err_msg=f"{context}: null groups")
    da, db = np.ma.getdata(a.values), np.ma.getdata(b.values)
    if op in ("min", "max") or (kind in "iu" and op == "sum"):
        np.testing.assert_array_equal(da, db, err_msg=context)
    elif kind in "iu":  # an integer mean: the exact sum / the count, in float64
        np.testing.assert_array_equal(da, db, err_msg=context)
    else:
        rtol = 1e-5 if a.values.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(da, db, rtol=rtol, equal_nan=True, err_msg=context)
    if a.overflow is not None or b.overflow is not None:
        np.testing.assert_array_equal(a.overflow, b.overflow, err_msg=f"{context}: overflow")


@pytest.mark.timeout(90)
@pytest.mark.parametrize("shards", [1, 2, 3])
def test_aggregates_equal_one_server(cluster, start_gpujoind, shards):
    rng = np.random.default_rng(20 + shards)
    (_, router) = cluster(shards)
    whole = start_gpujoind()
    n, groups = 20_000, 37
    keys = rng.integers(0, groups + 3, size=n, dtype=np.uint32)  # keys >= groups: ignored
    keys[:50] = 36  # group 36 only in the first batch
    keys[(keys == 35)] = 34  # group 35: empty
    mask = rng.random(n) < 0.8
    null = rng.random(n) < 0.1
    f = (rng.random(n) * 100 + 0.5).astype(np.float32)
    f[rng.choice(n, 20, replace=False)] = np.nan  # non-finite values are ignored
    f[rng.choice(n, 20, replace=False)] = np.inf
    inputs = {"float32": f, "float32 nulls": np.ma.MaskedArray(f, mask=null)}
    big = 1 << 40
    for dtype in (np.int32, np.int64, np.uint32, np.uint64):
        info = np.iinfo(dtype)
        v = rng.integers(max(info.min, -big), min(info.max, big), size=n,
                         endpoint=True).astype(dtype)
        inputs[np.dtype(dtype).name] = np.ma.MaskedArray(v, mask=null)
    inputs["float64"] = np.ma.MaskedArray(rng.random(n) * 1e6, mask=null)
    with gpujoin.Client(router.address) as r, gpujoin.Client(whole.address) as w:
        wait_serving(r)
        for batch_rows in (None, 3001):
            context = f"{shards} shards, batches of {batch_rows}"
            a = r.aggregate("count", keys, groups=groups, mask=mask, contributing_rows=True,
                            batch_rows=batch_rows)
            b = w.aggregate("count", keys, groups=groups, mask=mask, contributing_rows=True,
                            batch_rows=batch_rows)
            same_aggregate(a, b, "count", "u", f"{context}, count")
            assert a.counts[35] == 0 and a.counts.sum() == (mask & (keys < groups)).sum()
            for label, v in inputs.items():
                for op in ("sum", "min", "max", "mean"):
                    c = f"{context}, {op} of {label}"
                    for m in (None, mask):
                        a = r.aggregate(op, keys, v, groups=groups, mask=m, contributing_rows=True,
                                        batch_rows=batch_rows)
                        b = w.aggregate(op, keys, v, groups=groups, mask=m, contributing_rows=True,
                                        batch_rows=batch_rows)
                        same_aggregate(a, b, op, np.asarray(v).dtype.kind, c)
                        assert a.contributing_rows[35] == 0, c
        # Zero rows: every group empty.
        a = r.aggregate("count", np.zeros(0, np.uint32), groups=4)
        b = w.aggregate("count", np.zeros(0, np.uint32), groups=4)
        assert a.counts.tolist() == b.counts.tolist() == [0, 0, 0, 0]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("shards", [2, 3])
def test_integer_sum_overflow_equals_one_server(cluster, start_gpujoind, shards):
    """Group 1's sum passes int64 within a batch (flagged, the low 64 bits);
    group 2's passes it only over two batches of 5 rows (flagged from then on),
    its rows maybe on different shards; groups 0 and 3 stay in range."""
    (_, router) = cluster(shards)
    whole = start_gpujoind()
    p = 1 << 62
    keys = np.array([0, 1, 1, 2, 0, 2, 1, 0, 3, 3, 2], np.uint32)
    vals = np.array([5, p, p, p, -9, p, 7, 3, 4, -2, 1], np.int64)
    with gpujoin.Client(router.address) as r, gpujoin.Client(whole.address) as w:
        wait_serving(r)
        for batch_rows in (None, 5):
            for op in ("sum", "mean"):
                a = r.aggregate(op, keys, vals, groups=4, contributing_rows=True,
                                batch_rows=batch_rows)
                b = w.aggregate(op, keys, vals, groups=4, contributing_rows=True,
                                batch_rows=batch_rows)
                same_aggregate(a, b, op, "i", f"{shards} shards, {op}, batches of {batch_rows}")
                assert a.overflow.tolist() == [False, True, True, False], (op, a.overflow)
            u = np.abs(vals).astype(np.uint64) * np.uint64(2)  # 2^63 each: passes uint64
            a = r.aggregate("sum", keys, u, groups=4, batch_rows=batch_rows)
            b = w.aggregate("sum", keys, u, groups=4, batch_rows=batch_rows)
            same_aggregate(a, b, "sum", "u", f"{shards} shards, uint64 sum")
            assert a.overflow[1]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("shards", [2, 3])
def test_a_sum_that_passes_int64_and_comes_back_is_not_flagged(cluster, start_gpujoind, shards):
    """docs/api.md: a group is flagged when its exact sum does not fit int64.
    One batch whose group 0 adds +2^62 three times, then -2^62 three times
    (exact sum 0): one server does not flag it, whatever rows a shard gets."""
    (_, router) = cluster(shards)
    whole = start_gpujoind()
    p = 1 << 62
    keys = np.zeros(6, np.uint32)
    vals = np.array([p, p, p, -p, -p, -p], np.int64)
    with gpujoin.Client(router.address) as r, gpujoin.Client(whole.address) as w:
        wait_serving(r)
        for op in ("sum", "mean"):
            a = r.aggregate(op, keys, vals, groups=1)
            b = w.aggregate(op, keys, vals, groups=1)
            assert b.overflow.tolist() == [False] and b.values.tolist() == [0], (op, b)
            assert a.overflow.tolist() == b.overflow.tolist(), \
                f"{shards} shards, {op}: overflow {a.overflow} (router) != {b.overflow} (one server)"
            assert a.values.tolist() == b.values.tolist(), (op, a.values, b.values)


def aggregate_requests():
    """Bad Aggregate requests and the field each one's error names."""
    ok_keys = u32([0, 1, 1])
    return [
        ("groups", [pb.AggregateRequest(op=pb.AGGREGATE_OP_SUM, groups=0, keys=ok_keys,
                                        values=f32([1, 2, 3]))]),
        ("values", [pb.AggregateRequest(op=pb.AGGREGATE_OP_SUM, groups=2, keys=ok_keys)]),
        ("values", [pb.AggregateRequest(op=pb.AGGREGATE_OP_SUM, groups=2, keys=ok_keys,
                                        values=f32([1, 2]))]),
        ("values", [pb.AggregateRequest(op=pb.AGGREGATE_OP_COUNT, groups=2, keys=ok_keys,
                                        values=f32([1, 2, 3]))]),
        ("mask", [pb.AggregateRequest(op=pb.AGGREGATE_OP_COUNT, groups=2, keys=ok_keys,
                                      mask=u32([1, 1]))]),
        ("typed_values", [pb.AggregateRequest(
            op=pb.AGGREGATE_OP_SUM, groups=2, keys=ok_keys,
            typed_values=pb.Column(type=pb.COLUMN_TYPE_INT64, length=2,
                                   data=np.array([1, 2], "<i8").tobytes()))]),
    ]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("shards", [1, 3])
def test_bad_aggregate_requests_are_refused_as_one_server_refuses_them(cluster, start_gpujoind,
                                                                       shards):
    (_, router) = cluster(shards)
    whole = start_gpujoind()
    with gpujoin.Client(router.address) as r:
        wait_serving(r)
    conns = [Connection(router.address), Connection(whole.address)]
    try:
        for field, requests in aggregate_requests():
            a = raw_error(conns[0].stub.Aggregate, requests)
            b = raw_error(conns[1].stub.Aggregate, requests)
            assert b is not None and field in b.message, (field, b)
            named = b.message.split(":")[0]  # the field one server names
            assert a is not None, f"{field}: the router answered {requests[0]}"
            assert a.code == b.code, (field, str(a), str(b))
            assert named in a.message, (field, str(a), str(b))
        # After a refused batch the stream goes on: a good batch is still answered.
        good = pb.AggregateRequest(op=pb.AGGREGATE_OP_COUNT, groups=2, keys=u32([0, 1, 1]),
                                   batch_id=1)
        answers = list(conns[0].stub.Aggregate(iter([aggregate_requests()[0][1][0], good]),
                                               timeout=30))
        assert len(answers) == 2 and answers[0].HasField("error")
        assert not answers[1].HasField("error")
        assert np.frombuffer(answers[1].total_counts, "<u4").tolist() == [1, 2]
    finally:
        for c in conns:
            c.close()


# ---------------------------------------------------------------- Mutate

def key_pool(rng, key_type, size):
    if key_type == "string":
        return [f"sku-{int(k)}" for k in rng.choice(10**6, size, replace=False)]
    if key_type == "uint32":
        return rng.choice(2**32 - 2, size, replace=False).astype(np.uint32)
    return rng.integers(0, 2**64 - 2, size, dtype=np.uint64, endpoint=False)


def pick(pool, idx):
    return [pool[i] for i in idx] if isinstance(pool, list) else pool[idx]


def mutation_payload(rng, rows):
    return {"qty": rng.integers(-1000, 1000, rows).astype(np.int64),
            "note": [None if rng.random() < 0.15 else f"n{int(rng.integers(1000))}"
                     for _ in range(rows)]}


def same_index(r, w, name, pool, duplicates, context):
    """Lookups (values, found, match counts, payload) of every pool key agree,
    and for keep_all the whole groups (an inner join), and the described rows."""
    a = r.lookup(name, pool, select=["qty", "note"], match_counts=True)
    b = w.lookup(name, pool, select=["qty", "note"], match_counts=True)
    same_lookup(a, b, f"{context}: lookup")
    if duplicates == "keep_all":
        same_join(r.join(name, pool, select=["qty", "note"]),
                  w.join(name, pool, select=["qty", "note"]), f"{context}: groups")
    dr, dw = r.describe(name), w.describe(name)
    assert (dr.rows, dr.statistics.unique_keys) == (dw.rows, dw.statistics.unique_keys), context


@pytest.mark.timeout(120)
@pytest.mark.parametrize("shards", [1, 2, 3])
def test_mutations_equal_one_server(cluster, start_gpujoind, shards):
    rng = np.random.default_rng(40 + shards)
    (_, router) = cluster(shards)
    whole = start_gpujoind()
    with gpujoin.Client(router.address) as r, gpujoin.Client(whole.address) as w:
        wait_serving(r)
        for key_type in ("uint32", "uint64", "string"):
            for duplicates in ("lowest_row", "keep_all"):
                pool = key_pool(rng, key_type, 500)
                rows = 800
                keys = pick(pool, rng.integers(0, 300, rows))
                vals = rng.integers(0, 2**31, rows).astype(np.uint32)
                name = f"m_{key_type}_{duplicates}"
                info, _ = build_both(r, w, name, keys, key_type, values=vals,
                                     payload=mutation_payload(rng, rows), duplicates=duplicates,
                                     chunk_rows=200)
                assert info.explicit_values
                same_index(r, w, name, pool, duplicates, f"{shards} shards, {name}, built")
                for step, what in enumerate(["upsert", "delete", "both", "upsert", "both",
                                             "delete", "upsert"]):
                    context = f"{shards} shards, {name}, step {step} ({what})"
                    kw = {}
                    if what in ("upsert", "both"):
                        k = int(rng.integers(1, 120))
                        kw["upsert_keys"] = pick(pool, rng.integers(0, len(pool), k))  # repeats
                        kw["values"] = rng.integers(0, 2**31, k).astype(np.uint32)
                        kw["payload"] = mutation_payload(rng, k)
                    if what in ("delete", "both"):
                        d = rng.integers(0, len(pool), int(rng.integers(1, 80)))  # repeats
                        kw["delete_keys"] = pick(pool, d)
                    if what == "both":  # a key deleted and upserted in one batch
                        again = pick(pool, d[:1])
                        kw["upsert_keys"] = (kw["upsert_keys"] + again if isinstance(pool, list)
                                             else np.concatenate([kw["upsert_keys"], again]))
                        kw["values"] = np.append(kw["values"], np.uint32(77))
                        kw["payload"] = {"qty": np.append(kw["payload"]["qty"], 77),
                                         "note": kw["payload"]["note"] + ["again"]}
                    a = r.mutate(name, **kw)
                    b = w.mutate(name, **kw)
                    assert a.requests == b.requests == 1, context
                    for c in COUNTS:
                        assert getattr(a, c) == getattr(b, c), f"{context}: {c} " \
                            f"{getattr(a, c)} (router) != {getattr(b, c)} (one server)"
                    same_index(r, w, name, pool, duplicates, context)


def upsert_request(index, keys, payload, delete_keys=None):
    """A raw MutateRequest upserting `keys` (uint32) with `payload` (qty, note)
    and no values, and deleting `delete_keys`."""
    n = len(keys)
    r = pb.MutateRequest(index=index, batch_id=0, keys=u32(keys), payload=[
        gcolumns.encode_column("qty", payload["qty"], "int64").chunk(pb, 0, n),
        gcolumns.encode_column("note", payload["note"], "string").chunk(pb, 0, n)])
    if delete_keys is not None:
        r.delete_keys.CopyFrom(u32(delete_keys))
    return r


@pytest.fixture()
def row_id_indexes(cluster, start_gpujoind):
    """row_id_indexes(shards): a router over `shards` shards and one server, both
    holding rid_lowest_row and rid_keep_all, built without values (row IDs:
    through the router the router's global rows); (router client, server
    client, {name: the router's IndexInfo}, key pool, rng)."""
    clients = []

    def make(shards):
        rng = np.random.default_rng(60 + shards)
        (_, router) = cluster(shards)
        whole = start_gpujoind()
        r, w = gpujoin.Client(router.address), gpujoin.Client(whole.address)
        clients.extend([r, w])
        wait_serving(r)
        pool = key_pool(rng, "uint32", 400)
        keys = pick(pool, rng.integers(0, 250, 600))
        infos = {}
        for duplicates in ("lowest_row", "keep_all"):
            name = f"rid_{duplicates}"
            infos[name], _ = build_both(r, w, name, keys, "uint32", duplicates=duplicates,
                                        payload=mutation_payload(np.random.default_rng(1),
                                                                 len(keys)))
            assert not infos[name].explicit_values
        return r, w, infos, pool, rng, router

    yield make
    for c in clients:
        c.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("shards", [1, 2])
def test_upserts_without_values_are_unimplemented(row_id_indexes, shards):
    """An upsert without values on a row-ID index built through the router
    (which would need the next row IDs over every shard) is UNIMPLEMENTED
    naming values, and its batch changes nothing, with or without deletes
    in it (raw requests, as any client may send them)."""
    r, w, infos, pool, rng, router = row_id_indexes(shards)
    conn = Connection(router.address)
    try:
        for name in infos:
            duplicates = name[len("rid_"):]
            for delete in (None, pool[:30]):
                e = raw_error(conn.stub.Mutate, [upsert_request(
                    name, pool[100:140], mutation_payload(rng, 40), delete)])
                context = f"{shards} shards, {name}, deletes {delete is not None}"
                assert e is not None, f"{context}: an upsert without values was applied"
                assert e.code.name == "UNIMPLEMENTED", (context, str(e))
                assert "values" in e.message, (context, str(e))
                same_index(r, w, name, pool, duplicates, f"{context}: after the refused upsert")
    finally:
        conn.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("shards", [1, 2])
def test_deletes_on_a_row_id_index_equal_one_server(row_id_indexes, shards):
    r, w, infos, pool, rng, _ = row_id_indexes(shards)
    for name in infos:
        duplicates = name[len("rid_"):]
        for step in range(3):
            dels = pick(pool, rng.integers(0, len(pool), 60))
            a, b = r.delete(name, dels), w.delete(name, dels)
            for c in COUNTS:
                assert getattr(a, c) == getattr(b, c), f"{name}, delete {step}: {c}"
            assert a.deleted_keys > 0
            same_index(r, w, name, pool, duplicates, f"{name}: after delete {step}")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("shards", [1, 2])
def test_a_row_id_index_is_described_as_built(row_id_indexes, shards):
    """DescribeIndex through the router says what BuildIndex said: no
    explicit values. The client reads it before an upsert, so its upsert
    without values reaches the router and is UNIMPLEMENTED naming values."""
    r, w, infos, pool, rng, _ = row_id_indexes(shards)
    for name, info in infos.items():
        described = r.describe(name)
        assert described.explicit_values == info.explicit_values == \
            w.describe(name).explicit_values, \
            (f"{shards} shards, {name}: DescribeIndex through the router says explicit_values="
             f"{described.explicit_values}, BuildIndex said {info.explicit_values}")
        with pytest.raises(gpujoin.Error) as e:
            r.upsert(name, pool[100:140], payload=mutation_payload(rng, 40))
        assert e.value.code.name == "UNIMPLEMENTED" and "values" in e.value.message, e.value
        same_index(r, w, name, pool, name[len("rid_"):], f"{name}: after the client's upsert")


# ---------------------------------------------------------------- errors

def join_request(index, keys):
    return pb.JoinRequest(index=index, batch_id=0, batches=[pb.LeftBatch(keys=u32(keys))])


def mutate_request(index, keys):
    return pb.MutateRequest(index=index, batch_id=0, keys=u32(keys), values=u32(keys))


@pytest.mark.timeout(60)
def test_an_unknown_index_is_not_found(cluster, start_gpujoind):
    (_, router) = cluster(2)
    whole = start_gpujoind()
    with gpujoin.Client(router.address) as r:
        wait_serving(r)
        r.build_index("known", np.arange(10, dtype=np.uint32))
    conns = [Connection(router.address), Connection(whole.address)]
    try:
        for rpc, request in (("Join", join_request("nope", [1, 2])),
                             ("Mutate", mutate_request("nope", [1, 2])),
                             ("Mutate", pb.MutateRequest(index="nope", delete_keys=u32([3])))):
            a = raw_error(getattr(conns[0].stub, rpc), [request])
            b = raw_error(getattr(conns[1].stub, rpc), [request])
            assert b is not None and b.code.name == "NOT_FOUND", (rpc, b)
            assert a is not None and a.code.name == "NOT_FOUND", (rpc, a)
            assert "nope" in a.message, (rpc, a.message)
        # The known index still answers on the same router.
        (answer,) = conns[0].stub.Join(iter([join_request("known", [3, 11])]), timeout=30)
        assert not answer.HasField("error")
        assert np.frombuffer(answer.results[0].left_rows, "<u4").tolist() == [0]
    finally:
        for c in conns:
            c.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("n", [1, 2])
def test_a_shard_down_fails_join_aggregate_and_mutate_naming_it(cluster, n):
    (shards, router) = cluster(n)
    with gpujoin.Client(router.address) as r:
        wait_serving(r)
        keys = np.arange(1000, dtype=np.uint32)
        r.build_index("down", keys, values=keys)
        assert r.join("down", keys).count == 1000
        assert r.aggregate("count", keys % 4, groups=4).counts.tolist() == [250] * 4
        assert r.upsert("down", [5000], values=[1]).inserted_keys == 1
        last = n - 1
        shards[last].stop(signal.SIGKILL)
        conn = Connection(router.address)
        try:
            for rpc, request in (
                    ("Join", join_request("down", keys)),
                    ("Mutate", mutate_request("down", keys + 10000)),
                    ("Aggregate", pb.AggregateRequest(op=pb.AGGREGATE_OP_COUNT, groups=4,
                                                      keys=u32(keys % 4)))):
                e = raw_error(getattr(conn.stub, rpc), [request])
                assert e is not None, rpc
                assert e.code.name == "UNAVAILABLE", (rpc, e)
                assert f"shard {last} ({shards[last].address})" in e.message, (rpc, e)
        finally:
            conn.close()
