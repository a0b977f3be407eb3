#!/usr/bin/env python3
"""Python client against the real gpujoind: the API works from a second language.

Generates the gpujoin.v1 stubs from proto/ into a temporary directory with
grpc_tools.protoc, starts gpujoind (CPU backend) on free loopback ports, and
builds, looks up, joins and aggregates through the generated stubs, using both
packed little-endian bytes and typed lists.
"""
import argparse
import importlib
import os
import re
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

ARGS = None


def require(module, package):
    try:
        return importlib.import_module(module)
    except ImportError as e:  # a missing dependency fails loudly, naming the package
        sys.exit(f"client_test.py: cannot import {module} ({e}); install the Debian package {package}")


def pack_u32(values):
    return struct.pack(f"<{len(values)}I", *values)


def unpack_u32(data):
    return list(struct.unpack(f"<{len(data) // 4}I", data))


def unpack_f32(data):
    return list(struct.unpack(f"<{len(data) // 4}f", data))


class GpujoindProcess:
    """gpujoind on free ports; its log is collected by a thread so it never blocks."""

    def __init__(self, binary, extra=()):
        self.proc = subprocess.Popen(
            [binary, "--listen=127.0.0.1:0", "--metrics-listen=127.0.0.1:0", "--backend=cpu",
             "--cpu-threads=2", "--executor-threads=2", *extra],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.log = []
        self.ready = threading.Event()
        self.address = None
        threading.Thread(target=self._read, daemon=True).start()
        if not self.ready.wait(20):
            self.stop(signal.SIGKILL)
            raise RuntimeError("gpujoind did not become ready:\n" + "".join(self.log))

    def _read(self):
        for line in self.proc.stdout:
            self.log.append(line)
            m = re.search(r"gpujoind ready: grpc=(\S+)", line)
            if m:
                self.address = m.group(1)
                self.ready.set()

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(30)


class PythonClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.grpc = require("grpc", "python3-grpcio")
        require("grpc_tools.protoc", "python3-grpc-tools")
        from grpc_tools import protoc
        cls.tmp = tempfile.TemporaryDirectory(prefix="gpujoin_py_")
        rc = protoc.main(["protoc", f"-I{ARGS.proto_dir}", f"--python_out={cls.tmp.name}",
                          f"--grpc_python_out={cls.tmp.name}",
                          os.path.join(ARGS.proto_dir, "gpujoin", "v1", "gpujoin.proto")])
        if rc != 0:
            raise RuntimeError(f"grpc_tools.protoc failed with {rc}")
        sys.path.insert(0, cls.tmp.name)
        cls.pb = importlib.import_module("gpujoin.v1.gpujoin_pb2")
        cls.pb_grpc = importlib.import_module("gpujoin.v1.gpujoin_pb2_grpc")
        cls.server = GpujoindProcess(ARGS.gpujoind)
        cls.channel = cls.grpc.insecure_channel(cls.server.address)
        cls.stub = cls.pb_grpc.GpuJoinStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        rc = cls.server.stop()
        cls.tmp.cleanup()
        assert rc == 0, f"gpujoind exited {rc}:\n" + "".join(cls.server.log)

    def build(self, name, keys, **spec):
        pb = self.pb
        msgs = [pb.BuildIndexRequest(spec=pb.IndexSpec(name=name, **spec))]
        # Two chunks: packed bytes and a typed list.
        half = len(keys) // 2
        msgs.append(pb.BuildIndexRequest(chunk=pb.BuildChunk(keys=pb.U32Column(packed=pack_u32(keys[:half])))))
        msgs.append(pb.BuildIndexRequest(chunk=pb.BuildChunk(
            keys=pb.U32Column(values=pb.U32List(v=keys[half:])))))
        return self.stub.BuildIndex(iter(msgs), timeout=30)

    def test_build_lookup_join(self):
        pb = self.pb
        keys = [10, 20, 30, 20, 0xFFFFFFFF, 40]
        resp = self.build("py", keys, capacity=16, first_value=100)
        st = resp.index.statistics
        self.assertEqual((st.unique_keys, st.duplicate_rows, st.invalid_rows, st.overflow_rows), (4, 1, 1, 0))
        self.assertEqual(resp.index.version, 1)
        self.assertEqual(resp.index.backend, "cpu")

        requests = [pb.LookupRequest(index="py", keys=pb.U32Column(packed=pack_u32([20, 5, 40])), batch_id=1),
                    pb.LookupRequest(index="py", keys=pb.U32Column(values=pb.U32List(v=[10])), batch_id=2),
                    pb.LookupRequest(index="nope", keys=pb.U32Column(values=pb.U32List(v=[1])), batch_id=3)]
        responses = list(self.stub.Lookup(iter(requests), timeout=30))
        self.assertEqual([r.batch_id for r in responses], [1, 2, 3])
        self.assertEqual(unpack_u32(responses[0].values), [101, 0xFFFFFFFF, 105])
        self.assertEqual(list(responses[0].found), [1, 0, 1])
        self.assertEqual(responses[0].statistics.found, 2)
        self.assertEqual(responses[0].statistics.missing, 1)
        self.assertEqual(unpack_u32(responses[1].values), [100])
        self.assertEqual(responses[2].error.code, self.grpc.StatusCode.NOT_FOUND.value[0])
        self.assertIn("not found", responses[2].error.message)

        join = pb.JoinRequest(index="py", batches=[
            pb.LeftBatch(keys=pb.U32Column(packed=pack_u32([30, 1, 10, 30])), first_left_row=50)])
        (jr,) = list(self.stub.Join(iter([join]), timeout=30))
        self.assertEqual(unpack_u32(jr.results[0].left_rows), [50, 52, 53])
        self.assertEqual(unpack_u32(jr.results[0].right_rows), [102, 100, 102])
        self.assertEqual(jr.results[0].count, 3)
        self.assertFalse(jr.results[0].overflow)

    def test_mutate_as_docs_api_md_shows(self):
        # docs/api.md "Mutate": the raw-stub example, on the index its BuildIndex example builds.
        pb = self.pb
        msgs = [pb.BuildIndexRequest(spec=pb.IndexSpec(name="sensors", capacity=1 << 20)),
                pb.BuildIndexRequest(chunk=pb.BuildChunk(keys=pb.U32Column(packed=pack_u32([17, 4242, 99])))),
                pb.BuildIndexRequest(chunk=pb.BuildChunk(keys=pb.U32Column(values=pb.U32List(v=[5, 17]))))]
        self.stub.BuildIndex(iter(msgs), timeout=30)
        reqs = [pb.MutateRequest(index="sensors", batch_id=1, keys=pb.U32Column(packed=pack_u32([99, 7])),
                                 delete_keys=pb.U32Column(packed=pack_u32([17, 8]))),
                pb.MutateRequest(index="sensors", batch_id=2)]  # neither side: refused in-band
        r, empty = list(self.stub.Mutate(iter(reqs), timeout=30))
        self.assertEqual((r.batch_id, r.mutation_sequence, r.inserted_keys, r.updated_keys,
                          r.deleted_keys, r.not_found_keys), (1, 1, 1, 1, 1, 1))
        self.assertEqual(empty.error.code, self.grpc.StatusCode.INVALID_ARGUMENT.value[0])
        (lr,) = list(self.stub.Lookup(iter([pb.LookupRequest(
            index="sensors", keys=pb.U32Column(packed=pack_u32([99, 7, 17])))]), timeout=30))
        self.assertEqual((unpack_u32(lr.values), lr.mutation_sequence), ([5, 6, 0xFFFFFFFF], 1))

    def test_aggregate_accumulates(self):
        pb = self.pb
        batches = [pb.AggregateRequest(op=pb.AGGREGATE_OP_SUM, groups=2, batch_id=i,
                                       keys=pb.U32Column(values=pb.U32List(v=[0, 1, 1])),
                                       values=pb.F32Column(values=pb.F32List(v=[1.0, 2.0, 3.0])))
                   for i in range(3)]
        out = list(self.stub.Aggregate(iter(batches), timeout=30))
        self.assertEqual(len(out), 3)
        self.assertEqual(unpack_f32(out[0].values), [1.0, 5.0])
        self.assertEqual(unpack_f32(out[2].total_values), [3.0, 15.0])

    def test_reflection_and_health(self):
        # Raw protobuf bytes through generic stubs (no reflection/health stubs needed):
        # ServerReflectionRequest{list_services: ""} is field 7 (tag 0x3a), empty.
        reflect = self.channel.stream_stream(
            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo")
        (answer,) = list(reflect(iter([b"\x3a\x00"]), timeout=10))
        self.assertIn(b"gpujoin.v1.GpuJoin", answer)
        self.assertIn(b"grpc.health.v1.Health", answer)
        # HealthCheckRequest{} -> HealthCheckResponse{status: SERVING (1)}.
        check = self.channel.unary_unary("/grpc.health.v1.Health/Check")
        self.assertEqual(check(b"", timeout=10), b"\x08\x01")

    def test_errors_and_info(self):
        pb = self.pb
        with self.assertRaises(self.grpc.RpcError) as ctx:
            self.stub.DescribeIndex(pb.DescribeIndexRequest(name="bad name"), timeout=10)
        self.assertEqual(ctx.exception.code(), self.grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("name", ctx.exception.details())
        bad = pb.LookupRequest(index="x", keys=pb.U32Column(packed=b"\x01\x02\x03"))
        (r,) = list(self.stub.Lookup(iter([bad]), timeout=10))
        self.assertEqual(r.error.code, self.grpc.StatusCode.INVALID_ARGUMENT.value[0])
        self.assertIn("keys.packed: byte length 3", r.error.message)
        info = self.stub.GetServerInfo(pb.GetServerInfoRequest(), timeout=10)
        self.assertEqual(info.backend, "cpu")
        self.assertTrue(info.serving)


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpujoind", required=True)
    parser.add_argument("--proto-dir", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0], "-v", *rest])


if __name__ == "__main__":
    main()
