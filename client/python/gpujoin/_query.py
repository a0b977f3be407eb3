"""Client.query and the Query stream behind Query.run: the input converted
to typed columns and cut into batches that fit a message, the plan sent with
the first, the answers the server continued over several messages
(``more``, ``first_row``) reassembled, and an aggregate plan's groups read
from the ``final`` message that answers the half-close."""
from typing import Any, Iterator, List, Mapping, Optional, Tuple

import numpy as np

from . import columns as _columns
from ._common import DEFAULT_BATCH_ROWS
from ._proto import pb
from .errors import Internal, InvalidArgument, ResourceExhausted, from_batch_error
from .query import Query
from .results import PlanStatistics, QueryResult, StepStatistics

# Wire bytes a Column message takes beside its buffers (name, type, length,
# the fields' tags and lengths), and a QueryRequest beside its columns.
_COLUMN_OVERHEAD = 64
_REQUEST_OVERHEAD = 4096


def _is_frame(obj: Any) -> bool:
    return hasattr(obj, "columns") and hasattr(obj, "iloc") and hasattr(obj, "dtypes")


class QueryInput:
    """A query's input rows converted for the wire: one EncodedColumn per
    input column, all of `rows` rows; `was_frame` says whether a DataFrame
    was given (run() then returns one)."""

    def __init__(self, data: Any, types: Optional[Mapping[str, str]] = None):
        self.was_frame = _is_frame(data)
        if self.was_frame:
            items = [(k, data.iloc[:, i]) for i, k in enumerate(data.columns)]
        elif isinstance(data, Mapping):
            items = list(data.items())
        else:
            raise InvalidArgument(f"query input: a pandas DataFrame or a mapping name -> column is "
                                  f"needed, got {type(data).__name__}")
        if not items:
            raise InvalidArgument("query input: no columns")
        types = dict(types or {})
        self.columns: List[_columns.EncodedColumn] = []
        seen = set()
        for name, col in items:
            if not isinstance(name, str) or not name:
                raise InvalidArgument(f"query input: column names must be non-empty str, "
                                      f"got {name!r}")
            if name in seen:
                raise InvalidArgument(f"query input: column {name!r} is given twice")
            seen.add(name)
            self.columns.append(_columns.encode_column(name, col, types.pop(name, None),
                                                       what=f"query column {name!r}"))
        if types:
            raise InvalidArgument(f"types names columns not in the input: {sorted(types)}")
        self.rows = self.columns[0].length
        for c in self.columns[1:]:
            if c.length != self.rows:
                raise InvalidArgument(f"query column {c.name!r}: {c.length} rows, but "
                                      f"{self.columns[0].name!r} has {self.rows}")

    def cumulative_bytes(self) -> np.ndarray:
        """Wire bytes of rows [0, i) of every column together, for i in 0..rows."""
        return sum((c.cumulative_bytes() for c in self.columns), np.zeros(self.rows + 1))

    def batch(self, start: int, stop: int) -> List[Any]:
        """The proto Columns of rows [start, stop)."""
        return [c.chunk(pb, start, stop) for c in self.columns]


def batch_ranges(cumulative: np.ndarray, max_rows: int, max_bytes: float) -> List[Tuple[int, int]]:
    """[start, stop) ranges covering the rows whose wire bytes `cumulative`
    gives (rows + 1 values), each of at most `max_rows` rows and `max_bytes`
    bytes; one empty range for no rows. InvalidArgument when one row alone
    needs more than `max_bytes`."""
    if len(cumulative) == 1:
        return [(0, 0)]
    return _columns.cut_by_bytes(cumulative, max_rows, max_bytes, lambda start: InvalidArgument(
        f"query input: row {start} takes {cumulative[start + 1] - cumulative[start]:.0f} bytes "
        f"on the wire, more than a message to the server carries ({max_bytes:.0f} bytes)"))


class _Answer:
    """The result rows of a Query stream, collected from its answers in order."""

    def __init__(self):
        self.builders: Optional[List[_columns.ColumnBuilder]] = None
        self.rows = 0

    def add(self, r) -> None:
        """Appends the rows of one QueryResponse (checking its columns' names,
        types and lengths against the earlier ones)."""
        if not r.columns:
            if r.rows:
                raise Internal(f"query answer {r.batch_id} has {r.rows} rows but no columns")
            return
        names = [c.name for c in r.columns]
        if self.builders is None:
            self.builders = [
                _columns.ColumnBuilder(c.name, _columns.TYPE_NAMES.get(c.type, str(c.type)))
                for c in r.columns]
        elif names != [b.name for b in self.builders]:
            raise Internal(f"query answer {r.batch_id} has columns {names}, earlier answers "
                           f"{[b.name for b in self.builders]}")
        for b, c in zip(self.builders, r.columns):
            if b.add(c, "query column") != r.rows:
                raise Internal(f"query answer {r.batch_id}: column {b.name!r} has {c.length} "
                               f"rows, the answer {r.rows}")
        self.rows += r.rows

    def columns(self):
        if self.builders is None:
            return {}
        return {b.name: b.finish() for b in self.builders}


class _QueryCalls:
    """The Query call, a mixin of gpujoin.Client (which supplies the connection)."""

    def query(self, data: Any, *, types: Optional[Mapping[str, str]] = None) -> Query:
        """A Query over the rows of `data` (a pandas DataFrame, or a mapping
        name -> column: numpy arrays, masked arrays, pandas Series or lists
        with None / pandas.NA for nulls; gpujoin.columns gives the types:
        uint8/16/32 -> uint32, int8/16/32 -> int32, int64, uint64, float32,
        float64, bool, str -> string, bytes -> binary; Python ints are int64).
        `types` overrides a column's type by name ("uint32", ..., "string").

        Add steps with .lookup(), .filter(), .aggregate(), .project(),
        .limit(), then .run() (gpujoin.query). The input is converted here:
        a column that cannot be sent raises KeyDtypeError/KeyValueError now.
        """
        return Query(self, QueryInput(data, types))

    def _run_query(self, plan, source: QueryInput, *, batch_rows: Optional[int],
                   timeout: Optional[float]) -> QueryResult:
        """Streams `source` in batches with `plan` on the first one and returns
        the reassembled QueryResult. Without `batch_rows`, a batch the server
        refuses for --max-result-bytes (a keep_all lookup expanded it) runs the
        query again from the start in batches of half its rows."""
        self._connected()
        if batch_rows is not None and batch_rows < 1:
            raise InvalidArgument(f"batch_rows must be at least 1, got {batch_rows}")
        cumulative = source.cumulative_bytes()
        room = self._limit - _REQUEST_OVERHEAD - plan.ByteSize() - \
            sum(_COLUMN_OVERHEAD + len(c.name) for c in source.columns)
        if room <= 0:
            raise InvalidArgument(f"the plan takes {plan.ByteSize()} bytes; the server's messages "
                                  f"hold {self._limit}")
        rows = batch_rows or self._batch_rows or DEFAULT_BATCH_ROWS
        if batch_rows is None and source.rows:
            # A batch's result (its rows, and the payload lookups add) must stay
            # within the server's --max-result-bytes: guess twice the input's row.
            row_bytes = 2 * float(cumulative[-1]) / source.rows + 16
            rows = max(1, min(rows, int(min(self._limit, self._result_limit) // 2 // row_bytes)))
        while True:
            ranges = batch_ranges(cumulative, rows, room)
            try:
                return self._query_stream(plan, source, ranges, timeout)
            except ResourceExhausted as e:
                # The whole query runs again: a limit or an aggregate spans the
                # stream, so the batches after the refused one cannot simply go on.
                cut = e.batch is not None and e.batch < len(ranges) and \
                    "--max-result-bytes" in e.message
                if batch_rows is not None or not cut:
                    raise
                refused = ranges[e.batch][1] - ranges[e.batch][0]
                if refused <= 1:
                    raise
                rows = refused // 2

    def _query_stream(self, plan, source: QueryInput, ranges: List[Tuple[int, int]],
                      timeout: Optional[float]) -> QueryResult:
        """One Query stream of the input's row `ranges`, the plan on the first."""
        has_aggregate = any(s.WhichOneof("step") == "aggregate" for s in plan.steps)

        def requests() -> Iterator[Any]:
            for b, (start, stop) in enumerate(ranges):
                req = pb.QueryRequest(batch_id=b, columns=source.batch(start, stop))
                if b == 0:
                    req.plan.CopyFrom(plan)
                yield req

        answer = _Answer()
        statistics = PlanStatistics()
        expect = 0             # the batch whose answer comes next
        first_row = 0          # rows of that answer read so far
        steps: Optional[List[StepStatistics]] = None
        final_done = False
        for r in self._stream("Query", requests(), finishes=lambda r: not r.more,
                              timeout=timeout):
            if r.HasField("error") and (r.error.code or r.error.message):
                raise from_batch_error(r.error, r.batch_id)
            final = r.final or (r.batch_id == len(ranges) and expect == len(ranges))
            if final_done:
                raise Internal(f"query answer {r.batch_id} arrived after the final answer")
            if final and expect != len(ranges):
                raise Internal(f"query: the final answer arrived after {expect} of "
                               f"{len(ranges)} batches were answered")
            want = len(ranges) if final else expect
            if r.batch_id != want:
                raise Internal(f"query answer carries batch_id {r.batch_id} where {want} was "
                               "expected")
            if r.first_row != first_row:
                raise Internal(f"query answer {r.batch_id} continues at row {r.first_row} after "
                               f"{first_row} rows")
            answer.add(r)
            first_row += r.rows
            if steps is None and r.steps:
                # Continued answers carry the steps once; take the first part that has them.
                steps = [StepStatistics.from_proto(s) for s in r.steps]
            if r.more:
                continue
            if final:
                statistics.final = steps or []
                final_done = True
            else:
                statistics.batches.append(steps or [])
                expect += 1
            first_row, steps = 0, None
        if expect != len(ranges):
            raise Internal(f"query stream ended after {expect} of {len(ranges)} batches were "
                           "answered")
        if has_aggregate and not final_done:
            raise Internal("query stream of an aggregate plan ended without its final answer")
        return QueryResult(columns=answer.columns(), rows=answer.rows, statistics=statistics)
