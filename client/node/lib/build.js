'use strict';
// Client#buildIndex: an index built from whole arrays, streamed in chunks that
// fit the server's message limit. Installed on Client.prototype by ./client.
const cols = require('./columns');
const {InvalidArgumentError, fromGrpcError} = require('./errors');
const {buildKeys, setKeys, keyBytes} = require('./keys');
const {splitTable} = require('./rows');
const {DEFAULT_BATCH_ROWS, messageRoom, KEY_TYPES, DUPLICATES, indexInfo, batchBounds, positiveInteger,
  cancelOn, preparePayloads} = require('./messages');

const buildMethods = {
  /**
   * Builds (opts.replace: rebuilds) index `name` from `keys`, streamed in
   * chunks; with opts.key, from rows or columns whose `key` column(s) are the
   * keys and the others the payload (./rows). Returns its description. See
   * index.d.ts BuildOptions.
   */
  async buildIndex(name, keys, opts = {}) {
    if (opts.key !== undefined && opts.key !== null) {
      // Rows or columns with a key column: the other columns are the payload.
      const table = splitTable(keys, opts.key, opts.payload);
      ({keys} = table);
      opts = {...opts, payload: table.payload};
    }
    const {keyType, keyColumns, k} = buildKeys(keys, opts);
    const rows = k.rows;
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
    const placement = opts.placement === undefined ? 'partitioned' : opts.placement;
    if (placement !== 'partitioned' && placement !== 'replicated') {
      throw new InvalidArgumentError(`placement: "${placement}" (expected partitioned or replicated)`);
    }
    const spec = {
      name, capacity: opts.capacity || 0, expected_rows: opts.expectedRows || 0,
      target_load_factor: opts.targetLoadFactor || 0, max_probe_count: opts.maxProbeCount || 0,
      first_value: opts.firstValue || 0, explicit_values: values !== null, replace: !!opts.replace,
      wait_durable: !!opts.waitDurable, max_load_factor: opts.maxLoadFactor || 0,
      key_type: KEY_TYPES[keyType],
      key_columns: keyColumns.map((c) => ({name: c.name, type: cols.TYPES[c.type].wire})),
      payload: payload.map((p) => ({name: p.name, type: p.wire})),
      duplicates: DUPLICATES[duplicates],
      placement: placement === 'replicated' ? 1 : 0,
    };

    await this._connect();
    const size = (pos) => (n) => 64 + keyBytes(k, pos, n) + n * (values ? 4 : 0) +
                                 payload.reduce((s, p) => s + cols.payloadBytes(p, pos, n), 0);
    const chunkRows = opts.chunkRows !== undefined ? positiveInteger(opts.chunkRows, 'chunkRows')
                                                   : this.options.batchRows || DEFAULT_BATCH_ROWS;
    const limit = messageRoom(this.limits.maxMessageBytes);
    // Sized before anything is sent: a row too large for a chunk fails the call here.
    const bounds = batchBounds(rows, chunkRows, size, limit,
                               (pos) => `row ${pos} needs ${size(pos)(1)} bytes, more than a build chunk holds (${limit})`);
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
      for (const [pos, n] of bounds) {
        const chunk = {};
        setKeys(chunk, k, pos, n);
        if (values) chunk.values = cols.u32Message(values, pos, n);
        chunk.payload = payload.map((p) => cols.payloadMessage(p, pos, n));
        await write({chunk});
        if (failed) break;
      }
      call.end();
    } catch (e) {
      if (!failed) call.cancel();
      response.catch(() => {});
      throw e;
    }
    return indexInfo((await response).index);
  },
};

module.exports = {buildMethods};
