"""gpujoin.streaming.run_stream: at most max_inflight batches are handed to gRPC
before their answers are read, a multi-message answer holds its slot until
its last message, and failures surface on the calling thread."""
import queue
import threading

import grpc
import pytest

import gpujoin
from gpujoin.streaming import run_stream


class FakeCall:
    """A stream-stream call whose 'server' answers each request with `parts`
    messages, pulling requests on its own thread as gRPC does, and records
    how far the requests got ahead of the answers the caller has read."""

    def __init__(self, requests, parts=1):
        self.parts = parts
        self.pulled = 0
        self.read = 0  # whole answers handed to the caller
        self.max_ahead = 0
        self.lock = threading.Lock()
        self.answers = queue.Queue()
        self.cancelled = False
        threading.Thread(target=self._serve, args=(requests,), daemon=True).start()

    def _serve(self, requests):
        for r in requests:
            with self.lock:
                self.pulled += 1
                self.max_ahead = max(self.max_ahead, self.pulled - self.read)
            for p in range(self.parts):
                self.answers.put((r, p == self.parts - 1))
        self.answers.put(None)

    def __iter__(self):
        return self

    def __next__(self):
        item = self.answers.get(timeout=10)
        if item is None:
            raise StopIteration
        if item[1]:
            with self.lock:  # the caller has this answer before it can open the window
                self.read += 1
        return item

    def cancel(self):
        self.cancelled = True


@pytest.mark.parametrize("window,parts", [(1, 1), (3, 1), (4, 3)])
def test_window_bounds_requests_ahead_of_answers(window, parts):
    calls = []

    def method(requests, metadata, timeout):
        calls.append(FakeCall(requests, parts))
        return calls[-1]

    seen = []
    for request, last in run_stream(method, iter(range(50)), max_inflight=window, metadata=(),
                                    timeout=None, finishes=lambda r: r[1]):
        if last:
            seen.append(request)
    assert seen == list(range(50))
    assert 1 <= calls[0].max_ahead <= window


def test_a_failing_request_iterator_raises_on_the_caller():
    def requests():
        yield 1
        raise gpujoin.KeyDtypeError("bad batch 2")

    def method(reqs, metadata, timeout):
        return FakeCall(reqs)

    with pytest.raises(gpujoin.KeyDtypeError, match="bad batch 2"):
        list(run_stream(method, requests(), max_inflight=2, metadata=(), timeout=None))


def test_leaving_early_cancels_the_call():
    calls = []

    def method(reqs, metadata, timeout):
        calls.append(FakeCall(reqs))
        return calls[-1]

    for _ in run_stream(method, iter(range(100)), max_inflight=2, metadata=(), timeout=None):
        break
    assert calls[0].cancelled


def test_rpc_errors_become_typed_errors():
    class Failed(grpc.RpcError):
        def code(self):
            return grpc.StatusCode.RESOURCE_EXHAUSTED

        def details(self):
            return "over --max-inflight-batches"

    def method(reqs, metadata, timeout):
        def gen():
            raise Failed()
            yield  # pragma: no cover
        return type("Call", (), {"__iter__": lambda s: gen(), "cancel": lambda s: None})()

    with pytest.raises(gpujoin.ResourceExhausted, match="max-inflight") as e:
        list(run_stream(method, iter([1]), max_inflight=1, metadata=(), timeout=None))
    assert e.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert e.value.message == "over --max-inflight-batches"
