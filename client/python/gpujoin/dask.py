"""Dask connector: gpujoin lookups and joins over the partitions of a Dask DataFrame.

::

    import dask.dataframe as dd, gpujoin.dask
    events = dd.read_parquet("events/")                      # a column sensor_id
    out = gpujoin.dask.lookup(events, "sensors", on="sensor_id", select=["kind"],
                              address="gpujoind:50051")
    pairs = gpujoin.dask.join(events, "readings", on="sensor_id", how="inner",
                              select=["t"], address="gpujoind:50051")
    out.compute()

Each output partition is :meth:`gpujoin.Client.lookup_frame` (or
:meth:`gpujoin.Client.join_frame`) of the matching input partition, run where
the partition is (a worker of dask.distributed, or any other scheduler). The
partitions, their divisions and the order of rows within a partition are kept.

A worker process holds one :class:`gpujoin.Client` per (address, client
options), made at its first task and shared by its later tasks and threads
(a Client is thread-safe), and closed when the process exits. The task graph
carries only the address and the options, never a Client. ``address`` is any
server of the gpujoin.v1 API: a gpujoind, or a router in front of several.

The result's columns and dtypes (its ``meta``) come from the server on the
calling process, with one DescribeIndex: an unknown index, a missing payload
column or key column, or a bad ``how`` raise there (gpujoin.NotFound,
InvalidArgument, KeyValueError) before any task runs. Errors of a task (the
index dropped meanwhile, ...) reach ``compute()`` as the same gpujoin
exceptions with the server's message.

Payload columns are always pandas' nullable dtypes (Int64, UInt32, Float64,
boolean; string and binary: object with None), whether or not a partition
holds a null, so that every partition has the dtypes of ``meta``.
"""
import atexit
import os
import threading
from typing import Any, Dict, Hashable, Sequence, Tuple, Union

try:
    import dask.dataframe as _dd
except ImportError as _e:  # pragma: no cover - depends on the environment
    raise ImportError(f"gpujoin.dask needs Dask ({_e}); install python3-dask and "
                      "python3-distributed (Debian) or pip install 'dask[distributed]'") from _e

from ._common import _JOIN_KINDS, _choice
from .client import Client

__all__ = ["lookup", "join", "worker_client", "clients_made", "close_clients", "PAYLOAD_DTYPES"]

#: The dtype of a payload column in the connector's frames, by gpujoin column type.
PAYLOAD_DTYPES: Dict[str, Any] = {
    "uint32": "UInt32", "int32": "Int32", "uint64": "UInt64", "int64": "Int64",
    "float32": "Float32", "float64": "Float64", "bool": "boolean",
    "string": object, "binary": object,
}

_lock = threading.Lock()
_clients: Dict[Hashable, Client] = {}
_owner = os.getpid()  # the process whose channels _clients holds
_made = 0  # Clients this process has made (see clients_made)


def _freeze(value: Any) -> Hashable:
    """`value` as a hashable cache key: lists and tuples as tuples, mappings as sorted pairs."""
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    return value


def worker_client(address: str, **client_kwargs) -> Client:
    """This process's gpujoin.Client of `address` and `client_kwargs` (as
    gpujoin.Client takes them), made at the first call and returned to every
    later one with the same arguments, from any thread. Closed at process exit
    (or by close_clients()). A process forked from one that held Clients makes
    its own: gRPC channels do not survive a fork."""
    global _owner, _made
    key = (address, _freeze(client_kwargs))
    try:
        hash(key)
    except TypeError as e:
        raise TypeError(f"gpujoin.dask: client options must be hashable values ({e})") from e
    with _lock:
        if _owner != os.getpid():
            _clients.clear()  # the parent's; closing them here would close its channels
            _owner = os.getpid()
            _made = 0
        c = _clients.get(key)
        if c is None:
            # Making a Client only records its options; it connects at its first call.
            c = _clients[key] = Client(address, **client_kwargs)
            _made += 1
        return c


def clients_made() -> Tuple[int, int]:
    """(Clients this process has made, Clients it holds now)."""
    with _lock:
        return (_made, len(_clients)) if _owner == os.getpid() else (0, 0)


def close_clients() -> None:
    """Closes and forgets this process's cached Clients (run at exit)."""
    with _lock:
        clients = list(_clients.values()) if _owner == os.getpid() else []
        _clients.clear()
    for c in clients:
        c.close()


atexit.register(close_clients)


def _typed(frame, dtypes: Dict[str, Any]):
    """`frame` with its payload columns in the connector's dtypes."""
    return frame.astype(dtypes) if dtypes else frame


def _lookup_partition(part, address: str, client_kwargs: Dict[str, Any], index: str,
                      on: Any, select: Sequence[str], options: Dict[str, Any],
                      dtypes: Dict[str, Any]):
    c = worker_client(address, **client_kwargs)
    return _typed(c.lookup_frame(index, part, on=on, select=select, **options), dtypes)


def _join_partition(part, address: str, client_kwargs: Dict[str, Any], index: str, on: Any,
                    how: str, select: Sequence[str], options: Dict[str, Any],
                    dtypes: Dict[str, Any]):
    c = worker_client(address, **client_kwargs)
    return _typed(c.join_frame(index, part, on=on, kind=how, select=select, keep_index=True,
                               **options), dtypes)


def _check_frame(ddf: Any) -> None:
    if not isinstance(ddf, _dd.DataFrame):
        raise TypeError(f"gpujoin.dask: expected a dask.dataframe.DataFrame, got "
                        f"{type(ddf).__name__}")


def _payload_dtypes(c: Client, index: str, empty, select: Sequence[str]) -> Dict[str, Any]:
    """The connector's dtype of each selected column of `empty` (a result frame
    of no rows, whose selected columns come last, in `select` order, possibly
    renamed with a suffix), from the index's payload types."""
    if not select:
        return {}
    types = {p.name: p.type for p in c.describe(index).payload}
    names = list(empty.columns[len(empty.columns) - len(select):])
    return {n: PAYLOAD_DTYPES[types[s]] for n, s in zip(names, select)}


def lookup(ddf, index: str, *, on: Union[str, Sequence[str]], select: Sequence[str] = (),
           address: str, probes: bool = False, match_counts: bool = False,
           max_probe_count: int = 0, **client_kwargs):
    """Looks up the keys of every partition of `ddf` in `index` on the server
    at `address`: a Dask DataFrame whose every partition is
    ``Client.lookup_frame(index, partition, on=on, select=select)``, i.e. the
    partition's rows, in order, with its index, and `value` (UInt32: NA where
    the key is missing), `found`, `probes`/`match_counts` when asked, then the
    selected payload columns (PAYLOAD_DTYPES; a name the partition already has
    gets the suffix "_right"). Every row is kept (a left lookup); join() with
    how="inner" keeps the matched ones. Same npartitions and divisions as `ddf`.

    Args:
        on: the key column (one name), or the key columns in key order for an
            index with a key schema.
        address: the gpujoin.v1 server (host:port or any gRPC target).
        client_kwargs: gpujoin.Client's options (token, tls, root_certificates,
            timeout, batch_rows, max_inflight, ...), hashable values.
    """
    _check_frame(ddf)
    select = list(select)
    options = dict(probes=probes, match_counts=match_counts, max_probe_count=max_probe_count)
    c = worker_client(address, **client_kwargs)
    empty = c.lookup_frame(index, ddf._meta, on=on, select=select, **options)
    dtypes = _payload_dtypes(c, index, empty, select)
    return ddf.map_partitions(_lookup_partition, address, client_kwargs, index, on, select,
                              options, dtypes, meta=_typed(empty, dtypes), align_dataframes=False,
                              token=f"gpujoin-lookup-{index}")


def join(ddf, index: str, *, on: Union[str, Sequence[str]], select: Sequence[str] = (),
         how: str = "inner", address: str, max_probe_count: int = 0, **client_kwargs):
    """Joins every partition of `ddf` with `index` on the server at `address`:
    a Dask DataFrame whose every partition is ``Client.join_frame(index,
    partition, on=on, kind=how, select=select, keep_index=True)``: the
    partition's row of each pair, in left row order, then the index's source
    row order (a row repeated per match; an unmatched row of a left join once,
    with NA), keeping the row's index label, then `right_row` (UInt32, NA
    without a match) and the selected payload columns (PAYLOAD_DTYPES).

    `how` is "inner", "left", "semi" or "anti" (or the client's spellings
    "left_outer", "left_semi", "left_anti"). As every output row carries the
    index label of its input row, the divisions of `ddf` stay valid and are
    kept (an index label may repeat; a partition may shrink or grow). Other
    arguments as lookup().
    """
    _check_frame(ddf)
    _choice(_JOIN_KINDS, how, "how")
    select = list(select)
    options = dict(max_probe_count=max_probe_count)
    c = worker_client(address, **client_kwargs)
    empty = c.join_frame(index, ddf._meta, on=on, kind=how, select=select, keep_index=True,
                         **options)
    dtypes = _payload_dtypes(c, index, empty, select)
    return ddf.map_partitions(_join_partition, address, client_kwargs, index, on, how, select,
                              options, dtypes, meta=_typed(empty, dtypes), align_dataframes=False,
                              token=f"gpujoin-join-{index}")
