'use strict';
// The keys every build, lookup and join sends, in one of two forms:
//  - one integer column, the keys of a uint32 or uint64 index ({wide, array,
//    rows}; ./columns toKeys, the fast path);
//  - key columns, the keys of an index with a key schema (KEY_TYPE_COLUMNS:
//    1 to 8 typed columns of int32, int64, uint32, uint64, string or binary),
//    as {columns, rows}: one column per key column in the schema's order,
//    prepared and encoded by the payload column code of ./columns.
// A null (null/undefined in a plain array, or a 0 in `valid`) in any key
// column never matches. The caller gives key columns as an array or typed
// array (a key of one column) or as an object of columns by name
// ({tenant: ['a', 'b'], order_id: BigInt64Array.from(...)}); a column is
// values or {type, values, valid}, as a payload column.
const cols = require('./columns');
const {DtypeError, InvalidArgumentError} = require('./errors');

const describeValue = cols.describeValue;

const KEY_COLUMN_TYPES = ['int32', 'int64', 'uint32', 'uint64', 'string', 'binary'];
const MAX_KEY_COLUMNS = 8;
/** The key column of keys given as one array without a declared schema. */
const DEFAULT_KEY_COLUMN = 'key';

// A JS string with a lone surrogate has no UTF-8 form: Buffer would send
// U+FFFD in its place, so two different keys would be sent as one.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const wellFormed = String.prototype.isWellFormed ? (s) => s.isWellFormed() : (s) => !LONE_SURROGATE.test(s);

/** True for an object of columns by name (not an array, typed array or Buffer). */
function isColumnObject(keys) {
  return keys !== null && typeof keys === 'object' && !Array.isArray(keys) && !ArrayBuffer.isView(keys);
}

/**
 * True when `keys` can only be key columns: an object of columns, or a plain
 * array whose first non-null element is a string or a Uint8Array.
 */
function looksLikeKeyColumns(keys) {
  if (isColumnObject(keys)) return true;
  if (!Array.isArray(keys)) return false;
  const first = keys.find((x) => x !== null && x !== undefined);
  return typeof first === 'string' || first instanceof Uint8Array;
}

/** "(tenant string, order_id int64)" */
function describeSchema(schema) {
  return `(${schema.map((c) => `${c.name} ${c.type}`).join(', ')})`;
}

function checkCount(n, what) {
  if (n < 1 || n > MAX_KEY_COLUMNS) {
    throw new InvalidArgumentError(`${what}: ${n} key columns; a key has 1 to ${MAX_KEY_COLUMNS}`);
  }
}

function checkKeyType(type, what) {
  if (!KEY_COLUMN_TYPES.includes(type)) {
    throw new DtypeError(`${what}: ${typeof type === 'string' ? `"${type}"` : describeValue(type)} cannot be a key ` +
                         `column type (${KEY_COLUMN_TYPES.join(', ')})`);
  }
}

/**
 * A declared key schema (BuildOptions.keyColumns, LookupOptions.keyColumns):
 * 1 to 8 {name, type} with key types and distinct names, as [{name, type}].
 */
function checkSchema(keyColumns, what = 'keyColumns') {
  if (!Array.isArray(keyColumns)) {
    throw new DtypeError(`${what}: expected an array of {name, type}, got ${describeValue(keyColumns)}`);
  }
  checkCount(keyColumns.length, what);
  const seen = new Map();
  return keyColumns.map((c, i) => {
    if (c === null || typeof c !== 'object' || typeof c.name !== 'string' || c.name === '') {
      throw new DtypeError(`${what}[${i}]: expected {name, type} with a non-empty name, got ${describeValue(c && c.name)} as the name`);
    }
    checkKeyType(c.type, `${what}[${i}] ("${c.name}").type`);
    if (seen.has(c.name)) {
      throw new InvalidArgumentError(`${what}[${i}]: key column "${c.name}" is declared twice (also ${what}[${seen.get(c.name)}])`);
    }
    seen.set(c.name, i);
    return {name: c.name, type: c.type};
  });
}

/** The key type of a key column given without a declared one (`spec`: values or {type, values, valid}). */
function inferKeyType(spec, name, what) {
  const given = isColumnObject(spec) ? spec.type : undefined;
  if (given !== undefined) {
    checkKeyType(given, `${what}: key column "${name}"`);
    return given;
  }
  const values = isColumnObject(spec) ? spec.values : spec;
  const type = cols.inferType(values, name, `${what}: key column`);
  if (KEY_COLUMN_TYPES.includes(type)) return type;
  const hint = type === 'float64' && Array.isArray(values)
    ? '; a plain array of numbers has no integer width: give an Int32Array, Uint32Array, BigInt64Array or ' +
      'BigUint64Array, or declare the column\'s type in keyColumns'
    : '';
  throw new DtypeError(`${what}: key column "${name}" is ${type}, which cannot be a key column ` +
                       `(${KEY_COLUMN_TYPES.join(', ')})${hint}`);
}

/** The schema of keys given without a declared one: one column "key", or the object's columns in order. */
function inferSchema(keys, what) {
  if (!isColumnObject(keys)) return [{name: DEFAULT_KEY_COLUMN, type: inferKeyType(keys, DEFAULT_KEY_COLUMN, what)}];
  const entries = Object.entries(keys);
  checkCount(entries.length, what);
  return entries.map(([name, spec]) => ({name, type: inferKeyType(spec, name, what)}));
}

/**
 * `keys` as the key columns of `schema` ([{name, type}]): {columns, rows}.
 * Throws DtypeError for a missing, unknown or mistyped column and
 * InvalidArgumentError for columns of different lengths, naming the columns.
 */
function columnKeys(keys, schema, what) {
  let specs;
  if (isColumnObject(keys)) {
    for (const name of Object.keys(keys)) {
      if (!schema.some((c) => c.name === name)) {
        throw new DtypeError(`${what}: "${name}" is not a key column; the key is ${describeSchema(schema)}`);
      }
    }
    specs = schema.map((c) => {
      if (!Object.prototype.hasOwnProperty.call(keys, c.name)) {
        throw new DtypeError(`${what}: key column "${c.name}" (${c.type}) is missing; the key is ${describeSchema(schema)}`);
      }
      return keys[c.name];
    });
  } else if (schema.length === 1) {
    specs = [keys];
  } else {
    throw new DtypeError(`${what}: the key has ${schema.length} columns ${describeSchema(schema)}; give an object ` +
                         `of columns by name, not ${describeValue(keys)}`);
  }
  const columns = schema.map((c, i) => {
    let spec = specs[i];
    if (isColumnObject(spec)) {
      if (spec.type !== undefined && spec.type !== c.type) {
        throw new DtypeError(`${what}: key column "${c.name}" is given as ${spec.type}, but the key declares it ${c.type}`);
      }
      spec = {...spec, type: c.type};
    } else {
      spec = {type: c.type, values: spec};
    }
    const col = cols.preparePayload(c.name, spec, `${what}: key column`);
    if (c.type === 'string') {
      col.items.forEach((x, r) => {
        if (typeof x === 'string' && !wellFormed(x)) {
          throw new DtypeError(`${what}: key column "${c.name}" (string)[${r}]: the string has a lone surrogate ` +
                               '(no UTF-8 form; it would be sent as U+FFFD)');
        }
      });
    }
    return col;
  });
  const rows = columns[0].rows;
  for (const c of columns) {
    if (c.rows !== rows) {
      throw new InvalidArgumentError(`${what}: key column "${c.name}" has ${c.rows} rows but key column ` +
                                     `"${columns[0].name}" has ${rows} (every key column has one row per key)`);
    }
  }
  return {columns, rows};
}

/**
 * `keys` for an index of `info` ({keyType, keyColumns}): integer keys
 * {wide, array, rows} for a uint32 or uint64 index, key columns {columns,
 * rows} for a key schema. `what` names the keys in errors.
 */
function toKeys(keys, info, what = 'keys') {
  if (info.keyType === 'columns') return columnKeys(keys, info.keyColumns, what);
  if (isColumnObject(keys)) {
    throw new DtypeError(`${what}: an object of columns, but the index has ${info.keyType} keys; objects of ` +
                         'columns are the keys of an index with key columns (keyColumns)');
  }
  if (looksLikeKeyColumns(keys)) {
    const i = keys.findIndex((x) => x !== null && x !== undefined);
    throw new DtypeError(`${what}[${i}]: ${describeValue(keys[i])} is not a ${info.keyType} key: the index has ` +
                         `${info.keyType} keys; strings and Uint8Arrays are the keys of an index with key columns (keyColumns)`);
  }
  const k = cols.toKeys(keys, info.keyType, what);
  return {...k, rows: k.array.length};
}

/**
 * The keys of a build and the key its spec declares: {keyType, keyColumns,
 * k}. opts.keyType: 'uint32', 'uint64' or 'columns'; absent: columns when
 * opts.keyColumns is given or the keys are strings, Uint8Arrays or an object
 * of columns, uint64 for BigUint64Array/BigInt64Array/bigint keys, else
 * uint32. Without opts.keyColumns a key schema is inferred from the keys.
 */
function buildKeys(keys, opts) {
  const declared = opts.keyColumns !== undefined && opts.keyColumns !== null;
  let keyType = opts.keyType;
  if (keyType === undefined) {
    if (declared || looksLikeKeyColumns(keys)) {
      keyType = 'columns';
    } else {
      const wide = keys instanceof BigUint64Array || keys instanceof BigInt64Array ||
                   (Array.isArray(keys) && keys.some((k) => typeof k === 'bigint'));
      keyType = wide ? 'uint64' : 'uint32';
    }
  }
  if (keyType !== 'uint32' && keyType !== 'uint64' && keyType !== 'columns') {
    throw new InvalidArgumentError(`keyType: "${keyType}" (expected uint32, uint64 or columns)`);
  }
  if (keyType !== 'columns') {
    if (declared) {
      throw new InvalidArgumentError(`keyColumns: ${opts.keyColumns.length} key columns declared but keyType is ` +
                                     `${keyType}; key columns need keyType "columns" (or no keyType)`);
    }
    return {keyType, keyColumns: [], k: toKeys(keys, {keyType}, 'keys')};
  }
  const keyColumns = declared ? checkSchema(opts.keyColumns) : inferSchema(keys, 'keys');
  return {keyType, keyColumns, k: columnKeys(keys, keyColumns, 'keys')};
}

/** Sets the keys of rows [start, start + n) of `k` on a request (keys, keys64 or key_columns). */
function setKeys(msg, k, start, n) {
  if (k.columns) msg.key_columns = k.columns.map((c) => cols.payloadMessage(c, start, n));
  else cols.setKeys(msg, k, start, n);
}

/** About the bytes rows [start, start + n) of `k` take in a request. */
function keyBytes(k, start, n) {
  if (k.columns) return k.columns.reduce((s, c) => s + cols.payloadBytes(c, start, n), 0);
  return n * (k.wide ? 8 : 4);
}

module.exports = {KEY_COLUMN_TYPES, MAX_KEY_COLUMNS, checkSchema, toKeys, buildKeys, setKeys, keyBytes};
