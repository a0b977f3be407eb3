"""Client.lookup and its stream and DataFrame forms: pipelined Lookup batches."""
import collections
from typing import Any, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import columns as _columns
from . import keys as _keys
from . import wire as _wire
from ._common import _u32
from ._proto import pb
from .errors import Internal, InvalidArgument, from_batch_error
from .results import LookupResult


class _LookupCalls:
    """The Lookup calls, a mixin of gpujoin.Client (which supplies the
    connection and _describe_for_query)."""

    def _lookup_answers(self, index: str, select: List[str], probes: bool, match_counts: bool,
                        max_probe_count: int, batches: Iterable[_keys.WireKeys],
                        timeout: Optional[float]) -> Iterator[Tuple[Any, int]]:
        """Streams the key batches (wire keys) and yields (answer, rows) per batch,
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

        `keys` must suit the index's key type (gpujoin.keys: integers of any
        integer dtype whose every value fits it, else KeyValueError naming
        the first row that does not; float, bool and str KeyDtypeError); for
        an index with a key schema, one column of str or bytes, a mapping
        name -> column, a DataFrame or a list of columns (a null in a key
        column is missing). They are sent in batches of
        `batch_rows` with at most `max_inflight` unanswered. A batch the server
        refuses raises its Error (with `.batch` set). `index_version` is the
        version the last batch ran on.
        """
        select = list(select)
        info = self._describe_for_query(index, select)
        wire = _keys.query_keys(keys, info)
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
            rows = self._rows_per_batch(batch_rows, row_bytes, _keys.row_bytes(wire))
            batches = (wire[start:stop]
                       for start, stop in _keys.batch_ranges(wire, rows, self._limit - 4096))
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
                w = _keys.query_keys(keys, info, f"batches[{i}]")
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
        out.mutation_sequence = r.mutation_sequence

    def lookup_frame(self, index: str, keys: Any, *, on: Union[str, Sequence[str], None] = None,
                     select: Sequence[str] = (), **kwargs):
        """lookup() as a pandas DataFrame. `keys` is keys as lookup() takes them
        (the frame has a `key` column, or the key columns by name), or a
        DataFrame whose columns `on` hold the keys: one name, or a list of
        names in key column order for a composite key (the frame is that
        DataFrame with `value`, `found`, ... and the selected columns appended)."""
        if on is not None:
            r = self.lookup(index, _keys.frame_keys(keys, on), select=select, **kwargs)
            extra = r.to_pandas()
            extra.index = keys.index
            return keys.join(extra, rsuffix="_right")
        return self.lookup(index, keys, select=select, **kwargs).to_pandas(keys)
