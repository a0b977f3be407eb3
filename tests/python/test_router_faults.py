"""gpujoin-router when shards fail or come back ($GPUJOIN_TEST_BACKEND, loopback;
docs/operations.md "Sharding"), and the measures its aggregate plans rely on.

Versions: a shard restarted without its data leaves the index on one shard of
two (ListIndexes ABORTED naming it); a rebuild through a new router over the
same shards gives every shard's part one version (IndexSpec.min_version, the
router's clock) and answers as one gpujoind. A shard that stops answering
(SIGSTOP) fails Lookup, Join and Query streams and unary calls UNAVAILABLE
naming it within --shard-timeout, and the router serves again once it answers.
Measure.finite_only counts a float column's finite non-null values and is
refused INVALID_ARGUMENT anywhere else. A row-ID index built through the
router (IndexSpec.router_row_ids) keeps describing itself as built without
explicit values through SaveIndex/LoadIndex and a warm start of every shard.
An aggregate plan over a string payload column with float means (NaN, +-inf,
nulls) and integer sums through three shards equals one gpujoind.
"""
import math
import re
import os
import signal
import threading
import time

import grpc
import numpy as np
import pytest

import gpujoin
from gpujoin._proto import pb
from conftest import Router, wait_serving
from query_columns import encode
from query_support import Connection, answers
from test_router import same_lookup, values
# The fixtures of test_router_ops.py (every process a test started stopped at once).
from test_router_ops import (cluster, join_request, processes, raw_error,  # noqa: F401
                             start_gpujoind, u32)

T = pb  # column type constants


def router_binary(pytestconfig):
    return os.path.join(os.path.dirname(pytestconfig.getoption("--gpujoind")), "gpujoin-router")


def lookup_request(index, keys):
    return pb.LookupRequest(index=index, batch_id=0, keys=u32(keys))


def query_request(index, keys):
    plan = pb.Plan(steps=[pb.PlanStep(lookup=pb.LookupStep(index=index, key=["k"]))])
    return pb.QueryRequest(batch_id=0, plan=plan,
                           columns=[encode("k", T.COLUMN_TYPE_UINT32, list(map(int, keys)))])


def query_error(conn, requests):
    """The error of a raw Query stream (the first in-band error, else the
    call's status) as (code name, message), or None; and its answers."""
    try:
        got = answers(conn.stub.Query(iter(requests), timeout=30))
    except grpc.RpcError as e:
        return (e.code().name, e.details()), []
    codes = {c.value[0]: c.name for c in grpc.StatusCode}
    for a in got:
        if a.error is not None:
            return (codes[a.error.code], a.error.message), got
    return None, got


# ---------------------------------------------------------------- versions

@pytest.mark.timeout(60)
def test_a_rebuild_after_a_shard_restart_gives_every_shard_one_version(
        pytestconfig, cluster, start_gpujoind, processes):
    """Regression (IndexSpec.min_version): a shard restarted without a data
    dir counts its builds from 1 again; a rebuild through the router must
    still leave both shards' parts at one version, or the index stays ABORTED
    ("serves version") for good."""
    (shards, router) = cluster(2)
    whole = start_gpujoind()
    rng = np.random.default_rng(7)
    keys = rng.integers(0, 5000, 3000).astype(np.uint32)
    probe = rng.integers(0, 6000, 4000).astype(np.uint32)
    payload = {"n": np.arange(len(keys), dtype=np.int64),
               "label": [None if i % 9 == 0 else f"l{i % 13}" for i in range(len(keys))]}
    with gpujoin.Client(router.address) as r:
        wait_serving(r)
        # Several builds, so that shard 0's own counter is well past a fresh shard's.
        for _ in range(3):
            first = r.build_index("vr", keys, payload=payload, replace=True, chunk_rows=700)
    # Shard 1 dies and comes back empty, on another port, under a new router.
    shards[1].stop(signal.SIGKILL)
    new1 = start_gpujoind("--shard=1/2")
    router2 = Router(router_binary(pytestconfig), [shards[0].address, new1.address])
    processes.append(router2)
    with gpujoin.Client(router2.address) as r, gpujoin.Client(whole.address) as w:
        wait_serving(r)
        with pytest.raises(gpujoin.Error) as e:
            r.list()
        assert e.value.code.name == "ABORTED", e.value
        assert 'index "vr" is on 1 of 2 shards' in e.value.message, e.value.message

        info = r.build_index("vr", keys, payload=payload, replace=True, chunk_rows=700)
        w.build_index("vr", keys, payload=payload, replace=True, chunk_rows=700)
        assert info.rows == len(keys)
        assert info.version > first.version, (info.version, first.version)
        versions = []
        for s in (shards[0], new1):
            with gpujoin.Client(s.address) as c:
                versions.append(c.describe("vr").version)
        assert versions[0] == versions[1] == info.version, \
            f"after the rebuild shard 0 serves version {versions[0]}, the restarted shard 1 " \
            f"{versions[1]}, the router's build answered {info.version}"
        assert r.describe("vr").version == info.version
        assert [i.name for i in r.list()] == ["vr"]
        for batch_rows in (None, 333):
            same_lookup(r.lookup("vr", probe, select=["n", "label"], match_counts=True,
                                 batch_rows=batch_rows),
                        w.lookup("vr", probe, select=["n", "label"], match_counts=True,
                                 batch_rows=batch_rows),
                        f"after the rebuild, batches of {batch_rows}")


# ---------------------------------------------------------------- a slow shard

@pytest.mark.timeout(60)
@pytest.mark.parametrize("n", [1, 2])
def test_a_shard_that_stops_answering_fails_calls_within_the_shard_timeout(cluster, n):
    """With 2 shards every stream is split; with 1 it is forwarded as it is
    (Passthrough), which has its own watchdog."""
    (shards, router) = cluster(n, router_flags=("--shard-timeout=1",))
    keys = np.arange(2000, dtype=np.uint32)
    stopped = shards[n - 1]
    slow = f"shard {n - 1} ({stopped.address})"
    with gpujoin.Client(router.address) as r:
        wait_serving(r)
        r.build_index("slow", keys, values=keys, payload={"v": keys.astype(np.int64) * 3})
        conn = Connection(router.address)
        os.kill(stopped.proc.pid, signal.SIGSTOP)
        problems = []
        try:
            # Raw streams: every batch goes to every shard; the late one is cut off.
            agg = pb.Plan(steps=[pb.PlanStep(aggregate=pb.AggregateStep(
                measures=[pb.Measure(op=pb.AGGREGATE_OP_COUNT)]))])
            streams = {
                "Lookup stream": lambda: raw_error(conn.stub.Lookup,
                                                   [lookup_request("slow", keys)]),
                "Join stream": lambda: raw_error(conn.stub.Join, [join_request("slow", keys)]),
                "Query stream (aggregate plan)": lambda: query_error(conn, [pb.QueryRequest(
                    batch_id=0, plan=agg, columns=[encode("k", T.COLUMN_TYPE_UINT32, [1, 2])])])[0],
                "Query stream (lookup plan)": lambda: query_error(
                    conn, [query_request("slow", keys)])[0],
            }
            for rpc, call in streams.items():
                start = time.monotonic()
                e = call()
                took = time.monotonic() - start
                if e is None:
                    problems.append(f"{rpc}: answered while {slow} was stopped")
                    continue
                code, message = (e.code.name, e.message) if isinstance(e, gpujoin.Error) else e
                if code != "UNAVAILABLE" or slow not in message or \
                        "--shard-timeout" not in message or took > 5:
                    problems.append(f"{rpc}: {code} {message!r} after {took:.1f} s; expected "
                                    f"UNAVAILABLE naming {slow} and --shard-timeout within 5 s")
            # The client's calls: a unary DescribeIndex, a Lookup (its describe
            # first) and a Query with a lookup step.
            for what, call in (("describe", lambda: r.describe("slow")),
                               ("lookup", lambda: r.lookup("slow", keys, select=["v"])),
                               ("join", lambda: r.join("slow", keys)),
                               ("query", lambda: r.query({"k": keys}).lookup("slow", key="k")
                                .run())):
                start = time.monotonic()
                try:
                    call()
                    problems.append(f"client {what}: answered while {slow} was stopped")
                    continue
                except gpujoin.Error as e:
                    code, message = e.code.name, e.message
                took = time.monotonic() - start
                if code != "UNAVAILABLE" or slow not in message or took > 5:
                    problems.append(f"client {what}: {code} {message!r} after {took:.1f} s; "
                                    f"expected UNAVAILABLE naming {slow} within 5 s")
        finally:
            os.kill(stopped.proc.pid, signal.SIGCONT)
        # The shard answers again: so does the router.
        deadline = time.monotonic() + 10
        while True:
            try:
                got = r.lookup("slow", keys, select=["v"])
                break
            except gpujoin.Unavailable:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        assert got.found.all() and got.values.tolist() == keys.tolist()
        assert values(got.columns["v"]) == (keys.astype(np.int64) * 3).tolist()
        assert raw_error(conn.stub.Join, [join_request("slow", keys[:10])]) is None
        err, got = query_error(conn, [query_request("slow", keys[:10])])
        assert err is None and got[0].columns[0] == list(range(10)), err
        assert r.describe("slow").rows == len(keys)
        conn.close()
    assert not problems, f"while {slow} was stopped (SIGSTOP, --shard-timeout=1):\n" + \
        "\n".join(problems)


@pytest.mark.timeout(60)
def test_one_shard_that_stops_after_the_half_close_fails_within_the_shard_timeout(cluster):
    """One shard (Passthrough): an aggregate plan's groups come after the
    client's half-close; a shard that stops then fails the call UNAVAILABLE
    within --shard-timeout instead of holding it open."""
    (shards, router) = cluster(1, router_flags=("--shard-timeout=1",))
    conn = Connection(router.address)
    agg = pb.Plan(steps=[pb.PlanStep(aggregate=pb.AggregateStep(
        measures=[pb.Measure(op=pb.AGGREGATE_OP_COUNT)]))])
    answered = threading.Event()

    def requests():
        yield pb.QueryRequest(batch_id=0, plan=agg,
                              columns=[encode("k", T.COLUMN_TYPE_UINT32, [1, 2, 3])])
        assert answered.wait(10), "the batch was not answered"
        os.kill(shards[0].proc.pid, signal.SIGSTOP)  # then the half-close

    start = time.monotonic()
    try:
        for _ in conn.stub.Query(requests(), timeout=30):
            answered.set()
        outcome = ("OK", "")
    except grpc.RpcError as e:
        outcome = (e.code().name, e.details())
    finally:
        os.kill(shards[0].proc.pid, signal.SIGCONT)
        conn.close()
    took = time.monotonic() - start
    assert answered.is_set()
    assert outcome[0] == "UNAVAILABLE" and "--shard-timeout" in outcome[1] and \
        shards[0].address in outcome[1] and took < 6, (outcome, took)


@pytest.mark.timeout(60)
def test_a_client_that_reads_slowly_is_not_a_slow_shard(cluster):
    """One shard (Passthrough): answers held back because the client does not
    read them do not count against --shard-timeout."""
    (shards, router) = cluster(1, router_flags=("--shard-timeout=1",))
    keys = np.arange(1 << 16, dtype=np.uint32)
    with gpujoin.Client(router.address) as r:
        wait_serving(r)
        r.build_index("held", keys, values=keys)
    conn = Connection(router.address)
    batches = 40  # 40 x 64K keys: answers of 20 MiB, far beyond the transport's windows
    requests = [pb.LookupRequest(index="held", batch_id=b, keys=u32(keys))
                for b in range(batches)]
    call = conn.stub.Lookup(iter(requests), timeout=30)
    time.sleep(2.5)  # nothing read: the answers wait in the router and the shard
    got = list(call)
    conn.close()
    errors = [a.error.message for a in got if a.HasField("error")]
    assert not errors, errors[:3]
    assert [a.batch_id for a in got] == list(range(batches))


# ---------------------------------------------------------------- finite_only

FLOATS = [1.5, math.nan, math.inf, -math.inf, None, 2.5, None, -3.0, math.nan, 4.0]
GROUPS = [0, 0, 1, 1, 0, 1, 1, 0, 2, 0]


def finite_plan(group_by, measures):
    return pb.Plan(steps=[pb.PlanStep(aggregate=pb.AggregateStep(group_by=group_by,
                                                                 measures=measures))])


def float_batches(t):
    """FLOATS (as type t) and GROUPS in two batches, with an INT64 column i."""
    names = ["g", "x", "i"]
    types = [T.COLUMN_TYPE_INT32, t, T.COLUMN_TYPE_INT64]
    cols = [GROUPS, FLOATS, [None if v is None else j for j, v in enumerate(FLOATS)]]
    cut = 4
    return [[encode(n, ty, c[a:b]) for n, ty, c in zip(names, types, cols)]
            for a, b in ((0, cut), (cut, len(FLOATS)))]


def target_address(request, where):
    """The address of one gpujoind (the session's) or of a router over two shards."""
    if where == "gpujoind":
        return request.getfixturevalue("server").address
    (_, router) = request.getfixturevalue("cluster")(2)
    return router.address


@pytest.mark.timeout(60)
@pytest.mark.parametrize("where", ["gpujoind", "router"])
@pytest.mark.parametrize("t", [T.COLUMN_TYPE_FLOAT64, T.COLUMN_TYPE_FLOAT32],
                         ids=["float64", "float32"])
def test_finite_only_counts_the_finite_values(request, where, t):
    """count(x) with finite_only counts x's finite non-null values (those SUM
    and MEAN take), without it the non-null ones; one gpujoind, and a router
    (which forwards the measure to its shards and adds their counts)."""
    conn = Connection(target_address(request, where))
    rel = 1e-12 if t == T.COLUMN_TYPE_FLOAT64 else 1e-6   # a float32 column's mean: binary32
    try:
        for group_by in ([], ["g"]):
            plan = finite_plan(group_by, [
                pb.Measure(op=pb.AGGREGATE_OP_COUNT, column="x", name="finite",
                           finite_only=True),
                pb.Measure(op=pb.AGGREGATE_OP_COUNT, column="x", name="nonnull"),
                pb.Measure(op=pb.AGGREGATE_OP_COUNT, name="rows"),
                pb.Measure(op=pb.AGGREGATE_OP_SUM, column="x", name="sum"),
                pb.Measure(op=pb.AGGREGATE_OP_MEAN, column="x", name="mean")])
            b0, b1 = float_batches(t)
            got = conn.query([pb.QueryRequest(batch_id=1, plan=plan, columns=b0),
                              pb.QueryRequest(batch_id=2, columns=b1)])
            final = got[-1]
            assert final.error is None and final.final, final.describe()
            out = dict(zip(final.names, final.columns))
            assert final.types[final.names.index("finite")] == T.COLUMN_TYPE_UINT64
            if not group_by:
                assert out["finite"] == [4], final.describe()    # 1.5, 2.5, -3.0, 4.0
                assert out["nonnull"] == [8], final.describe()
                assert out["rows"] == [10]
                assert out["sum"] == [5.0] and out["mean"] == [1.25], final.describe()
            else:
                # Groups in first-row order: 0 (1.5 nan None -3.0 4.0), 1 (inf -inf 2.5
                # None), 2 (nan).
                assert out["g"] == [0, 1, 2], final.describe()
                assert out["finite"] == [3, 1, 0], final.describe()
                assert out["nonnull"] == [4, 3, 1], final.describe()
                assert out["rows"] == [5, 4, 1], final.describe()
                assert out["sum"][:2] == [2.5, 2.5], final.describe()
                assert out["mean"][:2] == pytest.approx([2.5 / 3, 2.5], rel=rel), \
                    final.describe()
                assert out["mean"][2] is None, final.describe()
                # The mean is the sum over the finite count.
                for s, n, m in zip(out["sum"], out["finite"], out["mean"]):
                    if n:
                        assert m == pytest.approx(s / n, rel=rel)
    finally:
        conn.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("where", ["gpujoind", "router"])
def test_finite_only_elsewhere_is_invalid_argument(request, where):
    """finite_only on anything but COUNT of a float column is refused
    INVALID_ARGUMENT naming the field, by one gpujoind and by a router alike."""
    conn = Connection(target_address(request, where))
    problems = []
    try:
        for what, m in (
                ("sum", pb.Measure(op=pb.AGGREGATE_OP_SUM, column="x", finite_only=True)),
                ("mean", pb.Measure(op=pb.AGGREGATE_OP_MEAN, column="x", finite_only=True)),
                ("count of int64", pb.Measure(op=pb.AGGREGATE_OP_COUNT, column="i",
                                              finite_only=True)),
                ("count()", pb.Measure(op=pb.AGGREGATE_OP_COUNT, finite_only=True))):
            b0, _ = float_batches(T.COLUMN_TYPE_FLOAT64)
            err, _ = query_error(conn, [pb.QueryRequest(batch_id=1, plan=finite_plan(["g"], [m]),
                                                        columns=b0)])
            if err is None:
                problems.append(f"finite_only on {what} was accepted")
            elif err[0] != "INVALID_ARGUMENT" or "finite_only" not in err[1]:
                problems.append(f"finite_only on {what}: {err[0]} {err[1]!r}; expected "
                                "INVALID_ARGUMENT naming finite_only")
    finally:
        conn.close()
    assert not problems, f"{where}:\n" + "\n".join(problems)


# ---------------------------------------------------------------- row-ID snapshots

def expected_row_ids(keys, probe):
    first = {}
    for row, k in enumerate(keys.tolist()):
        first.setdefault(k, row)
    return [first.get(k, 0xFFFFFFFF) for k in probe.tolist()]


@pytest.mark.timeout(60)
def test_a_router_row_id_index_stays_one_through_snapshots_and_restarts(
        pytestconfig, start_gpujoind, processes, tmp_path):
    dirs = [tmp_path / f"shard{i}" for i in range(2)]
    for d in dirs:
        d.mkdir()
    binary = router_binary(pytestconfig)

    def start_cluster():
        shards = [start_gpujoind(f"--shard={i}/2", f"--data-dir={dirs[i]}") for i in range(2)]
        router = Router(binary, [s.address for s in shards])
        processes.append(router)
        return shards, router

    def check(r, shards, context):
        info = r.describe("rid")
        assert not info.explicit_values, f"{context}: the router describes explicit_values True"
        for i, s in enumerate(shards):
            with gpujoin.Client(s.address) as c:
                assert not c.describe("rid").explicit_values, \
                    f"{context}: shard {i} describes explicit_values True"
        got = r.lookup("rid", probe, select=["v"])
        assert got.values.tolist() == want, context
        same_lookup(got, before, context)
        return info

    rng = np.random.default_rng(11)
    keys = rng.integers(0, 1500, 2000).astype(np.uint32)
    probe = rng.integers(0, 2000, 3000).astype(np.uint32)
    want = expected_row_ids(keys, probe)
    (shards, router) = start_cluster()
    with gpujoin.Client(router.address) as r:
        wait_serving(r)
        built = r.build_index("rid", keys, payload={"v": keys.astype(np.int64) * 7},
                              chunk_rows=600, wait_durable=True)
        assert not built.explicit_values
        before = r.lookup("rid", probe, select=["v"])
        assert before.values.tolist() == want
        saved = r.save_index("rid", "rid-copy.bak")
        assert saved.bytes > 0
        r.drop("rid")
        loaded = r.load_index("rid", "rid-copy.bak")
        assert not loaded.explicit_values, "LoadIndex through the router: explicit_values True"
        assert loaded.rows == len(keys)
        check(r, shards, "after SaveIndex, DropIndex and LoadIndex")
    # Every shard restarts from its data dir (SIGTERM: pending snapshot writes finish).
    router.stop()
    for s in shards:
        assert s.stop() == 0, "".join(s.log)
    (shards, router) = start_cluster()
    with gpujoin.Client(router.address) as r:
        wait_serving(r)
        info = check(r, shards, "after a warm start of every shard")
        # Versions start again at 1 after a warm start (docs/operations.md),
        # alike on every shard: the router serves the index.
        for s in shards:
            with gpujoin.Client(s.address) as c:
                assert c.describe("rid").version == info.version
        assert info.rows == len(keys)
        # Still a row-ID index to the router: an upsert without values is refused.
        with pytest.raises(gpujoin.Error) as e:
            r.upsert("rid", [5000, 5001], payload={"v": [1, 2]})
        assert e.value.code.name == "UNIMPLEMENTED" and "values" in e.value.message, e.value


# ---------------------------------------------------------------- aggregates

def close_floats(a, b, context):
    assert len(a) == len(b), context
    for i, (x, y) in enumerate(zip(a, b)):
        if x is None or y is None:
            assert x is None and y is None, f"{context}: row {i}: {x} vs {y}"
        elif math.isnan(x) or math.isnan(y):
            assert math.isnan(x) and math.isnan(y), f"{context}: row {i}: {x} vs {y}"
        else:
            assert x == pytest.approx(y, rel=1e-9, abs=0.0), f"{context}: row {i}: {x} vs {y}"


@pytest.mark.timeout(60)
def test_an_aggregate_plan_through_three_shards_equals_one_server(cluster, start_gpujoind):
    rng = np.random.default_rng(23)
    (_, router) = cluster(3)
    whole = start_gpujoind()
    rows_ix = 2000
    ix_keys = np.arange(rows_ix, dtype=np.uint32) * 3
    labels = [None if i % 17 == 0 else f"label-{i % 23}" for i in range(rows_ix)]
    n = 12000
    k = rng.integers(0, 3 * rows_ix + 500, n)
    f = rng.normal(0, 1000, n)
    kind = rng.random(n)
    f[kind < 0.05] = math.nan
    f[(kind >= 0.05) & (kind < 0.08)] = math.inf
    f[(kind >= 0.08) & (kind < 0.11)] = -math.inf
    null = (kind >= 0.11) & (kind < 0.16)
    # The rows of label-5 carry only NaN and +-inf (its mean is null), those of
    # label-6 only nulls (its mean is null, its count(f) 0).
    row = k // 3
    on_index = (k % 3 == 0) & (row < rows_ix) & (row % 17 != 0)
    label5, label6 = on_index & (row % 23 == 5), on_index & (row % 23 == 6)
    f[label5] = np.where(np.arange(n)[label5] % 2 == 0, math.nan, -math.inf)
    null = (null | label6) & ~label5
    f = np.ma.masked_array(f, mask=null)
    data = {"k": k.astype(np.int64), "f": f,
            "n": rng.integers(-10**12, 10**12, n, dtype=np.int64)}
    with gpujoin.Client(router.address) as r, gpujoin.Client(whole.address) as w:
        wait_serving(r)
        for c in (r, w):
            c.build_index("agg", ix_keys, payload={"label": labels}, chunk_rows=500)
        out = {}
        for who, c in (("router", r), ("one server", w)):
            q = (c.query(data).lookup("agg", key="k", select=["label"], how="left")
                 .aggregate(by="label", measures=["count()", "mean(f)", "sum(n)", "count(f)"]))
            out[who] = {name: values(col) for name, col in q.run(batch_rows=2500).items()}
        a, b = out["router"], out["one server"]
        assert sorted(a) == sorted(b) == sorted(["label", "count", "mean_f", "sum_n", "count_f"]), \
            (sorted(a), sorted(b))
        assert a["label"] == b["label"], "groups (in first-row order)"
        assert None in a["label"] and len(a["label"]) == 24
        for name in ("count", "sum_n", "count_f"):
            assert a[name] == b[name], name
        close_floats(a["mean_f"], b["mean_f"], "mean_f")
        assert sum(a["count"]) == n
        g5, g6 = a["label"].index("label-5"), a["label"].index("label-6")
        assert a["mean_f"][g5] is None and a["count_f"][g5] > 0
        assert a["mean_f"][g6] is None and a["count_f"][g6] == 0 and a["count"][g6] > 0


@pytest.mark.timeout(120)
def test_a_refused_aggregate_plan_leaves_the_router_serving_and_names_the_measure(
        cluster, start_gpujoind):
    """Every shard refuses the plan's aggregate when the stream ends (a min of
    strings, a sum of a string column): the router answers what one server
    answers, naming the caller's measure (means add hidden counts after the
    caller's measures, not before), and stays up however the shards' answers
    interleave (it once half-closed a shard stream twice and aborted)."""
    (_, router) = cluster(2)
    whole = start_gpujoind()
    keys = np.arange(300, dtype=np.uint32)
    data = {"k": np.arange(0, 400, dtype=np.int64), "f": np.linspace(0, 1, 400)}
    bad = [["min(name)"], ["count()", "mean(f)", "min(name)"],
           ["count()", "mean(f)", "max(f)", "sum(name)"]]
    with gpujoin.Client(router.address) as r, gpujoin.Client(whole.address) as w:
        wait_serving(r)
        for c in (r, w):
            c.build_index("strs", keys, payload={"name": [f"n{i % 7}" for i in range(300)]})
        for attempt in range(6):
            for measures in bad:
                said = {}
                for who, c in (("router", r), ("one server", w)):
                    with pytest.raises(gpujoin.Error) as e:
                        (c.query(data).lookup("strs", key="k", select=["name"])
                         .aggregate(by=[], measures=measures).run())
                    said[who] = e.value
                assert said["router"].code == said["one server"].code, said
                position = re.search(r"measures\[\d+\]", said["one server"].message).group(0)
                assert position in said["router"].message, said
        out = (r.query(data).lookup("strs", key="k", select=["name"])
               .aggregate(by="name", measures=["count()"]).run())
        assert sum(values(out["count"])) == 300
