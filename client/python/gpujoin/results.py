"""Result types of the gpujoin client: plain dataclasses holding numpy arrays,
each with a ``to_pandas()`` when pandas is importable."""
from dataclasses import dataclass, field, fields
from typing import Any, Dict, List, Optional

import numpy as np

from .keys import KeyColumnSpec, key_input_columns

#: The value of a missing key in a lookup, and the right row of an outer or
#: anti join pair without a match.
NO_MATCH = 0xFFFFFFFF

_KEY_TYPES = {0: "uint32", 1: "uint32", 2: "uint64", 3: "columns"}
_DUPLICATES = {0: "lowest_row", 1: "lowest_row", 2: "keep_all"}
_PLACEMENTS = {0: "partitioned", 1: "replicated"}


def _pandas():
    try:
        import pandas
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(f"to_pandas needs pandas ({e}); install python3-pandas or pandas") from e
    return pandas


def _series(pd, values):
    """A pandas Series of a result column: masked arrays become nullable dtypes;
    str and bytes (object) columns stay object, None for nulls (pandas 3 would
    otherwise infer its `str` dtype, whose nulls are NaN)."""
    if isinstance(values, np.ma.MaskedArray):
        data = np.ma.getdata(values)
        mask = np.ma.getmaskarray(values)
        return pd.Series(pd.array(data, dtype=_nullable(pd, data.dtype)).copy()).mask(mask)
    if isinstance(values, np.ndarray) and values.dtype == object:
        return pd.Series(values, dtype=object)
    return pd.Series(values)


def _nullable(pd, dt: np.dtype) -> str:
    if dt.kind == "b":
        return "boolean"
    if dt.kind == "f":
        return "Float64" if dt.itemsize == 8 else "Float32"
    return {("u", 4): "UInt32", ("u", 8): "UInt64", ("i", 4): "Int32", ("i", 8): "Int64"}[
        (dt.kind, dt.itemsize)]


def _key_array(col) -> np.ndarray:
    """A key column given as an array or a sequence as an array: str and bytes
    sequences as object arrays (a numpy 'S' array would drop trailing NULs)."""
    a = np.asarray(col)
    if a.dtype.kind in "US" and not isinstance(col, np.ndarray):
        a = np.array(list(col), dtype=object)
    return a


def _from_proto(cls, msg, **overrides):
    """A dataclass from the proto message fields of the same names."""
    kw = {}
    for f in fields(cls):
        if f.name in overrides:
            kw[f.name] = overrides[f.name]
        elif hasattr(msg, f.name):
            kw[f.name] = getattr(msg, f.name)
    return cls(**kw)


@dataclass
class QueryStatistics:
    """Per-call totals: found and missing keys (left rows), probes summed and their maximum."""
    found: int = 0
    missing: int = 0
    total_probes: int = 0
    max_probes: int = 0

    def merge(self, s) -> None:
        self.found += s.found
        self.missing += s.missing
        self.total_probes += s.total_probes
        self.max_probes = max(self.max_probes, s.max_probes)


@dataclass
class BuildStatistics:
    unique_keys: int = 0
    duplicate_rows: int = 0
    overflow_rows: int = 0
    invalid_rows: int = 0
    total_probes: int = 0
    max_probes: int = 0
    max_group_rows: int = 0  #: keep_all: most rows kept under one key (else 0)


@dataclass
class PayloadColumnInfo:
    name: str
    type: str        #: "uint32", ..., "string"
    null_count: int
    bytes: int
    #: string and binary columns: distinct values of the resident dictionary
    #: (0: none) and the bytes it takes (included in ``bytes``)
    dictionary_values: int = 0
    dictionary_bytes: int = 0


@dataclass
class IndexInfo:
    """A resident index (proto IndexInfo); key_type "uint32"/"uint64", or
    "columns" with its key schema in `key_columns` (KeyColumnSpec (name, type)
    pairs in key order); duplicates "lowest_row"/"keep_all"; payload columns in
    declaration order."""
    name: str = ""
    version: int = 0
    capacity: int = 0
    max_probe_count: int = 0
    first_value: int = 0
    explicit_values: bool = False
    batch_mode: bool = False
    rows: int = 0
    statistics: BuildStatistics = field(default_factory=BuildStatistics)
    load_factor: float = 0.0
    device_bytes: int = 0
    build_seconds: float = 0.0
    backend: str = ""
    built_unix_millis: int = 0
    key_type: str = "uint32"
    payload: List[PayloadColumnInfo] = field(default_factory=list)
    payload_bytes: int = 0
    duplicates: str = "lowest_row"
    #: The version in the index's snapshot file under the server's --data-dir
    #: (what a restart serves); 0 without one.
    durable_version: int = 0
    #: key_type "columns": the key schema, as declared; else empty.
    key_columns: List[KeyColumnSpec] = field(default_factory=list)
    #: Mutate batches applied since the index was built or loaded.
    mutation_sequence: int = 0
    #: The load factor past which an upsert grows the table (the spec's, or 0.8).
    max_load_factor: float = 0.0
    #: Row-ID indexes: the value the next upserted row gets.
    next_row_id: int = 0
    #: Times Mutate grew the table since the build.
    rehashes: int = 0
    #: "partitioned" (split over a router's shards or a server's devices by
    #: key) or "replicated" (every shard holds every row).
    placement: str = "partitioned"

    @classmethod
    def from_proto(cls, m) -> "IndexInfo":
        from .columns import TYPE_NAMES
        return _from_proto(
            cls, m, statistics=_from_proto(BuildStatistics, m.statistics),
            key_type=_KEY_TYPES.get(m.key_type, str(m.key_type)),
            duplicates=_DUPLICATES.get(m.duplicates, str(m.duplicates)),
            placement=_PLACEMENTS.get(m.placement, str(m.placement)),
            payload=[PayloadColumnInfo(p.name, TYPE_NAMES.get(p.type, str(p.type)), p.null_count,
                                       p.bytes, p.dictionary_values, p.dictionary_bytes)
                     for p in m.payload],
            key_columns=[KeyColumnSpec(k.name, TYPE_NAMES.get(k.type, str(k.type)))
                         for k in m.key_columns])

    def payload_type(self, name: str) -> Optional[str]:
        for p in self.payload:
            if p.name == name:
                return p.type
        return None


@dataclass
class ServerInfo:
    """GetServerInfo: identity, memory and the server's limits."""
    version: str = ""
    backend: str = ""
    device_name: str = ""
    device_memory_total_bytes: int = 0
    device_memory_used_bytes: int = 0
    device_memory_budget_bytes: int = 0
    max_message_bytes: int = 0
    max_inflight_batches_per_stream: int = 0
    max_inflight_batches: int = 0
    index_count: int = 0
    serving: bool = False
    max_concurrent_builds: int = 0
    max_aggregate_groups: int = 0
    max_staged_bytes: int = 0
    max_build_staged_bytes: int = 0
    staged_bytes: int = 0
    max_streams_per_connection: int = 0
    max_result_bytes: int = 0
    max_pending_response_bytes: int = 0
    pending_response_bytes: int = 0
    #: --max-mutation-rows: upsert plus delete rows one Mutate request may carry.
    max_mutation_rows: int = 0
    #: --wal-sync: "always", "batch-ms:N" or "off"; "" without --data-dir.
    wal_sync: str = ""

    @classmethod
    def from_proto(cls, m) -> "ServerInfo":
        return _from_proto(cls, m)


@dataclass
class DropResult:
    dropped_version: int
    freed_bytes: int


@dataclass
class SaveResult:
    """What save_index wrote under the server's --data-dir."""
    file: str
    bytes: int
    version: int
    seconds: float


@dataclass
class DataFile:
    """A file under the server's --data-dir: ``index`` names the index whose
    snapshot it is ("" for a copy), ``live`` whether that index is live."""
    file: str
    bytes: int
    modified_unix_millis: int
    index: str
    live: bool


@dataclass
class LookupResult:
    """One row per key: `values` (uint32, NO_MATCH where missing), `found`
    (bool), `probes` / `match_counts` (uint32, when asked, else None) and the
    selected payload `columns` by name (null where the key is missing)."""
    values: np.ndarray
    found: np.ndarray
    probes: Optional[np.ndarray] = None
    match_counts: Optional[np.ndarray] = None
    columns: Dict[str, Any] = field(default_factory=dict)
    statistics: QueryStatistics = field(default_factory=QueryStatistics)
    index_version: int = 0
    #: The index's mutation sequence the (last) batch saw.
    mutation_sequence: int = 0

    def __len__(self) -> int:
        return len(self.values)

    def to_pandas(self, keys: Any = None):
        """A DataFrame: the keys when given (one column: `key`; a mapping's,
        DataFrame's or list's columns by their names, see
        gpujoin.keys.key_input_columns), `value` (nullable: NA where missing),
        `found`, `probes`/`match_counts` when asked, then the selected columns."""
        pd = _pandas()
        out = {}
        if keys is not None:
            named, cols = key_input_columns(keys)
            for name, col in ([("key", cols[0][1])] if len(cols) == 1 and not named else cols):
                out[name] = col if hasattr(col, "reset_index") else _series(pd, _key_array(col))
        out["value"] = _series(pd, np.ma.MaskedArray(self.values, mask=~self.found))
        out["found"] = self.found
        if self.probes is not None:
            out["probes"] = self.probes
        if self.match_counts is not None:
            out["match_counts"] = self.match_counts
        for name, col in self.columns.items():
            out[name] = _series(pd, col)
        return pd.DataFrame({k: (v.reset_index(drop=True) if hasattr(v, "reset_index") else v)
                             for k, v in out.items()})


@dataclass
class JoinResult:
    """Pairs in left row order, then right source-row order: `left_rows` and
    `right_rows` (uint32; NO_MATCH on the right of an outer or anti pair
    without a match), the selected payload `columns` per pair, `count` (pairs
    before truncation), `overflow`, and per left row `found` / `probes` when asked."""
    left_rows: np.ndarray
    right_rows: np.ndarray
    columns: Dict[str, Any] = field(default_factory=dict)
    count: int = 0
    overflow: bool = False
    found: Optional[np.ndarray] = None
    probes: Optional[np.ndarray] = None
    statistics: QueryStatistics = field(default_factory=QueryStatistics)
    index_version: int = 0
    #: The index's mutation sequence the (last) batch saw.
    mutation_sequence: int = 0

    def __len__(self) -> int:
        return len(self.left_rows)

    def to_pandas(self):
        """A DataFrame: `left_row`, `right_row` (nullable: NA without a match), then the columns."""
        pd = _pandas()
        out = {"left_row": self.left_rows,
               "right_row": _series(pd, np.ma.MaskedArray(self.right_rows,
                                                          mask=self.right_rows == NO_MATCH))}
        for name, col in self.columns.items():
            out[name] = _series(pd, col)
        return pd.DataFrame(out)


@dataclass
class MutateResult:
    """What upsert/delete/mutate applied, summed over the requests the server
    applied (`requests` of them): upsert rows, distinct upserted keys inserted
    and updated, delete keys removed and not found, rows removed (keep_all: whole
    groups), and times the table grew (`rehashes`); then the index after the
    last of them: `mutation_sequence`, `index_version`, `capacity`,
    `load_factor`, `statistics`; `durable` when every request was in the
    write-ahead log (--data-dir) before its answer."""
    upsert_rows: int = 0
    inserted_keys: int = 0
    updated_keys: int = 0
    deleted_keys: int = 0
    not_found_keys: int = 0
    deleted_rows: int = 0
    rehashes: int = 0
    requests: int = 0
    mutation_sequence: int = 0
    index_version: int = 0
    capacity: int = 0
    load_factor: float = 0.0
    statistics: BuildStatistics = field(default_factory=BuildStatistics)
    durable: bool = False

    def add(self, r) -> None:
        """Adds one applied MutateResponse."""
        for name in ("upsert_rows", "inserted_keys", "updated_keys", "deleted_keys",
                     "not_found_keys", "deleted_rows"):
            setattr(self, name, getattr(self, name) + getattr(r, name))
        self.rehashes += int(r.rehashed)
        self.durable = (self.requests == 0 or self.durable) and r.durable
        self.requests += 1
        self.mutation_sequence = r.mutation_sequence
        self.index_version = r.index_version
        self.capacity = r.capacity
        self.load_factor = r.load_factor
        self.statistics = _from_proto(BuildStatistics, r.statistics)


@dataclass
class AggregateResult:
    """Per group: `values` (SUM/MIN/MAX/MEAN: float32 for float32 input, else
    the typed result, masked where a group is null) or `counts` (uint32;
    COUNT), `contributing_rows` when asked, and for integer sums and means
    `overflow` (bool: the exact sum did not fit 64 bits); `rows` sent."""
    op: str
    values: Optional[np.ndarray] = None
    counts: Optional[np.ndarray] = None
    contributing_rows: Optional[np.ndarray] = None
    rows: int = 0
    overflow: Optional[np.ndarray] = None

    def to_pandas(self):
        pd = _pandas()
        out = {}
        if self.counts is not None:
            out["count"] = self.counts
        if self.values is not None:
            out[self.op] = self.values
        if self.values is not None and isinstance(self.values, np.ma.MaskedArray):
            out[self.op] = _series(pd, self.values)
        if self.contributing_rows is not None:
            out["contributing_rows"] = self.contributing_rows
        if self.overflow is not None:
            out["overflow"] = self.overflow
        df = pd.DataFrame(out)
        df.index.name = "group"
        return df


@dataclass
class StepStatistics:
    """What one plan step did for a batch (aggregate results: for the whole
    stream): its position in the plan (`step`) and `kind` ("lookup",
    "filter", "aggregate", "project", "limit"), `rows_in` and `rows_out`; for
    lookups also the `index`, the `index_version` and `mutation_sequence` the
    batch ran on, and the probe `statistics` of its input rows."""
    step: int = 0
    kind: str = ""
    rows_in: int = 0
    rows_out: int = 0
    index: str = ""
    index_version: int = 0
    mutation_sequence: int = 0
    statistics: QueryStatistics = field(default_factory=QueryStatistics)

    @classmethod
    def from_proto(cls, m) -> "StepStatistics":
        return _from_proto(cls, m, statistics=_from_proto(QueryStatistics, m.statistics))


@dataclass
class PlanStatistics:
    """The step statistics of a Query: `batches` holds one list of
    StepStatistics per input batch, in order (the steps that ran on it);
    `final` those of the answer to the end of the stream (an aggregate plan's
    groups; empty without one)."""
    batches: List[List[StepStatistics]] = field(default_factory=list)
    final: List[StepStatistics] = field(default_factory=list)

    def steps(self) -> List[StepStatistics]:
        """Per plan step, summed over the batches: rows in and out and the
        probe statistics added, the index version and mutation sequence of the
        last batch that ran the step. The steps the final answer reports (an
        aggregate and the steps after it) take its rows, which count the
        whole stream."""
        totals: Dict[int, StepStatistics] = {}
        final_steps = {s.step for s in self.final}
        for s in [s for b in self.batches for s in b] + self.final:
            t = totals.setdefault(s.step, StepStatistics(step=s.step, kind=s.kind, index=s.index))
            if s.step not in final_steps:
                t.rows_in += s.rows_in
                t.rows_out += s.rows_out
            else:
                t.rows_in, t.rows_out = s.rows_in, s.rows_out
            t.statistics.merge(s.statistics)
            if s.index:
                t.index_version, t.mutation_sequence = s.index_version, s.mutation_sequence
        return [totals[k] for k in sorted(totals)]

    def index_versions(self, index: str) -> List[int]:
        """The distinct versions of `index` the batches' lookups ran on, in order
        of first use (more than one: the index was rebuilt during the query)."""
        seen: Dict[int, None] = {}
        for s in [s for b in self.batches for s in b] + self.final:
            if s.kind == "lookup" and s.index == index:
                seen.setdefault(s.index_version, None)
        return list(seen)


@dataclass
class QueryResult:
    """The rows a Query's plan produced: `columns`, name -> column in the
    plan's output order (numpy arrays; masked arrays where a row is null;
    object arrays of str/bytes with None for nulls), `rows`, and the
    `statistics` of each batch's steps (PlanStatistics)."""
    columns: Dict[str, Any] = field(default_factory=dict)
    rows: int = 0
    statistics: PlanStatistics = field(default_factory=PlanStatistics)

    def __len__(self) -> int:
        return self.rows

    def to_pandas(self):
        """A DataFrame of the columns: nullable dtypes (Int64, UInt32, boolean,
        ...) for numeric and bool columns with nulls, object for str/bytes."""
        pd = _pandas()
        return pd.DataFrame({name: _series(pd, col) for name, col in self.columns.items()},
                            index=pd.RangeIndex(self.rows))
