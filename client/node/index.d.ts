// Type declarations of @gpujoin/client (hand-written; the package is plain JS).
// The service and its fields are described in docs/api.md of the gpujoin
// repository; the proto is proto/gpujoin/v1/gpujoin.proto (carried in the package).

/// <reference types="node" />

/** The right row of an outer/anti pair without a match, and a missing key's lookup value. */
export declare const NO_MATCH: 0xffffffff;

/** The directory holding gpujoin/v1/gpujoin.proto that the client loads. */
export declare function protoRoot(): string;

/** One integer word per key, or 'columns': a key schema of typed key columns (IndexInfo.keyColumns). */
export type KeyType = 'uint32' | 'uint64' | 'columns';
/** The types a key column may have. */
export type KeyColumnType = 'int32' | 'int64' | 'uint32' | 'uint64' | 'string' | 'binary';
export type DuplicatePolicy = 'lowest_row' | 'keep_all';
/** `left` = left outer; the long names are accepted too. */
export type JoinKind = 'inner' | 'left' | 'semi' | 'anti' | 'left_outer' | 'left_semi' | 'left_anti';
export type AggregateOp = 'count' | 'sum' | 'min' | 'max' | 'mean';
export type ColumnType =
  | 'uint32' | 'int32' | 'uint64' | 'int64' | 'float32' | 'float64' | 'bool' | 'string' | 'binary';

/**
 * Integer keys, checked by value (never wrapped or reinterpreted): a
 * Uint32Array (uint32 index) or BigUint64Array (uint64 index) is sent without a
 * copy; any other integer typed array (Int8Array ... Int32Array, Uint8Array ...,
 * BigInt64Array, BigUint64Array) or a plain array of integer numbers or bigints
 * is sent when every value fits the index's key type: uint32 [0, 2^32 - 1];
 * uint64 [-2^63, 2^64 - 1], negative ones int64 keys sent as their bit pattern
 * (a BigInt64Array is viewed so, without a copy); a 64-bit number must be a
 * safe integer. A value that does not fit (negative or 2^32 for a uint32 index)
 * or is not an integer is a DtypeError naming the first one and its position
 * (`keys[3]: -1 does not fit a uint32 index key (it is negative; 0 to
 * 4294967295)`); Float32Array/Float64Array are DtypeErrors.
 */
export type IntegerKeys = Uint32Array | BigUint64Array | BigInt64Array | Int32Array | Int16Array | Int8Array |
  Uint16Array | Uint8Array | ReadonlyArray<number | bigint>;

/**
 * The values of one key column: its type's typed array (Int32Array,
 * BigInt64Array, Uint32Array, BigUint64Array; sent without a copy), or a plain
 * array of strings (string: JS strings, or Uint8Arrays holding UTF-8 bytes,
 * which the server checks), Uint8Arrays (binary: Buffers included, or strings
 * as their UTF-8 bytes), or integers in the column's range (numbers or
 * bigints). `null`/`undefined` in a plain array is a null, which never matches.
 */
export type KeyColumnValues =
  | Int32Array | BigInt64Array | Uint32Array | BigUint64Array
  | ReadonlyArray<string | Uint8Array | number | bigint | null | undefined>;

/**
 * A key column with its type and nulls spelled out: `type` (when given) must be
 * the key column's; `valid` (per row, falsy = null) marks nulls beside those of
 * a plain array, e.g. in a typed array.
 */
export interface TypedKeyColumn {
  type?: KeyColumnType;
  values: KeyColumnValues;
  valid?: ArrayLike<boolean | number>;
}
export type KeyColumnInput = KeyColumnValues | TypedKeyColumn;

/**
 * The keys of an index with key columns: a key of one column as its values (an
 * array of strings, of Uint8Arrays, or a typed array with keyType 'columns'),
 * or an object of columns by name in any order, e.g. `{tenant: ['a', 'b'],
 * order_id: BigInt64Array.from([1n, 2n])}`. Every column has one row per key.
 */
export type ColumnKeys =
  | ReadonlyArray<string | Uint8Array | null | undefined> | KeyColumnValues | Record<string, KeyColumnInput>;

/**
 * Keys: IntegerKeys for a uint32 or uint64 index, ColumnKeys for an index with
 * key columns. A key of the wrong form for the index (strings for a uint32
 * index, a missing or unknown key column, columns of different lengths, a
 * typed array of another type than the key column's) is a DtypeError or
 * InvalidArgumentError naming the column and the sizes before anything is sent.
 */
export type Keys = IntegerKeys | ColumnKeys;

/** One column of a key schema, in the schema's order (the proto's KeyColumnSpec). */
export interface KeyColumnSpec {
  /** [A-Za-z0-9_.-]{1,128}, unique among the key columns. */
  name: string;
  type: KeyColumnType;
}

/** A uint32 column: a Uint32Array (no copy) or integers in [0, 2^32 - 1]. */
export type U32Input = Uint32Array | Int32Array | Uint16Array | Int16Array | Uint8Array | Int8Array |
  BigUint64Array | BigInt64Array | ReadonlyArray<number | bigint>;

/** Values of a payload or hashed column; `null`/`undefined` entries of a plain array are nulls. */
export type ColumnValues =
  | Uint32Array | Int32Array | BigUint64Array | BigInt64Array | Float32Array | Float64Array
  | Uint8Array  // bool: one byte per row, 0/1
  | ReadonlyArray<number | bigint | boolean | string | Uint8Array | null | undefined>;

/**
 * A column given with its type. Without `type` the type is inferred: typed arrays
 * by their class, plain arrays by the first non-null element (string, boolean,
 * Uint8Array = binary, number = float64, bigint = int64). `valid` (per row,
 * truthy = valid) marks nulls beside the nulls of a plain array.
 */
export interface ColumnSpec {
  type?: ColumnType;
  values: ColumnValues;
  valid?: ArrayLike<boolean | number>;
}
export type ColumnInput = ColumnValues | ColumnSpec;

/** A table for buildIndex(name, rows, {key}): row objects, or columns by name. */
export type TableInput = ReadonlyArray<Record<string, unknown>> | Record<string, ColumnInput>;

/** A gathered column: one row per lookup key or per join pair. */
export declare class Column {
  readonly name: string;
  readonly type: ColumnType;
  readonly length: number;
  /**
   * Fixed-width types: a typed array (0 in null rows); bool: Uint8Array of 0/1;
   * string: string[] and binary: Uint8Array[] (decoded on first access; '' in null rows).
   */
  readonly values: Uint32Array | Int32Array | BigUint64Array | BigInt64Array | Float32Array |
                   Float64Array | Uint8Array | string[] | Uint8Array[];
  /** Arrow validity bitmap (LSB first, 1 = valid), or null when no row is null. */
  readonly validity: Uint8Array | null;
  readonly nullCount: number;
  /** string/binary: the value bytes and length + 1 offsets into them (from 0); else null. */
  readonly data: Buffer | null;
  readonly offsets: Int32Array | null;
  /** True where the key is missing, the pair has no match, or the stored value is null. */
  isNull(row: number): boolean;
  /** The row's value, or null. */
  get(row: number): number | bigint | boolean | string | Uint8Array | null;
  toArray(): Array<number | bigint | boolean | string | Uint8Array | null>;
}

// ---------------------------------------------------------------- results

export interface BuildStatistics {
  uniqueKeys: number;
  duplicateRows: number;
  overflowRows: number;
  invalidRows: number;
  totalProbes: number;
  maxProbes: number;
  /** keep_all: most rows kept under one key; lowest_row: 0. */
  maxGroupRows: number;
}

export interface QueryStatistics {
  found: number;
  missing: number;
  totalProbes: number;
  maxProbes: number;
}

export interface PayloadColumnInfo {
  name: string;
  type: ColumnType;
  nullCount: number;
  bytes: number;
  /** STRING and BINARY columns: values of the resident dictionary (0: none), and the bytes it takes (in `bytes`). */
  dictionaryValues: number;
  dictionaryBytes: number;
}

export interface IndexInfo {
  name: string;
  version: number;
  capacity: number;
  maxProbeCount: number;
  firstValue: number;
  explicitValues: boolean;
  batchMode: boolean;
  rows: number;
  statistics: BuildStatistics;
  loadFactor: number;
  deviceBytes: number;
  buildSeconds: number;
  backend: string;
  builtUnixMillis: number;
  keyType: KeyType;
  /** keyType 'columns': the key schema as declared (names and types, in order); else []. */
  keyColumns: KeyColumnSpec[];
  payload: PayloadColumnInfo[];
  payloadBytes: number;
  duplicates: DuplicatePolicy;
  /** The version in the index's snapshot under --data-dir (what a restart serves); 0 without one. */
  durableVersion: number;
  /** Mutate batches applied since the index was built or loaded (a snapshot keeps it). */
  mutationSequence: number;
  /** The load factor past which an upsert grows the table (the spec's, or 0.8). */
  maxLoadFactor: number;
  /** Row-ID indexes: the value the next upserted row gets. */
  nextRowId: number;
  /** Times Mutate grew the table since the build. */
  rehashes: number;
  /** Over a router's shards or a server's devices: split by key, or every row on every shard. */
  placement: 'partitioned' | 'replicated';
}

/** A file under the server's --data-dir. */
export interface DataFile {
  file: string;
  bytes: number;
  modifiedUnixMillis: number;
  /** The index whose snapshot ("<index>.gjsnap") this is; '' for a copy. */
  index: string;
  live: boolean;
}

export interface ServerInfo {
  version: string;
  backend: string;
  deviceName: string;
  deviceMemoryTotalBytes: number;
  deviceMemoryUsedBytes: number;
  deviceMemoryBudgetBytes: number;
  maxMessageBytes: number;
  maxInflightBatchesPerStream: number;
  maxInflightBatches: number;
  indexCount: number;
  serving: boolean;
  maxConcurrentBuilds: number;
  maxAggregateGroups: number;
  maxStagedBytes: number;
  maxBuildStagedBytes: number;
  stagedBytes: number;
  maxStreamsPerConnection: number;
  maxResultBytes: number;
  /** --max-pending-response-bytes: stream responses all streams may hold unwritten. */
  maxPendingResponseBytes: number;
  /** Bytes held by stream responses waiting to be written now. */
  pendingResponseBytes: number;
  /** --max-mutation-rows: upsert plus delete rows one Mutate request may carry. */
  maxMutationRows: number;
  /** --wal-sync: 'always', 'batch-ms:N' or 'off'; '' without --data-dir. */
  walSync: string;
}

export interface DropResult {
  droppedVersion: number;
  freedBytes: number;
}

export interface LookupResult {
  /** Per key: the index value, NO_MATCH where missing. */
  values: Uint32Array;
  /** Per key: 1 found, 0 missing. */
  found: Uint8Array;
  /** Per key probe counts (opts.probes). */
  probes?: Uint32Array;
  /** Per key: rows of the index matching it (opts.matchCounts; keep_all: the group size). */
  matchCounts?: Uint32Array;
  /** The selected payload columns by name, one row per key (the key's first match). */
  columns: Record<string, Column>;
  statistics: QueryStatistics;
  /** The index version the last batch ran on. */
  indexVersion: number;
  /** The index's mutation sequence the last batch saw. */
  mutationSequence: number;
}

export interface JoinResult {
  /** Pairs in left row order, then right source-row order. */
  leftRows: Uint32Array;
  /** The matched rows' index values; NO_MATCH for unmatched left and every anti pair. */
  rightRows: Uint32Array;
  /** Pairs of the kind before any capacity cut, summed over batches (exact). */
  count: number;
  capacity: number;
  /** Some batch's count exceeded its capacity, or the index build overflowed. */
  overflow: boolean;
  statistics: QueryStatistics;
  /** Per left row (opts.found / opts.probes). */
  found?: Uint8Array;
  probes?: Uint32Array;
  /** The selected payload columns by name, one row per pair (null without a match). */
  columns: Record<string, Column>;
  indexVersion: number;
  /** The index's mutation sequence the last batch saw. */
  mutationSequence: number;
  /** JoinResponse messages received (more than the requests when answers continued). */
  messages: number;
}

/** One batch's answer from lookupBatches (the arrays view the answer's bytes). */
export interface LookupBatchResult extends LookupResult {
  /** Position of the batch in the source, from 0. */
  batch: number;
}

/** One batch's answer from joinBatches, its continued messages reassembled. */
export interface JoinBatchResult extends JoinResult {
  batch: number;
  /** The left row of the batch's first key (rows are numbered on across batches). */
  firstLeftRow: number;
}

/**
 * What upsert/delete/mutate applied: counts summed over the requests the
 * server applied, then the index after the last of them.
 */
export interface MutateResult {
  /** Upsert rows applied. */
  upsertRows: number;
  /** Distinct upserted keys that were absent (per request) / present. */
  insertedKeys: number;
  updatedKeys: number;
  /** Delete keys that were present (now removed) / absent. */
  deletedKeys: number;
  notFoundKeys: number;
  /** Rows removed (keep_all: whole groups). */
  deletedRows: number;
  /** Requests that made the table grow. */
  rehashes: number;
  /** Requests applied (a call is split where a request would pass the message size or maxMutationRows). */
  requests: number;
  /** The index's mutation sequence after the last applied request (before any: as described). */
  mutationSequence: number;
  indexVersion: number;
  capacity: number;
  loadFactor: number;
  statistics: BuildStatistics;
  /** Every applied request was in the write-ahead log before its answer (--data-dir). */
  durable: boolean;
}

/** The value type an aggregation ran in: float32 (Float32Array or numbers) or a typed array's. */
export type AggregateValueType = 'float32' | 'float64' | 'int32' | 'uint32' | 'int64' | 'uint64';

/** Values of an aggregation; narrower integer arrays widen (Int8/Int16 to int32, Uint8/Uint16 to uint32). */
export type AggregateValues =
  | Float32Array | ReadonlyArray<number>
  | Float64Array | Int32Array | Uint32Array | BigInt64Array | BigUint64Array
  | Int8Array | Int16Array | Uint8Array | Uint16Array;

export interface AggregateResult {
  op: AggregateOp;
  groups: number;
  /** Rows sent. */
  rows: number;
  /** The type the values aggregated in; null for count. */
  valueType: AggregateValueType | null;
  /** count: per group (wrapping mod 2^32, the reference contract; contributingRows is exact). */
  counts?: Uint32Array;
  /**
   * sum/min/max/mean, per group. float32 values: a Float32Array (empty sum 0,
   * empty min/max/mean NaN). Typed values: sum an exact BigInt64Array (int32,
   * int64), BigUint64Array (uint32, uint64) or Float64Array (float64); min/max
   * the value type's array; mean a Float64Array (the exact sum / rows; NaN when
   * empty or overflowed). float64 follows the float32 rules (non-finite values
   * ignored, empty sum +0, empty min/max/mean NaN, -0 below +0).
   */
  values?: Float32Array | Float64Array | Int32Array | Uint32Array | BigInt64Array | BigUint64Array;
  /** Integer min/max: 1 where the group has a value, 0 for an empty group (whose value is 0). */
  valid?: Uint8Array;
  /**
   * Integer sum/mean: 1 where the group's exact sum did not fit int64 (uint64
   * for unsigned values) in some batch or in the running total; its sum holds
   * the low 64 bits of the exact sum and its mean is NaN.
   */
  overflow?: Uint8Array;
  /** Integer sum/mean: groups set in `overflow`. */
  overflowGroups?: number;
  /** With opts.contributingRows: exact contributing rows per group. */
  contributingRows?: BigUint64Array;
}

export interface HashResult {
  bits: 32 | 64;
  /** One per row; 0 for null rows. */
  hashes: BigUint64Array | Uint32Array;
  /** Arrow bitmap, LSB first: 1 = the row has a hash. */
  validity: Uint8Array;
  nullCount: number;
}

// ---------------------------------------------------------------- query plans

/**
 * The input rows of a query: columns by name (object order), each a typed
 * array, a plain array (null/undefined = null; types inferred as payload
 * columns are: number = float64, bigint = int64, string, boolean, Uint8Array =
 * binary) or {type, values, valid}; or an array of {name, ...column}. Integer
 * key columns are typed arrays (Uint32Array, BigInt64Array, ...) or
 * {type: 'int64', values: [...]}: a plain array of numbers is float64.
 */
export type QueryInput = Record<string, ColumnInput> | Array<ColumnSpec & {name: string}>;

export interface QueryLookupOptions {
  /**
   * The column(s) forming the index's key: one integer column (any of int32,
   * int64, uint32, uint64) for a uint32 or uint64 index (a null, a negative
   * value or one the key type cannot hold is missing), or one column per key
   * column of a key schema, in its order and of its exact types.
   */
  key: string | string[];
  /** Payload columns of the index added to the rows, named prefix + name. */
  select?: string | string[];
  prefix?: string;
  /**
   * inner (default): rows with a match, one per match on a keep_all index;
   * left: every row, null payload without a match; semi: rows with a match,
   * once (the first match's payload); anti: rows without one.
   */
  how?: JoinKind;
  /** The bool column telling whether the key was found; default "<index>.found". */
  foundColumn?: string;
}

/**
 * One measure: text ('count()', 'count(col)', 'sum(bytes) as total', ops
 * count, sum, min, max, mean), [op, column?, name?] or {op, column?, name?}.
 * Without a name the output column is "count" or "<op>_<column>".
 */
export type MeasureSpec = string | [string, string?, string?] | {op: string; column?: string; name?: string};

export interface QueryAggregateOptions {
  /** Group-by columns (integer, bool, string or binary; nulls form one group). None: one group. */
  by?: string | string[];
  /** Measures in order, one measure, or an object output name -> measure. Default ['count()']. */
  measures?: MeasureSpec | MeasureSpec[] | Record<string, MeasureSpec>;
}

/** A project column: a name, a [column, newName] pair or an object {column: newName}. */
export type ProjectColumn = string | [string, string] | Record<string, string>;

/** What one plan step did for a batch (aggregate results: for the whole stream). */
export interface StepStatistics {
  /** Position in the plan. */
  step: number;
  kind: 'lookup' | 'filter' | 'aggregate' | 'project' | 'limit' | string;
  rowsIn: number;
  rowsOut: number;
  /** Lookups: the index, the version and mutation sequence the batch ran on, its probe statistics. */
  index: string;
  indexVersion: number;
  mutationSequence: number;
  statistics: QueryStatistics;
}

export interface PlanStatistics {
  /** Per input batch, in order: the steps that ran on it. */
  batches: StepStatistics[][];
  /** The answer to the end of the stream (an aggregate plan's groups); [] without one. */
  final: StepStatistics[];
  /** Per step, summed over the batches and the final answer (versions: the last batch's). */
  steps: StepStatistics[];
}

export interface QueryResult {
  /** The result columns by name (null rows: no match, a stored null, a null group or measure). */
  columns: Record<string, Column>;
  /** The column names in the plan's output order. */
  names: string[];
  rows: number;
  /** QueryResponse messages received (more than the batches when answers continued). */
  messages: number;
  statistics: PlanStatistics;
}

/**
 * batchRows: rows per input batch (default: within the message size and half
 * of --max-result-bytes at twice the input's row bytes). Without it, a batch
 * the server refuses for --max-result-bytes runs the query again from the
 * start in batches of half its rows.
 */
export interface QueryRunOptions extends StreamOptions {}

/**
 * A plan over input rows (docs/api.md "Query: plans in one round trip"), made by
 * Client#query. Every step method returns a new Query with the step appended;
 * run() sends the input in batches with the plan on the first, in one Query
 * stream, and reassembles the answer (continued messages, an aggregate's final
 * answer). A refused plan or batch rejects with its GpujoinError (`batchId`).
 */
export declare class Query {
  lookup(index: string, opts: QueryLookupOptions): Query;
  /**
   * Keeps the rows for which `where` is true (SQL: false and null drop the row):
   * comparisons of a column with a literal (= != <> < <= > >=), `is [not] null`,
   * `[not] in (...)`, and/or/not, parentheses; 'strings', numbers, true/false.
   */
  filter(where: string): Query;
  /** Groups the stream's rows (in order of their first row); later steps apply to the groups. */
  aggregate(opts?: QueryAggregateOptions): Query;
  /** Keeps these columns in order, renamed where asked; one array alone is the list of columns. */
  project(...columns: Array<ProjectColumn | ProjectColumn[]>): Query;
  /** Keeps the first `rows` rows of the stream. */
  limit(rows: number): Query;
  /** The proto Plan of the steps so far. */
  readonly plan: {steps: object[]};
  run(opts?: QueryRunOptions): Promise<QueryResult>;
}

// ---------------------------------------------------------------- options

export interface TlsOptions {
  /** PEM roots that sign the server's certificate (contents or a file). Default: system roots. */
  ca?: string | Buffer;
  caFile?: string;
  /** A client certificate and key for servers that require one (--tls-client-ca). */
  cert?: string | Buffer;
  certFile?: string;
  key?: string | Buffer;
  keyFile?: string;
  /** The name checked against the server certificate, when the target is an IP address. */
  serverName?: string;
}

export interface ClientOptions {
  /** false/absent: plaintext; true: TLS with the system roots; or TLS options. */
  tls?: boolean | TlsOptions;
  /** Bearer token sent as `authorization: Bearer <token>` on every call. */
  token?: string;
  /** Batches of a stream sent and not yet answered (build chunks: not yet flushed). Default: the server's per-stream window. */
  maxInflight?: number;
  /** Rows per batch and build chunk. Default 262144, fewer where a message would exceed the server's limit. */
  batchRows?: number;
  /** Default deadline of every call in milliseconds (0 = none). */
  deadlineMs?: number;
  /** Caps what this client sends per message below the server's --max-message-bytes. */
  maxMessageBytes?: number;
  /** Extra grpc-js channel options. */
  channelOptions?: Record<string, string | number>;
}

export interface CallOptions {
  deadlineMs?: number;
  /** Cancels the call (CancelledError). */
  signal?: AbortSignal;
}

export interface StreamOptions extends CallOptions {
  /** Rows per batch (default: the client's). */
  batchRows?: number;
  /** Unanswered batches at most (default: the client's). */
  maxInflight?: number;
  /**
   * Called after each answered batch (a keep_all join's count pass included); a
   * returned promise holds back the next batch until it settles (a rejection fails the call).
   */
  onProgress?: (p: {batches: number; sent: number; answered: number}) => void | Promise<void>;
}

export interface BuildOptions extends CallOptions {
  /**
   * Default: 'columns' when keyColumns is given or the keys are strings,
   * Uint8Arrays or an object of columns; uint64 for BigUint64Array/BigInt64Array/bigint
   * keys; else uint32.
   */
  keyType?: KeyType;
  /**
   * The key schema of an index with key columns: 1 to 8 columns in order. Without
   * it a key schema is inferred from the keys: one column "key" for an array
   * (strings: string, Uint8Arrays: binary, a typed array: its integer type), or the
   * object's columns in its order (a plain array of numbers has no integer width:
   * declare it here or give a typed array).
   */
  keyColumns?: KeyColumnSpec[];
  /**
   * Build from a table: `keys` is an array of row objects (`[{id: 1, type: 'a'}, ...]`,
   * a column missing from a row is null there) or an object of columns (`{id: [...],
   * type: [...]}`), and `key` names its key column (integer keys, or a key column
   * of strings / Uint8Arrays), or in an array the columns of a key schema in order.
   * Every other column is a payload column of the same name, its type inferred
   * as a payload column's (numbers: float64, bigints: int64, strings, booleans,
   * Uint8Arrays; or {type, values}); `payload` is then refused. A missing key
   * column is a DtypeError naming it and the table's columns.
   */
  key?: string | string[];
  /** Explicit values, one per key; default: firstValue + source row. */
  values?: U32Input;
  /** Payload columns by name (object order) or as [{name, ...}] in order. */
  payload?: Record<string, ColumnInput> | Array<ColumnSpec & {name: string}>;
  duplicates?: DuplicatePolicy;
  /** A power of two at most 2^31; or expectedRows (+ targetLoadFactor) to have it chosen. */
  capacity?: number;
  expectedRows?: number;
  targetLoadFactor?: number;
  maxProbeCount?: number;
  firstValue?: number;
  /** Rebuild a live name (else AlreadyExistsError). */
  replace?: boolean;
  /**
   * Resolve only once the index's snapshot is written and fsync'd (a server with
   * --data-dir; FailedPreconditionError without). A failed write rejects (the
   * index is installed and serving).
   */
  waitDurable?: boolean;
  /** Key rows per chunk (fewer where a chunk would exceed the message limit). */
  chunkRows?: number;
  maxInflight?: number;
  /** The load factor past which upsert() grows the table (0 < f <= 1; default the server's, 0.8). */
  maxLoadFactor?: number;
  /**
   * Through gpujoin-router or `gpujoind --devices`: 'partitioned' (default; each shard
   * holds its keys) or 'replicated' (every shard holds every row; each lookup or join
   * batch runs whole on one of them).
   */
  placement?: 'partitioned' | 'replicated';
}

export interface UpsertOptions extends StreamOptions {
  /** explicit-value indexes: one uint32 value per key (required); row-ID indexes take none. */
  values?: U32Input;
  /**
   * Every payload column of the index by name (or as [{name, ...}]), one row per
   * key; plain values are converted to the type the index stores.
   */
  payload?: Record<string, ColumnInput> | Array<ColumnSpec & {name: string}>;
}

export interface MutateOptions extends UpsertOptions {
  /** Keys to upsert (with values and payload). */
  upsertKeys?: Keys;
  /** Keys to delete; applied before the upserts. */
  deleteKeys?: Keys;
}

export interface LookupOptions extends StreamOptions {
  /** Payload columns to gather, one row per key. */
  select?: string[];
  probes?: boolean;
  matchCounts?: boolean;
  /**
   * Probe bound of this call's requests (0/absent: the index's bound; at most its
   * capacity): a key further than this many slots from its home slot is missing.
   */
  maxProbeCount?: number;
  /** The index's integer key type: skips the DescribeIndex call that checks the keys' dtype. */
  keyType?: KeyType;
  /** The index's key schema (IndexInfo.keyColumns): skips the DescribeIndex call likewise. */
  keyColumns?: KeyColumnSpec[];
}

export interface JoinOptions extends StreamOptions {
  kind?: JoinKind;
  /** Payload columns to gather, one row per pair. */
  select?: string[];
  /**
   * Pairs per batch (0/absent: every pair: the batch's rows, or on a keep_all index
   * for inner/left joins the exact count of a count-only pass run first).
   */
  capacity?: number;
  /** Counts and statistics only, no pairs. */
  countOnly?: boolean;
  found?: boolean;
  probes?: boolean;
  /** Left row of keys[0] (default 0); left rows must stay below 2^32. */
  firstLeftRow?: number;
  /** Probe bound of this call's requests, as LookupOptions.maxProbeCount. */
  maxProbeCount?: number;
}

export interface AggregateOptions extends StreamOptions {
  op?: AggregateOp;
  /** Output rows; keys >= groups are ignored. */
  groups: number;
  /**
   * Values (not for count): a Float32Array or numbers aggregate in float32; the
   * other typed arrays in their own type (AggregateResult.values). A bigint in a
   * plain array, or any other input, is a DtypeError.
   */
  values?: AggregateValues;
  /** Nonzero/true includes the row. */
  mask?: U32Input | Uint8Array | ReadonlyArray<boolean>;
  /**
   * One flag per value, 0/false = null (not for count): a null value does not
   * contribute to its group (sum, min, max, mean, contributingRows). Typed values
   * send it as typed_values.validity; float32 values as part of the mask.
   */
  valid?: Uint8Array | ReadonlyArray<boolean | number>;
  /** Also return AggregateResult.contributingRows (exact uint64 rows per group). */
  contributingRows?: boolean;
}

export interface HashOptions extends StreamOptions {
  bits?: 32 | 64;
}

// ---------------------------------------------------------------- client

export declare class Client {
  /** Does not connect; the first call asks GetServerInfo and sizes the channel by it. */
  constructor(target?: string, options?: ClientOptions);
  readonly target: string;
  /** After the first call: the message sizes and window the client uses. */
  readonly limits: {maxMessageBytes: number; receiveMessageBytes: number; maxInflight: number;
                    maxMutationRows: number; maxResultBytes: number} | null;
  close(): void;

  serverInfo(opts?: CallOptions): Promise<ServerInfo>;
  list(opts?: CallOptions): Promise<IndexInfo[]>;
  describe(name: string, opts?: CallOptions): Promise<IndexInfo>;
  drop(name: string, opts?: CallOptions): Promise<DropResult>;
  /**
   * Writes the live version of `name` under the server's --data-dir now: to
   * `file`, default "<name>.gjsnap" (the snapshot loaded at start); any other
   * name is a copy, which may not end in ".gjsnap", start with "." or contain
   * ".gjsnap.tmp-" (InvalidArgumentError) and counts against --max-copy-bytes
   * (ResourceExhaustedError). FailedPreconditionError without --data-dir.
   */
  saveIndex(name: string, file?: string, opts?: CallOptions): Promise<{file: string; bytes: number; version: number; seconds: number}>;
  /**
   * Loads `file` under the server's --data-dir (default "<name>.gjsnap") as
   * index `name`; `replace` loads over a live one (else AlreadyExistsError).
   * NotFoundError for a missing file, DataLossError for a corrupt one.
   */
  loadIndex(name: string, file?: string, opts?: CallOptions & {replace?: boolean}): Promise<IndexInfo>;
  /** The snapshots and copies under the server's --data-dir, ordered by name. */
  listFiles(opts?: CallOptions): Promise<DataFile[]>;
  /**
   * Deletes a copy, or the snapshot of an index that is not live, under the
   * server's --data-dir; resolves to its bytes. FailedPreconditionError for a
   * live index's snapshot (drop the index instead), NotFoundError when absent.
   */
  deleteFile(file: string, opts?: CallOptions): Promise<number>;
  buildIndex(name: string, keys: Keys, opts?: BuildOptions): Promise<IndexInfo>;
  /** buildIndex from rows or columns, BuildOptions.key naming the key column(s). */
  buildIndex(name: string, rows: TableInput, opts: BuildOptions & {key: string | string[]}): Promise<IndexInfo>;
  lookup(index: string, keys: Keys, opts?: LookupOptions): Promise<LookupResult>;
  /**
   * Inserts or updates rows of a live index (Mutate): on a lowest_row index a
   * new key is inserted and a present one assigned (the last occurrence in the
   * call wins); on keep_all the rows are appended to their keys' groups.
   * Row-ID indexes give the rows the next row IDs. Keys, values and payload
   * are checked against the index's description (one DescribeIndex call)
   * before anything is sent. An input larger than one request (batchRows, the
   * server's maxMutationRows, the message size) is sent as several, each
   * atomic on its own; after a request the server refuses none is sent, and
   * the error thrown carries `batchId` and `result` (what was applied).
   */
  upsert(index: string, keys: Keys, opts?: UpsertOptions): Promise<MutateResult>;
  /** Deletes keys (every row of each; absent keys are counted in notFoundKeys), as upsert(). */
  delete(index: string, keys: Keys, opts?: StreamOptions): Promise<MutateResult>;
  /** Deletes opts.deleteKeys, then upserts opts.upsertKeys, in one call (one request when it fits). */
  mutate(index: string, opts: MutateOptions): Promise<MutateResult>;
  join(index: string, keys: Keys, opts?: JoinOptions): Promise<JoinResult>;
  /**
   * Streams the batches of `batches` (e.g. a generator parsing a file) through
   * one Lookup stream, yielding one result per batch in order; at most
   * maxInflight batches are pulled ahead of the loop, so memory stays bounded
   * whatever the input's length. Each batch must fit one message. Leaving the
   * loop early cancels the stream and closes the source; an error of the source
   * is thrown as it is, after the results of the batches sent before it.
   */
  lookupBatches(index: string, batches: Iterable<Keys> | AsyncIterable<Keys>,
                opts?: Omit<LookupOptions, 'batchRows' | 'onProgress'>): AsyncGenerator<LookupBatchResult, void, undefined>;
  /**
   * The same for a Join stream: left rows numbered on across batches from
   * firstLeftRow; each batch asks for `capacity` pairs (0: its rows), so a
   * keep_all inner/left batch with more pairs reports overflow with its exact
   * count (join() sizes such batches by a count-only pass instead).
   */
  joinBatches(index: string, batches: Iterable<Keys> | AsyncIterable<Keys>,
              opts?: Omit<JoinOptions, 'batchRows' | 'onProgress'>): AsyncGenerator<JoinBatchResult, void, undefined>;
  aggregate(keys: U32Input, opts: AggregateOptions): Promise<AggregateResult>;
  hash(columns: ColumnInput[], opts?: HashOptions): Promise<HashResult>;
  /**
   * A Query over `input` (checked here: types, equal lengths, unique names):
   * `c.query({id: new Uint32Array([1, 2])}).lookup('ix', {key: 'id', select: ['kind']}).run()`.
   */
  query(input: QueryInput): Query;
}

// ---------------------------------------------------------------- errors

/** Every failure: `code` is the gRPC status code, `message` the server's message. */
export declare class GpujoinError extends Error {
  readonly code: number;
  /** 'INVALID_ARGUMENT', 'NOT_FOUND', ... */
  readonly codeName: string;
  /** In-band errors of a stream: the batch it answered. */
  readonly batchId?: number;
  /** upsert/delete/mutate: what the requests answered before the error applied. */
  readonly result?: MutateResult;
}
export declare class CancelledError extends GpujoinError {}
export declare class UnknownError extends GpujoinError {}
export declare class InvalidArgumentError extends GpujoinError {}
/** A wrong element type or a value outside the column's type, found before sending. */
export declare class DtypeError extends InvalidArgumentError {}
export declare class DeadlineExceededError extends GpujoinError {}
export declare class NotFoundError extends GpujoinError {}
export declare class AlreadyExistsError extends GpujoinError {}
export declare class PermissionDeniedError extends GpujoinError {}
export declare class ResourceExhaustedError extends GpujoinError {}
export declare class FailedPreconditionError extends GpujoinError {}
export declare class AbortedError extends GpujoinError {}
export declare class OutOfRangeError extends GpujoinError {}
export declare class UnimplementedError extends GpujoinError {}
export declare class InternalError extends GpujoinError {}
export declare class UnavailableError extends GpujoinError {}
export declare class DataLossError extends GpujoinError {}
export declare class UnauthenticatedError extends GpujoinError {}
