"""Client.upsert, Client.delete and Client.mutate: changes to a live index,
streamed as Mutate requests that each fit a message and the server's
``--max-mutation-rows``.

Each request is applied atomically (a lookup sees all of it or none); a call
whose input needs several requests is atomic per request, not as a whole. The
requests carry the deletes first, then the upserts in input order, so the
call's effect is that of one batch: every delete before any upsert, the last
occurrence of a key winning (lowest_row) or the rows appended in order
(keep_all).
"""
import threading
from typing import Any, List, Mapping, Optional, Tuple

import numpy as np

from . import columns as _columns
from . import keys as _keys
from ._common import DEFAULT_CHUNK_ROWS, _set_keys
from ._proto import pb
from .errors import Error, Internal, InvalidArgument, from_batch_error
from .results import IndexInfo, MutateResult


def _cumulative_key_bytes(wire: _keys.WireKeys) -> np.ndarray:
    """Wire bytes of rows [0, i) of keys, for i in 0..len(wire)."""
    if isinstance(wire, np.ndarray):
        return wire.dtype.itemsize * np.arange(len(wire) + 1, dtype=np.float64)
    return wire.cumulative_bytes()


def plan_requests(delete_bytes: Optional[np.ndarray], upsert_bytes: Optional[np.ndarray],
                  max_rows: int, max_bytes: int, delete_overhead: int = 64,
                  upsert_overhead: int = 64) -> List[Tuple[int, int, int, int]]:
    """(delete start, delete stop, upsert start, upsert stop) of each request:
    at most `max_rows` rows and `max_bytes` wire bytes each (the cumulative byte
    counts of the delete and upsert rows, None for no rows, plus the fields'
    headers, `delete_overhead` and `upsert_overhead` per request), deletes
    first, a request holding the last deletes taking the first upserts.
    InvalidArgument when one row alone passes `max_bytes`."""
    nd = 0 if delete_bytes is None else len(delete_bytes) - 1
    nu = 0 if upsert_bytes is None else len(upsert_bytes) - 1

    def fit(cum: np.ndarray, pos: int, rows: int, budget: float) -> int:
        # The most rows from `pos` whose bytes stay within `budget`.
        stop = int(np.searchsorted(cum, cum[pos] + budget, side="right")) - 1
        return max(0, min(rows, stop - pos))

    out = []
    d = u = 0
    while d < nd or u < nu:
        budget, rows, take_d, take_u = float(max_bytes), max_rows, 0, 0
        if d < nd:
            take_d = fit(delete_bytes, d, min(rows, nd - d), budget - delete_overhead)
            if take_d == 0:
                raise InvalidArgument(f"delete_keys: row {d}'s key takes "
                                      f"{delete_bytes[d + 1] - delete_bytes[d]:.0f} bytes, more "
                                      f"than a request to the server carries ({max_bytes})")
            budget -= delete_bytes[d + take_d] - delete_bytes[d] + delete_overhead
            rows -= take_d
        if d + take_d == nd and u < nu and rows > 0:
            take_u = fit(upsert_bytes, u, min(rows, nu - u), budget - upsert_overhead)
            if take_u == 0 and take_d == 0:
                raise InvalidArgument(f"upsert row {u} (its key, value and payload) takes "
                                      f"{upsert_bytes[u + 1] - upsert_bytes[u]:.0f} bytes, more "
                                      f"than a request to the server carries ({max_bytes})")
        out.append((d, d + take_d, u, u + take_u))
        d += take_d
        u += take_u
    return out


class _MutateCalls:
    """The Mutate calls, a mixin of gpujoin.Client (which supplies the connection)."""

    def upsert(self, index: str, keys: Any, values: Any = None,
               payload: Optional[Mapping[str, Any]] = None, *, batch_rows: Optional[int] = None,
               timeout: Optional[float] = None) -> MutateResult:
        """Inserts or updates rows of the live index `index` (Mutate) and
        returns what was applied (a MutateResult: counts, mutation_sequence).

        Args:
            keys: the keys as lookup() takes them for this index (gpujoin.keys):
                integers of the index's key type, or for a key schema one column
                of str or bytes, a mapping name -> column, a DataFrame or a list
                of columns.
            values: one uint32 value per key, for an index built with explicit
                values (required then); a row-ID index takes none (its new rows
                get the next row IDs, ``IndexInfo.next_row_id`` on).
            payload: name -> column (numpy, masked, pandas Series, sequence with
                None for nulls, or a DataFrame's columns), one row per key, for
                every payload column of the index (required), converted to the
                type the index stores.
            batch_rows: most upsert rows per request (default the server's
                ``max_mutation_rows``, within the message limit).

        A lowest_row index inserts a new key or assigns a present one (the last
        occurrence of a key in the call wins); a keep_all index appends the rows
        to their keys' groups. An input that needs several requests is applied
        atomically per request; a request the server refuses raises its Error
        (``.batch`` its position, ``.result`` a MutateResult of the requests
        answered before and after it, which were applied)."""
        return self.mutate(index, upsert_keys=keys, values=values, payload=payload,
                           batch_rows=batch_rows, timeout=timeout)

    def delete(self, index: str, keys: Any, *, batch_rows: Optional[int] = None,
               timeout: Optional[float] = None) -> MutateResult:
        """Deletes keys from the live index `index` (every row of each key;
        absent keys are counted in ``not_found_keys``) and returns what was
        applied. `keys` as upsert() takes them."""
        return self.mutate(index, delete_keys=keys, batch_rows=batch_rows, timeout=timeout)

    def mutate(self, index: str, *, upsert_keys: Any = None, values: Any = None,
               payload: Optional[Mapping[str, Any]] = None, delete_keys: Any = None,
               batch_rows: Optional[int] = None, timeout: Optional[float] = None) -> MutateResult:
        """Deletes `delete_keys` and upserts `upsert_keys` (with `values` and
        `payload`, as upsert() takes them) in one call: deletes first. An input
        that fits one request is one atomic batch; a larger one is split (see
        upsert()). Everything is checked against the index's description
        before anything is sent."""
        info = self.describe(index)
        up = None if upsert_keys is None else _keys.query_keys(upsert_keys, info, "upsert_keys")
        dels = None if delete_keys is None else _keys.query_keys(delete_keys, info, "delete_keys")
        n = 0 if up is None else len(up)
        vals = self._mutate_values(info, values, n)
        encoded = self._mutate_payload(info, payload, n)
        if up is not None and n == 0:
            up = None
        if dels is not None and len(dels) == 0:
            dels = None
        # Until a request is applied: the index as described.
        out = MutateResult(mutation_sequence=info.mutation_sequence, index_version=info.version,
                           capacity=info.capacity, load_factor=info.load_factor,
                           statistics=info.statistics)
        if up is None and dels is None:
            return out

        max_rows = batch_rows or DEFAULT_CHUNK_ROWS
        if max_rows < 1:
            raise InvalidArgument(f"batch_rows must be at least 1, got {max_rows}")
        if self._max_mutation_rows:
            max_rows = min(max_rows, self._max_mutation_rows)
        upsert_bytes = None
        if up is not None:
            upsert_bytes = _cumulative_key_bytes(up) + sum(
                (e.cumulative_bytes() for e in encoded), np.zeros(n + 1))
            if vals is not None:
                upsert_bytes = upsert_bytes + 4 * np.arange(n + 1)
        # Every column (a key column, values, a payload column) has its headers.
        key_columns = len(info.key_columns) or 1
        plan = plan_requests(None if dels is None else _cumulative_key_bytes(dels), upsert_bytes,
                             max_rows, self._limit - 4096,
                             delete_overhead=64 * key_columns,
                             upsert_overhead=64 * (key_columns + 1 + len(encoded)))

        stop = threading.Event()  # a request was refused: send no more

        def requests():
            for b, (d0, d1, u0, u1) in enumerate(plan):
                if stop.is_set():
                    return
                r = pb.MutateRequest(index=index, batch_id=b)
                if u1 > u0:
                    _set_keys(r, up[u0:u1])
                    if vals is not None:
                        r.values.packed = vals[u0:u1].tobytes()
                    for e in encoded:
                        r.payload.append(e.chunk(pb, u0, u1))
                if d1 > d0:
                    _set_delete_keys(r, dels[d0:d1])
                yield r

        first = None
        try:
            for b, r in enumerate(self._stream("Mutate", requests(), timeout=timeout)):
                if r.batch_id != b:
                    raise Internal(f"mutate answer {b} carries batch_id {r.batch_id}")
                if r.HasField("error"):
                    if first is None:
                        first = from_batch_error(r.error, b)
                        stop.set()
                    continue
                out.add(r)
        except Error as e:  # the stream broke: what the requests before applied
            e.result = out
            raise
        if first is not None:
            first.result = out
            raise first
        return out

    @staticmethod
    def _mutate_values(info: IndexInfo, values: Any, rows: int) -> Optional[np.ndarray]:
        """The upsert values as uint32, checked against the index's kind of values."""
        if info.explicit_values:
            if values is None:
                if rows == 0:
                    return None
                raise InvalidArgument(f"values: index {info.name!r} has explicit values: give one "
                                      "uint32 value per upsert key")
            vals = _keys.u32_column(values, "values")
            if len(vals) != rows:
                raise InvalidArgument(f"values: {len(vals)} rows, but upsert_keys has {rows}")
            return vals
        if values is not None:
            raise InvalidArgument(f"values: index {info.name!r} has row-ID values (built without "
                                  "explicit values): upserted rows get the next row IDs (from "
                                  f"{info.next_row_id}); pass no values")
        return None

    @staticmethod
    def _mutate_payload(info: IndexInfo, payload: Optional[Mapping[str, Any]],
                        rows: int) -> List["_columns.EncodedColumn"]:
        """Every payload column of the index, converted to its stored type."""
        given = dict(payload.items()) if payload is not None else {}
        stored = [p.name for p in info.payload]
        for name in given:
            if name not in stored:
                listed = f"payload: {', '.join(stored)}" if stored else "it stores no payload"
                raise InvalidArgument(f"payload {name!r}: index {info.name!r} has no payload "
                                      f"column {name!r} ({listed})")
        if rows == 0:
            if any(len(c) for c in given.values()):
                raise InvalidArgument("payload given without upsert keys")
            return []
        encoded = []
        for p in info.payload:
            if p.name not in given:
                raise InvalidArgument(f"payload: column {p.name!r} ({p.type}) of index "
                                      f"{info.name!r} is missing; an upsert carries every "
                                      "payload column of the index")
            e = _columns.encode_column(p.name, given[p.name], p.type,
                                       what=f"payload {p.name!r} ({p.type})")
            if e.length != rows:
                raise InvalidArgument(f"payload {p.name!r}: {e.length} rows, but upsert_keys "
                                      f"has {rows}")
            encoded.append(e)
        return encoded


def _set_delete_keys(r, wire: _keys.WireKeys) -> None:
    """Sets delete_keys, delete_keys64 or delete_key_columns of a MutateRequest."""
    if isinstance(wire, _keys.KeyColumns):
        r.delete_key_columns.extend(wire.messages(pb))
    elif wire.dtype.itemsize == 8:
        r.delete_keys64.packed = wire.tobytes()
    else:
        r.delete_keys.packed = wire.tobytes()
