"""Replicated indexes (IndexSpec.placement; docs/operations.md "Replicated
indexes") through gpujoin-router over 2 and 3 shards ($GPUJOIN_TEST_BACKEND,
loopback); test_devices.py runs these again against `gpujoind --devices`.

Every shard holds every row of a replicated index; each lookup or join batch
runs whole on one replica, mutations reach every replica, and a plan's lookup
on a replicated index may use any key. The answers equal one gpujoind holding
the index (uint32, uint64 and string keys, lowest_row and keep_all, payload
with nulls), IndexInfo describes one replica (rows not multiplied), and a
router whose view of the placement is stale (another router rebuilt the index
the other way) still answers exactly: the shards refuse a whole batch for a
partitioned index and the router splits it again."""
import numpy as np
import pytest

import gpujoin
from conftest import Router, wait_serving
from test_router import same_lookup, values
from test_router_ops import (KINDS, build_both, cluster, payload_of, processes,  # noqa: F401
                             same_join, start_gpujoind)
from test_router import random_input


@pytest.mark.timeout(180)
@pytest.mark.parametrize("shards", [2, 3])
def test_replicated_lookups_and_joins_equal_one_server(cluster, start_gpujoind, shards):
    rng = np.random.default_rng(300 + shards)
    (shard_servers, router) = cluster(shards)
    whole = start_gpujoind()
    with gpujoin.Client(router.address) as r, gpujoin.Client(whole.address) as w:
        wait_serving(r)
        for key_type in ("uint32", "uint64", "string"):
            for duplicates in ("lowest_row", "keep_all"):
                rows = 1500
                keys, probe, _ = random_input(rng, key_type, rows)
                name = f"rep_{key_type}_{duplicates}"
                context = f"{shards} shards, {name}"
                info, info_w = build_both(r, w, name, keys, key_type, payload=payload_of(rows),
                                          duplicates=duplicates, chunk_rows=400,
                                          placement="replicated")
                assert info.placement == "replicated", context
                assert info_w.placement == "replicated", context  # one server stores it
                # One replica's description: rows and keys as one server's.
                assert info.rows == info_w.rows == rows, context
                assert info.statistics.unique_keys == info_w.statistics.unique_keys, context
                assert info.capacity == info_w.capacity, context
                assert r.describe(name).placement == "replicated", context
                assert [i.placement for i in r.list() if i.name == name] == ["replicated"]
                if shard_servers is not None:
                    for s in shard_servers:
                        with gpujoin.Client(s.address) as c:
                            held = c.describe(name)
                            assert held.rows == rows and held.placement == "replicated", context
                select = ["n", "label", "f"]
                for batch_rows in (None, 97, 1):
                    a = r.lookup(name, probe[:600], select=select, match_counts=True,
                                 batch_rows=batch_rows)
                    b = w.lookup(name, probe[:600], select=select, match_counts=True,
                                 batch_rows=batch_rows)
                    same_lookup(a, b, f"{context}, lookups in batches of {batch_rows}")
                left = probe[:400] if key_type == "string" else np.asarray(probe[:400])
                for kind in KINDS:
                    for batch_rows in (None, 61):
                        a = r.join(name, left, kind=kind, select=select, found=True,
                                   batch_rows=batch_rows)
                        b = w.join(name, left, kind=kind, select=select, found=True,
                                   batch_rows=batch_rows)
                        same_join(a, b, f"{context}, {kind} join in batches of {batch_rows}")


@pytest.mark.timeout(120)
def test_replicated_mutations_reach_every_replica(cluster, start_gpujoind):
    rng = np.random.default_rng(31)
    (shard_servers, router) = cluster(3)
    whole = start_gpujoind()
    with gpujoin.Client(router.address) as r, gpujoin.Client(whole.address) as w:
        wait_serving(r)
        pool = rng.choice(2**32 - 2, 500, replace=False).astype(np.uint32)
        keys = pool[rng.integers(0, 300, 800)]
        for duplicates in ("lowest_row", "keep_all"):
            name = f"repmut_{duplicates}"
            context = name
            # Row IDs (no values): each replica numbers the same rows alike.
            build_both(r, w, name, keys, "uint32", payload={"q": np.arange(800, dtype=np.int64)},
                       duplicates=duplicates, placement="replicated")
            for step in range(4):
                up = pool[rng.integers(0, 500, 120)]
                q = rng.integers(-100, 100, 120).astype(np.int64)
                gone = pool[rng.integers(0, 500, 40)]
                a = r.mutate(name, upsert_keys=up, payload={"q": q}, delete_keys=gone)
                b = w.mutate(name, upsert_keys=up, payload={"q": q}, delete_keys=gone)
                for field in ("upsert_rows", "inserted_keys", "updated_keys", "deleted_keys",
                              "not_found_keys", "deleted_rows", "mutation_sequence"):
                    assert getattr(a, field) == getattr(b, field), f"{context} {step}: {field}"
            got = r.lookup(name, pool, select=["q"], match_counts=True)
            want = w.lookup(name, pool, select=["q"], match_counts=True)
            same_lookup(got, want, context)
            described = r.describe(name)
            assert described.mutation_sequence == w.describe(name).mutation_sequence == 4
            assert described.next_row_id == w.describe(name).next_row_id, context
            if shard_servers is not None:
                for s in shard_servers:
                    with gpujoin.Client(s.address) as c:
                        same_lookup(c.lookup(name, pool, select=["q"], match_counts=True), want,
                                    f"{context}: {s.address} holds every row")
                        # One shard alone would let its replica diverge: refused.
                        with pytest.raises(gpujoin.FailedPrecondition,
                                           match="placement: .*replicated.*through gpujoin-router"):
                            c.upsert(name, pool[:3], payload={"q": np.zeros(3, np.int64)})


@pytest.mark.timeout(120)
def test_plans_look_replicated_indexes_up_by_any_key(cluster, start_gpujoind):
    """A partitioned fact index keyed by user, a replicated dimension keyed by
    the country a user's row carries: the router splits the rows by user and
    every shard looks the country up in its own replica."""
    rng = np.random.default_rng(5)
    (_, router) = cluster(3)
    whole = start_gpujoind()
    users = np.arange(4000, dtype=np.uint32) * 5 + 1
    country = rng.integers(0, 60, len(users)).astype(np.int64)
    countries = np.arange(50, dtype=np.uint32)   # 50..59 are missing
    names = [None if c % 13 == 0 else f"country-{c % 17}" for c in range(50)]
    n = 6000
    data = {"user": rng.integers(0, 5 * len(users) + 100, n).astype(np.int64),
            "amount": rng.integers(0, 1000, n).astype(np.int64)}
    with gpujoin.Client(router.address) as r, gpujoin.Client(whole.address) as w:
        wait_serving(r)
        for c in (r, w):
            c.build_index("users", users, payload={"country": country})
            c.build_index("countries", countries, payload={"cname": names},
                          placement="replicated")
        out = {}
        for who, c in (("router", r), ("one server", w)):
            rows = (c.query(data).lookup("users", key="user", select=["country"])
                    .lookup("countries", key="country", select=["cname"], how="left")
                    .run(batch_rows=1700))
            groups = (c.query(data).lookup("users", key="user", select=["country"])
                      .lookup("countries", key="country", select=["cname"], how="left")
                      .aggregate(by="cname", measures=["count()", "sum(amount)"])
                      .run(batch_rows=2500))
            # Only the replicated index: the rows are split in ranges.
            only = (c.query(data).lookup("countries", key="amount", select=["cname"])
                    .run(batch_rows=2000))
            out[who] = [{k: values(v) for k, v in t.items()} for t in (rows, groups, only)]
        a, b = out["router"], out["one server"]
        for i, what in enumerate(("rows", "groups", "replicated only")):
            assert sorted(a[i]) == sorted(b[i]), what
            for col in a[i]:
                assert a[i][col] == b[i][col], f"{what}: {col}"
        assert len(a[0]["cname"]) > 1000 and None in a[0]["cname"]


@pytest.mark.timeout(120)
def test_a_stale_placement_still_answers_exactly(cluster, start_gpujoind, processes,
                                                 pytestconfig):
    """Router A learns that `s` is replicated; router B rebuilds it
    partitioned, then replicated again: A's lookups and joins stay exact."""
    import os
    (shard_servers, router) = cluster(2)
    if shard_servers is None:
        pytest.skip("a device group has one router")
    binary = os.path.join(os.path.dirname(pytestconfig.getoption("--gpujoind")), "gpujoin-router")
    other = Router(binary, [s.address for s in shard_servers])
    processes.append(other)
    whole = start_gpujoind()
    rng = np.random.default_rng(8)
    keys = rng.choice(2**32 - 2, 3000, replace=False).astype(np.uint32)
    probe = np.concatenate([keys[:1500], rng.integers(0, 2**32 - 2, 500).astype(np.uint32)])
    with gpujoin.Client(router.address) as a, gpujoin.Client(other.address) as b, \
            gpujoin.Client(whole.address) as w:
        wait_serving(a)
        wait_serving(b)
        for c in (a, w):
            c.build_index("s", keys, payload=payload_of(3000), replace=True,
                          placement="replicated")
        want = w.lookup("s", probe, select=["n", "label"])
        same_lookup(a.lookup("s", probe, select=["n", "label"], batch_rows=400), want, "learnt")
        for placement in ("partitioned", "replicated", "partitioned"):
            b.build_index("s", keys, payload=payload_of(3000), replace=True, placement=placement)
            assert a.describe("s").placement == placement
            for batch_rows in (None, 333):
                same_lookup(a.lookup("s", probe, select=["n", "label"], batch_rows=batch_rows),
                            want, f"after B built it {placement}, batches of {batch_rows}")
                same_join(a.join("s", probe, select=["n"], found=True, batch_rows=batch_rows),
                          w.join("s", probe, select=["n"], found=True, batch_rows=batch_rows),
                          f"join after B built it {placement}")


def test_a_placement_that_is_not_one_is_refused(start_gpujoind):
    import grpc
    from gpujoin._proto import pb, pb_grpc
    s = start_gpujoind()
    with gpujoin.Client(s.address) as c:
        with pytest.raises(gpujoin.InvalidArgument, match="placement"):
            c.build_index("x", [1, 2], placement="everywhere")   # refused by the client
    with grpc.insecure_channel(s.address) as channel:
        stub = pb_grpc.GpuJoinStub(channel)
        spec = pb.IndexSpec(name="x", capacity=8, placement=7)
        chunk = pb.BuildChunk(keys=pb.U32Column(values=pb.U32List(v=[1, 2])))
        with pytest.raises(grpc.RpcError) as e:
            stub.BuildIndex(iter([pb.BuildIndexRequest(spec=spec),
                                  pb.BuildIndexRequest(chunk=chunk)]), timeout=30)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "spec.placement: 7" in e.value.details(), e.value.details()


@pytest.mark.timeout(120)
def test_replicas_on_different_versions_are_not_read(cluster):
    """A replica rebuilt on its own (another version): its batches are not
    answered from it; the split finds the versions differ and says so."""
    (shard_servers, router) = cluster(2)
    if shard_servers is None:
        pytest.skip("a device group's parts are not reachable alone")
    keys = np.arange(1000, dtype=np.uint32) * 11
    with gpujoin.Client(router.address) as r:
        wait_serving(r)
        r.build_index("v", keys, placement="replicated")
        assert r.lookup("v", keys, batch_rows=100).found.all()
        with gpujoin.Client(shard_servers[0].address) as s0:
            s0.build_index("v", keys[:10], replace=True, placement="replicated")
        with pytest.raises(gpujoin.Error) as e:
            r.lookup("v", keys, batch_rows=100)
        assert e.value.code.name == "ABORTED" and "serves version" in str(e.value), e.value


def test_a_callers_replica_flag_is_not_passed_on(cluster):
    import grpc
    from gpujoin._proto import pb, pb_grpc
    (_, router) = cluster(2)
    keys = np.arange(500, dtype=np.uint32) * 7
    with gpujoin.Client(router.address) as r:
        wait_serving(r)
        r.build_index("p", keys)   # partitioned
    with grpc.insecure_channel(router.address) as channel:
        stub = pb_grpc.GpuJoinStub(channel)
        ask = pb.LookupRequest(index="p", keys=pb.U32Column(values=pb.U32List(v=keys.tolist())),
                               replica=True)
        got = list(stub.Lookup(iter([ask]), timeout=30))
        assert len(got) == 1 and not got[0].HasField("error"), got[0].error
        assert got[0].found == b"\x01" * len(keys)


@pytest.mark.timeout(120)
def test_a_replica_that_is_down_is_passed_over(cluster):
    """A shard that is down takes its part of a partitioned index with it
    (UNAVAILABLE naming it), but a replicated index keeps answering from the
    replicas that serve."""
    import signal
    import time
    (shard_servers, router) = cluster(3)
    if shard_servers is None:
        pytest.skip("a device group's parts cannot be stopped alone")
    keys = np.arange(2000, dtype=np.uint32) * 13
    with gpujoin.Client(router.address) as r:
        wait_serving(r)
        r.build_index("hot", keys, payload={"v": keys.astype(np.int64)}, placement="replicated")
        r.build_index("split", keys)
        shard_servers[1].proc.send_signal(signal.SIGKILL)
        shard_servers[1].proc.wait(30)
        wait_serving(r, want=False)
        time.sleep(0.3)   # the poll that saw it down has marked it
        for _ in range(3):
            got = r.lookup("hot", keys, select=["v"], batch_rows=150)
            assert got.found.all() and values(got.columns["v"]) == keys.astype(np.int64).tolist()
            joined = r.join("hot", keys[::5], select=["v"], batch_rows=77)
            assert len(joined) == len(keys[::5])
        with pytest.raises(gpujoin.Error) as e:
            r.lookup("split", keys)
        assert e.value.code.name == "UNAVAILABLE" and "shard 1" in str(e.value), e.value
