'use strict';
// Typed arrays in and out of gpujoin's packed little-endian `bytes`.
//
// In: keys, values, masks and payload columns are checked against the type they
// go into (a Float64Array, a negative number or 2**32 for a uint32 column is a
// DtypeError, never a reinterpretation; integer keys of any integer type are
// checked value by value) and sent as views of the caller's
// memory where the array already has the wire layout.
// Out: packed result bytes arrive as Buffers that are slices of the received
// message at arbitrary offsets. They are viewed in place as the typed array when
// the offset is a multiple of the element size, else copied once.
const os = require('node:os');
const {DtypeError, InvalidArgumentError} = require('./errors');

if (os.endianness() !== 'LE') {
  // Typed arrays use the host's byte order and the wire is little-endian.
  throw new Error('@gpujoin/client needs a little-endian host');
}

const NO_MATCH = 0xffffffff;

// ---------------------------------------------------------------- column types

/** Short names of ColumnType, their wire names, element widths and typed arrays. */
const TYPES = {
  uint32: {wire: 'COLUMN_TYPE_UINT32', width: 4, Array: Uint32Array},
  int32: {wire: 'COLUMN_TYPE_INT32', width: 4, Array: Int32Array},
  uint64: {wire: 'COLUMN_TYPE_UINT64', width: 8, Array: BigUint64Array},
  int64: {wire: 'COLUMN_TYPE_INT64', width: 8, Array: BigInt64Array},
  float32: {wire: 'COLUMN_TYPE_FLOAT32', width: 4, Array: Float32Array},
  float64: {wire: 'COLUMN_TYPE_FLOAT64', width: 8, Array: Float64Array},
  bool: {wire: 'COLUMN_TYPE_BOOL', width: 0, Array: null},
  string: {wire: 'COLUMN_TYPE_STRING', width: 0, Array: null},
  binary: {wire: 'COLUMN_TYPE_BINARY', width: 0, Array: null},
};
const FROM_WIRE = Object.fromEntries(Object.entries(TYPES).map(([k, v]) => [v.wire, k]));

function typeName(wire) {
  return FROM_WIRE[wire] || String(wire).replace(/^COLUMN_TYPE_/, '').toLowerCase();
}

function isVariable(type) {
  return type === 'string' || type === 'binary';
}

function describeValue(x) {
  if (x === null) return 'null';
  if (ArrayBuffer.isView(x)) return x.constructor.name;
  if (Array.isArray(x)) return 'Array';
  return typeof x;
}

// ---------------------------------------------------------------- wire views

/** A Buffer viewing `n` elements of typed array `a` from element `start` (no copy). */
function bytesOf(a, start = 0, n = a.length - start) {
  const w = a.BYTES_PER_ELEMENT;
  return Buffer.from(a.buffer, a.byteOffset + start * w, n * w);
}

/**
 * `buf` (packed little-endian bytes) as a `Type` typed array: a view when its
 * offset is aligned to the element size, else one copy. Throws when the length
 * is not a multiple of the element size (a malformed answer).
 */
function viewAs(Type, buf, field = 'bytes') {
  const w = Type.BYTES_PER_ELEMENT;
  if (buf.length % w !== 0) {
    throw new InvalidArgumentError(`server sent ${field} of ${buf.length} bytes, not a multiple of ${w}`);
  }
  if (buf.byteOffset % w === 0) return new Type(buf.buffer, buf.byteOffset, buf.length / w);
  const out = new Type(buf.length / w);
  new Uint8Array(out.buffer).set(buf);
  return out;
}

/** A plain Uint8Array view of a Buffer (no copy). */
function u8(buf) {
  return new Uint8Array(buf.buffer, buf.byteOffset, buf.length);
}

// ---------------------------------------------------------------- checked conversions in

const U32_MAX = 0xffffffff;
const U64_MAX = (1n << 64n) - 1n;
const I64_MIN = -(1n << 63n);
const I64_MAX = (1n << 63n) - 1n;

function checkInteger(x, lo, hi, what, i) {
  if (typeof x === 'bigint') {
    if (x < BigInt(lo) || x > BigInt(hi)) {
      throw new DtypeError(`${what}[${i}]: ${x} is outside [${lo}, ${hi}]`);
    }
    return Number(x);
  }
  if (typeof x !== 'number' || !Number.isInteger(x) || x < lo || x > hi) {
    throw new DtypeError(`${what}[${i}]: ${describeValue(x) === 'number' ? x : describeValue(x)} is not an integer in [${lo}, ${hi}]`);
  }
  return x;
}

function checkBig(x, lo, hi, what, i) {
  let v;
  if (typeof x === 'bigint') {
    v = x;
  } else if (typeof x === 'number' && Number.isSafeInteger(x)) {
    v = BigInt(x);
  } else {
    throw new DtypeError(`${what}[${i}]: ${typeof x === 'number' ? x : describeValue(x)} is not an integer ` +
                         '(bigint, or a number that is a safe integer)');
  }
  if (v < lo || v > hi) throw new DtypeError(`${what}[${i}]: ${v} is outside [${lo}, ${hi}]`);
  return v;
}

// Integer typed arrays: keys and uint32 columns take any of them, checked by value.
const INTEGER_ARRAYS = [Int8Array, Uint8Array, Uint8ClampedArray, Int16Array, Uint16Array, Int32Array,
  Uint32Array, BigInt64Array, BigUint64Array];
// Those whose every value fits a uint32 (and so a uint64): copied without a check.
const NARROW_UNSIGNED = [Uint8Array, Uint8ClampedArray, Uint16Array, Uint32Array];

/**
 * Integers as a Uint32Array (`wide` false) or a BigUint64Array (`wide` true),
 * every value checked to fit, never wrapped or truncated: an array of the
 * output type as it is (no copy); any other integer typed array (Int8Array ...
 * Int32Array, Uint8Array ..., BigInt64Array, BigUint64Array) or a plain array
 * of integer numbers and bigints value by value (a 64-bit number must be a safe
 * integer). uint32: [0, 2^32 - 1]. uint64: [-2^63, 2^64 - 1], a negative value
 * being an int64 key sent as its two's-complement bit pattern (a BigInt64Array
 * is viewed so, without a copy), as the uint64 key type documents. A value that
 * is not an integer or does not fit is a DtypeError naming the first one and
 * its position (`what[i]`) as `noun` ("a uint32 index key"); Float32Array /
 * Float64Array and other objects are DtypeErrors, `lead` starting the message.
 */
function toUnsigned(a, wide, what, noun, lead = '') {
  const Out = wide ? BigUint64Array : Uint32Array;
  if (a instanceof Out) return a;
  if (wide && a instanceof BigInt64Array) return new BigUint64Array(a.buffer, a.byteOffset, a.length);
  if (!Array.isArray(a) && !INTEGER_ARRAYS.some((T) => a instanceof T)) {
    throw new DtypeError(`${what}: ${lead}expected a ${Out.name}, another integer typed array (Int32Array, ` +
                         `BigInt64Array, ...) or an array of integers, got ${describeValue(a)}`);
  }
  const out = new Out(a.length);
  if (NARROW_UNSIGNED.some((T) => a instanceof T)) {
    if (wide) for (let i = 0; i < a.length; ++i) out[i] = BigInt(a[i]);
    else out.set(a);
    return out;
  }
  const [lo, hi] = wide ? [I64_MIN, U64_MAX] : [0n, BigInt(U32_MAX)];
  const doesNotFit = (i, x) => new DtypeError(
    `${what}[${i}]: ${x} does not fit ${noun} (${!wide && x < 0 ? 'it is negative; ' : ''}${lo} to ${hi}` +
    `${wide ? '; negative keys are int64 bit patterns' : ''})`);
  for (let i = 0; i < a.length; ++i) {
    const x = a[i];
    if (typeof x === 'bigint') {
      if (x < lo || x > hi) throw doesNotFit(i, x);
      out[i] = wide ? BigInt.asUintN(64, x) : Number(x);
    } else if (typeof x === 'number' && (wide ? Number.isSafeInteger(x) : Number.isInteger(x))) {
      if (!wide && (x < 0 || x > U32_MAX)) throw doesNotFit(i, x);
      out[i] = wide ? BigInt.asUintN(64, BigInt(x)) : x;
    } else if (typeof x === 'number' && Number.isInteger(x)) {
      throw new DtypeError(`${what}[${i}]: ${x} is not a safe integer (give 64-bit keys as bigints)`);
    } else {
      throw new DtypeError(`${what}[${i}]: ${typeof x === 'number' ? x : describeValue(x)} is not an integer`);
    }
  }
  return out;
}

/**
 * A uint32 column (values, left rows, masks, group keys): a Uint32Array as it
 * is, or integers (any integer typed array, an array of numbers or bigints)
 * that each fit [0, 2^32 - 1]; anything else is a DtypeError (toUnsigned).
 */
function toU32(a, what) {
  return toUnsigned(a, false, what, 'uint32');
}

// Typed arrays aggregate in their own type; the narrow integers widen as the
// Python client's do (int8/16 -> int32, uint8/16 -> uint32).
const AGGREGATE_ARRAYS = [
  [Float32Array, 'float32'], [Float64Array, 'float64'], [Int32Array, 'int32'], [Uint32Array, 'uint32'],
  [BigInt64Array, 'int64'], [BigUint64Array, 'uint64'], [Int8Array, 'int32'], [Int16Array, 'int32'],
  [Uint8Array, 'uint32'], [Uint8ClampedArray, 'uint32'], [Uint16Array, 'uint32'],
];

/**
 * The values of an aggregation: {type, array}, `array` a typed array of `type`
 * ('float32' for a Float32Array or an array of numbers: the reference float32
 * path; 'float64', 'int32', 'uint32', 'int64', 'uint64' for the typed arrays of
 * those types, sent without a copy; narrower integer arrays widened). Anything
 * else (bigints in a plain array, strings, a DataView) is a DtypeError.
 */
function toAggregateValues(a, what) {
  for (const [Type, type] of AGGREGATE_ARRAYS) {
    if (!(a instanceof Type)) continue;
    const Wire = TYPES[type].Array;
    return {type, array: a instanceof Wire ? a : Wire.from(a)};
  }
  if (Array.isArray(a)) {
    for (let i = 0; i < a.length; ++i) {
      if (typeof a[i] === 'bigint') {
        throw new DtypeError(`${what}[${i}]: a bigint in a plain array; send 64-bit integers as a BigInt64Array ` +
                             'or BigUint64Array (a plain array of numbers aggregates as float32)');
      }
      if (typeof a[i] !== 'number') throw new DtypeError(`${what}[${i}]: ${describeValue(a[i])} is not a number`);
    }
    return {type: 'float32', array: Float32Array.from(a)};
  }
  throw new DtypeError(`${what}: expected a Float32Array, Float64Array, Int32Array, Uint32Array, BigInt64Array, ` +
                       `BigUint64Array or an array of numbers, got ${describeValue(a)}`);
}

/**
 * Keys for an index of key type `keyType` ('uint32' or 'uint64'):
 * {wide: false, array: Uint32Array} or {wide: true, array: BigUint64Array}.
 * A Uint32Array / BigUint64Array of the key type as it is (no copy); any other
 * integer typed array or an array of integers (numbers, bigints) when every
 * value fits the key type, checked by value (toUnsigned): a negative key or
 * 2^32 for a uint32 index is a DtypeError naming the first and its position;
 * a uint64 index takes int64 keys as their bit patterns (a BigInt64Array
 * without a copy). Every other element type is a DtypeError naming the
 * index's key type.
 */
function toKeys(keys, keyType, what = 'keys') {
  const wide = keyType === 'uint64';
  return {wide, array: toUnsigned(keys, wide, what, `a ${keyType} index key`, `the index has ${keyType} keys; `)};
}

/** Sets `msg[field]` (keys) or `msg[field + '64']` from `k` rows [start, start + n). */
function setKeys(msg, k, start, n, field = 'keys') {
  const name = k.wide ? `${field}64` : field;
  // A zero-row column is an empty typed list: empty packed bytes read as "not set".
  msg[name] = n === 0 ? {values: {v: []}} : {packed: bytesOf(k.array, start, n)};
}

/** A U32Column message of `a` rows [start, start + n). */
function u32Message(a, start = 0, n = a.length - start) {
  return n === 0 ? {values: {v: []}} : {packed: bytesOf(a, start, n)};
}

// ---------------------------------------------------------------- bitmaps

/** An Arrow bitmap (LSB first) of rows [start, start + n) of per-row flags `flags` (nonzero = 1). */
function packBits(flags, start, n) {
  const out = Buffer.alloc((n + 7) >> 3);
  for (let i = 0; i < n; ++i) if (flags[start + i]) out[i >> 3] |= 1 << (i & 7);
  return out;
}

/** Per-row 0/1 bytes of the first `n` bits of an Arrow bitmap. */
function unpackBits(bits, n) {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; ++i) out[i] = (bits[i >> 3] >> (i & 7)) & 1;
  return out;
}

// ---------------------------------------------------------------- payload columns in

/**
 * Infers the type of a column given without one: typed arrays by their class,
 * arrays by their first non-null element (string, boolean, Uint8Array = binary,
 * number = float64, bigint = int64). `kind` names the column in errors.
 */
function inferType(values, name, kind = 'payload column') {
  for (const [t, info] of Object.entries(TYPES)) {
    if (info.Array && values instanceof info.Array) return t;
  }
  if (!Array.isArray(values)) {
    throw new DtypeError(`${kind} "${name}": expected a typed array, an array or {type, values}, ` +
                         `got ${describeValue(values)}`);
  }
  const first = values.find((x) => x !== null && x !== undefined);
  if (typeof first === 'string') return 'string';
  if (typeof first === 'boolean') return 'bool';
  if (first instanceof Uint8Array) return 'binary';
  if (typeof first === 'number') return 'float64';
  if (typeof first === 'bigint') return 'int64';
  throw new DtypeError(`${kind} "${name}": cannot infer a type from ${first === undefined ? 'no non-null values' : describeValue(first)}; give {type, values}`);
}

const INT_RANGES = {
  uint32: [0, U32_MAX], int32: [-0x80000000, 0x7fffffff],
};
const BIG_RANGES = {uint64: [0n, U64_MAX], int64: [I64_MIN, I64_MAX]};

/**
 * A payload column ready to be chunked: {name, type, rows, valid (per-row
 * Uint8Array, 1 = valid, or null), fixed (typed array), bools (Uint8Array),
 * items (strings or Uint8Arrays), ends (Float64Array of cumulative value bytes)}.
 * `spec` is a typed array or array (type inferred) or {type, values, valid}.
 * A string column takes strings, or Uint8Arrays as their UTF-8 bytes (sent as
 * they are; the server checks them); a binary column Uint8Arrays, or strings
 * as their UTF-8 bytes. `kind` names the column in errors (key columns share
 * this code).
 */
function preparePayload(name, spec, kind = 'payload column') {
  let values = spec;
  let type;
  let valid = null;
  if (spec && !ArrayBuffer.isView(spec) && !Array.isArray(spec) && typeof spec === 'object') {
    ({values, type} = spec);
    if (spec.valid !== undefined && spec.valid !== null) {
      valid = Uint8Array.from(spec.valid, (v) => (v ? 1 : 0));
    }
  }
  if (type === undefined) type = inferType(values, name, kind);
  const info = TYPES[type];
  if (!info) {
    throw new DtypeError(`${kind} "${name}": unknown type "${type}" (expected ${Object.keys(TYPES).join(', ')})`);
  }
  const what = `${kind} "${name}" (${type})`;
  const col = {name, type, wire: info.wire, rows: values ? values.length : 0, valid, fixed: null, bools: null, items: null, ends: null};
  const nullAt = (i) => {
    if (!col.valid) col.valid = new Uint8Array(col.rows).fill(1);
    col.valid[i] = 0;
  };
  if (info.Array) {
    if (values instanceof info.Array) {
      col.fixed = values;
    } else if (Array.isArray(values)) {
      col.fixed = new info.Array(values.length);
      for (let i = 0; i < values.length; ++i) {
        const x = values[i];
        if (x === null || x === undefined) {
          nullAt(i);
        } else if (type in INT_RANGES) {
          col.fixed[i] = checkInteger(x, ...INT_RANGES[type], what, i);
        } else if (type in BIG_RANGES) {
          col.fixed[i] = checkBig(x, ...BIG_RANGES[type], what, i);
        } else if (typeof x === 'number') {
          col.fixed[i] = x;
        } else {
          throw new DtypeError(`${what}[${i}]: ${describeValue(x)} is not a number`);
        }
      }
    } else {
      throw new DtypeError(`${what}: expected a ${info.Array.name} or an array, got ${describeValue(values)}`);
    }
  } else if (type === 'bool') {
    if (values instanceof Uint8Array) {
      col.bools = values;
    } else if (Array.isArray(values)) {
      col.bools = new Uint8Array(values.length);
      for (let i = 0; i < values.length; ++i) {
        const x = values[i];
        if (x === null || x === undefined) nullAt(i);
        else if (typeof x === 'boolean') col.bools[i] = x ? 1 : 0;
        else throw new DtypeError(`${what}[${i}]: ${describeValue(x)} is not a boolean`);
      }
    } else {
      throw new DtypeError(`${what}: expected an array of booleans or a Uint8Array of 0/1, got ${describeValue(values)}`);
    }
  } else {
    if (!Array.isArray(values)) throw new DtypeError(`${what}: expected an array, got ${describeValue(values)}`);
    col.items = new Array(values.length);
    col.ends = new Float64Array(values.length + 1);
    for (let i = 0; i < values.length; ++i) {
      let x = values[i];
      if (x === null || x === undefined) {
        nullAt(i);
        x = '';
      } else if (!(x instanceof Uint8Array || typeof x === 'string')) {
        throw new DtypeError(`${what}[${i}]: ${describeValue(x)} is not a ${type === 'string' ? 'string' : 'Uint8Array'}`);
      }
      col.items[i] = x;
      col.ends[i + 1] = col.ends[i] + (typeof x === 'string' ? Buffer.byteLength(x, 'utf8') : x.length);
    }
  }
  if (col.valid && col.valid.length !== col.rows) {
    throw new InvalidArgumentError(`${what}: valid has ${col.valid.length} rows, values ${col.rows}`);
  }
  return col;
}

/** Bytes the Column message of rows [start, start + n) of prepared column `c` takes, about. */
function payloadBytes(c, start, n) {
  let bytes = 48 + c.name.length + (c.valid ? (n + 7) >> 3 : 0);
  if (c.fixed) bytes += n * c.fixed.BYTES_PER_ELEMENT;
  else if (c.bools) bytes += (n + 7) >> 3;
  else bytes += c.ends[start + n] - c.ends[start] + 4 * (n + 1);
  return bytes;
}

/** The Column message of rows [start, start + n) of prepared column `c`. */
function payloadMessage(c, start, n) {
  const m = {name: c.name, type: c.wire, length: n};
  if (c.fixed) {
    m.data = bytesOf(c.fixed, start, n);
  } else if (c.bools) {
    m.data = packBits(c.bools, start, n);
  } else {
    const base = c.ends[start];
    const data = Buffer.allocUnsafe(c.ends[start + n] - base);
    const offsets = new Int32Array(n + 1);
    for (let i = 0; i < n; ++i) {
      const x = c.items[start + i];
      const at = c.ends[start + i] - base;
      if (typeof x === 'string') data.write(x, at, 'utf8');
      else data.set(x, at);
      offsets[i + 1] = c.ends[start + i + 1] - base;
    }
    m.data = data;
    m.offsets = bytesOf(offsets);
  }
  if (c.valid) m.validity = packBits(c.valid, start, n);
  return m;
}

// ---------------------------------------------------------------- result columns out

/**
 * A gathered column of a lookup (one row per key) or a join (one row per pair).
 * `values`: a typed array for fixed-width types (Uint32Array, Int32Array,
 * BigUint64Array, BigInt64Array, Float32Array, Float64Array; 0 in null rows),
 * a Uint8Array of 0/1 for bool, and for string/binary an array of strings /
 * Uint8Arrays (decoded on first access; null rows ''). String and binary
 * columns also keep their Arrow form: `data` (the value bytes) and `offsets`
 * (Int32Array, length + 1, from 0). `validity` is the Arrow bitmap (1 = valid)
 * or null when no row is null.
 */
class Column {
  constructor({name, type, length, values = null, data = null, offsets = null, validity = null, nullCount = 0}) {
    this.name = name;
    this.type = type;
    this.length = length;
    this.validity = validity;
    this.nullCount = nullCount;
    this.data = data;
    this.offsets = offsets;
    this._values = values;
  }

  get values() {
    if (this._values === null && isVariable(this.type)) {
      const out = new Array(this.length);
      for (let i = 0; i < this.length; ++i) {
        const s = this.data.subarray(this.offsets[i], this.offsets[i + 1]);
        out[i] = this.type === 'string' ? s.toString('utf8') : s;
      }
      this._values = out;
    }
    return this._values;
  }

  /** True when row i is null (its key missing, no match, or a stored null). */
  isNull(i) {
    return this.validity !== null && ((this.validity[i >> 3] >> (i & 7)) & 1) === 0;
  }

  /** Row i's value (a number, bigint, boolean, string or Uint8Array), or null. */
  get(i) {
    if (this.isNull(i)) return null;
    if (this.type === 'bool') return this.values[i] === 1;
    return this.values[i];
  }

  /** Every row as get(i) gives it. */
  toArray() {
    const out = new Array(this.length);
    for (let i = 0; i < this.length; ++i) out[i] = this.get(i);
    return out;
  }
}

/** A result Column from its message (`field` names it in errors). */
function decodeColumn(m, field) {
  const type = typeName(m.type);
  const info = TYPES[type];
  const length = Number(m.length);
  const validity = m.validity && m.validity.length ? u8(m.validity) : null;
  const base = {name: m.name, type, length, validity, nullCount: Number(m.null_count)};
  if (info && info.Array) {
    const values = viewAs(info.Array, m.data, `${field}.data`);
    if (values.length !== length) throw new InvalidArgumentError(`server sent ${field} with ${values.length} values for ${length} rows`);
    return new Column({...base, values});
  }
  if (type === 'bool') return new Column({...base, values: unpackBits(m.data, length)});
  const offsets = viewAs(Int32Array, m.offsets, `${field}.offsets`);
  if (offsets.length !== length + 1) throw new InvalidArgumentError(`server sent ${field} with ${offsets.length} offsets for ${length} rows`);
  return new Column({...base, data: m.data, offsets});
}

/** One Column of the rows of several parts of the same column, in order (the only part as it is). */
function concatColumns(parts) {
  if (parts.length === 1) return parts[0];
  const first = parts[0];
  const length = parts.reduce((s, p) => s + p.length, 0);
  const nullCount = parts.reduce((s, p) => s + p.nullCount, 0);
  let validity = null;
  if (nullCount > 0) {
    validity = new Uint8Array((length + 7) >> 3);
    let at = 0;
    for (const p of parts) {
      for (let i = 0; i < p.length; ++i, ++at) if (!p.isNull(i)) validity[at >> 3] |= 1 << (at & 7);
    }
  }
  const base = {name: first.name, type: first.type, length, validity, nullCount};
  const info = TYPES[first.type];
  if ((info && info.Array) || first.type === 'bool') {
    const values = new (info.Array || Uint8Array)(length);
    let at = 0;
    for (const p of parts) {
      values.set(p.values, at);
      at += p.length;
    }
    return new Column({...base, values});
  }
  const bytes = parts.reduce((s, p) => s + p.offsets[p.length] - p.offsets[0], 0);
  const data = Buffer.allocUnsafe(bytes);
  const offsets = new Int32Array(length + 1);
  let row = 0;
  let at = 0;
  for (const p of parts) {
    const start = p.offsets[0];
    data.set(p.data.subarray(start, p.offsets[p.length]), at);
    for (let i = 1; i <= p.length; ++i) offsets[row + i] = at + p.offsets[i] - start;
    at += p.offsets[p.length] - start;
    row += p.length;
  }
  return new Column({...base, data, offsets});
}

/** A typed array holding the parts in order (the only part as it is). */
function concatTyped(Type, parts) {
  if (parts.length === 1) return parts[0];
  const out = new Type(parts.reduce((s, p) => s + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

module.exports = {
  NO_MATCH, TYPES, typeName, bytesOf, viewAs, u8, toU32, toAggregateValues, toKeys, setKeys, u32Message,
  packBits, unpackBits, inferType, preparePayload, payloadBytes, payloadMessage, Column, decodeColumn,
  concatColumns, concatTyped, describeValue,
};
