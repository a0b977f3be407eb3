"""gpujoind --devices: one gpujoind serving every index partitioned over
several devices ($GPUJOIN_TEST_BACKEND; with the CPU backend they are host
devices; docs/operations.md "Several devices").

A device group runs the router's partitioning in process, so the router's
"equals one server" tests run here unchanged against `gpujoind --devices
0,..,n-1` in place of a router over n shards: builds and lookups (uint32,
uint64 and string keys, lowest_row and keep_all, payload with nulls), batch
builds, joins of every kind, join streams and answers continued over small
messages, aggregates with overflow, mutations, Query plans (aggregate plans
included), bad requests and unknown indexes, and replicated indexes. The tests of this file: the
flag's errors, /metrics with a `device_id` label on every member's series (each
family named once) beside the per-part counters, GetServerInfo, the keys really
spread over the parts, --data-dir per part through a restart (and another
part count starting empty), health, a replicated index's batches spread over
the devices, and a device whose backend fails (the cpu backend's test
stand-in for a sticky CUDA error) taking only its part out of service.
"""
import os
import re
import subprocess
import urllib.request

import numpy as np
import pytest

import gpujoin
import test_router_ops
from conftest import Gpujoind, suite_backend, wait_serving
from test_router import values
# The router's tests, collected again here with this file's `cluster`.
from test_router import (  # noqa: F401
    test_batch_builds_through_the_router_equal_one_server,
    test_builds_and_lookups_equal_one_server,
    test_malformed_key_columns_are_refused_by_the_router,
    test_rpcs_the_router_does_not_serve_say_so,
)
from test_router_ops import (  # noqa: F401
    processes,
    row_id_indexes,
    start_gpujoind,
    test_a_request_of_several_left_batches_equals_one_server,
    test_aggregates_equal_one_server,
    test_an_unknown_index_is_not_found,
    test_bad_aggregate_requests_are_refused_as_one_server_refuses_them,
    test_deletes_on_a_row_id_index_equal_one_server,
    test_integer_sum_overflow_equals_one_server,
    test_join_answers_continue_over_small_messages,
    test_join_stream_equals_one_server,
    test_joins_equal_one_server,
    test_mutations_equal_one_server,
)
from test_router_replicated import (  # noqa: F401
    test_plans_look_replicated_indexes_up_by_any_key,
    test_replicated_lookups_and_joins_equal_one_server,
    test_replicated_mutations_reach_every_replica,
)
from test_router_faults import (  # noqa: F401
    test_a_refused_aggregate_plan_leaves_the_router_serving_and_names_the_measure,
    test_an_aggregate_plan_through_three_shards_equals_one_server,
)


def need_devices(n):
    """The CUDA suite runs a group only over devices it has
    ($GPUJOIN_TEST_CUDA_DEVICES, default 1); host devices are never short."""
    if suite_backend() == "cuda" and int(os.environ.get("GPUJOIN_TEST_CUDA_DEVICES", "1")) < n:
        pytest.skip(f"{n} CUDA devices needed (GPUJOIN_TEST_CUDA_DEVICES)")


@pytest.fixture()
def cluster(start_gpujoind):
    """cluster(n, router_flags=(), shard_flags=()): one gpujoind over n devices,
    in the place of a router over n shards (there are no shard processes)."""

    def start(n, router_flags=(), shard_flags=(), order=None):
        assert order is None, "a device group has no shard order to give"
        need_devices(n)
        group = start_gpujoind("--devices=" + ",".join(str(i) for i in range(n)),
                               *router_flags, *shard_flags)
        return None, group

    return start


@pytest.mark.timeout(60)
def test_upserts_without_values_are_unimplemented_on_two_devices(row_id_indexes):
    """As through the router; one device is a plain server, which takes them."""
    need_devices(2)
    test_router_ops.test_upserts_without_values_are_unimplemented(row_id_indexes, 2)


def gpujoind_binary(pytestconfig):
    return pytestconfig.getoption("--gpujoind")


@pytest.mark.parametrize("flag, why", [
    ("--devices=0,0", "names device 0 twice"),
    ("--devices=0,x", "\"x\", which is not a device number"),
    ("--devices=", None),
    ("--devices=0,,1", "\"\", which is not a device number"),
    ("--devices=64", "past the last"),
    ("--devices=-1", None),
])
def test_bad_device_lists_are_refused_naming_the_flag(pytestconfig, flag, why):
    out = subprocess.run([gpujoind_binary(pytestconfig), flag, "--listen=127.0.0.1:0",
                          "--metrics-listen=none"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 2, out
    text = out.stdout + out.stderr
    assert "--devices" in text, text
    if why is not None:
        assert why in text, text


def test_devices_and_shard_are_refused_together(pytestconfig):
    out = subprocess.run([gpujoind_binary(pytestconfig), "--devices=0,1", "--shard=0/2",
                          "--listen=127.0.0.1:0", "--metrics-listen=none"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and "--devices" in out.stderr and "--shard" in out.stderr, out


def test_all_devices_of_the_cpu_backend_is_refused(pytestconfig):
    out = subprocess.run([gpujoind_binary(pytestconfig), "--devices=all", "--backend=cpu",
                          "--listen=127.0.0.1:0", "--metrics-listen=none"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 2, out
    assert "--devices all" in out.stdout + out.stderr and "0,1" in out.stdout + out.stderr, out


def start_alone(pytestconfig, processes):
    """One plain gpujoind of the suite's backend (ready)."""
    s = Gpujoind(gpujoind_binary(pytestconfig))
    processes.append(s)
    assert s.address is not None, "".join(s.log)
    return s


def series(text, name, by, **match):
    """{value of label `by`: sample} of the series `name` in a /metrics text
    whose labels include `match`."""
    out = {}
    for m in re.finditer(r'^%s\{([^}]*)\} (\S+)$' % re.escape(name), text, re.M):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        if all(labels.get(k) == v for k, v in match.items()):
            out[labels[by]] = float(m.group(2))
    return out


def scrape(address):
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as r:
        return r.read().decode()


@pytest.mark.timeout(120)
def test_every_part_holds_some_keys_and_metrics_say_which_device(pytestconfig, processes):
    need_devices(3)
    g = Gpujoind(gpujoind_binary(pytestconfig), "--devices=0,1,2", "--metrics-listen=127.0.0.1:0")
    processes.append(g)
    metrics_address = re.search(r"metrics=(\S+)", "".join(g.log)).group(1)
    with gpujoin.Client(g.address) as c:
        wait_serving(c)
        keys = np.arange(30000, dtype=np.uint32) * 7
        c.build_index("spread", keys, payload={"v": keys.astype(np.int64)})
        got = c.lookup("spread", keys[::3], select=["v"])
        assert got.found.all() and values(got.columns["v"]) == keys[::3].astype(np.int64).tolist()
        info = c.server_info()
        assert info.device_name.startswith("3 devices: "), info.device_name
        assert info.serving
        if suite_backend() != "cuda":
            # Host devices share one host's memory: its total, not three times it.
            with gpujoin.Client(start_alone(pytestconfig, processes).address) as one:
                alone = one.server_info().device_memory_total_bytes
            assert info.device_memory_total_bytes == alone > 0, (info, alone)
        text = scrape(metrics_address)
    # Every family is named once, with the series of every device under it.
    types = re.findall(r"^# TYPE (\S+) ", text, re.M)
    assert len(types) == len(set(types)), [t for t in types if types.count(t) > 1]
    per_device = series(text, "gpujoin_index_unique_keys", "device_id", index="spread")
    assert sorted(per_device) == ["0", "1", "2"], text
    assert sum(per_device.values()) == len(keys), per_device
    # The jump hash spreads 30,000 keys about evenly: each part holds a fair share.
    assert min(per_device.values()) > len(keys) / 3 * 0.8, per_device
    for d in "012":
        assert re.search(r'^gpujoin_serving\{[^}]*device_id="%s"[^}]*\} 1' % d, text, re.M), d
    # No series names a label twice (Prometheus refuses the whole scrape).
    for line in text.splitlines():
        if line.startswith("#") or "{" not in line:
            continue
        names = re.findall(r'(\w+)="', line[line.index("{"):line.rindex("}")])
        assert len(names) == len(set(names)), line
    assert re.search(r'^gpujoin_router_shard_serving\{shard="2"\} 1', text, re.M), text


@pytest.mark.timeout(120)
def test_data_dir_keeps_one_directory_per_part_through_a_restart(pytestconfig, processes,
                                                                 tmp_path):
    need_devices(3)
    binary = gpujoind_binary(pytestconfig)
    keys = np.arange(5000, dtype=np.uint64) * 11 + 3
    g = Gpujoind(binary, "--devices=0,1", f"--data-dir={tmp_path}")
    processes.append(g)
    with gpujoin.Client(g.address) as c:
        wait_serving(c)
        c.build_index("kept", keys, key_type="uint64", payload={"v": keys.astype(np.int64) * 2},
                      wait_durable=True)
    assert g.stop() == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["part-0-of-2", "part-1-of-2"]
    assert all(any(p.iterdir()) for p in tmp_path.iterdir())

    again = Gpujoind(binary, "--devices=0,1", f"--data-dir={tmp_path}")
    processes.append(again)
    with gpujoin.Client(again.address) as c:
        wait_serving(c)
        got = c.lookup("kept", np.concatenate([keys, keys + 1]), select=["v"])
        assert got.found.tolist() == [True] * len(keys) + [False] * len(keys)
        assert values(got.columns["v"])[:len(keys)] == (keys.astype(np.int64) * 2).tolist()
    assert again.stop() == 0

    # Three parts partition the keys otherwise: they start from their own, empty,
    # directories instead of serving two-part partitions.
    three = Gpujoind(binary, "--devices=0,1,2", f"--data-dir={tmp_path}")
    processes.append(three)
    with gpujoin.Client(three.address) as c:
        wait_serving(c)
        assert [i.name for i in c.list()] == []
    assert (tmp_path / "part-2-of-3").is_dir()


def test_one_device_is_a_plain_server(pytestconfig, processes):
    """--devices with one entry selects that device and serves without the
    partitioning (no per-part metrics, no `devices` in the server's name)."""
    if suite_backend() == "cuda":
        pytest.skip("selects CUDA device 0; the CPU suite checks the plain path")
    g = Gpujoind(gpujoind_binary(pytestconfig), "--devices=0")
    processes.append(g)
    assert "devices=" not in "".join(g.log)
    with gpujoin.Client(g.address) as c:
        c.build_index("one", np.arange(10, dtype=np.uint32))
        assert "devices" not in c.server_info().device_name
        assert c.lookup("one", np.arange(12, dtype=np.uint32)).found.sum() == 10


def test_shutdown_drains_and_exits_cleanly(pytestconfig):
    need_devices(2)
    g = Gpujoind(gpujoind_binary(pytestconfig), "--devices=0,1")
    with gpujoin.Client(g.address) as c:
        wait_serving(c)
        c.build_index("d", np.arange(100, dtype=np.uint32))
    assert g.stop() == 0
    assert "drained; stopped" in "".join(g.log)


def test_a_part_that_cannot_start_fails_the_start_naming_it(pytestconfig, tmp_path):
    """Part 1's directory is a file: gpujoind exits 1 naming the device and
    the part, after stopping the part that started."""
    need_devices(2)
    (tmp_path / "part-1-of-2").write_text("not a directory")
    out = subprocess.run([gpujoind_binary(pytestconfig), "--devices=0,1", f"--data-dir={tmp_path}",
                          "--backend=" + suite_backend(), "--listen=127.0.0.1:0",
                          "--metrics-listen=none"], capture_output=True, text=True, timeout=60)
    text = out.stdout + out.stderr
    assert out.returncode == 1, text
    assert "--devices: device 1 (part 1 of 2)" in text, text
    assert "gpujoind ready" not in text, text


@pytest.mark.timeout(60)
def test_the_front_limits_streams_per_client_connection(pytestconfig, processes):
    """--max-streams-per-connection holds at the front: a third stream on one
    connection is RESOURCE_EXHAUSTED naming the flag; another connection, or a
    slot given back, serves."""
    import queue
    import grpc
    from gpujoin._proto import pb, pb_grpc
    from query_support import Connection
    need_devices(2)
    g = Gpujoind(gpujoind_binary(pytestconfig), "--devices=0,1", "--max-streams-per-connection=2")
    processes.append(g)
    with gpujoin.Client(g.address) as c:
        wait_serving(c)
        c.build_index("s", np.arange(100, dtype=np.uint32))
        assert c.server_info().max_streams_per_connection == 2
    conn, other = Connection(g.address), Connection(g.address)
    # A connection of its own (channels of one process share connections).
    other.channel.close()
    other.channel = grpc.insecure_channel(g.address,
                                          options=[("grpc.use_local_subchannel_pool", 1)])
    other.stub = pb_grpc.GpuJoinStub(other.channel)
    held = []

    def open_stream(stub):
        q = queue.Queue()
        calls = stub.Lookup(iter(q.get, None), timeout=30)
        q.put(pb.LookupRequest(index="s", batch_id=1, keys=test_router_ops.u32([5])))
        answer = next(calls)
        return q, calls, answer

    try:
        for _ in range(2):
            q, calls, answer = open_stream(conn.stub)
            assert not answer.HasField("error"), answer
            held.append((q, calls))
        with pytest.raises(Exception) as e:
            open_stream(conn.stub)
        assert "RESOURCE_EXHAUSTED" in str(e.value) and "--max-streams-per-connection=2" in \
            str(e.value), e.value
        _, _, answer = open_stream(other.stub)
        assert not answer.HasField("error"), answer
        q, calls = held.pop()
        q.put(None)
        list(calls)
        _, _, answer = open_stream(conn.stub)
        assert not answer.HasField("error"), answer
    finally:
        for q, _ in held:
            q.put(None)
        conn.close()
        other.close()


@pytest.mark.timeout(120)
def test_a_replicated_index_spreads_its_batches_over_the_devices(pytestconfig, processes):
    need_devices(2)
    g = Gpujoind(gpujoind_binary(pytestconfig), "--devices=0,1", "--metrics-listen=127.0.0.1:0")
    processes.append(g)
    metrics_address = re.search(r"metrics=(\S+)", "".join(g.log)).group(1)
    with gpujoin.Client(g.address) as c:
        wait_serving(c)
        keys = np.arange(5000, dtype=np.uint32) * 3
        info = c.build_index("hot", keys, payload={"v": keys.astype(np.int64)},
                             placement="replicated")
        assert info.placement == "replicated" and info.rows == 5000
        got = c.lookup("hot", keys[::7], select=["v"], batch_rows=100)
        assert got.found.all() and values(got.columns["v"]) == keys[::7].astype(np.int64).tolist()
        text = scrape(metrics_address)
    # Each device holds the whole index, and the 8 batches went to both, whole.
    per_device = series(text, "gpujoin_index_unique_keys", "device_id", index="hot")
    assert per_device == {"0": 5000.0, "1": 5000.0}, per_device
    batches = series(text, "gpujoin_router_shard_requests_total", "shard", rpc="Lookup")
    assert sorted(batches) == ["0", "1"] and sum(batches.values()) == 8, batches
    assert min(batches.values()) >= 3, batches


@pytest.mark.timeout(120)
def test_a_failed_device_takes_only_its_part_out_of_service(pytestconfig, processes):
    """A device whose backend fails (the cpu backend's stand-in for a sticky
    CUDA error) reports NOT_SERVING on its own in health and metrics; calls on
    a partitioned index fail naming it, while a replicated index keeps
    answering from the other devices."""
    if suite_backend() == "cuda":
        pytest.skip("the failing backend is the cpu backend's test stand-in")
    g = Gpujoind(gpujoind_binary(pytestconfig), "--devices=0,1,2", "--backend=cpu",
                 "--metrics-listen=127.0.0.1:0", "--test-fatal-after-runs=4",
                 "--test-fatal-device=1")
    processes.append(g)
    metrics_address = re.search(r"metrics=(\S+)", "".join(g.log)).group(1)
    keys = np.arange(3000, dtype=np.uint32) * 5
    with gpujoin.Client(g.address) as c:
        wait_serving(c)
        c.build_index("split", keys)
        c.build_index("hot", keys, payload={"v": keys.astype(np.int64)}, placement="replicated")
        failure = None
        for _ in range(20):
            try:
                c.lookup("split", keys)
            except gpujoin.Error as e:
                failure = e
                break
        assert failure is not None, "device 1's backend never failed"
        assert failure.code.name == "INTERNAL", failure
        assert "shard 1" in str(failure) and "fatal device error" in str(failure), failure
        wait_serving(c, want=False)
        text = scrape(metrics_address)
        serving = series(text, "gpujoin_serving", "device_id")
        assert serving == {"0": 1.0, "1": 0.0, "2": 1.0}, serving
        assert series(text, "gpujoin_router_shard_serving", "shard")["1"] == 0.0, text
        assert not c.server_info().serving
        with pytest.raises(gpujoin.Error) as e:
            c.lookup("split", keys)
        assert "shard 1" in str(e.value), e.value
        for _ in range(3):
            got = c.lookup("hot", keys, select=["v"], batch_rows=400)
            assert got.found.all() and values(got.columns["v"]) == keys.astype(np.int64).tolist()
        assert c.describe("hot").placement == "replicated"
