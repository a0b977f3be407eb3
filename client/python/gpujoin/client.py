"""The gpujoin client: numpy arrays in and out of a gpujoind server.

::

    import numpy as np, gpujoin
    with gpujoin.Client("127.0.0.1:50051") as c:
        c.build_index("ids", np.array([17, 4242, 99], np.uint32), replace=True)
        r = c.lookup("ids", np.array([4242, 8], np.uint32))
        print(r.values, r.found)          # [1 4294967295] [ True False]

Large inputs are split into batches (``batch_rows``) and streamed with at most
``max_inflight`` batches unanswered; answers are reassembled into one result
(a join answer the server continued over several messages included). Message
limits come from the server's GetServerInfo, so batches of any size the
server takes are also received. Failures raise :class:`gpujoin.Error`
subclasses named after their gRPC code.
"""
import collections
import os
import threading
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import grpc
import numpy as np

from . import columns as _columns
from . import keys as _keys
from . import wire as _wire
from ._proto import pb, pb_grpc
from .errors import (Aborted, Internal, InvalidArgument, KeyDtypeError, ResourceExhausted,
                     from_batch_error, from_rpc_error)
from .results import (AggregateResult, DataFile, DropResult, IndexInfo, JoinResult,
                      LookupResult, QueryStatistics, SaveResult, ServerInfo)
from .streaming import run_stream

#: Rows per Lookup/Join batch unless a call or the Client says otherwise
#: (the size gpujoin-loadtest uses by default).
DEFAULT_BATCH_ROWS = 1 << 16
#: Rows per BuildIndex chunk and Aggregate/Hash batch.
DEFAULT_CHUNK_ROWS = 1 << 20
#: The largest pair capacity the server takes for one left batch.
MAX_CAPACITY = 1 << 31

_JOIN_KINDS = {"inner": 1, "left": 2, "left_outer": 2, "semi": 3, "left_semi": 3, "anti": 4,
               "left_anti": 4}
_AGGREGATE_OPS = {"count": 1, "sum": 2, "min": 3, "max": 4, "mean": 5}
_DUPLICATES = {"lowest_row": 1, "keep_all": 2}
_KEY_TYPE_ENUM = {"uint32": 1, "uint64": 2}

# Typed aggregate values (AggregateRequest.typed_values), where the API has them:
# numpy (kind, width) -> the column type sent; float32 keeps the `values` path.
_HAS_TYPED_AGGREGATE = "typed_values" in pb.AggregateRequest.DESCRIPTOR.fields_by_name
_AGGREGATE_TYPES = {("i", 1): "int32", ("i", 2): "int32", ("i", 4): "int32", ("i", 8): "int64",
                    ("u", 1): "uint32", ("u", 2): "uint32", ("u", 4): "uint32",
                    ("u", 8): "uint64", ("f", 8): "float64"}

PathOrBytes = Union[str, bytes, os.PathLike]


def _read_pem(value: Optional[PathOrBytes]) -> Optional[bytes]:
    """PEM bytes as given, or read from a path."""
    if value is None or isinstance(value, bytes):
        return value
    with open(value, "rb") as f:
        return f.read()


def _key_type_name(key_type: Any) -> str:
    if key_type in _keys.KEY_TYPES:
        return key_type
    try:
        name = np.dtype(key_type).name
    except TypeError:
        name = str(key_type)
    if name not in _keys.KEY_TYPES:
        raise InvalidArgument(f"key_type must be 'uint32' or 'uint64', got {key_type!r}")
    return name


def _choice(table: Mapping[str, int], value: str, what: str) -> int:
    try:
        return table[value]
    except KeyError:
        raise InvalidArgument(f"{what} must be one of {sorted(table)}, got {value!r}") from None


def _set_keys(target, wire: np.ndarray) -> None:
    """Sets `keys` or `keys64` of a LookupRequest/LeftBatch/BuildChunk to packed bytes."""
    if wire.dtype.itemsize == 8:
        target.keys64.packed = wire.tobytes()
    else:
        target.keys.packed = wire.tobytes()


def _u32(data: bytes, rows: int, field: str) -> np.ndarray:
    a = np.frombuffer(data, "<u4")
    if len(a) != rows:
        raise Internal(f"server sent {len(a)} rows of {field} for {rows}")
    return a


class _JoinBatch:
    """The reassembled answer to one left batch (its continued parts appended)."""

    def __init__(self, select: Sequence[Tuple[str, str]]):
        self.left: List[np.ndarray] = []
        self.right: List[np.ndarray] = []
        self.builders = [_columns.ColumnBuilder(n, t) for n, t in select]
        self.pairs = 0
        self.count = 0
        self.capacity = 0
        self.overflow = False
        self.found: List[np.ndarray] = []
        self.probes: List[np.ndarray] = []
        self.statistics = QueryStatistics()
        self.started = False
        self.versions = set()  # index versions the answer's parts ran on

    def add(self, part) -> None:
        if not self.started:
            if part.first_pair != 0:
                raise Internal(f"join answer starts at pair {part.first_pair}, not 0")
            self.started = True
            self.count, self.capacity, self.overflow = part.count, part.capacity, part.overflow
            if part.statistics is not None:
                self.statistics.merge(part.statistics)
            if part.found:
                self.found.append(np.frombuffer(part.found, np.uint8).astype(bool))
            if part.probes:
                self.probes.append(np.frombuffer(part.probes, "<u4").copy())
        elif part.first_pair != self.pairs:
            raise Internal(f"join answer continues at pair {part.first_pair} after {self.pairs}")
        left = np.frombuffer(part.left_rows, "<u4")
        right = np.frombuffer(part.right_rows, "<u4")
        if len(left) != len(right):
            raise Internal(f"server sent {len(left)} left rows but {len(right)} right rows")
        if len(part.columns) != len(self.builders):
            raise Internal(f"join answer carries {len(part.columns)} columns, not "
                           f"{len(self.builders)}")
        for b, col in zip(self.builders, part.columns):
            if b.add(col, "join column") != len(left):
                raise Internal(f"server sent column {b.name!r} of {col.length} rows for "
                               f"{len(left)} pairs")
        self.left.append(left)
        self.right.append(right)
        self.pairs += len(left)

    def check_complete(self, count_only: bool) -> None:
        want = 0 if count_only else min(self.count, self.capacity)
        if self.pairs != want:
            raise Internal(f"join answer holds {self.pairs} pairs, not min(count {self.count}, "
                           f"capacity {self.capacity}) = {want}")

    def absorb(self, other: "_JoinBatch") -> None:
        """Appends a later batch's answer (the halves of a re-sent batch)."""
        self.left += other.left
        self.right += other.right
        for mine, theirs in zip(self.builders, other.builders):
            mine._data += theirs._data
            mine._valid += theirs._valid
        self.pairs += other.pairs
        self.count += other.count
        self.capacity += other.capacity
        self.overflow = self.overflow or other.overflow
        self.found += other.found
        self.probes += other.probes
        self.statistics.merge(other.statistics)
        self.versions |= other.versions


class Client:
    """A connection to one gpujoind.

    Args:
        target: host:port (or any gRPC target, e.g. ``unix:/path``).
        tls: use TLS (implied by root_certificates or a client certificate).
        root_certificates: PEM roots that sign the server's certificate (bytes or
            a path); None = the system's roots.
        private_key, certificate_chain: PEM key and chain this client presents to
            a server that requires client certificates (``--tls-client-ca``).
        server_name: the name checked against the server's certificate, when it
            differs from the target's host.
        token: bearer token sent with every call (``--auth-token-file``).
        max_inflight: most batches of one stream sent and not yet answered
            (bounded further by the server's ``max_inflight_batches_per_stream``).
        batch_rows: rows per Lookup/Join batch (DEFAULT_BATCH_ROWS; smaller when
            the server's message limit needs it).
        timeout: seconds every call may take (None = no deadline).
        max_message_bytes: the largest message either way; None = the server's
            ``max_message_bytes`` (from GetServerInfo, at the first call).
        options: further gRPC channel options.

    A Client is thread-safe; calls may run concurrently. Close it (or use it
    as a context manager) to release the connection.
    """

    def __init__(self, target: str = "127.0.0.1:50051", *, tls: bool = False,
                 root_certificates: Optional[PathOrBytes] = None,
                 private_key: Optional[PathOrBytes] = None,
                 certificate_chain: Optional[PathOrBytes] = None,
                 server_name: Optional[str] = None, token: Optional[str] = None,
                 max_inflight: int = 4, batch_rows: int = DEFAULT_BATCH_ROWS,
                 timeout: Optional[float] = None, max_message_bytes: Optional[int] = None,
                 options: Sequence[Tuple[str, Any]] = ()):
        if max_inflight < 1:
            raise InvalidArgument(f"max_inflight must be at least 1, got {max_inflight}")
        if batch_rows < 1:
            raise InvalidArgument(f"batch_rows must be at least 1, got {batch_rows}")
        self.target = target
        self._tls = tls or root_certificates is not None or certificate_chain is not None
        self._root = _read_pem(root_certificates)
        self._key = _read_pem(private_key)
        self._chain = _read_pem(certificate_chain)
        if (self._key is None) != (self._chain is None):
            raise InvalidArgument("private_key and certificate_chain go together (mutual TLS)")
        self._server_name = server_name
        self._metadata: Tuple[Tuple[str, str], ...] = (
            (("authorization", f"Bearer {token}"),) if token else ())
        self._max_inflight = max_inflight
        self._batch_rows = batch_rows
        self._timeout = timeout
        self._max_message_bytes = max_message_bytes
        self._options = list(options)
        self._lock = threading.Lock()
        self._channel: Optional[grpc.Channel] = None
        self._stub = None
        self._framed: Dict[str, Any] = {}
        self._limit = 0  # the message limit in use, once connected
        self._result_limit = 0  # the server's --max-result-bytes, once connected
        self._window = max_inflight

    # ------------------------------------------------------------------ connection

    def _make_channel(self, limit: Optional[int]) -> grpc.Channel:
        opts = list(self._options)
        if limit:
            opts += [("grpc.max_send_message_length", limit),
                     ("grpc.max_receive_message_length", limit)]
        if self._server_name:
            opts.append(("grpc.ssl_target_name_override", self._server_name))
        if self._tls:
            creds = grpc.ssl_channel_credentials(self._root, self._key, self._chain)
            return grpc.secure_channel(self.target, creds, opts)
        return grpc.insecure_channel(self.target, opts)

    def _connected(self):
        """The stub, connecting at the first call: GetServerInfo on a first channel
        gives the message limit and stream window, then the channel is made with them."""
        with self._lock:
            if self._stub is not None:
                return self._stub
            channel = self._make_channel(self._max_message_bytes)
            stub = pb_grpc.GpuJoinStub(channel)
            try:
                info = self._unary(stub.GetServerInfo, pb.GetServerInfoRequest())
            except Exception:
                channel.close()
                raise
            limit = self._max_message_bytes or int(info.max_message_bytes) or (4 << 20)
            if not self._max_message_bytes:
                channel.close()
                channel = self._make_channel(min(limit, 0x7FFFFFFF))
                stub = pb_grpc.GpuJoinStub(channel)
            self._limit = min(limit, 0x7FFFFFFF)
            self._result_limit = int(info.max_result_bytes) or self._limit
            if info.max_inflight_batches_per_stream:
                self._window = min(self._max_inflight, int(info.max_inflight_batches_per_stream))
            # Lookup and Join frame their bulk columns themselves (gpujoin.wire):
            # bytes in, views out.
            self._framed = {
                name: channel.stream_stream(f"/gpujoin.v1.GpuJoin/{name}",
                                            request_serializer=None,
                                            response_deserializer=parse)
                for name, parse in (("Lookup", _wire.parse_lookup_response),
                                    ("Join", _wire.parse_join_response))}
            self._channel, self._stub = channel, stub
            return stub

    def close(self) -> None:
        """Closes the connection; later calls connect again."""
        with self._lock:
            if self._channel is not None:
                self._channel.close()
            self._channel, self._stub = None, None

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _unary(self, method, request, timeout: Optional[float] = None):
        try:
            return method(request, metadata=self._metadata,
                          timeout=timeout if timeout is not None else self._timeout)
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None

    def _stream(self, name: str, requests: Iterable[Any], finishes=lambda r: True,
                timeout: Optional[float] = None) -> Iterator[Any]:
        stub = self._connected()
        method = self._framed.get(name) or getattr(stub, name)
        return run_stream(method, requests, max_inflight=self._window,
                          metadata=self._metadata,
                          timeout=timeout if timeout is not None else self._timeout,
                          finishes=finishes)

    def _rows_per_batch(self, batch_rows: Optional[int], answer_row_bytes: float,
                        request_row_bytes: int) -> int:
        """Rows per batch: as asked (else the client's default, at most what keeps an
        answer within half the message limit and half the server's result limit),
        and never more than a request can carry."""
        rows = batch_rows or self._batch_rows
        if rows < 1:
            raise InvalidArgument(f"batch_rows must be at least 1, got {rows}")
        if batch_rows is None:
            room = min(self._limit, self._result_limit) // 2
            rows = min(rows, int(room // max(answer_row_bytes, 1.0)))
        return max(1, min(rows, (self._limit - 4096) // request_row_bytes))

    # ------------------------------------------------------------------ control calls

    def health(self, service: str = "gpujoin.v1.GpuJoin") -> str:
        """The server's grpc.health.v1 status of `service` ("" = the server as a
        whole): "SERVING", "NOT_SERVING" or "SERVICE_UNKNOWN". Health needs no
        token (it stays open for probes)."""
        with self._lock:
            channel = self._channel
        # Health needs no token: a client without one (or not yet connected, which
        # takes GetServerInfo) asks over a channel of its own.
        own = channel is None
        if own:
            channel = self._make_channel(None)
        try:
            check = channel.unary_unary("/grpc.health.v1.Health/Check",
                                        request_serializer=None, response_deserializer=None)
            name = service.encode()
            answer = self._unary(check, b"\x0a" + _wire._varint(len(name)) + name if name else b"")
        finally:
            if own:
                channel.close()
        status = 0
        for field, wire, value, _ in _wire._fields(answer, 0, len(answer)):
            if field == 1 and wire == 0:
                status = value
        return {1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}.get(status, "UNKNOWN")

    def server_info(self) -> ServerInfo:
        """The server's version, backend, device, memory and limits (GetServerInfo)."""
        return ServerInfo.from_proto(self._unary(self._connected().GetServerInfo,
                                                 pb.GetServerInfoRequest()))

    def list(self) -> List[IndexInfo]:
        """Every live index, ordered by name (ListIndexes)."""
        r = self._unary(self._connected().ListIndexes, pb.ListIndexesRequest())
        return [IndexInfo.from_proto(i) for i in r.indexes]

    def describe(self, name: str) -> IndexInfo:
        """One index (DescribeIndex); NotFound when it is not live."""
        r = self._unary(self._connected().DescribeIndex, pb.DescribeIndexRequest(name=name))
        return IndexInfo.from_proto(r.index)

    info = describe

    def drop(self, name: str) -> DropResult:
        """Drops an index (DropIndex); NotFound when it is not live."""
        r = self._unary(self._connected().DropIndex, pb.DropIndexRequest(name=name))
        return DropResult(r.dropped_version, r.freed_bytes)

    # ------------------------------------------------------------- snapshots

    def save_index(self, name: str, file: str = "") -> SaveResult:
        """Writes the live version of index ``name`` to ``file`` under the
        server's --data-dir now (SaveIndex) and returns what was written.

        ``file`` defaults to "<name>.gjsnap", the index's snapshot, which the
        server loads at start. Any other name is a copy, never loaded at start
        and bounded with the other copies by the server's --max-copy-bytes; it
        may not end in ".gjsnap" (another index's snapshot), start with "." or
        contain ".gjsnap.tmp-" (the server's temporary files).

        Raises FailedPrecondition without --data-dir, InvalidArgument for a
        file name those rules refuse, NotFound for an index that is not live,
        ResourceExhausted past --max-snapshot-bytes, --max-copy-bytes or a full
        disk.
        """
        r = self._unary(self._connected().SaveIndex, pb.SaveIndexRequest(name=name, file=file))
        return SaveResult(r.file, r.bytes, r.version, r.seconds)

    def load_index(self, name: str, file: str = "", *, replace: bool = False) -> IndexInfo:
        """Loads ``file`` under the server's --data-dir (default "<name>.gjsnap";
        a copy or another index's snapshot also load) as index ``name``
        (LoadIndex) and returns its IndexInfo; ``replace`` loads over a live
        index of that name, as a new version.

        Raises FailedPrecondition without --data-dir (or for a newer format, or
        a file that is not a regular file), AlreadyExists for a live name
        without ``replace``, NotFound for a missing file, DataLoss for a
        corrupt one, OutOfRange for a truncated one, ResourceExhausted when
        the index does not fit the server's memory budget.
        """
        r = self._unary(self._connected().LoadIndex,
                        pb.LoadIndexRequest(name=name, file=file, replace=replace))
        return IndexInfo.from_proto(r.index)

    def list_files(self) -> List[DataFile]:
        """The snapshots and copies under the server's --data-dir (ListFiles),
        ordered by name: each DataFile's ``index`` names the index whose
        snapshot ("<index>.gjsnap") the file is, "" for a copy, and ``live``
        says whether that index is live now. Raises FailedPrecondition
        without --data-dir."""
        r = self._unary(self._connected().ListFiles, pb.ListFilesRequest())
        return [DataFile(f.file, f.bytes, f.modified_unix_millis, f.index, f.live)
                for f in r.files]

    def delete_file(self, file: str) -> int:
        """Deletes ``file`` under the server's --data-dir (DeleteFile): a copy,
        or the snapshot of an index that is not live; returns its size in
        bytes. Raises FailedPrecondition for the snapshot of a live index (drop
        the index instead; the drop deletes it) and without --data-dir,
        NotFound when there is no such file, InvalidArgument for a name that
        is not a plain file name."""
        return self._unary(self._connected().DeleteFile, pb.DeleteFileRequest(file=file)).bytes

    # ------------------------------------------------------------------ build

    def build_index(self, name: str, keys: Any, values: Any = None, *,
                    payload: Optional[Mapping[str, Any]] = None,
                    payload_types: Optional[Mapping[str, str]] = None,
                    key_type: Any = None, duplicates: str = "lowest_row",
                    capacity: Optional[int] = None, load_factor: Optional[float] = None,
                    expected_rows: Optional[int] = None, max_probe_count: int = 0,
                    first_value: int = 0, valid: Any = None, replace: bool = False,
                    chunk_rows: Optional[int] = None, wait_durable: bool = False,
                    timeout: Optional[float] = None) -> IndexInfo:
        """Builds (or with ``replace=True`` rebuilds) an index from keys and returns its IndexInfo.

        Args:
            keys: a numpy integer array or a sequence of ints. A masked array's
                masked rows are not inserted (as ``valid``).
            values: optional uint32 value per key; default ``first_value + row``.
            payload: columns stored beside the index, name -> array (numpy,
                masked, pandas Series or a sequence with None for nulls; see
                gpujoin.columns), one row per key.
            payload_types: type names overriding the inferred payload types
                ("uint32", "int32", "uint64", "int64", "float32", "float64",
                "bool", "string", "binary").
            key_type: "uint32" or "uint64"; default from the keys' dtype (64-bit
                integers: uint64) or, for a sequence, its values.
            duplicates: "lowest_row" (the lowest row of a key wins) or "keep_all"
                (every row is kept: a multi-value index).
            capacity: table slots (a power of two); default chosen by the server
                from the rows at ``load_factor`` (default 0.5).
            valid: optional bool per key; False rows are not inserted (batch mode).
            replace: rebuild a live name instead of raising AlreadyExists.
            chunk_rows: rows per BuildChunk message (default: DEFAULT_CHUNK_ROWS
                within the message limit).
            wait_durable: return only once the index's snapshot is written and
                fsync'd (a server with --data-dir; FailedPrecondition without
                one). If the write fails, the index is installed and serving,
                and the server's error is raised.

        Raises KeyDtypeError/KeyValueError for keys that cannot be sent as the key
        type (see gpujoin.keys) and the server's errors as Error subclasses.
        """
        keys, key_valid = _keys.split_masked_keys(keys)
        kt = _key_type_name(key_type) if key_type is not None else _keys.infer_key_type(keys)
        wire = _keys.to_wire(keys, kt)
        n = len(wire)
        if valid is not None:
            valid = np.asarray(valid, dtype=bool)
            if valid.shape != (n,):
                raise InvalidArgument(f"valid: {valid.shape} rows, but keys has {n}")
            key_valid = valid if key_valid is None else (valid & key_valid)
        vals = None
        if values is not None:
            if key_valid is not None:
                raise InvalidArgument("values and valid (or masked keys) exclude each other: "
                                      "explicit values cannot skip rows")
            vals = _keys.u32_column(values, "values")
            if len(vals) != n:
                raise InvalidArgument(f"values: {len(vals)} rows, but keys has {n}")
        types = dict(payload_types or {})
        encoded = []
        for col_name, col in (payload or {}).items():
            e = _columns.encode_column(col_name, col, types.pop(col_name, None))
            if e.length != n:
                raise InvalidArgument(f"payload {col_name!r}: {e.length} rows, but keys has {n}")
            encoded.append(e)
        if types:
            raise InvalidArgument(f"payload_types names columns not in payload: {sorted(types)}")
        spec = pb.IndexSpec(
            name=name, capacity=capacity or 0,
            expected_rows=expected_rows if expected_rows is not None else (0 if capacity else n),
            target_load_factor=load_factor or 0.0, max_probe_count=max_probe_count,
            first_value=first_value, explicit_values=vals is not None,
            batch_mode=key_valid is not None, replace=replace, key_type=_KEY_TYPE_ENUM[kt],
            wait_durable=wait_durable,
            duplicates=_choice(_DUPLICATES, duplicates, "duplicates"),
            payload=[pb.PayloadColumnSpec(name=e.name, type=_columns.TYPE_NUMBERS[e.type_name])
                     for e in encoded])
        stub = self._connected()
        row_bytes = wire.dtype.itemsize + (4 if vals is not None else 0) + \
            (4 if key_valid is not None else 0) + sum(e.row_bytes for e in encoded)
        rows = chunk_rows or max(1, min(DEFAULT_CHUNK_ROWS, int((self._limit // 2) // row_bytes)))
        failure: List[BaseException] = []

        def messages():
            try:
                yield pb.BuildIndexRequest(spec=spec)
                for start in range(0, n, rows):
                    stop = min(n, start + rows)
                    chunk = pb.BuildChunk()
                    _set_keys(chunk, wire[start:stop])
                    if vals is not None:
                        chunk.values.packed = vals[start:stop].tobytes()
                    if key_valid is not None:
                        chunk.row_base = first_value + start
                        chunk.validity.packed = key_valid[start:stop].astype("<u4").tobytes()
                    for e in encoded:
                        chunk.payload.append(e.chunk(pb, start, stop))
                    yield pb.BuildIndexRequest(chunk=chunk)
            except Exception as e:  # raised on the calling thread below
                failure.append(e)
                raise

        try:
            r = stub.BuildIndex(messages(), metadata=self._metadata,
                                timeout=timeout if timeout is not None else self._timeout)
        except grpc.RpcError as e:
            if failure:
                raise failure[0]
            raise from_rpc_error(e) from None
        return IndexInfo.from_proto(r.index)

    # ------------------------------------------------------------------ lookup

    def _describe_for_query(self, index: str, select: Sequence[str]) -> IndexInfo:
        info = self.describe(index)
        for s in select:
            if info.payload_type(s) is None:
                names = ", ".join(repr(p.name) for p in info.payload) or "none"
                raise InvalidArgument(f"select: index {index!r} has no payload column {s!r} "
                                      f"(its payload columns: {names})")
        return info

    def _lookup_answers(self, index: str, select: List[str], probes: bool, match_counts: bool,
                        max_probe_count: int, batches: Iterable[np.ndarray],
                        timeout: Optional[float]) -> Iterator[Tuple[Any, int]]:
        """Streams the key batches (wire arrays) and yields (answer, rows) per batch,
        in order, after checking the answer's batch_id and in-band error."""
        rows_sent: "collections.deque[int]" = collections.deque()

        def requests():
            for b, keys in enumerate(batches):
                header = pb.LookupRequest(index=index, batch_id=b, want_probes=probes,
                                          want_match_counts=match_counts,
                                          max_probe_count=max_probe_count,
                                          select=select).SerializeToString()
                rows_sent.append(len(keys))
                yield _wire.lookup_request(header, keys)

        for b, r in enumerate(self._stream("Lookup", requests(), timeout=timeout)):
            if r.error is not None:
                raise from_batch_error(r.error, b)
            if r.batch_id != b:
                raise Internal(f"lookup answer {b} carries batch_id {r.batch_id}")
            yield r, rows_sent.popleft()

    def lookup(self, index: str, keys: Any, *, select: Sequence[str] = (), probes: bool = False,
               match_counts: bool = False, max_probe_count: int = 0,
               batch_rows: Optional[int] = None, timeout: Optional[float] = None) -> LookupResult:
        """Looks up every key: its value (NO_MATCH where missing), found mask,
        probes and match counts when asked, and the selected payload columns.

        `keys` must suit the index's key type (gpujoin.keys: an int64 array for a
        uint32 index raises KeyDtypeError); they are sent in batches of
        `batch_rows` with at most `max_inflight` unanswered. A batch the server
        refuses raises its Error (with `.batch` set). `index_version` is the
        version the last batch ran on.
        """
        select = list(select)
        info = self._describe_for_query(index, select)
        wire = _keys.to_wire(keys, info.key_type)
        n = len(wire)
        types = [(s, info.payload_type(s)) for s in select]
        out = LookupResult(values=np.empty(n, np.uint32), found=np.empty(n, bool),
                           probes=np.empty(n, np.uint32) if probes else None,
                           match_counts=np.empty(n, np.uint32) if match_counts else None,
                           index_version=info.version)
        builders = [_columns.ColumnBuilder(s, t) for s, t in types]
        if n:
            row_bytes = 5 + 4 * probes + 4 * match_counts + sum(
                64 if t in _columns.VARIABLE else 8 for _, t in types)
            rows = self._rows_per_batch(batch_rows, row_bytes, wire.dtype.itemsize)
            batches = (wire[start:start + rows] for start in range(0, n, rows))
            start = 0
            for r, m in self._lookup_answers(index, select, probes, match_counts,
                                             max_probe_count, batches, timeout):
                self._take_lookup(r, m, out, start, builders)
                start += m
        out.columns = {b.name: b.finish() for b in builders}
        return out

    def lookup_stream(self, index: str, batches: Iterable[Any], *, select: Sequence[str] = (),
                      probes: bool = False, match_counts: bool = False,
                      max_probe_count: int = 0,
                      timeout: Optional[float] = None) -> Iterator[LookupResult]:
        """Looks up a stream of key batches (an iterable of arrays or sequences,
        each one request) and yields one LookupResult per batch, in order, as
        the answers arrive: a pipeline's memory holds at most `max_inflight`
        batches beyond the one it is working on, whatever the input's length.
        Each batch is checked as lookup() checks its keys (when it is sent)."""
        select = list(select)
        info = self._describe_for_query(index, select)
        types = [(s, info.payload_type(s)) for s in select]
        limit = self._limit - 4096

        def wires():
            for i, keys in enumerate(batches):
                w = _keys.to_wire(keys, info.key_type, f"batches[{i}]")
                if w.nbytes > limit:
                    raise InvalidArgument(f"batches[{i}]: {len(w)} keys ({w.nbytes} bytes) do not "
                                          f"fit the server's {self._limit}-byte messages; "
                                          "split the batch")
                yield w

        for r, m in self._lookup_answers(index, select, probes, match_counts, max_probe_count,
                                         wires(), timeout):
            out = LookupResult(values=np.empty(m, np.uint32), found=np.empty(m, bool),
                               probes=np.empty(m, np.uint32) if probes else None,
                               match_counts=np.empty(m, np.uint32) if match_counts else None)
            builders = [_columns.ColumnBuilder(s, t) for s, t in types]
            self._take_lookup(r, m, out, 0, builders)
            out.columns = {b.name: b.finish() for b in builders}
            yield out

    @staticmethod
    def _take_lookup(r, m: int, out: LookupResult, start: int,
                     builders: List[_columns.ColumnBuilder]) -> None:
        """Copies one answer of `m` rows into `out` at `start`; adds its columns to `builders`."""
        out.values[start:start + m] = _u32(r.values, m, "values")
        f = np.frombuffer(r.found, np.uint8)
        if len(f) != m:
            raise Internal(f"server sent {len(f)} rows of found for {m}")
        out.found[start:start + m] = f.view(bool)
        if out.probes is not None:
            out.probes[start:start + m] = _u32(r.probes, m, "probes")
        if out.match_counts is not None:
            out.match_counts[start:start + m] = _u32(r.match_counts, m, "match_counts")
        if len(r.columns) != len(builders):
            raise Internal(f"lookup answer carries {len(r.columns)} columns, not {len(builders)}")
        for bld, col in zip(builders, r.columns):
            if bld.add(col, "lookup column") != m:
                raise Internal(f"server sent column {bld.name!r} of {col.length} rows for {m} keys")
        if r.statistics is not None:
            out.statistics.merge(r.statistics)
        out.index_version = r.index_version

    def lookup_frame(self, index: str, keys: Any, *, on: Optional[str] = None,
                     select: Sequence[str] = (), **kwargs):
        """lookup() as a pandas DataFrame. `keys` is an array (the frame has a
        `key` column), or a DataFrame whose column `on` holds the keys (the
        frame is that DataFrame with `value`, `found`, ... and the selected
        columns appended)."""
        if on is not None:
            r = self.lookup(index, keys[on].to_numpy(), select=select, **kwargs)
            extra = r.to_pandas()
            extra.index = keys.index
            return keys.join(extra, rsuffix="_right")
        return self.lookup(index, keys, select=select, **kwargs).to_pandas(keys)

    # ------------------------------------------------------------------ join

    def _join_plan(self, index: str, kind: str, select: List[str]):
        """(kind number, index info, selected (name, type)s, pairs per left row at most)."""
        kind_number = _choice(_JOIN_KINDS, kind, "kind")
        info = self._describe_for_query(index, select)
        types = [(s, info.payload_type(s)) for s in select]
        # At most one pair per left row unless an inner or outer join meets a keep_all index.
        group = max(1, info.statistics.max_group_rows) if (
            info.duplicates == "keep_all" and kind_number in (1, 2)) else 1
        return kind_number, info, types, group

    def join(self, index: str, keys: Any, *, kind: str = "inner", select: Sequence[str] = (),
             left_rows: Any = None, capacity: Optional[int] = None, count_only: bool = False,
             found: bool = False, probes: bool = False, max_probe_count: int = 0,
             batch_rows: Optional[int] = None, timeout: Optional[float] = None) -> JoinResult:
        """Joins left keys with the index: pairs (left row, right row) in left
        row order, then the index's source-row order, with the selected payload
        columns per pair.

        Args:
            kind: "inner", "left" (left outer), "semi" or "anti" (also spelled
                "left_outer", "left_semi", "left_anti").
            left_rows: optional uint32 left row IDs per key; default the key's
                position in `keys`.
            capacity: pairs per batch of `batch_rows` keys; beyond it a batch is
                cut (`overflow`, `count` exact). Default: every pair (on a
                keep_all index the server allocates what the groups need; a
                batch cut by the server's --max-result-bytes is re-sent in halves).
            count_only: only count the pairs (`count`; no pairs or columns).
            found, probes: per left row, concatenated over the batches.

        Raises Aborted when the index was rebuilt while the join ran (its
        batches saw different versions).
        """
        select = list(select)
        kind_number, info, types, group = self._join_plan(index, kind, select)
        wire = _keys.to_wire(keys, info.key_type)
        n = len(wire)
        if n > 0xFFFFFFFF:
            raise InvalidArgument(f"join has {n} left rows; left row IDs are uint32")
        explicit = None
        if left_rows is not None:
            explicit = _keys.u32_column(left_rows, "left_rows")
            if len(explicit) != n:
                raise InvalidArgument(f"left_rows: {len(explicit)} rows, but keys has {n}")
        auto = capacity is None and not count_only
        row_bytes = 8 * group + found + 4 * probes + sum(
            (64 if t in _columns.VARIABLE else 8) * group for _, t in types)
        rows = self._rows_per_batch(batch_rows, row_bytes,
                                    wire.dtype.itemsize + (4 if explicit is not None else 0))
        out = _JoinBatch(types)
        ranges = [(s, min(n, s + rows), min(MAX_CAPACITY, (min(n, s + rows) - s) * group)
                   if auto else (capacity or 0)) for s in range(0, n, rows)]
        for part in self._join_ranges(index, wire, explicit, ranges, kind_number, select, types,
                                      count_only, found, probes, max_probe_count, auto, timeout):
            out.absorb(part)
        if len(out.versions) > 1:
            raise Aborted(f"join of index {index!r} ran on index versions "
                          f"{sorted(out.versions)}: the index was rebuilt during the join; "
                          "run it again")
        return self._join_result(out, found, probes, info.version)

    @staticmethod
    def _join_result(out: _JoinBatch, found: bool, probes: bool, version: int) -> JoinResult:
        """The JoinResult of an assembled answer (its parts joined, one copy)."""
        return JoinResult(
            left_rows=np.concatenate([np.zeros(0, np.uint32)] + out.left).astype(np.uint32),
            right_rows=np.concatenate([np.zeros(0, np.uint32)] + out.right).astype(np.uint32),
            columns={b.name: b.finish() for b in out.builders}, count=out.count,
            overflow=out.overflow,
            found=np.concatenate([np.zeros(0, bool)] + out.found) if found else None,
            probes=(np.concatenate([np.zeros(0, np.uint32)] + out.probes).astype(np.uint32)
                    if probes else None),
            statistics=out.statistics, index_version=max(out.versions, default=version))

    def join_stream(self, index: str, batches: Iterable[Any], *, kind: str = "inner",
                    select: Sequence[str] = (), found: bool = False, probes: bool = False,
                    max_probe_count: int = 0,
                    timeout: Optional[float] = None) -> Iterator[JoinResult]:
        """Joins a stream of left key batches (an iterable of arrays or
        sequences, each one request) and yields one JoinResult per batch, in
        order, as the answers arrive, with every pair of the batch (a batch
        the server's --max-result-bytes cut is re-sent in halves). Left rows
        number the keys across all batches (the first key of the third batch
        is the rows of the first two). Memory holds at most `max_inflight`
        batches beyond the one the caller works on. Each result's
        `index_version` is the version its batch ran on."""
        select = list(select)
        kind_number, info, types, group = self._join_plan(index, kind, select)
        limit = self._limit - 4096
        sent: "collections.deque[Tuple[np.ndarray, int]]" = collections.deque()

        def requests():
            first = 0
            for i, keys in enumerate(batches):
                w = _keys.to_wire(keys, info.key_type, f"batches[{i}]")
                if w.nbytes > limit:
                    raise InvalidArgument(f"batches[{i}]: {len(w)} keys ({w.nbytes} bytes) do not "
                                          f"fit the server's {self._limit}-byte messages; "
                                          "split the batch")
                if first + len(w) > 0x100000000:
                    raise InvalidArgument(f"batches[{i}]: left rows beyond 2^32 - 1 (left row "
                                          "IDs are uint32)")
                lb = pb.LeftBatch(capacity=min(MAX_CAPACITY, len(w) * group), want_found=found,
                                  want_probes=probes, first_left_row=first)
                header = pb.JoinRequest(index=index, batch_id=i, select=select, kind=kind_number,
                                        max_probe_count=max_probe_count).SerializeToString()
                sent.append((w, first))
                first += len(w)
                yield _wire.join_request(header, lb.SerializeToString(), w)

        for a in self._join_answers(requests(), types, False, timeout):
            w, first = sent.popleft()
            if a.count > a.pairs:
                explicit = np.arange(first, first + len(w), dtype=np.uint32)
                a = self._resend_cut(index, w, explicit, 0, len(w), a, kind_number, select, types,
                                     found, probes, max_probe_count, timeout)
                if len(a.versions) > 1:
                    raise Aborted(f"join of index {index!r}: a re-sent batch ran on index "
                                  f"versions {sorted(a.versions)}; run it again")
            yield self._join_result(a, found, probes, info.version)

    def _join_answers(self, requests: Iterable[bytes], types, count_only: bool,
                      timeout: Optional[float]) -> Iterator[_JoinBatch]:
        """Streams one-batch JoinRequests and yields each batch's reassembled answer
        (its continued parts appended), in order."""
        current: Optional[_JoinBatch] = None
        version = None
        b = 0
        for r in self._stream("Join", requests, finishes=lambda r: not r.more, timeout=timeout):
            if r.error is not None:
                raise from_batch_error(r.error, b)
            if r.batch_id != b:
                raise Internal(f"join answer {b} carries batch_id {r.batch_id}")
            if current is None:
                current = _JoinBatch(types)
                version = r.index_version
            elif r.index_version != version:
                raise Internal(f"join answer parts ran on index versions {version} and "
                               f"{r.index_version}")
            for part in r.results:
                if part.batch != 0:
                    raise Internal(f"join answer holds batch {part.batch} of a one-batch request")
                current.add(part)
            if not r.more:
                current.check_complete(count_only)
                current.versions.add(r.index_version)
                yield current
                current = None
                b += 1

    def _join_ranges(self, index, wire, explicit, ranges, kind_number, select, types, count_only,
                     found, probes, max_probe_count, auto, timeout) -> List[_JoinBatch]:
        """Answers of the left batches `ranges` ((start, stop, capacity) each), in
        order. With `auto` capacity, a batch the server cut short (count above the
        pairs it could hold) is re-sent as two halves, each with capacity = its count."""
        if not ranges:
            return []

        def requests():
            for b, (start, stop, cap) in enumerate(ranges):
                lb = pb.LeftBatch(capacity=cap, want_found=found, want_probes=probes,
                                  count_only=count_only)
                if explicit is not None:
                    lb.left_rows.packed = explicit[start:stop].tobytes()
                else:
                    lb.first_left_row = start
                header = pb.JoinRequest(index=index, batch_id=b, select=select, kind=kind_number,
                                        max_probe_count=max_probe_count).SerializeToString()
                yield _wire.join_request(header, lb.SerializeToString(), wire[start:stop])

        answers = list(self._join_answers(requests(), types, count_only, timeout))
        if len(answers) != len(ranges):
            raise Internal(f"join stream answered {len(answers)} of {len(ranges)} batches")
        if not auto:
            return answers
        return [a if a.count <= a.pairs else
                self._resend_cut(index, wire, explicit, start, stop, a, kind_number, select,
                                 types, found, probes, max_probe_count, timeout)
                for (start, stop, _), a in zip(ranges, answers)]

    def _resend_cut(self, index, wire, explicit, start, stop, a: _JoinBatch, kind_number, select,
                    types, found, probes, max_probe_count, timeout) -> _JoinBatch:
        """The whole answer of left rows [start, stop), whose answer `a` the server
        cut short: the rows re-sent as two halves (recursively), each with capacity
        `a.count`, an upper bound of its pairs."""
        if stop - start == 1:
            row = int(explicit[start]) if explicit is not None else start
            raise ResourceExhausted(
                f"join of index {index!r}: left row {row} matches {a.count} rows, more pairs than "
                f"the server's --max-result-bytes lets one batch hold ({a.pairs}); select fewer "
                "columns or raise the limit")
        mid = (start + stop) // 2
        cap = min(MAX_CAPACITY, max(1, a.count))
        halves = self._join_ranges(index, wire, explicit, [(start, mid, cap), (mid, stop, cap)],
                                   kind_number, select, types, False, found, probes,
                                   max_probe_count, True, timeout)
        whole = _JoinBatch(types)
        for h in halves:
            whole.absorb(h)
        if whole.count != a.count:
            raise Aborted(f"join of index {index!r}: rows [{start}, {stop}) yielded {a.count} "
                          f"pairs, then {whole.count}: the index changed during the join; "
                          "run it again")
        return whole

    def join_frame(self, index: str, left: Any, *, on: str, kind: str = "inner",
                   select: Sequence[str] = (), **kwargs):
        """join() of a DataFrame's key column `on` as a DataFrame: the left
        frame's rows of each pair (repeated per match; unmatched left rows of an
        outer join once) with `right_row` and the selected columns appended."""
        r = self.join(index, left[on].to_numpy(), kind=kind, select=select, **kwargs)
        pairs = r.to_pandas()
        rows = left.iloc[r.left_rows.astype(np.int64)].reset_index(drop=True)
        for c in pairs.columns[1:]:
            rows[c if c not in rows.columns else f"{c}_right"] = pairs[c]
        return rows

    # ------------------------------------------------------------------ aggregate and hash

    def aggregate(self, op: str, keys: Any, values: Any = None, *, groups: int,
                  mask: Any = None, contributing_rows: bool = False,
                  batch_rows: Optional[int] = None,
                  timeout: Optional[float] = None) -> AggregateResult:
        """Grouped aggregation by dense uint32 group key (keys >= groups are
        ignored): op "count", "sum", "min", "max" or "mean" of `values`
        (required except for count) over the rows where `mask` is true. Batches
        accumulate on the server into one result per group.

        Null values do not contribute to their group (not to the sum, min, max,
        mean or contributing rows), as SQL's aggregates skip nulls: the masked
        rows of a numpy masked array, and the NA rows of a pandas Series (a
        nullable Int64/UInt32/Float64 column's NA, a float column's NaN). Typed
        values send them as the request's validity bitmap; float32 values leave
        them out through the mask.

        float32 values aggregate in float32 (`values`: float32 per group).
        Integer and float64 values, where the server's API has typed values,
        aggregate in their own type (int8/16/32 as int32, uint8/16/32 as uint32):
        integer sums are exact in 64 bits (`overflow` marks the groups whose sum
        did not fit), min/max keep the value type with empty integer groups
        masked, means are float64. Without typed values in the API, values are
        converted to float32.

        `contributing_rows` also returns each group's contributing rows (uint32,
        counted mod 2^32 as the server's reference; typed requests: exact uint64).
        """
        op_number = _choice(_AGGREGATE_OPS, op, "op")
        gk = _keys.u32_column(keys, "keys")
        n = len(gk)
        include = None
        if mask is not None:
            include = np.asarray(mask, dtype=bool)
            if include.shape != (n,):
                raise InvalidArgument(f"mask: {include.shape} rows, but keys has {n}")
        f32 = typed = None
        typed_name = None
        valid = None  # typed values: False where a value is null (typed_values.validity)
        if op == "count":
            if values is not None:
                raise InvalidArgument("values: must not be given for op 'count'")
        else:
            if values is None:
                raise InvalidArgument(f"values: required for op {op!r}")
            values, null = _columns.numbers_and_nulls(values)
            arr = np.asarray(values)
            if arr.dtype.kind not in "iuf":
                raise KeyDtypeError(f"values: dtype {arr.dtype} is not numeric")
            if arr.shape != (n,):
                raise InvalidArgument(f"values: {arr.shape} rows, but keys has {n}")
            typed_name = _AGGREGATE_TYPES.get((arr.dtype.kind, arr.dtype.itemsize))
            if typed_name is not None and _HAS_TYPED_AGGREGATE:
                typed = np.ascontiguousarray(arr.astype(_columns.FIXED_DTYPES[typed_name]))
                if null is not None:
                    valid = ~null
            else:
                typed_name = None
                f32 = np.ascontiguousarray(arr.astype("<f4"))
                if null is not None:  # the float32 path has no validity: nulls are masked out
                    include = ~null if include is None else (include & ~null)
        rows = batch_rows or DEFAULT_CHUNK_ROWS
        self._connected()
        rows = max(1, min(rows, (self._limit // 2) // 16))
        # Typed requests carry exact totals (total_counts64), so no batch needs its own part.
        per_batch = contributing_rows and typed is None

        def requests():
            for b, start in enumerate(range(0, max(n, 1), rows)):
                req = pb.AggregateRequest(op=op_number, groups=groups, batch_id=b,
                                          accumulate_only=not per_batch)
                if n:
                    req.keys.packed = gk[start:start + rows].tobytes()
                    if f32 is not None:
                        req.values.packed = f32[start:start + rows].tobytes()
                    if include is not None:
                        req.mask.packed = include[start:start + rows].astype("<u4").tobytes()
                else:
                    req.keys.values.SetInParent()
                    if f32 is not None:
                        req.values.values.SetInParent()
                if typed is not None:
                    part = typed[start:start + rows]
                    req.typed_values.SetInParent()
                    req.typed_values.type = _columns.TYPE_NUMBERS[typed_name]
                    req.typed_values.length = len(part)
                    req.typed_values.data = part.tobytes()
                    if valid is not None and not valid[start:start + rows].all():
                        req.typed_values.validity = _columns._bitmap(valid[start:start + rows])
                yield req

        last = None
        contributing = np.zeros(groups, np.uint32) if per_batch else None
        total_rows = 0
        for b, r in enumerate(self._stream("Aggregate", requests(), timeout=timeout)):
            if r.HasField("error"):
                raise from_batch_error(r.error, b)
            if contributing is not None:
                contributing += _u32(r.contributing_rows, groups, "contributing_rows")
            total_rows += r.rows
            last = r
        result = AggregateResult(op=op, contributing_rows=contributing, rows=total_rows)
        if typed is not None:
            col = last.total_typed_result
            out = _columns.ColumnBuilder("total_typed_result",
                                         _columns.TYPE_NAMES.get(col.type, str(col.type)))
            if out.add(col, "aggregate result") != groups:
                raise Internal(f"server sent {col.length} typed results for {groups} groups")
            result.values = out.finish()
            if contributing_rows:
                c64 = np.frombuffer(last.total_counts64, "<u8")
                if len(c64) != groups:
                    raise Internal(f"server sent {len(c64)} total_counts64 for {groups} groups")
                result.contributing_rows = c64.astype(np.uint64)
            if op in ("sum", "mean") and typed_name != "float64":
                result.overflow = (_columns._unbitmap(last.total_overflow, groups)
                                   if last.total_overflow else np.zeros(groups, bool))
        elif op == "count":
            result.counts = _u32(last.total_counts, groups, "total_counts").copy()
        else:
            v = np.frombuffer(last.total_values, "<f4")
            if len(v) != groups:
                raise Internal(f"server sent {len(v)} total_values for {groups} groups")
            result.values = v.astype(np.float32)
        return result

    def hash(self, *columns: Any, bits: int = 64, batch_rows: Optional[int] = None,
             timeout: Optional[float] = None) -> np.ndarray:
        """Row-wise hash (docs/hashing.md) of one or more equally long columns
        combined: uint64 (bits=64) or uint32 (bits=32) per row; a masked array
        (masked where any column is null) when a row is null. Columns are
        hashed in their own type: (u)int8/16/32/64, float16/32/64, bool, and
        strings (UTF-8) or bytes; see gpujoin.columns for the inputs."""
        if bits not in (32, 64):
            raise InvalidArgument(f"bits must be 32 or 64, got {bits}")
        if not columns:
            raise InvalidArgument("hash needs at least one column")
        enc = [_columns.encode_hash_column(f"columns[{i}]", c) for i, c in enumerate(columns)]
        n = enc[0].length
        for e in enc[1:]:
            if e.length != n:
                raise InvalidArgument(f"{e.name}: {e.length} rows, but columns[0] has {n}")
        self._connected()
        row_bytes = 8 + sum(e.row_bytes for e in enc)
        rows = batch_rows or max(1, min(DEFAULT_CHUNK_ROWS, int((self._limit // 2) // row_bytes)))
        width = "<u8" if bits == 64 else "<u4"
        out = np.empty(n, np.dtype(width).newbyteorder("="))
        valid = np.ones(n, bool)
        nulls = 0

        def requests():
            for b, start in enumerate(range(0, n, rows)):
                stop = min(n, start + rows)
                yield pb.HashRequest(columns=[e.hash_chunk(pb, start, stop) for e in enc],
                                     bits=bits, batch_id=b)

        for b, r in enumerate(self._stream("Hash", requests(), timeout=timeout)):
            if r.HasField("error"):
                raise from_batch_error(r.error, b)
            start = b * rows
            m = min(rows, n - start)
            h = np.frombuffer(r.hashes, width)
            if len(h) != m:
                raise Internal(f"server sent {len(h)} hashes for {m} rows")
            out[start:start + m] = h
            if r.null_count:
                valid[start:start + m] = _columns._unbitmap(r.validity, m)
                nulls += r.null_count
        return np.ma.MaskedArray(out, mask=~valid) if nulls else out
