'use strict';
// Client#upsert, Client#delete and Client#mutate: changes to a live index,
// streamed as Mutate requests that each fit a message and the server's
// --max-mutation-rows. Each request is applied atomically; a call whose input
// needs several requests is atomic per request, not as a whole. Requests carry
// the deletes first, then the upserts in input order, so the call's effect is
// one batch's (every delete before any upsert; the last occurrence of a key
// wins on lowest_row, rows append in order on keep_all). Installed on
// Client.prototype by ./client.
const {pipeline} = require('./stream');
const cols = require('./columns');
const {toKeys, setKeys, keyBytes} = require('./keys');
const {InvalidArgumentError, DtypeError, InternalError, makeError, fromGrpcError} = require('./errors');
const {DEFAULT_BATCH_ROWS, messageRoom, fitRows, positiveInteger, buildStatistics} = require('./messages');

/**
 * The requests of `deletes` then `upserts` rows as [deleteStart, deleteEnd,
 * upsertStart, upsertEnd]: at most `maxRows` rows and `limit` bytes each
 * (deleteSize(pos)(n), upsertSize(pos)(n): the bytes of n rows from pos), a
 * request holding the last deletes taking the first upserts. Throws
 * InvalidArgumentError when one row alone does not fit.
 */
function planRequests(deletes, upserts, maxRows, limit, deleteSize, upsertSize) {
  const out = [];
  let d = 0;
  let u = 0;
  while (d < deletes || u < upserts) {
    let budget = limit;
    let rows = maxRows;
    let nd = 0;
    let nu = 0;
    if (d < deletes) {
      nd = fitRows(deleteSize(d), Math.min(rows, deletes - d), budget);
      if (nd === 0) {
        throw new InvalidArgumentError(`deleteKeys: row ${d} needs ${deleteSize(d)(1)} bytes, more than a request holds (${limit})`);
      }
      budget -= deleteSize(d)(nd);
      rows -= nd;
    }
    if (d + nd === deletes && u < upserts && rows > 0) {
      nu = fitRows(upsertSize(u), Math.min(rows, upserts - u), budget);
      if (nu === 0 && nd === 0) {
        throw new InvalidArgumentError(`upsert row ${u} (its key, value and payload) needs ${upsertSize(u)(1)} ` +
                                       `bytes, more than a request holds (${limit})`);
      }
    }
    out.push([d, d + nd, u, u + nu]);
    d += nd;
    u += nu;
  }
  return out;
}

/** The payload columns of an upsert, prepared as the index stores them (every one, required). */
function preparePayload(info, payload, rows) {
  const given = !payload ? new Map()
    : Array.isArray(payload) ? new Map(payload.map((p) => [p.name, p])) : new Map(Object.entries(payload));
  const stored = info.payload || [];
  const listed = stored.length ? `payload: ${stored.map((p) => p.name).join(', ')}` : 'it stores no payload';
  for (const name of given.keys()) {
    if (!stored.some((p) => p.name === name)) {
      throw new InvalidArgumentError(`payload "${name}": index "${info.name}" has no payload column "${name}" (${listed})`);
    }
  }
  if (rows === 0) return [];
  return stored.map((p) => {
    if (!given.has(p.name)) {
      throw new InvalidArgumentError(`payload: column "${p.name}" (${p.type}) of index "${info.name}" is missing; ` +
                                     'an upsert carries every payload column of the index');
    }
    let spec = given.get(p.name);
    if (spec && !ArrayBuffer.isView(spec) && !Array.isArray(spec) && typeof spec === 'object') {
      if (spec.type !== undefined && spec.type !== p.type) {
        throw new DtypeError(`payload "${p.name}": given as ${spec.type}, but index "${info.name}" stores it as ${p.type}`);
      }
      spec = {...spec, type: p.type};
    } else {
      spec = {type: p.type, values: spec};
    }
    const col = cols.preparePayload(p.name, spec);
    if (col.rows !== rows) {
      throw new InvalidArgumentError(`payload column "${p.name}" has ${col.rows} rows but keys has ${rows}`);
    }
    return col;
  });
}

/** Sets delete_keys, delete_keys64 or delete_key_columns of rows [start, start + n) of `k`. */
function setDeleteKeys(msg, k, start, n) {
  if (k.columns) msg.delete_key_columns = k.columns.map((c) => cols.payloadMessage(c, start, n));
  else cols.setKeys(msg, k, start, n, 'delete_keys');
}

function emptyResult(info) {
  return {upsertRows: 0, insertedKeys: 0, updatedKeys: 0, deletedKeys: 0, notFoundKeys: 0, deletedRows: 0,
          rehashes: 0, requests: 0, mutationSequence: info.mutationSequence, indexVersion: info.version,
          capacity: info.capacity, loadFactor: info.loadFactor, statistics: info.statistics, durable: false};
}

/** Adds one applied MutateResponse to a result. */
function addResponse(out, r) {
  out.upsertRows += r.upsert_rows;
  out.insertedKeys += r.inserted_keys;
  out.updatedKeys += r.updated_keys;
  out.deletedKeys += r.deleted_keys;
  out.notFoundKeys += r.not_found_keys;
  out.deletedRows += r.deleted_rows;
  if (r.rehashed) ++out.rehashes;
  out.durable = (out.requests === 0 || out.durable) && !!r.durable;
  ++out.requests;
  out.mutationSequence = r.mutation_sequence;
  out.indexVersion = r.index_version;
  out.capacity = r.capacity;
  out.loadFactor = r.load_factor;
  out.statistics = buildStatistics(r.statistics);
}

const mutateMethods = {
  /**
   * Inserts or updates rows of live index `index` (see index.d.ts
   * MutateOptions/MutateResult): keys as lookup() takes them, opts.values one
   * per key (explicit-value indexes only), opts.payload every payload column.
   */
  async upsert(index, keys, opts = {}) {
    return this.mutate(index, {...opts, upsertKeys: keys});
  },

  /** Deletes keys (every row of each) from live index `index`; absent keys are counted. */
  async delete(index, keys, opts = {}) {
    return this.mutate(index, {...opts, deleteKeys: keys});
  },

  /** Deletes opts.deleteKeys, then upserts opts.upsertKeys (values, payload) in one call. */
  async mutate(index, opts = {}) {
    await this._connect();
    const info = await this.describe(index, opts);
    const up = opts.upsertKeys !== undefined && opts.upsertKeys !== null ? toKeys(opts.upsertKeys, info, 'upsertKeys') : null;
    const del = opts.deleteKeys !== undefined && opts.deleteKeys !== null ? toKeys(opts.deleteKeys, info, 'deleteKeys') : null;
    const upserts = up ? up.rows : 0;
    const deletes = del ? del.rows : 0;
    let values = null;
    if (opts.values !== undefined && opts.values !== null) {
      if (!info.explicitValues) {
        throw new InvalidArgumentError(`values: index "${index}" has row-ID values (built without explicit values): ` +
                                       `upserted rows get the next row IDs (from ${info.nextRowId}); pass no values`);
      }
      values = cols.toU32(opts.values, 'values');
      if (values.length !== upserts) throw new InvalidArgumentError(`values has ${values.length} rows but keys has ${upserts}`);
    } else if (info.explicitValues && upserts > 0) {
      throw new InvalidArgumentError(`values: index "${index}" has explicit values: give one uint32 value per upsert key`);
    }
    const payload = preparePayload(info, opts.payload, upserts);
    if (upserts + deletes === 0) return emptyResult(info);

    let maxRows = opts.batchRows !== undefined ? positiveInteger(opts.batchRows, 'batchRows')
                                               : this.options.batchRows || DEFAULT_BATCH_ROWS;
    if (this.limits.maxMutationRows) maxRows = Math.min(maxRows, this.limits.maxMutationRows);
    const limit = messageRoom(this.limits.maxMessageBytes);
    const plan = planRequests(deletes, upserts, maxRows, limit,
                              (pos) => (n) => 32 + keyBytes(del, pos, n),
                              (pos) => (n) => 64 + keyBytes(up, pos, n) + (values ? 4 * n : 0) +
                                              payload.reduce((s, p) => s + cols.payloadBytes(p, pos, n), 0));

    const out = emptyResult(info);
    let first = null;  // the first request the server refused
    let next = 0;
    try {
      await pipeline(this._stream('Mutate', opts), {
        maxInflight: this._inflight(opts),
        progress: opts.onProgress && ((sent, answered) => opts.onProgress({batches: plan.length, sent, answered})),
        next: () => {
          // After a refused request no further one is sent.
          if (next >= plan.length || first) return null;
          const [d0, d1, u0, u1] = plan[next];
          const req = {index, batch_id: next};
          if (u1 > u0) {
            setKeys(req, up, u0, u1 - u0);
            if (values) req.values = cols.u32Message(values, u0, u1 - u0);
            req.payload = payload.map((p) => cols.payloadMessage(p, u0, u1 - u0));
          }
          if (d1 > d0) setDeleteKeys(req, del, d0, d1 - d0);
          ++next;
          return req;
        },
        onResponse: (r, b) => {
          if (r.batch_id !== b) throw new InternalError(`server answered batch ${r.batch_id} where batch ${b} was expected`);
          if (r.error && (r.error.code !== 0 || r.error.message)) {
            if (!first) first = makeError(r.error.code, r.error.message, {batchId: b});
          } else {
            addResponse(out, r);
          }
          return true;
        },
      });
    } catch (e) {
      const error = fromGrpcError(e);
      error.result = out;  // what the requests answered before applied
      throw error;
    }
    if (first) {
      first.result = out;
      throw first;
    }
    return out;
  },
};

module.exports = {mutateMethods, planRequests};
