"""Client.aggregate and Client.hash: pipelined Aggregate and Hash batches over
whole arrays."""
from typing import Any, Optional

import numpy as np

from . import columns as _columns
from . import keys as _keys
from ._common import (_AGGREGATE_OPS, _AGGREGATE_TYPES, _HAS_TYPED_AGGREGATE, DEFAULT_CHUNK_ROWS,
                      _choice, _u32)
from ._proto import pb
from .errors import Internal, InvalidArgument, KeyDtypeError, from_batch_error
from .results import AggregateResult


class _ComputeCalls:
    """The Aggregate and Hash calls, a mixin of gpujoin.Client (which
    supplies the connection)."""

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
