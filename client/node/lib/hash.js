'use strict';
// Client#hash: row-wise hashes of whole columns in pipelined batches. Installed
// on Client.prototype by ./client.
const {pipeline} = require('./stream');
const cols = require('./columns');
const {InvalidArgumentError, DtypeError, InternalError} = require('./errors');
const {messageRoom, HASH_TYPES, checkBatch, batchBounds} = require('./messages');

const hashMethods = {
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
    const bounds = batchBounds(rows, batchRows,
                               (pos) => (m) => 32 + prepared.reduce((s, c) => s + cols.payloadBytes(c, pos, m), 0),
                               limit, (pos) => `row ${pos} of the hashed columns does not fit in one message (${limit} bytes)`);
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
  },
};

module.exports = {hashMethods};
