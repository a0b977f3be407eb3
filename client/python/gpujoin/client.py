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

This module holds the connection and the control and snapshot calls; the
data calls come from one private module each (``_build``, ``_lookup``,
``_join``, ``_mutate``: upsert and delete, ``_aggregate``: aggregate and hash,
``_query``: query plans), mixed into :class:`Client`.
"""
import os
import threading
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import grpc

from . import wire as _wire
from ._aggregate import _ComputeCalls
from ._build import _BuildCalls
# The defaults, and whether the API has typed aggregate values, stay importable from here.
from ._common import (_HAS_TYPED_AGGREGATE, DEFAULT_BATCH_ROWS, DEFAULT_CHUNK_ROWS,  # noqa: F401
                      MAX_CAPACITY)
from ._join import _JoinCalls
from ._lookup import _LookupCalls
from ._mutate import _MutateCalls
from ._proto import pb, pb_grpc
from ._query import _QueryCalls
from .errors import InvalidArgument, from_rpc_error
from .results import DataFile, DropResult, IndexInfo, SaveResult, ServerInfo
from .streaming import run_stream

PathOrBytes = Union[str, bytes, os.PathLike]


def _read_pem(value: Optional[PathOrBytes]) -> Optional[bytes]:
    """PEM bytes as given, or read from a path."""
    if value is None or isinstance(value, bytes):
        return value
    with open(value, "rb") as f:
        return f.read()


class Client(_BuildCalls, _LookupCalls, _JoinCalls, _MutateCalls, _ComputeCalls, _QueryCalls):
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
        self._max_mutation_rows = 0  # the server's --max-mutation-rows, once connected
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
            self._max_mutation_rows = int(getattr(info, "max_mutation_rows", 0))
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

    def _describe_for_query(self, index: str, select: Sequence[str]) -> IndexInfo:
        """The index's IndexInfo; InvalidArgument when it lacks a selected payload column."""
        info = self.describe(index)
        for s in select:
            if info.payload_type(s) is None:
                names = ", ".join(repr(p.name) for p in info.payload) or "none"
                raise InvalidArgument(f"select: index {index!r} has no payload column {s!r} "
                                      f"(its payload columns: {names})")
        return info
