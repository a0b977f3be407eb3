"""Bidirectional streams with a bounded number of batches in flight.

gRPC Python pulls a call's requests from an iterator on its own thread. The
iterator here waits on a window of `max_inflight` batches: a request is
handed out only after the answer to the batch `max_inflight` before it has
been read, so a large input is never serialised far ahead of the server (and
memory holds at most a few batches). The window opens again when a batch's
last response arrives (`finishes`; a join answer may span several messages).
"""
import threading
from typing import Any, Callable, Iterable, Iterator, List, Optional, Sequence, Tuple

import grpc

from .errors import from_rpc_error


def run_stream(method: Callable[..., Any], requests: Iterable[Any], *, max_inflight: int,
               metadata: Sequence[Tuple[str, str]], timeout: Optional[float],
               finishes: Callable[[Any], bool] = lambda r: True) -> Iterator[Any]:
    """Calls the stream-stream `method` with `requests` and yields its responses.

    Raises the Error subclass of the call's status when it fails, or the
    exception `requests` raised while it was read (the stream is then closed
    after the batches already sent). Leaving the loop early cancels the call.
    """
    if max_inflight < 1:
        raise ValueError(f"max_inflight must be at least 1, got {max_inflight}")
    window = threading.Semaphore(max_inflight)
    stop = threading.Event()
    failure: List[BaseException] = []

    def pull():
        try:
            for request in requests:
                window.acquire()
                if stop.is_set():
                    return
                yield request
        except Exception as e:  # surfaced on the calling thread below
            failure.append(e)

    call = method(pull(), metadata=metadata, timeout=timeout)
    try:
        for response in call:
            if finishes(response):
                window.release()
            yield response
    except grpc.RpcError as e:
        if failure:
            raise failure[0]
        raise from_rpc_error(e) from None
    finally:
        stop.set()
        window.release(max_inflight + 1)  # wake the request thread if it waits
        call.cancel()
    if failure:
        raise failure[0]
