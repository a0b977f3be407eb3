'use strict';
// What the Client's calls share: the batch defaults, the wire enums' tables,
// conversions of answers (statistics, index and server info, lookup batches)
// and small checks of requests and answers.
const cols = require('./columns');
const {InvalidArgumentError, AbortedError, InternalError, makeError} = require('./errors');

const DEFAULT_BATCH_ROWS = 1 << 18;
const MAX_CAPACITY = 2 ** 31;
// Room kept in every message for its fields and headers beside the bulk columns
// (the server keeps min(4096, max / 2) of its limit for framing).
function messageRoom(max) {
  return max - Math.min(8192, Math.floor(max / 2));
}

const JOIN_KINDS = {
  inner: 'JOIN_KIND_INNER', left: 'JOIN_KIND_LEFT_OUTER', left_outer: 'JOIN_KIND_LEFT_OUTER',
  semi: 'JOIN_KIND_LEFT_SEMI', left_semi: 'JOIN_KIND_LEFT_SEMI', anti: 'JOIN_KIND_LEFT_ANTI',
  left_anti: 'JOIN_KIND_LEFT_ANTI',
};
const AGGREGATE_OPS = {count: 'AGGREGATE_OP_COUNT', sum: 'AGGREGATE_OP_SUM', min: 'AGGREGATE_OP_MIN',
                       max: 'AGGREGATE_OP_MAX', mean: 'AGGREGATE_OP_MEAN'};
const KEY_TYPES = {uint32: 'KEY_TYPE_UINT32', uint64: 'KEY_TYPE_UINT64', columns: 'KEY_TYPE_COLUMNS'};
const KEY_TYPES_FROM_WIRE = Object.fromEntries(Object.entries(KEY_TYPES).map(([k, v]) => [v, k]));
const DUPLICATES = {lowest_row: 'DUPLICATE_POLICY_LOWEST_ROW', keep_all: 'DUPLICATE_POLICY_KEEP_ALL'};
const HASH_TYPES = ['uint32', 'int32', 'uint64', 'int64', 'float32', 'float64', 'bool', 'binary', 'string'];

// ---------------------------------------------------------------- message conversions

function statistics(s) {
  return {found: s ? s.found : 0, missing: s ? s.missing : 0, totalProbes: s ? s.total_probes : 0,
          maxProbes: s ? s.max_probes : 0};
}

function mergeStatistics(a, b) {
  a.found += b.found;
  a.missing += b.missing;
  a.totalProbes += b.totalProbes;
  a.maxProbes = Math.max(a.maxProbes, b.maxProbes);
}

/** BuildStatistics of a build, or of an index after a Mutate batch. */
function buildStatistics(s) {
  s = s || {};
  return {uniqueKeys: s.unique_keys || 0, duplicateRows: s.duplicate_rows || 0,
          overflowRows: s.overflow_rows || 0, invalidRows: s.invalid_rows || 0,
          totalProbes: s.total_probes || 0, maxProbes: s.max_probes || 0,
          maxGroupRows: s.max_group_rows || 0};
}

function indexInfo(i) {
  return {
    name: i.name, version: i.version, capacity: i.capacity, maxProbeCount: i.max_probe_count,
    firstValue: i.first_value, explicitValues: i.explicit_values, batchMode: i.batch_mode,
    rows: i.rows,
    statistics: buildStatistics(i.statistics),
    loadFactor: i.load_factor, deviceBytes: i.device_bytes, buildSeconds: i.build_seconds,
    backend: i.backend, builtUnixMillis: i.built_unix_millis,
    keyType: KEY_TYPES_FROM_WIRE[i.key_type] || 'uint32',
    keyColumns: (i.key_columns || []).map((c) => ({name: c.name, type: cols.typeName(c.type)})),
    payload: (i.payload || []).map((p) => ({name: p.name, type: cols.typeName(p.type),
                                            nullCount: p.null_count, bytes: p.bytes,
                                            dictionaryValues: p.dictionary_values || 0,
                                            dictionaryBytes: p.dictionary_bytes || 0})),
    payloadBytes: i.payload_bytes,
    duplicates: i.duplicates === 'DUPLICATE_POLICY_KEEP_ALL' ? 'keep_all' : 'lowest_row',
    durableVersion: i.durable_version || 0,
    mutationSequence: i.mutation_sequence || 0,
    maxLoadFactor: i.max_load_factor || 0,
    nextRowId: i.next_row_id || 0,
    rehashes: i.rehashes || 0,
    placement: i.placement === 'INDEX_PLACEMENT_REPLICATED' ? 'replicated' : 'partitioned',
  };
}

function serverInfo(r) {
  return {
    version: r.version, backend: r.backend, deviceName: r.device_name,
    deviceMemoryTotalBytes: r.device_memory_total_bytes, deviceMemoryUsedBytes: r.device_memory_used_bytes,
    deviceMemoryBudgetBytes: r.device_memory_budget_bytes, maxMessageBytes: r.max_message_bytes,
    maxInflightBatchesPerStream: r.max_inflight_batches_per_stream,
    maxInflightBatches: r.max_inflight_batches, indexCount: r.index_count, serving: r.serving,
    maxConcurrentBuilds: r.max_concurrent_builds, maxAggregateGroups: r.max_aggregate_groups,
    maxStagedBytes: r.max_staged_bytes, maxBuildStagedBytes: r.max_build_staged_bytes,
    stagedBytes: r.staged_bytes, maxStreamsPerConnection: r.max_streams_per_connection,
    maxResultBytes: r.max_result_bytes,
    maxPendingResponseBytes: r.max_pending_response_bytes,
    pendingResponseBytes: r.pending_response_bytes,
    maxMutationRows: r.max_mutation_rows || 0,
    walSync: r.wal_sync || '',
  };
}

/** Throws the in-band error of a streamed response (BatchError) as a GpujoinError. */
function checkBatch(r, expectedId) {
  if (r.error && (r.error.code !== 0 || r.error.message)) {
    throw makeError(r.error.code, r.error.message, {batchId: r.batch_id});
  }
  if (r.batch_id !== expectedId) {
    throw new InternalError(`server answered batch ${r.batch_id} where batch ${expectedId} was expected`);
  }
}

/** The most rows n in [1, max] with size(n) <= limit (size grows with n); 0 when one row does not fit. */
function fitRows(size, max, limit) {
  if (max === 0) return 0;
  if (size(max) <= limit) return max;
  if (size(1) > limit) return 0;
  let lo = 1;
  let hi = max;
  while (lo < hi) {
    const mid = lo + Math.ceil((hi - lo) / 2);
    if (size(mid) <= limit) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/**
 * The batches of `rows` rows as [start, rows] pairs: at most `maxRows` rows
 * each, and the most rows whose request fits `limit` bytes (`size(start)(n)`,
 * growing with n; variable-width columns make batches of different lengths).
 * One empty batch [0, 0] for no rows. Throws InvalidArgumentError with
 * `tooBig(start)` when one row alone does not fit.
 */
function batchBounds(rows, maxRows, size, limit, tooBig) {
  if (rows === 0) return [[0, 0]];
  const bounds = [];
  for (let pos = 0; pos < rows;) {
    const n = fitRows(size(pos), Math.min(maxRows, rows - pos), limit);
    if (n === 0) throw new InvalidArgumentError(tooBig(pos));
    bounds.push([pos, n]);
    pos += n;
  }
  return bounds;
}

/** Cancels `call` (CancelledError) when `signal` (an AbortSignal, optional) aborts or has aborted. */
function cancelOn(signal, call) {
  if (!signal) return;
  if (signal.aborted) call.cancel();
  else signal.addEventListener('abort', () => call.cancel(), {once: true});
}

/** The AbortedError of a lookup or join whose batches ran on different versions of the index. */
function rebuilt(index, what, a, b) {
  return new AbortedError(`index "${index}" was rebuilt during the ${what}: its batches ran on versions ` +
                          `${a} and ${b}; run the ${what} again`);
}

function positiveInteger(v, what) {
  if (!Number.isInteger(v) || v <= 0) throw new InvalidArgumentError(`${what} must be a positive integer, got ${v}`);
  return v;
}

/** Payload specs {name: column} or [{name, ...column}] as prepared columns. */
function preparePayloads(payload) {
  if (!payload) return [];
  const entries = Array.isArray(payload) ? payload.map((p) => [p.name, p]) : Object.entries(payload);
  return entries.map(([name, spec]) => cols.preparePayload(name, spec));
}

/**
 * One Lookup answer of `n` keys as typed arrays viewing its bytes:
 * {values, found, probes, matchCounts, columns (Column per selected name, in
 * order), statistics, indexVersion, mutationSequence}. Throws its in-band error.
 */
function decodeLookup(r, b, n, select, opts) {
  checkBatch(r, b);
  const values = cols.viewAs(Uint32Array, r.values, 'values');
  if (values.length !== n || r.found.length !== n) {
    throw new InternalError(`lookup batch ${b} answered ${values.length} values and ${r.found.length} found flags for ${n} keys`);
  }
  if (r.columns.length !== select.length) {
    throw new InternalError(`lookup batch ${b} carries ${r.columns.length} columns for ${select.length} selected`);
  }
  return {
    values, found: cols.u8(r.found),
    probes: opts.probes ? cols.viewAs(Uint32Array, r.probes, 'probes') : null,
    matchCounts: opts.matchCounts ? cols.viewAs(Uint32Array, r.match_counts, 'match_counts') : null,
    columns: r.columns.map((c, i) => cols.decodeColumn(c, `columns[${i}]`)),
    statistics: statistics(r.statistics), indexVersion: r.index_version,
    mutationSequence: r.mutation_sequence || 0,
  };
}

module.exports = {
  DEFAULT_BATCH_ROWS, MAX_CAPACITY, messageRoom, JOIN_KINDS, AGGREGATE_OPS, KEY_TYPES, DUPLICATES, HASH_TYPES,
  statistics, mergeStatistics, buildStatistics, indexInfo, serverInfo, checkBatch, fitRows, batchBounds, cancelOn, rebuilt,
  positiveInteger, preparePayloads, decodeLookup,
};
