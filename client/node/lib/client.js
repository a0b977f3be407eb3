'use strict';
// The gpujoin client: one channel to a gpujoind, async methods for every call.
//
// Sizing: the first call asks GetServerInfo for the server's message limit and
// per-stream window, then opens the channel that carries every call with a
// receive limit of the server's message size (gRPC's default is 4 MiB, which a
// 1M-row lookup answer exceeds) and sizes build chunks and batches to fit it.
// Large inputs are split into batches streamed with at most `maxInflight`
// unanswered (builds: unflushed) at a time.
const fs = require('node:fs');
const grpc = require('@grpc/grpc-js');
const {load} = require('./proto');
const {pipeline} = require('./stream');
const {duplex} = require('./batches');
const errors = require('./errors');
const cols = require('./columns');

const {InvalidArgumentError, DtypeError, AbortedError, InternalError, makeError, fromGrpcError} = errors;

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

function indexInfo(i) {
  const s = i.statistics || {};
  return {
    name: i.name, version: i.version, capacity: i.capacity, maxProbeCount: i.max_probe_count,
    firstValue: i.first_value, explicitValues: i.explicit_values, batchMode: i.batch_mode,
    rows: i.rows,
    statistics: {uniqueKeys: s.unique_keys || 0, duplicateRows: s.duplicate_rows || 0,
                 overflowRows: s.overflow_rows || 0, invalidRows: s.invalid_rows || 0,
                 totalProbes: s.total_probes || 0, maxProbes: s.max_probes || 0,
                 maxGroupRows: s.max_group_rows || 0},
    loadFactor: i.load_factor, deviceBytes: i.device_bytes, buildSeconds: i.build_seconds,
    backend: i.backend, builtUnixMillis: i.built_unix_millis,
    keyType: i.key_type === 'KEY_TYPE_UINT64' ? 'uint64' : 'uint32',
    payload: (i.payload || []).map((p) => ({name: p.name, type: cols.typeName(p.type),
                                            nullCount: p.null_count, bytes: p.bytes})),
    payloadBytes: i.payload_bytes,
    duplicates: i.duplicates === 'DUPLICATE_POLICY_KEEP_ALL' ? 'keep_all' : 'lowest_row',
    durableVersion: i.durable_version || 0,
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

function readPem(value, file, what) {
  if (value !== undefined && value !== null) return Buffer.from(value);
  if (file === undefined || file === null) return null;
  try {
    return fs.readFileSync(file);
  } catch (e) {
    throw new errors.NotFoundError(`tls.${what}: cannot read ${file}: ${e.message}`);
  }
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
 * order), statistics, indexVersion}. Throws its in-band error.
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
  };
}

// ---------------------------------------------------------------- join answers

/** Reassembles the messages answering one Join request (JoinResponse.more). */
class JoinAnswer {
  constructor(batches) {
    this.batches = batches;
    this.results = [];
    this.indexVersion = null;
  }

  /** Adds one message; true when it was the last one (`more` unset). */
  add(r) {
    if (this.indexVersion !== null && r.index_version !== this.indexVersion) {
      throw new InternalError(`join answer parts ran on index versions ${this.indexVersion} and ${r.index_version}`);
    }
    this.indexVersion = r.index_version;
    for (const [i, part] of r.results.entries()) {
      const started = this.results.length;
      const continues = started > 0 && part.batch === started - 1;
      if (!continues) {
        if (part.batch !== started || part.first_pair !== 0) {
          throw new InternalError(`join answer holds batch ${part.batch} at pair ${part.first_pair} ` +
                                  `where batch ${started} at pair 0 was expected`);
        }
        if (started > 0) this._checkComplete(started - 1);
        this.results.push({
          left: [], right: [], pairs: 0, count: part.count, capacity: part.capacity,
          overflow: part.overflow, statistics: statistics(part.statistics),
          found: part.found.length ? cols.u8(part.found) : null,
          probes: part.probes.length ? cols.viewAs(Uint32Array, part.probes, 'probes') : null,
          columns: part.columns.map(() => []),
        });
      }
      const b = this.results[this.results.length - 1];
      if (part.first_pair !== b.pairs) {
        throw new InternalError(`join answer continues batch ${part.batch} at pair ${part.first_pair} after ${b.pairs} pairs`);
      }
      const left = cols.viewAs(Uint32Array, part.left_rows, 'left_rows');
      const right = cols.viewAs(Uint32Array, part.right_rows, 'right_rows');
      if (left.length !== right.length) {
        throw new InternalError(`server sent ${left.length} left rows but ${right.length} right rows`);
      }
      if (part.columns.length !== b.columns.length) {
        throw new InternalError(`join answer part of batch ${part.batch} carries ${part.columns.length} columns, its first part ${b.columns.length}`);
      }
      for (const [c, m] of part.columns.entries()) {
        const col = cols.decodeColumn(m, `results[${i}].columns[${c}]`);
        if (col.length !== left.length) {
          throw new InternalError(`server sent column "${col.name}" of ${col.length} rows for ${left.length} pairs`);
        }
        b.columns[c].push(col);
      }
      b.left.push(left);
      b.right.push(right);
      b.pairs += left.length;
    }
    if (r.more) return false;
    if (this.results.length !== this.batches) {
      throw new InternalError(`join answer holds ${this.results.length} batches of ${this.batches}`);
    }
    this._checkComplete(this.results.length - 1);
    return true;
  }

  _checkComplete(batch) {
    const b = this.results[batch];
    const want = Math.min(b.count, b.capacity);
    if (b.pairs !== want) {
      throw new InternalError(`join answer holds ${b.pairs} pairs of batch ${batch}, not min(count ${b.count}, capacity ${b.capacity}) = ${want}`);
    }
  }
}

// ---------------------------------------------------------------- client

class Client {
  /**
   * `target`: host:port of a gpujoind (default 127.0.0.1:50051). Options:
   * tls (false, true = system roots, or {ca, cert, key, caFile, certFile,
   * keyFile, serverName}), token (bearer token sent on every call),
   * maxInflight (batches of a stream sent and not yet answered; default the
   * server's --max-inflight-per-stream), batchRows (rows per batch and build
   * chunk; default 262144, less where a message would not fit), deadlineMs
   * (default per-call deadline; 0 = none), maxMessageBytes (caps the server's
   * limit for what this client sends), channelOptions (passed to grpc-js).
   */
  constructor(target = '127.0.0.1:50051', options = {}) {
    this.target = target;
    this.options = {...options};
    if (options.maxInflight !== undefined) positiveInteger(options.maxInflight, 'maxInflight');
    if (options.batchRows !== undefined) positiveInteger(options.batchRows, 'batchRows');
    const tls = options.tls;
    if (tls) {
      const t = tls === true ? {} : tls;
      this._credentials = grpc.credentials.createSsl(readPem(t.ca, t.caFile, 'ca'), readPem(t.key, t.keyFile, 'key'),
                                                     readPem(t.cert, t.certFile, 'cert'));
    } else {
      this._credentials = grpc.credentials.createInsecure();
    }
    this._channelOptions = {...(options.channelOptions || {})};
    if (tls && tls.serverName) {
      this._channelOptions['grpc.ssl_target_name_override'] = tls.serverName;
      this._channelOptions['grpc.default_authority'] = tls.serverName;
    }
    this._stub = null;
    this._ready = null;
    this.limits = null;
  }

  /** Closes the channel; calls in flight fail with CancelledError or UnavailableError. */
  close() {
    if (this._stub) this._stub.close();
    this._stub = null;
    this._ready = null;
  }

  _metadata() {
    const m = new grpc.Metadata();
    if (this.options.token) m.set('authorization', `Bearer ${this.options.token}`);
    return m;
  }

  _callOptions(opts) {
    const ms = opts.deadlineMs !== undefined ? opts.deadlineMs : this.options.deadlineMs;
    return ms ? {deadline: Date.now() + ms} : {};
  }

  // Opens the data channel sized by GetServerInfo (once; retried after a failure).
  _connect() {
    if (!this._ready) {
      this._ready = (async () => {
        const {GpuJoin} = load();
        const boot = new GpuJoin(this.target, this._credentials, this._channelOptions);
        let info;
        try {
          info = await new Promise((resolve, reject) => {
            boot.GetServerInfo({}, this._metadata(), this._callOptions({}),
                               (e, r) => (e ? reject(fromGrpcError(e)) : resolve(r)));
          });
        } finally {
          boot.close();
        }
        const serverMax = Math.min(Number(info.max_message_bytes) || 256 * 2 ** 20, 2 ** 31 - 1);
        const send = Math.min(serverMax, this.options.maxMessageBytes || Infinity);
        this._stub = new GpuJoin(this.target, this._credentials, {
          ...this._channelOptions,
          'grpc.max_receive_message_length': serverMax,
          'grpc.max_send_message_length': send,
        });
        this.limits = {
          maxMessageBytes: send,
          receiveMessageBytes: serverMax,
          maxInflight: this.options.maxInflight || info.max_inflight_batches_per_stream || 8,
        };
      })();
      this._ready.catch(() => {
        this._ready = null;
      });
    }
    return this._ready;
  }

  async _unary(method, request, opts = {}) {
    await this._connect();
    return new Promise((resolve, reject) => {
      const call = this._stub[method](request, this._metadata(), this._callOptions(opts),
                                      (e, r) => (e ? reject(fromGrpcError(e)) : resolve(r)));
      cancelOn(opts.signal, call);
    });
  }

  _stream(method, opts) {
    const call = this._stub[method](this._metadata(), this._callOptions(opts));
    cancelOn(opts.signal, call);
    return call;
  }

  _inflight(opts) {
    return opts.maxInflight !== undefined ? positiveInteger(opts.maxInflight, 'maxInflight') : this.limits.maxInflight;
  }

  // Rows per batch: the caller's choice, else the default, within what the
  // message limit leaves at `bytesPerRow` (request or answer, whichever is larger).
  _batchRows(opts, bytesPerRow) {
    const asked = opts.batchRows !== undefined ? positiveInteger(opts.batchRows, 'batchRows') : this.options.batchRows;
    if (asked) return asked;
    const room = messageRoom(Math.min(this.limits.maxMessageBytes, this.limits.receiveMessageBytes));
    return Math.max(1, Math.min(DEFAULT_BATCH_ROWS, Math.floor(room / bytesPerRow)));
  }

  // ------------------------------------------------------------ unary calls

  /** GetServerInfo: version, backend, device, memory and limits. */
  async serverInfo(opts = {}) {
    return serverInfo(await this._unary('GetServerInfo', {}, opts));
  }

  /** Every live index, ordered by name. */
  async list(opts = {}) {
    return (await this._unary('ListIndexes', {}, opts)).indexes.map(indexInfo);
  }

  /** One index's description; NotFoundError when it is not live. */
  async describe(name, opts = {}) {
    return indexInfo((await this._unary('DescribeIndex', {name}, opts)).index);
  }

  /** Drops an index: {droppedVersion, freedBytes}; NotFoundError when it is not live. */
  async drop(name, opts = {}) {
    const r = await this._unary('DropIndex', {name}, opts);
    return {droppedVersion: r.dropped_version, freedBytes: r.freed_bytes};
  }

  // ------------------------------------------------------------ snapshots

  /** Writes index `name` to `file` under the server's --data-dir ('' = "<name>.gjsnap"). */
  async saveIndex(name, file = '', opts = {}) {
    const r = await this._unary('SaveIndex', {name, file}, opts);
    return {file: r.file, bytes: r.bytes, version: r.version, seconds: r.seconds};
  }

  /** Loads `file` under the server's --data-dir ('' = "<name>.gjsnap") as index `name`. */
  async loadIndex(name, file = '', opts = {}) {
    return indexInfo((await this._unary('LoadIndex', {name, file, replace: !!opts.replace}, opts)).index);
  }

  /** The snapshots and copies under the server's --data-dir, by name. */
  async listFiles(opts = {}) {
    const r = await this._unary('ListFiles', {}, opts);
    return (r.files || []).map((f) => ({file: f.file, bytes: f.bytes,
                                        modifiedUnixMillis: f.modified_unix_millis,
                                        index: f.index, live: !!f.live}));
  }

  /** Deletes a copy (or the snapshot of an index that is not live); returns its bytes. */
  async deleteFile(file, opts = {}) {
    return (await this._unary('DeleteFile', {file}, opts)).bytes;
  }

  // ------------------------------------------------------------ build

  /**
   * Builds (opts.replace: rebuilds) index `name` from `keys`, streamed in
   * chunks. Returns its description. See index.d.ts BuildOptions.
   */
  async buildIndex(name, keys, opts = {}) {
    let keyType = opts.keyType;
    if (keyType === undefined) {
      const wide = keys instanceof BigUint64Array || keys instanceof BigInt64Array ||
                   (Array.isArray(keys) && keys.some((k) => typeof k === 'bigint'));
      keyType = wide ? 'uint64' : 'uint32';
    }
    if (keyType !== 'uint32' && keyType !== 'uint64') {
      throw new InvalidArgumentError(`keyType: "${keyType}" (expected uint32 or uint64)`);
    }
    const k = cols.toKeys(keys, keyType, 'keys');
    const rows = k.array.length;
    const values = opts.values !== undefined && opts.values !== null ? cols.toU32(opts.values, 'values') : null;
    if (values && values.length !== rows) {
      throw new InvalidArgumentError(`values has ${values.length} rows but keys has ${rows}`);
    }
    const payload = preparePayloads(opts.payload);
    for (const p of payload) {
      if (p.rows !== rows) throw new InvalidArgumentError(`payload column "${p.name}" has ${p.rows} rows but keys has ${rows}`);
    }
    const duplicates = opts.duplicates === undefined ? 'lowest_row' : opts.duplicates;
    if (!DUPLICATES[duplicates]) {
      throw new InvalidArgumentError(`duplicates: "${duplicates}" (expected lowest_row or keep_all)`);
    }
    const spec = {
      name, capacity: opts.capacity || 0, expected_rows: opts.expectedRows || 0,
      target_load_factor: opts.targetLoadFactor || 0, max_probe_count: opts.maxProbeCount || 0,
      first_value: opts.firstValue || 0, explicit_values: values !== null, replace: !!opts.replace,
      wait_durable: !!opts.waitDurable,
      key_type: keyType === 'uint64' ? 'KEY_TYPE_UINT64' : 'KEY_TYPE_UINT32',
      payload: payload.map((p) => ({name: p.name, type: p.wire})),
      duplicates: DUPLICATES[duplicates],
    };

    await this._connect();
    const keyBytes = k.wide ? 8 : 4;
    const size = (pos) => (n) => 64 + n * (keyBytes + (values ? 4 : 0)) +
                                 payload.reduce((s, p) => s + cols.payloadBytes(p, pos, n), 0);
    const chunkRows = opts.chunkRows !== undefined ? positiveInteger(opts.chunkRows, 'chunkRows')
                                                   : this.options.batchRows || DEFAULT_BATCH_ROWS;
    const limit = messageRoom(this.limits.maxMessageBytes);
    const inflight = this._inflight(opts);

    let call;
    let failed = false;
    const response = new Promise((resolve, reject) => {
      call = this._stub.BuildIndex(this._metadata(), this._callOptions(opts), (e, r) => {
        if (e) {
          failed = true;
          reject(fromGrpcError(e));
        } else {
          resolve(r);
        }
      });
    });
    cancelOn(opts.signal, call);
    // Chunks written and not yet flushed to the transport: at most `inflight`.
    let pending = 0;
    let wake = null;
    const flushed = () => {
      --pending;
      if (wake) wake();
    };
    const write = async (msg) => {
      ++pending;
      call.write(msg, flushed);
      while (pending >= inflight && !failed) {
        await Promise.race([new Promise((r) => { wake = r; }), response.catch(() => {})]);
        wake = null;
      }
    };
    try {
      await write({spec});
      let pos = 0;
      do {
        const n = fitRows(size(pos), Math.min(chunkRows, rows - pos), limit);
        if (n === 0 && rows > pos) {
          call.cancel();
          throw new InvalidArgumentError(`row ${pos} needs ${size(pos)(1)} bytes, more than a build chunk holds (${limit})`);
        }
        const chunk = {};
        cols.setKeys(chunk, k, pos, n);
        if (values) chunk.values = cols.u32Message(values, pos, n);
        chunk.payload = payload.map((p) => cols.payloadMessage(p, pos, n));
        await write({chunk});
        pos += n;
      } while (pos < rows && !failed);
      call.end();
    } catch (e) {
      if (!failed) call.cancel();
      response.catch(() => {});
      throw e;
    }
    return indexInfo((await response).index);
  }

  // ------------------------------------------------------------ lookup

  /**
   * Looks up every key of `keys` against `index` in pipelined batches and
   * returns the aligned result. See index.d.ts LookupOptions/LookupResult.
   */
  async lookup(index, keys, opts = {}) {
    await this._connect();
    const info = await this._keyInfo(index, opts);
    const k = cols.toKeys(keys, info.keyType, 'keys');
    const rows = k.array.length;
    const select = opts.select || [];
    const selectBytes = select.reduce((s, c) => s + this._columnRowBytes(info, c), 0);
    const perRow = Math.max(k.wide ? 8 : 4, 5 + (opts.probes ? 4 : 0) + (opts.matchCounts ? 4 : 0) + selectBytes);
    const batchRows = this._batchRows(opts, perRow);
    const batches = rows === 0 ? 1 : Math.ceil(rows / batchRows);
    const one = batches === 1;

    // With one batch the answer's arrays are the result (views); with several
    // they are copied into place as they arrive, so the messages can be freed.
    let values = one ? null : new Uint32Array(rows);
    let found = one ? null : new Uint8Array(rows);
    let probes = opts.probes && !one ? new Uint32Array(rows) : null;
    let matchCounts = opts.matchCounts && !one ? new Uint32Array(rows) : null;
    const columnParts = select.map(() => []);
    const stats = statistics(null);
    let indexVersion = 0;
    let next = 0;
    const call = this._stream('Lookup', opts);
    await pipeline(call, {
      maxInflight: this._inflight(opts),
      progress: opts.onProgress && ((sent, answered) => opts.onProgress({batches, sent, answered})),
      next: () => {
        if (next >= batches) return null;
        const pos = next * batchRows;
        const n = Math.min(batchRows, rows - pos);
        const req = {index, batch_id: next, want_probes: !!opts.probes, want_match_counts: !!opts.matchCounts,
                     max_probe_count: opts.maxProbeCount || 0, select};
        cols.setKeys(req, k, pos, n);
        ++next;
        return req;
      },
      onResponse: (r, b) => {
        const pos = b * batchRows;
        const d = decodeLookup(r, b, Math.min(batchRows, rows - pos), select, opts);
        if (one) {
          ({values, found, probes, matchCounts} = d);
        } else {
          values.set(d.values, pos);
          found.set(d.found, pos);
          if (d.probes) probes.set(d.probes, pos);
          if (d.matchCounts) matchCounts.set(d.matchCounts, pos);
        }
        d.columns.forEach((c, i) => columnParts[i].push(c));
        mergeStatistics(stats, d.statistics);
        if (b > 0 && d.indexVersion !== indexVersion) throw rebuilt(index, 'lookup', indexVersion, d.indexVersion);
        indexVersion = d.indexVersion;
        return true;
      },
    });
    const result = {values, found, statistics: stats, indexVersion,
                    columns: Object.fromEntries(columnParts.map((parts, i) => [select[i], cols.concatColumns(parts)]))};
    if (opts.probes) result.probes = probes;
    if (opts.matchCounts) result.matchCounts = matchCounts;
    return result;
  }

  // The index's key type (and duplicate policy) for the dtype check: opts.keyType
  // skips the DescribeIndex round trip.
  async _keyInfo(index, opts) {
    if (opts.keyType) return {keyType: opts.keyType, payload: []};
    return this.describe(index, opts);
  }

  // About the bytes one row of a selected column takes in an answer.
  _columnRowBytes(info, name) {
    const p = (info.payload || []).find((c) => c.name === name);
    if (!p) return 8;
    const t = cols.TYPES[p.type];
    if (t && t.width) return t.width + 0.125;
    if (p.type === 'bool') return 0.25;
    return 4.125 + 32;  // offsets, validity and a guess at the value bytes
  }

  // ------------------------------------------------------------ join

  /**
   * Joins `keys` (left rows numbered from opts.firstLeftRow, default 0) against
   * `index` in pipelined batches, reassembling answers the server continued
   * over several messages, and returns the pairs of all batches in left order.
   * Inner and left joins on a keep_all index without a capacity run a
   * count-only pass first and then ask each batch for exactly its count. See
   * index.d.ts JoinOptions/JoinResult.
   */
  async join(index, keys, opts = {}) {
    await this._connect();
    const kindName = opts.kind === undefined ? 'inner' : opts.kind;
    const kind = JOIN_KINDS[kindName];
    if (!kind) throw new InvalidArgumentError(`kind: "${kindName}" (expected inner, left, semi or anti)`);
    const info = await this.describe(index, opts);
    const k = cols.toKeys(keys, info.keyType, 'keys');
    const rows = k.array.length;
    const firstLeftRow = opts.firstLeftRow || 0;
    if (!Number.isInteger(firstLeftRow) || firstLeftRow < 0 || firstLeftRow + rows > 2 ** 32) {
      throw new InvalidArgumentError(`left rows ${firstLeftRow} .. ${firstLeftRow} + ${rows} do not fit in uint32`);
    }
    const select = opts.select || [];
    const capacity = opts.capacity || 0;
    const countOnly = !!opts.countOnly;
    const sized = capacity === 0 && !countOnly && info.duplicates === 'keep_all' &&
                  (kind === 'JOIN_KIND_INNER' || kind === 'JOIN_KIND_LEFT_OUTER');
    // The request carries the keys; found and probes must fit in the answer's first message.
    const perRow = Math.max(k.wide ? 8 : 4, (opts.found ? 1 : 0) + (opts.probes ? 4 : 0));
    const batchRows = this._batchRows(opts, perRow);
    const batches = rows === 0 ? (select.length ? 1 : 0) : Math.ceil(rows / batchRows);
    const rowsOf = (b) => Math.min(batchRows, rows - b * batchRows);

    let messages = 0;
    let version = null;
    const pass = async (configure, take) => {
      let next = 0;
      let answer = new JoinAnswer(1);
      await pipeline(this._stream('Join', opts), {
        maxInflight: this._inflight(opts),
        progress: opts.onProgress && ((sent, answered) => opts.onProgress({batches, sent, answered})),
        next: () => {
          if (next >= batches) return null;
          const pos = next * batchRows;
          const left = {first_left_row: firstLeftRow + pos, want_found: !!opts.found, want_probes: !!opts.probes};
          cols.setKeys(left, k, pos, rowsOf(next));
          configure(next, left);
          const req = {index, batch_id: next, batches: [left], select, kind, max_probe_count: opts.maxProbeCount || 0};
          ++next;
          return req;
        },
        onResponse: (r, b) => {
          checkBatch(r, b);
          ++messages;
          // Every batch of both passes must run on one version of the index.
          if (version !== null && r.index_version !== version) throw rebuilt(index, 'join', version, r.index_version);
          version = r.index_version;
          if (!answer.add(r)) return false;
          take(b, answer.results[0], answer.indexVersion);
          answer = new JoinAnswer(1);
          return true;
        },
      });
    };

    const counts = [];
    if (sized) {
      await pass((b, left) => { left.count_only = true; }, (b, res) => { counts[b] = res.count; });
    }
    const out = {left: [], right: [], count: 0, capacity: 0, overflow: false, statistics: statistics(null),
                 found: [], probes: [], columns: select.map(() => []), indexVersion: 0};
    await pass((b, left) => {
      if (countOnly) left.count_only = true;
      // Capacity 0 would mean "the batch's rows": a batch counted empty asks for one pair.
      else if (sized) left.capacity = Math.max(1, Math.min(counts[b], MAX_CAPACITY));
      else left.capacity = capacity;
    }, (b, res, version) => {
      if (sized && res.count > counts[b]) {
        throw new AbortedError(`join of index "${index}": batch ${b} yields ${res.count} pairs, its count pass ` +
                               `${counts[b]}: the index changed between the passes; run the join again`);
      }
      out.left.push(...res.left);
      out.right.push(...res.right);
      out.count += res.count;
      out.capacity += res.capacity;
      out.overflow = out.overflow || res.overflow;
      mergeStatistics(out.statistics, res.statistics);
      if (res.found) out.found.push(res.found);
      if (res.probes) out.probes.push(res.probes);
      res.columns.forEach((parts, i) => out.columns[i].push(...parts));
      out.indexVersion = version;
    });
    const result = {
      leftRows: out.left.length ? cols.concatTyped(Uint32Array, out.left) : new Uint32Array(0),
      rightRows: out.right.length ? cols.concatTyped(Uint32Array, out.right) : new Uint32Array(0),
      count: out.count, capacity: out.capacity, overflow: out.overflow, statistics: out.statistics,
      indexVersion: out.indexVersion, messages,
      columns: Object.fromEntries(select.map((name, i) => [name, cols.concatColumns(out.columns[i])])),
    };
    if (opts.found) result.found = out.found.length ? cols.concatTyped(Uint8Array, out.found) : new Uint8Array(0);
    if (opts.probes) result.probes = out.probes.length ? cols.concatTyped(Uint32Array, out.probes) : new Uint32Array(0);
    return result;
  }

  // ------------------------------------------------------------ streams of batches

  /**
   * Streams batches of keys from `batches` (an iterable or async iterable of
   * Keys, e.g. a generator parsing a file) through one Lookup stream and yields
   * one result per batch, in order: {batch, values, found, probes?,
   * matchCounts?, columns, statistics, indexVersion}. At most opts.maxInflight
   * batches are pulled and not yet taken by the loop, so memory stays bounded
   * by that many batches whatever the input's length. Each batch must fit one
   * message (split larger ones). Leaving the loop early cancels the stream.
   */
  async *lookupBatches(index, batches, opts = {}) {
    await this._connect();
    const info = await this._keyInfo(index, opts);
    const select = opts.select || [];
    async function* items() {
      let b = 0;
      for await (const keys of batches) {
        const k = cols.toKeys(keys, info.keyType, `batches[${b}]`);
        const n = k.array.length;
        const request = {index, batch_id: b, want_probes: !!opts.probes, want_match_counts: !!opts.matchCounts,
                         max_probe_count: opts.maxProbeCount || 0, select};
        cols.setKeys(request, k, 0, n);
        const batch = b++;
        yield {request, add: (r) => {
          const d = decodeLookup(r, batch, n, select, opts);
          const result = {batch, values: d.values, found: d.found, statistics: d.statistics, indexVersion: d.indexVersion,
                          columns: Object.fromEntries(d.columns.map((c, i) => [select[i], c]))};
          if (opts.probes) result.probes = d.probes;
          if (opts.matchCounts) result.matchCounts = d.matchCounts;
          return result;
        }};
      }
    }
    yield* duplex(this._stream('Lookup', opts), items(), this._inflight(opts));
  }

  /**
   * Streams batches of left keys from `batches` (an iterable or async iterable)
   * through one Join stream and yields one result per batch, in order, with
   * answers the server continued over several messages reassembled: {batch,
   * firstLeftRow, leftRows, rightRows, count, capacity, overflow, statistics,
   * found?, probes?, columns, indexVersion, messages}. Left rows are numbered
   * on across batches from opts.firstLeftRow. Each batch asks for opts.capacity
   * pairs (0: its rows); an inner or left join on a keep_all index may yield
   * more, reported as `overflow` with the exact `count` (join() sizes them by a
   * count-only pass instead). Memory and cancellation as lookupBatches.
   */
  async *joinBatches(index, batches, opts = {}) {
    await this._connect();
    const kindName = opts.kind === undefined ? 'inner' : opts.kind;
    const kind = JOIN_KINDS[kindName];
    if (!kind) throw new InvalidArgumentError(`kind: "${kindName}" (expected inner, left, semi or anti)`);
    const info = await this._keyInfo(index, opts);
    const select = opts.select || [];
    let leftRow = opts.firstLeftRow || 0;
    async function* items() {
      let b = 0;
      for await (const keys of batches) {
        const k = cols.toKeys(keys, info.keyType, `batches[${b}]`);
        const n = k.array.length;
        if (leftRow + n > 2 ** 32) throw new InvalidArgumentError(`batch ${b}: left rows ${leftRow} + ${n} do not fit in uint32`);
        const left = {first_left_row: leftRow, capacity: opts.capacity || 0, count_only: !!opts.countOnly,
                      want_found: !!opts.found, want_probes: !!opts.probes};
        cols.setKeys(left, k, 0, n);
        const request = {index, batch_id: b, batches: [left], select, kind, max_probe_count: opts.maxProbeCount || 0};
        const batch = b++;
        const firstLeftRow = leftRow;
        leftRow += n;
        const answer = new JoinAnswer(1);
        let messages = 0;
        yield {request, add: (r) => {
          checkBatch(r, batch);
          ++messages;
          if (!answer.add(r)) return undefined;
          const res = answer.results[0];
          const result = {
            batch, firstLeftRow, leftRows: cols.concatTyped(Uint32Array, res.left),
            rightRows: cols.concatTyped(Uint32Array, res.right), count: res.count, capacity: res.capacity,
            overflow: res.overflow, statistics: res.statistics, indexVersion: answer.indexVersion, messages,
            columns: Object.fromEntries(select.map((name, i) => [name, cols.concatColumns(res.columns[i])])),
          };
          if (opts.found) result.found = res.found || new Uint8Array(0);
          if (opts.probes) result.probes = res.probes || new Uint32Array(0);
          return result;
        }};
      }
    }
    yield* duplex(this._stream('Join', opts), items(), this._inflight(opts));
  }

  // ------------------------------------------------------------ aggregate

  /**
   * Grouped aggregation of `keys` (dense uint32 group keys; keys >= groups are
   * ignored): opts.op ('count', 'sum', 'min', 'max', 'mean'), opts.groups,
   * opts.values (not for count), opts.mask (nonzero includes the row). Batches
   * accumulate on the server; returns the totals {op, groups, rows, valueType,
   * counts (count) | values, ...}.
   *
   * A Float32Array or an array of numbers aggregates in float32 (values: a
   * Float32Array). Int32Array, Uint32Array, BigInt64Array, BigUint64Array and
   * Float64Array values aggregate in their own type (Int8/Int16Array as int32,
   * Uint8/Uint16Array as uint32): integer sums are exact in 64 bits (a
   * BigInt64Array for signed values, BigUint64Array for unsigned, with
   * `overflow`, 1 per group whose exact sum did not fit, and `overflowGroups`),
   * float64 sums a Float64Array, min/max the value type's array with `valid`
   * (integer values: 0 for an empty group, whose value is 0), means a
   * Float64Array. opts.contributingRows adds `contributingRows`, the exact rows
   * of each group as a BigUint64Array (for count too).
   *
   * opts.valid (one flag per value; 0/false = null) marks null values: a null
   * does not contribute to its group (not to the sum, min, max, mean or
   * contributing rows), as SQL's aggregates skip nulls. Typed values send it as
   * the request's validity bitmap; float32 values leave the nulls out through
   * the mask.
   */
  async aggregate(keys, opts = {}) {
    await this._connect();
    const op = opts.op === undefined ? 'count' : opts.op;
    if (!AGGREGATE_OPS[op]) throw new InvalidArgumentError(`op: "${op}" (expected count, sum, min, max or mean)`);
    if (!Number.isInteger(opts.groups) || opts.groups <= 0) {
      throw new InvalidArgumentError(`groups must be a positive integer, got ${opts.groups}`);
    }
    const k = cols.toU32(keys, 'keys');
    const rows = k.length;
    let values = null;
    let valueType = null;
    if (op === 'count') {
      if (opts.values !== undefined && opts.values !== null) throw new InvalidArgumentError('values: count takes no values');
    } else {
      if (opts.values === undefined || opts.values === null) throw new InvalidArgumentError(`values: ${op} needs values`);
      ({type: valueType, array: values} = cols.toAggregateValues(opts.values, 'values'));
      if (values.length !== rows) throw new InvalidArgumentError(`values has ${values.length} rows but keys has ${rows}`);
    }
    const typed = valueType !== null && valueType !== 'float32';
    let mask = null;
    if (opts.mask !== undefined && opts.mask !== null) {
      const m = opts.mask;
      mask = m instanceof Uint8Array || (Array.isArray(m) && typeof m[0] === 'boolean')
        ? Uint32Array.from(m, (x) => (x ? 1 : 0)) : cols.toU32(m, 'mask');
      if (mask.length !== rows) throw new InvalidArgumentError(`mask has ${mask.length} rows but keys has ${rows}`);
    }
    let valid = null;  // typed values: 0 where a value is null (typed_values.validity)
    if (opts.valid !== undefined && opts.valid !== null) {
      if (op === 'count') throw new InvalidArgumentError('valid: count takes no values');
      valid = Uint8Array.from(opts.valid, (x) => (x ? 1 : 0));
      if (valid.length !== rows) throw new InvalidArgumentError(`valid has ${valid.length} rows but keys has ${rows}`);
      if (!typed) {
        // float32 values have no validity on the wire: their nulls are masked out.
        mask = mask ? mask.map((m, i) => (m && valid[i] ? 1 : 0)) : Uint32Array.from(valid);
        valid = null;
      }
    }
    const perRow = 4 + (values ? values.BYTES_PER_ELEMENT : 0) + (mask ? 4 : 0);
    const batchRows = this._batchRows(opts, perRow);
    const batches = rows === 0 ? 1 : Math.ceil(rows / batchRows);
    const wire = typed ? cols.TYPES[valueType].wire : null;
    let next = 0;
    let last = null;
    let total = 0;
    await pipeline(this._stream('Aggregate', opts), {
      maxInflight: this._inflight(opts),
      next: () => {
        if (next >= batches) return null;
        const pos = next * batchRows;
        const n = Math.min(batchRows, rows - pos);
        const req = {op: AGGREGATE_OPS[op], groups: opts.groups, accumulate_only: true, batch_id: next,
                     keys: cols.u32Message(k, pos, n), want_counts64: Boolean(opts.contributingRows)};
        if (typed) {
          req.typed_values = {type: wire, length: n, data: cols.bytesOf(values, pos, n)};
          if (valid && valid.subarray(pos, pos + n).includes(0)) req.typed_values.validity = cols.packBits(valid, pos, n);
        }
        else if (values) req.values = n === 0 ? {values: {v: []}} : {packed: cols.bytesOf(values, pos, n)};
        if (mask) req.mask = cols.u32Message(mask, pos, n);
        ++next;
        return req;
      },
      onResponse: (r, b) => {
        checkBatch(r, b);
        total += r.rows;
        last = r;
        return true;
      },
    });
    const groups = opts.groups;
    const result = {op, groups, rows: total, valueType: op === 'count' ? null : valueType};
    if (op === 'count') {
      result.counts = cols.viewAs(Uint32Array, last.total_counts, 'total_counts');
    } else if (!typed) {
      result.values = cols.viewAs(Float32Array, last.total_values, 'total_values');
    } else {
      if (!last.total_typed_result) throw new InternalError('server sent no total_typed_result for typed values');
      const column = cols.decodeColumn(last.total_typed_result, 'total_typed_result');
      if (column.length !== groups) throw new InternalError(`server sent ${column.length} typed results for ${groups} groups`);
      result.values = column.values;
      const integer = valueType !== 'float64';
      if (integer && (op === 'min' || op === 'max')) {
        result.valid = column.validity ? cols.unpackBits(column.validity, groups) : new Uint8Array(groups).fill(1);
      }
      if (integer && (op === 'sum' || op === 'mean')) {
        const bits = last.total_overflow;
        if (bits.length !== (groups + 7) >> 3) {
          throw new InternalError(`server sent an overflow bitmap of ${bits.length} bytes for ${groups} groups`);
        }
        result.overflow = cols.unpackBits(bits, groups);
        result.overflowGroups = last.total_overflow_groups;
      }
    }
    if (opts.contributingRows) {
      result.contributingRows = cols.viewAs(BigUint64Array, last.total_counts64, 'total_counts64');
      if (result.contributingRows.length !== groups) {
        throw new InternalError(`server sent ${result.contributingRows.length} total_counts64 for ${groups} groups`);
      }
    }
    return result;
  }

  // ------------------------------------------------------------ hash

  /**
   * Row-wise hash of one or more equally long columns into one composite hash
   * per row: each a typed array (Uint32Array, Int32Array, BigUint64Array,
   * BigInt64Array, Float32Array, Float64Array), an array of strings, booleans
   * or Uint8Arrays, or {type, values, valid} (docs/hashing.md: a bool hashes as
   * the byte 0 or 1; strings go as binary, which hashes alike). opts.bits: 64 (default) or 32.
   * Returns {bits, hashes (BigUint64Array or Uint32Array; 0 for null rows),
   * validity (Arrow bitmap, 1 = valid), nullCount}.
   */
  async hash(columns, opts = {}) {
    await this._connect();
    const bits = opts.bits === undefined ? 64 : opts.bits;
    if (bits !== 32 && bits !== 64) throw new InvalidArgumentError(`bits must be 32 or 64, got ${bits}`);
    if (!Array.isArray(columns) || columns.length === 0) throw new InvalidArgumentError('hash needs at least one column');
    const prepared = columns.map((c, i) => cols.preparePayload(`columns[${i}]`, c));
    const rows = prepared[0].rows;
    for (const c of prepared) {
      if (!HASH_TYPES.includes(c.type)) {
        throw new DtypeError(`${c.name}: hash takes ${HASH_TYPES.join(', ')} columns, not ${c.type}`);
      }
      if (c.rows !== rows) throw new InvalidArgumentError(`${c.name} has ${c.rows} rows but columns[0] has ${rows}`);
    }
    const limit = messageRoom(this.limits.maxMessageBytes);
    const batchRows = this._batchRows(opts, bits / 8 + 1);
    // Batch boundaries fitted to the request size (string columns vary).
    const bounds = [];
    for (let pos = 0; pos < rows || bounds.length === 0;) {
      const n = fitRows((m) => 32 + prepared.reduce((s, c) => s + cols.payloadBytes(c, pos, m), 0),
                        Math.min(batchRows, rows - pos), limit);
      if (n === 0 && rows > pos) throw new InvalidArgumentError(`row ${pos} of the hashed columns does not fit in one message (${limit} bytes)`);
      bounds.push([pos, n]);
      pos += n;
      if (rows === 0) break;
    }
    const Hashes = bits === 64 ? BigUint64Array : Uint32Array;
    const hashes = new Hashes(rows);
    const validity = new Uint8Array((rows + 7) >> 3);
    let nullCount = 0;
    let next = 0;
    await pipeline(this._stream('Hash', opts), {
      maxInflight: this._inflight(opts),
      next: () => {
        if (next >= bounds.length) return null;
        const [pos, n] = bounds[next];
        const req = {bits, batch_id: next, columns: prepared.map((c) => {
          const m = cols.payloadMessage(c, pos, n);
          return {type: c.type === 'string' ? 'COLUMN_TYPE_BINARY' : c.wire, data: m.data,
                  offsets: m.offsets || Buffer.alloc(0), validity: m.validity || Buffer.alloc(0), offset: 0, length: n};
        })};
        ++next;
        return req;
      },
      onResponse: (r, b) => {
        checkBatch(r, b);
        const [pos, n] = bounds[b];
        const h = cols.viewAs(Hashes, r.hashes, 'hashes');
        if (h.length !== n) throw new InternalError(`hash batch ${b} answered ${h.length} hashes for ${n} rows`);
        hashes.set(h, pos);
        // An answer without a bitmap has no null rows.
        const all = r.validity.length === 0;
        for (let i = 0; i < n; ++i) {
          if (all || (r.validity[i >> 3] >> (i & 7)) & 1) validity[(pos + i) >> 3] |= 1 << ((pos + i) & 7);
        }
        nullCount += r.null_count;
        return true;
      },
    });
    return {bits, hashes, validity, nullCount};
  }
}

module.exports = {Client, NO_MATCH: cols.NO_MATCH, Column: cols.Column};
