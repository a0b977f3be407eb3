'use strict';
// Client#aggregate: grouped aggregation of whole arrays in pipelined batches.
// Installed on Client.prototype by ./client.
const {pipeline} = require('./stream');
const cols = require('./columns');
const {InvalidArgumentError, InternalError} = require('./errors');
const {AGGREGATE_OPS, checkBatch} = require('./messages');

const aggregateMethods = {
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
  },
};

module.exports = {aggregateMethods};
