"""Client.build_index: an index built from whole arrays, streamed in chunks."""
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import grpc
import numpy as np

from . import columns as _columns
from . import keys as _keys
from ._common import (_DUPLICATES, _KEY_TYPE_ENUM, _PLACEMENTS, DEFAULT_CHUNK_ROWS, _choice, _key_type_name,
                      _set_keys)
from ._proto import pb
from .errors import InvalidArgument, KeyDtypeError, from_rpc_error
from .results import IndexInfo


def _build_keys(keys: Any, key_type: Any, key_columns: Any
                ) -> Tuple[_keys.WireKeys, Optional[np.ndarray], str, List[_keys.KeyColumnSpec]]:
    """(wire keys, validity of masked integer keys, key type, key schema) of a build."""
    kt = _key_type_name(key_type) if key_type is not None else None
    if key_columns is not None or kt == _keys.COLUMNS or (
            kt is None and _keys.is_key_columns(keys)):
        if kt not in (None, _keys.COLUMNS):
            raise InvalidArgument(f"key_type {kt!r} and key_columns exclude each other: an index "
                                  "with key columns has key_type 'columns'")
        schema, wire = _keys.build_key_columns(keys, key_columns)
        return wire, None, _keys.COLUMNS, schema
    keys, key_valid = _keys.split_masked_keys(keys)
    kt = kt or _keys.infer_key_type(keys)
    return _keys.to_wire(keys, kt), key_valid, kt, []


# Column dtype kinds a frame's payload column may have (numpy's and the pandas
# nullable dtypes'; pandas StringDtype and Categorical are "O").
_PAYLOAD_KINDS = "iufbOUS"


def _frame_columns(frame: Any, key: Union[str, Sequence[str]], payload: Any,
                   payload_types: Optional[Mapping[str, str]]) -> Tuple[Any, Dict[str, Any]]:
    """(keys, payload) of ``build_index(name, frame, key=...)``: the `key`
    column as integer (or one-column key-schema) keys, or the `key` list of
    columns as a key schema's columns by name; every other column a payload
    column of that name."""
    if not (_keys.is_frame(frame) or isinstance(frame, Mapping)):
        raise InvalidArgument(f"key={key!r} names columns of a DataFrame (or a mapping name -> "
                              f"column), but keys is a {type(frame).__name__}")
    if payload is not None:
        raise InvalidArgument("payload and key= exclude each other: with key=, every column of "
                              "the frame but the key is a payload column")
    names = [key] if isinstance(key, str) else list(key)
    keys = _keys.frame_keys(frame, key, "key")
    if not isinstance(key, str):
        keys = {n: frame[n] for n in names}  # a list of names is a key schema, even of one column
    columns = list(frame.columns) if _keys.is_frame(frame) else list(frame)
    for i, c in enumerate(columns):
        if c in columns[:i]:
            raise InvalidArgument(f"keys: the DataFrame has two columns named {c!r}")
    rest = {}
    for c in columns:
        if c in names:
            continue
        col = frame[c]
        dt = getattr(col, "dtype", None)
        if dt is not None and getattr(dt, "kind", "O") not in _PAYLOAD_KINDS and \
                str(c) not in (payload_types or {}):
            raise KeyDtypeError(f"payload column {c!r} of the DataFrame: dtype {dt} has no payload "
                                "type (integer, float, bool, str and bytes columns do, pandas "
                                "nullable dtypes included); convert it, drop it or give "
                                f"payload_types={{{str(c)!r}: ...}}")
        rest[str(c)] = col
    return keys, rest


class _BuildCalls:
    """BuildIndex, a mixin of gpujoin.Client (which supplies the connection)."""

    def build_index(self, name: str, keys: Any, values: Any = None, *,
                    key: Union[str, Sequence[str], None] = None,
                    payload: Optional[Mapping[str, Any]] = None,
                    payload_types: Optional[Mapping[str, str]] = None,
                    key_type: Any = None, key_columns: Any = None,
                    duplicates: str = "lowest_row",
                    capacity: Optional[int] = None, load_factor: Optional[float] = None,
                    expected_rows: Optional[int] = None, max_probe_count: int = 0,
                    first_value: int = 0, valid: Any = None, replace: bool = False,
                    chunk_rows: Optional[int] = None, wait_durable: bool = False,
                    max_load_factor: Optional[float] = None,
                    placement: str = "partitioned",
                    timeout: Optional[float] = None) -> IndexInfo:
        """Builds (or with ``replace=True`` rebuilds) an index from keys and returns its IndexInfo.

        Args:
            keys: a numpy integer array or a sequence of ints (a masked array's
                masked rows are not inserted, as ``valid``); or, for an index
                with a key schema, string, bytes or composite keys: one column
                of str or bytes, a mapping name -> column, a DataFrame or a list
                of columns (gpujoin.keys). A row with a null in a key column is
                not inserted (an invalid row). Integer keys of any integer dtype
                are checked by value against the key type (KeyValueError names
                the first row that does not fit); a pandas nullable dtype's NA
                rows are not inserted, as masked rows. With ``key=``, a pandas
                DataFrame (or a mapping name -> column) holding the keys and
                the payload.
            key: the DataFrame's key column: one name (integer keys, or one
                string/bytes key column), or a list of names (a key schema,
                its columns in that order, as key_columns). Every other column
                becomes a payload column of the same name, typed as payload
                columns are (int64, float64, bool, str -> string, bytes ->
                binary, nullable dtypes with their nulls; ``payload_types``
                overrides); ``payload=`` is then refused. Without ``key=``, a
                DataFrame as `keys` is all key columns (a key schema).
            values: optional uint32 value per key; default ``first_value + row``.
            payload: columns stored beside the index, name -> array (numpy,
                masked, pandas Series or a sequence with None for nulls; see
                gpujoin.columns), one row per key.
            payload_types: type names overriding the inferred payload types
                ("uint32", "int32", "uint64", "int64", "float32", "float64",
                "bool", "string", "binary").
            key_type: "uint32", "uint64" or "columns" (a key schema); default
                "columns" for key_columns or string, bytes or composite keys,
                else from the keys' dtype (64-bit integers: uint64) or, for a
                sequence, its values.
            key_columns: the key schema, 1 to 8 key columns in order: a
                sequence of (name, type) pairs or a mapping name -> type, types
                "string", "binary", "int32", "int64", "uint32", "uint64" (e.g.
                ``[("tenant", "string"), ("order_id", "int64")]``); the keys are
                converted to it. Default: the keys' own columns (names of a
                mapping or DataFrame, else "key" / "key0", "key1", ...; types
                of their values: str -> string, bytes -> binary, int -> int64).
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
            max_load_factor: the load factor past which upsert() grows the table
                (0 < f <= 1; default the server's, 0.8).
            placement: through gpujoin-router or ``gpujoind --devices``:
                "partitioned" (each shard holds the keys the hash gives it) or
                "replicated" (every shard holds every row, and each lookup or
                join batch runs whole on one of them: small, hot indexes). A
                server of one device stores it and reports it.

        Raises KeyDtypeError/KeyValueError for keys that cannot be sent as the key
        type or do not match key_columns (see gpujoin.keys) and the server's
        errors as Error subclasses.
        """
        if key is not None:
            keys, payload = _frame_columns(keys, key, payload, payload_types)
        wire, key_valid, kt, schema = _build_keys(keys, key_type, key_columns)
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
            wait_durable=wait_durable, max_load_factor=max_load_factor or 0.0,
            duplicates=_choice(_DUPLICATES, duplicates, "duplicates"),
            placement=_choice(_PLACEMENTS, placement, "placement"),
            payload=[pb.PayloadColumnSpec(name=e.name, type=_columns.TYPE_NUMBERS[e.type_name])
                     for e in encoded],
            key_columns=[pb.KeyColumnSpec(name=k.name, type=_columns.TYPE_NUMBERS[k.type])
                         for k in schema])
        stub = self._connected()
        extra = (4 if vals is not None else 0) + (4 if key_valid is not None else 0) + \
            sum(e.row_bytes for e in encoded)
        rows = chunk_rows or max(1, min(DEFAULT_CHUNK_ROWS,
                                        int((self._limit // 2) // (_keys.row_bytes(wire) + extra))))
        # Key columns' rows vary in size: a chunk is cut where its bytes would pass a message.
        ranges = _keys.batch_ranges(wire, rows, self._limit - 4096, row_extra=extra)
        failure: List[BaseException] = []

        def messages():
            try:
                yield pb.BuildIndexRequest(spec=spec)
                for start, stop in ranges:
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
