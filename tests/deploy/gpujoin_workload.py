"""A small, deterministic gpujoind workload for the deployment tests.

Generates Python gRPC stubs from proto/gpujoin/v1/gpujoin.proto into a
temporary folder (Debian's python3-grpc-tools) and drives every RPC once or a
few times, including requests that must fail, so that every metric family the
dashboards and alert rules use has series afterwards: per-index gauges,
query/join counters for both operations, build results ok and already_exists,
RPC histograms, and errors by code.

It does not depend on the gpujoin CLI. Used by live_stack.py.
"""

import importlib
import struct
import subprocess
import sys
import time

import grpc

# Index names carry a prefix so that a test can look for its own series.
SENSORS = "deploy_sensors"
TIGHT = "deploy_tight"
DROPPED = "deploy_dropped"
EMPTY_KEY = 0xFFFFFFFF


def generate_stubs(proto_root, out_dir):
    """Runs grpc_tools.protoc on gpujoin/v1/gpujoin.proto; returns (pb2, pb2_grpc)."""
    cmd = [sys.executable, "-m", "grpc_tools.protoc", f"-I{proto_root}",
           f"--python_out={out_dir}", f"--grpc_python_out={out_dir}",
           "gpujoin/v1/gpujoin.proto"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"protoc failed ({' '.join(cmd)}):\n{res.stderr}")
    if out_dir not in sys.path:
        sys.path.insert(0, out_dir)
    pb2 = importlib.import_module("gpujoin.v1.gpujoin_pb2")
    pb2_grpc = importlib.import_module("gpujoin.v1.gpujoin_pb2_grpc")
    return pb2, pb2_grpc


def packed_u32(values):
    return struct.pack(f"<{len(values)}I", *values)


def packed_f32(values):
    return struct.pack(f"<{len(values)}f", *values)


class Workload:
    """Drives one gpujoind at `address` with stubs `pb2`/`pb2_grpc`."""

    def __init__(self, address, pb2, pb2_grpc, log=print):
        self.pb2 = pb2
        self.channel = grpc.insecure_channel(address)
        self.stub = pb2_grpc.GpuJoinStub(self.channel)
        self.log = log
        # What happened, for the test's report: list of (step, outcome).
        self.outcomes = []

    def close(self):
        self.channel.close()

    # ------------------------------------------------------------ helpers
    def _note(self, step, outcome):
        self.outcomes.append((step, outcome))
        self.log(f"workload: {step}: {outcome}")

    def wait_ready(self, timeout_s):
        """Retries GetServerInfo until it answers; raises after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        last = None
        while time.monotonic() < deadline:
            try:
                info = self.stub.GetServerInfo(self.pb2.GetServerInfoRequest(), timeout=2)
                self._note("GetServerInfo", f"backend={info.backend} serving={info.serving}")
                return info
            except grpc.RpcError as e:  # not listening yet
                last = e
                time.sleep(0.2)
        raise RuntimeError(f"gpujoind did not answer GetServerInfo within {timeout_s}s: {last}")

    def build(self, name, keys_chunks, capacity, max_probe_count=0, replace=False):
        """Builds `name` from key chunks; returns the response or the RpcError."""
        pb2 = self.pb2

        def requests():
            yield pb2.BuildIndexRequest(spec=pb2.IndexSpec(
                name=name, capacity=capacity, max_probe_count=max_probe_count, replace=replace))
            for chunk in keys_chunks:
                yield pb2.BuildIndexRequest(
                    chunk=pb2.BuildChunk(keys=pb2.U32Column(packed=packed_u32(chunk))))

        try:
            resp = self.stub.BuildIndex(requests(), timeout=30)
            st = resp.index.statistics
            self._note(f"BuildIndex {name}",
                       f"version={resp.index.version} unique={st.unique_keys} dup={st.duplicate_rows} "
                       f"overflow={st.overflow_rows} invalid={st.invalid_rows}")
            return resp
        except grpc.RpcError as e:
            self._note(f"BuildIndex {name}", f"{e.code().name}: {e.details()}")
            return e

    def _stream(self, method, requests, step):
        """Runs a bidi stream; returns (responses, error-or-None)."""
        responses = []
        try:
            for resp in method(iter(requests), timeout=30):
                responses.append(resp)
            return responses, None
        except grpc.RpcError as e:
            self._note(step, f"stream ended with {e.code().name}: {e.details()}")
            return responses, e

    # ------------------------------------------------------------ workload
    def run(self):
        """The whole workload. Raises AssertionError when a core step fails."""
        pb2 = self.pb2
        info = self.wait_ready(20)
        if not info.serving:
            raise AssertionError("gpujoind reports serving=false before any work")

        # Sensors: 600 distinct keys in two chunks with duplicates across
        # chunks and one reserved (invalid) key.
        keys = [1000 + 7 * i for i in range(600)]
        chunk_a = keys[:350] + [keys[0], keys[1], EMPTY_KEY]
        chunk_b = keys[350:] + [keys[2]]
        first = self.build(SENSORS, [chunk_a, chunk_b], capacity=2048)
        if isinstance(first, grpc.RpcError):
            raise AssertionError(f"BuildIndex {SENSORS} failed: {first.code().name}: {first.details()}")
        # Same name without replace: ALREADY_EXISTS, counted as a build result.
        again = self.build(SENSORS, [chunk_a], capacity=2048)
        if not isinstance(again, grpc.RpcError) or again.code() != grpc.StatusCode.ALREADY_EXISTS:
            raise AssertionError(f"rebuilding live {SENSORS} without replace must be ALREADY_EXISTS, got {again}")
        # Atomic rebuild with replace: the version goes up.
        second = self.build(SENSORS, [chunk_a, chunk_b], capacity=2048, replace=True)
        if isinstance(second, grpc.RpcError) or second.index.version <= first.index.version:
            raise AssertionError(f"replace build of {SENSORS} failed or kept its version: {second}")

        # A tiny table with a probe bound of 1: collisions overflow.
        self.build(TIGHT, [list(range(1, 17))], capacity=16, max_probe_count=1)
        # Invalid spec: capacity not a power of two (INVALID_ARGUMENT).
        self.build("deploy_invalid", [[1, 2, 3]], capacity=1000)

        # Lookups: hits and misses, then a batch on an unknown index.
        hits = keys[::3]
        misses = [k + 1 for k in keys[::5]]
        lookups = [pb2.LookupRequest(index=SENSORS, keys=pb2.U32Column(packed=packed_u32(hits)), batch_id=1),
                   pb2.LookupRequest(index=SENSORS, keys=pb2.U32Column(packed=packed_u32(misses)),
                                     want_probes=True, batch_id=2),
                   pb2.LookupRequest(index=TIGHT, keys=pb2.U32Column(packed=packed_u32(list(range(1, 33)))),
                                     batch_id=3)]
        resps, err = self._stream(self.stub.Lookup, lookups, "Lookup")
        if err is not None or len(resps) != 3:
            raise AssertionError(f"Lookup stream: {len(resps)} responses, error {err}")
        found = sum(r.statistics.found for r in resps[:2])
        self._note("Lookup", f"{len(resps)} batches, found={found} of {len(hits) + len(misses)} rows")
        if resps[0].statistics.found != len(hits) or resps[1].statistics.found != 0:
            raise AssertionError(f"Lookup statistics: hits batch found {resps[0].statistics.found} of "
                                 f"{len(hits)}, misses batch found {resps[1].statistics.found} of 0")
        bad = [pb2.LookupRequest(index="deploy_no_such_index", keys=pb2.U32Column(packed=packed_u32([1])),
                                 batch_id=4)]
        resps, err = self._stream(self.stub.Lookup, bad, "Lookup unknown index")
        if err is None:
            codes = [r.error.code for r in resps]
            self._note("Lookup unknown index", f"in-band error codes {codes}")

        # Joins: one batch with enough capacity, one truncated (capacity 1).
        left = keys[:40] + [5, 6, 7]
        join = pb2.JoinRequest(index=SENSORS, batch_id=10, batches=[
            pb2.LeftBatch(keys=pb2.U32Column(packed=packed_u32(left)), want_found=True),
            pb2.LeftBatch(keys=pb2.U32Column(packed=packed_u32(keys[100:110])), capacity=1)])
        resps, err = self._stream(self.stub.Join, [join], "Join")
        if err is not None or len(resps) != 1 or len(resps[0].results) != 2:
            raise AssertionError(f"Join stream: responses {resps}, error {err}")
        r0, r1 = resps[0].results
        self._note("Join", f"pairs {r0.count} and {r1.count} (overflow {r1.overflow})")
        if r0.count != 40 or r1.count != 10 or not r1.overflow:
            raise AssertionError(f"Join results: counts {r0.count}/{r1.count} (want 40/10), "
                                 f"second overflow {r1.overflow} (want true)")

        # Aggregate and Hash: one batch each, plus one bad Hash batch.
        agg = pb2.AggregateRequest(op=pb2.AGGREGATE_OP_SUM, groups=4,
                                   keys=pb2.U32Column(packed=packed_u32([0, 1, 2, 3, 1, 9])),
                                   values=pb2.F32Column(packed=packed_f32([1, 2, 3, 4, 5, 6])), batch_id=20)
        self._stream(self.stub.Aggregate, [agg], "Aggregate")
        col = pb2.HashColumn(type=pb2.COLUMN_TYPE_UINT32, data=packed_u32([1, 2, 3]), length=3)
        bad_col = pb2.HashColumn(type=pb2.COLUMN_TYPE_UINT32, data=b"\x01\x02\x03", length=3)
        self._stream(self.stub.Hash, [pb2.HashRequest(columns=[col], bits=64, batch_id=30),
                                      pb2.HashRequest(columns=[bad_col], bits=64, batch_id=31)], "Hash")

        # Unary admin RPCs, a drop, and a drop of an unknown name (NOT_FOUND).
        listed = self.stub.ListIndexes(pb2.ListIndexesRequest(), timeout=10)
        self._note("ListIndexes", ", ".join(sorted(i.name for i in listed.indexes)))
        self.stub.DescribeIndex(pb2.DescribeIndexRequest(name=SENSORS), timeout=10)
        self.build(DROPPED, [[11, 12, 13]], capacity=8)
        self.stub.DropIndex(pb2.DropIndexRequest(name=DROPPED), timeout=10)
        try:
            self.stub.DropIndex(pb2.DropIndexRequest(name="deploy_no_such_index"), timeout=10)
            raise AssertionError("DropIndex of an unknown index must fail with NOT_FOUND")
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.NOT_FOUND:
                raise AssertionError(f"DropIndex of an unknown index: {e.code().name}, want NOT_FOUND")
            self._note("DropIndex unknown", "NOT_FOUND")
        self.stub.GetServerInfo(pb2.GetServerInfoRequest(), timeout=10)
