"""Shared pieces of the Query tests: a gpujoind on the backend the suite runs
on ($GPUJOIN_TEST_BACKEND, cpu when unset; the binary from --gpujoind or
$GPUJOIND), builds and mutations through the raw generated stubs, and a
Query stream's answers read back per request (continuation parts joined).
"""
import os
import queue

import grpc
import pytest

from gpujoin._proto import pb, pb_grpc

from conftest import Gpujoind
from query_columns import decode, encode

#: Deadline in seconds of every call the Query tests make.
CALL_TIMEOUT = 30.0


def start(pytestconfig, *flags):
    """A gpujoind on $GPUJOIN_TEST_BACKEND with further flags (the caller stops it)."""
    binary = pytestconfig.getoption("--gpujoind")
    if not binary or not os.access(binary, os.X_OK):
        pytest.fail(f"--gpujoind (or $GPUJOIND) must name the gpujoind binary (got {binary!r})")
    s = Gpujoind(binary, "--device-memory-limit=1G", *flags)
    if s.address is None:
        pytest.fail("gpujoind exited:\n" + "".join(s.log))
    return s


class Connection:
    """A channel and stub to one gpujoind (64 MiB receive limit)."""

    def __init__(self, address):
        self.channel = grpc.insecure_channel(
            address, options=[("grpc.max_receive_message_length", 64 << 20),
                              ("grpc.max_send_message_length", 64 << 20)])
        self.stub = pb_grpc.GpuJoinStub(self.channel)

    def close(self):
        self.channel.close()

    def build(self, name, key_type, keys, payload=(), keep_all=False, key_columns=(),
              chunks=2):
        """Builds `name` (replacing it): `keys` one per source row (an int for a
        word index, a tuple for a key schema; the word's reserved value or a
        None in a tuple is an invalid row), `payload` [(name, type, values)].
        The rows are sent in `chunks` chunks so that duplicates span them.
        Returns IndexInfo."""
        spec = pb.IndexSpec(name=name, key_type=key_type, expected_rows=max(16, 2 * len(keys)),
                            replace=True,
                            duplicates=pb.DUPLICATE_POLICY_KEEP_ALL if keep_all
                            else pb.DUPLICATE_POLICY_LOWEST_ROW,
                            payload=[pb.PayloadColumnSpec(name=n, type=t) for n, t, _ in payload],
                            key_columns=[pb.KeyColumnSpec(name=n, type=t) for n, t in key_columns])
        msgs = [pb.BuildIndexRequest(spec=spec)]
        n = len(keys)
        cuts = sorted({0, n, *(n * i // chunks for i in range(1, chunks))}) if n else [0, 0]
        for a, b in zip(cuts, cuts[1:]):
            chunk = pb.BuildChunk(payload=[encode(pn, pt, pv[a:b]) for pn, pt, pv in payload])
            part = keys[a:b]
            if key_type == pb.KEY_TYPE_COLUMNS:
                for j, (kn, kt) in enumerate(key_columns):
                    chunk.key_columns.append(encode(kn, kt, [k[j] for k in part]))
            else:
                words = chunk.keys64 if key_type == pb.KEY_TYPE_UINT64 else chunk.keys
                words.values.SetInParent()  # a zero-row column is an empty `values {}`
                words.values.v.extend(part)
            msgs.append(pb.BuildIndexRequest(chunk=chunk))
        return self.stub.BuildIndex(iter(msgs), timeout=CALL_TIMEOUT).index

    def query(self, requests):
        """Sends the requests on one Query stream; returns its answers (see answers())."""
        return answers(self.stub.Query(iter(requests), timeout=CALL_TIMEOUT))


class Answer:
    """One request's answer: the parts of a continued result joined."""

    def __init__(self, first):
        self.batch_id = first.batch_id
        self.parts = [first]
        self.error = first.error if first.HasField("error") else None
        self.final = first.final
        self.steps = list(first.steps)
        self.names = [c.name for c in first.columns]
        self.types = [c.type for c in first.columns]
        self.columns = [decode(c) for c in first.columns]
        self.rows = first.rows
        assert first.first_row == 0, f"batch {first.batch_id}: first part at row {first.first_row}"
        self._check_part(first)

    def _check_part(self, part):
        for c in part.columns:
            assert c.length == part.rows, \
                f"batch {part.batch_id}: column {c.name!r} has {c.length} rows, the part {part.rows}"

    def add(self, part):
        assert part.batch_id == self.batch_id, \
            f"a part of batch {self.batch_id} was followed by batch {part.batch_id}"
        assert part.first_row == self.rows, \
            f"batch {self.batch_id}: part at row {part.first_row}, expected {self.rows}"
        assert [c.name for c in part.columns] == self.names
        self._check_part(part)
        for acc, c in zip(self.columns, part.columns):
            acc.extend(decode(c))
        self.rows += part.rows
        self.final = self.final or part.final
        if not self.steps:
            self.steps = list(part.steps)
        if part.HasField("error") and self.error is None:
            self.error = part.error
        self.parts.append(part)

    def describe(self):
        if self.error is not None:
            return f"batch {self.batch_id}: error {self.error.code} {self.error.message!r}"
        return (f"batch {self.batch_id}: {self.rows} rows, columns "
                + ", ".join(f"{n}={v}" for n, v in zip(self.names, self.columns)))


def answers(responses):
    """The answers of a Query stream in order, continuation parts (`more`) joined."""
    out, open_answer = [], None
    for r in responses:
        if open_answer is not None:
            open_answer.add(r)
        else:
            open_answer = Answer(r)
        if not r.more:
            out.append(open_answer)
            open_answer = None
    assert open_answer is None, f"batch {open_answer.batch_id}: the last part has `more` set"
    return out


def batch_columns(names, types, columns):
    return [encode(n, t, v) for n, t, v in zip(names, types, columns)]


class Interactive:
    """A Query stream driven one request at a time, so that a test can change
    an index between a batch's answer and the next batch."""

    def __init__(self, stub):
        self._queue = queue.Queue()
        self._responses = stub.Query(iter(self._queue.get, None), timeout=CALL_TIMEOUT)

    def ask(self, request):
        """Sends `request` and returns its answer (an Answer)."""
        self._queue.put(request)
        return self.next_answer()

    def next_answer(self):
        first = next(self._responses)
        a = Answer(first)
        part = first
        while part.more:
            part = next(self._responses)
            a.add(part)
        return a

    def close(self):
        """Half-closes the stream; returns the answers that follow (the end of the stream's)."""
        self._queue.put(None)
        return answers(self._responses)
